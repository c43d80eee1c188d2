/* codecs/value.c - helpers over the decoded value tree and the codec-neutral
 * parts of the streaming writer. */
#include "codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *vd_type_name(enum vd_type t)
{
	static const char *const names[] = { "null", "bool", "int", "uint",
					     "double", "string", "array", "object" };
	return (unsigned)t < VD_ARRAY_SIZE(names) ? names[t] : "?";
}

const struct vd_value *vd_obj_getn(const struct vd_value *obj, const char *key, size_t klen)
{
	if (!obj || obj->type != VD_OBJECT)
		return NULL;
	for (size_t i = 0; i < obj->v.obj.n; i++) {
		const struct vd_member *m = &obj->v.obj.members[i];
		if (m->klen == klen && memcmp(m->key, key, klen) == 0)
			return &m->val;
	}
	return NULL;
}

const struct vd_value *vd_obj_get(const struct vd_value *obj, const char *key)
{
	return vd_obj_getn(obj, key, strlen(key));
}

bool vd_str_eq(const struct vd_value *v, const char *s)
{
	size_t n = strlen(s);
	return v && v->type == VD_STRING && v->v.s.len == n && memcmp(v->v.s.ptr, s, n) == 0;
}

bool vd_value_equal(const struct vd_value *a, const struct vd_value *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case VD_NULL: return true;
	case VD_BOOL: return a->v.b == b->v.b;
	case VD_INT: return a->v.i == b->v.i;
	case VD_UINT: return a->v.u == b->v.u;
	case VD_DOUBLE:
		if (isnan(a->v.d) && isnan(b->v.d))
			return true;
		/* bit equality on purpose: 0.0 and -0.0 are different values here */
		return memcmp(&a->v.d, &b->v.d, sizeof(double)) == 0;  // NOLINT(bugprone-suspicious-memory-comparison,cert-exp42-c,cert-flp37-c)
	case VD_STRING:
		return a->v.s.len == b->v.s.len &&
		       (a->v.s.len == 0 || memcmp(a->v.s.ptr, b->v.s.ptr, a->v.s.len) == 0);
	case VD_ARRAY:
		if (a->v.arr.n != b->v.arr.n)
			return false;
		for (size_t i = 0; i < a->v.arr.n; i++)
			if (!vd_value_equal(&a->v.arr.items[i], &b->v.arr.items[i]))
				return false;
		return true;
	case VD_OBJECT:
		if (a->v.obj.n != b->v.obj.n)
			return false;
		for (size_t i = 0; i < a->v.obj.n; i++) {
			const struct vd_member *x = &a->v.obj.members[i], *y = &b->v.obj.members[i];
			if (x->klen != y->klen || (x->klen && memcmp(x->key, y->key, x->klen) != 0) ||
			    !vd_value_equal(&x->val, &y->val))
				return false;
		}
		return true;
	}
	return false;
}

static void vw_vstrf(struct vd_writer *w, const char *fmt, va_list ap)
{
	char tmp[256];
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	if (n < 0) {
		va_end(ap2);
		vw_string(w, "", 0);
		return;
	}
	if ((size_t)n < sizeof(tmp)) {
		vw_string(w, tmp, (size_t)n);
	} else {
		char *big = xmalloc((size_t)n + 1);
		vsnprintf(big, (size_t)n + 1, fmt, ap2);
		vw_string(w, big, (size_t)n);
		free(big);
	}
	va_end(ap2);
}

void vw_kstrf(struct vd_writer *w, const char *k, const char *fmt, ...)
{
	va_list ap;
	vw_keyz(w, k);
	va_start(ap, fmt);
	vw_vstrf(w, fmt, ap);
	va_end(ap);
}

void vw_u64str(struct vd_writer *w, uint64_t v)
{
	char b[24];
	size_t i = sizeof(b);
	do {
		b[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	vw_string(w, b + i, sizeof(b) - i);
}

void vw_kstr_u64(struct vd_writer *w, const char *k, uint64_t v)
{
	vw_keyz(w, k);
	vw_u64str(w, v);
}

void vw_value(struct vd_writer *w, const struct vd_value *v)
{
	if (w->ops->value) {
		w->ops->value(w, v);
		return;
	}
	switch (v->type) {
	case VD_NULL: vw_null(w); break;
	case VD_BOOL: vw_bool(w, v->v.b); break;
	case VD_INT: vw_int(w, v->v.i); break;
	case VD_UINT: vw_uint(w, v->v.u); break;
	case VD_DOUBLE: vw_double(w, v->v.d); break;
	case VD_STRING: vw_string(w, v->v.s.ptr, v->v.s.len); break;
	case VD_ARRAY:
		vw_begin_array(w);
		for (size_t i = 0; i < v->v.arr.n; i++)
			vw_value(w, &v->v.arr.items[i]);
		vw_end_array(w);
		break;
	case VD_OBJECT:
		vw_begin_object(w);
		for (size_t i = 0; i < v->v.obj.n; i++) {
			vw_key(w, v->v.obj.members[i].key, v->v.obj.members[i].klen);
			vw_value(w, &v->v.obj.members[i].val);
		}
		vw_end_object(w);
		break;
	}
}
