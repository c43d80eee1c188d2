/* vdsmd/storage/st_imgcopy_run.c - the image copy task (st_imgcopy.c has
 * the verb, the record and what each op does): the source chain, the
 * executor's run (clone, sync layer by layer, compare, remove the source of
 * a move, roll back on failure), the busy marks released, and the recovery
 * of a task found unfinished after a kill -9. */
#include "st_crash.h"
#include "st_imgcopy.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ABORTED_CODE rpc_err_code(RPC_E_TASK_ABORTED)
#define GENERAL_CODE rpc_err_code(RPC_E_GENERAL)

/* The image's volumes base first (parents before children); NULL with e
 * filled when it is not a chain we can copy.  Caller holds the lock. */
struct st_volume **st_imgcopy_chain(struct st_domain *d, const char *img, size_t *np,
				    struct st_err *e)
{
	struct st_image *im = map_get(&d->images, img);
	if (!im || im->n == 0) {
		st_fail(e, RPC_E_NO_IMAGE, "%s in domain %s", img, d->uuid);
		return NULL;
	}
	struct st_volume **out = xcalloc(im->n, sizeof(*out));
	size_t n = 0;
	bool progress = true;
	while (n < im->n && progress) {
		progress = false;
		for (size_t i = 0; i < im->n; i++) {
			struct st_volume *v = im->vols[i];
			bool placed = false, parent_ok = strcmp(v->parent, ST_BLANK_UUID) == 0;
			for (size_t k = 0; k < n; k++) {
				placed |= out[k] == v;
				parent_ok |= strcmp(out[k]->uuid, v->parent) == 0;
			}
			struct st_volume *p = map_get(&d->volumes, v->parent);
			if (p && strcmp(p->image, img) != 0)
				parent_ok = true;   /* a template's volume */
			if (!placed && parent_ok) {
				out[n++] = v;
				progress = true;
			}
		}
	}
	if (n != im->n) {
		free(out);
		st_fail(e, RPC_E_GENERAL, "image %s: the volumes do not form a chain", img);
		return NULL;
	}
	*np = n;
	return out;
}

/* Clear the busy marks the verb set (source chain, synced destination
 * volumes, both domains). */
void st_image_copy_release(struct storage_state *s, struct st_task *t)
{
	pthread_mutex_lock(&s->lock);
	struct st_domain *sd = map_get(&s->domains, t->sd);
	struct st_domain *dd = map_get(&s->domains, t->dst_sd);
	for (int k = 0; k < 2; k++) {
		struct st_domain *d = k ? dd : sd;
		struct st_image *im = d ? map_get(&d->images, t->img) : NULL;
		for (size_t i = 0; im && i < im->n; i++)
			im->vols[i]->busy = false;
		if (d)
			d->busy--;
	}
	pthread_mutex_unlock(&s->lock);
}

/* The data file's path after checking it below the domain (no symlink,
 * a regular file); NULL with err filled. */
static char *checked_path(const struct st_domain *d, const char *img, const char *vol,
			  char *err, size_t errlen)
{
	int64_t app, tru;
	int rc = st_vol_stat(d, img, vol, &app, &tru);
	if (rc < 0) {
		st_errf(err, errlen, rc, "volume %s/%s on %s: data file unusable", img, vol,
			d->uuid);
		return NULL;
	}
	return st_pathf("%s/images/%s/%s", d->dir, img, vol);
}

/* Write v's metadata with legality set, then the index (caller holds no
 * lock; v is the index entry, pinned busy by this task). */
static int set_legal(struct storage_state *s, struct st_domain *d, struct st_volume *v,
		     bool legal)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume copy = *v;
	pthread_mutex_unlock(&s->lock);
	copy.legal = legal;
	copy.mtime = (int64_t)time(NULL);
	int rc = st_vol_write_meta(d, &copy);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		v->legal = legal;
		v->mtime = copy.mtime;
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

static bool aborted(struct storage_state *s, struct st_task *t, char *err, size_t errlen)
{
	if (!__atomic_load_n(&t->abort, __ATOMIC_ACQUIRE))
		return false;
	st_task_abort_msg(s, t, err, errlen);
	return true;
}

