/* vdsmd/storage/st_verbs_image.c - Image.prepare / teardown,
 * Volume.setLegality / refresh / getQemuImageInfo, Task.getInfo / revert.
 * Blocking verbs (they touch storage) except Task.getInfo. */
#include "st_verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARG(n) rpc_arg_str(c, n, NULL)

int vh_img_prepare(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	struct st_chain ch;
	const char *sd = ARG("storagedomainID"), *img = ARG("imageID");
	if (st_image_prepare2(s, sd, ARG("storagepoolID"), img, ARG("volumeID"),
			      rpc_arg_bool(c, "allowIllegal", false), &ch, &e) < 0)
		return verb_fail(c, &e);
	struct vd_writer *w = c->w;
	vw_begin_object(w);
	vw_kstr(w, "path", ch.paths[0]);
	vw_keyz(w, "imgVolumesInfo");
	vw_begin_array(w);
	/* hsm.prepareImage's imgVolumesInfo (VDSM's Bridge answers the path
	 * alone; vdsmd adds the list): domainID, imageID, volumeID, path below
	 * the domain directory.  No leasePath / leaseOffset: VDSM adds them
	 * only for domains with volume leases (sanlock), and vdsmd keeps none. */
	for (size_t i = ch.n; i-- > 0;) {   /* base first, as VDSM lists them */
		const char *p = ch.paths[i];
		const char *slash = strrchr(p, '/');
		/* .../<image>/<volume>: the image is the 36 bytes before the slash */
		bool named = slash && slash - p >= 37 && slash[-37] == '/';
		vw_begin_object(w);
		vw_kstr(w, "domainID", sd);
		vw_kstrf(w, "imageID", "%.36s", named ? slash - 36 : img);
		vw_kstr(w, "volumeID", slash ? slash + 1 : "");
		vw_kstr(w, "path", p);
		vw_end_object(w);
	}
	vw_end_array(w);
	vw_end_object(w);
	st_chain_free(&ch);
	return 0;
}

int vh_img_teardown(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	struct st_chain ch;
	/* Nothing was activated on a file domain; the image must exist. */
	if (st_image_prepare2(s, ARG("storagedomainID"), ARG("storagepoolID"), ARG("imageID"),
			      ARG("volumeID"), true, &ch, &e) < 0 && e.code != RPC_E_GENERAL)
		return verb_fail(c, &e);
	st_chain_free(&ch);
	vw_bool(c->w, true);
	return 0;
}

int vh_vol_set_legality(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const char *leg = ARG("legality");
	bool legal = leg && strcmp(leg, "LEGAL") == 0;
	if (!leg || (!legal && strcmp(leg, "ILLEGAL") != 0))
		return rpc_fail(c, RPC_E_PARAMS, "legality: LEGAL or ILLEGAL (FAKE is for block "
				"backup domains only)");
	struct st_err e = { 0 };
	if (st_volume_set_legality(s, ARG("storagedomainID"), ARG("imageID"), ARG("volumeID"),
				   legal, &e) < 0)
		return verb_fail(c, &e);
	vw_bool(c->w, true);
	return 0;
}

int vh_vol_refresh(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (st_volume_refresh(s, ARG("storagedomainID"), ARG("imageID"), ARG("volumeID"), &e) < 0)
		return verb_fail(c, &e);
	vw_bool(c->w, true);
	return 0;
}

int vh_vol_qemu_info(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	struct st_qinfo q;
	if (st_volume_qemu_info(s, ARG("storagedomainID"), ARG("imageID"), ARG("volumeID"), &q,
				&e) < 0)
		return verb_fail(c, &e);
	/* As VDSM builds it (volume.py getQemuImageInfo): each key only when
	 * qemu-img reported it; bitmaps only when the qcow2 image lists any,
	 * each a Qcow2BitmapInfo namedtuple, which VDSM's json.dumps sends as
	 * the array [name, granularity, flags]. */
	struct vd_writer *w = c->w;
	vw_begin_object(w);
	vw_kint(w, "virtualsize", q.virtual_size);
	vw_kstr(w, "format", q.format);
	if (q.has_cluster)
		vw_kint(w, "clustersize", q.cluster_size);
	if (q.backing[0])
		vw_kstr(w, "backingfile", q.backing);
	if (q.compat[0])
		vw_kstr(w, "compat", q.compat);
	if (q.has_bitmaps) {
		vw_keyz(w, "bitmaps");
		vw_begin_array(w);
		for (size_t i = 0; i < q.nbitmaps; i++) {
			vw_begin_array(w);
			vw_strz(w, q.bitmaps[i].name);
			vw_int(w, q.bitmaps[i].granularity);
			vw_begin_array(w);
			if (q.bitmaps[i].flags & ST_QBM_IN_USE)
				vw_strz(w, "in-use");
			if (q.bitmaps[i].flags & ST_QBM_AUTO)
				vw_strz(w, "auto");
			vw_end_array(w);
			vw_end_array(w);
		}
		vw_end_array(w);
	}
	vw_end_object(w);
	st_qinfo_free(&q);
	return 0;
}

