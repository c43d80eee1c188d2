/* vdsmd/storage/st_verbs_jobs.c - SDM.copy_data, SDM.add_bitmap, SDM.remove_bitmap,
 * SDM.clear_bitmaps, SDM.amend_volume, SDM.sparsify_volume, SDM.update_volume and
 * Host.getJobs. */
#include "st_verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A CopyDataDIVEndpoint's sd_id, img_id, vol_id and optional generation
 * (null or absent: -1). */
static int div_ids(struct rpc_call *c, const char *name, const struct vd_value *ep,
		   char ids[3][37], int64_t *gen)
{
	static const char *const keys[3] = { "sd_id", "img_id", "vol_id" };
	for (int i = 0; i < 3; i++) {
		const struct vd_value *v = vd_obj_get(ep, keys[i]);
		if (!v || v->type != VD_STRING || !vd_is_uuid(v->v.s.ptr, v->v.s.len))
			return rpc_fail(c, RPC_E_PARAMS, "%s.%s: not a UUID", name, keys[i]);
		snprintf(ids[i], 37, "%.36s", v->v.s.ptr);
	}
	const struct vd_value *g = vd_obj_get(ep, "generation");
	*gen = -1;
	if (g && g->type == VD_INT && g->v.i >= 0)
		*gen = g->v.i;
	else if (g && g->type != VD_NULL)
		return rpc_fail(c, RPC_E_PARAMS, "%s.generation: not a non-negative integer", name);
	return 0;
}

/* One CopyDataEndpoint: "div" (sd_id, img_id, vol_id, optional generation). */
static int endpoint(struct rpc_call *c, const char *name, char ids[3][37], int64_t *gen)
{
	const struct vd_value *ep = rpc_arg(c, name);
	const struct vd_value *type = vd_obj_get(ep, "endpoint_type");
	if (!type || !vd_str_eq(type, "div"))
		return rpc_fail(c, RPC_E_PARAMS, "%s: only endpoint_type \"div\" (a volume) is "
				"supported", name);
	return div_ids(c, name, ep, ids, gen);
}

static int check_generation(struct rpc_call *c, struct storage_state *s, char ids[3][37],
			    int64_t gen)
{
	if (gen < 0)
		return 0;
	struct st_volume v;
	struct st_err e = { 0 };
	if (st_volume_info(s, ids[0], ids[1], ids[2], &v, &e) < 0)
		return verb_fail(c, &e);
	free(v.description);
	if ((int64_t)v.generation != gen)
		return rpc_fail(c, RPC_E_GENERAL, "volume %s: generation %u, expected %lld", ids[2],
				v.generation, (long long)gen);
	return 0;
}

/* What the job verbs close with: rc, the st_*_job call's, as the verb's answer
 * (true: the job started; else its error). */
static int job_started(struct rpc_call *c, int rc, const struct st_err *e)
{
	if (rc < 0)
		return verb_fail(c, e);
	vw_bool(c->w, true);
	return 0;
}

int vh_sdm_copy_data(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	if (rpc_arg_bool(c, "copy_bitmaps", false))
		return rpc_fail(c, RPC_E_PARAMS, "copy_bitmaps: not supported");
	char src[3][37], dst[3][37];
	int64_t sgen = -1, dgen = -1;
	if (endpoint(c, "source", src, &sgen) < 0 || endpoint(c, "destination", dst, &dgen) < 0 ||
	    check_generation(c, s, src, sgen) < 0 || check_generation(c, s, dst, dgen) < 0)
		return -1;
	const char *const sp[3] = { src[0], src[1], src[2] }, *const dp[3] = { dst[0], dst[1], dst[2] };
	struct st_err e = { 0 };
	return job_started(c, st_copy_data(s, rpc_arg_str(c, "job_id", NULL), sp, dp, &e), &e);
}

/* What every verb on one volume (bitmaps, amend, sparsify, update) opens
 * with: the storage state, vol_info's ids and generation (null or absent:
 * -1) and job_id (NULL when not a string; the job refuses it). */
