/* client/output.c - JSON output exactly as Python's
 * json.dumps(v, indent=4, sort_keys=True) (VDSM's vdsm-client output), or
 * json.dumps(v, sort_keys=True) for --compact: ensure_ascii escaping,
 * Python's float repr, ", "/": " separators when compact, "," + newline and
 * ": " when indented, "[]"/"{}" for empty containers.  Duplicate keys keep
 * the last value (as a Python dict would). */
#include "client.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char hexdig[] = "0123456789abcdef";

static void put_u16(struct vd_buf *out, unsigned c)
{
	char e[6] = { '\\', 'u', hexdig[(c >> 12) & 15], hexdig[(c >> 8) & 15],
		      hexdig[(c >> 4) & 15], hexdig[c & 15] };
	buf_append(out, e, 6);
}

/* Decode one UTF-8 sequence at s[0..n); returns its length and sets *cp, or
 * returns 1 with *cp = U+FFFD for an invalid byte. */
static size_t utf8_next(const unsigned char *s, size_t n, unsigned *cp)
{
	unsigned c = s[0];
	size_t len;
	unsigned min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xc2 && c <= 0xdf) {
		len = 2; c &= 0x1f; min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3; c &= 0x0f; min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4; c &= 0x07; min = 0x10000;
	} else {
		*cp = 0xfffd;
		return 1;
	}
	if (len > n)
		goto bad;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto bad;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		goto bad;
	*cp = c;
	return len;
bad:
	*cp = 0xfffd;
	return 1;
}

