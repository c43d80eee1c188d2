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
 * clusters, which would expose the backing file's data under them.
 *
 * A qemu-img amend killed half-way (vdsmd's cgroup killed, a kill -9) can
 * leave the qcow2 corrupt: downgrading, qemu 7.2 writes the L2 table that
 * points at a cluster it allocated for a zero cluster, then the new
 * header, and only then the refcount block ("refcount=0 reference=1").
 * So <storage_root>/amend-<vol>.intent names the volume while qemu-img
 * runs; when qemu-img was killed (the job aborted), and at startup for an
 * intent left behind (st_amend_recover), `qemu-img check -r all` of the
 * volume's own qcow2 (no backing: its refcounts and tables are its own)
 * makes it consistent again, then the intent goes.  Its compat is then the old one or the new
 * one (the header is one write), its data as before; the generation is
 * not bumped (the amend did not finish).
 *
 * When that repair fails (corruption remains, qemu-img cannot open the
 * image or cannot run, the data file is unusable) the volume is marked
 * ILLEGAL in its metadata - Image.prepare and a VM start refuse it as any
 * ILLEGAL volume - with one log line giving qemu-img's reason, and the
 * intent is kept: every later start tries the repair again (an admin may
 * fix the file meanwhile), and a new SDM.amend_volume of it is refused.
 * The legality rule: a successful repair makes the volume LEGAL again only
 * when the repair itself took LEGAL away.  That is recorded as MARKED=1 in
 * the intent, written and fsynced before the ILLEGAL metadata, and only
 * when the volume was LEGAL (a volume already ILLEGAL - a half copy, the
 * engine's Volume.setLegality - stays ILLEGAL after the repair: nothing
 * says its data is good).  When the engine sets the legality itself
 * afterwards (Volume.setLegality, SDM.update_volume with legality) MARKED
 * is dropped before its metadata is written (st_amend_unmark): the
 * engine's word is the last one and a successful repair never undoes it
 * (a repair that fails again at a later start marks a LEGAL volume ILLEGAL
 * again, MARKED again: the qcow2 is still corrupt, whatever was said).  The
 * LEGAL write comes before the intent's removal, so a crash between them
 * repeats a repair that finds nothing and a LEGAL write that changes
 * nothing. */
#include "st_crash.h"
#include "st_ops.h"
#include "../../common/log.h"

#include <dirent.h>
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

static char *intent_path(const struct storage_state *s, const char *vol)
{
	return st_pathf("%s/amend-%s.intent", s->root, vol);
}

static void intent_kv(const struct st_job *j, struct st_kv *kv)
{
	kv_init(kv);
	kv_set(kv, "SD", j->src[0]);
	kv_set(kv, "IMG", j->src[1]);
	kv_set(kv, "VOL", j->src[2]);
	kv_set(kv, "COMPAT", j->compat);
}

static int intent_write(struct storage_state *s, const struct st_job *j)
{
	struct st_kv kv;
	intent_kv(j, &kv);
	char *path = intent_path(s, j->src[2]);
	int rc = kv_write_file(&kv, path);
	free(path);
	kv_free(&kv);
	return rc;
}

static void intent_clear(struct storage_state *s, const char *vol)
{
	char *path = intent_path(s, vol);
	st_remove_record(path, s->root);
	free(path);
}

/* qemu-img check -r all of the qcow2 of vol (st_vol_open_data, passed as
 * fd 3, no backing): 0 when it is consistent afterwards; -1 with why
 * filled (it cannot be opened, qemu-img cannot run or corruption remains). */
static int amend_repair(const struct st_domain *d, const char *img, const char *vol,
			char *why, size_t whylen)
{
	struct st_err oe = { 0 };
	int fd = st_vol_open_data(d, img, vol, &oe);
	if (fd < 0) {
		snprintf(why, whylen, "cannot open it: %s", oe.msg);
		return -1;
	}
	static const char spec[] = "json:{\"driver\":\"qcow2\",\"file\":{\"driver\":\"file\","
				   "\"filename\":\"/proc/self/fd/3\"},\"backing\":null}";
	char *argv[] = { (char *)"qemu-img", (char *)"check", (char *)"-r", (char *)"all",
			 (char *)spec, NULL };
	struct vd_buf out = VD_BUF_INIT;
	char err[256] = "";
	int rc = st_run_tool_out(NULL, "qemu-img", "qemu-utils", argv, fd, &out, err, sizeof(err));
	if (rc == 0)
		rc = st_fsync_fd(fd);
	close(fd);
	buf_putc(&out, '\0');
	if (rc < 0) {
		/* qemu-img names the image by its spec: "the volume" is shorter */
		char *at = strstr(err, spec);
		if (at)
			snprintf(why, whylen, "qemu-img check -r all: %.*sthe volume%s",
				 (int)(at - err), err, at + strlen(spec));
		else
			snprintf(why, whylen, "qemu-img check -r all: %s", *err ? err : st_rc_text(rc));
	}
	else if (strstr(out.data, "Repairing") || strstr(out.data, "Rebuilding"))
		log_warn("storage: volume %s of domain %s: repaired the qcow2 an interrupted amend "
			 "left inconsistent", vol, d->uuid);
	buf_free(&out);
	return rc < 0 ? -1 : 0;
}

/* Write vol's legality (caller owns the volume: the amend job holds it
 * busy, or startup, before any verb): metadata first, then the index. */
static int amend_set_legal(struct storage_state *s, struct st_domain *d, const char *vol,
			   bool legal)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, vol);
	struct st_volume copy;
	if (v)
		copy = *v;
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return VD_ENOENT;
	if (copy.legal == legal)
		return 0;
	copy.legal = legal;
	copy.mtime = (int64_t)time(NULL);
	int rc = st_vol_write_meta(d, &copy);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	v->legal = legal;
	v->mtime = copy.mtime;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* The repair failed: the volume becomes ILLEGAL (no VM, no prepare serves
 * a qcow2 qemu-img calls corrupt) and the intent stays, so every start
 * tries the repair again.  MARKED=1 goes into the intent, fsynced, before
 * the metadata says ILLEGAL, and only when the volume was LEGAL: it is the
 * record that this repair took LEGAL away.  A crash between the two writes
 * leaves MARKED=1 over a LEGAL volume, which the next start handles the
 * same way (repair, then ILLEGAL or LEGAL).  The volume is not deleted and
 * its generation is not bumped. */