/* Remove a volume's files (scrubbing first when asked), then its index
 * entry.  ILLEGAL in the metadata first, so a crash half-way leaves a
 * volume nobody serves as good. */
static int remove_volume(struct storage_state *s, struct st_domain *d, struct st_volume *v,
			 bool zero, bool discard)
{
	pthread_mutex_lock(&s->lock);
	bool legal = v->legal;
	pthread_mutex_unlock(&s->lock);
	/* (a volume already ILLEGAL needs no metadata write: a rollback on a
	 * full domain still works) */
	int rc = legal ? set_legal(s, d, v, false) : 0;
	if (rc == 0 && legal)
		ST_CRASH("imgcopy.src-illegal");
	if (rc == 0 && (zero || discard))
		rc = st_vol_scrub(d, v->image, v->uuid, zero, discard);
	if (rc == 0)
		rc = st_vol_unlink(d, v->image, v->uuid, false);
	if (rc == 0) {
		if (legal)
			ST_CRASH("imgcopy.src-data-unlinked");
		rc = st_vol_unlink(d, v->image, v->uuid, true);
	}
	if (rc == 0) {
		char img[37];
		snprintf(img, sizeof(img), "%s", v->image);
		pthread_mutex_lock(&s->lock);
		index_del_volume(d, v->uuid);
		pthread_mutex_unlock(&s->lock);
		/* an empty image directory goes too (fails harmlessly if not empty) */
		st_img_rmdir(d, img);
	}
	return rc;
}

/* Create one empty volume like src on dd (data, then the metadata - LEGAL
 * for a cloneStructure, ILLEGAL for a copy or move, which fills it - then
 * the index entry, busy). */
static int clone_one(struct storage_state *s, struct st_task *t, struct st_domain *dd,
		     const struct st_volume *src, int parent_format, char *err, size_t errlen)
{
	int ifd = st_img_open(dd, src->image, true);
	if (ifd < 0) {
		st_errf(err, errlen, ifd, "image directory on %s", dd->uuid);
		return ifd;
	}
	close(ifd);
	ST_CRASH("imgcopy.image-dir");
	/* the parent may be a template's volume in another image */
	char parent_img[37];
	pthread_mutex_lock(&s->lock);
	struct st_volume *p = map_get(&dd->volumes, src->parent);
	snprintf(parent_img, sizeof(parent_img), "%s", p ? p->image : src->image);
	pthread_mutex_unlock(&s->lock);
	struct st_vol_spec sp = {
		.img = src->image, .vol = src->uuid, .format = src->format, .alloc = src->alloc,
		.size = src->capacity, .parent = src->parent, .parent_img = parent_img,
		.parent_format = parent_format,
#ifdef VD_TEST_HOOKS
		.prealloc_chunk_delay_us = s->prealloc_chunk_delay_us,
		.prealloc_force_write = s->prealloc_force_write,
#endif
	};
	/* as before the engine split: a clone's data files are small and not
	 * stopped half-way (the task checks for a stop between volumes) */
	int rc = st_vol_create_data(dd, &sp, NULL, err, errlen);
	if (rc < 0)
		return rc;
	ST_CRASH("imgcopy.clone-data");
	struct st_volume *v = vol_new();
	*v = *src;
	v->description = xstrdup(src->description ? src->description : "");
	v->legal = t->icop == ST_IC_CLONE;
	v->busy = true;
	v->nchildren = 0;
	v->generation = 0;
	v->ctime = v->mtime = (int64_t)time(NULL);
	rc = st_vol_write_meta(dd, v);
	if (rc < 0) {
		st_errf(err, errlen, rc, "writing metadata of %s on %s", v->uuid, dd->uuid);
		st_vol_unlink(dd, v->image, v->uuid, false);
		vol_free(v);
		return rc;
	}
	int64_t app = 0, tru = 0;
	if (st_vol_stat(dd, v->image, v->uuid, &app, &tru) == 0) {
		v->apparent = app;
		v->truesize = tru;
	}
	pthread_mutex_lock(&s->lock);
	index_add_volume(dd, v);
	pthread_mutex_unlock(&s->lock);
	ST_CRASH("imgcopy.clone-meta");
	return 0;
}

static const char *qfmt(int f)
{
	return f == ST_FMT_COW ? "qcow2" : "raw";
}