int vh_task_get_info(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	struct st_task_status st;
	if (st_task_get(s, ARG("taskID"), &st, &e) < 0)
		return verb_fail(c, &e);
	vw_begin_object(c->w);
	vw_kstr(c->w, "id", st.id);
	vw_kstr(c->w, "verb", st.verb);
	vw_end_object(c->w);
	return 0;
}

/* A task rolls back when it fails or is stopped; revert is that for a task
 * still running (a finished one is already complete or rolled back: 410). */
int vh_task_revert(struct rpc_call *c)
{
	return verb_by_id(c, "taskID", st_task_stop);
}

int vh_vol_measure(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	int64_t fmt = rpc_arg_int(c, "dstVolFormat", 0);
	if (fmt != ST_FMT_COW && fmt != ST_FMT_RAW)
		return rpc_fail(c, RPC_E_PARAMS, "dstVolFormat: 4 (COW) or 5 (RAW)");
	if (!rpc_arg_bool(c, "backing_chain", true))
		return rpc_fail(c, RPC_E_PARAMS, "backing_chain: only the whole chain is measured");
	const char *base = ARG("baseID");
	if (base && *base && strcmp(base, ST_BLANK_UUID) != 0)
		return rpc_fail(c, RPC_E_PARAMS, "baseID: measuring part of a chain is not supported");
	struct st_err e = { 0 };
	int64_t req = 0;
	if (st_volume_measure(s, ARG("storagedomainID"), ARG("imageID"), ARG("volumeID"), (int)fmt,
			      &req, &e) < 0)
		return verb_fail(c, &e);
	vw_begin_object(c->w);
	vw_kint(c->w, "required", req);
	vw_end_object(c->w);
	return 0;
}

int vh_vol_extend_size(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const char *ns = ARG("newSize");
	char *end = NULL;
	long long size = ns && *ns ? strtoll(ns, &end, 10) : -1;
	if (!end || *end || size <= 0)
		return rpc_fail(c, RPC_E_PARAMS, "newSize: bytes as a string of digits");
	struct st_err e = { 0 };
	char tid[37];
	if (st_volume_extend(s, ARG("storagedomainID"), ARG("imageID"), ARG("volumeID"), size, tid,
			     &e) < 0)
		return verb_fail(c, &e);
	vw_strz(c->w, tid);
	return 0;
}

/* ---- Image.cloneStructure / syncData / move (st_imgcopy.c) --------------- */

static int image_copy_verb(struct rpc_call *c, struct st_imgcopy_req *r)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	r->sp = ARG("storagepoolID");
	r->sd = ARG("storagedomainID");
	r->img = ARG("imageID");
	r->dst_sd = ARG("dstSdUUID");
	struct st_err e = { 0 };
	char tid[37];
	if (st_image_copy(s, r, tid, &e) < 0)
		return verb_fail(c, &e);
	vw_strz(c->w, tid);
	return 0;
}

int vh_img_clone_structure(struct rpc_call *c)
{
	struct st_imgcopy_req r = { .op = ST_IC_CLONE };
	return image_copy_verb(c, &r);
}

int vh_img_sync_data(struct rpc_call *c)
{
	struct st_imgcopy_req r = { .op = ST_IC_SYNC };
	r.sync_type = st_sync_type_parse(ARG("syncType"));
	if (r.sync_type < 0)
		return rpc_fail(c, RPC_E_PARAMS, "syncType: ALL, INTERNAL or LEAF");
	return image_copy_verb(c, &r);
}

/* operation: 1 copy, 2 move (the numbers the engine sends and VDSM
 * compares); "COPY" / "MOVE" are taken too. */
int vh_img_move(struct rpc_call *c)
{
	struct st_imgcopy_req r = { 0 };
	const struct vd_value *op = rpc_arg(c, "operation");
	if (op && op->type == VD_INT && (op->v.i == 1 || op->v.i == 2))
		r.op = op->v.i == 1 ? ST_IC_COPY : ST_IC_MOVE;
	else if (op && op->type == VD_STRING && op->v.s.len == 4 &&
		 (memcmp(op->v.s.ptr, "COPY", 4) == 0 || memcmp(op->v.s.ptr, "MOVE", 4) == 0))
		r.op = op->v.s.ptr[0] == 'C' ? ST_IC_COPY : ST_IC_MOVE;
	else
		return rpc_fail(c, RPC_E_PARAMS, "operation: 1 (copy) or 2 (move)");
	r.postzero = rpc_arg_bool(c, "postZero", false);
	r.force = rpc_arg_bool(c, "force", false);
	r.discard = rpc_arg_bool(c, "discard", false);
	return image_copy_verb(c, &r);
}
