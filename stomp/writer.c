/* stomp/writer.c - STOMP 1.2 frame writer.
 *
 * Appends whole frames to a caller-owned struct vd_buf: one reservation for
 * the worst case, then straight stores (no printf).  Header names and values
 * are escaped except on CONNECT/STOMP/CONNECTED; every frame with a body
 * carries content-length (a caller-supplied content-length header is dropped
 * in favour of the real one). */
#include "stomp.h"
#include "internal.h"

#include <string.h>

char *stomp_put_escaped(char *w, const char *s, size_t n, bool esc)
{
	if (!esc)
		return stomp_put(w, s, n);
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		switch (c) {
		case '\\': *w++ = '\\'; *w++ = '\\'; break;
		case '\n': *w++ = '\\'; *w++ = 'n'; break;
		case '\r': *w++ = '\\'; *w++ = 'r'; break;
		case ':': *w++ = '\\'; *w++ = 'c'; break;
		default: *w++ = c; break;
		}
	}
	return w;
}

char *stomp_put_u64(char *w, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*w++ = tmp[--n];
	return w;
}

static bool is_content_length(const struct stomp_header *h, size_t nlen)
{
	return nlen == 14 && !memcmp(h->name, "content-length", 14);
}

void stomp_write_frame(struct vd_buf *out, enum stomp_cmd cmd,
		       const struct stomp_header *hdr, unsigned nhdr,
		       const void *body, size_t len)
{
	const char *name = stomp_cmd_name(cmd);
	size_t cl = strlen(name);
	bool esc = stomp_cmd_escapes(cmd);
	size_t need = cl + 1 + 1 + 1;  /* command EOL, blank line, NUL */
	for (unsigned i = 0; i < nhdr; i++) {
		if (!hdr[i].value)
			continue;
		size_t nl = hdr[i].nlen ? hdr[i].nlen : strlen(hdr[i].name);
		need += stomp_escaped_max(nl) + 1 + stomp_escaped_max(hdr[i].vlen) + 1;
	}
	if (body)
		need += sizeof("content-length:") + 20 + len;
	buf_reserve(out, need);
	char *w = out->data + out->len;
	w = stomp_put(w, name, cl);
	*w++ = '\n';
	for (unsigned i = 0; i < nhdr; i++) {
		const struct stomp_header *h = &hdr[i];
		if (!h->value)
			continue;
		size_t nl = h->nlen ? h->nlen : strlen(h->name);
		if (body && is_content_length(h, nl))
			continue;
		w = stomp_put_escaped(w, h->name, nl, esc);
		*w++ = ':';
		w = stomp_put_escaped(w, h->value, h->vlen, esc);
		*w++ = '\n';
	}
	if (body) {
		w = STOMP_PUT_LIT(w, "content-length:");
		w = stomp_put_u64(w, len);
		*w++ = '\n';
	}
	*w++ = '\n';
	if (body && len)
		w = stomp_put(w, body, len);
	*w++ = '\0';
	out->len = (size_t)(w - out->data);
}
