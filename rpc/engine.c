/* rpc/engine.c - JSON-RPC 2.0 engine: declarations and bindings sealed into
 * a hash table, the envelope checks of PROTOCOL.md section 3 in order,
 * single and batch requests, notifications, and the response written
 * through the request codec's streaming writer straight into one buffer.
 *
 * Synchronous requests run on the dispatching thread with a reused scratch
 * arena and output buffer.  RPC_F_BLOCKING verbs are copied into a job (own
 * arena, output buffer, id and args: the request body may be freed when
 * rpc_dispatch returns), handed to the submit hook, and answered from its
 * done callback on the dispatching thread. */
#include "rpc_int.h"
#include "../common/log.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCRATCH_ARENA 8192
#define SCRATCH_KEEP (64u * 1024)

/* ---- building the engine ------------------------------------------------ */

struct rpc_engine *rpc_engine_new(const struct vd_limits *lim)
{
	struct rpc_engine *e = xcalloc(1, sizeof(*e));
	struct vd_limits dflt = VD_LIMITS_DEFAULT;
	e->lim = lim ? *lim : dflt;
	arena_init(&e->defs_arena, 4096);
	arena_init(&e->scratch_arena, SCRATCH_ARENA);
	buf_init(&e->scratch_out);
	return e;
}

void rpc_engine_free(struct rpc_engine *e)
{
	if (!e)
		return;
	free(e->verbs);
	free(e->binds);
	free(e->table);
	arena_free(&e->defs_arena);
	arena_free(&e->scratch_arena);
	buf_free(&e->scratch_out);
	free(e);
}

static void decl_error(struct rpc_engine *e, const char *why)
{
	log_error("rpc: %s", why);
	if (!e->decl_err[0])
		snprintf(e->decl_err, sizeof(e->decl_err), "%s", why);
}

int rpc_engine_declare(struct rpc_engine *e, const struct rpc_verb_decl *decls)
{
	assert(!e->sealed);
	int rc = 0;
	for (const struct rpc_verb_decl *d = decls; d && d->name; d++) {
		if (e->nverbs == e->cap_verbs) {
			e->cap_verbs = e->cap_verbs ? e->cap_verbs * 2 : 64;
			e->verbs = xrealloc(e->verbs, e->cap_verbs * sizeof(*e->verbs));
		}
		struct rpc_verb_rt *v = &e->verbs[e->nverbs];
		memset(v, 0, sizeof(*v));
		v->decl = d;
		v->name_len = strlen(d->name);
		char why[256];
		if (rpc_params_compile(e, v, why, sizeof(why)) < 0) {
			decl_error(e, why);
			rc = VD_EINVAL;
			continue;
		}
		e->nverbs++;
	}
	return rc;
}

int rpc_engine_declare_schema(struct rpc_engine *e)
{
	int rc = 0;
	for (size_t f = 0; rpc_schema_families[f]; f++)
		if (rpc_engine_declare(e, rpc_schema_families[f]) < 0)
			rc = VD_EINVAL;
	return rc;
}

int rpc_engine_bind(struct rpc_engine *e, const struct rpc_binding *b, void *app)
{
	assert(!e->sealed);
	for (; b && b->name; b++) {
		if (!b->fn) {
			char why[256];
			snprintf(why, sizeof(why), "handler '%s' is bound to NULL", b->name);
			decl_error(e, why);
			return VD_EINVAL;
		}
		if (e->nbinds == e->cap_binds) {
			e->cap_binds = e->cap_binds ? e->cap_binds * 2 : 64;
			e->binds = xrealloc(e->binds, e->cap_binds * sizeof(*e->binds));
		}
		e->binds[e->nbinds++] = (struct rpc_bind_rt){ b->name, b->fn, app };
	}
	return 0;
}

static uint32_t name_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 16777619u;
	}
	return h;
}

static struct rpc_verb_rt *lookup(const struct rpc_engine *e, const char *name, size_t n)
{
	if (!e->table)
		return NULL;
	size_t i = name_hash(name, n) & e->tmask;
	for (;;) {
		uint32_t slot = e->table[i];
		if (!slot)
			return NULL;
		struct rpc_verb_rt *v = &e->verbs[slot - 1];
		if (v->name_len == n && memcmp(v->decl->name, name, n) == 0)
			return v;
		i = (i + 1) & e->tmask;
	}
}

