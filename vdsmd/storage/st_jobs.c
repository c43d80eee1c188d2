/* vdsmd/storage/st_jobs.c - host jobs: SDM.copy_data.
 *
 * A copy writes into an existing destination volume (the engine creates it
 * first) with `qemu-img convert -p -n`: the source is the leaf of a checked
 * chain (st_image_prepare2), the destination the data file opened here with
 * O_NOFOLLOW under its image directory descriptor and handed to qemu-img as
 * /proc/self/fd/3, its backing chain (if it has a parent) given from our
 * metadata like the source's; a destination with a parent receives only
 * the source volume's own data (-B, VDSM's semantics), one without the
 * whole guest view.  The destination is marked ILLEGAL (metadata first) for
 * the copy and LEGAL again, generation + 1, only after the data is synced;
 * a failed or aborted copy leaves it ILLEGAL, and so does a crash (the
 * startup scan keeps an ILLEGAL volume no task claims), so a half-copied
 * disk is never served as good.  Progress comes from qemu-img's "-p"
 * output; every state change is published (|jobs|status|<id>) and kept for
 * Host.getJobs until vdsmd stops. */
#include "st_crash.h"
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *st_job_status_name(enum st_job_status st)
{
	switch (st) {
	case ST_JOB_PENDING: return "pending";
	case ST_JOB_RUNNING: return "running";
	case ST_JOB_DONE: return "done";
	case ST_JOB_FAILED: return "failed";
	case ST_JOB_ABORTED: return "aborted";
	}
	return "failed";
}

void st_job_publish(struct storage_state *s, struct st_job *j)
{
	struct st_job_info copy;
	pthread_mutex_lock(&s->lock);
	copy = j->info;
	pthread_mutex_unlock(&s->lock);
	if (s->notify_job)
		s->notify_job(s->notify_ctx, &copy);
}

/* The job's st_io: stopped by SDM.abort or shutdown (abort_why written
 * before abort is set); its qemu-img is kept in j->child under s->lock. */
bool st_job_stopped(void *ctx, char *why, size_t len)
{
	struct st_job *j = ctx;
	if (!__atomic_load_n(&j->abort, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&j->s->lock);
	snprintf(why, len, "Task is aborted: %s", j->abort_why);
	pthread_mutex_unlock(&j->s->lock);
	return true;
}

void st_job_child(void *ctx, pid_t pid)
{
	struct st_job *j = ctx;
	pthread_mutex_lock(&j->s->lock);
	j->child = pid;
	bool kill_now = pid > 0 && __atomic_load_n(&j->abort, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&j->s->lock);
	if (kill_now)
		kill(pid, SIGKILL);
}

/* qemu-img -p prints "    (12.34/100%)\r". */
void st_job_output(void *ctx, const char *data, size_t n)
{
	struct st_job *j = ctx;
	for (size_t i = 0; i + 1 < n; i++) {
		if (data[i] != '(')
			continue;
		char tmp[16];
		size_t k = 0;
		for (size_t m = i + 1; m < n && k < sizeof(tmp) - 1 && data[m] != '/'; m++)
			tmp[k++] = data[m];
		tmp[k] = '\0';
		char *end;
		double pct = strtod(tmp, &end);
		if (end != tmp && pct >= 0 && pct <= 100) {
			pthread_mutex_lock(&j->s->lock);
			j->info.progress = (int)pct;
			pthread_mutex_unlock(&j->s->lock);
		}
	}
}

/* Mark dst busy (under the lock), write its metadata with legality. */
static int dst_meta(struct storage_state *s, struct st_domain *d, const char *vol, bool legal,
		    bool bump)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume copy = *(struct st_volume *)map_get(&d->volumes, vol);
	pthread_mutex_unlock(&s->lock);
	copy.legal = legal;
	if (bump)
		copy.generation++;
	copy.mtime = (int64_t)time(NULL);
	int rc = st_vol_write_meta(d, &copy);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, vol);
		v->legal = legal;
		v->generation = copy.generation;
		v->mtime = copy.mtime;
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

