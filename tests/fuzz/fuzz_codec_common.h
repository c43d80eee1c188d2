/* tests/fuzz/fuzz_codec_common.h - shared checks of the codec fuzz targets.
 * Included by each target (each fuzz_*.c is its own program). */
#ifndef VD_FUZZ_CODEC_COMMON_H
#define VD_FUZZ_CODEC_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"

#define FUZZ_CHECK(cond, ...)                                                    \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "fuzz check failed: %s: ", #cond);       \
			fprintf(stderr, __VA_ARGS__);                            \
			fputc('\n', stderr);                                     \
			abort();                                                 \
		}                                                                \
	} while (0)

/* Encode v with c into b (reset first); the writer must not complain. */
static inline void fuzz_encode(const struct vd_codec *c, const struct vd_value *v,
			       struct vd_buf *b)
{
	struct vd_writer w;
	buf_reset(b);
	c->writer_init(&w, b);
	vw_value(&w, v);
	FUZZ_CHECK(w.error == 0 && w.depth == 0, "%s writer error %d", c->name, w.error);
}

/* v encoded by enc must decode (by dec) to an equal tree. */
static inline void fuzz_round_trip(struct vd_arena *a, const struct vd_codec *enc,
				   const struct vd_codec *dec, const struct vd_value *v)
{
	struct vd_buf b = VD_BUF_INIT;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error e;
	struct vd_value *back;
	fuzz_encode(enc, v, &b);
	int rc = dec->decode(a, b.data, b.len, &lim, &back, &e);
	FUZZ_CHECK(rc == 0, "%s rejected the %s encoding at %zu: %s", dec->name, enc->name,
		   e.offset, e.reason);
	FUZZ_CHECK(vd_value_equal(v, back), "%s -> %s round trip differs", enc->name, dec->name);
	buf_free(&b);
}

/* Decode data with the named codec; on success check round trips through
 * every codec compiled in. */
static inline int fuzz_decode_and_round_trip(const char *name, const uint8_t *data, size_t size)
{
	const struct vd_codec *c = codec_find(name);
	struct vd_arena a;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error e;
	struct vd_value *v;
	/* an exactly sized copy: ASan reports any read past size */
	if (!c)
		return 0;   /* not built in */
	char *copy = malloc(size ? size : 1);
	if (size)
		memcpy(copy, data, size);
	arena_init(&a, 0);
	int rc = c->decode(&a, copy, size, &lim, &v, &e);
	if (rc == 0) {
		for (const struct vd_codec *const *o = codec_list(); *o; o++)
			fuzz_round_trip(&a, *o, *o, v);
		/* and across the two JSON codecs */
		fuzz_round_trip(&a, codec_find("fallback"), codec_find("yajl"), v);
		fuzz_round_trip(&a, codec_find("yajl"), codec_find("fallback"), v);
	} else {
		FUZZ_CHECK(rc == VD_EPROTO || rc == VD_EDEPTH || rc == VD_ETOOBIG, "rc %d", rc);
		FUZZ_CHECK(e.code == rc && e.reason && e.offset <= size, "bad error report");
	}
	arena_free(&a);
	free(copy);
	return 0;
}

#endif
