/* vdsmd/storage/st_ops.c - mutating volume operations.
 *
 * Each operation is split in two:
 *   - the verb part (caller's thread, quick): validate, reserve the volume in
 *     the index (busy, ILLEGAL), persist the task record and the ILLEGAL
 *     metadata, queue the task, return its id;
 *   - the task part (executor thread, st_task_run): the data work, then the
 *     LEGAL metadata (create) or the removal (delete), or a rollback.
 * A crash at any point leaves either a LEGAL, complete volume or ILLEGAL
 * leftovers that the startup scan removes. */
#include "st.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TASK_ABORTED_CODE rpc_err_code(RPC_E_TASK_ABORTED)   /* 411, VDSM's TaskAborted */

static bool blank(const char *u)
{
	return !u || !*u || strcmp(u, ST_BLANK_UUID) == 0;
}

static struct st_volume *find_vol(struct storage_state *s, const char *sd, const char *img,
				  const char *vol, struct st_domain **dp, struct st_err *e)
{
	return st_find_volume(s, sd, img, vol, dp, e);
}

struct st_volume *st_find_volume(struct storage_state *s, const char *sd, const char *img,
				 const char *vol, struct st_domain **dp, struct st_err *e)
{
	if (!st_is_uuid(img) || !st_is_uuid(vol)) {
		st_fail(e, RPC_E_PARAMS, "%s: not a UUID", st_is_uuid(img) ? "volumeID" : "imageID");
		return NULL;
	}
	struct st_domain *d = st_domain_get(s, sd, e);
	if (!d)
		return NULL;
	if (!map_get(&d->images, img)) {
		st_fail(e, RPC_E_NO_IMAGE, "%s in domain %s", img, sd);
		return NULL;
	}
	struct st_volume *v = map_get(&d->volumes, vol);
	if (!v || strcmp(v->image, img) != 0) {
		st_fail(e, RPC_E_NO_VOLUME, "%s in image %s", vol, img);
		return NULL;
	}
	*dp = d;
	return v;
}

/* images/<img> goes when it is empty (rmdir fails otherwise). */
static void img_rmdir(const struct st_domain *d, const char *img)
{
	int images = st_dir_at(d->dir, "images");
	if (images < 0)
		return;
	if (unlinkat(images, img, AT_REMOVEDIR) == 0)
		fsync(images);
	close(images);
}

/* The end of a job on one image: its directory goes when the image has no
 * volume left (empty), and the domain is no longer busy with the job. */
static void job_release(struct storage_state *s, struct st_domain *d, const char *img,
			bool empty)
{
	if (empty)
		img_rmdir(d, img);
	pthread_mutex_lock(&s->lock);
	d->busy--;
	pthread_mutex_unlock(&s->lock);
}

/* ---- Volume.create ------------------------------------------------------- */

