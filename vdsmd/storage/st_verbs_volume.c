/* vdsmd/storage/st_verbs_volume.c - Volume.*.  getInfo / getSize are
 * answered from the index (no disk I/O); create, delete and extendSize
 * queue a task; setLegality, refresh, getQemuImageInfo and measure are
 * blocking verbs (they touch storage). */
#include "st_verbs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARG(n) rpc_arg_str(c, n, NULL)

/* Finds a volume under the lock (held on success; released on failure). */
static const struct st_volume *lookup(struct rpc_call *c, struct storage_state **sp,
				      const struct st_domain **dp)
{
	struct st_err e = { 0 };
	const char *img = rpc_arg_str(c, "imageID", NULL), *vol = rpc_arg_str(c, "volumeID", NULL);
	const struct st_domain *d = verb_lock_domain(c, sp);
	const struct st_volume *v = NULL;
	if (!d)
		return NULL;
	if (!map_get(&d->images, img))
		st_fail(&e, RPC_E_NO_IMAGE, "%s in domain %s", img, d->uuid);
	else if (!(v = map_get(&d->volumes, vol)) || strcmp(v->image, img) != 0) {
		v = NULL;
		st_fail(&e, RPC_E_NO_VOLUME, "%s in image %s", vol, img);
	}
	if (!v) {
		pthread_mutex_unlock(&(*sp)->lock);
		verb_fail(c, &e);
		return NULL;
	}
	*dp = d;
	return v;
}

int vh_vol_get_info(struct rpc_call *c)
{
	struct storage_state *s;
	const struct st_domain *d;
	const struct st_volume *v = lookup(c, &s, &d);
	if (!v)
		return -1;
	verb_write_volume_info(c->w, s, d, v);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_vol_get_size(struct rpc_call *c)
{
	struct storage_state *s;
	const struct st_domain *d;
	const struct st_volume *v = lookup(c, &s, &d);
	if (!v)
		return -1;
	vw_begin_object(c->w);
	vw_kstrf(c->w, "apparentsize", "%lld", (long long)v->apparent);
	vw_kstrf(c->w, "truesize", "%lld", (long long)v->truesize);
	vw_end_object(c->w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_vol_create(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	/* a DiskContentType storage value (DATA, MEMD, ...): the engine's
	 * DiskContentType.getStorageValue(), a string */
	size_t dtlen = 0;
	const char *disktype = rpc_arg_str(c, "diskType", &dtlen);
	if (!disktype || dtlen == 0 || dtlen > 15)
		return rpc_fail(c, RPC_E_PARAMS, "diskType: expected a DiskContentType");
	int64_t fmt = rpc_arg_int(c, "volFormat", 0), alloc = rpc_arg_int(c, "preallocate", 0);
	/* refused here, with the value sent (st_ops saw the 0 it was squashed
	 * to and said "got 0", issue 27) */
	if (fmt != ST_FMT_COW && fmt != ST_FMT_RAW)
		return rpc_fail(c, RPC_E_PARAMS, "volFormat: must be 4 (COW) or 5 (RAW), got %lld",
				(long long)fmt);
	if (alloc != ST_PREALLOCATED && alloc != ST_SPARSE)
		return rpc_fail(c, RPC_E_PARAMS,
				"preallocate: must be 1 (PREALLOCATED) or 2 (SPARSE), got %lld",
				(long long)alloc);
	const bool initial_given = rpc_arg(c, "initialSize") != NULL;
	int64_t initial = rpc_arg_int(c, "initialSize", 0);
	if (initial < 0)
		return rpc_fail(c, RPC_E_PARAMS, "initialSize: expected a non-negative integer");
	if (rpc_arg_bool(c, "addBitmaps", false))
		return rpc_fail(c, RPC_E_PARAMS, "addBitmaps: not supported");
	const struct vd_value *bm = rpc_arg(c, "bitmap");
	if (bm && bm->type != VD_NULL)
		return rpc_fail(c, RPC_E_PARAMS, "bitmap: not supported");
	int64_t seq = rpc_arg_int(c, "sequence", 0);
	if (seq < 0 || seq > INT32_MAX)
		return rpc_fail(c, RPC_E_PARAMS, "sequence: out of range");
	struct st_volreq r = {
		.sd = rpc_arg_str(c, "storagedomainID", NULL),
		.img = rpc_arg_str(c, "imageID", NULL),
		.vol = rpc_arg_str(c, "volumeID", NULL),
		.size = rpc_arg_int(c, "size", 0),
		.format = (int)fmt,
		.alloc = (int)alloc,
		.disktype = disktype,
		.desc = rpc_arg_str(c, "desc", NULL),
		.src_img = rpc_arg_str(c, "srcImgUUID", NULL),
		.src_vol = rpc_arg_str(c, "srcVolUUID", NULL),
		.illegal = !rpc_arg_bool(c, "legal", true),
		.initial_given = initial_given,
		.initial_size = initial,
		.sequence = (int)seq,
	};
	struct st_err e = { 0 };
	char tid[37];
	int rc = st_volume_create(s, &r, tid, &e);
	return verb_answer_task(c, rc, tid, &e);
}

int vh_vol_delete(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	char tid[37];
	struct st_delopts o = verb_del_opts(c);
	int rc = st_volume_delete(s, rpc_arg_str(c, "storagedomainID", NULL),
				  rpc_arg_str(c, "imageID", NULL), rpc_arg_str(c, "volumeID", NULL),
				  &o, tid, &e);
	return verb_answer_task(c, rc, tid, &e);
}

int vh_vol_set_description(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (st_volume_set_description(s, rpc_arg_str(c, "storagedomainID", NULL),
				      rpc_arg_str(c, "imageID", NULL),
				      rpc_arg_str(c, "volumeID", NULL),
				      rpc_arg_str(c, "description", NULL), &e) < 0)
		return verb_fail(c, &e);
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

int vh_vol_verify_untrusted(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (st_volume_verify_untrusted(s, ARG("storagepoolID"), ARG("storagedomainID"),
				       ARG("imageID"), ARG("volumeID"), &e) < 0)
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
