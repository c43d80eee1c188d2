/* codecs/yajl.c - the yajl JSON codec (auto's decoder for large bodies):
 * yajl's callback parser builds the arena tree directly (never
 * yajl_tree_parse); encoding uses our emitter (json_emit.c), which
 * bench/codec measures faster than yajl_gen.
 *
 * Where yajl is more lenient than RFC 8259 we restore the strict rules, so
 * that yajl and fallback accept the same documents and decode the same
 * values:
 *   - numbers reach us as text (yajl_number callback) and are converted by
 *     the same code as in fallback (int64 / uint64 / double, 1e400 refused);
 *   - strings with escapes are decoded by us from the raw input (yajl turns
 *     a lone surrogate into '?' or garbage); unescaped strings point into the
 *     input and are re-checked for strict UTF-8 (yajl accepts overlong forms,
 *     encoded surrogates and code points past U+10FFFF);
 *   - depth is limited in the start_map/start_array callbacks;
 *   - a raw form feed or vertical tab (yajl's extra whitespace) is refused;
 *   - trailing bytes after the root value must be whitespace (yajl lets an
 *     unfinished token through there, e.g. '"a" "' or 'true"').
 * yajl's own memory comes from the request arena (nothing to free, no leak on
 * any error path). */
#include "codec_int.h"
#include "codecs.h"

#include <yajl/yajl_parse.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* A body of at least YAJL_ESCAPES_MIN_LEN bytes with more than one escape
 * per YAJL_ESCAPES_PER bytes is decoded by the fallback parser (y_decode).
 * Smaller ones cost little either way, and stay yajl's, so the fuzzers
 * (inputs of a few KiB) keep comparing yajl's escaped strings. */
#define YAJL_ESCAPES_PER 32
#define YAJL_ESCAPES_MIN_LEN (64u * 1024)

struct yctx {
	struct tree_builder t;
	struct vd_arena *a;
	const char *base;
	size_t len;
	yajl_handle h;
	int code;
	size_t off;
	const char *reason;
	bool finishing;       /* inside yajl_complete_parse */
	bool root_seen;       /* the root value completed inside yajl_parse */
	size_t root_end;      /* ... at this input offset */
};

/* --- yajl's allocations, from the arena ----------------------------------- */

static void *ya_malloc(void *ctx, size_t sz)
{
	size_t *p = arena_alloc(ctx, sz + sizeof(size_t));
	*p = sz;
	return p + 1;
}

static void *ya_realloc(void *ctx, void *old, size_t sz)
{
	if (!old)
		return ya_malloc(ctx, sz);
	size_t osz = ((size_t *)old)[-1];
	if (sz <= osz)
		return old;
	void *n = ya_malloc(ctx, sz);
	memcpy(n, old, osz);
	return n;
}

static void ya_free(void *ctx, void *p)
{
	(void)ctx;
	(void)p;
}

/* --- callbacks -------------------------------------------------------- */

static int y_fail(struct yctx *c, int code, size_t off, const char *reason)
{
	c->code = code;
	c->off = off;
	c->reason = reason;
	return 0;
}

static size_t y_offset(struct yctx *c)
{
	if (c->finishing)
		return c->len;   /* yajl_complete_parse feeds its own buffer */
	size_t off = yajl_get_bytes_consumed(c->h);
	return off > c->len ? c->len : off;
}

/* An escaped string: yajl decoded it into its own buffer.  Find the raw
 * token, which ends just before the consumed offset, and decode it
 * ourselves.  Inside a string every '"' is preceded by an odd run of
 * backslashes; the opening quote by none. */
static __attribute__((noinline)) bool y_str_escaped(struct yctx *c, const char **out,
						    size_t *outlen)
{
	size_t endoff = yajl_get_bytes_consumed(c->h);
	if (endoff < 2 || endoff > c->len || c->base[endoff - 1] != '"')
		return !y_fail(c, VD_EPROTO, y_offset(c), "string token not found");
	const char *close = c->base + endoff - 1, *q = close;
	for (;;) {
		while (q > c->base && *--q != '"')
			;
		if (*q != '"')
			return !y_fail(c, VD_EPROTO, y_offset(c), "string token not found");
		const char *b = q;
		while (b > c->base && b[-1] == '\\')
			b--;
		if (((q - b) & 1) == 0)
			break;
	}
	size_t bad;
	const char *reason;
	if (cj_unescape(c->a, q + 1, (size_t)(close - q - 1), out, outlen, &bad, &reason) < 0)
		return !y_fail(c, VD_EPROTO, (size_t)(q + 1 - c->base) + bad, reason);
	return true;
}

/* A string from yajl as stored in the tree. */
static inline bool y_str(struct yctx *c, const unsigned char *us, size_t n, const char **out,
			 size_t *outlen)
{
	const char *s = (const char *)us;
	if (VD_LIKELY((size_t)(s - c->base) < c->len)) {
		/* no escapes: yajl hands us the input itself */
		if (VD_UNLIKELY(!cj_is_ascii(s, n))) {
			size_t bad = cj_utf8_check(s, n);
			if (bad != n)
				return !y_fail(c, VD_EPROTO, (size_t)(s - c->base) + bad,
					       "invalid UTF-8 in string");
		}
		*out = s;
		*outlen = n;
		return true;
	}
	if (n == 0) {
		*out = "";
		*outlen = 0;
		return true;
	}
	return y_str_escaped(c, out, outlen);
}

