/* vdsmd/storage/st_jobs_amend.c - host job SDM.amend_volume.
 *
 * As VDSM's sdm/api/amend_volume.py: qcow2_attr.compat must be one of
 * qemuimg's _QCOW2_COMPAT_SUPPORTED ("0.10", "1.1"), checked by the verb
 * (100, VDSM's ValueError); the job fails with 100 when the volume is not
 * COW, is SHARED, or its domain does not support the compat (a domain
 * before version 4 only "0.10", sd.supports_qcow2_compat with VDSM's
 * default irs:qcow2_compat), with 911 when vol_info.generation does not
 * match, and with 100 when qemu-img amend fails (the volume in use by a
 * VM: qemu-img cannot take its write lock).  The volume's legality is left
 * as it is (volume.operation(set_illegal=False)) and a done job bumps its
 * generation.  vdsmd keeps no compat in the volume metadata (qemu-img info
 * reports it), so nothing else is written.
 *
 * qemu-img amend gets the data file opened here with O_NOFOLLOW under its
 * image directory as /proc/self/fd/3, with the backing chain from our
 * metadata (never from the qcow2 header): VDSM runs amend on the whole
 * chain too (bug 1417460), and a downgrade to 0.10 must see the backing
 * file - qemu turns zero clusters of an image without one into unallocated
 * clusters, which would expose the backing file's data under them. */
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

static bool compat_known(const char *c)
{
	return c && (strcmp(c, "0.10") == 0 || strcmp(c, "1.1") == 0);
}

/* "json:{qcow2 on fd 3, backing: <the parent's chain> | null}". */
static char *amend_spec(struct storage_state *s, struct st_domain *d, const char *parent,
			char *err, size_t errlen)
{
	static const char head[] = "json:{\"driver\":\"qcow2\",\"file\":{\"driver\":\"file\","
				   "\"filename\":\"/proc/self/fd/3\"},\"backing\":";
	char *pspec = NULL;
	if (strcmp(parent, ST_BLANK_UUID) != 0) {
		pspec = st_chain_json(s, d, parent, err, errlen);
		if (!pspec)
			return NULL;
	}
	const char *back = pspec ? pspec + strlen("json:") : "null";
	size_t n = sizeof(head) + strlen(back) + 2;
	char *out = xcalloc(1, n);
	snprintf(out, n, "%s%s}", head, back);
	free(pspec);
	return out;
}

static int run_amend(struct storage_state *s, struct st_job *j, struct st_domain *d,
		     const struct st_volume *v, struct st_err *e)
{
	int fd = st_job_open_data(d, j, e);
	if (fd < 0)
		return -1;
	char err[256] = "";
	char *spec = amend_spec(s, d, v->parent, err, sizeof(err));
	if (!spec) {
		close(fd);
		return st_fail(e, RPC_E_GENERAL, "Cannot amend volume %s: %s", j->src[2], err);
	}
	char opt[32];
	snprintf(opt, sizeof(opt), "compat=%s", j->compat);
	char *argv[] = { (char *)"qemu-img", (char *)"amend", (char *)"-o", opt, spec, NULL };
	struct st_io io = { .ctx = j, .stopped = st_job_stopped, .child = st_job_child };
#ifdef VD_TEST_HOOKS
	io.crash_step = "amend.amending";
#endif
	int rc = st_run_tool_cb(&io, "qemu-img", "qemu-utils", argv, fd, NULL, NULL, NULL, err,
			    sizeof(err));
	free(spec);
	if (rc < 0) {
		close(fd);
		return st_fail(e, RPC_E_GENERAL, "Cannot amend volume %s: %s", j->src[2], err);
	}
	rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	if (rc < 0)
		return st_fail(e, RPC_E_GENERAL, "syncing volume %s: %s", j->src[2], strerror(-rc));
	return 0;
}

static int amend_work(struct storage_state *s, struct st_job *j, struct st_err *e)
{
	struct st_domain *d = NULL;
	struct st_volume copy;
	if (!st_job_vol_busy(s, j, &d, &copy, e))
		return -1;
	int rc = 0;
	if (copy.format != ST_FMT_COW)
		rc = st_fail(e, RPC_E_GENERAL, "Cannot amend volume %s: volume is not COW format",
			     j->src[2]);
	else if (copy.shared)
		rc = st_fail(e, RPC_E_GENERAL, "Cannot amend volume %s: volume is shared", j->src[2]);
	else if (d->version < 4 && strcmp(j->compat, "0.10") != 0)
		rc = st_fail(e, RPC_E_GENERAL, "Cannot amend volume %s: storage domain %s does not "
			     "support compat %s", j->src[2], j->src[0], j->compat);
	else if (j->gen >= 0 && (int64_t)copy.generation != j->gen)
		rc = st_fail(e, RPC_E_GEN_MISMATCH, "requested=%lld, actual=%u", (long long)j->gen,
			     copy.generation);
	if (rc == 0)
		rc = run_amend(s, j, d, &copy, e);
	if (rc == 0) {
		ST_CRASH("amend.amended");
		copy.generation = (copy.generation + 1) % (ST_MAX_GENERATION + 1);
		copy.mtime = (int64_t)time(NULL);
		int wrc = st_vol_write_meta(d, &copy);
		if (wrc < 0)
			rc = st_fail(e, RPC_E_GENERAL, "writing volume metadata: %s", strerror(-wrc));
	}
	if (rc == 0) {
		ST_CRASH("amend.meta");
		pthread_mutex_lock(&s->lock);
		struct st_volume *v = map_get(&d->volumes, j->src[2]);
		v->generation = copy.generation;
		v->mtime = copy.mtime;
		pthread_mutex_unlock(&s->lock);
	}
	st_job_vol_release(s, j, d);
	return rc;
}

static void *amend_main(void *arg)
{
	return st_job_thread(arg, amend_work);
}

int st_amend_job(struct storage_state *s, const char *job_id, const char *const ids[3],
		 int64_t gen, const char *compat, struct st_err *e)
{
	if (!compat)
		return st_fail(e, RPC_E_GENERAL, "No attributes to amend");
	if (!compat_known(compat))
		return st_fail(e, RPC_E_GENERAL, "Unsupported qcow2 compat %.32s", compat);
	struct st_job *j = st_job_prep(s, job_id, ST_JOB_AMEND, "amend_volume", ids, gen, e);
	if (!j)
		return -1;
	snprintf(j->compat, sizeof(j->compat), "%s", compat);
	return st_job_start(s, j, amend_main, e);
}
