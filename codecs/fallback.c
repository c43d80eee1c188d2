/* codecs/fallback.c - our own JSON codec, no dependency: a strict RFC 8259
 * decoder straight into the arena tree, and the emitter of json_emit.c.
 *
 * Rejected: trailing commas, leading zeros, control characters in strings,
 * bad escapes, lone surrogates, invalid UTF-8, a BOM, anything after the
 * value but whitespace, numbers beyond the double range (1e400).  The parser
 * is iterative (an explicit container stack), so depth costs no C stack. */
#include "codec_int.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* 1 for bytes that end the fast scan of a string body. */
static const uint8_t str_stop[256] = {
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

static inline const char *skip_ws(const char *p, const char *end)
{
	/* every JSON whitespace byte is <= ' ': one test for minified input */
	if (VD_LIKELY(p < end && (uint8_t)*p > ' '))
		return p;
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

/* The bytes of p[0..16) that end the fast scan of a string body, one bit
 * each: the quotes in *quotes, the others ('\\', control characters,
 * non-ASCII bytes) in the return value. */
static inline unsigned str_scan16(const char *p, unsigned *quotes)
{
#ifdef __SSE2__
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
	*quotes = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')));
	/* signed compare: bytes >= 0x80 are negative, so below 0x20 too */
	return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\\')),
							_mm_cmplt_epi8(x, _mm_set1_epi8(0x20))));
#else
	unsigned q = 0, o = 0;
	for (unsigned i = 0; i < 16; i++) {
		q |= (unsigned)(p[i] == '"') << i;
		o |= (unsigned)(str_stop[(uint8_t)p[i]] && p[i] != '"') << i;
	}
	*quotes = q;
	return o;
#endif
}

/* p is just past the opening quote.  Returns the byte after the closing
 * quote, or NULL with *reason and *errp set. */
static inline __attribute__((always_inline)) const char *
parse_string(struct vd_arena *a, const char *p, const char *end, const char **s, size_t *n,
	     const char **reason, const char **errp)
{
	const char *start = p;
	bool esc = false;
	for (;;) {
		/* Byte by byte (unrolled) through the first 16 bytes: each
		 * test is a branch the CPU predicts and runs past, where a
		 * position computed from a bit mask would make the next
		 * token wait for it; short strings (most keys and values)
		 * end here.  Longer ones go on 16 bytes at a time. */
		uint8_t c;
		if (VD_LIKELY(end - p >= 16)) {
#define STOP_AT(i) \
	if (str_stop[(uint8_t)p[(i)]]) { \
		p += (i); \
		goto stopped; \
	}
			STOP_AT(0) STOP_AT(1) STOP_AT(2) STOP_AT(3)
			STOP_AT(4) STOP_AT(5) STOP_AT(6) STOP_AT(7)
			STOP_AT(8) STOP_AT(9) STOP_AT(10) STOP_AT(11)
			STOP_AT(12) STOP_AT(13) STOP_AT(14) STOP_AT(15)
#undef STOP_AT
			p += 16;
		}
		for (;;) {
			if (VD_UNLIKELY(end - p < 16)) {
				while (p < end && !str_stop[(uint8_t)*p])
					p++;
				if (VD_UNLIKELY(p >= end))
					goto unterminated;
				break;
			}
			unsigned quotes, other = str_scan16(p, &quotes), all = quotes | other;
			if (!all) {
				p += 16;
				continue;
			}
			p += __builtin_ctz(all);
			if (VD_LIKELY(all & -all & quotes))
				goto closed;
			break;
		}
stopped:
		c = (uint8_t)*p;
		if (c == '"')
			break;
		if (c == '\\') {
			if (end - p < 2)
				goto unterminated;
			esc = true;
			p += 2;
			continue;
		}
		if (c < 0x20) {
			*reason = "control character in string";
			*errp = p;
			return NULL;
		}
		size_t k = cj_utf8_seq((const unsigned char *)p, (const unsigned char *)end);
		if (!k) {
			*reason = "invalid UTF-8 in string";
			*errp = p;
			return NULL;
		}
		p += k;
	}
closed:
	if (VD_LIKELY(!esc)) {
		*s = start;
		*n = (size_t)(p - start);
		return p + 1;
	}
	size_t bad;
	if (cj_unescape(a, start, (size_t)(p - start), s, n, &bad, reason) < 0) {
		*errp = start + bad;
		return NULL;
	}
	return p + 1;
unterminated:
	*reason = "unterminated string";
	*errp = start - 1;
	return NULL;
}

/* true, false or null at p (< end) into v: the byte after it, or NULL. */
static inline __attribute__((always_inline)) const char *
parse_literal(struct vd_value *v, const char *p, const char *end)
{
	if (*p == 't' && end - p >= 4 && memcmp(p, "true", 4) == 0) {
		v->type = VD_BOOL;
		v->v.b = true;
		return p + 4;
	}
	if (*p == 'f' && end - p >= 5 && memcmp(p, "false", 5) == 0) {
		v->type = VD_BOOL;
		v->v.b = false;
		return p + 5;
	}
	if (*p == 'n' && end - p >= 4 && memcmp(p, "null", 4) == 0) {
		v->type = VD_NULL;
		return p + 4;
	}
	return NULL;
}

