/* vdsmd/storage/st_jobs_bitmap.c - host jobs SDM.add_bitmap,
 * SDM.remove_bitmap and SDM.clear_bitmaps on a stopped VM's qcow2 volume.
 *
 * As VDSM's sdm/api/{add,remove,clear}_bitmap(s).py: the verb only starts
 * the job; everything about the volume (unknown domain/image/volume, not
 * COW, a bitmap already in the chain, a generation that does not match)
 * fails the job with VDSM's code, seen in Host.getJobs and the
 * |jobs|status| event.  The volume is busy for the job (no other operation
 * on it), its legality is left as it is, and a successful job bumps its
 * generation (wrapping after 999) - VDSM's volume.operation(set_illegal=
 * False).  qemu-img gets the data file opened here with O_NOFOLLOW under
 * the image directory descriptor, as /proc/self/fd/3 in a json: spec with
 * no backing (a bitmap is the volume's own), and takes its write lock: a
 * volume a running QEMU holds open fails with AddBitmapError/
 * RemoveBitmapError.  Remove of a bitmap the volume lacks succeeds (VDSM
 * logs and returns). */
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

#define CHAIN_MAX 128           /* parents walked for add_bitmap's chain check */

static const char *kind_name(enum st_job_kind k)
{
	switch (k) {
	case ST_JOB_ADD_BITMAP: return "add_bitmap";
	case ST_JOB_REMOVE_BITMAP: return "remove_bitmap";
	case ST_JOB_CLEAR_BITMAPS: return "clear_bitmaps";
	case ST_JOB_AMEND: return "amend_volume";
	case ST_JOB_UPDATE: return "update_volume";
	case ST_JOB_SPARSIFY: return "sparsify_volume";
	case ST_JOB_COPY: case ST_JOB_MERGE: break;
	}
	return "copy_data";
}

static bool has_bitmap(const struct st_qinfo *q, const char *name)
{
	for (size_t i = 0; i < q->nbitmaps; i++)
		if (strcmp(q->bitmaps[i].name, name) == 0)
			return true;
	return false;
}

/* add_bitmap: the name is in none of the chain's volumes (qemu-img info of
 * each, the chain from our metadata). */
static int check_chain(struct storage_state *s, struct st_job *j, struct st_err *e)
{
	char ids[CHAIN_MAX][2][37];
	size_t n = 0;
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, j->src[0]);
	const struct st_volume *v = d ? map_get(&d->volumes, j->src[2]) : NULL;
	while (v && n < CHAIN_MAX) {
		snprintf(ids[n][0], 37, "%s", v->image);
		snprintf(ids[n][1], 37, "%s", v->uuid);
		n++;
		v = strcmp(v->parent, ST_BLANK_UUID) == 0 ? NULL : map_get(&d->volumes, v->parent);
	}
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct st_qinfo q;
		if (st_volume_qemu_info(s, j->src[0], ids[i][0], ids[i][1], &q, e) < 0)
			return -1;
		bool dup = has_bitmap(&q, j->bitmap);
		st_qinfo_free(&q);
		if (dup)
			return st_fail(e, RPC_E_GENERAL, "Cannot add bitmap %.64s to volume %s: Volume "
				       "already contains the requested bitmap", j->bitmap, j->src[2]);
	}
	return 0;
}

/* qemu-img bitmap --add --enable / --remove NAME on the open data file. */
static int run_bitmap(struct st_job *j, int fd, bool add, const char *name, struct st_err *e)
{
	static const char spec[] = "json:{\"driver\":\"qcow2\",\"file\":{\"driver\":\"file\","
				   "\"filename\":\"/proc/self/fd/3\"},\"backing\":null}";
	char *argv[] = { (char *)"qemu-img", (char *)"bitmap", (char *)(add ? "--add" : "--remove"),
			 (char *)(add ? "--enable" : "--"), (char *)(add ? "--" : spec),
			 (char *)(add ? spec : name), (char *)(add ? name : NULL), NULL };
	struct st_io io = { .ctx = j, .stopped = st_job_stopped, .child = st_job_child };
	char err[256];
	if (st_run_tool_cb(&io, "qemu-img", "qemu-utils", argv, fd, NULL, NULL, NULL, err,
			   sizeof(err)) < 0)
		return st_fail(e, add ? RPC_E_ADD_BITMAP : RPC_E_REMOVE_BITMAP,
			       "Failed to %s bitmap %.64s on volume %s: %s", add ? "add" : "remove",
			       name, j->src[2], err);
	return 0;
}