static void put_string(struct vd_buf *out, const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	buf_reserve(out, n + 2);
	buf_putc(out, '"');
	size_t i = 0;
	while (i < n) {
		size_t run = i;
		while (run < n && s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' && s[run] != '\\')
			run++;
		if (run > i) {
			buf_append(out, s + i, run - i);
			i = run;
			continue;
		}
		unsigned c = s[i];
		switch (c) {
		case '"': buf_append(out, "\\\"", 2); i++; continue;
		case '\\': buf_append(out, "\\\\", 2); i++; continue;
		case '\n': buf_append(out, "\\n", 2); i++; continue;
		case '\r': buf_append(out, "\\r", 2); i++; continue;
		case '\t': buf_append(out, "\\t", 2); i++; continue;
		case '\b': buf_append(out, "\\b", 2); i++; continue;
		case '\f': buf_append(out, "\\f", 2); i++; continue;
		default: break;
		}
		unsigned cp;
		i += utf8_next(s + i, n - i, &cp);
		if (cp >= 0x10000) {
			cp -= 0x10000;
			put_u16(out, 0xd800 | (cp >> 10));
			put_u16(out, 0xdc00 | (cp & 0x3ff));
		} else {
			put_u16(out, cp);
		}
	}
	buf_putc(out, '"');
}

/* Python's repr(float): the shortest digits that round-trip; exponent form
 * when the decimal point position is < -3 or > 16. */
static void put_double(struct vd_buf *out, double d)
{
	if (isnan(d)) {
		buf_puts(out, "NaN");
		return;
	}
	if (isinf(d)) {
		buf_puts(out, d < 0 ? "-Infinity" : "Infinity");
		return;
	}
	char tmp[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	/* tmp: [-]D[.DDD]e[+-]XX */
	char digits[24];
	size_t nd = 0;
	const char *p = tmp;
	bool neg = false;
	if (*p == '-') {
		neg = true;
		p++;
	}
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9' && nd < sizeof(digits) - 1)
			digits[nd++] = *p;
	digits[nd] = 0;
	int exp10 = *p == 'e' ? atoi(p + 1) : 0;
	while (nd > 1 && digits[nd - 1] == '0')
		digits[--nd] = 0;
	int decpt = exp10 + 1;
	if (neg)
		buf_putc(out, '-');
	if (d == 0) {
		buf_puts(out, "0.0");
		return;
	}
	if (decpt > 16 || decpt < -3) {
		buf_putc(out, digits[0]);
		if (nd > 1) {
			buf_putc(out, '.');
			buf_append(out, digits + 1, nd - 1);
		}
		buf_printf(out, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
	} else if (decpt <= 0) {
		buf_puts(out, "0.");
		for (int i = 0; i < -decpt; i++)
			buf_putc(out, '0');
		buf_append(out, digits, nd);
	} else if ((size_t)decpt >= nd) {
		buf_append(out, digits, nd);
		for (size_t i = nd; i < (size_t)decpt; i++)
			buf_putc(out, '0');
		buf_puts(out, ".0");
	} else {
		buf_append(out, digits, (size_t)decpt);
		buf_putc(out, '.');
		buf_append(out, digits + decpt, nd - (size_t)decpt);
	}
}

static void newline(struct vd_buf *out, unsigned level)
{
	buf_putc(out, '\n');
	for (unsigned i = 0; i < level; i++)
		buf_append(out, "    ", 4);
}

static int member_cmp(const void *x, const void *y)
{
	const struct vd_member *a = *(const struct vd_member *const *)x;
	const struct vd_member *b = *(const struct vd_member *const *)y;
	size_t n = VD_MIN(a->klen, b->klen);
	int r = n ? memcmp(a->key, b->key, n) : 0;
	if (r)
		return r;
	if (a->klen != b->klen)
		return a->klen < b->klen ? -1 : 1;
	/* equal keys: keep input order so the last one can win */
	return a < b ? -1 : a > b;
}

static void put_value(struct vd_buf *out, const struct vd_value *v, bool compact, unsigned level)
{
	switch (v->type) {
	case VD_NULL: buf_puts(out, "null"); return;
	case VD_BOOL: buf_puts(out, v->v.b ? "true" : "false"); return;
	case VD_INT: buf_printf(out, "%lld", (long long)v->v.i); return;
	case VD_UINT: buf_printf(out, "%llu", (unsigned long long)v->v.u); return;
	case VD_DOUBLE: put_double(out, v->v.d); return;
	case VD_STRING: put_string(out, v->v.s.ptr, v->v.s.len); return;
	case VD_ARRAY:
		if (v->v.arr.n == 0) {
			buf_puts(out, "[]");
			return;
		}
		buf_putc(out, '[');
		for (size_t i = 0; i < v->v.arr.n; i++) {
			if (i)
				buf_puts(out, compact ? ", " : ",");
			if (!compact)
				newline(out, level + 1);
			put_value(out, &v->v.arr.items[i], compact, level + 1);
		}
		if (!compact)
			newline(out, level);
		buf_putc(out, ']');
		return;
	case VD_OBJECT: {
		size_t n = v->v.obj.n;
		if (n == 0) {
			buf_puts(out, "{}");
			return;
		}
		const struct vd_member **m = xmalloc(n * sizeof(*m));
		for (size_t i = 0; i < n; i++)
			m[i] = &v->v.obj.members[i];
		qsort(m, n, sizeof(*m), member_cmp);
		buf_putc(out, '{');
		bool first = true;
		for (size_t i = 0; i < n; i++) {
			if (i + 1 < n && m[i + 1]->klen == m[i]->klen &&
			    (m[i]->klen == 0 || memcmp(m[i + 1]->key, m[i]->key, m[i]->klen) == 0))
				continue;   /* a later duplicate wins */
			if (!first)
				buf_puts(out, compact ? ", " : ",");
			first = false;
			if (!compact)
				newline(out, level + 1);
			put_string(out, m[i]->key, m[i]->klen);
			buf_append(out, ": ", 2);
			put_value(out, &m[i]->val, compact, level + 1);
		}
		free(m);
		if (!compact)
			newline(out, level);
		buf_putc(out, '}');
		return;
	}
	}
}

void client_json_format(struct vd_buf *out, const struct vd_value *v, bool compact)
{
	put_value(out, v, compact, 0);
}

void client_json_print(FILE *f, const struct vd_value *v, bool compact)
{
	struct vd_buf b = VD_BUF_INIT;
	client_json_format(&b, v, compact);
	buf_putc(&b, '\n');
	fwrite(b.data, 1, b.len, f);
	buf_free(&b);
}