/* An object member's key and ':' from p (whitespace first) pushed on t.
 * Returns the byte after the ':', or NULL with *reason and *errp set. */
static inline __attribute__((always_inline)) const char *
parse_key(struct tree_builder *t, struct vd_arena *a, const char *p, const char *end,
	  const char **reason, const char **errp)
{
	p = skip_ws(p, end);
	if (VD_UNLIKELY(p >= end || *p != '"')) {
		*reason = p < end && *p == '}' ? "member expected (trailing comma?)"
					       : "string key expected";
		*errp = p;
		return NULL;
	}
	const char *k;
	size_t kn;
	const char *q = parse_string(a, p + 1, end, &k, &kn, reason, errp);
	if (!q)
		return NULL;
	tb_key(t, k, kn);
	p = VD_LIKELY(q < end && *q == ':') ? q : skip_ws(q, end);
	if (VD_UNLIKELY(p >= end || *p != ':')) {
		*reason = "':' expected after key";
		*errp = p;
		return NULL;
	}
	return p + 1;
}

static int fb_decode(struct vd_arena *a, const char *bytes, size_t len,
		     const struct vd_limits *lim, struct vd_value **out,
		     struct vd_codec_error *err)
{
	int rc = cj_json_decode_begin(&bytes, len, &lim, err, NULL);
	if (rc < 0)
		return rc;
	struct tree_builder t;
	tb_init(&t, a, cj_max_depth(lim));
	const char *p = bytes, *end = bytes + len, *q;
	const char *reason = NULL;
	int code = VD_EPROTO;
	/* Where the next value goes: a member's value slot, set by the key;
	 * NULL for an array element or the root (tb_slot places it). */
	struct vd_value *v = NULL;
	bool in_obj = false;   /* the innermost open container is an object */

value:
	p = skip_ws(p, end);
	if (VD_UNLIKELY(p >= end)) {
		reason = t.depth ? "unexpected end of input" : "empty input, value expected";
		goto fail;
	}
	if (VD_LIKELY(*p == '"')) {
		if (!v)
			v = tb_slot(&t);
		v->type = VD_STRING;
		q = parse_string(a, p + 1, end, &v->v.s.ptr, &v->v.s.len, &reason, &p);
		if (!q)
			goto fail;
		p = q;
		goto after_value;
	}
	switch (*p) {
	case '{':
	case '[':
		in_obj = *p == '{';
		if (!tb_begin(&t, in_obj))
			goto too_deep;
		v = NULL;
		p = skip_ws(p + 1, end);
		if (p < end && *p == (in_obj ? '}' : ']')) {
			p++;
			goto close;
		}
		if (in_obj)
			goto key;
		goto value;
	case 't':
	case 'f':
	case 'n':
		if (!v)
			v = tb_slot(&t);
		q = parse_literal(v, p, end);
		if (!q)
			goto bad_literal;
		p = q;
		break;
	default:
		if (*p != '-' && (unsigned char)(*p - '0') >= 10) {
			reason = (*p == ']' || *p == '}') ? "value expected (trailing comma?)"
							  : "unexpected character, value expected";
			goto fail;
		}
		if (!v)
			v = tb_slot(&t);
		q = cj_number(p, end, v, &reason);
		if (!q)
			goto fail;
		p = q;
		break;
	}
after_value:
	if (in_obj) {
		if (VD_LIKELY(p < end && *p == ',')) {
			p++;
			goto key;
		}
		p = skip_ws(p, end);
		if (VD_UNLIKELY(p >= end)) {
			reason = "unexpected end of input";
			goto fail;
		}
		if (*p == ',') {
			p++;
			goto key;
		}
		if (*p == '}') {
			p++;
			goto close;
		}
		reason = "',' or '}' expected";
		goto fail;
	}
	if (t.depth == 0)
		goto done;
	v = NULL;
	if (VD_LIKELY(p < end && *p == ',')) {
		p++;
		goto value;
	}
	p = skip_ws(p, end);
	if (VD_UNLIKELY(p >= end)) {
		reason = "unexpected end of input";
		goto fail;
	}
	if (*p == ',') {
		p++;
		goto value;
	}
	if (*p == ']') {
		p++;
		goto close;
	}
	reason = "',' or ']' expected";
	goto fail;
close:
	tb_end(&t);
	in_obj = t.depth && t.frames[t.depth - 1].is_obj;
	goto after_value;
key:
	q = parse_key(&t, a, p, end, &reason, &p);
	if (!q)
		goto fail;
	v = &t.mems[t.nmems - 1].val;
	p = q;
	goto value;
done:
	p = skip_ws(p, end);
	if (p < end) {
		reason = "trailing characters after the value";
		goto fail;
	}
	*out = arena_alloc(a, sizeof(**out));
	**out = t.root;
	tb_fini(&t);
	return 0;
bad_literal:
	reason = "invalid literal";
	goto fail;
too_deep:
	code = VD_EDEPTH;
	reason = "nesting too deep";
fail:
	tb_fini(&t);
	cj_set_err(err, code, (size_t)(p - bytes), reason);
	return code;
}

const struct vd_codec codec_fallback = {
	.name = "fallback",
	.content_type = "application/json",
	.is_json = true,
	.decode = fb_decode,
	.writer_init = json_writer_init,
};
