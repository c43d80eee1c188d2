/* rpc/rpc_int.h - internals shared by the engine's files (engine.c,
 * params.c, errors.c, metrics.c).  Not for use outside rpc/.
 *
 * Threading: the engine is built, sealed and dispatched on one thread (the
 * loop thread).  Handlers of RPC_F_BLOCKING verbs run on a worker with their
 * own copies of everything they read (struct rpc_job in engine.c).  Metrics
 * counters use relaxed atomics so rpc_metrics_format() may run anywhere. */
#ifndef VD_RPC_RPC_INT_H
#define VD_RPC_RPC_INT_H

#include "rpc.h"

/* Latency histogram upper bounds in microseconds (the last bucket is +Inf). */
#define RPC_HIST_BUCKETS 17

struct rpc_verb_metrics {
	uint64_t by_result[RPC_E__COUNT];      /* [RPC_OK] = successes */
	uint64_t hist[RPC_HIST_BUCKETS + 1];   /* not cumulative; last = +Inf */
	uint64_t sum_ns;
};

/* One declared verb after declaration (defaults parsed) and binding. */
struct rpc_verb_rt {
	const struct rpc_verb_decl *decl;
	size_t name_len;
	const struct vd_value *defs[RPC_MAX_PARAMS];  /* parsed defaults or NULL */
	rpc_handler fn;
	void *app;
	struct rpc_verb_metrics m;
};

struct rpc_bind_rt {
	const char *name;
	rpc_handler fn;
	void *app;
};

/* Requests that failed before a verb was found. */
struct rpc_engine_metrics {
	uint64_t parse_errors;      /* -32700 */
	uint64_t invalid_requests;  /* -32600 */
	uint64_t unknown_methods;   /* -32601 */
	uint64_t batches;
};

struct rpc_engine {
	struct vd_limits lim;
	struct rpc_verb_rt *verbs;
	size_t nverbs, cap_verbs;
	struct rpc_bind_rt *binds;
	size_t nbinds, cap_binds;
	/* open-addressing hash: slot = verb index + 1, 0 = empty */
	uint32_t *table;
	size_t tmask;
	bool sealed;
	bool ready;                 /* read/written with atomics */
	rpc_submit_fn submit;
	void *pool;
	struct vd_arena defs_arena; /* parsed defaults, lives with the engine */
	char decl_err[256];         /* first declaration error, reported by seal */
	/* scratch for synchronous dispatch (reused; nested calls allocate) */
	struct vd_arena scratch_arena;
	struct vd_buf scratch_out;
	bool scratch_busy;
	bool overloaded;             /* rpc_engine_set_overloaded */
	struct rpc_engine_metrics em;
};

/* params.c */
/* Parse the JSON defaults of d into e->defs_arena; 0 or VD_EINVAL with a
 * reason in why (naming the verb and param). */
int rpc_params_compile(struct rpc_engine *e, struct rpc_verb_rt *v, char *why, size_t whylen);
/* Validate params (object, array or NULL when absent) against v's schema and
 * fill c->args (top-level strings copied NUL-terminated into c->arena).
 * Returns 0, or -1 with c->err = RPC_E_PARAMS and a detail naming the param. */
int rpc_params_bind(const struct rpc_verb_rt *v, const struct vd_value *params,
		    struct rpc_call *c);
/* Deep copy of v into a (strings NUL-terminated). */
struct vd_value *rpc_value_clone(struct vd_arena *a, const struct vd_value *v);

/* errors.c */
/* Write the "error" member value {"code":..,"message":..} for e and detail. */
void rpc_write_error(struct vd_writer *w, enum rpc_err e, const char *detail);
/* Internal error for a vd_err returned by infrastructure (VD_EBUSY → 1100). */
enum rpc_err rpc_err_from_vd(int vd_err);

/* metrics.c */
void rpc_metrics_record(struct rpc_verb_rt *v, enum rpc_err res, uint64_t ns);

static inline void rpc_counter_inc(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

static inline uint64_t rpc_counter_get(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

#endif