/* Copy one layer's data: src (checked) into dst (checked), synced, then
 * LEGAL.  A copy or move marks it ILLEGAL first (a no-op over what its
 * clone made); a syncData leaves it as it is while written (VDSM) and
 * marks it ILLEGAL only when the write fails half-way. */
static int sync_one(struct storage_state *s, struct st_task *t, struct st_domain *sdom,
		    struct st_domain *dd, struct st_volume *sv, struct st_volume *dv, char *err,
		    size_t errlen)
{
	char *src = NULL, *dst = NULL, *base = NULL;
	int rc = 0;
	bool sync = t->icop == ST_IC_SYNC, writing = false;
	if (!sync) {
		rc = set_legal(s, dd, dv, false);
		if (rc < 0) {
			st_errf(err, errlen, rc, "marking %s ILLEGAL", dv->uuid);
			return rc;
		}
		ST_CRASH("imgcopy.sync-illegal");
	}
	rc = VD_EIO;
	/* the source chain from our metadata, never from its qcow2 headers */
	src = st_chain_json(s, sdom, sv->uuid, err, errlen);
	dst = src ? checked_path(dd, dv->image, dv->uuid, err, errlen) : NULL;
	if (!dst)
		goto out;
	char *argv[16];
	int a = 0;
	argv[a++] = (char *)"qemu-img";
	argv[a++] = (char *)"convert";
	argv[a++] = (char *)"-n";
	argv[a++] = (char *)"-O";
	argv[a++] = (char *)qfmt(dv->format);
	if (strcmp(dv->parent, ST_BLANK_UUID) != 0) {
		pthread_mutex_lock(&s->lock);
		struct st_volume *p = map_get(&dd->volumes, dv->parent);
		char pimg[37], pfmt[8];
		snprintf(pimg, sizeof(pimg), "%s", p ? p->image : dv->image);
		snprintf(pfmt, sizeof(pfmt), "%s", qfmt(p ? p->format : ST_FMT_RAW));
		pthread_mutex_unlock(&s->lock);
		base = checked_path(dd, pimg, dv->parent, err, errlen);
		if (!base)
			goto out;
		argv[a++] = (char *)"-B";
		argv[a++] = base;
		argv[a++] = (char *)"-F";
		argv[a++] = (char *)(strcmp(pfmt, "qcow2") == 0 ? "qcow2" : "raw");
	}
	argv[a++] = src;
	argv[a++] = dst;
	argv[a] = NULL;
	struct st_task_io tio;
	st_task_io_init(&tio, s, t);
#ifdef VD_TEST_HOOKS
	tio.io.crash_step = "imgcopy.converting";
#endif
	writing = true;
	rc = st_run_qemu_img(&tio.io, argv, -1, err, errlen);
	if (rc < 0)
		goto out;
	int fd = st_vol_open(dd, dv->image, dv->uuid, O_RDONLY, NULL);
	rc = fd < 0 ? fd : st_fsync_fd(fd);
	if (rc < 0)
		st_errf(err, errlen, rc, "syncing %s", dv->uuid);
	if (fd >= 0)
		close(fd);
	if (rc == 0)
		ST_CRASH("imgcopy.converted");
	pthread_mutex_lock(&s->lock);
	bool legal = dv->legal;
	pthread_mutex_unlock(&s->lock);
	if (rc == 0 && !legal && (rc = set_legal(s, dd, dv, true)) < 0)
		st_errf(err, errlen, rc, "marking %s LEGAL", dv->uuid);
	int64_t app = 0, tru = 0;
	if (st_vol_stat(dd, dv->image, dv->uuid, &app, &tru) == 0) {
		pthread_mutex_lock(&s->lock);
		dv->apparent = app;
		dv->truesize = tru;
		pthread_mutex_unlock(&s->lock);
	}
out:
	/* a syncData layer written half-way: not served as good */
	if (rc < 0 && sync && writing && set_legal(s, dd, dv, false) < 0)
		log_error("storage: task %s: marking %s ILLEGAL after its failed sync failed",
			  t->id, dv->uuid);
	free(src);
	free(dst);
	free(base);
	return rc;
}

