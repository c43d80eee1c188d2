/* codecs/value.h - the decoded value model: a tagged tree in a per-request
 * arena.
 *
 * Integers that fit int64 are VD_INT; positive integers above INT64_MAX that
 * fit uint64 are VD_UINT; every other number is VD_DOUBLE.  Strings carry
 * their length and may contain NUL; a string without escapes points into the
 * decoder's input, an escaped one is copied into the arena.  Object members
 * keep their input order; duplicate keys are kept (lookups return the first).
 * The tree is owned by the arena it was decoded into. */
#ifndef VD_CODECS_VALUE_H
#define VD_CODECS_VALUE_H

#include "../common/vd.h"

enum vd_type {
	VD_NULL,
	VD_BOOL,
	VD_INT,
	VD_UINT,
	VD_DOUBLE,
	VD_STRING,
	VD_ARRAY,
	VD_OBJECT,
};

struct vd_member;

struct vd_value {
	enum vd_type type;
	union {
		bool b;
		int64_t i;
		uint64_t u;
		double d;
		struct { const char *ptr; size_t len; } s;
		struct { struct vd_value *items; size_t n; } arr;
		struct { struct vd_member *members; size_t n; } obj;
	} v;
};

struct vd_member {
	const char *key;
	size_t klen;
	struct vd_value val;
};

/* Sets v to the non-negative integer u as the model holds it: VD_INT when
 * u fits int64, else VD_UINT. */
static inline void vd_set_uint(struct vd_value *v, uint64_t u)
{
	if (u <= (uint64_t)INT64_MAX) {
		v->type = VD_INT;
		v->v.i = (int64_t)u;
	} else {
		v->type = VD_UINT;
		v->v.u = u;
	}
}

/* "null", "bool", "int", "uint", "double", "string", "array", "object". */
const char *vd_type_name(enum vd_type t);

/* First member of obj named key (NUL-terminated), or NULL (also when obj is
 * not an object). */
const struct vd_value *vd_obj_get(const struct vd_value *obj, const char *key);
const struct vd_value *vd_obj_getn(const struct vd_value *obj, const char *key, size_t klen);

/* Deep equality; INT/UINT/DOUBLE compare by type and value (an int 1 and a
 * double 1.0 differ), doubles bitwise-equal or both NaN count as equal. */
bool vd_value_equal(const struct vd_value *a, const struct vd_value *b);

/* True when v is a string equal to the NUL-terminated s. */
bool vd_str_eq(const struct vd_value *v, const char *s);

#endif
