/* vdsmd/storage/st_op_extend.c - Volume.extendSize as a task (kind
 * ST_TK_EXTEND, crash steps "extend.*"): the data grows first, synced, then
 * the metadata's capacity; a task found unfinished whose data already grew
 * is completed (a volume never shrinks), otherwise it was not done. */
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

int st_volume_extend(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     int64_t new_size, char task_id[37], struct st_err *e)
{
	if (new_size <= 0 || new_size % 512 != 0)
		return st_fail(e, RPC_E_PARAMS, "newSize: a positive multiple of 512");
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, sd, img, vol, &d, e);
	int rc = v ? st_spm_require(s, d, e) : -1;
	if (rc == 0 && v->busy)
		rc = st_fail(e, RPC_E_GENERAL, "volume %s is busy", vol);
	if (rc == 0 && !v->legal)
		rc = st_fail(e, RPC_E_GENERAL, "volume %s is ILLEGAL", vol);
	if (rc == 0 && new_size < v->capacity)
		rc = st_fail(e, RPC_E_PARAMS, "newSize: %lld is smaller than the volume (%lld); "
			     "volumes only grow", (long long)new_size, (long long)v->capacity);
	if (rc == 0 && !st_task_queue_has_room(s))
		rc = st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
	if (rc < 0) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	v->busy = true;
	d->busy++;
	pthread_mutex_unlock(&s->lock);
	struct st_task *t = st_task_alloc(&st_op_extend);
	snprintf(t->sd, sizeof(t->sd), "%.36s", sd);
	snprintf(t->img, sizeof(t->img), "%.36s", img);
	snprintf(t->vol, sizeof(t->vol), "%.36s", vol);
	t->vols = xcalloc(1, sizeof(*t->vols));
	snprintf(t->vols[0], 37, "%.36s", vol);
	t->nvols = 1;
	t->size = new_size;
	rc = st_task_persist(s, t);
	if (rc < 0) {
		pthread_mutex_lock(&s->lock);
		v->busy = false;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		st_task_free(t);
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot record the task");
	}
	snprintf(task_id, 37, "%.36s", t->id);
	st_task_submit(s, t);
	return 0;
}

/* Data first (RAW: ftruncate, preallocated: fallocate the new part; COW:
 * qemu-img resize), synced, then the metadata's CAP, then memory.  A failed
 * data step puts a RAW file back to its old size. */
bool st_volume_grown(const struct st_domain *d, const struct st_volume *v, int64_t size)
{
	struct stat st;
	int fd = st_vol_open(d, v->image, v->uuid, O_RDONLY, &st);
	if (fd < 0)
		return false;   /* missing, a link or not a regular file */
	int64_t have = -1;
	if (v->format != ST_FMT_COW) {
		have = st.st_size;
	} else {   /* qcow2 header: magic, version, ..., size at 24 (BE) */
		unsigned char h[32];
		if (pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		    memcmp(h, "QFI\xfb", 4) == 0) {
			uint64_t vs = 0;
			for (int i = 0; i < 8; i++)
				vs = vs << 8 | h[24 + i];
			have = vs > INT64_MAX ? -1 : (int64_t)vs;
		}
	}
	close(fd);
	return have >= size;
}

static void run_extend(struct storage_state *s, struct st_task *t)
{
	char err[256] = "";
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, t->sd);
	struct st_volume copy = *(struct st_volume *)map_get(&d->volumes, t->vol);
	pthread_mutex_unlock(&s->lock);
	int rc = 0;
	int fd = -1;
	struct st_task_io tio;
	st_task_io_init(&tio, s, t);
	if (tio.io.stopped(tio.io.ctx, err, sizeof(err))) {
		rc = VD_ECANCELED;
		goto out;
	}
	struct stat st;
	fd = st_vol_open(d, t->img, t->vol, O_RDWR, &st);
	if (fd < 0) {
		rc = st_errf(err, sizeof(err), fd, "volume data file");
		goto out;
	}
	if (copy.format == ST_FMT_COW) {
		char size[32];
		snprintf(size, sizeof(size), "%lld", (long long)t->size);
		/* backing null: the backing file is not opened (its relative
		 * name would be resolved against /proc/self/fd) nor needed */
		char *argv[] = { (char *)"qemu-img", (char *)"resize", (char *)"-q",
				 (char *)"json:{\"driver\":\"qcow2\",\"backing\":null,\"file\":"
				 "{\"driver\":\"file\",\"filename\":\"/proc/self/fd/3\"}}",
				 size, NULL };
		rc = st_run_qemu_img(&tio.io, argv, fd, err, sizeof(err));
	} else {
		rc = st_file_grow(fd, t->vol, st.st_size, t->size, copy.alloc == ST_PREALLOCATED);
		if (rc < 0)
			st_errf(err, sizeof(err), rc, "growing to %lld bytes", (long long)t->size);
	}
	if (rc == 0 && (rc = st_fsync_fd(fd)) < 0)
		st_errf(err, sizeof(err), rc, "syncing");
	if (rc == 0) {
		ST_CRASH("extend.grown");
		copy.capacity = t->size;
		copy.mtime = (int64_t)time(NULL);
		if ((rc = st_vol_write_meta(d, &copy)) < 0)
			st_errf(err, sizeof(err), rc, "writing volume metadata");
		else
			ST_CRASH("extend.meta");
	}
out:
	if (fd >= 0)
		close(fd);
	int64_t app = 0, tru = 0;
	bool sized = st_vol_stat(d, t->img, t->vol, &app, &tru) == 0;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, t->vol);
	if (rc == 0) {
		v->capacity = t->size;
		v->mtime = copy.mtime;
	}
	if (sized) {
		v->apparent = app;
		v->truesize = tru;
	}
	v->busy = false;
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
	else
		st_task_finish(s, t, ST_TR_CLEAN_SUCCESS,
			       rpc_err_code(rc == VD_ECANCELED ? RPC_E_TASK_ABORTED : RPC_E_GENERAL), err);
}

static void recover_extend(struct storage_state *s, struct st_task *t)
{
	struct st_domain *d = st_op_recover_domain(s, t);
	if (!d)
		return;
	struct st_volume *v = map_get(&d->volumes, t->vol);
	bool ok = v && v->capacity >= t->size;
	if (v && !ok && st_volume_grown(d, v, t->size)) {
		/* the data was grown and synced, the metadata not yet: finish
		 * it (a volume never shrinks) */
		struct st_volume copy = *v;
		copy.capacity = t->size;
		copy.mtime = (int64_t)time(NULL);
		if (st_vol_write_meta(d, &copy) == 0) {
			v->capacity = t->size;
			v->mtime = copy.mtime;
			ok = true;
		}
	}
	st_op_recovered(t, ok);
}

const struct st_task_op st_op_extend = {
	.kind = ST_TK_EXTEND,
	.verb = "extendVolumeSize",
	.run = run_extend,
	.recover = recover_extend,
	.claims = st_task_claims_none,
	.save = st_task_save_size,
	.load = st_task_load_size,
	.crash_prefix = "extend",
};
