/* vdsmd/storage/st_spm.c - the storage pool manager (SPM) role and its lease.
 *
 * One host per pool is SPM: it alone changes shared metadata (creates and
 * deletes volumes of the pool's domains).  Exclusion across hosts is a lease
 * file on the master domain, <master>/dom_md/spm_lease (key=value with the
 * checksum of st_meta.c, replaced atomically):
 *     HOST_ID  the holder's hostID (0: free)
 *     LVER     lease version, +1 at every acquisition
 *     SEQ      renewal counter, changed by every renewal
 *
 * Timing (StoragePool.create's lockRenewalIntervalSec = R, leaseTimeSec = L,
 * kept in the master domain's metadata; defaults 5 s / 60 s):
 *   - the holder rewrites the lease (SEQ+1) right after acquiring, then
 *     every R; a renewal that fails or takes longer than ioOpTimeoutSec
 *     counts as failed, and after leaseRetries failures in a row the holder
 *     steps down (no longer SPM); if it reads another holder or LVER it has
 *     lost the lease and steps down at once; and it stops acting as SPM
 *     (st_spm_valid: verbs answer "not SPM") once its last renewal began
 *     L - R/2 ago, even while its renewer is stuck in storage I/O, so it
 *     never acts after a contender may have taken over;
 *   - a contender that finds a holder watches the lease with its own
 *     monotonic clock (no clock agreement between hosts is needed): any
 *     change of HOST_ID/LVER/SEQ within L means the holder is alive and
 *     spmStart fails; no change for L means it is dead, and the contender
 *     writes itself with LVER+1, waits R and reads again: still its own
 *     record means acquired (two contenders writing at once: the later
 *     write wins, the earlier one sees it and fails).
 *   So a contender whose spmStart begins right after the SPM was killed
 *   holds the lease after L (+ up to R/2 polling) + R; measured 4.0 s with
 *   R = 1 s, L = 3 s (test_storage_engine.py); L + R = 65 s with the defaults.
 *   A clean stop (spmStop, pool disconnect, vdsmd shutdown) writes HOST_ID=0
 *   and the next contender acquires at once. */
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEASE_FILE "spm_lease"

struct lease {
	int holder;
	int64_t lver;
	uint64_t seq;
};

static bool lease_eq(const struct lease *a, const struct lease *b)
{
	return a->holder == b->holder && a->lver == b->lver && a->seq == b->seq;
}

static int lease_read(const char *mdir, struct lease *l)
{
	memset(l, 0, sizeof(*l));
	int md = st_dir_at(mdir, "dom_md");
	if (md < 0)
		return md;
	struct st_kv kv;
	int rc = kv_read_at(&kv, md, LEASE_FILE);
	close(md);
	if (rc == VD_ENOENT)
		return 0;   /* never taken */
	if (rc)
		return rc == VD_EPROTO ? rc : VD_EIO;   /* texts: Bad message, Input/output error */
	l->holder = (int)kv_get_int(&kv, "HOST_ID", 0);
	l->lver = kv_get_int(&kv, "LVER", 0);
	l->seq = (uint64_t)kv_get_int(&kv, "SEQ", 0);
	kv_free(&kv);
	return 0;
}

static int lease_write(const char *mdir, const struct lease *l)
{
	int md = st_dir_at(mdir, "dom_md");
	if (md < 0)
		return md;
	struct st_kv kv;
	kv_init(&kv);
	kv_setf(&kv, "HOST_ID", "%d", l->holder);
	kv_setf(&kv, "LVER", "%lld", (long long)l->lver);
	kv_setf(&kv, "SEQ", "%llu", (unsigned long long)l->seq);
	int rc = kv_write_at(&kv, md, LEASE_FILE);
	kv_free(&kv);
	close(md);
	return rc;
}

void st_pool_lease_from_master(struct storage_state *s)
{
	struct st_domain *m = s->pool_master[0] ? map_get(&s->domains, s->pool_master) : NULL;
	s->lease_renew_ms = m && m->lease_renew_ms ? m->lease_renew_ms : 5000;
	s->lease_time_ms = m && m->lease_time_ms ? m->lease_time_ms : 60000;
	s->lease_io_ms = m && m->lease_io_ms ? m->lease_io_ms : 10000;
	s->lease_retries = m && m->lease_retries ? m->lease_retries : 3;
	if (!s->spm_thread_started) {
		s->spm_holder = -1;
		s->spm_lver = -1;
	}
}