struct vol_verb {
	struct storage_state *s;
	char ids[3][37];
	const char *p[3];	/* ids, as the st_*_job calls take them */
	int64_t gen;
	const char *job_id;
};

/* vol_info is VDSM's VolumeInfo or a "div" CopyDataDIVEndpoint (the keys
 * past the ids are ignored).  bounded: a generation past 999 is VDSM's
 * ValueError (100) at once (amend, sparsify, update); else the job finds it
 * stale (the bitmap verbs).  -1 once the call has failed. */
static int vol_verb_open(struct rpc_call *c, struct vol_verb *v, bool bounded)
{
	v->s = verb_state(c);
	if (!v->s)
		return -1;
	v->gen = -1;
	if (div_ids(c, "vol_info", rpc_arg(c, "vol_info"), v->ids, &v->gen) < 0)
		return -1;
	if (bounded && v->gen > ST_MAX_GENERATION)
		return rpc_fail(c, RPC_E_GENERAL, "vol_info.generation: at most %d",
				ST_MAX_GENERATION);
	for (int i = 0; i < 3; i++)
		v->p[i] = v->ids[i];
	v->job_id = rpc_arg_str(c, "job_id", NULL);
	return 0;
}

/* SDM.add_bitmap / remove_bitmap / clear_bitmaps: the job checks the rest. */
static int bitmap_verb(struct rpc_call *c, enum st_job_kind kind)
{
	struct vol_verb v;
	if (vol_verb_open(c, &v, false) < 0)
		return -1;
	const char *bitmap = kind == ST_JOB_CLEAR_BITMAPS ? NULL : rpc_arg_str(c, "bitmap", NULL);
	struct st_err e = { 0 };
	return job_started(c, st_bitmap_job(v.s, kind, v.job_id, v.p, v.gen, bitmap, &e), &e);
}

int vh_sdm_add_bitmap(struct rpc_call *c)
{
	return bitmap_verb(c, ST_JOB_ADD_BITMAP);
}

int vh_sdm_remove_bitmap(struct rpc_call *c)
{
	return bitmap_verb(c, ST_JOB_REMOVE_BITMAP);
}

int vh_sdm_clear_bitmaps(struct rpc_call *c)
{
	return bitmap_verb(c, ST_JOB_CLEAR_BITMAPS);
}

int vh_sdm_amend_volume(struct rpc_call *c)
{
	struct vol_verb v;
	if (vol_verb_open(c, &v, true) < 0)
		return -1;
	const struct vd_value *qa = rpc_arg(c, "qcow2_attr");
	if (!qa || qa->type != VD_OBJECT)
		return rpc_fail(c, RPC_E_PARAMS, "qcow2_attr: an object {compat}");
	const struct vd_value *cv = vd_obj_get(qa, "compat");
	char compat[16] = "";
	if (cv && cv->type == VD_STRING)
		snprintf(compat, sizeof(compat), "%.*s", (int)VD_MIN(cv->v.s.len, 15), cv->v.s.ptr);
	else if (cv && cv->type != VD_NULL)
		return rpc_fail(c, RPC_E_GENERAL, "Unsupported qcow2 compat (not a string)");
	struct st_err e = { 0 };
	return job_started(c, st_amend_job(v.s, v.job_id, v.p, v.gen,
					   cv && cv->type == VD_STRING ? compat : NULL, &e), &e);
}

/* vol_info as amend_volume's (VDSM's VolumeInfo); the job checks the rest. */
int vh_sdm_sparsify_volume(struct rpc_call *c)
{
	struct vol_verb v;
	if (vol_verb_open(c, &v, true) < 0)
		return -1;
	struct st_err e = { 0 };
	return job_started(c, st_sparsify_job(v.s, v.job_id, v.p, v.gen, &e), &e);
}

/* A value for a message: a string's first 32 bytes, else a placeholder. */
#define STR_SHOW(x) (x)->type == VD_STRING ? (int)VD_MIN((x)->v.s.len, 32) : 14, \
	(x)->type == VD_STRING ? (x)->v.s.ptr : "(not a string)"

