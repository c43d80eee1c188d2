/* vdsmd/storage/st_op_create.c - Volume.create as a task (kind
 * ST_TK_CREATE, crash steps "create.*").
 *
 * The verb part (caller's thread, quick) validates, reserves the volume in
 * the index (busy, ILLEGAL), persists the task record and the ILLEGAL
 * metadata and queues the task; the task part (executor thread) makes the
 * data file, then writes the LEGAL metadata, or rolls back.  A crash at any
 * point leaves either a LEGAL, complete volume or ILLEGAL leftovers that
 * the startup scan removes (the record claims the volume). */
#include "st_crash.h"
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool blank(const char *u)
{
	return !u || !*u || strcmp(u, ST_BLANK_UUID) == 0;
}

/* Volume.create's parameters, before anything is looked at. */
static int check_req(const struct st_volreq *r, struct st_err *e)
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

	return 0;
}

int st_volume_create(struct storage_state *s, const struct st_volreq *r, char task_id[37],
		     struct st_err *e)
{
	if (check_req(r, e) < 0)
		return -1;
	bool has_parent = !blank(r->src_vol);
	const char *pimg = blank(r->src_img) ? r->img : r->src_img;

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

	struct st_task *t = st_task_alloc(&st_op_create);
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
		st_fail_rc(e, RPC_E_GENERAL, rc, "cannot prepare volume %s", r->vol);
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
		st_op_job_release(s, d, r->img, empty);
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
	struct st_task_io tio;
	st_task_io_init(&tio, s, t);
	if (tio.io.stopped(tio.io.ctx, err, sizeof(err))) {
		rc = VD_ECANCELED;
	} else {
		struct st_vol_spec sp = {
			.img = t->img, .vol = t->vol, .format = t->format, .alloc = t->alloc,
			.size = t->size, .parent = t->parent, .parent_img = t->parent_img,
			.parent_format = t->parent_format,
#ifdef VD_TEST_HOOKS
			.prealloc_chunk_delay_us = s->prealloc_chunk_delay_us,
			.prealloc_force_write = s->prealloc_force_write,
#endif
		};
		rc = st_vol_create_data(d, &sp, &tio.io, err, sizeof(err));
	}
	if (rc == 0) {
		struct st_volume copy;
		pthread_mutex_lock(&s->lock);
		copy = *(struct st_volume *)map_get(&d->volumes, t->vol);
		pthread_mutex_unlock(&s->lock);
		copy.legal = t->legal;
		rc = st_vol_write_meta(d, &copy);
		if (rc < 0)
			st_errf(err, sizeof(err), rc, "writing volume metadata");
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
	if (rc != VD_ESYS(EEXIST))   /* a file already there was not made by us */
		rr = st_vol_unlink(d, t->img, t->vol, false);
	if (rr == 0)
		rr = st_vol_unlink(d, t->img, t->vol, true);
	int code = rpc_err_code(rc == VD_ECANCELED ? RPC_E_TASK_ABORTED : RPC_E_GENERAL);
	if (rr < 0) {
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, t->vol);
		v->legal = false;
		v->busy = false;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		char msg[256];
		snprintf(msg, sizeof(msg), "%.120s; rollback failed (%s): volume kept ILLEGAL", err,
			 st_rc_text(rr));
		log_error("storage: task %s: volume %s/%s: %s", t->id, t->img, t->vol, msg);
		st_task_finish(s, t, ST_TR_CLEAN_FAILURE, code, msg);
		return;
	}
	pthread_mutex_lock(&s->lock);
	index_del_volume(d, t->vol);
	bool empty = !map_get(&d->images, t->img);
	pthread_mutex_unlock(&s->lock);
	st_op_job_release(s, d, t->img, empty);
	st_task_finish(s, t, ST_TR_CLEAN_SUCCESS, code, err);
}

/* Found unfinished at startup: a complete volume succeeded, anything else
 * was rolled back by the scan. */
static void recover_create(struct storage_state *s, struct st_task *t)
{
	struct st_domain *d = st_op_recover_domain(s, t);
	if (!d)
		return;
	struct st_volume *v = map_get(&d->volumes, t->vol);
	bool ok = v && (v->legal || !t->legal);
	st_op_recovered(t, ok);
}

static void save_create(const struct st_task *t, struct st_kv *kv)
{
	kv_set(kv, "LEGAL", t->legal ? "1" : "0");
}

static void load_create(struct st_task *t, const struct st_kv *kv)
{
	t->legal = kv_get_int(kv, "LEGAL", 1) == 1;
}

const struct st_task_op st_op_create = {
	.kind = ST_TK_CREATE,
	.verb = "createVolume",
	.run = run_create,
	.recover = recover_create,
	.save = save_create,
	.load = load_create,
	.crash_prefix = "create",
};
