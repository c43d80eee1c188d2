/* vdsmd/storage/st_op_merge.c - the SPM steps of a cold merge:
 * StoragePool.prepareMerge and StoragePool.finalizeMerge as tasks (kinds
 * ST_TK_PREPARE_MERGE, ST_TK_FINALIZE_MERGE, crash steps "prepare_merge.*"
 * and "finalize_merge.*").  The
 * data step between them is the host job SDM.merge (st_jobs_merge.c).
 *
 * As VDSM's lib/vdsm/storage/merge.py on a file domain:
 *   prepare: a COW base's stale bitmaps (not valid ones of top) are
 *     removed; when top is larger than base, base grows to top's capacity -
 *     a RAW base as extendSize grows it (data first, synced, then the
 *     metadata), a COW base in its metadata only (qemu-img commit resizes
 *     the qcow2 image); legality and generation are left alone.
 *   finalize: the subchain is checked again; a leaf top is marked ILLEGAL
 *     (syncVolumeChain with top left out); an internal top is marked
 *     ILLEGAL, its child rebased onto base (qemu-img rebase -u; on failure
 *     top is LEGAL again), then the child's metadata names base as its
 *     parent.  The engine deletes the ILLEGAL top with Volume.delete.
 * Where we differ: VDSM runs these checks in the task, we also run them
 * when the verb is called (its errors are the verb's); and a finalize found
 * unfinished at startup is driven to one chain: the child rebased but its
 * metadata not yet written is completed, a child not rebased gets its top
 * LEGAL again (VDSM leaves such a top ILLEGAL for manual recovery).
 * A task's VOLUMES are top, base and (internal merge) the child; it claims
 * nothing from the startup scan (an ILLEGAL top is kept). */
#include "st_crash.h"
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHAIN_MAX 256

static bool blank(const char *id)
{
	return !id[0] || strcmp(id, ST_BLANK_UUID) == 0;
}

int st_subchain_check(struct storage_state *s, const struct st_subchain *sc,
		      struct st_domain **dp, struct st_volume **top, struct st_volume **base,
		      struct st_volume **child, struct st_err *e)
{
	*top = *base = *child = NULL;
	struct st_domain *d = st_domain_get(s, sc->sd, e);
	if (!d)
		return -1;
	struct st_image *im = map_get(&d->images, sc->img);
	if (!im)
		return st_fail(e, RPC_E_NO_IMAGE, "%s in domain %s", sc->img, sc->sd);
	/* the leaf: the image's one volume no volume of the image is backed by */
	struct st_volume *leaf = NULL;
	for (size_t i = 0; i < im->n; i++) {
		bool has_child = false;
		for (size_t k = 0; k < im->n && !has_child; k++)
			has_child = strcmp(im->vols[k]->parent, im->vols[i]->uuid) == 0;
		if (has_child)
			continue;
		if (leaf)
			return st_fail(e, RPC_E_GENERAL, "image %s has more than one leaf (%s, %s)",
				       sc->img, leaf->uuid, im->vols[i]->uuid);
		leaf = im->vols[i];
	}
	struct st_volume *chain[CHAIN_MAX];
	size_t n = 0;
	for (struct st_volume *v = leaf; v && n < CHAIN_MAX;) {
		chain[n++] = v;
		if (strcmp(v->image, sc->img) != 0 || blank(v->parent))
			break;   /* a template's volume ends the chain */
		v = map_get(&d->volumes, v->parent);
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(chain[i]->uuid, sc->base) == 0)
			*base = chain[i];
		if (strcmp(chain[i]->uuid, sc->top) == 0) {
			*top = chain[i];
			*child = i > 0 ? chain[i - 1] : NULL;
		}
	}
	if (!*base || !*top)
		return st_fail(e, RPC_E_NOT_IN_CHAIN, "sd_id=%s, img_id=%s, vol_id=%s", sc->sd,
			       sc->img, *base ? sc->top : sc->base);
	if (strcmp((*top)->parent, sc->base) != 0)
		return st_fail(e, RPC_E_WRONG_PARENT, "base=%s, top=%s", sc->base, sc->top);
	if (strcmp((*base)->image, sc->img) != 0)
		return st_fail(e, RPC_E_SHARED_RO, "volume %s is a template's shared volume",
			       sc->base);
	if (strcmp((*top)->image, sc->img) != 0)
		return st_fail(e, RPC_E_SHARED_RO, "volume %s is a template's shared volume",
			       sc->top);
	*dp = d;
	return 0;
}

