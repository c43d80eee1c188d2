/* tests/unit/rpc_test.h - test verbs and a reply collector shared by the
 * rpc unit tests (header only: static inline, so unit tests that do not
 * include it are unaffected). */
#ifndef VD_TESTS_RPC_TEST_H
#define VD_TESTS_RPC_TEST_H

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../rpc/rpc.h"
#include "../../codecs/codec.h"

struct test_app {
	int notified;             /* Test.count calls */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool release;             /* Test.block waits until set */
	int blocked;              /* Test.block calls currently waiting */
	int ran;                  /* blocking calls finished */
};

/* ---- handlers ---- */

static inline int th_ping(struct rpc_call *c)
{
	(void)c;
	return 0;
}

static inline int th_echo(struct rpc_call *c)
{
	vw_value(c->w, rpc_arg(c, "value"));
	return 0;
}

static inline int th_count(struct rpc_call *c)
{
	struct test_app *a = c->app;
	__atomic_fetch_add(&a->notified, 1, __ATOMIC_SEQ_CST);
	return 0;
}

/* Writes what it received, by declared name. */
static inline int th_types(struct rpc_call *c)
{
	struct vd_writer *w = c->w;
	size_t slen;
	const char *s = rpc_arg_str(c, "s", &slen);
	vw_begin_object(w);
	vw_keyz(w, "s");
	vw_string(w, s, slen);
	vw_keyz(w, "s_nul");
	vw_bool(w, s[slen] == '\0');
	vw_keyz(w, "u");
	if (rpc_arg(c, "u"))
		vw_strz(w, rpc_arg_str(c, "u", NULL));
	else
		vw_null(w);
	vw_kint(w, "i", rpc_arg_int(c, "i", -1));
	vw_kint(w, "is", rpc_arg_int(c, "is", -1));
	vw_keyz(w, "n");
	if (rpc_arg(c, "n"))
		vw_value(w, rpc_arg(c, "n"));
	else
		vw_null(w);
	vw_kbool(w, "b", rpc_arg_bool(c, "b", false));
	vw_keyz(w, "o");
	vw_value(w, rpc_arg(c, "o"));
	vw_keyz(w, "a");
	if (rpc_arg(c, "a"))
		vw_value(w, rpc_arg(c, "a"));
	else
		vw_null(w);
	vw_end_object(w);
	return 0;
}

/* Fails with the internal error whose index is given. */
static inline int th_fail(struct rpc_call *c)
{
	int64_t e = rpc_arg_int(c, "err", 0);
	vw_begin_object(c->w);  /* partial output must be rolled back */
	vw_kstr(c->w, "junk", "written before failing");
	if (e == 0)
		return -1;  /* failure without rpc_fail → -32603 */
	return rpc_fail(c, (enum rpc_err)e, "detail for %s", c->verb->name);
}

/* Leaves an object open: the engine must answer -32603. */
static inline int th_bad(struct rpc_call *c)
{
	vw_begin_object(c->w);
	return 0;
}

/* BLOCKING: waits until the test sets release. */
static inline int th_block(struct rpc_call *c)
{
	struct test_app *a = c->app;
	pthread_mutex_lock(&a->mu);
	a->blocked++;
	pthread_cond_broadcast(&a->cv);
	while (!a->release)
		pthread_cond_wait(&a->cv, &a->mu);
	a->blocked--;
	a->ran++;
	pthread_mutex_unlock(&a->mu);
	vw_strz(c->w, rpc_arg_str(c, "tag", NULL));
	return 0;
}

/* BLOCKING: echoes its (deep) argument after a short sleep. */
static inline int th_slow_echo(struct rpc_call *c)
{
	struct timespec ts = { 0, 2 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	struct test_app *a = c->app;
	__atomic_fetch_add(&a->ran, 1, __ATOMIC_SEQ_CST);
	vw_value(c->w, rpc_arg(c, "value"));
	return 0;
}

/* Where the request came from: the flow id and local address the
 * transport gave (null when none). */
static inline int th_where(struct rpc_call *c)
{
	vw_begin_object(c->w);
	vw_keyz(c->w, "flow");
	if (c->flow_id)
		vw_strz(c->w, c->flow_id);
	else
		vw_null(c->w);
	vw_keyz(c->w, "local");
	if (c->local_addr)
		vw_strz(c->w, c->local_addr);
	else
		vw_null(c->w);
	vw_end_object(c->w);
	return 0;
}

static const struct rpc_param tp_echo[] = {
	{ "value", RPC_T_ANY, true, NULL, "anything" },
};
static const struct rpc_param tp_types[] = {
	{ "s", RPC_T_STRING, true, NULL, "a string" },
	{ "u", RPC_T_UUID, false, NULL, "a uuid" },
	{ "i", RPC_T_INT, false, "7", "an int" },
	{ "is", RPC_T_INTSTR, false, "\"42\"", "int or digits" },
	{ "n", RPC_T_NUMBER, false, NULL, "a number" },
	{ "b", RPC_T_BOOL, false, "true", "a bool" },
	{ "o", RPC_T_OBJECT, false, "{\"k\":[1,\"x\"]}", "an object" },
	{ "a", RPC_T_ARRAY, false, NULL, "an array" },
};
static const struct rpc_param tp_fail[] = {
	{ "err", RPC_T_INT, true, NULL, "rpc_err value" },
};
static const struct rpc_param tp_block[] = {
	{ "tag", RPC_T_STRING, false, "\"t\"", "returned" },
};

static const struct rpc_verb_decl test_decls[] = {
	{ .name = "Test.ping", .flags = RPC_F_ALWAYS, .result = "true" },
	{ .name = "Test.echo", .params = tp_echo, .nparams = 1, .result = "value" },
	{ .name = "Test.count", .result = "true" },
	{ .name = "Test.types", .params = tp_types, .nparams = VD_ARRAY_SIZE(tp_types) },
	{ .name = "Test.fail", .params = tp_fail, .nparams = 1 },
	{ .name = "Test.bad" },
	{ .name = "Test.block", .params = tp_block, .nparams = 1, .flags = RPC_F_BLOCKING },
	{ .name = "Test.slowEcho", .params = tp_echo, .nparams = 1, .flags = RPC_F_BLOCKING },
	{ .name = "Test.where" },
	{ .name = "Test.slowWhere", .flags = RPC_F_BLOCKING },
	{ .name = NULL },
};

static const struct rpc_binding test_bindings[] = {
	{ "Test.ping", th_ping },
	{ "Test.echo", th_echo },
	{ "Test.count", th_count },
	{ "Test.types", th_types },
	{ "Test.fail", th_fail },
	{ "Test.bad", th_bad },
	{ "Test.block", th_block },
	{ "Test.slowEcho", th_slow_echo },
	{ "Test.where", th_where },
	{ "Test.slowWhere", th_where },
	{ NULL, NULL },
};

static inline void test_app_init(struct test_app *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
}

static inline void test_app_fini(struct test_app *a)
{
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
}

static inline struct rpc_engine *test_engine(struct test_app *app, bool ready)
{
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, test_decls), 0);
	ck_assert_int_eq(rpc_engine_bind(e, test_bindings, app), 0);
	char why[256] = "";
	ck_assert_msg(rpc_engine_seal(e, why, sizeof(why)) == 0, "seal: %s", why);
	rpc_engine_set_ready(e, ready);
	return e;
}