/* vol_attr (VDSM's VolumeAttributes): a wrong value is VDSM's ValueError. */
static int vol_attr(struct rpc_call *c, struct st_vol_attr *a)
{
	const struct vd_value *va = rpc_arg(c, "vol_attr");
	if (!va || va->type != VD_OBJECT)
		return rpc_fail(c, RPC_E_PARAMS, "vol_attr: an object");
	*a = (struct st_vol_attr){ .legality = -1, .generation = -1 };
	const struct vd_value *l = vd_obj_get(va, "legality"), *d = vd_obj_get(va, "description");
	const struct vd_value *g = vd_obj_get(va, "generation"), *t = vd_obj_get(va, "type");
	if (l && l->type != VD_NULL) {
		if (vd_str_eq(l, "LEGAL") || vd_str_eq(l, "ILLEGAL"))
			a->legality = vd_str_eq(l, "LEGAL");
		else
			return rpc_fail(c, RPC_E_GENERAL, "Legality not supported %.*s",
					STR_SHOW(l));
	}
	if (d && d->type == VD_STRING) {
		a->has_desc = true;
		snprintf(a->desc, sizeof(a->desc), "%.*s", (int)VD_MIN(d->v.s.len, ST_DESC_MAX),
			 d->v.s.ptr);
	} else if (d && d->type != VD_NULL) {
		return rpc_fail(c, RPC_E_GENERAL, "vol_attr.description: not a string");
	}
	if (g && g->type == VD_INT && g->v.i >= 0 && g->v.i <= ST_MAX_GENERATION)
		a->generation = g->v.i;
	else if (g && g->type != VD_NULL)
		return rpc_fail(c, RPC_E_GENERAL, "vol_attr.generation: an integer from 0 to %d",
				ST_MAX_GENERATION);
	if (t && t->type != VD_NULL) {
		if (!vd_str_eq(t, "SHARED"))
			return rpc_fail(c, RPC_E_GENERAL, "Volume type not supported %.*s",
					STR_SHOW(t));
		a->shared = true;
	}
	return 0;
}

int vh_sdm_update_volume(struct rpc_call *c)
{
	struct vol_verb v;
	struct st_vol_attr a;
	if (vol_verb_open(c, &v, true) < 0 || vol_attr(c, &a) < 0)
		return -1;
	struct st_err e = { 0 };
	return job_started(c, st_update_job(v.s, v.job_id, v.p, v.gen, &a, &e), &e);
}

void verb_write_job(struct vd_writer *w, const struct st_job_info *j)
{
	vw_begin_object(w);
	verb_write_job_fields(w, j);
	vw_end_object(w);
}

void verb_write_job_fields(struct vd_writer *w, const struct st_job_info *j)
{
	vw_kstr(w, "id", j->id);
	vw_kstr(w, "status", st_job_status_name(j->status));
	vw_kstr(w, "description", j->desc);
	vw_kstr(w, "job_type", "storage");
	/* a float, as VDSM's qemuimg progress: the engine casts it (Double) */
	vw_keyz(w, "progress");
	vw_double(w, (double)j->progress);
	if (j->status == ST_JOB_FAILED || j->status == ST_JOB_ABORTED) {
		vw_keyz(w, "error");
		vw_begin_object(w);
		vw_kint(w, "code", j->err_code);
		vw_kstr(w, "message", j->err_msg);
		vw_end_object(w);
	}
}

void st_write_jobs(struct storage_state *s, struct vd_writer *w, const char *type,
		   const struct vd_value *ids)
{
	bool storage = !type || !*type || strcmp(type, "storage") == 0;
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->jobs); storage && it; it = map_next(&s->jobs, it)) {
		const struct st_job *j = map_val(it);
		bool want = !ids || ids->type != VD_ARRAY || ids->v.arr.n == 0;
		for (size_t i = 0; !want && i < ids->v.arr.n; i++)
			want = vd_str_eq(&ids->v.arr.items[i], j->info.id);
		if (!want)
			continue;
		vw_keyz(w, j->info.id);
		verb_write_job(w, &j->info);
	}
	pthread_mutex_unlock(&s->lock);
}