/* Check, mark top, base (and child) busy, record and queue the task. */
static int queue_merge(struct storage_state *s, const struct st_task_op *op, const char *sp,
		       const struct st_subchain *sc, char task_id[37], struct st_err *e)
{
	if (st_image_check(s, sc->sd, sp, sc->img, e) < 0)
		return -1;
	struct st_domain *d = NULL;
	struct st_volume *top = NULL, *base = NULL, *child = NULL;
	pthread_mutex_lock(&s->lock);
	int rc = st_subchain_check(s, sc, &d, &top, &base, &child, e) < 0 || !d || !top || !base
		 ? -1 : st_spm_require(s, d, e);
	if (rc == 0 && (top->busy || base->busy || (child && child->busy))) {
		st_fail(e, RPC_E_GENERAL, "a volume of the subchain %s <- %s is busy", sc->base,
			sc->top);
		rc = -1;
	}
	if (rc == 0 && !st_task_queue_has_room(s)) {
		st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
		rc = -1;
	}
	if (rc < 0 || !d || !top || !base) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	bool prepare = op == &st_op_prepare_merge;
	struct st_task *t = st_task_alloc(op);
	snprintf(t->sd, sizeof(t->sd), "%s", sc->sd);
	snprintf(t->img, sizeof(t->img), "%s", sc->img);
	snprintf(t->vol, sizeof(t->vol), "%s", sc->top);
	t->nvols = !prepare && child ? 3 : 2;
	t->vols = xcalloc(3, sizeof(*t->vols));
	snprintf(t->vols[0], 37, "%s", sc->top);
	snprintf(t->vols[1], 37, "%s", sc->base);
	if (t->nvols == 3)
		snprintf(t->vols[2], 37, "%s", child->uuid);
	t->size = prepare && top->capacity > base->capacity ? top->capacity : 0;
	top->busy = base->busy = true;
	if (t->nvols == 3)
		child->busy = true;
	d->busy++;
	pthread_mutex_unlock(&s->lock);
	rc = st_task_persist(s, t);
	if (rc < 0) {
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < t->nvols; i++)
			((struct st_volume *)map_get(&d->volumes, t->vols[i]))->busy = false;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		st_task_free(t);
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot record the task");
	}
	ST_CRASH(prepare ? "prepare_merge.record" : "finalize_merge.record");
	snprintf(task_id, 37, "%s", t->id);
	st_task_submit(s, t);
	return 0;
}

int st_merge_prepare(struct storage_state *s, const char *sp, const struct st_subchain *sc,
		     char task_id[37], struct st_err *e)
{
	return queue_merge(s, &st_op_prepare_merge, sp, sc, task_id, e);
}

int st_merge_finalize(struct storage_state *s, const char *sp, const struct st_subchain *sc,
		      char task_id[37], struct st_err *e)
{
	return queue_merge(s, &st_op_finalize_merge, sp, sc, task_id, e);
}

static void set_parent(struct st_volume *v, const void *arg);

/* Write vol's metadata from its index entry changed by edit, then memory
 * (children recounted when a parent changed). */
static int edit_meta(struct storage_state *s, struct st_domain *d, const char *vol,
		     void (*edit)(struct st_volume *v, const void *arg), const void *arg)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume copy = *(struct st_volume *)map_get(&d->volumes, vol);
	pthread_mutex_unlock(&s->lock);
	edit(&copy, arg);
	copy.mtime = (int64_t)time(NULL);
	int rc = st_vol_write_meta(d, &copy);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, vol);
	edit(v, arg);
	v->mtime = copy.mtime;
	if (edit == set_parent)
		index_count_children(d);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void set_legal(struct st_volume *v, const void *arg)
{
	v->legal = arg == NULL;
}

static void set_capacity(struct st_volume *v, const void *arg)
{
	v->capacity = *(const int64_t *)arg;
}

static void set_parent(struct st_volume *v, const void *arg)
{
	snprintf(v->parent, sizeof(v->parent), "%s", (const char *)arg);
}

#define LEGAL NULL
#define ILLEGAL ((const void *)"-")

