/* codecs/codec_int.h - internals shared by the codecs (not for use outside
 * codecs/): number conversion, string unescaping and UTF-8 checks, double
 * formatting, the JSON emitter, and the tree builder every decoder fills.
 *
 * Tree builder: a decoder stores scalars with tb_slot() (or tb_value()), opens containers
 * with tb_begin() and closes them with tb_end(); inside an object it pushes
 * the key with tb_key() before each value.  Children are collected on scratch
 * stacks (heap, grown geometrically, bounded by the number of values the
 * input actually contains) and copied into the arena in one exact-size block
 * when their container closes.  tb_fini() releases the scratch memory. */
#ifndef VD_CODECS_CODEC_INT_H
#define VD_CODECS_CODEC_INT_H

#include "codec.h"

#include <stdlib.h>
#include <string.h>

/* --- numbers ------------------------------------------------------------ */

/* Scan a strict RFC 8259 number starting at p (< end) and convert it into v
 * (int64 when it fits, uint64 when positive and fits, double otherwise).
 * Returns the end of the number, or NULL with *reason set on a grammar error,
 * a value outside the double range (1e400) or a text longer than
 * CJ_MAX_NUMBER_LEN. */
const char *cj_number(const char *p, const char *end, struct vd_value *v,
		      const char **reason);
/* Longest number text accepted (every codec refuses longer ones). */
#define CJ_MAX_NUMBER_LEN 1024

/* Shortest text that reads back to the same double ("0.1", "1e+300"),
 * always recognisable as a double ("1.0", never "1").  NaN and infinities
 * are not JSON: they are written as "null".  buf holds >= 32 bytes; returns
 * the length (no NUL written). */
size_t cj_fmt_double(double d, char *buf);
/* The same text for a normal double between 1e-4 and 1e15 that needs 15 to
 * 17 digits, computed exactly in integers (codecs/fmt_double.c); 0 when d
 * is outside what it handles (the caller then uses printf). */
size_t cj_fmt_double_mid(double d, char *buf);
/* Decimal text of an integer; buf holds >= 21 bytes; returns the length. */
size_t cj_fmt_u64(uint64_t u, char *buf);
size_t cj_fmt_i64(int64_t i, char *buf);

/* --- strings ------------------------------------------------------------ */

/* Length of the well-formed UTF-8 sequence starting at p (a byte >= 0x80),
 * or 0 when it is malformed (overlong, surrogate, > U+10FFFF, truncated). */
size_t cj_utf8_seq(const unsigned char *p, const unsigned char *end);
/* Offset of the first byte of s[0..n) that is not well-formed UTF-8, or n. */
size_t cj_utf8_check(const char *s, size_t n);

/* True when s[0..n) is all ASCII (the common case; inline and fast). */
static inline bool cj_is_ascii(const char *s, size_t n)
{
	uint64_t acc = 0, x;
	if (n >= 8) {
		size_t i = 0;
		for (; i + 8 < n; i += 8) {
			memcpy(&x, s + i, 8);
			acc |= x;
		}
		memcpy(&x, s + n - 8, 8);
		acc |= x;
		return !(acc & 0x8080808080808080ull);
	}
	if (n >= 4) {
		/* 4..7 bytes (most keys): the first and the last 4, overlapping */
		uint32_t y, z;
		memcpy(&y, s, 4);
		memcpy(&z, s + n - 4, 4);
		return !((y | z) & 0x80808080u);
	}
	for (size_t i = 0; i < n; i++)
		acc |= (uint8_t)s[i];
	return !(acc & 0x80);
}

/* Decode the body of a JSON string (between the quotes, raw input) that
 * contains escapes into a fresh arena copy.  Validates escapes, surrogate
 * pairs (a lone surrogate is an error), control characters and UTF-8.
 * Returns 0, or VD_EPROTO with *bad (offset into s) and *reason set. */
int cj_unescape(struct vd_arena *a, const char *s, size_t n,
		const char **out, size_t *outlen, size_t *bad, const char **reason);

/* --- JSON emitter (codecs/json_emit.c) ------------------------------------ */

void json_writer_init(struct vd_writer *w, struct vd_buf *out);

/* --- tree builder ------------------------------------------------------- */

struct tb_frame {
	bool is_obj;
	size_t start;   /* index into vals or mems where this container starts */
};

#define TB_INLINE 64

struct tree_builder {
	struct vd_arena *a;
	unsigned depth, max_depth;
	bool done;
	struct vd_value root;
	struct vd_value *vals;
	struct vd_member *mems;
	struct tb_frame *frames;
	size_t nvals, capvals, nmems, capmems, capframes;
	struct vd_value vals_in[TB_INLINE];
	struct vd_member mems_in[TB_INLINE];
	struct tb_frame frames_in[TB_INLINE];
};

void tb_init(struct tree_builder *t, struct vd_arena *a, unsigned max_depth);
void tb_fini(struct tree_builder *t);
void *tb_grow(void *p, size_t *cap, size_t elsz, const void *inline_buf);

/* The place for the next value: in the current array, as the value of the
 * member whose key was pushed last, or the root.  The caller writes the
 * value there field by field (building it elsewhere and copying it costs a
 * store-forwarding stall per value).  NULL when the document already has a
 * root (a second top-level value). */
static inline struct vd_value *tb_slot(struct tree_builder *t)
{
	if (VD_UNLIKELY(t->depth == 0)) {
		if (t->done)
			return NULL;
		t->done = true;
		return &t->root;
	}
	if (t->frames[t->depth - 1].is_obj)
		return &t->mems[t->nmems - 1].val;
	if (VD_UNLIKELY(t->nvals == t->capvals))
		t->vals = tb_grow(t->vals, &t->capvals, sizeof(*t->vals), t->vals_in);
	return &t->vals[t->nvals++];
}

