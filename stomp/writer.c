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

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Nonzero when one of the 8 bytes of x is c (exact as a boolean). */
static inline uint64_t has_byte(uint64_t x, unsigned char c)
{
	uint64_t y = x ^ (ONES * c);
	return (y - ONES) & ~y & HIGHS;
}

char *stomp_put_escaped(char *w, const char *s, size_t n, bool esc)
{
	if (!esc)
		return stomp_put(w, s, n);
	size_t i = 0;
	/* 8 bytes at a time while none needs an escape (a content type, a
	 * destination): as many bytes out as in, within what the caller
	 * reserved (stomp_escaped_max) */
	for (; i + 8 <= n; i += 8) {
		uint64_t x;
		memcpy(&x, s + i, 8);
		if (has_byte(x, '\\') | has_byte(x, '\n') | has_byte(x, '\r') | has_byte(x, ':'))
			break;
		memcpy(w, &x, 8);
		w += 8;
	}
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

/* Decimal digits of v without a division per digit: floor(log10) from the
 * bit length (1233 / 4096 ~ log10(2)), corrected by one comparison. */
static inline unsigned u64_digits(uint64_t v)
{
	static const uint64_t p10[20] = {
		1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
		100000000ull, 1000000000ull, 10000000000ull, 100000000000ull,
		1000000000000ull, 10000000000000ull, 100000000000000ull,
		1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
		1000000000000000000ull, 10000000000000000000ull,
	};
	unsigned t = ((unsigned)(64 - __builtin_clzll(v | 1)) * 1233) >> 12;
	return t + ((v | 1) >= p10[t]);   /* v | 1: 0 has one digit */
}

unsigned stomp_u64_digits(uint64_t v)
{
	return u64_digits(v);
}

size_t stomp_pad_count(size_t flen, size_t blen, unsigned cln, size_t target, unsigned *dd)
{
	*dd = 0;
	if (target <= flen)
		return 0;
	size_t n = target - flen;
	while (n > 0 && flen + n + u64_digits(blen + n) - cln > target)
		n--;
	while (flen + n + u64_digits(blen + n) - cln < target)
		n++;
	*dd = u64_digits(blen + n) - cln;
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
	unsigned n = u64_digits(v);
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