static int amend_unrepaired(struct storage_state *s, struct st_domain *d, struct st_kv *kv,
			    const char *vol, const char *why)
{
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, vol);
	bool was_legal = v && v->legal;
	pthread_mutex_unlock(&s->lock);
	int rc = 0;
	if (was_legal && !kv_get(kv, "MARKED")) {
		kv_set(kv, "MARKED", "1");
		char *path = intent_path(s, vol);
		rc = kv_write_file(kv, path);
		free(path);
		if (rc == 0)
			ST_CRASH("amend.marked");
	}
	if (rc == 0)
		rc = amend_set_legal(s, d, vol, false);
	if (rc < 0)
		log_error("storage: volume %s of domain %s: an interrupted amend left its qcow2 "
			  "corrupt and the repair failed (%s); marking it ILLEGAL failed too: %s; "
			  "the repair is tried again at the next start", vol, d->uuid, why,
			  st_rc_text(rc));
	else
		log_error("storage: volume %s of domain %s: an interrupted amend left its qcow2 "
			  "corrupt and the repair failed (%s); the volume is ILLEGAL, the repair is "
			  "tried again at the next start", vol, d->uuid, why);
	return rc;
}

/* The repair succeeded: LEGAL again only when the intent says this repair
 * made it ILLEGAL (MARKED=1), then the intent goes.  A volume that was
 * ILLEGAL for another reason before (a half copy, the engine's
 * Volume.setLegality) stays ILLEGAL; an engine's Volume.setLegality or
 * SDM.update_volume of legality after the mark drops MARKED first
 * (st_amend_unmark), so the engine's later word is never undone. */
static void amend_repaired(struct storage_state *s, struct st_domain *d,
			   const struct st_kv *kv, const char *vol)
{
	const char *m = kv_get(kv, "MARKED");
	int rc = m && strcmp(m, "1") == 0 ? amend_set_legal(s, d, vol, true) : 0;
	if (rc < 0) {
		log_error("storage: volume %s of domain %s: repaired, but marking it LEGAL again "
			  "failed: %s; tried again at the next start", vol, d->uuid, st_rc_text(rc));
		return;
	}
	if (m)
		log_info("storage: volume %s of domain %s: repaired; LEGAL again", vol, d->uuid);
	intent_clear(s, vol);
}

/* Does vol have an intent left (a repair that failed)? */
static bool intent_exists(const struct storage_state *s, const char *vol)
{
	char *path = intent_path(s, vol);
	bool yes = access(path, F_OK) == 0;
	free(path);
	return yes;
}

