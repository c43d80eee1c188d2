/* vdsmd/storage/st_verbs_image.c - Image.*: prepare / teardown (blocking),
 * getVolumes (from the index), delete / deleteVolumes (a task), and
 * cloneStructure / syncData / move (a task between domains). */
#include "st_verbs.h"

#include <string.h>

#define ARG(n) rpc_arg_str(c, n, NULL)

int vh_img_get_volumes(struct rpc_call *c)
{
	struct storage_state *s;
	const struct st_domain *d = verb_lock_domain(c, &s);
	if (!d)
		return -1;
	const char *img = rpc_arg_str(c, "imageID", NULL);
	const struct st_image *im = map_get(&d->images, img);
	if (!im) {
		pthread_mutex_unlock(&s->lock);
		return rpc_fail(c, RPC_E_NO_IMAGE, "%s", img);
	}
	vw_begin_array(c->w);
	for (size_t i = 0; i < im->n; i++)
		vw_strz(c->w, im->vols[i]->uuid);
	vw_end_array(c->w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_img_delete(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	char tid[37];
	struct st_delopts o = verb_del_opts(c);
	int rc = st_image_delete(s, rpc_arg_str(c, "storagedomainID", NULL),
				 rpc_arg_str(c, "imageID", NULL), &o, tid, &e);
	return verb_answer_task(c, rc, tid, &e);
}

int vh_img_delete_volumes(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const struct vd_value *list = rpc_arg(c, "volumeList");
	size_t n = list->v.arr.n;
	if (n == 0 || n > 1024)
		return rpc_fail(c, RPC_E_PARAMS, "volumeList: 1 to 1024 volume UUIDs expected");
	const char **ids = arena_alloc(c->arena, n * sizeof(*ids));
	for (size_t i = 0; i < n; i++) {
		const struct vd_value *it = &list->v.arr.items[i];
		ids[i] = arena_strndup(c->arena, it->v.s.ptr, it->v.s.len);
	}
	struct st_delopts o = verb_del_opts(c);
	struct st_err e = { 0 };
	char tid[37];
	int rc = st_volumes_delete(s, rpc_arg_str(c, "storagedomainID", NULL),
				   rpc_arg_str(c, "imageID", NULL), ids, n, &o, tid, &e);
	return verb_answer_task(c, rc, tid, &e);
}

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
	 * the domain directory; leasePath / leaseOffset only for domains with
	 * volume leases (hsm.py prepareImage: getVolumeLease's path, offset). */
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
		if (ch.leases) {
			vw_kstrf(w, "leasePath", "%s" ST_LEASE_EXT, p);
			vw_kint(w, "leaseOffset", 0);
		}
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
	/* Nothing was activated on a file domain; the image must exist.  The
	 * engine sends leafVolID, not volumeID (JsonRpcVdsServer.java:1957), so
	 * volumeID is absent and VDSM tears the whole image down (API.py:1092,
	 * volUUID None): the same checks, for the image alone. */
	if (!ARG("volumeID")) {
		if (st_image_check(s, ARG("storagedomainID"), ARG("storagepoolID"), ARG("imageID"),
				   &e) < 0)
			return verb_fail(c, &e);
		vw_bool(c->w, true);
		return 0;
	}
	if (st_image_prepare2(s, ARG("storagedomainID"), ARG("storagepoolID"), ARG("imageID"),
			      ARG("volumeID"), true, &ch, &e) < 0 && e.code != RPC_E_GENERAL)
		return verb_fail(c, &e);
	st_chain_free(&ch);
	vw_bool(c->w, true);
	return 0;
}

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