/* syncData: k layers of its range written and fsynced, in the record. */
static int record_synced(struct storage_state *s, struct st_task *t, int k)
{
	pthread_mutex_lock(&s->lock);
	struct st_task copy = *t;
	pthread_mutex_unlock(&s->lock);
	copy.synced = k;
	int rc = st_task_persist(s, &copy);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		t->synced = k;
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

/* qemu-img compare of one layer (with its backing chain) on both sides. */
static int verify_one(struct storage_state *s, struct st_task *t, struct st_domain *sdom,
		      struct st_domain *dd, const struct st_volume *sv,
		      const struct st_volume *dv, char *err, size_t errlen)
{
	char *src = st_chain_json(s, sdom, sv->uuid, err, errlen);
	char *dst = src ? st_chain_json(s, dd, dv->uuid, err, errlen) : NULL;
	int rc = VD_EIO;
	if (dst) {
		char *argv[] = { (char *)"qemu-img", (char *)"compare", src, dst, NULL };
		struct st_task_io tio;
		st_task_io_init(&tio, s, t);
		rc = st_run_qemu_img(&tio.io, argv, -1, err, errlen);
		if (rc < 0 && rc != VD_ECANCELED) {
			char why[200];
			snprintf(why, sizeof(why), "%.199s", err);
			snprintf(err, errlen, "verifying %s: the copy differs or cannot be read: %s",
				 sv->uuid, why);
		}
	}
	free(src);
	free(dst);
	return rc;
}

void st_imgcopy_run(struct storage_state *s, struct st_task *t)
{
	char err[512] = "";
	struct st_err e = { 0 };
	int rc = 0;
	size_t n = 0, ncreated = 0;
	bool src_touched = false;
	pthread_mutex_lock(&s->lock);
	struct st_domain *sdom = map_get(&s->domains, t->sd);
	struct st_domain *dd = map_get(&s->domains, t->dst_sd);
	struct st_volume **ch = sdom && dd ? st_imgcopy_chain(sdom, t->img, &n, &e) : NULL;
	pthread_mutex_unlock(&s->lock);
	struct st_volume **dst = xcalloc(n ? n : 1, sizeof(*dst));
	if (!ch) {
		snprintf(err, sizeof(err), "%s", e.msg[0] ? e.msg : "domain not available");
		rc = VD_EIO;
		goto out;
	}
	/* 1. the structure */
	for (size_t i = 0; t->icop != ST_IC_SYNC && i < n && rc == 0; i++) {
		if (aborted(s, t, err, sizeof(err))) {
			rc = VD_ECANCELED;
			break;
		}
		pthread_mutex_lock(&s->lock);
		struct st_volume *p = map_get(&sdom->volumes, ch[i]->parent);
		int pfmt = p ? p->format : ST_FMT_RAW;
		struct st_volume src = *ch[i];
		pthread_mutex_unlock(&s->lock);
		rc = clone_one(s, t, dd, &src, pfmt, err, sizeof(err));
		if (rc == 0)
			ncreated++;
	}
	if (t->icop != ST_IC_SYNC && rc == 0)
		ST_CRASH("imgcopy.cloned");
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_lock(&s->lock);
		dst[i] = map_get(&dd->volumes, ch[i]->uuid);
		pthread_mutex_unlock(&s->lock);
	}
	/* 2. the data */
	if (t->icop != ST_IC_CLONE && rc == 0) {
		size_t first = 0, last = n;   /* [first, last) */
		if (t->icop == ST_IC_SYNC && t->sync_type == ST_SYNC_INTERNAL)
			last = n - 1;
		else if (t->icop == ST_IC_SYNC && t->sync_type == ST_SYNC_LEAF)
			first = n - 1;
		for (size_t i = first; i < last && rc == 0; i++) {
			if (aborted(s, t, err, sizeof(err))) {
				rc = VD_ECANCELED;
				break;
			}
			rc = sync_one(s, t, sdom, dd, ch[i], dst[i], err, sizeof(err));
			if (rc == 0 && t->icop == ST_IC_SYNC &&
			    (rc = record_synced(s, t, (int)(i + 1 - first))) < 0)
				st_errf(err, sizeof(err), rc, "recording the sync of %s", ch[i]->uuid);
			if (rc == 0)
				ST_CRASH("imgcopy.synced-one");
			pthread_mutex_lock(&s->lock);
			t->progress = (int)((i + 1 - first) * 90 / (last - first));
			pthread_mutex_unlock(&s->lock);
		}
	}
	/* 3. a move: verify every layer, then remove the source */
	if (t->icop == ST_IC_MOVE && rc == 0) {
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = verify_one(s, t, sdom, dd, ch[i], dst[i], err, sizeof(err));
		if (rc == 0 && aborted(s, t, err, sizeof(err)))
			rc = VD_ECANCELED;
		if (rc == 0)
			ST_CRASH("imgcopy.verified");
		for (size_t i = n; rc == 0 && i-- > 0;) {
			src_touched = true;
			rc = remove_volume(s, sdom, ch[i], t->postzero, t->discard);
			if (rc < 0)
				snprintf(err, sizeof(err), "the image was copied to %s and verified, "
					 "but removing source volume %s failed: %s (it is kept, "
					 "ILLEGAL)", t->dst_sd, ch[i]->uuid, st_rc_text(rc));
			else
				ch[i] = NULL;
			if (rc == 0)
				ST_CRASH("imgcopy.src-removed-one");
		}
	}
out:;
	bool was_aborted = rc == VD_ECANCELED;
	/* roll the destination back when the source is untouched */
	if (rc < 0 && !src_touched && t->icop != ST_IC_SYNC) {
		size_t kept = 0;
		for (size_t i = ncreated; i-- > 0;) {
			if (dst[i] && remove_volume(s, dd, dst[i], false, false) < 0)
				kept++;
			else
				dst[i] = NULL;
		}
		if (kept) {
			size_t l = strlen(err);
			snprintf(err + l, sizeof(err) - l, "; rollback left %zu volume(s) ILLEGAL on %s",
				 kept, t->dst_sd);
		}
	}
	st_image_copy_release(s, t);
	free(ch);
	free(dst);
	if (rc == 0) {
		ST_CRASH("imgcopy.done");
		log_info("storage: task %s: %s of image %s from %s to %s done", t->id, t->verb,
			 t->img, t->sd, t->dst_sd);
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
	} else {
		log_warn("storage: task %s: %s of image %s from %s to %s failed: %s", t->id,
			 t->verb, t->img, t->sd, t->dst_sd, err);
		st_task_finish(s, t, was_aborted && !src_touched ? ST_TR_CLEAN_SUCCESS
				     : ST_TR_CLEAN_FAILURE,
			       was_aborted ? ABORTED_CODE : GENERAL_CODE, err);
	}
}

