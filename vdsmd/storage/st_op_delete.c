/* vdsmd/storage/st_op_delete.c - Volume.delete, Image.delete and
 * Image.deleteVolumes as tasks (kinds ST_TK_DELETE and ST_TK_IMAGE_DELETE,
 * crash steps "delete.*").
 *
 * The verb part marks the volumes busy and ILLEGAL (the record first, then
 * the metadata, children first) and queues the task; the task removes data
 * and metadata, children first.  A task found unfinished at startup whose
 * volumes were all still there was not started; one that removed some is
 * finished (delete_rest). */
#include "st_crash.h"
#include "st_ops.h"
#include "../../common/log.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rewrite n volumes' metadata LEGAL again (a delete that did not start).
 * A volume whose metadata cannot be rewritten stays ILLEGAL (in memory as
 * on disk); returns how many failed, the first error in err. */
static size_t restore_legal(struct storage_state *s, struct st_domain *d, char (*ids)[37],
			    size_t n, char *err, size_t errlen)
{
	size_t failed = 0;
	for (size_t i = 0; i < n; i++) {
		struct st_volume copy;
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, ids[i]);
		copy = *v;
		pthread_mutex_unlock(&s->lock);
		copy.legal = true;
		int rc = st_vol_write_meta(d, &copy);
		pthread_mutex_lock(&s->lock);
		v->legal = rc == 0;
		v->busy = false;
		pthread_mutex_unlock(&s->lock);
		if (rc < 0) {
			if (!failed)
				snprintf(err, errlen, "volume %s could not be made LEGAL again (%s); "
					 "kept ILLEGAL", ids[i], st_rc_text(rc));
			log_error("storage: volume %s/%s: cannot restore LEGAL metadata: %s; kept "
				  "ILLEGAL", copy.image, ids[i], st_rc_text(rc));
			failed++;
		}
	}
	return failed;
}

/* Mark vols busy + ILLEGAL (in the index, then on disk) and queue the task.
 * Caller holds the lock and has validated; releases it. */
static int queue_delete(struct storage_state *s, struct st_domain *d, struct st_task *t,
			struct st_volume **vols, size_t n, char task_id[37], struct st_err *e)
{
	t->vols = xcalloc(n ? n : 1, sizeof(*t->vols));
	t->nvols = n;
	struct st_volume *copies = xcalloc(n ? n : 1, sizeof(*copies));
	for (size_t i = 0; i < n; i++) {
		vols[i]->busy = true;
		copies[i] = *vols[i];
		copies[i].legal = false;
		snprintf(t->vols[i], 37, "%.36s", vols[i]->uuid);
	}
	d->busy++;
	pthread_mutex_unlock(&s->lock);
	/* The record first (it claims the volumes), then ILLEGAL on disk,
	 * then in memory: what is served is never ahead of the disk. */
	int rc = st_task_persist(s, t);
	if (rc == 0)
		ST_CRASH("delete.record");
	size_t marked = 0;
	for (; rc == 0 && marked < n; marked++) {
		rc = st_vol_write_meta(d, &copies[marked]);
		if (rc < 0)
			break;
		pthread_mutex_lock(&s->lock);
		vols[marked]->legal = false;
		pthread_mutex_unlock(&s->lock);
		ST_CRASH("delete.marked-one");
	}
	free(copies);
	if (rc == 0)
		ST_CRASH("delete.marked-all");
	if (rc < 0) {
		/* Only those written ILLEGAL need their LEGAL metadata back;
		 * the others were never changed, on disk or in memory. */
		char why[256] = "";
		size_t bad = restore_legal(s, d, t->vols, marked, why, sizeof(why));
		pthread_mutex_lock(&s->lock);
		for (size_t i = marked; i < n; i++)
			vols[i]->busy = false;
		struct st_image *im = map_get(&d->images, t->img);
		if (im)
			im->deleting = false;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		if (bad == 0) {   /* else the record stays: it explains them */
			char *tp = st_task_path(s, t->id);
			unlink(tp);
			free(tp);
		} else {
			st_task_finish(s, t, ST_TR_CLEAN_FAILURE, rpc_err_code(RPC_E_GENERAL), why);
			pthread_mutex_lock(&s->lock);
			map_put(&s->tasks, t->id, t);
			pthread_mutex_unlock(&s->lock);
			t = NULL;
		}
		st_task_free(t);
		return st_fail(e, RPC_E_GENERAL, "cannot mark volumes for deletion: %s%s%s",
			       st_rc_text(rc), why[0] ? "; " : "", why);
	}
	snprintf(task_id, 37, "%.36s", t->id);
	st_task_submit(s, t);
	return 0;
}