/* A RAW base's data grows to size (preallocated: allocated), synced. */
static int grow_raw(struct st_domain *d, const struct st_volume *v, int64_t size, char *err,
		    size_t errlen)
{
	struct stat st;
	int fd = st_vol_open(d, v->image, v->uuid, O_RDWR, &st);
	int rc = fd < 0 ? fd : 0;
	if (rc == 0 && st.st_size < size)
		rc = st_file_grow(fd, v->uuid, st.st_size, size, v->alloc == ST_PREALLOCATED);
	if (rc == 0)
		rc = st_fsync_fd(fd);
	if (rc < 0)
		st_errf(err, errlen, rc, "growing base volume %s to %lld bytes", v->uuid,
			(long long)size);
	if (fd >= 0)
		close(fd);
	return rc;
}

static void release(struct storage_state *s, struct st_domain *d, struct st_task *t)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < t->nvols; i++) {
		struct st_volume *v = map_get(&d->volumes, t->vols[i]);
		if (v)
			v->busy = false;
	}
	d->busy--;
	pthread_mutex_unlock(&s->lock);
}

static void finish(struct storage_state *s, struct st_task *t, int rc, enum rpc_err code,
		   const char *err)
{
	if (rc == 0)
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
	else
		st_task_finish(s, t, ST_TR_CLEAN_SUCCESS,
			       rpc_err_code(rc == VD_ECANCELED ? RPC_E_TASK_ABORTED : code), err);
}

static bool valid_in(const struct st_qinfo *q, const char *name)
{
	for (size_t i = 0; i < q->nbitmaps; i++)
		if (strcmp(q->bitmaps[i].name, name) == 0)
			return (q->bitmaps[i].flags & ST_QBM_AUTO) &&
			       !(q->bitmaps[i].flags & ST_QBM_IN_USE);
	return false;
}

/* bitmaps.prune_bitmaps: a bitmap of a COW base that is not a valid
 * bitmap of top is stale (a failed removal left it) and would only take
 * room in the commit: removed (qemu-img bitmap --remove). */
static int prune_bitmaps(struct st_task *t, struct st_task_io *tio,
			 const struct st_domain *d, char *err, size_t errlen)
{
	struct st_qinfo qb = { 0 }, qt = { 0 };
	struct st_err e = { 0 };
	char *base = st_pathf("%s/images/%s/%s", d->dir, t->img, t->vols[1]);
	char *top = st_pathf("%s/images/%s/%s", d->dir, t->img, t->vols[0]);
	int rc = st_qemu_info_path(base, &qb, &e);
	if (rc == 0)
		rc = st_qemu_info_path(top, &qt, &e);
	free(top);
	if (rc < 0)
		snprintf(err, errlen, "%s", e.msg);
	for (size_t i = 0; rc == 0 && i < qb.nbitmaps; i++) {
		if (valid_in(&qt, qb.bitmaps[i].name))
			continue;
		log_warn("storage: task %s: pruning stale bitmap %.64s of base %s", t->id,
			 qb.bitmaps[i].name, t->vols[1]);
		char *argv[] = { (char *)"qemu-img", (char *)"bitmap", (char *)"--remove",
				 (char *)"-f", (char *)"qcow2", base, qb.bitmaps[i].name, NULL };
		char why[200];
		if ((rc = st_run_qemu_img(&tio->io, argv, -1, why, sizeof(why))) < 0)
			snprintf(err, errlen, "removing bitmap %.64s of base %s: %.100s",
				 qb.bitmaps[i].name, t->vols[1], why);
	}
	free(base);
	st_qinfo_free(&qb);
	st_qinfo_free(&qt);
	return rc;
}