/* Where the next value goes; remembers where the root value ended. */
static inline struct vd_value *y_slot(struct yctx *c)
{
	if (VD_UNLIKELY(c->t.depth == 0) && !c->finishing) {
		c->root_seen = true;
		c->root_end = y_offset(c);
	}
	return tb_slot(&c->t);   /* never NULL: yajl stops after one root */
}

static int y_null(void *ctx)
{
	struct vd_value *v = y_slot(ctx);
	v->type = VD_NULL;
	return 1;
}

static int y_bool(void *ctx, int b)
{
	struct vd_value *v = y_slot(ctx);
	v->type = VD_BOOL;
	v->v.b = b != 0;
	return 1;
}

/* An integer of 1 to 18 digits (optionally negative, no leading zero):
 * what a JSON-RPC id and most numbers are.  It fits int64, so cj_number
 * would give the same VD_INT; anything else returns false and goes there. */
static inline bool y_small_int(const char *s, size_t n, struct vd_value *v)
{
	bool neg = n && s[0] == '-';
	size_t i = neg;
	if (n - i == 0 || n - i > 18 || (s[i] == '0' && n - i > 1))
		return false;
	int64_t m = 0;
	for (; i < n; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9)
			return false;
		m = m * 10 + (int64_t)d;
	}
	v->type = VD_INT;
	v->v.i = neg ? -m : m;
	return true;
}

static int y_number(void *ctx, const char *s, size_t n)
{
	struct yctx *c = ctx;
	const char *reason = NULL;
	struct vd_value *v = y_slot(c);
	if (VD_LIKELY(y_small_int(s, n, v)))
		return 1;
	const char *e = n ? cj_number(s, s + n, v, &reason) : NULL;
	if (!e || e != s + n)
		return y_fail(c, VD_EPROTO, y_offset(c), reason ? reason : "invalid number");
	return 1;
}

static int y_string(void *ctx, const unsigned char *s, size_t n)
{
	struct yctx *c = ctx;
	struct vd_value *v = y_slot(c);
	v->type = VD_STRING;
	return y_str(c, s, n, &v->v.s.ptr, &v->v.s.len);
}

static int y_key(void *ctx, const unsigned char *s, size_t n)
{
	struct yctx *c = ctx;
	struct tree_builder *t = &c->t;
	if (VD_UNLIKELY(t->nmems == t->capmems))
		t->mems = tb_grow(t->mems, &t->capmems, sizeof(*t->mems), t->mems_in);
	struct vd_member *m = &t->mems[t->nmems++];
	m->val.type = VD_NULL;
	return y_str(c, s, n, &m->key, &m->klen);
}

static int y_start_map(void *ctx)
{
	struct yctx *c = ctx;
	if (!tb_begin(&c->t, true))
		return y_fail(c, VD_EDEPTH, y_offset(c) ? y_offset(c) - 1 : 0, "nesting too deep");
	return 1;
}

static int y_start_array(void *ctx)
{
	struct yctx *c = ctx;
	if (!tb_begin(&c->t, false))
		return y_fail(c, VD_EDEPTH, y_offset(c) ? y_offset(c) - 1 : 0, "nesting too deep");
	return 1;
}

static int y_end(void *ctx)
{
	struct yctx *c = ctx;
	tb_end(&c->t);
	if (c->t.depth == 0 && !c->finishing) {
		c->root_seen = true;
		c->root_end = y_offset(c);
	}
	return 1;
}

static const yajl_callbacks y_callbacks = {
	.yajl_null = y_null,
	.yajl_boolean = y_bool,
	.yajl_number = y_number,
	.yajl_string = y_string,
	.yajl_start_map = y_start_map,
	.yajl_map_key = y_key,
	.yajl_end_map = y_end,
	.yajl_start_array = y_start_array,
	.yajl_end_array = y_end,
};

/* yajl's message ("parse error: trailing garbage\n...") copied to the arena. */
static const char *y_message(struct yctx *c)
{
	unsigned char *m = yajl_get_error(c->h, 0, NULL, 0);
	if (!m)
		return "malformed JSON";
	size_t n = strlen((char *)m);
	while (n && (m[n - 1] == '\n' || m[n - 1] == ' '))
		n--;
	const char *r = arena_strndup(c->a, (char *)m, n);
	yajl_free_error(c->h, m);
	return r;
}

/* Offset of the first raw \f or \v in s[0..n), or n: one pass. */
static size_t find_ff_vt(const char *s, size_t n)
{
	size_t i = 0;
#ifdef __SSE2__
	const __m128i ff = _mm_set1_epi8('\f'), vt = _mm_set1_epi8('\v');
	for (; i + 16 <= n; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, ff), _mm_cmpeq_epi8(x, vt)));
		if (m)
			return i + (size_t)__builtin_ctz((unsigned)m);
	}