int st_volume_create(struct storage_state *s, const struct st_volreq *r, char task_id[37],
		     struct st_err *e)
{
	if (!st_is_uuid(r->sd) || !st_is_uuid(r->img) || !st_is_uuid(r->vol))
		return st_fail(e, RPC_E_PARAMS, "%s: not a UUID", !st_is_uuid(r->sd) ? "storagedomainID"
			       : !st_is_uuid(r->img) ? "imageID" : "volumeID");
	if (r->size <= 0 || r->size % 512 != 0)
		return st_fail(e, RPC_E_PARAMS, "size: must be a positive multiple of 512, got %lld",
			       (long long)r->size);
	if (r->format != ST_FMT_COW && r->format != ST_FMT_RAW)
		return st_fail(e, RPC_E_PARAMS, "volFormat: must be 4 (COW) or 5 (RAW), got %d", r->format);
	if (r->alloc != ST_PREALLOCATED && r->alloc != ST_SPARSE)
		return st_fail(e, RPC_E_PARAMS, "preallocate: must be 1 (PREALLOCATED) or 2 (SPARSE), got %d",
			       r->alloc);
	bool has_parent = !blank(r->src_vol);
	const char *pimg = blank(r->src_img) ? r->img : r->src_img;
	if (has_parent && (!st_is_uuid(r->src_vol) || !st_is_uuid(pimg)))
		return st_fail(e, RPC_E_PARAMS, "srcImgUUID/srcVolUUID: not a UUID");
	if (has_parent && r->format != ST_FMT_COW)
		return st_fail(e, RPC_E_PARAMS, "volFormat: a snapshot (srcVolUUID) must be COW");
	/* initialSize as VDSM's file volumes: not for sparse RAW, only 0 for
	 * COW; for preallocated RAW within 0..size, and the whole capacity is
	 * allocated (which covers it). */
	if (r->initial_given) {
		if (r->format == ST_FMT_COW && r->initial_size > 0)
			return st_fail(e, RPC_E_PARAMS, "initialSize: not supported for COW volumes "
				       "on file domains");
		if (r->format == ST_FMT_RAW && r->alloc == ST_SPARSE)
			return st_fail(e, RPC_E_PARAMS, "initialSize: not supported for sparse RAW "
				       "volumes on file domains");
		if (r->initial_size > r->size)
			return st_fail(e, RPC_E_PARAMS, "initialSize: %lld is larger than size %lld",
				       (long long)r->initial_size, (long long)r->size);
	}

	struct st_volume *v = vol_new();
	snprintf(v->uuid, sizeof(v->uuid), "%.36s", r->vol);
	snprintf(v->image, sizeof(v->image), "%.36s", r->img);
	v->format = r->format;
	v->alloc = r->alloc;
	v->capacity = r->size;
	snprintf(v->disktype, sizeof(v->disktype), "%s",
		 r->disktype && *r->disktype ? r->disktype : "DATA");
	for (char *p = v->disktype; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == '=')
			*p = '_';
	v->description = st_clean_text(r->desc, ST_DESC_MAX);
	v->ctime = v->mtime = (int64_t)time(NULL);
	v->busy = true;
	v->legal = false;
	v->sequence = r->sequence;

	struct st_task *t = st_task_alloc(ST_TK_CREATE);
	t->legal = !r->illegal;
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, r->sd, e);
	struct st_image *im = d ? map_get(&d->images, r->img) : NULL;
	if (!d)
		goto fail_locked;
	if (st_spm_require(s, d, e) < 0)
		goto fail_locked;
	if (map_get(&d->volumes, r->vol)) {
		st_fail(e, RPC_E_VOLUME_EXISTS, "%s", r->vol);
		goto fail_locked;
	}
	if (im && im->deleting) {
		st_fail(e, RPC_E_GENERAL, "image %s is being deleted", r->img);
		goto fail_locked;
	}
	if (!st_task_queue_has_room(s)) {
		st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
		goto fail_locked;
	}
	if (has_parent) {
		struct st_volume *p = map_get(&d->volumes, r->src_vol);
		if (!map_get(&d->images, pimg)) {
			st_fail(e, RPC_E_NO_IMAGE, "%s in domain %s", pimg, r->sd);
			goto fail_locked;
		}
		if (!p || strcmp(p->image, pimg) != 0) {
			st_fail(e, RPC_E_NO_VOLUME, "parent %s in image %s", r->src_vol, pimg);
			goto fail_locked;
		}
		if (!p->legal || p->busy) {
			st_fail(e, RPC_E_GENERAL, "parent volume %s is not usable (ILLEGAL or busy)",
				r->src_vol);
			goto fail_locked;
		}
		snprintf(v->parent, sizeof(v->parent), "%.36s", p->uuid);
		if (p->capacity > v->capacity)
			v->capacity = p->capacity;
		t->parent_format = p->format;
		snprintf(t->parent, sizeof(t->parent), "%.36s", p->uuid);
		snprintf(t->parent_img, sizeof(t->parent_img), "%.36s", pimg);
	}
	index_add_volume(d, v);
	d->busy++;
	pthread_mutex_unlock(&s->lock);

	snprintf(t->sd, sizeof(t->sd), "%.36s", r->sd);
	snprintf(t->img, sizeof(t->img), "%.36s", r->img);
	snprintf(t->vol, sizeof(t->vol), "%.36s", r->vol);
	t->format = v->format;
	t->alloc = v->alloc;
	t->size = v->capacity;

	t->vols = xcalloc(1, sizeof(*t->vols));
	snprintf(t->vols[0], 37, "%.36s", r->vol);
	t->nvols = 1;

	/* The record first: from here a crash is rolled back at restart. */
	int rc = st_task_persist(s, t);
	if (rc == 0) {
		ST_CRASH("create.record");
		int ifd = st_img_open(d, r->img, true);
		rc = ifd < 0 ? ifd : 0;
		if (ifd >= 0)
			close(ifd);
	}
	if (rc == 0) {
		ST_CRASH("create.image-dir");
		rc = st_vol_write_meta(d, v);   /* ILLEGAL until the task completes */
	}
	if (rc == 0)
		ST_CRASH("create.meta-illegal");
	if (rc < 0) {
		st_fail(e, RPC_E_GENERAL, "cannot prepare volume %s: %s", r->vol, strerror(-rc));
		/* The record goes only with the metadata: a .meta that stays
		 * is rolled back by the next start. */
		if (st_vol_unlink(d, r->img, r->vol, true) == 0) {
			char *tp = st_task_path(s, t->id);
			unlink(tp);
			free(tp);
		}
		pthread_mutex_lock(&s->lock);
		index_del_volume(d, r->vol);
		bool empty = !map_get(&d->images, r->img);
		pthread_mutex_unlock(&s->lock);
		job_release(s, d, r->img, empty);
		st_task_free(t);
		return -1;
	}
	snprintf(task_id, 37, "%.36s", t->id);
	st_task_submit(s, t);
	return 0;