/* Store a finished value (copy of *v) in its parent or as the root. */
static inline bool tb_value(struct tree_builder *t, const struct vd_value *v)
{
	struct vd_value *slot = tb_slot(t);
	if (!slot)
		return false;
	*slot = *v;
	return true;
}

/* Open a container; false when that would pass max_depth. */
static inline bool tb_begin(struct tree_builder *t, bool is_obj)
{
	if (VD_UNLIKELY(t->depth >= t->max_depth))
		return false;
	if (VD_UNLIKELY(t->depth == t->capframes))
		t->frames = tb_grow(t->frames, &t->capframes, sizeof(*t->frames), t->frames_in);
	struct tb_frame *f = &t->frames[t->depth++];
	f->is_obj = is_obj;
	f->start = is_obj ? t->nmems : t->nvals;
	return true;
}

static inline void tb_key(struct tree_builder *t, const char *k, size_t n)
{
	if (VD_UNLIKELY(t->nmems == t->capmems))
		t->mems = tb_grow(t->mems, &t->capmems, sizeof(*t->mems), t->mems_in);
	struct vd_member *m = &t->mems[t->nmems++];
	m->key = k;
	m->klen = n;
	m->val.type = VD_NULL;
}

/* Close the innermost container and store it in its parent. */
static inline bool tb_end(struct tree_builder *t)
{
	struct tb_frame *f = &t->frames[--t->depth];
	size_t start = f->start;
	if (f->is_obj) {
		size_t n = t->nmems - start;
		struct vd_member *m = NULL;
		if (n) {
			m = arena_alloc(t->a, n * sizeof(struct vd_member));
			memcpy(m, t->mems + start, n * sizeof(struct vd_member));
		}
		t->nmems = start;
		struct vd_value *v = tb_slot(t);
		if (!v)
			return false;
		v->type = VD_OBJECT;
		v->v.obj.n = n;
		v->v.obj.members = m;
	} else {
		size_t n = t->nvals - start;
		struct vd_value *items = NULL;
		if (n) {
			items = arena_alloc(t->a, n * sizeof(struct vd_value));
			memcpy(items, t->vals + start, n * sizeof(struct vd_value));
		}
		t->nvals = start;
		struct vd_value *v = tb_slot(t);
		if (!v)
			return false;
		v->type = VD_ARRAY;
		v->v.arr.n = n;
		v->v.arr.items = items;
	}
	return true;
}

static inline unsigned cj_max_depth(const struct vd_limits *lim)
{
	return lim->max_depth < VD_HARD_MAX_DEPTH ? lim->max_depth : VD_HARD_MAX_DEPTH;
}

static inline void cj_set_err(struct vd_codec_error *err, int code, size_t off,
			      const char *reason)
{
	if (err) {
		err->code = code;
		err->offset = off;
		err->reason = reason;
	}
}

/* Upper bound of the values in the JSON text p[0..n): one per ',' and '['
 * or '{' outside strings, plus one; counting stops past stop, and returns 0
 * once nesting passes max_depth (the decoder then fails on depth at once).
 * A linear scan at memory speed, so a body of millions of values is refused
 * before yajl or the tree builder spend seconds on it.  escapes (NULL: not
 * wanted): the backslash escapes inside the strings it went over. */
size_t cj_count_values(const char *p, size_t n, size_t stop, unsigned max_depth,
		       size_t *escapes);

/* What every decode() does first: a NULL *lim becomes the defaults, NULL
 * *bytes an empty body, and a body over the size limit is refused.
 * Returns 0, or VD_ETOOBIG with err set. */
static inline int cj_decode_begin(const char **bytes, size_t len, const struct vd_limits **lim,
				  struct vd_codec_error *err)
{
	static const struct vd_limits deflim = VD_LIMITS_DEFAULT;
	if (!*lim)
		*lim = &deflim;
	if (!*bytes)
		*bytes = "";
	if (len > (*lim)->max_size) {
		cj_set_err(err, VD_ETOOBIG, (*lim)->max_size, "input larger than the size limit");
		return VD_ETOOBIG;
	}
	return 0;
}

/* What every JSON decode() does first: cj_decode_begin(), then a body with
 * more values than max_elements (when set) is refused with
 * vd_reason_too_many_values.  escapes (NULL: not wanted): the count is run
 * even without max_elements (or below it) and says how many escapes the
 * strings hold, up to where it stopped.  Returns 0, or VD_ETOOBIG with err
 * set. */
static inline int cj_json_decode_begin(const char **bytes, size_t len,
				       const struct vd_limits **lim, struct vd_codec_error *err,
				       size_t *escapes)
{
	int rc = cj_decode_begin(bytes, len, lim, err);
	if (rc < 0)
		return rc;
	size_t max = (*lim)->max_elements;
	/* A text of len bytes holds at most len + 1 values (one per ',', '['
	 * and '{', plus one): below max the count cannot refuse it, and the
	 * scan (as long as the decode of a small request) is skipped. */
	if (!escapes && (!max || len < max))
		return 0;
	if (cj_count_values(*bytes, len, max ? max : SIZE_MAX, cj_max_depth(*lim), escapes) >
	    (max ? max : SIZE_MAX)) {
		cj_set_err(err, VD_ETOOBIG, 0, vd_reason_too_many_values);
		return VD_ETOOBIG;
	}
	return 0;
}

#endif
