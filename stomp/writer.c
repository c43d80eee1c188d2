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

static const unsigned char esc_char[256] = {
	['\\'] = '\\', ['\n'] = 'n', ['\r'] = 'r', [':'] = 'c',
};

char *stomp_put_escaped(char *w, const char *s, size_t n, bool esc)
{
	if (!esc)
		return stomp_put(w, s, n);
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && !esc_char[(unsigned char)s[j]])
			j++;
		w = stomp_put(w, s + i, j - i);
		if (j == n)
			break;
		*w++ = '\\';
		*w++ = (char)esc_char[(unsigned char)s[j]];
		i = j + 1;
	}
	return w;
}

unsigned stomp_u64_digits(uint64_t v)
{
	unsigned n = 1;
	for (; v >= 10; v /= 10)
		n++;
	return n;
}

size_t stomp_pad_count(size_t flen, size_t blen, unsigned cln, size_t target, unsigned *dd)
{
	*dd = 0;
	if (target <= flen)
		return 0;
	size_t n = target - flen;
	while (n > 0 && flen + n + stomp_u64_digits(blen + n) - cln > target)
		n--;
	while (flen + n + stomp_u64_digits(blen + n) - cln < target)
		n++;
	*dd = stomp_u64_digits(blen + n) - cln;
	return n;
}

bool stomp_ct_is_json(const char *v, size_t n)
{
	static const char t[] = "application/json";
	return n >= sizeof(t) - 1 && !memcmp(v, t, sizeof(t) - 1) &&
	       (n == sizeof(t) - 1 || v[sizeof(t) - 1] == ';');
}

char *stomp_put_u64(char *w, uint64_t v)
{
	static const char d2[] =
		"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	unsigned n = 1;
	for (uint64_t t = v; t >= 10; t /= 10)
		n++;
	char *e = w + n;
	while (v >= 100) {
		unsigned r = (unsigned)(v % 100) * 2;
		v /= 100;
		*--e = d2[r + 1];
		*--e = d2[r];
	}
	if (v >= 10) {
		*--e = d2[v * 2 + 1];
		*--e = d2[v * 2];
	} else {
		*--e = (char)('0' + v);
	}
	return w + n;
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