/* The work on the busy volume: generation, qemu-img, fsync, metadata. */
static int modify(struct storage_state *s, struct st_job *j, struct st_domain *d,
		  const struct st_qinfo *q, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume copy = *(struct st_volume *)map_get(&d->volumes, j->src[2]);
	pthread_mutex_unlock(&s->lock);
	if (j->gen >= 0 && (int64_t)copy.generation != j->gen)
		return st_fail(e, RPC_E_GEN_MISMATCH, "requested=%lld, actual=%u",
			       (long long)j->gen, copy.generation);
	int fd = st_job_open_data(d, j, e);
	if (fd < 0)
		return -1;
	int rc = 0;
	if (j->kind == ST_JOB_ADD_BITMAP)
		rc = run_bitmap(j, fd, true, j->bitmap, e);
	else if (j->kind == ST_JOB_REMOVE_BITMAP && has_bitmap(q, j->bitmap))
		rc = run_bitmap(j, fd, false, j->bitmap, e);
	else if (j->kind == ST_JOB_REMOVE_BITMAP)
		log_warn("storage: job %s: bitmap %.64s is not on volume %s, removal counts as done",
			 j->info.id, j->bitmap, j->src[2]);
	for (size_t i = 0; rc == 0 && j->kind == ST_JOB_CLEAR_BITMAPS && i < q->nbitmaps; i++)
		rc = run_bitmap(j, fd, false, q->bitmaps[i].name, e);
	if (rc == 0 && (rc = st_fsync_fd(fd)) < 0)
		rc = st_fail_rc(e, RPC_E_GENERAL, rc, "syncing volume %s", j->src[2]);
	close(fd);
	if (rc < 0)
		return -1;
	copy.generation = (copy.generation + 1) % (ST_MAX_GENERATION + 1);
	copy.mtime = (int64_t)time(NULL);
	if ((rc = st_vol_write_meta(d, &copy)) < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "writing volume metadata");
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, j->src[2]);
	v->generation = copy.generation;
	v->mtime = copy.mtime;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int run_job(struct storage_state *s, struct st_job *j, struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, j->src[0], j->src[1], j->src[2], &d, e);
	int fmt = v ? v->format : -1;
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return -1;
	if (fmt != ST_FMT_COW && j->kind == ST_JOB_CLEAR_BITMAPS)
		return st_fail(e, RPC_E_ST_UNSUPPORTED, "reason=Volume is not in COW format, "
			       "context={'vol_uuid': '%s'}", j->src[2]);
	if (fmt != ST_FMT_COW)
		return st_fail(e, RPC_E_GENERAL, "Cannot %s bitmap %.64s %s volume %s: volume is not "
			       "in COW format", j->kind == ST_JOB_ADD_BITMAP ? "add" : "remove",
			       j->bitmap, j->kind == ST_JOB_ADD_BITMAP ? "to" : "from", j->src[2]);
	if (j->kind == ST_JOB_ADD_BITMAP && check_chain(s, j, e) < 0)
		return -1;
	struct st_qinfo q = { 0 };
	if (j->kind != ST_JOB_ADD_BITMAP &&
	    st_volume_qemu_info(s, j->src[0], j->src[1], j->src[2], &q, e) < 0)
		return -1;
	/* busy from here: no create/delete/copy/legality change meanwhile */
	pthread_mutex_lock(&s->lock);
	v = st_find_volume(s, j->src[0], j->src[1], j->src[2], &d, e);
	int rc = !v ? -1 : v->busy ? st_fail(e, RPC_E_GENERAL, "volume %s is busy", j->src[2]) : 0;
	if (rc == 0) {
		v->busy = true;
		d->busy++;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc == 0) {
		rc = modify(s, j, d, &q, e);
		pthread_mutex_lock(&s->lock);
		v = map_get(&d->volumes, j->src[2]);
		v->busy = false;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
	}
	st_qinfo_free(&q);
	return rc;
}

static void *bitmap_main(void *arg)
{
	return st_job_thread(arg, run_job);
}

int st_bitmap_job(struct storage_state *s, enum st_job_kind kind, const char *job_id,
		  const char *const ids[3], int64_t gen, const char *bitmap, struct st_err *e)
{
	if (!st_is_uuid(job_id))
		return st_fail(e, RPC_E_PARAMS, "job_id: not a UUID");
	if (kind != ST_JOB_CLEAR_BITMAPS && (!bitmap || strlen(bitmap) > ST_BITMAP_NAME_MAX))
		return st_fail(e, RPC_E_PARAMS, "bitmap: a name of at most %d bytes",
			       ST_BITMAP_NAME_MAX);
	pthread_mutex_lock(&s->lock);
	if (st_job_admit(s, job_id, e) < 0) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	struct st_job *j = st_job_new(s, job_id, kind);
	snprintf(j->info.desc, sizeof(j->info.desc), "%s", kind_name(kind));
	for (int i = 0; i < 3; i++)
		snprintf(j->src[i], 37, "%.36s", ids[i]);
	j->gen = gen;
	if (bitmap)
		snprintf(j->bitmap, sizeof(j->bitmap), "%s", bitmap);
	if (st_job_launch(s, j, bitmap_main) < 0) {
		pthread_mutex_unlock(&s->lock);
		free(j);
		return st_fail(e, RPC_E_NO_RESOURCES, "cannot start the job thread");
	}
	pthread_mutex_unlock(&s->lock);
	st_job_publish(s, j);
	return 0;
}
