/* vdsmd/storage/st_jobs_update.c - host job SDM.update_volume.
 *
 * As VDSM's sdm/api/update_volume.py and Volume.update_attributes: the
 * verb checks vol_attr (VolumeAttributes: legality, description,
 * generation, type) and starts the job; the job checks the volume.  The
 * generation of vol_info must match the volume's, and VDSM compares it even
 * when the engine left it out (None never matches: 911).  type may only
 * become SHARED, of a LEAF volume without a parent; a legality equal to the
 * current one is refused (235 InvalidVolumeUpdate); a description is cut
 * at 210 bytes.  The new generation is vol_attr.generation when given,
 * else the current one + 1 (wrapping after 999).  Everything goes to disk
 * in one atomic .meta write (write to a temporary file, fsync, rename), so
 * a crash leaves the old or the new metadata, never a mixture. */
#include "st_crash.h"
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *voltype_name(const struct st_volume *v)
{
	return v->shared ? "SHARED" : v->nchildren ? "INTERNAL" : "LEAF";
}

/* The checks of Volume.update_attributes on the busy volume's copy. */
static int check_attr(const struct st_job *j, const struct st_volume *v, struct st_err *e)
{
	const struct st_vol_attr *a = &j->attr;
	if (j->gen < 0)
		return st_fail(e, RPC_E_GEN_MISMATCH, "requested=None, actual=%u", v->generation);
	if ((int64_t)v->generation != j->gen)
		return st_fail(e, RPC_E_GEN_MISMATCH, "requested=%lld, actual=%u",
			       (long long)j->gen, v->generation);
	if (a->shared && (v->shared || v->nchildren))
		return st_fail(e, RPC_E_VOL_UPDATE, "vol_id=%s, reason=%s Volume cannot be updated "
			       "to SHARED", v->uuid, voltype_name(v));
	if (a->shared && strcmp(v->parent, ST_BLANK_UUID) != 0)
		return st_fail(e, RPC_E_VOL_UPDATE, "vol_id=%s, reason=Volume with parent %s cannot "
			       "update to SHARED", v->uuid, v->parent);
	if (a->legality >= 0 && (a->legality == 1) == v->legal) {
		const char *l = v->legal ? "LEGAL" : "ILLEGAL";
		return st_fail(e, RPC_E_VOL_UPDATE, "vol_id=%s, reason=%s Volume cannot be updated "
			       "to %s", v->uuid, l, l);
	}
	return 0;
}

static int update_work(struct storage_state *s, struct st_job *j, struct st_err *e)
{
	struct st_domain *d = NULL;
	struct st_volume copy;
	if (!st_job_vol_busy(s, j, &d, &copy, e))
		return -1;
	int rc = check_attr(j, &copy, e);
	const struct st_vol_attr *a = &j->attr;
	char *nd = NULL;
	if (rc == 0) {
		if (a->has_desc) {
			nd = st_clean_text(a->desc, ST_DESC_MAX);
			copy.description = nd;
		}
		if (a->legality >= 0)
			copy.legal = a->legality == 1;
		if (a->shared)
			copy.shared = true;
		copy.generation = a->generation >= 0 ? (unsigned)a->generation
			: (copy.generation + 1) % (ST_MAX_GENERATION + 1);
		copy.mtime = (int64_t)time(NULL);
		ST_CRASH("update_volume.checked");
		if (a->legality >= 0)
			st_amend_unmark(s, j->src[2]);
		int wrc = st_vol_write_meta(d, &copy);
		if (wrc < 0)
			rc = st_fail_rc(e, RPC_E_GENERAL, wrc, "writing volume metadata");
	}
	if (rc == 0) {
		ST_CRASH("update_volume.written");
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, j->src[2]);
		if (nd) {
			free(v->description);
			v->description = nd;
			nd = NULL;
		}
		v->legal = copy.legal;
		v->shared = copy.shared;
		v->generation = copy.generation;
		v->mtime = copy.mtime;
		pthread_mutex_unlock(&s->lock);
		log_info("storage: volume %s updated (generation=%u%s%s%s)", j->src[2],
			 copy.generation, a->legality >= 0 ? (a->legality ? ", LEGAL" : ", ILLEGAL") : "",
			 a->shared ? ", SHARED" : "", a->has_desc ? ", description" : "");
	}
	free(nd);
	st_job_vol_release(s, j, d);
	return rc;
}

static void *update_main(void *arg)
{
	return st_job_thread(arg, update_work);
}

int st_update_job(struct storage_state *s, const char *job_id, const char *const ids[3],
		  int64_t gen, const struct st_vol_attr *attr, struct st_err *e)
{
	if (attr->legality < 0 && attr->generation < 0 && !attr->shared && !attr->has_desc)
		return st_fail(e, RPC_E_GENERAL, "No attributes to update");
	if (attr->generation > ST_MAX_GENERATION)
		return st_fail(e, RPC_E_GENERAL, "vol_attr.generation: at most %d",
			       ST_MAX_GENERATION);
	struct st_job *j = st_job_prep(s, job_id, ST_JOB_UPDATE, "update_volume", ids, gen, e);
	if (!j)
		return -1;
	j->attr = *attr;
	return st_job_start(s, j, update_main, e);
}