fail_locked:
	pthread_mutex_unlock(&s->lock);
	vol_free(v);
	st_task_free(t);
	return -1;
}

static void run_create(struct storage_state *s, struct st_task *t)
{
	char err[256] = "";
	int rc;
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, t->sd);   /* pinned by d->busy */
	pthread_mutex_unlock(&s->lock);
	if (__atomic_load_n(&t->abort, __ATOMIC_ACQUIRE)) {
		rc = -ECANCELED;
		st_task_abort_msg(s, t, err, sizeof(err));
	} else {
		rc = st_vol_create_data(s, t, d, err, sizeof(err));
	}
	if (rc == 0) {
		struct st_volume copy;
		pthread_mutex_lock(&s->lock);
		copy = *(struct st_volume *)map_get(&d->volumes, t->vol);
		pthread_mutex_unlock(&s->lock);
		copy.legal = t->legal;
		rc = st_vol_write_meta(d, &copy);
		if (rc < 0)
			snprintf(err, sizeof(err), "writing volume metadata: %s", strerror(-rc));
		else
			ST_CRASH("create.meta-legal");
	}
	if (rc == 0) {
		int64_t app = 0, tru = 0;
		st_vol_stat(d, t->img, t->vol, &app, &tru);   /* off the lock */
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, t->vol);
		v->legal = t->legal;
		v->busy = false;
		v->apparent = app;
		v->truesize = tru;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
		return;
	}
	/* Roll back: data, then metadata.  If either cannot be removed the
	 * volume stays, ILLEGAL, and the finished record says why (the scan
	 * keeps what no unfinished task claims). */
	int rr = 0;
	if (rc != -EEXIST)   /* a file already there was not made by us */
		rr = st_vol_unlink(d, t->img, t->vol, false);
	if (rr == 0)
		rr = st_vol_unlink(d, t->img, t->vol, true);
	int code = rc == -ECANCELED ? TASK_ABORTED_CODE : 100;
	if (rr < 0) {
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, t->vol);
		v->legal = false;
		v->busy = false;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		char msg[256];
		snprintf(msg, sizeof(msg), "%.120s; rollback failed (%s): volume kept ILLEGAL", err,
			 strerror(-rr));
		log_error("storage: task %s: volume %s/%s: %s", t->id, t->img, t->vol, msg);
		st_task_finish(s, t, ST_TR_CLEAN_FAILURE, code, msg);
		return;
	}
	pthread_mutex_lock(&s->lock);
	index_del_volume(d, t->vol);
	bool empty = !map_get(&d->images, t->img);
	pthread_mutex_unlock(&s->lock);
	job_release(s, d, t->img, empty);
	st_task_finish(s, t, ST_TR_CLEAN_SUCCESS, code, err);
}

