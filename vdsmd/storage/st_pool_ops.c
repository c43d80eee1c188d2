/* vdsmd/storage/st_pool_ops.c - StorageDomain.attach / detach and
 * StoragePool.destroy / refresh.  All of them change shared metadata, so
 * all but refresh need this host to be the pool's SPM; each writes the
 * domain metadata before memory follows. */
#include "st.h"
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
	if (s->spm_state != ST_SPM_SPM)
		return st_fail(e, RPC_E_NOT_SPM, "host %d is not the SPM of pool %s",
			       s->pool_host_id, sp);
	return 0;
}

int st_domain_attach(struct storage_state *s, const char *sd, const char *sp, bool attach,
		     struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, sd, e);
	int rc = d ? pool_is(s, sp, e) : -1;
	if (rc == 0 && attach && d->pool[0] && strcmp(d->pool, sp) != 0)
		rc = st_fail(e, RPC_E_GENERAL, "domain %s is attached to pool %s", sd, d->pool);
	if (rc == 0 && !attach && strcmp(d->pool, sp) != 0)
		rc = st_fail(e, RPC_E_NOT_IN_POOL, "domain=%s, pool=%s", sd, sp);
	if (rc == 0 && !attach && d->master)
		rc = st_fail(e, RPC_E_GENERAL, "%s is the master domain of pool %s", sd, sp);
	if (rc == 0 && attach && strcmp(d->pool, sp) == 0)
		rc = 1;   /* already attached: nothing to write */
	if (rc == 0)
		d->busy++;
	pthread_mutex_unlock(&s->lock);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	rc = st_domain_set_pool(s, d, attach ? sp : "");
	pthread_mutex_lock(&s->lock);
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return st_fail(e, RPC_E_GENERAL, "writing domain metadata: %s", strerror(-rc));
	log_info("storage: domain %s %s pool %s", sd, attach ? "attached to" : "detached from", sp);
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
				rc = st_domain_set_pool(s, doms[i], "");
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++)
		doms[i]->busy--;
	pthread_mutex_unlock(&s->lock);
	free(doms);
	if (rc < 0)
		return st_fail(e, RPC_E_GENERAL, "detaching the pool's domains: %s", strerror(-rc));
	st_spm_release(s);
	if ((rc = st_pool_forget(s)) < 0)
		return st_fail(e, RPC_E_GENERAL, "removing pool metadata: %s", strerror(-rc));
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
	st_monitor_once(s);    /* domain health and sizes */
	st_spm_observe(s);     /* who holds the lease */
	return 0;
}

int st_pool_reconstruct(struct storage_state *s, const char *sp, int host_id, const char *name,
			const char *master, int master_ver, const char *const *doms,
			size_t ndoms, const struct st_lease_cfg *lease, struct st_err *e)
{
	if (host_id < 1 || host_id > 2000)
		return st_fail(e, RPC_E_PARAMS, "hostId: 1 to 2000");
	if (!st_is_uuid(sp) || !st_is_uuid(master))
		return st_fail(e, RPC_E_PARAMS, "storagepoolID/masterSdUUID: not a UUID");
	/* the listed domains, then every other domain that still says it is
	 * this pool's master (written as a plain member) */
	const char **all = xcalloc(ndoms + s->domains.n + 1, sizeof(*all));
	size_t n = 0;
	for (size_t i = 0; i < ndoms; i++)
		all[n++] = doms[i];
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->domains); it; it = map_next(&s->domains, it)) {
		const struct st_domain *d = map_val(it);
		bool listed = false;
		for (size_t i = 0; i < ndoms; i++)
			listed |= strcmp(doms[i], d->uuid) == 0;
		if (!listed && d->master && strcmp(d->pool, sp) == 0 && n < ndoms + s->domains.n)
			all[n++] = map_key(it);
	}
	pthread_mutex_unlock(&s->lock);
	int rc = st_pool_setup(s, sp, name, master, master_ver, all, n, lease, host_id, e);
	free(all);
	if (rc == 0)
		log_info("storage: pool %s reconstructed: master %s version %d, %zu domain(s), "
			 "host %d", sp, master, master_ver, ndoms, host_id);
	return rc;
}
