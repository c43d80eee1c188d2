/* vdsmd/storage/st_imgcopy.c - Image.cloneStructure, Image.syncData and
 * Image.move (copy or move an image between domains), as SPM tasks: one
 * task kind, ST_TK_IMAGE_COPY (crash steps "imgcopy.*"), its op in t->icop.
 * This file: the request checked and the task recorded (st_image_copy),
 * the task's record fields and its st_task_op; the task itself (the copy,
 * what a restart makes of a killed one) is st_imgcopy_run.c's.
 *
 * clone:  every volume of the image's chain is created on the destination
 *         domain, empty, with the source's UUID, format, allocation,
 *         capacity, parent and description, LEGAL - as VDSM's
 *         cloneStructure: image.py _createTargetImage calls
 *         destDom.createVolume without legal (lib/vdsm/storage/image.py:391),
 *         whose default is legal=True (sd.py:1294), written into the new
 *         metadata (volume.py:1501); VDSM's VM.diskReplicateStart then
 *         prepares that destination without allowIllegal (clientIF.py:434,
 *         hsm.py:3423-3428 refuse an ILLEGAL one).
 * sync:   the data of the chain's volumes (ALL, INTERNAL = all but the leaf,
 *         LEAF = only the leaf) is copied layer by layer with
 *         `qemu-img convert -n` (a layer with a parent: -B, so only what
 *         that layer holds is written).  As VDSM's syncData (image.py:610:
 *         _interImagesCopy, _finalizeDestinationImage - qemu-img convert,
 *         then SHARED/INTERNAL, never the legality) the destination stays
 *         LEGAL while it is written, so what the engine reads in
 *         Volume.getInfo between the steps is VDSM's.  The marker for a
 *         crash is the task record instead: SYNCED=<k> is rewritten after
 *         each layer is converted and fsynced, and a restart marks the one
 *         layer that may be half-written (the k-th of the range) ILLEGAL
 *         and fails the task; a layer that fails or is stopped half-way is
 *         marked ILLEGAL at once.  A layer found ILLEGAL is made LEGAL once
 *         synced (a retry after such a failure).
 * copy:   clone + sync ALL, its destination volumes made ILLEGAL and each
 *         LEGAL once synced (the task's own crash recovery reads that; VDSM's
 *         move creates them LEGAL, but they are the task's until it ends).
 *         move: copy, then every layer is compared with
 *         `qemu-img compare`, and only then the source volumes are removed
 *         (children first: ILLEGAL in the metadata, data, metadata).
 *
 * Failure before the source is touched rolls the destination back (the
 * volumes this task created are removed); a volume that cannot be removed
 * stays ILLEGAL and the task's message names it.  The source is never
 * changed before the destination compared equal, so a failed or killed move
 * loses nothing.  Every path handed to qemu-img was checked with the
 * domain's directory descriptors first (st_vol_stat: no symlink), and a
 * source chain is given to qemu-img from our metadata (st_chain_json), never
 * taken from the qcow2 headers, which anyone who can write a volume can
 * point outside the domain. */
#include "st_crash.h"
#include "st_imgcopy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *copy_verb(int op)
{
	return op == ST_IC_CLONE ? "cloneImageStructure" : op == ST_IC_SYNC ? "syncImageData"
									  : "moveImage";
}

int st_sync_type_parse(const char *s)
{
	if (!s)
		return -1;
	if (strcmp(s, "ALL") == 0)
		return ST_SYNC_ALL;
	if (strcmp(s, "INTERNAL") == 0)
		return ST_SYNC_INTERNAL;
	if (strcmp(s, "LEAF") == 0)
		return ST_SYNC_LEAF;
	return -1;
}