static void run_prepare(struct storage_state *s, struct st_task *t)
{
	char err[256] = "";
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, t->sd);
	struct st_volume base = *(struct st_volume *)map_get(&d->volumes, t->vols[1]);
	pthread_mutex_unlock(&s->lock);
	struct st_task_io tio;
	st_task_io_init(&tio, s, t);
	enum rpc_err code = RPC_E_GENERAL;
	if (tio.io.stopped(tio.io.ctx, err, sizeof(err)))
		rc = VD_ECANCELED;
	if (rc == 0 && base.format == ST_FMT_COW &&
	    (rc = prune_bitmaps(t, &tio, d, err, sizeof(err))) < 0)
		code = RPC_E_REMOVE_BITMAP;
	if (rc == 0 && t->size > base.capacity) {
		log_info("storage: task %s: base %s grows to %lld bytes (top %s is larger)", t->id,
			 base.uuid, (long long)t->size, t->vols[0]);
		if (base.format == ST_FMT_RAW && (rc = grow_raw(d, &base, t->size, err,
								sizeof(err))) == 0)
			ST_CRASH("prepare_merge.base-grown");
		if (rc == 0 && (rc = edit_meta(s, d, base.uuid, set_capacity, &t->size)) < 0)
			st_errf(err, sizeof(err), rc, "writing base volume metadata");
		if (rc == 0)
			ST_CRASH("prepare_merge.base-capacity");
	}
	int64_t app, tru;
	if (st_vol_stat(d, base.image, base.uuid, &app, &tru) == 0) {
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, base.uuid);
		v->apparent = app;
		v->truesize = tru;
		pthread_mutex_unlock(&s->lock);
	}
	release(s, d, t);
	finish(s, t, rc, code, err);
}

static void recover_prepare(struct storage_state *s, struct st_task *t)
{
	struct st_domain *d = st_op_recover_domain(s, t);
	if (!d)
		return;
	struct st_volume *v = t->nvols >= 2 ? map_get(&d->volumes, t->vols[1]) : NULL;
	bool done = v && v->capacity >= t->size;
	if (v && !done && v->format == ST_FMT_RAW && st_volume_grown(d, v, t->size)) {
		/* the data grew and was synced, the metadata not yet: finish */
		struct st_volume copy = *v;
		copy.capacity = t->size;
		copy.mtime = (int64_t)time(NULL);
		if (st_vol_write_meta(d, &copy) == 0) {
			v->capacity = t->size;
			v->mtime = copy.mtime;
			done = true;
		}
	}
	st_op_recovered(t, done);
}

