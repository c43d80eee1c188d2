/* codecs/json_emit.c - our JSON emitter: the streaming writer (struct
 * vd_writer_ops) shared by the fallback and yajl codecs.
 *
 * Output is minified RFC 8259 JSON.  Strings: '"', '\\' and control
 * characters are escaped (\n, \t, ... or \u00XX); bytes that are not
 * well-formed UTF-8 are replaced by U+FFFD so the output is always valid.
 * Doubles use the shortest round-trip text; NaN and infinities become null. */
#include "codec_int.h"

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

/* Escaped body of s (no quotes) written at o, inside out; returns the new
 * write position.  The caller reserved room for n bytes plus its closing
 * bytes (at most 2); the slow path reserves what escapes need plus 2 (and
 * may move out->data), so the closing bytes always fit.  out->len is left
 * for the caller to set. */
static inline __attribute__((always_inline)) char *put_escaped(struct vd_buf *out, char *o,
							       const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	/* fast path: copy 8 plain ASCII bytes at a time; the last (partial)
	 * chunk is the overlapping last 8 bytes of the string */
	if (n >= 8) {
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
	}
bytewise:
	while (p < end && !esc_class[*p])
		*o++ = (char)*p++;
	if (VD_LIKELY(p == end))
		return o;
	return put_escaped_slow(out, o, p, end);
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

/* vw_value for this writer: the same calls, direct instead of through ops. */
static void j_value(struct vd_writer *w, const struct vd_value *v)
{
	switch (v->type) {
	case VD_NULL: j_null(w); break;
	case VD_BOOL: j_bool(w, v->v.b); break;
	case VD_INT: j_int64(w, v->v.i); break;
	case VD_UINT: j_uint64(w, v->v.u); break;
	case VD_DOUBLE: j_double(w, v->v.d); break;
	case VD_STRING: j_string(w, v->v.s.ptr, v->v.s.len); break;
	case VD_ARRAY:
		j_begin_array(w);
		for (size_t i = 0; i < v->v.arr.n; i++)
			j_value(w, &v->v.arr.items[i]);
		j_end_array(w);
		break;
	case VD_OBJECT:
		j_begin_object(w);
		for (size_t i = 0; i < v->v.obj.n; i++) {
			j_key(w, v->v.obj.members[i].key, v->v.obj.members[i].klen);
			j_value(w, &v->v.obj.members[i].val);
		}
		j_end_object(w);
		break;
	}
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
