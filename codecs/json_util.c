/* codecs/json_util.c - number conversion and formatting, UTF-8 checks, string
 * unescaping and the tree builder's scratch stacks, shared by the codecs. */
#include "codec_int.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

/* --- tree builder ------------------------------------------------------- */

void tb_init(struct tree_builder *t, struct vd_arena *a, unsigned max_depth)
{
	t->a = a;
	t->depth = 0;
	t->max_depth = max_depth;
	t->done = false;
	t->root.type = VD_NULL;
	t->vals = t->vals_in;
	t->mems = t->mems_in;
	t->frames = t->frames_in;
	t->nvals = t->nmems = 0;
	t->capvals = t->capmems = t->capframes = TB_INLINE;
}

void tb_fini(struct tree_builder *t)
{
	if (t->vals != t->vals_in)
		free(t->vals);
	if (t->mems != t->mems_in)
		free(t->mems);
	if (t->frames != t->frames_in)
		free(t->frames);
	t->vals = t->vals_in;
	t->mems = t->mems_in;
	t->frames = t->frames_in;
}

void *tb_grow(void *p, size_t *cap, size_t elsz, const void *inline_buf)
{
	size_t ncap = *cap * 2;
	void *q;
	if (p == inline_buf) {
		q = xmalloc(ncap * elsz);
		memcpy(q, p, *cap * elsz);
	} else {
		q = xrealloc(p, ncap * elsz);
	}
	*cap = ncap;
	return q;
}

const char vd_reason_too_many_values[] = "more values than max_elements";

/* The end of the string whose opening quote precedes p: just past its
 * closing quote, or end.  Every byte is looked at once: the closing quote
 * is searched for again only when an escape took the one found (issue 27:
 * searching it again after every backslash made a string of escapes cost
 * O(n^2), 44 s of the loop for 2 MiB of "\\n"). */
static const char *skip_string(const char *p, const char *end, size_t *escapes)
{
	const char *q = memchr(p, '"', (size_t)(end - p));
	const char *stop = q ? q : end;   /* unterminated: its escapes count too */
	for (;;) {
		const char *b = memchr(p, '\\', (size_t)(stop - p));
		if (!b)
			return q ? q + 1 : end;
		(*escapes)++;
		if (end - b <= 2)
			return end;   /* the escape runs to the end */
		p = b + 2;        /* past the escaped byte */
		while (p < stop && *p == '\\' && end - p > 2) {
			p += 2;   /* back-to-back escapes: no call each */
			(*escapes)++;
		}
		if (p > stop) {   /* the escape was the quote's: the next one */
			q = memchr(p, '"', (size_t)(end - p));
			stop = q ? q : end;
		}
	}
}

size_t cj_count_values(const char *p, size_t n, size_t stop, unsigned max_depth,
		       size_t *escapes)
{
	size_t count = 1, esc = 0;
	unsigned depth = 0;
	const char *end = p + n;
	while (p < end && count <= stop) {
		char c = *p++;
		if (c == ',') {
			count++;
		} else if (c == '[' || c == '{') {
			count++;
			if (++depth > max_depth)
				return 0;  /* the decoder stops at the depth limit, cheaply */
		} else if (c == ']' || c == '}') {
			depth -= depth > 0;
		} else if (c == '"') {
			p = skip_string(p, end, &esc);
		}
	}
	if (escapes)
		*escapes = esc;
	return count;
}

/* --- numbers ------------------------------------------------------------ */

static const double pow10_exact[23] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static inline bool is_digit(char c)
{
	return (unsigned char)(c - '0') < 10;
}

/* Whole groups of 8 decimal digits from p into *m (m = m * 10^8 + group)
 * while *m stays far from overflowing (below 10^11, so the result is below
 * 10^19); *exp10 (fraction digits) goes down by 8 per group.  Returns where
 * it stopped: the per-digit loop of the caller does the rest exactly as
 * before. */
