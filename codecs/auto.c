/* codecs/auto.c - "auto", the default JSON codec: each request body goes to
 * the decoder that is faster for its size, and every reply is written by
 * the one JSON emitter (json_emit.c) that yajl and fallback share, so the
 * bytes are those of either.
 *
 * A body under VD_AUTO_SMALL_BODY (4 KiB: every request the engine polls with,
 * Host.ping2 is ~100 bytes) is decoded by the fallback parser: yajl's
 * set-up per document (yajl_alloc, its lexer and state stack) and its lexer
 * taking a byte and a call at a time were a third of the instructions of a
 * Host.ping2 (issue 25).  Larger bodies (rare: setupNetworks, storage
 * metadata) stay yajl's, the default codec before auto.
 *
 * The two accept the same documents and decode the same values (the
 * differential fuzzer, tests/fuzz/fuzz_codec_diff.c), but word their errors
 * differently (offsets, reasons).  A small body the fallback parser refuses
 * is decoded again by yajl, so that the error a client sees is yajl's
 * whatever the body's size: only refused requests pay for the second
 * parse. */
#include "codec_int.h"
#include "codecs.h"

static int auto_decode(struct vd_arena *a, const char *bytes, size_t len,
		       const struct vd_limits *lim, struct vd_value **out,
		       struct vd_codec_error *err)
{
	if (len < VD_AUTO_SMALL_BODY && codec_fallback.decode(a, bytes, len, lim, out, err) == 0)
		return 0;
	return codec_yajl.decode(a, bytes, len, lim, out, err);
}

const struct vd_codec codec_auto = {
	.name = "auto",
	.content_type = "application/json",
	.is_json = true,
	.decode = auto_decode,
	.writer_init = json_writer_init,
};