static const struct st_delopts no_opts;

static int check_opts(const struct st_delopts *o, struct st_err *e)
{
	if (o->force)
		return st_fail(e, RPC_E_PARAMS, "force: removing volumes other volumes depend on "
			       "is not supported");
	return 0;
}

int st_volume_delete(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     const struct st_delopts *o, char task_id[37], struct st_err *e)
{
	if (!o)
		o = &no_opts;
	if (check_opts(o, e) < 0)
		return -1;
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, sd, img, vol, &d, e);
	if (!v)
		goto fail;
	if (st_spm_require(s, d, e) < 0)
		goto fail;
	if (v->busy) {
		st_fail(e, RPC_E_GENERAL, "volume %s is busy with another operation", vol);
		goto fail;
	}
	if (index_has_children(d, vol)) {
		st_fail(e, RPC_E_GENERAL, "Cannot delete volume which has children: %s", vol);
		goto fail;
	}
	if (!st_task_queue_has_room(s)) {
		st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
		goto fail;
	}
	struct st_task *t = st_task_alloc(&st_op_delete);
	snprintf(t->sd, sizeof(t->sd), "%.36s", sd);
	snprintf(t->img, sizeof(t->img), "%.36s", img);
	snprintf(t->vol, sizeof(t->vol), "%.36s", vol);
	t->postzero = o->postzero;
	t->discard = o->discard;
	return queue_delete(s, d, t, &v, 1, task_id, e);
fail:
	pthread_mutex_unlock(&s->lock);
	return -1;
}

int st_image_delete(struct storage_state *s, const char *sd, const char *img,
		    const struct st_delopts *o, char task_id[37], struct st_err *e)
{
	if (!o)
		o = &no_opts;
	/* force is deprecated and not evaluated for images, as in VDSM (the
	 * engine sends "True"); the template check below always applies. */
	if (!st_is_uuid(img))
		return st_fail(e, RPC_E_PARAMS, "imageID: not a UUID");
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, sd, e);
	struct st_image *im = d ? map_get(&d->images, img) : NULL;
	if (!d)
		goto fail;
	if (!im) {
		st_fail(e, RPC_E_NO_IMAGE, "%s in domain %s", img, sd);
		goto fail;
	}
	if (st_spm_require(s, d, e) < 0)
		goto fail;
	for (size_t i = 0; i < im->n; i++)
		if (im->vols[i]->busy || im->deleting) {
			st_fail(e, RPC_E_GENERAL, "image %s has operations in progress", img);
			goto fail;
		}
	/* A volume of another image backed by one of ours blocks the delete. */
	for (struct st_map_ent *it = map_first(&d->volumes); it; it = map_next(&d->volumes, it)) {
		struct st_volume *ov = map_val(it);
		if (strcmp(ov->image, img) == 0 || strcmp(ov->parent, ST_BLANK_UUID) == 0)
			continue;
		struct st_volume *p = map_get(&d->volumes, ov->parent);
		if (p && strcmp(p->image, img) == 0) {
			st_fail(e, RPC_E_GENERAL, "image %s is a template of volume %s", img, ov->uuid);
			goto fail;
		}
	}
	if (!st_task_queue_has_room(s)) {
		st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
		goto fail;
	}
	im->deleting = true;
	struct st_task *t = st_task_alloc(&st_op_image_delete);
	snprintf(t->sd, sizeof(t->sd), "%.36s", sd);
	snprintf(t->img, sizeof(t->img), "%.36s", img);
	t->postzero = o->postzero;
	t->discard = o->discard;
	/* Children first: a child is marked ILLEGAL (and removed) before its
	 * parent, so a crash midway never leaves a LEGAL child without its
	 * backing file.  (im->vols is in creation order only until a restart:
	 * the scan adds volumes in directory order; so order by the chain.) */
	size_t n = im->n, placed = 0;
	struct st_volume **vols = xcalloc(n, sizeof(*vols));
	bool *in = xcalloc(n, sizeof(*in));
	while (placed < n) {
		size_t before = placed;
		for (size_t i = 0; i < n; i++) {
			if (in[i])
				continue;
			bool leaf = true;   /* every child in this image already placed */
			for (size_t k = 0; k < n && leaf; k++)
				if (!in[k] && k != i &&
				    strcmp(im->vols[k]->parent, im->vols[i]->uuid) == 0)
					leaf = false;
			if (leaf) {
				in[i] = true;
				vols[placed++] = im->vols[i];
			}
		}
		if (placed == before)   /* a cycle: cannot happen, keep any order */
			for (size_t i = 0; i < n; i++)
				if (!in[i]) {
					in[i] = true;
					vols[placed++] = im->vols[i];
				}
	}
	free(in);
	int rc = queue_delete(s, d, t, vols, n, task_id, e);
	free(vols);
	return rc;
