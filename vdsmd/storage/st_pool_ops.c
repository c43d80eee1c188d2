/* vdsmd/storage/st_pool_ops.c - StorageDomain.attach / detach and
 * StoragePool.destroy / refresh.  All of them change shared metadata, so
 * all but refresh need this host to be the pool's SPM; each writes the
 * domain metadata before memory follows. */
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caller holds the lock. */
static int pool_is(struct storage_state *s, const char *sp, struct st_err *e)
{
	if (!sp || !s->pool_connected || strcmp(s->pool_uuid, sp) != 0)
		return st_fail(e, RPC_E_NO_POOL, "%s", sp ? sp : "");
	if (!st_spm_valid(s))
		return st_fail(e, RPC_E_NOT_SPM, "host %d is not the SPM of pool %s",
			       s->pool_host_id, sp);
	return 0;
}

/* attach: the domain's own metadata first (POOL_UUID), then the pool's
 * map (Attached).  detach: the map first, then the domain.  So a crash in
 * between leaves "the domain names the pool, the map does not list it",
 * from which attach and detach both complete. */
int st_domain_attach(struct storage_state *s, const char *sd, const char *sp, bool attach,
		     struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, sd, e);
	int rc = d ? pool_is(s, sp, e) : -1;
	int st = rc == 0 ? st_pool_dom_status(s, sd) : ST_DS_NONE;
	bool named = rc == 0 && strcmp(d->pool, sp) == 0;
	if (rc == 0 && attach && d->pool[0] && !named)
		rc = st_fail(e, RPC_E_GENERAL, "domain %s is attached to pool %s", sd, d->pool);
	if (rc == 0 && attach && named && st != ST_DS_NONE)
		rc = 1;   /* already attached: nothing to write (VDSM: a warning) */
	if (rc == 0 && !attach && st == ST_DS_NONE && !named)
		rc = st_fail(e, RPC_E_NOT_IN_POOL, "domain=%s, pool=%s", sd, sp);
	if (rc == 0 && !attach && st != ST_DS_NONE && st != ST_DS_ATTACHED)
		rc = st_fail(e, RPC_E_DOM_STATE, "sdUUID=%s, expected state=Attached, actual "
			     "state=%s", sd, st_dom_status_name(st));
	if (rc == 0 && !attach && (d->master || strcmp(s->pool_master, sd) == 0))
		rc = st_fail(e, RPC_E_DETACH_MASTER, "%s is the master domain of pool %s", sd, sp);
	if (rc == 0)
		d->busy++;
	pthread_mutex_unlock(&s->lock);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (attach) {
		rc = named ? 0 : st_domain_set_pool(s, d, sp, false);
		if (rc == 0 && st == ST_DS_NONE)
			rc = st_pool_set_dom_status(s, sd, ST_DS_ATTACHED);
	} else {
		rc = st == ST_DS_NONE ? 0 : st_pool_set_dom_status(s, sd, ST_DS_NONE);
		if (rc == 0 && named)
			rc = st_domain_set_pool(s, d, "", false);
	}
	pthread_mutex_lock(&s->lock);
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "writing domain metadata");
	log_info("storage: domain %s %s pool %s", sd, attach ? "attached to" : "detached from", sp);
	return 0;
}

int st_domain_force_detach(struct storage_state *s, const char *sd, const char *sp,
			   struct st_err *e)
{
	bool blank = !sp || strcmp(sp, ST_BLANK_UUID) == 0;
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, sd, e);
	int rc = d ? 0 : -1;
	if (rc == 0 && !blank)
		rc = pool_is(s, sp, e);
	bool ours = rc == 0 && s->pool_connected && strcmp(s->pool_master, sd) == 0;
	if (rc == 0 && (ours || (!blank && d->master)))
		rc = st_fail(e, RPC_E_DETACH_MASTER, "%s is the master domain of pool %s", sd,
			     s->pool_uuid);
	bool member = rc == 0 && !blank && st_pool_dom_status(s, sd) != ST_DS_NONE;
	char *ddir = rc == 0 ? xstrdup(d->dir) : NULL;
	int host = s->pool_connected ? s->pool_host_id : 250;   /* VDSM's reserved id */
	/* the lease timing of the pool the domain was master of (kept in its
	 * metadata), else the connected pool's */
	unsigned renew = d && d->master ? d->lease_renew_ms : s->pool_connected ? s->lease_renew_ms : 0;
	unsigned ltime = d && d->master ? d->lease_time_ms : s->pool_connected ? s->lease_time_ms : 0;
	if (rc == 0)
		d->busy++;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return -1;
	if (!blank) {
		/* VDSM's forcedDetachSD: out of the pool's map, whatever its
		 * status; the domain's own metadata is left as it is */
		rc = member ? st_pool_set_dom_status(s, sd, ST_DS_NONE) : 0;
		if (rc < 0)
			st_fail_rc(e, RPC_E_GENERAL, rc, "writing the pool metadata");
	} else {
		/* VDSM's detach from "old pools" (the engine cleaning a domain
		 * that still names a pool): the domain's metadata only, under
		 * its own lease, so a domain that is the live master of some
		 * pool (its SPM renews that lease) is refused with 651 */
		const char *dirs[1] = { ddir };
		int64_t lver = -1;
		char err[256] = "";
		rc = st_lease_hold(s, dirs, 1, host, renew, ltime, &lver, err, sizeof(err));
		if (rc < 0)
			st_fail(e, rc == VD_EBUSY ? RPC_E_SPM_ACQUIRE : RPC_E_GENERAL, "id=%s, %s", sd, err);
		else if ((rc = st_domain_set_pool(s, d, "", false)) < 0)
			st_fail_rc(e, RPC_E_GENERAL, rc, "writing domain metadata");
		if (lver >= 0 && st_lease_drop(ddir, host, lver) < 0)
			log_warn("storage: forced detach: cannot free the lease of %s", sd);
	}
	pthread_mutex_lock(&s->lock);
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	free(ddir);
	if (rc < 0)
		return -1;
	log_info("storage: domain %s force-detached from %s", sd, blank ? "every pool" : sp);
	return 0;
}

