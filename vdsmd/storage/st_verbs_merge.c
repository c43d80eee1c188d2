/* vdsmd/storage/st_verbs_merge.c - cold merge: StoragePool.prepareMerge,
 * SDM.merge and StoragePool.finalizeMerge (st_op_merge.c, st_jobs_merge.c). */
#include "st_verbs.h"

#include <stdio.h>
#include <string.h>

#define ST_MAX_GENERATION 999   /* VDSM's sc.MAX_GENERATION */

/* VDSM's SubchainInfo: sd_id, img_id, top_id, base_id (UUIDs) and an
 * optional base_generation (0 to 999; absent or null: not checked). */
static int subchain_arg(struct rpc_call *c, const char *name, struct st_subchain *sc)
{
	static const char *const keys[4] = { "sd_id", "img_id", "top_id", "base_id" };
	char *const dst[4] = { sc->sd, sc->img, sc->top, sc->base };
	const struct vd_value *o = rpc_arg(c, name);
	if (!o || o->type != VD_OBJECT)
		return rpc_fail(c, RPC_E_PARAMS, "%s: an object", name);
	for (int i = 0; i < 4; i++) {
		const struct vd_value *v = vd_obj_get(o, keys[i]);
		if (!v || v->type != VD_STRING || !vd_is_uuid(v->v.s.ptr, v->v.s.len))
			return rpc_fail(c, RPC_E_PARAMS, "%s.%s: not a UUID", name, keys[i]);
		snprintf(dst[i], 37, "%.36s", v->v.s.ptr);
	}
	const struct vd_value *g = vd_obj_get(o, "base_generation");
	sc->base_gen = -1;
	if (g && g->type == VD_INT && g->v.i >= 0 && g->v.i <= ST_MAX_GENERATION)
		sc->base_gen = g->v.i;
	else if (g && g->type != VD_NULL)
		return rpc_fail(c, RPC_E_PARAMS, "%s.base_generation: an integer from 0 to %d",
				name, ST_MAX_GENERATION);
	if (strcmp(sc->top, sc->base) == 0)
		return rpc_fail(c, RPC_E_PARAMS, "%s: top_id and base_id are the same volume", name);
	return 0;
}

static int pool_merge(struct rpc_call *c, bool prepare)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_subchain sc;
	if (subchain_arg(c, "subchainInfo", &sc) < 0)
		return -1;
	const char *sp = rpc_arg_str(c, "storagepoolID", NULL);
	struct st_err e = { 0 };
	char tid[37];
	int rc = prepare ? st_merge_prepare(s, sp, &sc, tid, &e)
			 : st_merge_finalize(s, sp, &sc, tid, &e);
	return verb_answer_task(c, rc, tid, &e);
}

int vh_sp_prepare_merge(struct rpc_call *c)
{
	return pool_merge(c, true);
}

int vh_sp_finalize_merge(struct rpc_call *c)
{
	return pool_merge(c, false);
}

int vh_sdm_merge(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_subchain sc;
	if (subchain_arg(c, "subchain_info", &sc) < 0)
		return -1;
	struct st_err e = { 0 };
	if (st_merge_job(s, rpc_arg_str(c, "job_id", NULL), &sc,
			 rpc_arg_bool(c, "merge_bitmaps", false), &e) < 0)
		return verb_fail(c, &e);
	vw_bool(c->w, true);
	return 0;
}