fail:
	pthread_mutex_unlock(&s->lock);
	return -1;
}

int st_volumes_delete(struct storage_state *s, const char *sd, const char *img,
		      const char *const *ids, size_t n, const struct st_delopts *o,
		      char task_id[37], struct st_err *e)
{
	if (!o)
		o = &no_opts;
	if (check_opts(o, e) < 0)
		return -1;
	if (n == 0 || n > 1024)
		return st_fail(e, RPC_E_PARAMS, "volumeList: 1 to 1024 volumes");
	struct st_domain *d = NULL;
	struct st_volume **vols = xcalloc(n, sizeof(*vols));
	pthread_mutex_lock(&s->lock);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		vols[i] = st_find_volume(s, sd, img, ids[i], &d, e);
		if (!vols[i])
			rc = -1;
		else if (vols[i]->busy)
			rc = st_fail(e, RPC_E_GENERAL, "volume %s is busy", ids[i]);
		for (size_t k = 0; rc == 0 && k < i; k++)
			if (vols[k] == vols[i])
				rc = st_fail(e, RPC_E_PARAMS, "volumeList: %s twice", ids[i]);
	}
	if (rc == 0)
		rc = st_spm_require(s, d, e);
	/* Children before parents; a volume whose child is not deleted with
	 * it is refused (it would leave a child without its backing file). */
	size_t placed = 0;
	while (rc == 0 && placed < n) {
		size_t pick = n;
		for (size_t i = placed; i < n && pick == n; i++) {
			bool leaf = true;
			for (struct st_map_ent *it = map_first(&d->volumes); it && leaf;
			     it = map_next(&d->volumes, it)) {
				const struct st_volume *c = map_val(it);
				if (strcmp(c->parent, vols[i]->uuid) != 0)
					continue;
				bool listed_later = false;
				for (size_t k = placed; k < n; k++)
					listed_later |= vols[k] == c;
				bool listed_before = false;
				for (size_t k = 0; k < placed; k++)
					listed_before |= vols[k] == c;
				if (listed_later || !listed_before)
					leaf = false;
			}
			if (leaf)
				pick = i;
		}
		if (pick == n) {
			rc = st_fail(e, RPC_E_GENERAL, "volumeList: a volume has children that are "
				     "not deleted with it");
			break;
		}
		struct st_volume *tmp = vols[placed];
		vols[placed] = vols[pick];
		vols[pick] = tmp;
		placed++;
	}
	if (rc == 0 && !st_task_queue_has_room(s))
		rc = st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
	if (rc < 0) {
		pthread_mutex_unlock(&s->lock);
		free(vols);
		return -1;
	}
	struct st_task *t = st_task_alloc(&st_op_delete);
	snprintf(t->sd, sizeof(t->sd), "%.36s", sd);
	snprintf(t->img, sizeof(t->img), "%.36s", img);
	snprintf(t->vol, sizeof(t->vol), "%.36s", vols[0]->uuid);
	t->postzero = o->postzero;
	t->discard = o->discard;
	rc = queue_delete(s, d, t, vols, n, task_id, e);   /* releases the lock */
	free(vols);
	return rc;
}