int rpc_engine_seal(struct rpc_engine *e, char *why, size_t whylen)
{
	assert(!e->sealed);
	if (e->decl_err[0]) {
		snprintf(why, whylen, "%s", e->decl_err);
		return VD_EINVAL;
	}
	size_t size = 16;
	while (size < e->nverbs * 2 + 1)
		size *= 2;
	e->table = xcalloc(size, sizeof(*e->table));
	e->tmask = size - 1;
	for (size_t k = 0; k < e->nverbs; k++) {
		const char *name = e->verbs[k].decl->name;
		size_t n = strlen(name);
		if (lookup(e, name, n)) {
			snprintf(why, whylen, "verb '%s' is declared twice", name);
			goto fail;
		}
		size_t i = name_hash(name, n) & e->tmask;
		while (e->table[i])
			i = (i + 1) & e->tmask;
		e->table[i] = (uint32_t)(k + 1);
	}
	for (size_t k = 0; k < e->nbinds; k++) {
		struct rpc_verb_rt *v = lookup(e, e->binds[k].name, strlen(e->binds[k].name));
		if (!v) {
			snprintf(why, whylen, "handler '%s' is bound but the verb is not declared",
				 e->binds[k].name);
			goto fail;
		}
		if (v->fn) {
			snprintf(why, whylen, "verb '%s' is bound twice", e->binds[k].name);
			goto fail;
		}
		if (v->decl->flags & RPC_F_UNIMPLEMENTED) {
			snprintf(why, whylen, "handler '%s' is bound but the schema declares the "
				 "verb not implemented (set implemented: true in api/)",
				 e->binds[k].name);
			goto fail;
		}
		v->fn = e->binds[k].fn;
		v->app = e->binds[k].app;
	}
	for (size_t k = 0; k < e->nverbs; k++)
		if (!e->verbs[k].fn && !(e->verbs[k].decl->flags & RPC_F_UNIMPLEMENTED)) {
			snprintf(why, whylen, "verb '%s' is declared but has no handler",
				 e->verbs[k].decl->name);
			goto fail;
		}
	e->sealed = true;
	return 0;
fail:
	for (size_t k = 0; k < e->nverbs; k++)
		e->verbs[k].fn = NULL;
	free(e->table);
	e->table = NULL;
	return VD_EINVAL;
}

void rpc_engine_set_overloaded(struct rpc_engine *e, bool overloaded)
{
	e->overloaded = overloaded;
}

void rpc_engine_set_submit(struct rpc_engine *e, rpc_submit_fn fn, void *pool)
{
	e->submit = fn;
	e->pool = pool;
}

void rpc_engine_set_ready(struct rpc_engine *e, bool ready)
{
	__atomic_store_n(&e->ready, ready, __ATOMIC_RELEASE);
}

bool rpc_engine_ready(const struct rpc_engine *e)
{
	return __atomic_load_n(&e->ready, __ATOMIC_ACQUIRE);
}

const struct rpc_verb_decl *rpc_engine_find(const struct rpc_engine *e, const char *name)
{
	struct rpc_verb_rt *v = lookup(e, name, strlen(name));
	return v ? v->decl : NULL;
}

/* ---- response pieces ----------------------------------------------------- */

static void write_head(struct vd_writer *w, const struct vd_value *id)
{
	vw_begin_object(w);
	vw_keyz(w, "jsonrpc");
	vw_string(w, "2.0", 3);
	vw_keyz(w, "id");
	/* the usual ids without vw_value's walk: what it writes for them */
	if (!id)
		vw_null(w);
	else if (id->type == VD_INT)
		vw_int(w, id->v.i);
	else if (id->type == VD_STRING)
		vw_string(w, id->v.s.ptr, id->v.s.len);
	else
		vw_value(w, id);
}

