/* codecs/json_emit.c - our JSON emitter: the streaming writer (struct
 * vd_writer_ops) shared by the fallback and yajl codecs.
 *
 * Output is minified RFC 8259 JSON.  Strings: '"', '\\' and control
 * characters are escaped (\n, \t, ... or \u00XX); bytes that are not
 * well-formed UTF-8 are replaced by U+FFFD so the output is always valid.
 * Doubles use the shortest round-trip text; NaN and infinities become null. */
#include "codec_int.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define NE_HAS 1   /* the container at this depth has an element */
#define NE_OBJ 2   /* the container at this depth is an object */

/* 0: copy as is; 1: needs an escape; 2: first byte of a multibyte sequence */
static const uint8_t esc_class[256] = {
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};

static const char hexdig[] = "0123456789abcdef";

/* Separator before a value.  Returns -1 on misuse (a value where a key is
 * due), else the number of bytes (0 or 1) written at p. */
static inline int value_sep(struct vd_writer *w, char *p)
{
	if (w->after_key) {
		w->after_key = false;
		return 0;
	}
	if (w->depth == 0)
		return 0;
	uint8_t *ne = &w->nonempty[w->depth];
	if (VD_UNLIKELY(*ne & NE_OBJ)) {
		w->error = VD_EINVAL;
		return -1;
	}
	if (*ne & NE_HAS) {
		*p = ',';
		return 1;
	}
	*ne |= NE_HAS;
	return 0;
}

/* Room for a value of up to n bytes, its separator written: where the value
 * goes (out->len already past the separator), or NULL on a misplaced value. */
static inline char *j_slot(struct vd_writer *w, size_t n)
{
	struct vd_buf *out = w->out;
	buf_reserve(out, n + 1);
	int k = value_sep(w, out->data + out->len);
	if (k < 0)
		return NULL;
	out->len += (size_t)k;
	return out->data + out->len;
}

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Nonzero when one of the 8 bytes in x needs an escape or is not ASCII. */
static inline uint64_t swar_special(uint64_t x)
{
	uint64_t q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');
	uint64_t lt = (x - ONES * 0x20) & ~x;          /* byte < 0x20 (or >= 0x80) */
	uint64_t zq = (q - ONES) & ~q, zb = (b - ONES) & ~b;
	return (lt | zq | zb | x) & HIGHS;
}

/* The rest of a string from p, which starts with a byte needing an escape
 * or a non-ASCII byte. */
static __attribute__((noinline)) char *put_escaped_slow(struct vd_buf *out, char *o,
							 const unsigned char *p,
							 const unsigned char *end)
{
	const unsigned char *q = p;
	/* at most 6 output bytes per remaining input byte */
	out->len = (size_t)(o - out->data);
	buf_reserve(out, 6 * (size_t)(end - q) + 2);
	o = out->data + out->len;
	while (q < end) {
		unsigned c = *q;
		switch (esc_class[c]) {
		case 0:
			*o++ = (char)c;
			q++;
			break;
		case 1:
			*o++ = '\\';
			switch (c) {
			case '"': *o++ = '"'; break;
			case '\\': *o++ = '\\'; break;
			case '\n': *o++ = 'n'; break;
			case '\r': *o++ = 'r'; break;
			case '\t': *o++ = 't'; break;
			case '\b': *o++ = 'b'; break;
			case '\f': *o++ = 'f'; break;
			default:
				memcpy(o, "u00", 3);
				o[3] = hexdig[c >> 4];
				o[4] = hexdig[c & 15];
				o += 5;
			}
			q++;
			break;
		default: {
			size_t l = cj_utf8_seq(q, end);
			if (l) {
				memcpy(o, q, l);
				o += l;
				q += l;
			} else {
				memcpy(o, "\xEF\xBF\xBD", 3);   /* U+FFFD */
				o += 3;
				q++;
			}
		}
		}
	}
	return o;
}

/* Nonzero when one of the 4 bytes in x needs an escape or is not ASCII. */
static inline uint32_t swar_special4(uint32_t x)
{
	const uint32_t ones = 0x01010101u, highs = 0x80808080u;
	uint32_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
	uint32_t lt = (x - ones * 0x20) & ~x;
	uint32_t zq = (q - ones) & ~q, zb = (b - ones) & ~b;
	return (lt | zq | zb | x) & highs;
}

