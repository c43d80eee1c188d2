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

/* Caller holds the lock. */
static struct st_volume *find_vol(struct storage_state *s, const char *sd, const char *img,
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

static void rmdir_if_empty(const char *dir)
{
	if (rmdir(dir) == 0) {
		char *parent = st_pathf("%s/..", dir);
		st_fsync_dir(parent);
		free(parent);
	}
}

/* The end of a job on one image: its directory goes when the image has no
 * volume left (empty), and the domain is no longer busy with the job. */
static void job_release(struct storage_state *s, struct st_domain *d, const char *idir,
			bool empty)
{
	if (empty)
		rmdir_if_empty(idir);
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

	struct st_task *t = st_task_alloc(ST_TK_CREATE);
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, r->sd, e);
	struct st_image *im = d ? map_get(&d->images, r->img) : NULL;
	if (!d)
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

	char *idir = st_img_dir(d, r->img);
	int rc = st_task_persist(s, t);
	if (rc == 0) {
		if (mkdir(idir, 0755) == 0) {
			char *images = st_path(d->dir, "images");
			rc = st_fsync_dir(images);   /* the new image's entry is durable */
			free(images);
		} else if (errno != EEXIST) {
			rc = -errno;
		}
	}
	if (rc == 0)
		rc = st_vol_write_meta(d, v);   /* ILLEGAL until the task completes */
	if (rc < 0) {
		st_fail(e, RPC_E_GENERAL, "cannot prepare volume %s: %s", r->vol, strerror(-rc));
		char *mp = st_vol_meta_path(d, r->img, r->vol), *tp = st_task_path(s, t->id);
		unlink(mp);
		unlink(tp);
		free(mp);
		free(tp);
		rmdir_if_empty(idir);
		free(idir);
		pthread_mutex_lock(&s->lock);
		index_del_volume(d, r->vol);
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		free(t);
		return -1;
	}
	free(idir);
	snprintf(task_id, 37, "%.36s", t->id);
	st_task_submit(s, t);
	return 0;

fail_locked:
	pthread_mutex_unlock(&s->lock);
	vol_free(v);
	free(t);
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
		snprintf(err, sizeof(err), "Task is aborted: %s", t->abort_why);
	} else {
		rc = st_vol_create_data(s, t, d, err, sizeof(err));
	}
	if (rc == 0) {
		struct st_volume copy;
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, t->vol);
		copy = *v;
		pthread_mutex_unlock(&s->lock);
		copy.legal = true;
		rc = st_vol_write_meta(d, &copy);
		if (rc < 0) {
			snprintf(err, sizeof(err), "writing volume metadata: %s", strerror(-rc));
			char *dp = st_vol_data_path(d, t->img, t->vol);
			unlink(dp);
			free(dp);
		}
	}
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, t->vol);
		v->legal = true;
		v->busy = false;
		st_vol_stat(d, v);
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
		return;
	}
	/* Roll back: the data file is already gone; drop the metadata. */
	char *mp = st_vol_meta_path(d, t->img, t->vol), *idir = st_img_dir(d, t->img);
	bool clean = unlink(mp) == 0 || errno == ENOENT;
	st_fsync_dir(idir);
	pthread_mutex_lock(&s->lock);
	index_del_volume(d, t->vol);
	bool empty = !map_get(&d->images, t->img);
	pthread_mutex_unlock(&s->lock);
	job_release(s, d, idir, empty);
	free(mp);
	free(idir);
	st_task_finish(s, t, clean ? ST_TR_CLEAN_SUCCESS : ST_TR_CLEAN_FAILURE,
		       rc == -ECANCELED ? TASK_ABORTED_CODE : 100, err);
}

/* ---- Volume.delete / Image.delete ---------------------------------------- */

/* Mark vols busy + ILLEGAL (in the index, then on disk) and queue the task.
 * Caller holds the lock and has validated; releases it. */
static int queue_delete(struct storage_state *s, struct st_domain *d, struct st_task *t,
			struct st_volume **vols, size_t n, char task_id[37], struct st_err *e)
{
	struct st_volume *copies = xcalloc(n, sizeof(*copies));
	for (size_t i = 0; i < n; i++) {
		vols[i]->busy = true;
		vols[i]->legal = false;
		copies[i] = *vols[i];
	}
	d->busy++;
	pthread_mutex_unlock(&s->lock);
	int rc = st_task_persist(s, t);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = st_vol_write_meta(d, &copies[i]);
	if (rc < 0) {
		/* Put back what was marked. */
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < n; i++) {
			struct st_volume *v = map_get(&d->volumes, copies[i].uuid);
			v->legal = true;
		}
		for (size_t i = 0; i < n; i++)
			copies[i].legal = true;
		pthread_mutex_unlock(&s->lock);
		for (size_t i = 0; i < n; i++)
			st_vol_write_meta(d, &copies[i]);
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < n; i++)
			((struct st_volume *)map_get(&d->volumes, copies[i].uuid))->busy = false;
		struct st_image *im = map_get(&d->images, t->img);
		if (im)
			im->deleting = false;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		char *tp = st_task_path(s, t->id);
		unlink(tp);
		free(tp);
		free(copies);
		free(t);
		return st_fail(e, RPC_E_GENERAL, "cannot mark volumes for deletion: %s", strerror(-rc));
	}
	free(copies);
	snprintf(task_id, 37, "%.36s", t->id);
	st_task_submit(s, t);
	return 0;
}