int st_pool_destroy(struct storage_state *s, const char *sp, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	int rc = pool_is(s, sp, e);
	size_t n = 0;
	struct st_domain **doms = NULL;
	for (struct st_map_ent *it = map_first(&s->domains); rc == 0 && it;
	     it = map_next(&s->domains, it)) {
		struct st_domain *d = map_val(it);
		if (strcmp(d->pool, sp) != 0)
			continue;
		doms = xrealloc(doms, (n + 1) * sizeof(*doms));
		doms[n++] = d;
		d->busy++;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return -1;
	/* Regular members first, the master last: until its metadata is
	 * rewritten the pool can still be found (and destroyed again). */
	for (int pass = 0; pass < 2 && rc == 0; pass++)
		for (size_t i = 0; i < n && rc == 0; i++)
			if (doms[i]->master == (pass == 1))
				rc = st_domain_set_pool(s, doms[i], "", false);
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++)
		doms[i]->busy--;
	pthread_mutex_unlock(&s->lock);
	free(doms);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "detaching the pool's domains");
	st_spm_release(s);
	if ((rc = st_pool_forget(s)) < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "removing pool metadata");
	log_info("storage: pool %s destroyed", sp);
	return 0;
}

int st_pool_refresh(struct storage_state *s, const char *sp, const char *master,
		    int master_ver, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	int rc = 0;
	if (!sp || !s->pool_connected || strcmp(s->pool_uuid, sp) != 0)
		rc = st_fail(e, RPC_E_NO_POOL, "%s", sp ? sp : "");
	else if (master && strcmp(master, ST_BLANK_UUID) != 0 &&
		 (strcmp(master, s->pool_master) != 0 ||
		  (master_ver > 0 && master_ver != s->pool_master_ver)))
		rc = st_fail(e, RPC_E_WRONG_MASTER, "SD=%s, pool=%s", master, sp);
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return -1;
	st_pool_reload(s);     /* the domain map the SPM wrote */
	st_pool_adopt_members(s);
	st_monitor_once(s);    /* domain health and sizes */
	st_spm_observe(s);     /* who holds the lease */
	return 0;
}