void st_amend_unmark(struct storage_state *s, const char *vol)
{
	if (!st_is_uuid(vol))
		return;
	char *path = intent_path(s, vol);
	struct st_kv kv;
	if (kv_read_file(&kv, path) == 0) {
		if (kv_get(&kv, "MARKED")) {
			struct st_kv out;
			kv_init(&out);
			for (size_t i = 0; i < kv.n; i++)
				if (strcmp(kv.keys[i], "MARKED") != 0)
					kv_set(&out, kv.keys[i], kv.vals[i]);
			if (kv_write_file(&out, path) < 0)
				log_error("storage: cannot rewrite %s", path);
			else
				log_info("storage: volume %s: legality set by the engine; its amend "
					 "repair will not change it", vol);
			kv_free(&out);
		}
		kv_free(&kv);
	}
	free(path);
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
	int wrc = intent_write(s, j);
	if (wrc < 0) {
		free(spec);
		close(fd);
		return st_fail_rc(e, RPC_E_GENERAL, wrc, "Cannot amend volume %s: recording it",
				  j->src[2]);
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
		/* killed half-way (the job aborted, or a signal): consistent again
		 * before it is used; an amend that failed by itself (the volume in
		 * use: no write lock) did not change it */
		bool killed = rc == VD_ECANCELED || strstr(err, "killed by signal") != NULL;
		char why[320] = "";
		if (!killed || amend_repair(d, j->src[1], j->src[2], why, sizeof(why)) == 0) {
			intent_clear(s, j->src[2]);
		} else {
			struct st_kv kv;   /* what intent_write wrote */
			intent_kv(j, &kv);
			/* the reason is long (qemu-img's words): in the log line only */
			int mrc = amend_unrepaired(s, d, &kv, j->src[2], why);
			kv_free(&kv);
			return st_fail(e, RPC_E_GENERAL, "Cannot amend volume %s: %s; its repair "
				       "failed (see the log): %s", j->src[2], err, mrc < 0 ?
				       "marking it ILLEGAL failed too" : "the volume is ILLEGAL");
		}
		return st_fail(e, RPC_E_GENERAL, "Cannot amend volume %s: %s", j->src[2], err);
	}
	rc = st_fsync_fd(fd);
	close(fd);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "syncing volume %s", j->src[2]);
	intent_clear(s, j->src[2]);
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
	else if (intent_exists(s, j->src[2]))
		rc = st_fail(e, RPC_E_GENERAL, "Cannot amend volume %s: an interrupted amend left "
			     "it corrupt and its repair failed; it is repaired again at the next "
			     "start", j->src[2]);
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
			rc = st_fail_rc(e, RPC_E_GENERAL, wrc, "writing volume metadata");
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

/* One intent: the volume it names checked and repaired, then it goes; kept
 * (for the next start), the volume ILLEGAL, when the repair failed. */
static void recover_one(struct storage_state *s, const char *vol)
{
	char *path = intent_path(s, vol);
	struct st_kv kv;
	int rc = kv_read_file(&kv, path);
	if (rc) {
		log_error("storage: %s is unreadable or corrupt; left alone", path);
		free(path);
		return;
	}
	free(path);
	const char *sd = kv_get(&kv, "SD"), *img = kv_get(&kv, "IMG");
	struct st_domain *d = st_is_uuid(sd) ? map_get(&s->domains, sd) : NULL;
	bool known = d && st_is_uuid(img) && map_get(&d->volumes, vol) != NULL;
	if (!known)
		log_warn("storage: interrupted amend of volume %s: the volume is not here; "
			 "intent dropped", vol);
	else
		log_warn("storage: amend of volume %s of domain %s was interrupted; checking it",
			 vol, sd);
	char why[320] = "";
	if (!known)
		intent_clear(s, vol);
	else if (amend_repair(d, img, vol, why, sizeof(why)) == 0)
		amend_repaired(s, d, &kv, vol);
	else
		amend_unrepaired(s, d, &kv, vol, why);
	kv_free(&kv);
}

void st_amend_recover(struct storage_state *s)
{
	DIR *dh = opendir(s->root);
	if (!dh)
		return;
	char vols[64][37];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(dh)) && n < 64) {
		const char *name = de->d_name;
		if (strlen(name) != strlen("amend-") + 36 + strlen(".intent") ||
		    strncmp(name, "amend-", 6) != 0 || strcmp(name + 42, ".intent") != 0)
			continue;
		memcpy(vols[n], name + 6, 36);
		vols[n][36] = '\0';
		if (st_is_uuid(vols[n]))
			n++;
	}
	closedir(dh);
	/* more than 64 (never seen): the rest at the next start */
	for (size_t i = 0; i < n; i++)
		recover_one(s, vols[i]);
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