static inline const char *digits8(const char *p, const char *end, uint64_t *m, long *exp10)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	while (end - p >= 8 && *m < 100000000000ull) {
		uint64_t x;
		memcpy(&x, p, 8);   /* little-endian: p[0] in the low byte */
		if ((x & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull ||
		    ((x + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull)
			break;   /* not 8 digits */
		x &= 0x0F0F0F0F0F0F0F0Full;
		x = (x * 10 + (x >> 8)) & 0x00FF00FF00FF00FFull;      /* pairs */
		x = (x * 100 + (x >> 16)) & 0x0000FFFF0000FFFFull;    /* quads */
		x = (x * 10000 + (x >> 32)) & 0xFFFFFFFFull;          /* eight */
		*m = *m * 100000000ull + x;
		if (exp10)
			*exp10 -= 8;
		p += 8;
	}
#endif
	return p;
}

/* Correctly rounded conversion of the validated text s[0..n) by strtod. */
static double slow_strtod(const char *s, size_t n)
{
	char local[128];
	char *tmp = n < sizeof(local) ? local : xmalloc(n + 1);
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	double d = strtod(tmp, NULL);
	if (tmp != local)
		free(tmp);
	return d;
}

const char *cj_number(const char *p, const char *end, struct vd_value *v,
		      const char **reason)
{
	const char *start = p;
	bool neg = false, exact = true, isint = true;
	uint64_t m = 0;
	long exp10 = 0;

	if (*p == '-') {
		neg = true;
		if (++p >= end || !is_digit(*p)) {
			*reason = "digit expected after '-'";
			return NULL;
		}
	}
	if (*p == '0') {
		p++;
		if (p < end && is_digit(*p)) {
			*reason = "leading zero in number";
			return NULL;
		}
	} else if (is_digit(*p)) {
		p = digits8(p, end, &m, NULL);
		while (p < end && is_digit(*p)) {
			unsigned d = (unsigned)(*p - '0');
			if (m < 1844674407370955161u || (m == 1844674407370955161u && d <= 5))
				m = m * 10 + d;
			else
				exact = false;   /* past uint64: strtod converts it */
			p++;
		}
	} else {
		*reason = "invalid number";
		return NULL;
	}
	if (p < end && *p == '.') {
		isint = false;
		p++;
		if (p >= end || !is_digit(*p)) {
			*reason = "digit expected after decimal point";
			return NULL;
		}
		p = digits8(p, end, &m, &exp10);
		while (p < end && is_digit(*p)) {
			if (m <= (UINT64_MAX - 9) / 10) {
				m = m * 10 + (unsigned)(*p - '0');
				exp10--;
			} else if (*p != '0') {
				exact = false;
			}
			p++;
		}
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		isint = false;
		p++;
		bool eneg = false;
		if (p < end && (*p == '+' || *p == '-'))
			eneg = *p++ == '-';
		if (p >= end || !is_digit(*p)) {
			*reason = "digit expected in exponent";
			return NULL;
		}
		long e = 0;
		while (p < end && is_digit(*p)) {
			if (e < 100000)
				e = e * 10 + (*p - '0');
			p++;
		}
		exp10 += eneg ? -e : e;
	}
	if (VD_UNLIKELY(p - start > CJ_MAX_NUMBER_LEN)) {
		/* RFC 8259 section 9 lets us limit precision; glibc's strtod needs
		 * seconds for megabytes of digits, which would stall the loop */
		*reason = "number longer than 1024 characters";
		return NULL;
	}
	if (isint && exact) {
		if (!neg) {
			vd_set_uint(v, m);
			return p;
		}
		if (m <= (uint64_t)INT64_MAX + 1) {
			v->type = VD_INT;
			v->v.i = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
			return p;
		}
	}
	double d;
	if (exact && m <= ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
		d = (double)m;
		d = exp10 < 0 ? d / pow10_exact[-exp10] : d * pow10_exact[exp10];
		if (neg)
			d = -d;
	} else {
		d = slow_strtod(start, (size_t)(p - start));
		if (isinf(d)) {
			*reason = "number out of double range";
			return NULL;
		}
	}
	v->type = VD_DOUBLE;
	v->v.d = d;
	return p;
}

static const char digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

size_t cj_fmt_u64(uint64_t u, char *buf)
{
	char tmp[24];
	char *p = tmp + sizeof(tmp);
	while (u >= 100) {
		unsigned r = (unsigned)(u % 100);
		u /= 100;
		p -= 2;
		memcpy(p, digit_pairs + 2 * r, 2);
	}
	if (u >= 10) {
		p -= 2;
		memcpy(p, digit_pairs + 2 * u, 2);
	} else {
		*--p = (char)('0' + u);
	}
	size_t n = (size_t)(tmp + sizeof(tmp) - p);
	memcpy(buf, p, n);
	return n;
}

size_t cj_fmt_i64(int64_t i, char *buf)
{
	if (i < 0) {
		buf[0] = '-';
		return 1 + cj_fmt_u64((uint64_t)0 - (uint64_t)i, buf + 1);
	}
	return cj_fmt_u64((uint64_t)i, buf);
}

size_t cj_fmt_double(double d, char *buf)
{
	if (!isfinite(d)) {
		memcpy(buf, "null", 4);
		return 4;
	}
	/* An integral double of moderate size: print it exactly, fast. */
	if (fabs(d) < 1e15 && d == (double)(int64_t)d && !(d == 0 && signbit(d))) {
		size_t n = cj_fmt_i64((int64_t)d, buf);
		memcpy(buf + n, ".0", 2);
		return n + 2;
	}
	/* Few decimals (4295012.34): the smallest k such that m = d * 10^k is an
	 * integer below 10^15 with m / 10^k == d exactly.  Both m and 10^k are
	 * exact doubles, so the division is the correctly rounded value of the
	 * decimal text, which therefore reads back to d; with k minimal it is
	 * the shortest, and the same text %.15g would print in this range. */
	double ad = fabs(d);
	if (ad >= 1e-4 && ad < 1e15) {
		for (int k = 1; k <= 17; k++) {
			double scaled = ad * pow10_exact[k];
			if (scaled >= 1e15)
				break;
			double m = nearbyint(scaled);
			if (m / pow10_exact[k] != ad)
				continue;
			uint64_t um = (uint64_t)m, p10 = (uint64_t)pow10_exact[k];
			char *o = buf;
			if (d < 0)
				*o++ = '-';
			o += cj_fmt_u64(um / p10, o);
			*o++ = '.';
			uint64_t frac = um % p10;
			for (int i = k - 1; i >= 0; i--) {
				o[i] = (char)('0' + frac % 10);
				frac /= 10;
			}
			return (size_t)(o + k - buf);
		}
	}
	size_t k = cj_fmt_double_mid(d, buf);
	if (k) {
		/* always fixed notation with a '.' or an integral part only */
		if (!memchr(buf, '.', k)) {
			memcpy(buf + k, ".0", 2);
			k += 2;
		}
		return k;
	}
	int n = 0;
	/* A normal double carries more than 15 significant digits, so when 15
	 * digits read back, %.15g (which drops trailing zeros) is the shortest
	 * form; 16 or 17 digits otherwise.  Subnormals have fewer digits of
	 * precision: search from 1. */
	for (int prec = fabs(d) < DBL_MIN ? 1 : 15; prec <= 17; prec++) {
		n = snprintf(buf, 32, "%.*g", prec, d);
		if (prec == 17 || strtod(buf, NULL) == d)
			break;
	}
	bool looks_double = false;
	for (int i = 0; i < n; i++)
		if (buf[i] == '.' || buf[i] == 'e') {
			looks_double = true;
			break;
		}
	if (!looks_double) {
		memcpy(buf + n, ".0", 2);
		n += 2;
	}
	return (size_t)n;
}

/* --- strings ------------------------------------------------------------ */

size_t cj_utf8_seq(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0];
	size_t avail = (size_t)(end - p);
	if (c < 0xC2)
		return 0;           /* continuation byte or overlong 2-byte lead */
	if (c < 0xE0)
		return avail >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c < 0xF0) {
		if (avail < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
			return 0;
		if (c == 0xE0 && p[1] < 0xA0)
			return 0;   /* overlong */
		if (c == 0xED && p[1] >= 0xA0)
			return 0;   /* UTF-16 surrogate */
		return 3;
	}
	if (c < 0xF5) {
		if (avail < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
		    (p[3] & 0xC0) != 0x80)
			return 0;
		if (c == 0xF0 && p[1] < 0x90)
			return 0;   /* overlong */
		if (c == 0xF4 && p[1] >= 0x90)
			return 0;   /* above U+10FFFF */
		return 4;
	}
	return 0;
}

size_t cj_utf8_check(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	while (p < end) {
		while (end - p >= 8) {
			uint64_t x;
			memcpy(&x, p, 8);
			if (x & 0x8080808080808080ull)
				break;
			p += 8;
		}
		if (p >= end)
			break;
		if (*p < 0x80) {
			p++;
			continue;
		}
		size_t k = cj_utf8_seq(p, end);
		if (!k)
			return (size_t)(p - (const unsigned char *)s);
		p += k;
	}
	return n;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

int cj_unescape(struct vd_arena *a, const char *s, size_t n,
		const char **out, size_t *outlen, size_t *bad, const char **reason)
{
	/* No escape expands: \uXXXX (6 bytes) gives at most 3, a pair (12)
	 * at most 4, so n bytes always suffice. */
	char *o = arena_alloc(a, n + 1), *op = o;
	size_t i = 0;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\') {
			if (i + 1 >= n)
				goto bad_escape;
			char e = s[i + 1];
			switch (e) {
			case '"': *op++ = '"'; break;
			case '\\': *op++ = '\\'; break;
			case '/': *op++ = '/'; break;
			case 'b': *op++ = '\b'; break;
			case 'f': *op++ = '\f'; break;
			case 'n': *op++ = '\n'; break;
			case 'r': *op++ = '\r'; break;
			case 't': *op++ = '\t'; break;
			case 'u': {
				unsigned cp, lo;
				if (n - i < 6 || hex4(s + i + 2, &cp) < 0)
					goto bad_escape;
				if (cp >= 0xDC00 && cp <= 0xDFFF)
					goto lone;
				if (cp >= 0xD800 && cp <= 0xDBFF) {
					if (n - i < 12 || s[i + 6] != '\\' || s[i + 7] != 'u' ||
					    hex4(s + i + 8, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
						goto lone;
					cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					i += 6;
				}
				op += put_utf8(op, cp);
				i += 6;
				continue;
			}
			default:
				goto bad_escape;
			}
			i += 2;
		} else if (c < 0x20) {
			*bad = i;
			*reason = "control character in string";
			return VD_EPROTO;
		} else if (c < 0x80) {
			*op++ = (char)c;
			i++;
		} else {
			size_t k = cj_utf8_seq((const unsigned char *)s + i,
					       (const unsigned char *)s + n);
			if (!k) {
				*bad = i;
				*reason = "invalid UTF-8 in string";
				return VD_EPROTO;
			}
			memcpy(op, s + i, k);
			op += k;
			i += k;
		}
	}
	*op = '\0';
	*out = o;
	*outlen = (size_t)(op - o);
	return 0;
bad_escape:
	*bad = i;
	*reason = "invalid escape in string";
	return VD_EPROTO;
lone:
	*bad = i;
	*reason = "lone UTF-16 surrogate in string";
	return VD_EPROTO;
}
