/* rpc/params.c - central parameter handling: defaults parsed once when a
 * verb is declared, positional→named mapping by declared order, type checks
 * before any handler runs, and the argument accessors handlers use. */
#include "rpc_int.h"
#include "../common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct vd_value *rpc_value_clone(struct vd_arena *a, const struct vd_value *v)
{
	struct vd_value *out = arena_alloc(a, sizeof(*out));
	*out = *v;
	switch (v->type) {
	case VD_STRING:
		out->v.s.ptr = arena_strndup(a, v->v.s.ptr ? v->v.s.ptr : "", v->v.s.len);
		break;
	case VD_ARRAY:
		out->v.arr.items = v->v.arr.n ? arena_alloc(a, v->v.arr.n * sizeof(struct vd_value)) : NULL;
		for (size_t i = 0; i < v->v.arr.n; i++)
			out->v.arr.items[i] = *rpc_value_clone(a, &v->v.arr.items[i]);
		break;
	case VD_OBJECT:
		out->v.obj.members = v->v.obj.n ? arena_alloc(a, v->v.obj.n * sizeof(struct vd_member)) : NULL;
		for (size_t i = 0; i < v->v.obj.n; i++) {
			const struct vd_member *m = &v->v.obj.members[i];
			struct vd_member *o = &out->v.obj.members[i];
			o->key = arena_strndup(a, m->key ? m->key : "", m->klen);
			o->klen = m->klen;
			o->val = *rpc_value_clone(a, &m->val);
		}
		break;
	default:
		break;
	}
	return out;
}

/* "a string of decimal digits" that fits int64 */
static bool digits_int64(const char *s, size_t n, int64_t *out)
{
	if (n == 0 || n > 19)
		return false;
	uint64_t acc = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		acc = acc * 10 + (uint64_t)(s[i] - '0');
	}
	if (acc > (uint64_t)INT64_MAX)
		return false;
	if (out)
		*out = (int64_t)acc;
	return true;
}

/* A decimal integer string with an optional leading '-' that fits int64
 * (what VDSM's int() takes from the engine, e.g. "4096" or "-1"). */
static bool signed_int64(const char *s, size_t n, int64_t *out)
{
	if (n > 0 && s[0] == '-') {
		int64_t m;
		/* -9223372036854775808 does not fit the positive side */
		if (n == 20 && memcmp(s + 1, "9223372036854775808", 19) == 0) {
			if (out)
				*out = INT64_MIN;
			return true;
		}
		if (!digits_int64(s + 1, n - 1, &m))
			return false;
		if (out)
			*out = -m;
		return true;
	}
	return digits_int64(s, n, out);
}

/* VDSM's boolean reading of a string (conv.tobool): "true"/"false" in any
 * case, or "1"/"0".  Returns 1, 0, or -1 when the string is neither. */
static int string_bool(const char *s, size_t n)
{
	if ((n == 4 && strncasecmp(s, "true", 4) == 0) || (n == 1 && s[0] == '1'))
		return 1;
	if ((n == 5 && strncasecmp(s, "false", 5) == 0) || (n == 1 && s[0] == '0'))
		return 0;
	return -1;
}

/* The one reading of an int-or-string value (RPC_T_INTSTR params, and the
 * members handlers read with rpc_member_int): a JSON integer, or a string
 * of decimal digits within int64 (VDSM's sizes and counts, which the
 * engine sends as Long.toString).  NULL when v reads (*out set when out is
 * non-NULL), else why not: "" for a JSON type that is neither. */
static const char *intstr_read(const struct vd_value *v, int64_t *out)
{
	switch (v->type) {
	case VD_INT:
		if (out)
			*out = v->v.i;
		return NULL;
	case VD_UINT:
		return "out of range";
	case VD_STRING:
		return digits_int64(v->v.s.ptr, v->v.s.len, out) ? NULL
			: "not a string of decimal digits within int64";
	default:
		return "";
	}
}

/* NULL when v fits t, else a short reason.  Strings VDSM coerces are
 * accepted here and converted by coerce(): "true"/"false" for a bool, a
 * decimal string for an int, a string of digits for an int-or-string. */
static const char *type_mismatch(enum rpc_ptype t, const struct vd_value *v)
{
	switch (t) {
	case RPC_T_ANY:
		return NULL;
	case RPC_T_STRING:
		return v->type == VD_STRING ? NULL : "";
	case RPC_T_UUID:
		if (v->type != VD_STRING)
			return "";
		return vd_is_uuid(v->v.s.ptr, v->v.s.len) ? NULL : "not a canonical UUID";
	case RPC_T_INT:
		if (v->type == VD_INT)
			return NULL;
		if (v->type == VD_STRING)
			return signed_int64(v->v.s.ptr, v->v.s.len, NULL) ? NULL
				: "not a decimal integer within int64";
		return v->type == VD_UINT ? "out of range" : "";
	case RPC_T_INTSTR:
		return intstr_read(v, NULL);
	case RPC_T_NUMBER:
		return v->type == VD_INT || v->type == VD_UINT || v->type == VD_DOUBLE ? NULL : "";
	case RPC_T_BOOL:
		if (v->type == VD_STRING)
			return string_bool(v->v.s.ptr, v->v.s.len) >= 0 ? NULL
				: "not true/false";
		return v->type == VD_BOOL ? NULL : "";
	case RPC_T_OBJECT:
		return v->type == VD_OBJECT ? NULL : "";
	case RPC_T_ARRAY:
		return v->type == VD_ARRAY ? NULL : "";
	}
	return "";
}

