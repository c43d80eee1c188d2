/* tests/unit/virt_test.h - fixture for the virt unit tests (header only):
 * a struct vdsmd with a real rpc engine (VM schema + virt_bindings), the
 * virt backend on a real libvirt test:/// URI, and helpers to call verbs
 * and read their replies. */
#ifndef VD_TESTS_VIRT_TEST_H
#define VD_TESTS_VIRT_TEST_H

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libvirt/libvirt.h>

#include "../../vdsmd/virt/virt_int.h"
#include "../../rpc/rpc.h"
#include "../../rpc/schema.h"
#include "../../rpc/event.h"

struct vfx {
	struct vdsmd d;
	struct rpc_engine *e;
	char uri[PATH_MAX + 16];
	struct vd_arena arena;
	char *reply;       /* last reply bytes (NUL-terminated copy in arena) */
	size_t reply_len;
};

static inline void vfx_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* test:///ABS/PATH for a file under the source tree. */
static inline void vfx_file_uri(char *out, size_t n, const char *rel)
{
	char abs[PATH_MAX];
	ck_assert_msg(realpath(rel, abs) != NULL, "realpath %s", rel);
	snprintf(out, n, "test://%s", abs);
}

static inline struct virt_state *vfx_state(struct vfx *f)
{
	return f->d.virt;
}

/* Start the backend on uri; wait for the first snapshot when want_sample. */
static inline void vfx_start(struct vfx *f, const char *uri, bool want_sample)
{
	memset(f, 0, sizeof *f);
	snprintf(f->uri, sizeof f->uri, "%s", uri);
	f->d.cfg.libvirt_uri = f->uri;
	f->d.cfg.vm_sample_interval = 3600;   /* samples come from kicks */
	f->d.codec = codec_find("yajl");
	ck_assert_ptr_nonnull(f->d.codec);
	f->d.bus = event_bus_new(f->d.codec, 1024);
	event_bus_set_enabled(f->d.bus, true);
	f->e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(f->e, rpc_schema_vm), 0);
	ck_assert_int_eq(rpc_engine_bind(f->e, virt_bindings, &f->d), 0);
	char why[256] = "";
	ck_assert_msg(rpc_engine_seal(f->e, why, sizeof why) == 0, "seal: %s", why);
	rpc_engine_set_ready(f->e, true);
	f->d.rpc = f->e;
	arena_init(&f->arena, 1 << 16);
	ck_assert_int_eq(virt_init(&f->d), 0);
	if (!want_sample)
		return;
	for (int i = 0; i < 1000; i++) {
		struct virt_snapshot *s = virt_snapshot_get(f->d.virt);
		if (s) {
			snapshot_put(s);
			return;
		}
		vfx_sleep_ms(10);
	}
	ck_abort_msg("no first sample from %s", uri);
}

static inline void vfx_stop(struct vfx *f)
{
	virt_fini(&f->d);
	rpc_engine_free(f->e);
	event_bus_free(f->d.bus);
	arena_free(&f->arena);
}

/* A fresh sample, taken at least min_gap_ms after the previous one. */
static inline void vfx_resample(struct vfx *f)
{
	uint64_t t = virt_kick(f->d.virt);
	ck_assert(virt_wait_kick(f->d.virt, t, 10000));
}

static inline void vfx_collect(void *ctx, const struct rpc_response *r)
{
	struct vfx *f = ctx;
	/* in the arena: decoded values point into it and must outlive the
	 * next call */
	f->reply = arena_alloc(&f->arena, r->len + 1);
	memcpy(f->reply, r->bytes, r->len);
	f->reply[r->len] = '\0';
	f->reply_len = r->len;
}

/* Call a verb with a JSON params text through JSON codec cd (NULL: yajl);
 * returns the decoded response object. */
static inline const struct vd_value *vfx_call_codec(struct vfx *f, const struct vd_codec *cd,
						     const char *method, const char *params)
{
	size_t n = strlen(params) + strlen(method) + 64;
	char *body = malloc(n);
	snprintf(body, n, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"%s\",\"params\":%s}",
		 method, params);
	f->reply = NULL;
	struct rpc_request_info info = { cd ? cd : codec_find("yajl"), NULL, "test", NULL };
	rpc_dispatch(f->e, &info, body, strlen(body), vfx_collect, f);
	free(body);
	ck_assert_msg(f->reply != NULL, "no reply to %s", method);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err = { 0, NULL, 0 };
	ck_assert_int_eq(info.codec->decode(&f->arena, f->reply, f->reply_len, &lim, &v, &err), 0);
	return v;
}

static inline const struct vd_value *vfx_call(struct vfx *f, const char *method,
					       const char *params)
{
	return vfx_call_codec(f, NULL, method, params);
}

/* The result of a successful call (fails the test on an error reply). */
static inline const struct vd_value *vfx_ok(struct vfx *f, const char *method,
					     const char *params)
{
	const struct vd_value *v = vfx_call(f, method, params);
	const struct vd_value *r = vd_obj_get(v, "result");
	ck_assert_msg(r != NULL, "%s %s failed: %s", method, params, f->reply);
	return r;
}

/* The error code of a failed call (fails the test on success). */
static inline int64_t vfx_err(struct vfx *f, const char *method, const char *params)
{
	const struct vd_value *v = vfx_call(f, method, params);
	const struct vd_value *e = vd_obj_get(v, "error");
	ck_assert_msg(e != NULL, "%s %s succeeded: %s", method, params, f->reply);
	const struct vd_value *code = vd_obj_get(e, "code");
	ck_assert_ptr_nonnull(code);
	ck_assert_int_eq(code->type, VD_INT);
	return code->v.i;
}

/* NUL-terminated copy (in the fixture arena) of a string member. */
static inline const char *vfx_str(struct vfx *f, const struct vd_value *obj, const char *key)
{
	const struct vd_value *v = vd_obj_get(obj, key);
	ck_assert_msg(v != NULL, "no member %s", key);
	ck_assert_msg(v->type == VD_STRING, "member %s is a %s, not a string", key,
		      vd_type_name(v->type));
	return arena_strndup(&f->arena, v->v.s.ptr, v->v.s.len);
}

/* The stats object of vmId in a getAllVmStats/getVMList result, or NULL. */
static inline const struct vd_value *vfx_find_vm(const struct vd_value *list, const char *id)
{
	ck_assert_int_eq(list->type, VD_ARRAY);
	for (size_t i = 0; i < list->v.arr.n; i++)
		if (vd_str_eq(vd_obj_get(&list->v.arr.items[i], "vmId"), id))
			return &list->v.arr.items[i];
	return NULL;
}

#endif