/* ---- after a kill -9 (st_tasks_recover, at startup, no other thread) ----- */

static void recovered(struct st_task *t, enum st_task_result r, int code, const char *msg)
{
	t->result = r;
	t->code = code;
	snprintf(t->message, sizeof(t->message), "%s", msg);
}

/* Which of t->vols (base first) are on d in t's image, LEGAL or not. */
static struct st_volume *vol_of(struct st_domain *d, const struct st_task *t, size_t i)
{
	struct st_volume *v = d ? map_get(&d->volumes, t->vols[i]) : NULL;
	return v && strcmp(v->image, t->img) == 0 ? v : NULL;
}

/* The scan has already removed the destination volumes this task claimed
 * that were ILLEGAL or half-made (never a source volume, never a volume of
 * a syncData, which existed before).  Decide the rest:
 *   move whose source removal had begun (a source volume gone or ILLEGAL:
 *     that happens only after every layer compared equal) -> finish it:
 *     remove what is left of the source; success;
 *   copy whose every destination layer is LEGAL (synced) -> success;
 *   clone / copy / move otherwise -> remove what the task made on the
 *     destination, the source is untouched; aborted (411);
 *   syncData -> success when the record says every layer of its range was
 *     synced (SYNCED), else the one layer that may be half-written is made
 *     ILLEGAL and the task failed (VDSM leaves it LEGAL; the engine fails
 *     the migration on the failed task either way). */
