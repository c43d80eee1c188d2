/* vdsmd/storage/st_jobs_merge.c - the host job SDM.merge: the data step of
 * a cold merge, between StoragePool.prepareMerge and finalizeMerge
 * (st_op_merge.c).
 *
 * As VDSM's sdm/api/merge.py: the verb only starts the job; the job checks
 * the subchain (SubchainInfo.validate: its errors, 920/921/219, 358/268,
 * are the job's, seen in Host.getJobs and the |jobs|status| event), checks
 * base_generation (911), runs `qemu-img commit -p -t none` of top into base
 * with top left intact (VDSM's "-b base" implies -d; we pass -d with the
 * chain from our metadata as a json: spec, never the qcow2 headers'),
 * syncs base, with merge_bitmaps and a COW base adds the valid bitmaps of
 * top that base lacks and merges them (bitmaps.merge_bitmaps), and bumps
 * base's generation (volume.operation(set_illegal=False): legality is
 * left alone).  Top and base are busy for the job.  A job killed midway
 * leaves the old chain readable as before: top still holds all its data,
 * and what reached base is only what top covers. */
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

#define ST_MAX_GENERATION 999   /* VDSM's sc.MAX_GENERATION */

static bool has_bitmap(const struct st_qinfo *q, const char *name)
{
	for (size_t i = 0; q && i < q->nbitmaps; i++)
		if (strcmp(q->bitmaps[i].name, name) == 0)
			return true;
	return false;
}

/* qemu-img bitmap on base (a path under the domain, our metadata's). */
static int bitmap_cmd(struct st_job *j, char *const argv[], enum rpc_err code,
		      const char *name, struct st_err *e)
{
	struct st_io io = { .ctx = j, .stopped = st_job_stopped, .child = st_job_child };
	char err[256];
	if (st_run_tool_cb(&io, "qemu-img", "qemu-utils", argv, -1, NULL, NULL, NULL, err,
			   sizeof(err)) < 0)
		return st_fail(e, code, "bitmap %.64s of volume %s: %s", name, j->dst[2], err);
	return 0;
}

/* bitmaps.merge_bitmaps: every valid bitmap of top (enabled, not in-use)
 * is merged into base, added first (enabled, top's granularity) when base
 * lacks it - unless base's parent has it (a hole in the bitmaps' chain:
 * skipped, as VDSM). */
static int merge_bitmaps(struct storage_state *s, struct st_job *j, const struct st_domain *d,
			 const char *base_parent, struct st_err *e)
{
	struct st_qinfo qt = { 0 }, qb = { 0 }, qp = { 0 };
	char pimg[37] = "";
	pthread_mutex_lock(&s->lock);
	const struct st_volume *pv = base_parent[0] ? map_get(&d->volumes, base_parent) : NULL;
	if (pv)
		snprintf(pimg, sizeof(pimg), "%s", pv->image);
	pthread_mutex_unlock(&s->lock);
	char *top = st_pathf("%s/images/%s/%s", d->dir, j->src[1], j->src[2]);
	char *base = st_pathf("%s/images/%s/%s", d->dir, j->dst[1], j->dst[2]);
	int rc = st_qemu_info_path(top, &qt, e);
	if (rc == 0)
		rc = st_qemu_info_path(base, &qb, e);
	if (rc == 0 && pimg[0]) {
		char *pp = st_pathf("%s/images/%s/%s", d->dir, pimg, base_parent);
		rc = st_qemu_info_path(pp, &qp, e);
		free(pp);
	}
	for (size_t i = 0; rc == 0 && i < qt.nbitmaps; i++) {
		const struct st_qbitmap *b = &qt.bitmaps[i];
		if (!(b->flags & ST_QBM_AUTO) || (b->flags & ST_QBM_IN_USE))
			continue;
		if (!has_bitmap(&qb, b->name)) {
			if (has_bitmap(&qp, b->name)) {
				log_warn("storage: job %s: bitmap %.64s is on the parent of base %s "
					 "but not on base: not merged", j->info.id, b->name, j->dst[2]);
				continue;
			}
			char gran[24];
			snprintf(gran, sizeof(gran), "%lld", (long long)b->granularity);
			char *add[] = { (char *)"qemu-img", (char *)"bitmap", (char *)"--add",
					(char *)"--enable", (char *)"-f", (char *)"qcow2", base,
					b->name, (char *)"-g", gran, NULL };
			rc = bitmap_cmd(j, add, RPC_E_ADD_BITMAP, b->name, e);
		}
		char *mrg[] = { (char *)"qemu-img", (char *)"bitmap", (char *)"--merge", b->name,
				(char *)"-F", (char *)"qcow2", (char *)"-b", top, (char *)"-f",
				(char *)"qcow2", base, b->name, NULL };
		if (rc == 0)
			rc = bitmap_cmd(j, mrg, RPC_E_MERGE_BITMAP, b->name, e);
	}
	free(top);
	free(base);
	st_qinfo_free(&qt);
	st_qinfo_free(&qb);
	st_qinfo_free(&qp);
	return rc;
}