/* ---- Volume.delete / Image.delete ---------------------------------------- */

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
					 "kept ILLEGAL", ids[i], strerror(-rc));
			log_error("storage: volume %s/%s: cannot restore LEGAL metadata: %s; kept "
				  "ILLEGAL", copy.image, ids[i], strerror(-rc));
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
			st_task_finish(s, t, ST_TR_CLEAN_FAILURE, 100, why);
			pthread_mutex_lock(&s->lock);
			map_put(&s->tasks, t->id, t);
			pthread_mutex_unlock(&s->lock);
			t = NULL;
		}
		st_task_free(t);
		return st_fail(e, RPC_E_GENERAL, "cannot mark volumes for deletion: %s%s%s",
			       strerror(-rc), why[0] ? "; " : "", why);
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
	struct st_volume *v = find_vol(s, sd, img, vol, &d, e);
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
	struct st_task *t = st_task_alloc(ST_TK_DELETE);
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
	struct st_task *t = st_task_alloc(ST_TK_IMAGE_DELETE);
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
	struct st_task *t = st_task_alloc(ST_TK_DELETE);
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
					snprintf(err, sizeof(err), "removing volume %s: %s", id,
						 strerror(-rc));
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
	job_release(s, d, t->img, empty);
	if (!failed && !aborted)
		ST_CRASH("delete.removed-all");
	if (failed)
		st_task_finish(s, t, ST_TR_CLEAN_FAILURE, aborted ? TASK_ABORTED_CODE : 100, err);
	else if (aborted)
		st_task_finish(s, t, ST_TR_CLEAN_SUCCESS, TASK_ABORTED_CODE, err);
	else
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
}

void st_task_run(struct storage_state *s, struct st_task *t)
{
	if (t->kind == ST_TK_SPM_START)
		st_spm_run_start(s, t);
	else if (t->kind == ST_TK_EXTEND)
		st_volume_run_extend(s, t);
	else if (t->kind == ST_TK_CREATE)
		run_create(s, t);
	else if (t->kind == ST_TK_IMAGE_COPY)
		st_image_run_copy(s, t);
	else
		run_delete(s, t);
}

/* ---- Volume.setDescription / getInfo ------------------------------------- */

int st_volume_set_description(struct storage_state *s, const char *sd, const char *img,
			      const char *vol, const char *desc, struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = find_vol(s, sd, img, vol, &d, e);
	if (!v) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	if (v->busy || !v->legal) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_GENERAL, "volume %s is busy or ILLEGAL", vol);
	}
	v->busy = true;
	d->busy++;
	struct st_volume copy = *v;
	pthread_mutex_unlock(&s->lock);
	char *nd = st_clean_text(desc, ST_DESC_MAX);
	copy.description = nd;
	copy.mtime = (int64_t)time(NULL);
	int rc = st_vol_write_meta(d, &copy);
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		free(v->description);
		v->description = nd;
		v->mtime = copy.mtime;
	} else {
		free(nd);
	}
	v->busy = false;
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return st_fail(e, RPC_E_GENERAL, "writing volume metadata: %s", strerror(-rc));
	return 0;
}

int st_volume_info(struct storage_state *s, const char *sd, const char *img, const char *vol,
		   struct st_volume *out, struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = find_vol(s, sd, img, vol, &d, e);
	if (v) {
		*out = *v;
		out->description = xstrdup(v->description ? v->description : "");
	}
	pthread_mutex_unlock(&s->lock);
	return v ? 0 : -1;
}