/* Copies the longest prefix of s[0..n) (n >= 16) made of whole 16-byte
 * blocks (the last one overlapping) that need no escape; returns its
 * length (n when the whole string is plain). */
static __attribute__((noinline)) size_t put_plain_long(char *o, const char *s, size_t n)
{
	size_t i = 0;
#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
	const __m128i space = _mm_set1_epi8(0x20);
	for (;;) {
		size_t at = n - i > 16 ? i : n - 16;
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + at));
		/* signed: bytes >= 0x80 are below 0x20 too */
		__m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote),
						      _mm_cmpeq_epi8(x, bslash)),
					 _mm_cmplt_epi8(x, space));
		if (_mm_movemask_epi8(m))
			return i;
		_mm_storeu_si128((__m128i *)(void *)(o + at), x);
		if (at != i || i + 16 == n)
			return n;
		i += 16;
	}
#else
	for (; i + 8 <= n; i += 8) {
		uint64_t x;
		memcpy(&x, s + i, 8);
		if (swar_special(x))
			break;
		memcpy(o + i, &x, 8);
	}
	return i;
#endif
}

/* Escaped body of s (no quotes) written at o, inside out; returns the new
 * write position, or NULL when the string needs the slow path from
 * *rest (the part written so far ends at *at).  The caller reserved room
 * for n bytes plus its closing bytes.  Reads only s[0..n). */
static inline __attribute__((always_inline)) char *put_plain(char *o, const char *s, size_t n,
							     const unsigned char **rest, char **at)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	if (VD_UNLIKELY(n >= 64)) {
		/* a long string: out of line, 16 bytes at a time */
		size_t k = put_plain_long(o, s, n);
		o += k;
		p += k;
		if (p == end)
			return o;
		goto bytewise;
	}
	if (n >= 8) {
		/* 8 plain ASCII bytes at a time; the last (partial) chunk is
		 * the overlapping last 8 bytes of the string */
		while (end - p > 8) {
			uint64_t x;
			memcpy(&x, p, 8);
			if (swar_special(x))
				goto bytewise;
			memcpy(o, &x, 8);
			o += 8;
			p += 8;
		}
		uint64_t x;
		memcpy(&x, end - 8, 8);
		if (!swar_special(x)) {
			memcpy(o + (end - p) - 8, &x, 8);
			return o + (end - p);
		}
	} else if (n >= 4) {
		/* 4..7 bytes: the first and the last 4, overlapping */
		uint32_t x, y;
		memcpy(&x, p, 4);
		memcpy(&y, end - 4, 4);
		if (!(swar_special4(x) | swar_special4(y))) {
			memcpy(o, &x, 4);
			memcpy(o + n - 4, &y, 4);
			return o + n;
		}
	}
bytewise:
	while (p < end && !esc_class[*p])
		*o++ = (char)*p++;
	if (VD_LIKELY(p == end))
		return o;
	*rest = p;
	*at = o;
	return NULL;
}

/* put_plain, then the slow path: may move out->data (the closing bytes
 * always fit).  out->len is left for the caller to set. */
static inline __attribute__((always_inline)) char *put_escaped(struct vd_buf *out, char *o,
							       const char *s, size_t n)
{
	/* set by put_plain whenever it returns NULL; initialised because gcc
	 * -O1 under TSan cannot see that (maybe-uninitialized) */
	const unsigned char *rest = NULL;
	char *at = NULL;
	char *r = put_plain(o, s, n, &rest, &at);
	if (VD_LIKELY(r != NULL))
		return r;
	return put_escaped_slow(out, at, rest, (const unsigned char *)s + n);
}

static void j_string(struct vd_writer *w, const char *s, size_t n)
{
	struct vd_buf *out = w->out;
	char *o = j_slot(w, n + 2);
	if (!o)
		return;
	*o++ = '"';
	o = put_escaped(out, o, s, n);
	*o++ = '"';
	out->len = (size_t)(o - out->data);
}