int st_image_copy(struct storage_state *s, const struct st_imgcopy_req *r, char task_id[37],
		  struct st_err *e)
{
	if (r->force)
		return st_fail(e, RPC_E_PARAMS, "force: replacing an image on the destination "
			       "is not supported");
	if (r->sync_type < ST_SYNC_ALL || r->sync_type > ST_SYNC_LEAF)
		return st_fail(e, RPC_E_PARAMS, "syncType: ALL, INTERNAL or LEAF");
	if (!st_is_uuid(r->img))
		return st_fail(e, RPC_E_PARAMS, "imageID: not a UUID");
	if (r->sd && r->dst_sd && strcmp(r->sd, r->dst_sd) == 0)
		return st_fail(e, RPC_E_PARAMS, "source and destination are the same domain");
	pthread_mutex_lock(&s->lock);
	struct st_domain *sd = st_domain_get(s, r->sd, e);
	struct st_domain *dd = sd ? st_domain_get(s, r->dst_sd, e) : NULL;
	int rc = sd && dd ? 0 : -1;
	if (rc == 0 && r->sp && *r->sp && strcmp(r->sp, ST_BLANK_UUID) != 0 &&
	    (strcmp(sd->pool, r->sp) != 0 || strcmp(dd->pool, r->sp) != 0))
		rc = st_fail(e, RPC_E_NOT_IN_POOL, "%s and %s must both be attached to pool %s",
			     r->sd, r->dst_sd, r->sp);
	if (rc == 0)
		rc = st_spm_require(s, sd, e);
	if (rc == 0)
		rc = st_spm_require(s, dd, e);
	size_t n = 0;
	struct st_volume **ch = rc == 0 ? st_imgcopy_chain(sd, r->img, &n, e) : NULL;
	if (rc == 0 && !ch)
		rc = -1;
	struct st_image *sim = rc == 0 ? map_get(&sd->images, r->img) : NULL;
	if (rc == 0 && sim->deleting)
		rc = st_fail(e, RPC_E_GENERAL, "image %s is being deleted", r->img);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (ch[i]->busy)
			rc = st_fail(e, RPC_E_GENERAL, "volume %s is busy", ch[i]->uuid);
		else if (!ch[i]->legal && r->op != ST_IC_CLONE)
			rc = st_fail(e, RPC_E_GENERAL, "volume %s is ILLEGAL", ch[i]->uuid);
		struct st_volume *dv = map_get(&dd->volumes, ch[i]->uuid);
		if (rc == 0 && r->op != ST_IC_SYNC && dv)
			rc = st_fail(e, RPC_E_VOLUME_EXISTS, "%s on domain %s", ch[i]->uuid,
				     r->dst_sd);
		if (rc == 0 && r->op == ST_IC_SYNC &&
		    (!dv || strcmp(dv->image, r->img) != 0 || dv->busy))
			rc = st_fail(e, dv && dv->busy ? RPC_E_GENERAL : RPC_E_NO_VOLUME,
				     "%s of image %s on domain %s%s", ch[i]->uuid, r->img,
				     r->dst_sd, dv && dv->busy ? " is busy" : "");
		struct st_volume *p = map_get(&sd->volumes, ch[i]->parent);
		if (rc == 0 && p && strcmp(p->image, r->img) != 0) {
			struct st_volume *dp = map_get(&dd->volumes, p->uuid);
			if (!dp || !dp->legal)
				rc = st_fail(e, RPC_E_NO_VOLUME, "template volume %s is not on "
					     "domain %s", p->uuid, r->dst_sd);
		}
	}
	if (rc == 0 && r->op != ST_IC_SYNC && map_get(&dd->images, r->img))
		rc = st_fail(e, RPC_E_GENERAL, "image %s exists on domain %s", r->img, r->dst_sd);
	if (rc == 0 && !st_task_queue_has_room(s))
		rc = st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
	if (rc < 0) {
		pthread_mutex_unlock(&s->lock);
		free(ch);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		ch[i]->busy = true;
		if (r->op == ST_IC_SYNC)
			((struct st_volume *)map_get(&dd->volumes, ch[i]->uuid))->busy = true;
	}
	sd->busy++;
	dd->busy++;
	struct st_task *t = st_task_alloc(&st_op_image_copy);
	/* The record names the chain (base first) before anything is made:
	 * what a killed task created on the destination is claimed by it
	 * (st_task_claim) and rolled back at the next start. */
	t->vols = xcalloc(n, sizeof(*t->vols));
	t->nvols = n;
	for (size_t i = 0; i < n; i++)
		snprintf(t->vols[i], 37, "%.36s", ch[i]->uuid);
	pthread_mutex_unlock(&s->lock);
	free(ch);
	snprintf(t->sd, sizeof(t->sd), "%.36s", r->sd);
	snprintf(t->img, sizeof(t->img), "%.36s", r->img);
	snprintf(t->dst_sd, sizeof(t->dst_sd), "%.36s", r->dst_sd);
	t->icop = r->op;
	t->sync_type = r->sync_type;
	t->synced = 0;
	t->postzero = r->postzero;
	t->discard = r->discard;
	t->verb = copy_verb(r->op);
	rc = st_task_persist(s, t);
	if (rc < 0) {
		st_image_copy_release(s, t);
		st_task_free(t);
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot record the task");
	}
	ST_CRASH("imgcopy.record");
	snprintf(task_id, 37, "%.36s", t->id);
	st_task_submit(s, t);
	return 0;
}

/* An image copy claims what it may have made on the destination (never the
 * source; syncData makes nothing). */
static const char *claims_copy(const struct st_task *t)
{
	return t->icop != ST_IC_SYNC ? t->dst_sd : "";
}

static void save_copy(const struct st_task *t, struct st_kv *kv)
{
	kv_set(kv, "DSTSDUUID", t->dst_sd);
	kv_setf(kv, "OP", "%d", t->icop);
	kv_setf(kv, "SYNCTYPE", "%d", t->sync_type);
	if (t->icop == ST_IC_SYNC)
		kv_setf(kv, "SYNCED", "%d", t->synced);
}

static void load_copy(struct st_task *t, const struct st_kv *kv)
{
	snprintf(t->dst_sd, sizeof(t->dst_sd), "%.36s",
		 kv_get(kv, "DSTSDUUID") ? kv_get(kv, "DSTSDUUID") : "");
	t->icop = (int)kv_get_int(kv, "OP", 0);
	t->sync_type = (int)kv_get_int(kv, "SYNCTYPE", 0);
	t->synced = (int)kv_get_int(kv, "SYNCED", -1);
	t->verb = copy_verb(t->icop);
}

const struct st_task_op st_op_image_copy = {
	.kind = ST_TK_IMAGE_COPY,
	.verb = "moveImage",
	.run = st_imgcopy_run,
	.recover = st_imgcopy_recover,
	.claims = claims_copy,
	.save = save_copy,
	.load = load_copy,
	.crash_prefix = "imgcopy",
};