int st_pool_reconstruct(struct storage_state *s, const char *sp, int host_id, const char *name,
			const char *master, int master_ver, const char *const *doms,
			const int *statuses, size_t ndoms, const struct st_lease_cfg *lease,
			struct st_err *e)
{
	if (host_id < 1 || host_id > 2000)
		return st_fail(e, RPC_E_PARAMS, "hostId: 1 to 2000");
	if (!st_is_uuid(sp) || !st_is_uuid(master))
		return st_fail(e, RPC_E_PARAMS, "storagepoolID/masterSdUUID: not a UUID");
	/* the listed domains, then every other domain that still says it is
	 * this pool's master (written as a plain member, left out of the map);
	 * their leases are watched: a live SPM on the old master refuses too */
	/* VDSM finds the domains on connected storage (sdCache.produce): a
	 * host that never loaded them (the SPM made them) loads them now */
	for (size_t i = 0; i < ndoms; i++) {
		struct st_err ae = { 0 };
		if (st_domain_adopt(s, doms[i], &ae) < 0) {
			if (strcmp(doms[i], master) == 0) {
				*e = ae;
				return -1;
			}
			/* VDSM produces only the new master: the others are
			 * listed in the map as given, found or not */
			log_warn("storage: reconstructMaster: %s", ae.msg);
		}
	}
	pthread_mutex_lock(&s->lock);
	size_t nknown = s->domains.n;
	pthread_mutex_unlock(&s->lock);
	const char **all = xcalloc(ndoms + nknown + 1, sizeof(*all));
	int *sts = xcalloc(ndoms + nknown + 1, sizeof(*sts));
	const char *ldirs[4] = { NULL };
	char *owned[4] = { NULL };
	size_t n = 0, nl = 1;
	for (size_t i = 0; i < ndoms; i++) {
		all[n] = doms[i];
		sts[n++] = statuses[i];
	}
	pthread_mutex_lock(&s->lock);
	int rc = 0;
	if (s->pool_connected && strcmp(s->pool_uuid, sp) == 0)
		rc = st_fail(e, RPC_E_POOL_CONNECTED, "%s is connected on this host", sp);
	const struct st_domain *nm = rc == 0 ? st_domain_get(s, master, e) : NULL;
	if (rc == 0 && !nm)
		rc = -1;
	if (rc == 0)
		ldirs[0] = owned[0] = xstrdup(nm->dir);
	for (struct st_map_ent *it = map_first(&s->domains); rc == 0 && it;
	     it = map_next(&s->domains, it)) {
		const struct st_domain *d = map_val(it);
		bool listed = false;
		for (size_t i = 0; i < ndoms; i++)
			listed |= strcmp(doms[i], d->uuid) == 0;
		bool old_master = d->master && strcmp(d->pool, sp) == 0 && !d->formatting;
		if (old_master && strcmp(d->uuid, master) != 0 && nl < 4) {
			ldirs[nl] = owned[nl] = xstrdup(d->dir);
			nl++;
		}
		if (!listed && old_master && n < ndoms + nknown)
			all[n++] = map_key(it);   /* sts[] stays ST_DS_NONE */
	}
	pthread_mutex_unlock(&s->lock);
	/* VDSM takes the cluster lock of the new master for the rebuild (the
	 * spmStart lease here), refusing with 651 while a live host holds it */
	int64_t lver = -1;
	char err[256] = "";
	if (rc == 0) {
		rc = st_lease_hold(s, ldirs, nl, host_id, lease ? lease->renew_ms : 0,
				   lease ? lease->lease_ms : 0, &lver, err, sizeof(err));
		if (rc < 0)
			rc = st_fail(e, rc == VD_EBUSY ? RPC_E_SPM_ACQUIRE : RPC_E_GENERAL,
				     "id=%s, %s", master, err);
	}
	if (rc == 0)
		rc = st_pool_setup(s, sp, name, master, master_ver, all, sts, n, lease, host_id, e);
	if (lver >= 0 && st_lease_drop(ldirs[0], host_id, lver) < 0)
		log_warn("storage: reconstructMaster: cannot free the lease of %s", ldirs[0]);
	free(all);
	free(sts);
	for (size_t i = 0; i < 4; i++)
		free(owned[i]);
	if (rc == 0)
		log_info("storage: pool %s reconstructed: master %s version %d, %zu domain(s), "
			 "host %d", sp, master, master_ver, ndoms, host_id);
	return rc;
}

/* StorageDomain.activate / deactivate (moved from st_pool_doms.c: an
 * operation over the domain map, SPM only). */
int st_domain_activate(struct storage_state *s, const char *sd, const char *sp, bool activate,
		       const char *new_master, struct st_err *e)
{
	if (!sp)
		return st_fail(e, RPC_E_NO_POOL, "no storage pool given");
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, sd, e);
	int rc = d ? 0 : -1, cur = ST_DS_NONE;
	if (rc == 0 && (!s->pool_connected || strcmp(s->pool_uuid, sp) != 0))
		rc = st_fail(e, RPC_E_NO_POOL, "%s", sp);
	if (rc == 0 && !st_spm_valid(s))
		rc = st_fail(e, RPC_E_NOT_SPM, "host %d is not the SPM of pool %s", s->pool_host_id,
			     sp);
	if (rc == 0 && (cur = st_pool_dom_status(s, sd)) == ST_DS_NONE)
		rc = st_fail(e, RPC_E_NOT_MEMBER, "pool=%s, domain=%s", sp, sd);
	if (rc == 0 && activate && strcmp(d->pool, sp) != 0)
		rc = st_fail(e, RPC_E_NOT_IN_POOL, "domain=%s, pool=%s", sd, sp);
	bool is_master = rc == 0 && strcmp(s->pool_master, sd) == 0;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return -1;
	int want = activate ? ST_DS_ACTIVE : ST_DS_ATTACHED;
	if (cur == want)
		return 0;   /* VDSM: already active (or attached) is success */
	if (!activate && is_master) {
		/* VDSM ignores deactivating the master without a new one; moving
		 * the master role (masterMigrate) is not implemented here. */
		if (!new_master || !*new_master || strcmp(new_master, ST_BLANK_UUID) == 0 ||
		    strcmp(new_master, sd) == 0) {
			log_info("storage: deactivating master domain %s ignored (as VDSM)", sd);
			return 0;
		}
		return st_fail(e, RPC_E_GENERAL, "moving the master role to %s on deactivate is not "
			       "supported (use StoragePool.reconstructMaster)", new_master);
	}
	rc = st_pool_set_dom_status(s, sd, want);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "writing the pool metadata");
	return 0;
}