/* A whole error response {"jsonrpc","id","error"} into out. */
static void write_error_response(const struct vd_codec *codec, struct vd_buf *out,
				 const struct vd_value *id, enum rpc_err err, const char *detail)
{
	struct vd_writer w;
	codec->writer_init(&w, out);
	write_head(&w, id);
	vw_keyz(&w, "error");
	rpc_write_error(&w, err, detail);
	vw_end_object(&w);
}

/* Run the handler with the writer positioned after the id; writes the
 * "result" member, or rolls back to the checkpoint and writes "error". */
static void borrow_drop(struct rpc_borrow *b)
{
	if (b && b->bytes) {
		b->release(b->hold);
		b->bytes = NULL;
		b->len = 0;
	}
}

void rpc_result_borrow(struct rpc_call *c, const char *bytes, size_t len,
		       void (*release)(void *hold), void *hold)
{
	struct rpc_borrow *b = c->borrow;
	if (!b || b->bytes || !c->w->out) {
		vw_raw(c->w, bytes, len);
		release(hold);
		return;
	}
	vw_raw(c->w, "", 0);  /* the separator and the writer's state of one value */
	b->bytes = bytes;
	b->len = len;
	b->at = c->w->out->len;
	b->release = release;
	b->hold = hold;
}

static enum rpc_err run_verb(const struct rpc_verb_rt *v, struct rpc_call *c, struct vd_writer *w)
{
	/* the checkpoint to rewind to on error: the writer's state at this
	 * depth (codec.h), the whole struct only past VW_MARK_DEPTH */
	struct vd_writer_mark mark;
	struct vd_writer *saved = NULL;
	size_t saved_len = w->out->len;
	bool marked = vw_mark(w, &mark);
	if (!marked) {
		saved = xmalloc(sizeof(*saved));
		*saved = *w;
	}
	unsigned saved_depth = w->depth;
	vw_keyz(w, "result");
	size_t result_at = w->out->len;
	c->w = w;
	c->err = RPC_OK;
	c->err_detail[0] = '\0';
	int rc = v->fn(c);
	if (rc == 0 && (w->error || w->depth != saved_depth)) {
		rpc_fail(c, RPC_E_INTERNAL, "handler of %s wrote an invalid result", v->decl->name);
		rc = -1;
	}
	if (rc == 0) {
		if (w->out->len == result_at && !(c->borrow && c->borrow->bytes))
			vw_bool(w, true);
		free(saved);
		return RPC_OK;
	}
	borrow_drop(c->borrow);  /* the output it was part of is rewound */
	if (c->err == RPC_OK)
		rpc_fail(c, RPC_E_INTERNAL, "handler of %s failed", v->decl->name);
	if (marked) {
		vw_rewind(w, &mark);
	} else {
		*w = *saved;
		free(saved);
		w->out->len = saved_len;
	}
	vw_keyz(w, "error");
	rpc_write_error(w, c->err, c->err_detail);
	return c->err;
}