static void *copy_main(void *arg)
{
	struct st_job *j = arg;
	struct storage_state *s = j->s;
	char err[512] = "";
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	struct st_domain *sd = map_get(&s->domains, j->src[0]);
	struct st_domain *dd = map_get(&s->domains, j->dst[0]);
	struct st_volume *sv = map_get(&sd->volumes, j->src[2]);
	struct st_volume *dv = map_get(&dd->volumes, j->dst[2]);
	int sfmt = sv->format, dfmt = dv->format;
	char dparent[37];
	snprintf(dparent, sizeof(dparent), "%s", dv->parent);
	j->info.status = ST_JOB_RUNNING;
	pthread_mutex_unlock(&s->lock);
	st_job_publish(s, j);

	struct st_chain ch = { 0 };
	struct st_err e = { 0 };
	int fd = -1;
	char *srcspec = NULL, *dstspec = NULL;
	if ((rc = dst_meta(s, dd, j->dst[2], false, false)) < 0) {
		st_errf(err, sizeof(err), rc, "marking the destination ILLEGAL");
		goto out;
	}
	ST_CRASH("copy_data.dst-illegal");
	/* the source is busy-free but LEGAL (checked when the job started) */
	if (st_image_prepare2(s, j->src[0], NULL, j->src[1], j->src[2], false, &ch, &e) < 0) {
		snprintf(err, sizeof(err), "source: %s", e.msg);
		rc = VD_EIO;
		goto out;
	}
	struct stat st;
	fd = st_vol_open(dd, j->dst[1], j->dst[2], O_RDWR, &st);
	if (fd < 0) {
		rc = st_errf(err, sizeof(err), fd, "destination data file");
		goto out;
	}
	/* the source chain from our metadata, never from its qcow2 headers */
	(void)sfmt;
	srcspec = st_chain_json(s, sd, j->src[2], err, sizeof(err));
	if (!srcspec) {
		rc = VD_EIO;
		goto out;
	}
	/* the destination on fd 3 with its own backing chain, from our metadata
	 * too (its header names the parent relative to its directory, which
	 * /proc/self/fd/3 is not).  A destination with a parent gets only what
	 * the source volume itself holds, as VDSM's copy_data (qemuimg.convert
	 * with -n and -B <parent>): with a backing named, qemu-img asks the
	 * source's block status above the source's own backing, leaves what the
	 * source top does not allocate unallocated (the destination's parent
	 * shows through) and writes the rest, zeros too.  Without a parent the
	 * whole guest view is written (the base of a copied chain). */
	dstspec = st_fd3_json(s, dd, dfmt, dparent, err, sizeof(err));
	if (!dstspec) {
		rc = VD_EIO;
		goto out;
	}
	bool backed = dfmt == ST_FMT_COW && strcmp(dparent, ST_BLANK_UUID) != 0;
	char *argv[12];
	int ac = 0;
	argv[ac++] = (char *)"qemu-img";
	argv[ac++] = (char *)"convert";
	argv[ac++] = (char *)"-p";
	argv[ac++] = (char *)"-n";
	if (backed) {
		/* with -n, qemu-img uses -B only to know the target has a backing */
		argv[ac++] = (char *)"-B";
		argv[ac++] = dparent;
	}
	argv[ac++] = (char *)"-O";
	argv[ac++] = (char *)(dfmt == ST_FMT_COW ? "qcow2" : "raw");
	argv[ac++] = srcspec;
	argv[ac++] = dstspec;
	argv[ac] = NULL;
	struct st_io io = { .ctx = j, .stopped = st_job_stopped, .child = st_job_child };
#ifdef VD_TEST_HOOKS
	io.crash_step = "copy_data.converting";
#endif
	rc = st_run_tool_cb(&io, "qemu-img", "qemu-utils", argv, fd, NULL, st_job_output, j,
			    err, sizeof(err));
	if (rc == 0 && (rc = st_fsync_fd(fd)) < 0)
		st_errf(err, sizeof(err), rc, "syncing the destination");
	if (rc == 0)
		ST_CRASH("copy_data.converted");
	if (rc == 0 && (rc = dst_meta(s, dd, j->dst[2], true, true)) < 0)
		st_errf(err, sizeof(err), rc, "marking the destination LEGAL");
out:
	free(srcspec);
	free(dstspec);
	if (fd >= 0)
		close(fd);
	st_chain_free(&ch);
	int64_t app = 0, tru = 0;
	bool sized = st_vol_stat(dd, j->dst[1], j->dst[2], &app, &tru) == 0;
	bool aborted = __atomic_load_n(&j->abort, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&s->lock);
	dv = map_get(&dd->volumes, j->dst[2]);
	dv->busy = false;
	if (sized) {
		dv->apparent = app;
		dv->truesize = tru;
	}
	sd->busy--;
	dd->busy--;
	st_job_end(j, rc, aborted, RPC_E_GENERAL, err);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		log_info("storage: job %s: copied %s/%s/%s to %s/%s/%s", j->info.id, j->src[0],
			 j->src[1], j->src[2], j->dst[0], j->dst[1], j->dst[2]);
	else
		log_warn("storage: job %s %s: %s (destination %s left ILLEGAL)", j->info.id,
			 aborted ? "aborted" : "failed", err, j->dst[2]);
	st_job_publish(s, j);
	return NULL;
}