/* Caller holds the lock. */
static char *master_dir(struct storage_state *s)
{
	struct st_domain *m = s->pool_master[0] ? map_get(&s->domains, s->pool_master) : NULL;
	return m && !m->formatting ? xstrdup(m->dir) : NULL;
}

/* Sleep ms on spm_cond (woken early by quit); caller holds the lock. */
static void nap(struct storage_state *s, unsigned ms)
{
	struct timespec dl;
	st_deadline(&dl, ms);
	pthread_cond_timedwait(&s->spm_cond, &s->lock, &dl);
}

static void *renewer(void *arg)
{
	struct storage_state *s = arg;
	unsigned failures = 0;
	bool first = true;
	pthread_mutex_lock(&s->lock);
	while (!s->spm_quit && s->spm_state == ST_SPM_SPM) {
		/* the first renewal right away: acquiring ended one interval
		 * after our record was written */
		if (!first)
			nap(s, s->lease_renew_ms);
		first = false;
		if (s->spm_quit || s->spm_state != ST_SPM_SPM)
			break;
		char *mdir = master_dir(s);
		struct lease mine = { s->pool_host_id, s->spm_lver, s->spm_seq + 1 };
		unsigned io_ms = s->lease_io_ms, retries = s->lease_retries;
		pthread_mutex_unlock(&s->lock);
		uint64_t t0 = vd_now_ms();
		struct lease cur;
		int rc = mdir ? lease_read(mdir, &cur) : VD_ENOENT;
		bool lost = rc == 0 && (cur.holder != mine.holder || cur.lver != mine.lver);
		if (rc == 0 && !lost)
			rc = lease_write(mdir, &mine);
		bool slow = vd_now_ms() - t0 > io_ms;
		free(mdir);
		pthread_mutex_lock(&s->lock);
		if (lost) {
			log_error("storage: SPM lease of pool %s taken by host %d (version %lld): no "
				  "longer SPM", s->pool_uuid, cur.holder, (long long)cur.lver);
			s->spm_state = ST_SPM_FREE;
			s->spm_holder = cur.holder;
			s->spm_lver = cur.lver;
			break;
		}
		if (rc < 0 || slow) {
			failures++;
			log_warn("storage: SPM lease renewal %s (%u of %u)",
				 rc < 0 ? st_rc_text(rc) : "too slow", failures, retries);
			if (failures > retries) {
				log_error("storage: SPM lease of pool %s could not be renewed: stepping "
					  "down", s->pool_uuid);
				s->spm_state = ST_SPM_FREE;
				break;
			}
		} else {
			failures = 0;
			s->spm_seq = mine.seq;
			s->spm_ok_ms = t0;   /* the write began no earlier than this */
		}
		if (s->spm_state == ST_SPM_SPM && !st_spm_valid(s)) {
			log_error("storage: SPM lease of pool %s not renewed for %llu ms: stepping down",
				  s->pool_uuid, (unsigned long long)(vd_now_ms() - s->spm_ok_ms));
			s->spm_state = ST_SPM_FREE;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Stops the renewal thread (caller holds neither lock). */
static void stop_renewer(struct storage_state *s)
{
	pthread_mutex_lock(&s->lock);
	bool started = s->spm_thread_started;
	s->spm_quit = true;
	pthread_cond_broadcast(&s->spm_cond);
	pthread_mutex_unlock(&s->lock);
	if (started)
		pthread_join(s->spm_thread, NULL);
	pthread_mutex_lock(&s->lock);
	s->spm_thread_started = false;
	s->spm_quit = false;
	pthread_mutex_unlock(&s->lock);
}

static bool aborted(const struct st_io *io, char *err, size_t errlen)
{
	return io && io->stopped && io->stopped(io->ctx, err, errlen);
}

/* Sleep ms in steps, giving up early (err says why) when io is stopped. */
static bool wait_ms(const struct st_io *io, unsigned ms, char *err, size_t errlen)
{
	uint64_t end = vd_now_ms() + ms;
	while (vd_now_ms() < end) {
		if (aborted(io, err, errlen))
			return false;
		uint64_t left = end - vd_now_ms();
		usleep((useconds_t)(left > 50 ? 50000 : left * 1000));
	}
	return !aborted(io, err, errlen);
}

/* The lease protocol of the header comment: take the lease in dirs[0]
 * for host me.  dirs[1..n-1] are other leases that must not be held by a
 * live host either (watched the same way, never written).  A lease held
 * by another host is watched for ltime: any change means that host is
 * alive (VD_EBUSY, *busy says who); no change means it expired.  Then our
 * record is written with the version + 1, and read back after renew ms.
 * io (may be NULL) is polled for Task.stop (VD_ECANCELED). */
static int lease_take(struct storage_state *s, const char *const *dirs, size_t n, int me,
		      unsigned renew, unsigned ltime, const struct st_io *io, struct lease *mine,
		      struct lease *busy, char *err, size_t errlen)
{
	struct lease cur[4], seen[4];
	bool held[4];
	size_t nheld = 0;
	int rc;
	if (n > 4)
		n = 4;
	for (size_t i = 0; i < n; i++) {
		if ((rc = lease_read(dirs[i], &cur[i])) < 0 && i > 0) {
			/* a watched lease that cannot be read (the old master's
			 * storage is gone: why the engine reconstructs) holds
			 * nothing back */
			log_warn("storage: SPM lease of %s unreadable (%s): not watched", dirs[i],
				 st_rc_text(rc));
			held[i] = false;
			continue;
		}
		if (rc < 0) {
			st_errf(err, errlen, rc, "reading the SPM lease of %s", dirs[i]);
			return rc;
		}
		seen[i] = cur[i];
		held[i] = cur[i].holder != 0 && cur[i].holder != me;
		nheld += held[i];
	}
	uint64_t end = vd_now_ms() + ltime;
	while (nheld && vd_now_ms() < end) {
		if (!wait_ms(io, renew / 2 ? renew / 2 : 1, err, errlen))
			return VD_ECANCELED;
		for (size_t i = 0; i < n; i++) {
			if (!held[i])
				continue;
			if ((rc = lease_read(dirs[i], &cur[i])) < 0 && i > 0) {
				held[i] = false;   /* became unreadable: as above */
				nheld--;
				continue;
			}
			if (rc < 0) {
				st_errf(err, errlen, rc, "reading the SPM lease of %s", dirs[i]);
				return rc;
			}
			if (cur[i].holder == 0) {   /* released meanwhile */
				held[i] = false;
				nheld--;
			} else if (!lease_eq(&cur[i], &seen[i])) {
				snprintf(err, errlen, "the SPM lease%s%s is held by host %d (version %lld)",
					 i ? " of " : "", i ? dirs[i] : "", cur[i].holder,
					 (long long)cur[i].lver);
				*busy = cur[i];
				return VD_EBUSY;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		if (held[i])
			log_warn("storage: SPM lease of host %d in %s unchanged for %u ms: expired",
				 cur[i].holder, dirs[i], ltime);
	*mine = (struct lease){ me, cur[0].lver + 1,
				((uint64_t)vd_now_ns() << 8) ^ (uint64_t)getpid() };
	if ((rc = lease_write(dirs[0], mine)) < 0) {
		st_errf(err, errlen, rc, "writing the SPM lease");
		return rc;
	}
	if (!wait_ms(io, renew, err, errlen))
		return VD_ECANCELED;
	struct lease back;
	if ((rc = lease_read(dirs[0], &back)) < 0) {
		st_errf(err, errlen, rc, "reading the SPM lease");
		return rc;
	}
	if (!lease_eq(&back, mine)) {
		snprintf(err, errlen, "lost the SPM lease to host %d", back.holder);
		*busy = back;
		return VD_EBUSY;
	}
	return 0;
}

int st_lease_hold(struct storage_state *s, const char *const *dirs, size_t n, int me,
		  unsigned renew, unsigned ltime, int64_t *lver, char *err, size_t errlen)
{
	struct lease mine, busy;
	int rc = lease_take(s, dirs, n, me, renew ? renew : 5000, ltime ? ltime : 60000, NULL,
			    &mine, &busy, err, errlen);
	if (rc == 0) {
		*lver = mine.lver;
		log_info("storage: host %d holds the lease of %s (version %lld)", me, dirs[0],
			 (long long)mine.lver);
	}
	return rc;
}

int st_lease_drop(const char *dir, int me, int64_t lver)
{
	struct lease cur;
	int rc = lease_read(dir, &cur);
	if (rc == 0 && cur.holder == me && cur.lver == lver)
		rc = lease_write(dir, &(struct lease){ 0, lver, cur.seq + 1 });
	return rc;
}

int st_spm_acquire(struct storage_state *s, const struct st_io *io, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	if (!s->pool_connected) {
		pthread_mutex_unlock(&s->lock);
		snprintf(err, errlen, "pool is not connected");
		return VD_ENOENT;
	}
	if (s->spm_state == ST_SPM_SPM) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	char *mdir = master_dir(s);
	int me = s->pool_host_id;
	unsigned renew = s->lease_renew_ms, ltime = s->lease_time_ms;
	s->spm_state = ST_SPM_CONTEND;
	pthread_mutex_unlock(&s->lock);
	int rc = 0;
	struct lease mine = { 0 }, busy = { .holder = -1, .lver = -1 };
	if (!mdir) {
		snprintf(err, errlen, "the master domain is not available");
		rc = VD_ENOENT;
		goto out;
	}
	const char *dirs[1] = { mdir };
	rc = lease_take(s, dirs, 1, me, renew, ltime, io, &mine, &busy, err, errlen);
	/* our record went out at least one renewal interval ago (it was read
	 * back after waiting renew ms) */
	uint64_t now = vd_now_ms(), written = now > renew ? now - renew : 0;
	if (rc == VD_EBUSY) {
		pthread_mutex_lock(&s->lock);
		s->spm_holder = busy.holder;
		s->spm_lver = busy.lver;
		pthread_mutex_unlock(&s->lock);
	}
	if (rc < 0)
		goto out;
	pthread_mutex_lock(&s->lock);
	s->spm_state = ST_SPM_SPM;
	s->spm_holder = me;
	s->spm_lver = mine.lver;
	s->spm_seq = mine.seq;
	s->spm_ok_ms = written;
	s->spm_quit = false;
	s->spm_thread_started = pthread_create(&s->spm_thread, NULL, renewer, s) == 0;
	if (!s->spm_thread_started) {
		s->spm_state = ST_SPM_FREE;
		rc = VD_ESYS(EAGAIN);   /* pthread_create's */
		snprintf(err, errlen, "cannot start the lease renewal thread");
	}
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		log_info("storage: host %d is SPM of pool %s (lease version %lld)", me, s->pool_uuid,
			 (long long)mine.lver);
out:
	if (rc < 0) {
		pthread_mutex_lock(&s->lock);
		if (s->spm_state == ST_SPM_CONTEND)
			s->spm_state = ST_SPM_FREE;
		pthread_mutex_unlock(&s->lock);
	}
	free(mdir);
	return rc;
}

int st_spm_release(struct storage_state *s)
{
	stop_renewer(s);
	pthread_mutex_lock(&s->lock);
	bool was = s->spm_state == ST_SPM_SPM;
	char *mdir = was ? master_dir(s) : NULL;
	struct lease mine = { s->pool_host_id, s->spm_lver, s->spm_seq };
	s->spm_state = ST_SPM_FREE;
	pthread_mutex_unlock(&s->lock);
	int rc = 0;
	if (mdir) {
		struct lease cur, freed = { 0, mine.lver, mine.seq + 1 };
		if (lease_read(mdir, &cur) == 0 && cur.holder == mine.holder && cur.lver == mine.lver)
			rc = lease_write(mdir, &freed);
		pthread_mutex_lock(&s->lock);
		s->spm_holder = rc == 0 ? -1 : s->spm_holder;
		pthread_mutex_unlock(&s->lock);
		log_info("storage: SPM of pool %s released", s->pool_uuid);
	}
	free(mdir);
	return rc;
}

void st_spm_observe(struct storage_state *s)
{
	pthread_mutex_lock(&s->lock);
	bool idle = s->spm_state == ST_SPM_FREE;
	pthread_mutex_unlock(&s->lock);
	int holder;
	int64_t lver;
	if (idle)
		(void)st_spm_inspect(s, &holder, &lver);
}

int st_spm_inspect(struct storage_state *s, int *holder, int64_t *lver)
{
	pthread_mutex_lock(&s->lock);
	char *mdir = s->pool_connected ? master_dir(s) : NULL;
	pthread_mutex_unlock(&s->lock);
	if (!mdir)
		return VD_ENOENT;
	struct lease cur;
	int rc = lease_read(mdir, &cur);
	free(mdir);
	if (rc < 0)
		return rc;
	/* VDSM (spbackends.py StoragePoolMemoryBackend.getSpmStatus): a free
	 * lease answers spmId -1 and the version it was last taken with; one
	 * never taken answers -1 for both.  A holder that stopped renewing
	 * counts as free once the record has stood still for the lease time
	 * since we first read it (clusterlock.py SANLock.inspect: a dead host
	 * cannot hold it), the rule a contender takes it over by. */
	uint64_t now = vd_now_ms();
	pthread_mutex_lock(&s->lock);
	if (!s->spm_seen_ms || s->spm_seen_holder != cur.holder || s->spm_seen_lver != cur.lver ||
	    s->spm_seen_seq != cur.seq) {
		s->spm_seen_holder = cur.holder;
		s->spm_seen_lver = cur.lver;
		s->spm_seen_seq = cur.seq;
		s->spm_seen_ms = now;
	}
	bool expired = cur.holder && now - s->spm_seen_ms >= s->lease_time_ms;
	*holder = cur.holder && !expired ? cur.holder : -1;
	*lver = cur.lver ? cur.lver : -1;
	if (s->spm_state == ST_SPM_FREE) {
		s->spm_holder = *holder;
		s->spm_lver = *lver;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

bool st_spm_valid(const struct storage_state *s)
{
	if (s->spm_state != ST_SPM_SPM)
		return false;
	/* a contender declares us dead lease_time after it first read our
	 * last record (it polls every renew / 2): stop half an interval
	 * before that could happen */
	uint64_t limit = s->lease_time_ms - s->lease_renew_ms / 2;
	return vd_now_ms() - s->spm_ok_ms < limit;
}

int st_spm_require(struct storage_state *s, const struct st_domain *d, struct st_err *e)
{
	if (!d->pool[0])
		return 0;
	if (!st_spm_valid(s))
		return st_fail(e, RPC_E_NOT_SPM, "host %d is not the SPM of pool %s",
			       s->pool_host_id, d->pool);
	/* volumes and images change on the pool's member domains, Active or
	 * Attached: VDSM's createVolume/deleteVolume check membership only
	 * (the engine itself keeps writes off domains in maintenance) */
	int st = strcmp(d->pool, s->pool_uuid) == 0 ? st_pool_dom_status(s, d->uuid) : ST_DS_NONE;
	if (st == ST_DS_NONE)
		return st_fail(e, RPC_E_NOT_MEMBER, "%s is not a member of pool %s", d->uuid,
			       s->pool_uuid);
	return 0;
}

static bool pool_is(struct storage_state *s, const char *sp)
{
	return s->pool_uuid[0] && sp && strcmp(s->pool_uuid, sp) == 0 && s->pool_connected;
}

int st_spm_stop(struct storage_state *s, const char *sp, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	if (!pool_is(s, sp)) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_NO_POOL, "%s", sp ? sp : "");
	}
	for (struct st_map_ent *it = map_first(&s->tasks); it; it = map_next(&s->tasks, it)) {
		const struct st_task *t = map_val(it);
		if (t->state != ST_TS_FINISHED && t->kind != ST_TK_SPM_START) {
			pthread_mutex_unlock(&s->lock);
			return st_fail(e, RPC_E_SPM_TASKS, "task %s is not finished", t->id);
		}
	}
	pthread_mutex_unlock(&s->lock);
	int rc = st_spm_release(s);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot free the SPM lease");
	return 0;
}