/* Method names from the wire in messages: printable ASCII, bounded. */
static void sanitize(char *dst, size_t cap, const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k + 4 < cap; i++) {
		unsigned char ch = (unsigned char)s[i];
		dst[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	if (n > 0 && k + 4 >= cap && k < n) {
		memcpy(dst + k, "...", 3);
		k += 3;
	}
	dst[k] = '\0';
}

/* ---- one request ------------------------------------------------------- */

struct rpc_batch;

struct rpc_job {
	struct rpc_engine *e;
	struct rpc_verb_rt *v;
	struct rpc_call call;
	struct vd_arena arena;
	struct vd_buf out;
	const struct vd_value *id;   /* copy in arena; NULL for a notification */
	const struct vd_codec *codec;
	rpc_reply_fn reply;
	void *rctx;
	struct rpc_batch *batch;     /* or NULL */
	size_t slot;
	uint64_t start_ns;
	enum rpc_err result;
};

struct rpc_batch {
	struct rpc_engine *e;
	const struct vd_codec *codec;
	rpc_reply_fn reply;
	void *rctx;
	size_t n, pending;
	struct vd_buf *slots;        /* len 0: no response (notification) */
};

/* Where one request is answered. */
struct req_ctx {
	struct rpc_engine *e;
	const struct vd_codec *codec;
	const char *flow_id;
	const char *local_addr;
	rpc_reply_fn reply;
	void *rctx;
	struct vd_arena *arena;
	uint64_t start_ns;
	struct rpc_batch *batch;
	size_t slot;
	bool pieces;               /* rpc_request_info.pieces */
	struct rpc_borrow borrow;  /* a borrowed result (top level only) */
};

enum { REQ_DONE, REQ_ASYNC };

static void finish_batch(struct rpc_batch *b)
{
	struct vd_buf out = VD_BUF_INIT;
	struct rpc_response r = { .codec = b->codec };
	bool any = false;
	for (size_t i = 0; i < b->n; i++)
		any |= b->slots[i].len > 0;
	if (any) {
		struct vd_writer w;
		b->codec->writer_init(&w, &out);
		vw_begin_array(&w);
		for (size_t i = 0; i < b->n; i++)
			if (b->slots[i].len)
				vw_raw(&w, b->slots[i].data, b->slots[i].len);
		vw_end_array(&w);
		r.bytes = out.data;
		r.len = out.len;
	}
	b->reply(b->rctx, &r);
	buf_free(&out);
	for (size_t i = 0; i < b->n; i++)
		buf_free(&b->slots[i]);
	free(b->slots);
	free(b);
}

static void job_run(void *arg)
{
	struct rpc_job *j = arg;
	struct vd_writer w;
	j->codec->writer_init(&w, &j->out);
	write_head(&w, j->id);
	j->result = run_verb(j->v, &j->call, &w);
	vw_end_object(&w);
	if (!j->id)
		buf_reset(&j->out);  /* notification: executed, not answered */
}

static void job_done(void *arg)
{
	struct rpc_job *j = arg;
	rpc_metrics_record(j->v, j->result, vd_now_ns() - j->start_ns);
	if (j->batch) {
		struct rpc_batch *b = j->batch;
		struct vd_buf tmp = b->slots[j->slot];
		b->slots[j->slot] = j->out;
		j->out = tmp;
		if (--b->pending == 0)
			finish_batch(b);
	} else {
		struct rpc_response r = { .bytes = j->out.len ? j->out.data : NULL,
					  .len = j->out.len, .codec = j->codec, .id = j->id };
		j->reply(j->rctx, &r);
	}
	buf_free(&j->out);
	arena_free(&j->arena);
	free(j);
}

static int submit_job(struct req_ctx *rq, struct rpc_verb_rt *v, const struct rpc_call *c,
		      const struct vd_value *id)
{
	struct rpc_engine *e = rq->e;
	struct rpc_job *j = xcalloc(1, sizeof(*j));
	arena_init(&j->arena, 2048);
	buf_init(&j->out);
	j->e = e;
	j->v = v;
	j->call = *c;
	j->call.borrow = NULL;  /* the dispatcher's request is gone by then */
	j->call.arena = &j->arena;
	for (unsigned i = 0; i < v->decl->nparams; i++)
		if (c->args[i] && c->args[i] != v->defs[i])
			j->call.args[i] = rpc_value_clone(&j->arena, c->args[i]);
	j->call.flow_id = c->flow_id ? arena_strndup(&j->arena, c->flow_id, strlen(c->flow_id)) : NULL;
	j->call.local_addr = c->local_addr ? arena_strndup(&j->arena, c->local_addr,
							   strlen(c->local_addr)) : NULL;
	j->id = id ? rpc_value_clone(&j->arena, id) : NULL;
	j->codec = rq->codec;
	j->reply = rq->reply;
	j->rctx = rq->rctx;
	j->batch = rq->batch;
	j->slot = rq->slot;
	j->start_ns = rq->start_ns;
	int rc = e->submit(e->pool, job_run, job_done, j);
	if (rc < 0) {
		buf_free(&j->out);
		arena_free(&j->arena);
		free(j);
	}
	return rc;
}

/* The envelope members of a request object in one pass over its members
 * (four vd_obj_get calls were four passes, each with a strlen and a memcmp
 * per member): the first member of each name, as vd_obj_get finds it, or
 * NULL. */
struct envelope {
	const struct vd_value *id, *jsonrpc, *method, *params;
};

static void envelope_find(const struct vd_value *req, struct envelope *env)
{
	env->id = env->jsonrpc = env->method = env->params = NULL;
	const struct vd_member *m = req->v.obj.members;
	for (size_t i = 0, n = req->v.obj.n; i < n; i++) {
		const struct vd_value **slot;
		switch (m[i].klen) {
		case 2:
			if (memcmp(m[i].key, "id", 2))
				continue;
			slot = &env->id;
			break;
		case 6:
			if (!memcmp(m[i].key, "method", 6))
				slot = &env->method;
			else if (!memcmp(m[i].key, "params", 6))
				slot = &env->params;
			else
				continue;
			break;
		case 7:
			if (memcmp(m[i].key, "jsonrpc", 7))
				continue;
			slot = &env->jsonrpc;
			break;
		default:
			continue;
		}
		if (!*slot)
			*slot = &m[i].val;
	}
}

static bool is_jsonrpc_2(const struct vd_value *v)
{
	return v && v->type == VD_STRING && v->v.s.len == 3 && !memcmp(v->v.s.ptr, "2.0", 3);
}

/* Handle one request value; a response (if any) is appended to out.  Returns
 * REQ_ASYNC when a job was submitted (it answers later), else REQ_DONE with
 * *id_out set to the id answered (NULL when null or not readable). */
static int process_one(struct req_ctx *rq, const struct vd_value *req, struct vd_buf *out,
		       const struct vd_value **id_out)
{
	struct rpc_engine *e = rq->e;
	const struct vd_value *id = NULL;
	bool notify = true;
	const char *bad = NULL;
	char detail[320];

	*id_out = NULL;
	if (req->type != VD_OBJECT) {
		bad = "a request must be an object";
		notify = false;
		goto invalid;
	}
	struct envelope env;
	envelope_find(req, &env);
	const struct vd_value *idv = env.id;
	bool bad_id = false;
	if (idv) {
		switch (idv->type) {
		case VD_STRING: case VD_INT: case VD_UINT: case VD_DOUBLE:
			id = idv;
			notify = false;
			break;
		case VD_NULL:
			break;
		default:
			bad_id = true;
			break;
		}
	}
	if (!is_jsonrpc_2(env.jsonrpc)) {
		bad = "member 'jsonrpc' must be \"2.0\"";
		goto invalid;
	}
	const struct vd_value *mv = env.method;
	if (!mv || mv->type != VD_STRING) {
		bad = "member 'method' must be a string";
		goto invalid;
	}
	const struct vd_value *pv = env.params;
	if (pv && pv->type != VD_OBJECT && pv->type != VD_ARRAY) {
		snprintf(detail, sizeof(detail), "member 'params' of %.*s must be an object or an array",
			 (int)VD_MIN(mv->v.s.len, 128), mv->v.s.ptr);
		sanitize(detail, sizeof(detail), detail, strlen(detail));
		bad = detail;
		goto invalid;
	}
	if (bad_id) {
		bad = "member 'id' must be a string, a number or null";
		id = NULL;
		goto invalid;
	}

	struct rpc_verb_rt *v = lookup(e, mv->v.s.ptr, mv->v.s.len);
	if (!v) {
		rpc_counter_inc(&e->em.unknown_methods);
		if (!notify) {
			sanitize(detail, sizeof(detail), mv->v.s.ptr, mv->v.s.len);
			write_error_response(rq->codec, out, id, RPC_E_NO_METHOD, detail);
		}
		*id_out = id;
		return REQ_DONE;
	}

	if (v->decl->flags & RPC_F_UNIMPLEMENTED) {
		/* declared by the API schema, no handler in this vdsmd */
		if (!notify) {
			snprintf(detail, sizeof(detail), "%s (declared by the API, not implemented "
				 "by vdsmd)", v->decl->name);
			write_error_response(rq->codec, out, id, RPC_E_NO_METHOD, detail);
		}
		rpc_metrics_record(v, RPC_E_NO_METHOD, vd_now_ns() - rq->start_ns);
		*id_out = id;
		return REQ_DONE;
	}

	struct rpc_call c;
	c.verb = v->decl;
	c.arena = rq->arena;
	c.app = v->app;
	c.flow_id = rq->flow_id;
	c.local_addr = rq->local_addr;
	c.w = NULL;
	c.err = RPC_OK;
	c.err_detail[0] = '\0';
	/* JSON only: the msgpack writer compacts a small container's header
	 * when it closes, moving the bytes after it (the borrowed spot too) */
	c.borrow = rq->batch || !rq->codec->is_json ? NULL : &rq->borrow;
	enum rpc_err res = RPC_OK;
	if (!(v->decl->flags & RPC_F_ALWAYS) && !rpc_engine_ready(e)) {
		res = RPC_E_RECOVERING;
		c.err_detail[0] = '\0';
	} else if (e->overloaded && !(v->decl->flags & RPC_F_ALWAYS)) {
		res = RPC_E_NO_RESOURCES;  /* near the memory budget: no new work */
		c.err_detail[0] = '\0';
	} else if (rpc_params_bind(v, pv, &c) < 0) {
		res = c.err;
	} else if ((v->decl->flags & RPC_F_BLOCKING) && e->submit) {
		int rc = submit_job(rq, v, &c, notify ? NULL : id);
		if (rc == 0)
			return REQ_ASYNC;
		res = rpc_err_from_vd(rc);
		snprintf(c.err_detail, sizeof(c.err_detail), "worker queue full, %s not run",
			 v->decl->name);
	}
	*id_out = id;
	if (res != RPC_OK) {
		if (!notify)
			write_error_response(rq->codec, out, id, res, c.err_detail);
		rpc_metrics_record(v, res, vd_now_ns() - rq->start_ns);
		return REQ_DONE;
	}
	size_t start = out->len;
	struct vd_writer w;
	rq->codec->writer_init(&w, out);
	write_head(&w, id);
	res = run_verb(v, &c, &w);
	vw_end_object(&w);
	if (notify) {
		out->len = start;
		borrow_drop(c.borrow);
	}
	if (res != RPC_OK && res != RPC_E_RECOVERING)
		vd_log_flow(VD_LOG_DEBUG, rq->flow_id, "rpc: %s failed: %s: %s", v->decl->name,
			    rpc_err_message(res), c.err_detail);
	rpc_metrics_record(v, res, vd_now_ns() - rq->start_ns);
	return REQ_DONE;

invalid:
	rpc_counter_inc(&e->em.invalid_requests);
	write_error_response(rq->codec, out, id, RPC_E_INVALID_REQ, bad);
	*id_out = id;
	return REQ_DONE;
}

/* ---- dispatch ------------------------------------------------------------ */

static void run_batch(struct req_ctx *rq, const struct vd_value *root)
{
	struct rpc_batch *b = xcalloc(1, sizeof(*b));
	b->e = rq->e;
	b->codec = rq->codec;
	b->reply = rq->reply;
	b->rctx = rq->rctx;
	b->n = root->v.arr.n;
	b->slots = xcalloc(b->n, sizeof(*b->slots));
	b->pending = 1;  /* guard while members are being started */
	rpc_counter_inc(&rq->e->em.batches);
	rq->batch = b;
	for (size_t i = 0; i < b->n; i++) {
		const struct vd_value *id;
		rq->slot = i;
		b->pending++;
		if (process_one(rq, &root->v.arr.items[i], &b->slots[i], &id) == REQ_DONE)
			b->pending--;
	}
	if (--b->pending == 0)
		finish_batch(b);
}

static void dispatch(struct rpc_engine *e, const struct rpc_request_info *info, bool pieces,
		     const char *body, size_t len, rpc_reply_fn reply, void *ctx);

void rpc_dispatch(struct rpc_engine *e, const struct rpc_request_info *info,
		  const char *body, size_t len, rpc_reply_fn reply, void *ctx)
{
	dispatch(e, info, false, body, len, reply, ctx);
}

void rpc_dispatch_pieces(struct rpc_engine *e, const struct rpc_request_info *info,
			 const char *body, size_t len, rpc_reply_fn reply, void *ctx)
{
	dispatch(e, info, true, body, len, reply, ctx);
}

static void dispatch(struct rpc_engine *e, const struct rpc_request_info *info, bool pieces,
		     const char *body, size_t len, rpc_reply_fn reply, void *ctx)
{
	assert(e->sealed && info && info->codec && reply);
	struct vd_arena local_arena;
	struct vd_buf local_out = VD_BUF_INIT;
	struct vd_arena *arena = &e->scratch_arena;
	struct vd_buf *out = &e->scratch_out;
	bool nested = e->scratch_busy;
	if (nested) {  /* called again from inside a reply callback */
		arena_init(&local_arena, SCRATCH_ARENA);
		arena = &local_arena;
		out = &local_out;
	}
	e->scratch_busy = true;

	struct req_ctx rq = {
		.e = e, .codec = info->codec, .flow_id = info->flow_id,
		.local_addr = info->local_addr,
		.reply = reply, .rctx = ctx, .arena = arena, .start_ns = vd_now_ns(),
		.pieces = pieces,
	};
	const struct vd_value *id = NULL;
	struct vd_value *root = NULL;
	struct vd_codec_error cerr = { 0, NULL, 0 };
	int rc = info->codec->decode(arena, body, len, &e->lim, &root, &cerr);
	bool answered_now = true;
	if (rc == VD_ETOOBIG && cerr.reason == vd_reason_too_many_values) {
		/* refused before the work: -32600, like an over-long batch */
		char detail[96];
		snprintf(detail, sizeof(detail), "request has more than %zu values (max_elements)",
			 e->lim.max_elements);
		rpc_counter_inc(&e->em.invalid_requests);
		write_error_response(info->codec, out, NULL, RPC_E_INVALID_REQ, detail);
	} else if (rc < 0 || !root) {
		char detail[160];
		snprintf(detail, sizeof(detail), "%s at byte %zu",
			 cerr.reason ? cerr.reason : vd_strerror(rc), cerr.offset);
		rpc_counter_inc(&e->em.parse_errors);
		write_error_response(info->codec, out, NULL, RPC_E_PARSE, detail);
	} else if (root->type == VD_OBJECT) {
		answered_now = process_one(&rq, root, out, &id) == REQ_DONE;
	} else if (root->type == VD_ARRAY && root->v.arr.n == 1) {
		/* vdsm-client sends one-element batches and expects an object */
		answered_now = process_one(&rq, &root->v.arr.items[0], out, &id) == REQ_DONE;
	} else if (root->type == VD_ARRAY && root->v.arr.n > RPC_MAX_BATCH) {
		char detail[96];
		snprintf(detail, sizeof(detail), "batch of %zu requests (at most %d)",
			 root->v.arr.n, RPC_MAX_BATCH);
		rpc_counter_inc(&e->em.invalid_requests);
		write_error_response(info->codec, out, NULL, RPC_E_INVALID_REQ, detail);
	} else if (root->type == VD_ARRAY && root->v.arr.n > 1) {
		run_batch(&rq, root);
		answered_now = false;
	} else {
		rpc_counter_inc(&e->em.invalid_requests);
		write_error_response(info->codec, out, NULL, RPC_E_INVALID_REQ,
				     root->type == VD_ARRAY ? "empty batch"
				     : "a request must be an object or a non-empty array");
	}
	if (answered_now) {
		struct rpc_borrow *b = &rq.borrow;
		if (b->bytes && !rq.pieces) {
			/* one piece: the borrowed result copied in */
			buf_reserve(out, b->len);
			memmove(out->data + b->at + b->len, out->data + b->at, out->len - b->at);
			memcpy(out->data + b->at, b->bytes, b->len);
			out->len += b->len;
			borrow_drop(b);
		}
		struct rpc_response r = { .bytes = out->len ? out->data : NULL, .len = out->len,
					  .codec = info->codec, .id = id,
					  .ext = b->bytes, .ext_len = b->len, .at = b->at };
		reply(ctx, &r);
		borrow_drop(b);
	}

	if (nested) {
		arena_free(&local_arena);
		buf_free(&local_out);
	} else {
		arena_reset(arena);
		buf_reset(out);
		if (out->cap > SCRATCH_KEEP)
			buf_free(out);
		e->scratch_busy = false;
	}
}