/* ---- reply collector ---- */

struct collected {
	int calls;
	bool had_bytes;
	char *bytes;              /* NUL-terminated copy */
	size_t len;
	bool id_present;
	struct vd_value id;       /* scalar ids only (strings copied) */
	char id_str[128];
	const struct vd_codec *codec;
};

static inline void collect_reply(void *ctx, const struct rpc_response *r)
{
	struct collected *c = ctx;
	c->calls++;
	free(c->bytes);
	c->bytes = NULL;
	c->len = r->len;
	c->had_bytes = r->bytes != NULL;
	if (r->bytes) {
		c->bytes = malloc(r->len + 1);
		memcpy(c->bytes, r->bytes, r->len);
		c->bytes[r->len] = '\0';
	}
	c->codec = r->codec;
	c->id_present = r->id != NULL;
	if (r->id) {
		c->id = *r->id;
		if (r->id->type == VD_STRING) {
			size_t n = r->id->v.s.len < sizeof(c->id_str) - 1 ? r->id->v.s.len : sizeof(c->id_str) - 1;
			memcpy(c->id_str, r->id->v.s.ptr, n);
			c->id_str[n] = '\0';
			c->id.v.s.ptr = c->id_str;
		}
	}
}

static inline void collected_reset(struct collected *c)
{
	free(c->bytes);
	memset(c, 0, sizeof(*c));
}

/* JSON codec the dispatch helpers use: 0 = fallback, 1 = yajl (loop tests
 * run every case with both). */
static int test_json_codec_idx;

static inline void select_json_codec(int i)
{
	test_json_codec_idx = i;
}

static inline const struct vd_codec *json_codec_for_tests(void)
{
	const struct vd_codec *c = codec_find(test_json_codec_idx ? "yajl" : "fallback");
	ck_assert_ptr_nonnull(c);
	return c;
}

/* Dispatch a NUL-terminated JSON body with codec cd; the body is a heap copy
 * freed right after rpc_dispatch returns (the engine must not keep it). */
static inline void dispatch_with(struct rpc_engine *e, const struct vd_codec *cd,
				 const char *body, struct collected *out)
{
	struct rpc_request_info info = { cd, "flow-1", "test", NULL };
	size_t n = strlen(body);
	char *copy = malloc(n + 1);
	memcpy(copy, body, n + 1);
	rpc_dispatch(e, &info, copy, n, collect_reply, out);
	memset(copy, 'X', n);
	free(copy);
}

static inline void dispatch_json(struct rpc_engine *e, const char *body, struct collected *out)
{
	dispatch_with(e, json_codec_for_tests(), body, out);
}

/* Dispatch and require exactly one reply equal to want (NULL: no bytes). */
#define ck_dispatch(e, body, want) do { \
	struct collected col_ = { 0 }; \
	dispatch_json((e), (body), &col_); \
	ck_assert_int_eq(col_.calls, 1); \
	if ((want) == NULL) \
		ck_assert_msg(!col_.had_bytes, "expected no reply to %s, got %s", (body), col_.bytes); \
	else \
		ck_assert_msg(col_.bytes && strcmp(col_.bytes, (want) ? (want) : "") == 0, \
			      "request %s\n  got  %s\n  want %s", (body), \
			      col_.bytes ? col_.bytes : "(none)", (want) ? (want) : ""); \
	collected_reset(&col_); \
} while (0)

/* Decode a response with the codec (for structure checks). */
static inline struct vd_value *decode_reply(struct vd_arena *a, const struct vd_codec *cd,
					    const char *bytes, size_t len)
{
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err = { 0, NULL, 0 };
	ck_assert_int_eq(cd->decode(a, bytes, len, &lim, &v, &err), 0);
	return v;
}

#endif