static void j_key(struct vd_writer *w, const char *s, size_t n)
{
	struct vd_buf *out = w->out;
	uint8_t *ne = &w->nonempty[w->depth];
	if (VD_UNLIKELY(w->depth == 0 || !(*ne & NE_OBJ) || w->after_key)) {
		w->error = VD_EINVAL;
		return;
	}
	buf_reserve(out, n + 4);
	/* buf_reserve() left cap >= n + 4 > 0, so data is non-NULL */
	char *o = out->data + out->len;
	if (*ne & NE_HAS)
		*o++ = ',';  // NOLINT(clang-analyzer-core.NullDereference)
	*ne |= NE_HAS;
	*o++ = '"';  // NOLINT(clang-analyzer-core.NullDereference)
	o = put_escaped(out, o, s, n);
	memcpy(o, "\":", 2);
	out->len = (size_t)(o + 2 - out->data);
	w->after_key = true;
}

static void j_begin(struct vd_writer *w, char c, uint8_t kind)
{
	struct vd_buf *out = w->out;
	if (VD_UNLIKELY(w->depth + 1 >= VW_MAX_DEPTH)) {
		w->error = VD_EINVAL;
		return;
	}
	char *o = j_slot(w, 1);
	if (!o)
		return;
	*o = c;
	out->len++;
	w->nonempty[++w->depth] = kind;
}

static void j_end(struct vd_writer *w, char c, uint8_t kind)
{
	if (VD_UNLIKELY(w->depth == 0 || (w->nonempty[w->depth] & NE_OBJ) != kind ||
			w->after_key)) {
		w->error = VD_EINVAL;
		return;
	}
	w->depth--;
	buf_putc(w->out, c);
}

static void j_begin_object(struct vd_writer *w) { j_begin(w, '{', NE_OBJ); }
static void j_end_object(struct vd_writer *w) { j_end(w, '}', NE_OBJ); }
static void j_begin_array(struct vd_writer *w) { j_begin(w, '[', 0); }
static void j_end_array(struct vd_writer *w) { j_end(w, ']', 0); }

/* A scalar of at most 32 bytes produced by fmt. */
static inline void j_put(struct vd_writer *w, const char *s, size_t n)
{
	char *o = j_slot(w, n);
	if (!o)
		return;
	memcpy(o, s, n);
	w->out->len += n;
}

static void j_int64(struct vd_writer *w, int64_t i)
{
	char *o = j_slot(w, 23);
	if (o)
		w->out->len += cj_fmt_i64(i, o);
}

static void j_uint64(struct vd_writer *w, uint64_t u)
{
	char *o = j_slot(w, 23);
	if (o)
		w->out->len += cj_fmt_u64(u, o);
}

static void j_double(struct vd_writer *w, double d)
{
	char tmp[40];
	j_put(w, tmp, cj_fmt_double(d, tmp));
}

static void j_bool(struct vd_writer *w, bool b)
{
	if (b)
		j_put(w, "true", 4);
	else
		j_put(w, "false", 5);
}

static void j_null(struct vd_writer *w)
{
	j_put(w, "null", 4);
}

static void j_raw(struct vd_writer *w, const void *bytes, size_t n)
{
	char *o = j_slot(w, n);
	if (!o)
		return;
	if (n)
		memcpy(o, bytes, n);
	w->out->len += n;
}

/* vw_value for this writer: a whole tree in one pass.  The separators
 * follow from the tree's shape (no per-value state), the output pointer and
 * the end of the reserved room stay in locals, and each value costs one
 * room check (a string reserves its plain length; escapes reserve more in
 * put_escaped_slow, after which the room is read again). */
struct tw {
	struct vd_buf *out;
	char *end;          /* out->data + out->cap */
	unsigned room;      /* containers that may still open (VW_MAX_DEPTH) */
	bool deep;          /* the tree was deeper than that */
};

static __attribute__((noinline)) char *tw_grow(struct tw *t, char *o, size_t n)
{
	struct vd_buf *out = t->out;
	out->len = (size_t)(o - out->data);
	buf_reserve(out, n);
	t->end = out->data + out->cap;
	return out->data + out->len;
}

#define TW_ROOM(t, o, n) \
	do { \
		if (VD_UNLIKELY((size_t)((t)->end - (o)) < (n))) \
			(o) = tw_grow((t), (o), (n)); \
	} while (0)

static __attribute__((noinline)) char *tw_str_slow(struct tw *t, char *o,
						     const unsigned char *p,
						     const unsigned char *end)
{
	o = put_escaped_slow(t->out, o, p, end);
	t->end = t->out->data + t->out->cap;
	return o;
}

/* '"' s '"' (s escaped) at o; room for n + 2 bytes was made by the caller.
 * Returns the new end. */