/* The backing file name in a qcow2 header ("" none); 0 or a primitive's rc. */
static int qcow2_backing(const struct st_domain *d, const char *img, const char *vol,
			 char *out, size_t outlen)
{
	int fd = st_vol_open(d, img, vol, O_RDONLY, NULL);
	int rc = fd < 0 ? fd : 0;
	unsigned char h[20];
	out[0] = '\0';
	if (rc == 0 && (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
			memcmp(h, "QFI\xfb", 4) != 0))
		rc = VD_EINVAL;
	if (rc == 0) {
		uint64_t off = 0;
		for (int i = 0; i < 8; i++)
			off = off << 8 | h[8 + i];
		uint32_t len = (uint32_t)h[16] << 24 | (uint32_t)h[17] << 16 |
			       (uint32_t)h[18] << 8 | h[19];
		if (off && (len >= outlen || off > INT64_MAX))
			rc = VD_EINVAL;
		else if (off && pread(fd, out, len, (off_t)off) != (ssize_t)len)
			rc = VD_EIO;
		else
			out[off ? len : 0] = '\0';
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* qemu-img rebase -u of the child onto base (its qcow2 header only). */
static int rebase_child(struct st_domain *d, struct st_task *t, struct st_task_io *tio,
			int base_fmt, char *err, size_t errlen)
{
	int fd = st_vol_open(d, t->img, t->vols[2], O_RDWR, NULL);
	int rc = fd < 0 ? fd : 0;
	if (rc < 0) {
		st_errf(err, errlen, rc, "child volume %s data file", t->vols[2]);
	} else {
		/* the base's name, as VDSM: every volume of an image is in its
		 * directory (getBackingVolumePath) */
		char *argv[] = { (char *)"qemu-img", (char *)"rebase", (char *)"-u",
				 (char *)"-b", t->vols[1], (char *)"-F",
				 (char *)(base_fmt == ST_FMT_COW ? "qcow2" : "raw"),
				 (char *)"json:{\"driver\":\"qcow2\",\"backing\":null,\"file\":"
				 "{\"driver\":\"file\",\"filename\":\"/proc/self/fd/3\"}}", NULL };
		rc = st_run_qemu_img(&tio->io, argv, fd, err, errlen);
		if (rc == 0 && (rc = st_fsync_fd(fd)) < 0)
			st_errf(err, errlen, rc, "syncing child volume %s", t->vols[2]);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

static void run_finalize(struct storage_state *s, struct st_task *t)
{
	char err[256] = "";
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, t->sd);
	int base_fmt = ((struct st_volume *)map_get(&d->volumes, t->vols[1]))->format;
	pthread_mutex_unlock(&s->lock);
	struct st_task_io tio;
	st_task_io_init(&tio, s, t);
	int rc = tio.io.stopped(tio.io.ctx, err, sizeof(err)) ? VD_ECANCELED : 0;
	if (rc == 0 && (rc = edit_meta(s, d, t->vols[0], set_legal, ILLEGAL)) < 0)
		st_errf(err, sizeof(err), rc, "marking top volume %s ILLEGAL", t->vols[0]);
	if (rc == 0)
		ST_CRASH("finalize_merge.top-illegal");
	if (rc == 0 && t->nvols == 3) {
		log_info("storage: task %s: rebasing %s onto %s (%s leaves the chain)", t->id,
			 t->vols[2], t->vols[1], t->vols[0]);
		rc = rebase_child(d, t, &tio, base_fmt, err, sizeof(err));
		if (rc < 0) {
			/* LEGAL again: the merge can be retried */
			int r2 = edit_meta(s, d, t->vols[0], set_legal, LEGAL);
			if (r2 < 0)
				log_error("storage: task %s: top volume %s stays ILLEGAL: %s", t->id,
					  t->vols[0], st_rc_text(r2));
		} else {
			ST_CRASH("finalize_merge.child-rebased");
			if ((rc = edit_meta(s, d, t->vols[2], set_parent, t->vols[1])) < 0)
				st_errf(err, sizeof(err), rc, "writing child volume %s metadata",
					t->vols[2]);
			else
				ST_CRASH("finalize_merge.child-parent");
		}
	}
	release(s, d, t);
	if (rc == 0)
		log_info("storage: task %s: %s left the chain of image %s, ILLEGAL until deleted",
			 t->id, t->vols[0], t->img);
	finish(s, t, rc, RPC_E_GENERAL, err);
}

static void recover_finalize(struct storage_state *s, struct st_task *t)
{
	struct st_domain *d = st_op_recover_domain(s, t);
	if (!d)
		return;
	struct st_volume *top = t->nvols >= 2 ? map_get(&d->volumes, t->vols[0]) : NULL;
	struct st_volume *child = t->nvols == 3 ? map_get(&d->volumes, t->vols[2]) : NULL;
	bool done = false;
	if (!top || (t->nvols != 2 && !child)) {
		st_op_recovered(t, false);
		return;
	}
	if (t->nvols == 2) {
		done = !top->legal;   /* the leaf left the chain, or it did not */
	} else if (strcmp(child->parent, t->vols[1]) == 0) {
		done = true;
	} else {
		char backing[256];
		int rc = qcow2_backing(d, t->img, child->uuid, backing, sizeof(backing));
		const char *name = strrchr(backing, '/') ? strrchr(backing, '/') + 1 : backing;
		/* rebased, its metadata not written yet: complete it */
		if (rc == 0 && strcmp(name, t->vols[1]) == 0 &&
		    edit_meta(s, d, child->uuid, set_parent, t->vols[1]) == 0)
			done = true;
	}
	/* not rebased: the old chain, top LEGAL again; done: top ILLEGAL */
	if (!done && !top->legal && edit_meta(s, d, top->uuid, set_legal, LEGAL) < 0)
		log_error("storage: task %s: top volume %s stays ILLEGAL", t->id, top->uuid);
	if (done && top->legal)
		edit_meta(s, d, top->uuid, set_legal, ILLEGAL);
	st_op_recovered(t, done);
}

const struct st_task_op st_op_prepare_merge = {
	.kind = ST_TK_PREPARE_MERGE,
	.verb = "prepareMerge",
	.run = run_prepare,
	.recover = recover_prepare,
	.claims = st_task_claims_none,
	.save = st_task_save_size,
	.load = st_task_load_size,
	.crash_prefix = "prepare_merge",
};

const struct st_task_op st_op_finalize_merge = {
	.kind = ST_TK_FINALIZE_MERGE,
	.verb = "finalizeMerge",
	.run = run_finalize,
	.recover = recover_finalize,
	.claims = st_task_claims_none,
	.crash_prefix = "finalize_merge",
};