/* The canonical value of an accepted a (a string VDSM would coerce becomes
 * the bool or int it stands for), allocated in ar; a itself otherwise. */
static const struct vd_value *coerce(struct vd_arena *ar, enum rpc_ptype t,
				     const struct vd_value *a)
{
	if (a->type != VD_STRING || (t != RPC_T_BOOL && t != RPC_T_INT && t != RPC_T_INTSTR))
		return a;
	struct vd_value *c = arena_alloc(ar, sizeof(*c));
	memset(c, 0, sizeof(*c));
	if (t == RPC_T_BOOL) {
		c->type = VD_BOOL;
		c->v.b = string_bool(a->v.s.ptr, a->v.s.len) == 1;
	} else if (t == RPC_T_INT) {
		c->type = VD_INT;
		signed_int64(a->v.s.ptr, a->v.s.len, &c->v.i);
	} else {
		c->type = VD_INT;
		intstr_read(a, &c->v.i);
	}
	return c;
}

/* A short, printable rendering of a received value for an error message:
 * strings quoted and cut at 40 bytes, numbers and booleans as they are. */
static void render_value(char *out, size_t outlen, const struct vd_value *v)
{
	switch (v->type) {
	case VD_STRING: {
		size_t n = VD_MIN(v->v.s.len, 40), o = 0;
		char tmp[48];
		for (size_t i = 0; i < n; i++) {
			unsigned char ch = (unsigned char)v->v.s.ptr[i];
			tmp[o++] = ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '"' && ch != '\\'
				? (char)ch : '?';
		}
		tmp[o] = '\0';
		snprintf(out, outlen, " '%s%s'", tmp, v->v.s.len > n ? "..." : "");
		break;
	}
	case VD_INT:
		snprintf(out, outlen, " %lld", (long long)v->v.i);
		break;
	case VD_UINT:
		snprintf(out, outlen, " %llu", (unsigned long long)v->v.u);
		break;
	case VD_DOUBLE:
		snprintf(out, outlen, " %g", v->v.d);
		break;
	case VD_BOOL:
		snprintf(out, outlen, " %s", v->v.b ? "true" : "false");
		break;
	default:
		out[0] = '\0';
		break;
	}
}

/* The answer to a mistyped value, one form for a param and for a member of
 * one: "param 'vmParams.memSize' of VM.create must be int-or-string, got
 * string 'lots': not a string of decimal digits within int64". */
static int fail_mistyped(struct rpc_call *c, const char *param, const char *member,
			 enum rpc_ptype t, const struct vd_value *a, const char *bad)
{
	char shown[64];
	render_value(shown, sizeof(shown), a);
	return rpc_fail(c, RPC_E_PARAMS, "param '%s%s%s' of %s must be %s, got %s%s%s%s",
			param, member ? "." : "", member ? member : "", c->verb->name,
			rpc_ptype_name(t), vd_type_name(a->type), shown, *bad ? ": " : "", bad);
}

static const struct vd_codec *json_codec(void)
{
	const struct vd_codec *const *l = codec_list();
	for (size_t i = 0; l[i]; i++)
		if (l[i]->is_json)
			return l[i];
	return NULL;
}

int rpc_params_compile(struct rpc_engine *e, struct rpc_verb_rt *v, char *why, size_t whylen)
{
	const struct rpc_verb_decl *d = v->decl;
	if (d->nparams > RPC_MAX_PARAMS || (d->nparams && !d->params)) {
		snprintf(why, whylen, "verb '%s' declares %u params (max %d)", d->name,
			 d->nparams, RPC_MAX_PARAMS);
		return VD_EINVAL;
	}
	for (unsigned i = 0; i < d->nparams; i++) {
		const struct rpc_param *p = &d->params[i];
		v->defs[i] = NULL;
		if (!p->name) {
			snprintf(why, whylen, "verb '%s': param %u has no name", d->name, i);
			return VD_EINVAL;
		}
		for (unsigned j = 0; j < i; j++)
			if (strcmp(d->params[j].name, p->name) == 0) {
				snprintf(why, whylen, "verb '%s': param '%s' declared twice",
					 d->name, p->name);
				return VD_EINVAL;
			}
		if (!p->def)
			continue;
		const struct vd_codec *jc = json_codec();
		if (!jc) {
			snprintf(why, whylen, "verb '%s': no JSON codec to parse defaults", d->name);
			return VD_EINVAL;
		}
		struct vd_arena tmp;
		arena_init(&tmp, 1024);
		struct vd_limits lim = VD_LIMITS_DEFAULT;
		struct vd_value *val = NULL;
		struct vd_codec_error cerr = { 0, NULL, 0 };
		int rc = jc->decode(&tmp, p->def, strlen(p->def), &lim, &val, &cerr);
		const char *bad = NULL;
		if (rc < 0 || !val)
			bad = cerr.reason ? cerr.reason : "does not parse";
		else if (val->type != VD_NULL && type_mismatch(p->type, val))
			bad = "does not match the param type";
		if (bad) {
			snprintf(why, whylen, "verb '%s': default of param '%s' (%s) %s",
				 d->name, p->name, p->def, bad);
			arena_free(&tmp);
			return VD_EINVAL;
		}
		if (val->type != VD_NULL)   /* stored as a given value would be bound */
			v->defs[i] = rpc_value_clone(&e->defs_arena, coerce(&tmp, p->type, val));
		arena_free(&tmp);
	}
	return 0;
}