static inline __attribute__((always_inline)) char *tw_str(struct tw *t, char *o,
							  const char *s, size_t n)
{
	const unsigned char *rest = NULL;  /* as in put_escaped */
	char *at = NULL;
	*o++ = '"';
	char *r = put_plain(o, s, n, &rest, &at);
	if (VD_UNLIKELY(!r))
		r = tw_str_slow(t, at, rest, (const unsigned char *)s + n);
	*r++ = '"';
	return r;
}

static char *tw_value(struct tw *t, char *o, const struct vd_value *v)
{
	switch (v->type) {
	case VD_NULL:
		TW_ROOM(t, o, 4);
		memcpy(o, "null", 4);
		return o + 4;
	case VD_BOOL:
		TW_ROOM(t, o, 5);
		if (v->v.b) {
			memcpy(o, "true", 4);
			return o + 4;
		}
		memcpy(o, "false", 5);
		return o + 5;
	case VD_INT:
		TW_ROOM(t, o, 24);
		return o + cj_fmt_i64(v->v.i, o);
	case VD_UINT:
		TW_ROOM(t, o, 24);
		return o + cj_fmt_u64(v->v.u, o);
	case VD_DOUBLE:
		TW_ROOM(t, o, 40);
		return o + cj_fmt_double(v->v.d, o);
	case VD_STRING:
		TW_ROOM(t, o, v->v.s.len + 2);
		return tw_str(t, o, v->v.s.ptr, v->v.s.len);
	case VD_ARRAY: {
		if (VD_UNLIKELY(t->room == 0)) {
			t->deep = true;
			return o;
		}
		t->room--;
		size_t n = v->v.arr.n;
		const struct vd_value *it = v->v.arr.items;
		TW_ROOM(t, o, 2);
		*o++ = '[';
		for (size_t i = 0; i < n; i++) {
			if (i) {
				TW_ROOM(t, o, 1);
				*o++ = ',';
			}
			o = tw_value(t, o, &it[i]);
		}
		TW_ROOM(t, o, 1);
		*o++ = ']';
		t->room++;
		return o;
	}
	case VD_OBJECT: {
		if (VD_UNLIKELY(t->room == 0)) {
			t->deep = true;
			return o;
		}
		t->room--;
		size_t n = v->v.obj.n;
		const struct vd_member *m = v->v.obj.members;
		TW_ROOM(t, o, 2);
		*o++ = '{';
		for (size_t i = 0; i < n; i++) {
			/* ',' '"' key '":' */
			TW_ROOM(t, o, m[i].klen + 4);
			if (i)
				*o++ = ',';
			o = tw_str(t, o, m[i].key, m[i].klen);
			*o++ = ':';
			const struct vd_value *mv = &m[i].val;
			if (VD_LIKELY(mv->type == VD_STRING)) {
				/* the usual member value, without a call */
				TW_ROOM(t, o, mv->v.s.len + 2);
				o = tw_str(t, o, mv->v.s.ptr, mv->v.s.len);
			} else {
				o = tw_value(t, o, mv);
			}
		}
		TW_ROOM(t, o, 1);
		*o++ = '}';
		t->room++;
		return o;
	}
	}
	return o;
}

static void j_value(struct vd_writer *w, const struct vd_value *v)
{
	char *o = j_slot(w, 0);   /* the separator before it, if any */
	if (!o)
		return;
	struct vd_buf *out = w->out;
	struct tw t = { out, out->data + out->cap, VW_MAX_DEPTH - 1 - w->depth, false };
	o = tw_value(&t, o, v);
	out->len = (size_t)(o - out->data);
	if (VD_UNLIKELY(t.deep))
		w->error = VD_EINVAL;   /* as j_begin past VW_MAX_DEPTH */
}

static const struct vd_writer_ops json_ops = {
	.begin_object = j_begin_object,
	.end_object = j_end_object,
	.begin_array = j_begin_array,
	.end_array = j_end_array,
	.key = j_key,
	.string = j_string,
	.int64 = j_int64,
	.uint64 = j_uint64,
	.dbl = j_double,
	.boolean = j_bool,
	.null = j_null,
	.raw = j_raw,
	.value = j_value,
};

void json_writer_init(struct vd_writer *w, struct vd_buf *out)
{
	w->ops = &json_ops;
	w->out = out;
	w->depth = 0;
	w->error = 0;
	w->after_key = false;
	w->nonempty[0] = 0;
}