/* The work on the busy subchain. */
static int commit(struct storage_state *s, struct st_job *j, struct st_domain *d,
		  struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume base = *(struct st_volume *)map_get(&d->volumes, j->dst[2]);
	pthread_mutex_unlock(&s->lock);
	if (j->gen >= 0 && (int64_t)base.generation != j->gen)
		return st_fail(e, RPC_E_GEN_MISMATCH, "requested=%lld, actual=%u",
			       (long long)j->gen, base.generation);
	char err[256] = "";
	char *spec = st_chain_json(s, d, j->src[2], err, sizeof(err));
	if (!spec)
		return st_fail(e, RPC_E_GENERAL, "%s", err);
	log_info("storage: job %s: committing %s into %s", j->info.id, j->src[2], j->dst[2]);
	char *argv[] = { (char *)"qemu-img", (char *)"commit", (char *)"-p", (char *)"-t",
			 (char *)"none", (char *)"-d", spec, NULL };
	struct st_io io = { .ctx = j, .stopped = st_job_stopped, .child = st_job_child };
#ifdef VD_TEST_HOOKS
	io.crash_step = "merge.committing";
#endif
	int rc = st_run_tool_cb(&io, "qemu-img", "qemu-utils", argv, -1, NULL, st_job_output, j,
				err, sizeof(err));
	free(spec);
	if (rc < 0)
		return st_fail(e, RPC_E_GENERAL, "qemu-img commit: %s", err);
	int fd = st_vol_open(d, j->dst[1], j->dst[2], O_RDONLY, NULL);
	rc = fd < 0 ? fd : st_fsync_fd(fd);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "syncing base volume %s", j->dst[2]);
	ST_CRASH("merge.committed");
	if (j->merge_bitmaps && base.format == ST_FMT_COW &&
	    merge_bitmaps(s, j, d, strcmp(base.parent, ST_BLANK_UUID) ? base.parent : "", e) < 0)
		return -1;
	base.generation = (base.generation + 1) % (ST_MAX_GENERATION + 1);
	base.mtime = (int64_t)time(NULL);
	if ((rc = st_vol_write_meta(d, &base)) < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "writing base volume metadata");
	int64_t app = 0, tru = 0;
	bool sized = st_vol_stat(d, j->dst[1], j->dst[2], &app, &tru) == 0;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, j->dst[2]);
	v->generation = base.generation;
	v->mtime = base.mtime;
	if (sized) {
		v->apparent = app;
		v->truesize = tru;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int run_merge(struct storage_state *s, struct st_job *j, struct st_err *e)
{
	struct st_subchain sc = { .base_gen = j->gen };
	snprintf(sc.sd, sizeof(sc.sd), "%s", j->src[0]);
	snprintf(sc.img, sizeof(sc.img), "%s", j->src[1]);
	snprintf(sc.top, sizeof(sc.top), "%s", j->src[2]);
	snprintf(sc.base, sizeof(sc.base), "%s", j->dst[2]);
	struct st_domain *d = NULL;
	struct st_volume *top = NULL, *base = NULL, *child = NULL;
	pthread_mutex_lock(&s->lock);
	int rc = st_subchain_check(s, &sc, &d, &top, &base, &child, e) < 0 || !d || !top || !base
		 ? -1 : 0;
	if (rc == 0 && (top->busy || base->busy)) {
		st_fail(e, RPC_E_GENERAL, "volume %s is busy", top->busy ? sc.top : sc.base);
		rc = -1;
	}
	if (rc == 0) {
		top->busy = base->busy = true;
		d->busy++;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc < 0 || !d)
		return -1;
	rc = commit(s, j, d, e);
	pthread_mutex_lock(&s->lock);
	((struct st_volume *)map_get(&d->volumes, sc.top))->busy = false;
	((struct st_volume *)map_get(&d->volumes, sc.base))->busy = false;
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static void *merge_main(void *arg)
{
	return st_job_thread(arg, run_merge);
}

int st_merge_job(struct storage_state *s, const char *job_id, const struct st_subchain *sc,
		 bool merge_bitmaps, struct st_err *e)
{
	if (!st_is_uuid(job_id))
		return st_fail(e, RPC_E_PARAMS, "job_id: not a UUID");
	pthread_mutex_lock(&s->lock);
	if (st_job_admit(s, job_id, e) < 0) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	struct st_job *j = st_job_new(s, job_id, ST_JOB_MERGE);
	snprintf(j->info.desc, sizeof(j->info.desc), "merge_subchain");
	snprintf(j->src[0], 37, "%s", sc->sd);
	snprintf(j->src[1], 37, "%s", sc->img);
	snprintf(j->src[2], 37, "%s", sc->top);
	snprintf(j->dst[0], 37, "%s", sc->sd);
	snprintf(j->dst[1], 37, "%s", sc->img);
	snprintf(j->dst[2], 37, "%s", sc->base);
	j->gen = sc->base_gen;
	j->merge_bitmaps = merge_bitmaps;
	if (st_job_launch(s, j, merge_main) < 0) {
		pthread_mutex_unlock(&s->lock);
		free(j);
		return st_fail(e, RPC_E_NO_RESOURCES, "cannot start the job thread");
	}
	pthread_mutex_unlock(&s->lock);
	st_job_publish(s, j);
	return 0;
}