struct st_job *st_job_new(struct storage_state *s, const char *job_id, enum st_job_kind kind)
{
	struct st_job *j = xcalloc(1, sizeof(*j));
	snprintf(j->info.id, sizeof(j->info.id), "%.36s", job_id);
	j->info.status = ST_JOB_PENDING;
	j->kind = kind;
	j->s = s;
	return j;
}

int st_job_launch(struct storage_state *s, struct st_job *j, void *(*run)(void *))
{
	map_put(&s->jobs, j->info.id, j);
	if (pthread_create(&j->thread, NULL, run, j) == 0)
		return 0;
	map_del(&s->jobs, j->info.id);
	return -1;
}

void st_job_end(struct st_job *j, int rc, bool aborted, enum rpc_err code, const char *msg)
{
	if (rc == 0) {
		j->info.status = ST_JOB_DONE;
		j->info.progress = 100;
		return;
	}
	j->info.status = aborted ? ST_JOB_ABORTED : ST_JOB_FAILED;
	j->info.err_code = rpc_err_code(aborted ? RPC_E_TASK_ABORTED : code);
	snprintf(j->info.err_msg, sizeof(j->info.err_msg), "%s", msg);
}

int st_job_admit(struct storage_state *s, const char *job_id, struct st_err *e)
{
	unsigned live = 0;
	for (struct st_map_ent *it = map_first(&s->jobs); it; it = map_next(&s->jobs, it)) {
		const struct st_job *o = map_val(it);
		if (o->info.status == ST_JOB_PENDING || o->info.status == ST_JOB_RUNNING)
			live++;
	}
	if (map_get(&s->jobs, job_id))
		return st_fail(e, RPC_E_GENERAL, "job %s exists", job_id);
	if (live >= ST_MAX_JOBS)
		return st_fail(e, RPC_E_NO_RESOURCES, "%u storage jobs are running", live);
	return 0;
}

int st_copy_data(struct storage_state *s, const char *job_id, const char *const src[3],
		 const char *const dst[3], struct st_err *e)
{
	if (!st_is_uuid(job_id))
		return st_fail(e, RPC_E_PARAMS, "job_id: not a UUID");
	if (strcmp(src[2], dst[2]) == 0 && strcmp(src[0], dst[0]) == 0)
		return st_fail(e, RPC_E_PARAMS, "source and destination are the same volume");
	struct st_domain *sd = NULL, *dd = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *sv = st_find_volume(s, src[0], src[1], src[2], &sd, e);
	struct st_volume *dv = sv ? st_find_volume(s, dst[0], dst[1], dst[2], &dd, e) : NULL;
	int rc = sv && dv ? st_job_admit(s, job_id, e) : -1;
	if (rc == 0 && (sv->busy || dv->busy))
		rc = st_fail(e, RPC_E_GENERAL, "volume %s is busy", sv->busy ? src[2] : dst[2]);
	if (rc == 0 && !sv->legal)
		rc = st_fail(e, RPC_E_GENERAL, "source volume %s is ILLEGAL", src[2]);
	if (rc == 0 && dv->capacity < sv->capacity)
		rc = st_fail(e, RPC_E_GENERAL, "destination (%lld bytes) is smaller than the source "
			     "(%lld bytes)", (long long)dv->capacity, (long long)sv->capacity);
	/* the destination's parents are opened as its backing (read-only) for
	 * the copy: one being written (another job's destination) would make
	 * qemu-img fail on its image lock; refuse now, as busy (VDSM serializes
	 * on the destination image's lock) */
	const struct st_volume *pv = rc == 0 && dv->format == ST_FMT_COW
					     ? map_get(&dd->volumes, dv->parent) : NULL;
	for (int depth = 0; rc == 0 && pv && depth < 256; depth++) {
		if (pv->busy)
			rc = st_fail(e, RPC_E_GENERAL, "volume %s (a parent of the destination) "
				     "is busy", pv->uuid);
		else if (pv->format == ST_FMT_COW)
			pv = map_get(&dd->volumes, pv->parent);
		else
			pv = NULL;
	}
	/* a destination with children is the engine's normal case, as in VDSM:
	 * CloneImageGroupVolumesStructure creates the whole chain on the
	 * destination before CopyImageGroupVolumesData fills its volumes but the
	 * leaf (LiveMigrateDisk) or all of them, base first */
	if (rc < 0) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	struct st_job *j = st_job_new(s, job_id, ST_JOB_COPY);
	snprintf(j->info.desc, sizeof(j->info.desc), "copy_data %.8s -> %.8s", src[2], dst[2]);
	for (int i = 0; i < 3; i++) {
		snprintf(j->src[i], 37, "%.36s", src[i]);
		snprintf(j->dst[i], 37, "%.36s", dst[i]);
	}
	dv->busy = true;
	sd->busy++;
	dd->busy++;
	if (st_job_launch(s, j, copy_main) < 0) {
		dv->busy = false;
		sd->busy--;
		dd->busy--;
		pthread_mutex_unlock(&s->lock);
		free(j);
		return st_fail(e, RPC_E_NO_RESOURCES, "cannot start the copy thread");
	}
	pthread_mutex_unlock(&s->lock);
	st_job_publish(s, j);
	return 0;
}

