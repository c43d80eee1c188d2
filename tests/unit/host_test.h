/* tests/unit/host_test.h - decoding a host verb's output back with a real
 * codec and typed key lookups, shared by the host unit tests (header only:
 * static inline). */
#ifndef VD_TESTS_HOST_TEST_H
#define VD_TESTS_HOST_TEST_H

#include <check.h>
#include <stdio.h>

#include "codecs/codec.h"
#include "common/arena.h"
#include "common/buf.h"

/* b decoded with codec into a; the test fails (after printing the input)
 * when it does not decode. */
static inline const struct vd_value *decode_with(const struct vd_codec *codec, struct vd_arena *a,
						 const struct vd_buf *b)
{
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err;
	int rc = codec->decode(a, b->data, b->len, &lim, &v, &err);
	if (rc != 0)
		fprintf(stderr, "decode: %s at %zu: %.*s\n", err.reason, err.offset,
			(int)b->len, b->data);
	ck_assert_int_eq(rc, 0);
	return v;
}

/* Member k of object o; the test fails when o is NULL, k is missing or its
 * value is not of type t. */
static inline const struct vd_value *get(const struct vd_value *o, const char *k, enum vd_type t)
{
	ck_assert_ptr_nonnull(o);
	const struct vd_value *v = vd_obj_get(o, k);
	if (!v)
		ck_abort_msg("missing key %s", k);
	if (v->type != t)
		ck_abort_msg("key %s is %s, want %s", k, vd_type_name(v->type), vd_type_name(t));
	return v;
}

#endif
