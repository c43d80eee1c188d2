/* tests/fuzz/fuzz_codec_diff.c - differential libFuzzer target: the fallback
 * and yajl decoders must agree on every input.
 *
 * Agreement means: both accept and decode equal trees, or both refuse with
 * the same class of error (VD_EPROTO malformed, VD_EDEPTH too deep).  The
 * error offsets and reasons may differ (yajl reports where its lexer stood).
 * yajl's own leniencies are not differences here, because the yajl codec
 * restores the strict rules (see codecs/yajl.c): numbers are converted by our
 * code, escaped strings re-decoded from the raw input, unescaped strings
 * re-checked for strict UTF-8, raw \f and \v refused.
 *
 * One documented exception: a document that is malformed AND too deep may be
 * classified differently when the two parsers meet the two faults in a
 * different order; both still refuse it.
 *
 * auto (fallback under 4 KiB, yajl above, yajl again for what fallback
 * refuses) is held to more: yajl's answer exactly, the same value or the
 * same error code, offset and reason. */
#include "fuzz_codec_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct vd_codec *fb = codec_find("fallback"), *yj = codec_find("yajl"),
			      *au = codec_find("auto");
	struct vd_arena a;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error e1, e2;
	struct vd_value *v1 = NULL, *v2 = NULL;
	char *copy = malloc(size ? size : 1);
	if (size)
		memcpy(copy, data, size);
	arena_init(&a, 0);
	int r1 = fb->decode(&a, copy, size, &lim, &v1, &e1);
	int r2 = yj->decode(&a, copy, size, &lim, &v2, &e2);
	FUZZ_CHECK((r1 == 0) == (r2 == 0), "fallback %d (%s at %zu), yajl %d (%s at %zu)", r1,
		   r1 ? e1.reason : "-", r1 ? e1.offset : 0, r2, r2 ? e2.reason : "-",
		   r2 ? e2.offset : 0);
	if (r1 == 0) {
		FUZZ_CHECK(vd_value_equal(v1, v2), "fallback and yajl decode different values");
	} else if (r1 != r2) {
		/* the documented exception: malformed and too deep at once */
		FUZZ_CHECK((r1 == VD_EDEPTH || r2 == VD_EDEPTH),
			   "fallback %d (%s at %zu), yajl %d (%s at %zu)", r1, e1.reason,
			   e1.offset, r2, e2.reason, e2.offset);
	}
	struct vd_codec_error e3;
	struct vd_value *v3 = NULL;
	int r3 = au->decode(&a, copy, size, &lim, &v3, &e3);
	FUZZ_CHECK(r3 == r2, "auto %d (%s), yajl %d (%s)", r3, r3 ? e3.reason : "-", r2,
		   r2 ? e2.reason : "-");
	if (r3 == 0)
		FUZZ_CHECK(vd_value_equal(v3, v2), "auto and yajl decode different values");
	else
		FUZZ_CHECK(e3.code == e2.code && e3.offset == e2.offset &&
				   strcmp(e3.reason, e2.reason) == 0,
			   "auto '%s' at %zu, yajl '%s' at %zu", e3.reason, e3.offset, e2.reason,
			   e2.offset);
	arena_free(&a);
	free(copy);
	return 0;
}