int st_job_abort(struct storage_state *s, const char *id, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_job *j = st_is_uuid(id) ? map_get(&s->jobs, id) : NULL;
	if (!j) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_GENERAL, "job %s is unknown", st_is_uuid(id) ? id : "?");
	}
	snprintf(j->abort_why, sizeof(j->abort_why), "aborted by request");
	__atomic_store_n(&j->abort, true, __ATOMIC_RELEASE);
	if (j->child > 0)
		kill(j->child, SIGKILL);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void st_jobs_stop(struct storage_state *s)
{
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->jobs); it; it = map_next(&s->jobs, it)) {
		struct st_job *j = map_val(it);
		snprintf(j->abort_why, sizeof(j->abort_why), "vdsmd is shutting down");
		__atomic_store_n(&j->abort, true, __ATOMIC_RELEASE);
		if (j->child > 0)
			kill(j->child, SIGKILL);
	}
	pthread_mutex_unlock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->jobs); it; it = map_next(&s->jobs, it)) {
		struct st_job *j = map_val(it);
		if (!j->joined) {
			pthread_join(j->thread, NULL);
			j->joined = true;
		}
	}
}

struct st_job *st_job_prep(struct storage_state *s, const char *job_id, enum st_job_kind kind,
			   const char *desc, const char *const ids[3], int64_t gen,
			   struct st_err *e)
{
	if (!st_is_uuid(job_id)) {
		st_fail(e, RPC_E_PARAMS, "job_id: not a UUID");
		return NULL;
	}
	struct st_job *j = st_job_new(s, job_id, kind);
	snprintf(j->info.desc, sizeof(j->info.desc), "%s", desc);
	for (int i = 0; i < 3; i++)
		snprintf(j->src[i], 37, "%.36s", ids[i]);
	j->gen = gen;
	return j;
}

int st_job_start(struct storage_state *s, struct st_job *j, void *(*run)(void *),
		 struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	int rc = st_job_admit(s, j->info.id, e);
	if (rc == 0 && st_job_launch(s, j, run) < 0)
		rc = st_fail(e, RPC_E_NO_RESOURCES, "cannot start the job thread");
	pthread_mutex_unlock(&s->lock);
	if (rc < 0) {
		free(j);
		return -1;
	}
	st_job_publish(s, j);
	return 0;
}

struct st_volume *st_job_vol_busy(struct storage_state *s, struct st_job *j,
				  struct st_domain **d, struct st_volume *copy, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, j->src[0], j->src[1], j->src[2], d, e);
	if (v && v->busy) {
		st_fail(e, RPC_E_GENERAL, "volume %s is busy", j->src[2]);
		v = NULL;
	}
	if (v) {
		v->busy = true;
		(*d)->busy++;
		*copy = *v;
	}
	pthread_mutex_unlock(&s->lock);
	return v;
}

void st_job_vol_release(struct storage_state *s, struct st_job *j, struct st_domain *d)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, j->src[2]);
	v->busy = false;
	d->busy--;
	pthread_mutex_unlock(&s->lock);
}

int st_job_open_data(struct st_domain *d, const struct st_job *j, struct st_err *e)
{
	return st_vol_open_data(d, j->src[1], j->src[2], e);
}

int st_vol_open_data(const struct st_domain *d, const char *img, const char *vol,
		     struct st_err *e)
{
	struct stat st;
	int fd = st_vol_open(d, img, vol, O_RDWR, &st);
	if (fd < 0)
		return st_fail_rc(e, RPC_E_GENERAL, fd, "volume %s data file", vol);
	return fd;
}

void *st_job_thread(struct st_job *j, int (*work)(struct storage_state *, struct st_job *,
						    struct st_err *))
{
	struct storage_state *s = j->s;
	pthread_mutex_lock(&s->lock);
	j->info.status = ST_JOB_RUNNING;
	pthread_mutex_unlock(&s->lock);
	st_job_publish(s, j);
	struct st_err e = { 0 };
	int rc = work(s, j, &e);
	bool aborted = __atomic_load_n(&j->abort, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&s->lock);
	st_job_end(j, rc, aborted, e.code, e.msg);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		log_info("storage: job %s: %s on %s/%s/%s done", j->info.id, j->info.desc,
			 j->src[0], j->src[1], j->src[2]);
	else
		log_warn("storage: job %s: %s on volume %s failed: %s", j->info.id, j->info.desc,
			 j->src[2], e.msg);
	st_job_publish(s, j);
	return NULL;
}