int rpc_params_bind(const struct rpc_verb_rt *v, const struct vd_value *params,
		    struct rpc_call *c)
{
	const struct rpc_verb_decl *d = v->decl;
	size_t npos = 0;
	if (params && params->type == VD_ARRAY) {
		npos = params->v.arr.n;
		if (npos > d->nparams)
			return rpc_fail(c, RPC_E_PARAMS, "%s takes %u params, %zu given",
					d->name, d->nparams, npos);
	}
	for (unsigned i = 0; i < d->nparams; i++) {
		const struct rpc_param *p = &d->params[i];
		const struct vd_value *a = NULL;
		if (params && params->type == VD_OBJECT)
			a = vd_obj_get(params, p->name);
		else if (i < npos)
			a = &params->v.arr.items[i];
		if (a && a->type == VD_NULL && p->type != RPC_T_ANY)
			a = NULL;  /* an explicit null is an absent value */
		if (!a) {
			if (p->required)
				return rpc_fail(c, RPC_E_PARAMS, "missing required param '%s' of %s",
						p->name, d->name);
			c->args[i] = v->defs[i];
			continue;
		}
		const char *bad = type_mismatch(p->type, a);
		if (bad)
			return fail_mistyped(c, p->name, NULL, p->type, a, bad);
		a = coerce(c->arena, p->type, a);
		if (a->type == VD_STRING) {
			/* handlers get NUL-terminated strings (decoded ones may
			 * point into the request body) */
			struct vd_value *s = arena_alloc(c->arena, sizeof(*s));
			s->type = VD_STRING;
			s->v.s.ptr = arena_strndup(c->arena, a->v.s.ptr ? a->v.s.ptr : "", a->v.s.len);
			s->v.s.len = a->v.s.len;
			a = s;
		}
		c->args[i] = a;
	}
	for (unsigned i = d->nparams; i < RPC_MAX_PARAMS; i++)
		c->args[i] = NULL;
	return 0;
}

/* ---- accessors ------------------------------------------------------------ */

const struct vd_value *rpc_arg(const struct rpc_call *c, const char *name)
{
	const struct rpc_verb_decl *d = c->verb;
	for (unsigned i = 0; i < d->nparams; i++)
		if (strcmp(d->params[i].name, name) == 0)
			return c->args[i];
	log_error("rpc: verb %s has no param '%s' (programmer error)", d->name, name);
	abort();
}

const char *rpc_arg_str(const struct rpc_call *c, const char *name, size_t *len)
{
	const struct vd_value *v = rpc_arg(c, name);
	if (!v || v->type != VD_STRING) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = v->v.s.len;
	return v->v.s.ptr;
}

int64_t rpc_arg_int(const struct rpc_call *c, const char *name, int64_t dflt)
{
	const struct vd_value *v = rpc_arg(c, name);
	int64_t out;
	return v && intstr_read(v, &out) == NULL ? out : dflt;
}

int rpc_member_int(struct rpc_call *c, const char *param, const struct vd_value *obj,
		   const char *key, int64_t lo, int64_t hi, int64_t dflt, int64_t *out)
{
	const struct vd_value *v = obj && obj->type == VD_OBJECT ? vd_obj_get(obj, key) : NULL;
	if (!v || v->type == VD_NULL) {   /* absent, as for a param */
		*out = dflt;
		return 0;
	}
	int64_t x = 0;
	const char *bad = intstr_read(v, &x);
	char range[64];
	if (!bad && (x < lo || x > hi)) {
		snprintf(range, sizeof(range), "not within %lld..%lld", (long long)lo, (long long)hi);
		bad = range;
	}
	if (bad)
		return fail_mistyped(c, param, key, RPC_T_INTSTR, v, bad);
	*out = x;
	return 0;
}

bool rpc_arg_bool(const struct rpc_call *c, const char *name, bool dflt)
{
	const struct vd_value *v = rpc_arg(c, name);
	return v && v->type == VD_BOOL ? v->v.b : dflt;
}
