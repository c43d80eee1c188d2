/* tests/fuzz/fuzz_rpc.c - request bodies straight into the JSON-RPC engine,
 * with every codec, a few test verbs covering every parameter type, a
 * failing verb, and a blocking verb run through a fake submit hook AFTER the
 * input buffer is freed (catches reads of the body from async jobs).
 *
 * Oracles (besides ASan/UBSan): the reply callback runs exactly once per
 * dispatch, and every reply decodes with the request's codec into an object
 * (or, for batches, an array of objects). */
#include <stdlib.h>
#include <string.h>

#include "../../rpc/rpc.h"

static int h_ping(struct rpc_call *c)
{
	(void)c;
	return 0;
}

static int h_echo(struct rpc_call *c)
{
	const struct vd_value *v = rpc_arg(c, "value");
	if (v)
		vw_value(c->w, v);
	else
		vw_null(c->w);
	return 0;
}

static int h_types(struct rpc_call *c)
{
	struct vd_writer *w = c->w;
	size_t n;
	const char *s = rpc_arg_str(c, "s", &n);
	vw_begin_object(w);
	vw_keyz(w, "s");
	vw_string(w, s, n);
	if (s[n] != '\0')
		__builtin_trap();  /* strings must be NUL-terminated */
	const char *u = rpc_arg_str(c, "u", NULL);
	if (u)
		vw_kstr(w, "u", u);
	vw_kint(w, "i", rpc_arg_int(c, "i", 0));
	vw_kint(w, "is", rpc_arg_int(c, "is", 0));
	vw_kbool(w, "b", rpc_arg_bool(c, "b", false));
	if (rpc_arg(c, "n")) {
		vw_keyz(w, "n");
		vw_value(w, rpc_arg(c, "n"));
	}
	vw_keyz(w, "o");
	vw_value(w, rpc_arg(c, "o"));
	if (rpc_arg(c, "a")) {
		vw_keyz(w, "a");
		vw_value(w, rpc_arg(c, "a"));
	}
	vw_end_object(w);
	return 0;
}

static int h_fail(struct rpc_call *c)
{
	int64_t e = rpc_arg_int(c, "err", 0);
	vw_begin_array(c->w);
	vw_int(c->w, e);
	if (e <= 0 || e >= RPC_E__COUNT)
		return -1;
	return rpc_fail(c, (enum rpc_err)e, "fuzz %s \xc3\xa9 %lld", c->verb->name, (long long)e);
}

static const struct rpc_param p_echo[] = {
	{ "value", RPC_T_ANY, false, "{\"d\":[1,2.5,\"x\",null,true]}", NULL },
};
static const struct rpc_param p_types[] = {
	{ "s", RPC_T_STRING, true, NULL, NULL },
	{ "u", RPC_T_UUID, false, NULL, NULL },
	{ "i", RPC_T_INT, false, "7", NULL },
	{ "is", RPC_T_INTSTR, false, "\"42\"", NULL },
	{ "n", RPC_T_NUMBER, false, NULL, NULL },
	{ "b", RPC_T_BOOL, false, "true", NULL },
	{ "o", RPC_T_OBJECT, false, "{}", NULL },
	{ "a", RPC_T_ARRAY, false, NULL, NULL },
};
static const struct rpc_param p_fail[] = {
	{ "err", RPC_T_INT, true, NULL, NULL },
};

static const struct rpc_verb_decl decls[] = {
	{ .name = "Host.ping2", .flags = RPC_F_ALWAYS },
	{ .name = "T.echo", .params = p_echo, .nparams = 1 },
	{ .name = "T.types", .params = p_types, .nparams = 8 },
	{ .name = "T.fail", .params = p_fail, .nparams = 1 },
	{ .name = "T.slow", .params = p_echo, .nparams = 1, .flags = RPC_F_BLOCKING },
	{ .name = NULL },
};

static const struct rpc_binding binds[] = {
	{ "Host.ping2", h_ping }, { "T.echo", h_echo }, { "T.types", h_types },
	{ "T.fail", h_fail }, { "T.slow", h_echo }, { NULL, NULL },
};

/* fake pool: jobs are run after rpc_dispatch returned and the body is gone */
struct fake_job {
	void (*job)(void *);
	void (*done)(void *);
	void *arg;
};
static struct fake_job jobs[3];
static size_t njobs;

static int fake_submit(void *pool, void (*job)(void *), void (*done)(void *), void *arg)
{
	(void)pool;
	if (njobs >= 3)
		return VD_EBUSY;
	jobs[njobs++] = (struct fake_job){ job, done, arg };
	return 0;
}

static struct rpc_engine *eng;
static int replies;
static struct vd_arena check_arena;

static void check_reply(void *ctx, const struct rpc_response *r)
{
	const struct vd_codec *cd = ctx;
	replies++;
	if (!r->bytes)
		return;
	if (r->codec != cd)
		__builtin_trap();
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	lim.max_depth = 200;
	struct vd_value *v = NULL;
	struct vd_codec_error err;
	arena_reset(&check_arena);
	if (cd->decode(&check_arena, r->bytes, r->len, &lim, &v, &err) != 0)
		__builtin_trap();
	if (v->type == VD_ARRAY) {
		if (v->v.arr.n == 0)
			__builtin_trap();
		for (size_t i = 0; i < v->v.arr.n; i++)
			if (v->v.arr.items[i].type != VD_OBJECT)
				__builtin_trap();
	} else if (v->type != VD_OBJECT || !vd_str_eq(vd_obj_get(v, "jsonrpc"), "2.0") ||
		   !vd_obj_get(v, "id")) {
		__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!eng) {
		struct vd_limits lim = VD_LIMITS_DEFAULT;
		eng = rpc_engine_new(&lim);
		char why[256];
		if (rpc_engine_declare(eng, decls) || rpc_engine_bind(eng, binds, NULL) ||
		    rpc_engine_seal(eng, why, sizeof(why)))
			abort();
		rpc_engine_set_submit(eng, fake_submit, NULL);
		arena_init(&check_arena, 4096);
	}
	/* ready most of the time; every 8th size exercises code 99 */
	rpc_engine_set_ready(eng, (size & 7) != 5);
	const struct vd_codec *const *l = codec_list();
	for (size_t k = 0; l[k]; k++) {
		char *body = malloc(size ? size : 1);
		if (size)
			memcpy(body, data, size);
		struct rpc_request_info info = { l[k], "fuzz-flow", "fuzz", NULL };
		replies = 0;
		njobs = 0;
		rpc_dispatch(eng, &info, body, size, check_reply, (void *)l[k]);
		memset(body, 0xA5, size);
		free(body);
		for (size_t j = 0; j < njobs; j++)
			jobs[j].job(jobs[j].arg);
		for (size_t j = 0; j < njobs; j++)
			jobs[j].done(jobs[j].arg);
		if (replies != 1)
			__builtin_trap();
	}
	return 0;
}