#endif
	for (; i < n; i++)
		if (s[i] == '\f' || s[i] == '\v')
			return i;
	return n;
}

static int y_decode(struct vd_arena *a, const char *bytes, size_t len,
		    const struct vd_limits *lim, struct vd_value **out,
		    struct vd_codec_error *err)
{
	/* the escape count matters only to a body long enough for the
	 * fallback rule below */
	size_t escapes = 0;
	int rc = cj_json_decode_begin(&bytes, len, &lim, err,
				      len >= YAJL_ESCAPES_MIN_LEN ? &escapes : NULL);
	if (rc < 0)
		return rc;
	/* yajl decodes every escape into a buffer of its own, a byte and a
	 * call at a time, and y_str_escaped decodes it again: 40 ms for 4 MiB
	 * of "\n" against 5 ms in the fallback parser (issue 27).  A body that
	 * is mostly escapes goes to the fallback parser, which the differential
	 * fuzzer (tests/fuzz/fuzz_codec_diff.c) holds to the same documents
	 * accepted and the same values; only an error's offset and reason may
	 * read differently. */
	if (len >= YAJL_ESCAPES_MIN_LEN && escapes > len / YAJL_ESCAPES_PER)
		return codec_fallback.decode(a, bytes, len, lim, out, err);
	/* A top-level number is buffered by yajl's lexer, slowly when huge;
	 * refuse an over-long one before yajl sees it (same limit as
	 * cj_number's). */
	{
		size_t i = 0, j;
		while (i < len && (bytes[i] == ' ' || bytes[i] == '\n' || bytes[i] == '\r' ||
				   bytes[i] == '\t'))
			i++;
		for (j = i; j < len && j - i <= CJ_MAX_NUMBER_LEN &&
			    ((unsigned char)(bytes[j] - '0') < 10 || bytes[j] == '-' ||
			     bytes[j] == '+' || bytes[j] == '.' || bytes[j] == 'e' ||
			     bytes[j] == 'E'); j++)
			;
		if (j - i > CJ_MAX_NUMBER_LEN) {
			cj_set_err(err, VD_EPROTO, i, "number longer than 1024 characters");
			return VD_EPROTO;
		}
	}
	/* yajl takes \f and \v for whitespace.  A raw one is never valid JSON
	 * (not whitespace outside strings, a control character inside). */
	size_t at = find_ff_vt(bytes, len);
	if (at < len) {
		cj_set_err(err, VD_EPROTO, at, "invalid character");
		return VD_EPROTO;
	}
	struct yctx c;
	yajl_alloc_funcs afs = { ya_malloc, ya_realloc, ya_free, a };
	tb_init(&c.t, a, cj_max_depth(lim));
	c.a = a;
	c.base = bytes;
	c.len = len;
	c.code = 0;
	c.reason = NULL;
	c.off = 0;
	c.finishing = false;
	c.root_seen = false;
	c.root_end = 0;
	c.h = yajl_alloc(&y_callbacks, &afs, &c);
	yajl_status st = yajl_parse(c.h, (const unsigned char *)bytes, len);
	/* where the root value ends; past it only whitespace is allowed */
	const char *p = bytes + c.root_end, *end = bytes + len;
	if (st == yajl_status_ok && c.root_seen)
		while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
			p++;
	/* A root value completed inside yajl_parse with only whitespace after
	 * it leaves yajl in its parse-complete state with nothing buffered:
	 * yajl_complete_parse (a tenth of yajl's instructions on a small
	 * request) could only answer ok, so it is skipped.  Otherwise (a
	 * number at the end, an unfinished value, trailing bytes that may be
	 * an unfinished token) it runs, and decides as before. */
	if (st == yajl_status_ok && !(c.root_seen && p == end)) {
		c.finishing = true;
		st = yajl_complete_parse(c.h);
	}
	if (st == yajl_status_ok && c.root_seen) {
		if (p < end) {
			c.code = VD_EPROTO;
			c.off = (size_t)(p - bytes);
			c.reason = "trailing characters after the value";
		}
	}
	if (c.code) {
		/* set by a callback or the trailing check */
	} else if (st == yajl_status_ok && !c.t.done) {
		c.code = VD_EPROTO;
		c.off = len;
		c.reason = "empty input, value expected";
	} else if (st == yajl_status_error) {
		c.code = VD_EPROTO;
		c.off = y_offset(&c);
		c.reason = y_message(&c);
	} else if (st != yajl_status_ok && !c.code) {
		c.code = VD_EPROTO;
		c.off = y_offset(&c);
		c.reason = "malformed JSON";
	}
	yajl_free(c.h);
	tb_fini(&c.t);
	if (c.code) {
		cj_set_err(err, c.code, c.off, c.reason);
		return c.code;
	}
	*out = arena_alloc(a, sizeof(**out));
	**out = c.t.root;
	return 0;
}

const struct vd_codec codec_yajl = {
	.name = "yajl",
	.content_type = "application/json",
	.is_json = true,
	.decode = y_decode,
	.writer_init = json_writer_init,
};