int st_volume_delete(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     char task_id[37], struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = find_vol(s, sd, img, vol, &d, e);
	if (!v)
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
	return queue_delete(s, d, t, &v, 1, task_id, e);
fail:
	pthread_mutex_unlock(&s->lock);
	return -1;
}

int st_image_delete(struct storage_state *s, const char *sd, const char *img, char task_id[37],
		    struct st_err *e)
{
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
	for (size_t i = 0; i < im->n; i++)
		if (im->vols[i]->busy || im->deleting) {
			st_fail(e, RPC_E_GENERAL, "image %s has operations in progress", img);
			goto fail;
		}
	/* A volume of another image backed by one of ours blocks the delete. */
	for (struct st_map_ent *it = map_first(&d->volumes); it; it = map_next(&d->volumes, it)) {
		struct st_volume *o = map_val(it);
		if (strcmp(o->image, img) == 0 || strcmp(o->parent, ST_BLANK_UUID) == 0)
			continue;
		struct st_volume *p = map_get(&d->volumes, o->parent);
		if (p && strcmp(p->image, img) == 0) {
			st_fail(e, RPC_E_GENERAL, "image %s is a template of volume %s", img, o->uuid);
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
	/* Newest first: a child is marked ILLEGAL (and removed) before its
	 * parent, so a crash midway never leaves a LEGAL child without its
	 * backing file. */
	size_t n = im->n;
	struct st_volume **vols = xcalloc(n, sizeof(*vols));
	for (size_t i = 0; i < n; i++)
		vols[i] = im->vols[n - 1 - i];
	int rc = queue_delete(s, d, t, vols, n, task_id, e);
	free(vols);
	return rc;
fail:
	pthread_mutex_unlock(&s->lock);
	return -1;
}

static void run_delete(struct storage_state *s, struct st_task *t)
{
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, t->sd);
	struct st_image *im = map_get(&d->images, t->img);
	size_t n = 0;
	char (*ids)[37] = NULL;
	if (t->kind == ST_TK_DELETE) {
		ids = xcalloc(1, sizeof(*ids));
		snprintf(ids[0], 37, "%.36s", t->vol);
		n = 1;
	} else if (im) {
		ids = xcalloc(im->n ? im->n : 1, sizeof(*ids));
		for (size_t i = im->n; i-- > 0;)   /* newest (children) first */
			snprintf(ids[n++], 37, "%.36s", im->vols[i]->uuid);
	}
	bool aborted = __atomic_load_n(&t->abort, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&s->lock);

	char *idir = st_img_dir(d, t->img);
	char err[256] = "";
	if (aborted) {
		/* Not started: the volumes are intact; make them LEGAL again. */
		for (size_t i = 0; i < n; i++) {
			struct st_volume copy;
			pthread_mutex_lock(&s->lock);
			struct st_volume *v = map_get(&d->volumes, ids[i]);
			v->legal = true;
			copy = *v;
			pthread_mutex_unlock(&s->lock);
			st_vol_write_meta(d, &copy);
			pthread_mutex_lock(&s->lock);
			v->busy = false;
			pthread_mutex_unlock(&s->lock);
		}
		snprintf(err, sizeof(err), "Task is aborted: %s", t->abort_why);
	} else {
		for (size_t i = 0; i < n; i++) {
			char *dp = st_vol_data_path(d, t->img, ids[i]);
			char *mp = st_vol_meta_path(d, t->img, ids[i]);
			int rc = 0;
			if (unlink(dp) < 0 && errno != ENOENT)
				rc = -errno;
			if (rc == 0 && unlink(mp) < 0 && errno != ENOENT)
				rc = -errno;
			free(dp);
			free(mp);
			pthread_mutex_lock(&s->lock);
			if (rc == 0) {
				index_del_volume(d, ids[i]);
			} else {
				struct st_volume *v = map_get(&d->volumes, ids[i]);
				v->busy = false;   /* stays ILLEGAL */
				if (!err[0])
					snprintf(err, sizeof(err), "removing volume %s: %s", ids[i],
						 strerror(-rc));
			}
			pthread_mutex_unlock(&s->lock);
		}
		st_fsync_dir(idir);
	}
	pthread_mutex_lock(&s->lock);
	im = map_get(&d->images, t->img);
	if (im)
		im->deleting = false;
	bool empty = !im;
	pthread_mutex_unlock(&s->lock);
	job_release(s, d, idir, empty);
	free(idir);
	free(ids);
	if (aborted)
		st_task_finish(s, t, ST_TR_CLEAN_SUCCESS, TASK_ABORTED_CODE, err);
	else if (err[0])
		st_task_finish(s, t, ST_TR_CLEAN_FAILURE, 100, err);
	else
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
}

void st_task_run(struct storage_state *s, struct st_task *t)
{
	if (t->kind == ST_TK_CREATE)
		run_create(s, t);
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