void st_imgcopy_recover(struct storage_state *s, struct st_task *t)
{
	struct st_domain *sdom = st_op_recover_domain(s, t);
	if (!sdom)
		return;
	struct st_domain *dd = map_get(&s->domains, t->dst_sd);
	const char *done = "1 jobs completed successfully";
	char msg[256];
	size_t n = t->nvols;
	if (!dd || !n) {   /* (the source domain: st_op_recover_domain) */
		snprintf(msg, sizeof(msg), "interrupted by restart; storage domain %s is not "
			 "available", !dd ? t->dst_sd : t->sd);
		recovered(t, ST_TR_CLEAN_FAILURE, GENERAL_CODE, msg);
		return;
	}
	size_t dst_legal = 0, src_left = 0;
	bool src_started = false;
	for (size_t i = 0; i < n; i++) {
		struct st_volume *dv = vol_of(dd, t, i), *sv = vol_of(sdom, t, i);
		dst_legal += dv && dv->legal;
		src_left += sv != NULL;
		src_started |= !sv || !sv->legal;
	}
	if (t->icop == ST_IC_SYNC) {
		size_t first = 0, last = n, ok = 0;
		if (t->sync_type == ST_SYNC_INTERNAL)
			last = n - 1;
		else if (t->sync_type == ST_SYNC_LEAF)
			first = n - 1;
		if (t->synced >= 0) {   /* SYNCED: the layers done, in order */
			if ((size_t)t->synced >= last - first) {
				recovered(t, ST_TR_SUCCESS, 0, done);
				return;
			}
			/* the next one may be half-written (the ones after it are
			 * untouched): ILLEGAL, as a failed sync leaves it */
			struct st_volume *dv = vol_of(dd, t, first + (size_t)t->synced);
			int rc = dv && dv->legal ? set_legal(s, dd, dv, false) : 0;
			snprintf(msg, sizeof(msg), "interrupted by restart; the source is kept, "
				 "destination volume %s not synced %s", t->vols[first + (size_t)t->synced],
				 rc < 0 ? "(marking it ILLEGAL failed)" : "is ILLEGAL");
			recovered(t, ST_TR_CLEAN_FAILURE, GENERAL_CODE, msg);
			return;
		}
		/* a record from before SYNCED: every layer ILLEGAL while written */
		for (size_t i = first; i < last; i++) {
			struct st_volume *dv = vol_of(dd, t, i);
			ok += dv && dv->legal;
		}
		if (ok == last - first)
			recovered(t, ST_TR_SUCCESS, 0, done);
		else
			recovered(t, ST_TR_CLEAN_FAILURE, GENERAL_CODE, "interrupted by restart; the source "
				  "is kept, destination volumes not synced are ILLEGAL");
		return;
	}
	if (t->icop == ST_IC_MOVE && src_started && dst_legal == n) {
		size_t kept = 0;
		for (size_t i = n; i-- > 0;) {
			struct st_volume *sv = vol_of(sdom, t, i);
			if (sv && remove_volume(s, sdom, sv, t->postzero, t->discard) < 0)
				kept++;
		}
		if (kept) {
			snprintf(msg, sizeof(msg), "interrupted by restart; the image was moved to %s "
				 "but %zu source volume(s) could not be removed (kept ILLEGAL)",
				 t->dst_sd, kept);
			recovered(t, ST_TR_CLEAN_FAILURE, GENERAL_CODE, msg);
		} else {
			log_info("storage: task %s: move of image %s completed at startup (%zu source "
				 "volume(s) removed)", t->id, t->img, src_left);
			recovered(t, ST_TR_SUCCESS, 0, done);
		}
		return;
	}
	if (t->icop == ST_IC_COPY && dst_legal == n) {
		recovered(t, ST_TR_SUCCESS, 0, done);
		return;
	}
	size_t kept = 0;
	for (size_t i = n; i-- > 0;) {
		struct st_volume *dv = vol_of(dd, t, i);
		if (dv && remove_volume(s, dd, dv, false, false) < 0)
			kept++;
	}
	if (kept) {
		snprintf(msg, sizeof(msg), "interrupted by restart; the source is kept, %zu "
			 "volume(s) on %s could not be removed (kept ILLEGAL)", kept, t->dst_sd);
		recovered(t, ST_TR_CLEAN_FAILURE, GENERAL_CODE, msg);
	} else {
		recovered(t, ST_TR_CLEAN_SUCCESS, ABORTED_CODE, "aborted by restart");
	}
}