static void run_delete(struct storage_state *s, struct st_task *t)
{
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, t->sd);
	bool aborted = __atomic_load_n(&t->abort, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&s->lock);

	char err[256] = "";
	size_t failed = 0;
	if (aborted) {
		/* Not started: the volumes are intact; make them LEGAL again. */
		failed = restore_legal(s, d, t->vols, t->nvols, err, sizeof(err));
		if (!failed)
			st_task_abort_msg(s, t, err, sizeof(err));
	} else {
		for (size_t i = 0; i < t->nvols; i++) {   /* children first */
			const char *id = t->vols[i];
			int rc = 0;
			if (t->postzero || t->discard)
				rc = st_vol_scrub(d, t->img, id, t->postzero, t->discard);
			if (rc == 0)
				rc = st_vol_unlink(d, t->img, id, false);
			if (rc == 0) {
				ST_CRASH("delete.data-unlinked");
				rc = st_vol_unlink(d, t->img, id, true);
			}
			if (rc == 0)
				ST_CRASH("delete.removed-one");
			pthread_mutex_lock(&s->lock);
			if (rc == 0) {
				index_del_volume(d, id);
			} else {
				struct st_volume *v = map_get(&d->volumes, id);
				v->busy = false;   /* stays ILLEGAL; the record says why */
				if (!failed)
					st_errf(err, sizeof(err), rc, "removing volume %s", id);
				failed++;
			}
			pthread_mutex_unlock(&s->lock);
		}
	}
	pthread_mutex_lock(&s->lock);
	struct st_image *im = map_get(&d->images, t->img);
	if (im)
		im->deleting = false;
	bool empty = !im;
	pthread_mutex_unlock(&s->lock);
	st_op_job_release(s, d, t->img, empty);
	if (!failed && !aborted)
		ST_CRASH("delete.removed-all");
	if (failed)
		st_task_finish(s, t, ST_TR_CLEAN_FAILURE,
			       rpc_err_code(aborted ? RPC_E_TASK_ABORTED : RPC_E_GENERAL), err);
	else if (aborted)
		st_task_finish(s, t, ST_TR_CLEAN_SUCCESS, rpc_err_code(RPC_E_TASK_ABORTED), err);
	else
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
}

/* Remove the volumes of an interrupted delete the scan kept (LEGAL: not
 * yet marked when vdsmd died), children first as listed: ILLEGAL on disk,
 * data, metadata, index.  Returns how many could not be removed. */
static size_t delete_rest(struct storage_state *s, struct st_domain *d, struct st_task *t)
{
	(void)s;
	size_t kept = 0;
	for (size_t i = 0; i < t->nvols; i++) {
		struct st_volume *v = map_get(&d->volumes, t->vols[i]);
		if (!v)
			continue;
		struct st_volume copy = *v;
		copy.legal = false;
		int rc = st_vol_write_meta(d, &copy);
		if (rc == 0)
			v->legal = false;
		if (rc == 0 && (t->postzero || t->discard))
			rc = st_vol_scrub(d, v->image, v->uuid, t->postzero, t->discard);
		if (rc == 0)
			rc = st_vol_unlink(d, v->image, v->uuid, false);
		if (rc == 0)
			rc = st_vol_unlink(d, v->image, v->uuid, true);
		if (rc < 0) {
			log_error("storage: task %s: cannot finish removing volume %s: %s", t->id,
				  v->uuid, st_rc_text(rc));
			kept++;
			continue;
		}
		char img[37];
		snprintf(img, sizeof(img), "%s", v->image);
		index_del_volume(d, t->vols[i]);
		if (!map_get(&d->images, img))
			st_img_rmdir(d, img);
	}
	return kept;
}

static void recover_delete(struct storage_state *s, struct st_task *t)
{
	struct st_domain *d = st_op_recover_domain(s, t);
	if (!d)
		return;
	size_t left = 0;
	for (size_t i = 0; i < t->nvols; i++)
		if (map_get(&d->volumes, t->vols[i]))
			left++;
	if (left == t->nvols) {
		st_op_recovered(t, false);   /* a delete that removed nothing was not started */
	} else if (left == 0) {
		st_op_recovered(t, true);
	} else {
		/* some volumes were marked ILLEGAL (and the scan removed them):
		 * the delete had begun; finish it */
		size_t kept = delete_rest(s, d, t);
		if (!kept) {
			st_op_recovered(t, true);
			return;
		}
		t->result = ST_TR_CLEAN_FAILURE;
		t->code = rpc_err_code(RPC_E_GENERAL);
		snprintf(t->message, sizeof(t->message),
			 "interrupted by restart: %zu of %zu volumes removed, %zu kept",
			 t->nvols - kept, t->nvols, kept);
	}
}

const struct st_task_op st_op_delete = {
	.kind = ST_TK_DELETE,
	.verb = "deleteVolume",
	.run = run_delete,
	.recover = recover_delete,
	.crash_prefix = "delete",
};

const struct st_task_op st_op_image_delete = {
	.kind = ST_TK_IMAGE_DELETE,
	.verb = "deleteImage",
	.run = run_delete,
	.recover = recover_delete,
	.crash_prefix = "delete",
};
