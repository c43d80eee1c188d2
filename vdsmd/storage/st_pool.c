/* vdsmd/storage/st_pool.c - the storage pool: <storage_root>/pool.meta,
 * StoragePool.create (and reconstructMaster's setup), connect/disconnect,
 * forget.  Memory (s->pool_*) follows the disk. */
#include "st_crash.h"
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The pool as it is on disk; memory (s->pool_*) is changed only after a
 * pool_write() of the new state succeeded. */
struct pool_snap {
	char uuid[37], master[37];
	char *name;
	int master_ver, host_id;
	bool connected;
};

/* Caller holds s->lock. */
static void pool_snap_take(const struct storage_state *s, struct pool_snap *p)
{
	snprintf(p->uuid, sizeof(p->uuid), "%s", s->pool_uuid);
	snprintf(p->master, sizeof(p->master), "%s", s->pool_master);
	p->name = xstrdup(s->pool_name ? s->pool_name : "");
	p->master_ver = s->pool_master_ver;
	p->host_id = s->pool_host_id;
	p->connected = s->pool_connected;
}

/* Caller holds s->lock; p->name moves into s. */
static void pool_snap_apply(struct storage_state *s, struct pool_snap *p)
{
	snprintf(s->pool_uuid, sizeof(s->pool_uuid), "%s", p->uuid);
	snprintf(s->pool_master, sizeof(s->pool_master), "%s", p->master);
	free(s->pool_name);
	s->pool_name = p->name;
	p->name = NULL;
	s->pool_master_ver = p->master_ver;
	s->pool_host_id = p->host_id;
	s->pool_connected = p->connected;
}

/* Caller holds s->reg_lock (not s->lock). */
static int pool_write(struct storage_state *s, const struct pool_snap *p)
{
	struct st_kv kv;
	kv_init(&kv);
	kv_set(&kv, "POOL_UUID", p->uuid);
	kv_set(&kv, "NAME", p->name ? p->name : "");
	kv_set(&kv, "MASTER_SDUUID", p->master);
	kv_setf(&kv, "MASTER_VERSION", "%d", p->master_ver);
	kv_set(&kv, "CONNECTED", p->connected ? "1" : "0");
	kv_setf(&kv, "HOST_ID", "%d", p->host_id);
	char *path = st_path(s->root, "pool.meta");
	int rc = kv_write_file(&kv, path);
	free(path);
	kv_free(&kv);
	return rc;
}

void st_pool_load(struct storage_state *s)
{
	struct st_kv kv;
	char *path = st_path(s->root, "pool.meta");
	if (kv_read_file(&kv, path) == 0) {
		const char *u = kv_get(&kv, "POOL_UUID"), *m = kv_get(&kv, "MASTER_SDUUID");
		if (st_is_uuid(u)) {
			snprintf(s->pool_uuid, sizeof(s->pool_uuid), "%.36s", u);
			s->pool_name = xstrdup(kv_get(&kv, "NAME") ? kv_get(&kv, "NAME") : "");
			snprintf(s->pool_master, sizeof(s->pool_master), "%.36s", st_is_uuid(m) ? m : "");
			s->pool_master_ver = (int)kv_get_int(&kv, "MASTER_VERSION", 0);
			s->pool_connected = kv_get_int(&kv, "CONNECTED", 0) == 1;
			s->pool_host_id = (int)kv_get_int(&kv, "HOST_ID", 1);
		}
		kv_free(&kv);
	}
	free(path);
}

int st_pool_create(struct storage_state *s, const char *sp, const char *name, const char *master,
		   int master_ver, const char *const *doms, size_t ndoms,
		   const struct st_lease_cfg *lease, struct st_err *e)
{
	return st_pool_setup(s, sp, name, master, master_ver, doms, NULL, ndoms, lease, 0, e);
}

/* st_pool_setup's checks (caller holds both locks): no other pool here, a
 * reconstruct not of a pool connected here, every listed domain known (a
 * reconstruct's members not loaded here excepted) and the master listed. */
static int setup_check(struct storage_state *s, const char *sp, const char *master,
		       const char *const *doms, size_t ndoms, int reconstruct_host,
		       struct st_err *e)
{
	bool master_listed = false;
	if (s->pool_uuid[0] && strcmp(s->pool_uuid, sp) != 0) {
		st_fail(e, RPC_E_GENERAL, "this host already has storage pool %s", s->pool_uuid);
		return -1;
	}
	if (reconstruct_host && s->pool_connected && strcmp(s->pool_uuid, sp) == 0) {
		st_fail(e, RPC_E_POOL_CONNECTED, "%s is connected on this host", sp);
		return -1;
	}
	for (size_t i = 0; i < ndoms; i++) {
		bool is_master = strcmp(doms[i], master) == 0;
		/* reconstruct: a member not found here goes into the map only */
		if (reconstruct_host && !is_master && st_is_uuid(doms[i]) &&
		    !map_get(&s->domains, doms[i])) {
			continue;
		}
		const struct st_domain *d = st_domain_get(s, doms[i], e);
		if (!d)
			return -1;
		if (reconstruct_host && d->pool[0] && strcmp(d->pool, sp) != 0) {
			st_fail(e, RPC_E_GENERAL, "domain %s is attached to pool %s", d->uuid, d->pool);
			return -1;
		}
		if (strcmp(doms[i], master) == 0)
			master_listed = true;
	}
	if (!master_listed) {
		st_fail(e, RPC_E_PARAMS, "masterSdUUID: not in domainList");
		return -1;
	}
	return 0;
}

/* POOL_DOMAINS: as given (reconstructMaster's domDict), else VDSM's create:
 * the master Active, every other domain Attached. */
static char *setup_dommap(const char *master, const char *const *doms, const int *statuses,
			  size_t ndoms)
{
	char *dommap = xstrdup("");
	for (size_t i = 0; i < ndoms; i++) {
		int st = statuses ? statuses[i] : strcmp(doms[i], master) == 0 ? ST_DS_ACTIVE
									   : ST_DS_ATTACHED;
		char *m2 = st ? st_dommap_put(dommap, doms[i], st) : dommap;
		if (m2 != dommap)
			free(dommap);
		dommap = m2;
	}
	return dommap;
}

/* Memory after the disk (caller holds s->lock): every written domain in
 * pool sp, the master with the pool's fields of pmd, the lease timing. */
static void setup_apply(struct storage_state *s, const char *sp, const char *master,
			const char *const *doms, struct st_domain **list, const bool *skipped,
			size_t ndoms, const struct st_domain *pmd)
{
	for (size_t i = 0; i < ndoms; i++) {
		if (skipped[i] || !list[i])   /* (a list entry is NULL only when skipped) */
			continue;
		snprintf(list[i]->pool, sizeof(list[i]->pool), "%.36s", sp);
		list[i]->master = strcmp(doms[i], master) == 0;
		if (list[i]->master) {
			list[i]->master_ver = pmd->master_ver;
			free(list[i]->pool_desc);
			list[i]->pool_desc = xstrdup(pmd->pool_desc);
			free(list[i]->pool_doms);
			list[i]->pool_doms = xstrdup(pmd->pool_doms);
			list[i]->lease_renew_ms = pmd->lease_renew_ms;
			list[i]->lease_time_ms = pmd->lease_time_ms;
			list[i]->lease_io_ms = pmd->lease_io_ms;
			list[i]->lease_retries = pmd->lease_retries;
		}
	}
	s->lease_renew_ms = pmd->lease_renew_ms;
	s->lease_time_ms = pmd->lease_time_ms;
	s->lease_io_ms = pmd->lease_io_ms;
	s->lease_retries = pmd->lease_retries;
}

int st_pool_setup(struct storage_state *s, const char *sp, const char *name, const char *master,
		  int master_ver, const char *const *doms, const int *statuses, size_t ndoms,
		  const struct st_lease_cfg *lease, int reconstruct_host, struct st_err *e)
{
	unsigned renew = lease && lease->renew_ms ? lease->renew_ms : 5000;
	unsigned ltime = lease && lease->lease_ms ? lease->lease_ms : 60000;
	unsigned io_ms = lease && lease->io_timeout_ms ? lease->io_timeout_ms : 10000;
	unsigned retries = lease && lease->retries ? lease->retries : 3;
	if (ltime < 2 * renew)
		return st_fail(e, RPC_E_PARAMS, "leaseTimeSec must be at least twice "
			       "lockRenewalIntervalSec");
	if (!st_is_uuid(sp) || !st_is_uuid(master))
		return st_fail(e, RPC_E_PARAMS, "storagepoolID/masterSdUUID: not a UUID");
	pthread_mutex_lock(&s->reg_lock);
	pthread_mutex_lock(&s->lock);
	if (setup_check(s, sp, master, doms, ndoms, reconstruct_host, e) < 0)
		goto fail;
	struct st_domain **list = xcalloc(ndoms, sizeof(*list));
	char (*old_pool)[37] = xcalloc(ndoms, sizeof(*old_pool));
	bool *old_master = xcalloc(ndoms, sizeof(*old_master));
	bool *skipped = xcalloc(ndoms ? ndoms : 1, sizeof(*skipped));
	for (size_t i = 0; i < ndoms; i++) {
		list[i] = map_get(&s->domains, doms[i]);
		if (!list[i] || list[i]->formatting) {   /* only possible for reconstruct */
			list[i] = NULL;
			skipped[i] = true;
			continue;
		}
		snprintf(old_pool[i], 37, "%s", list[i]->pool);
		old_master[i] = list[i]->master;
		list[i]->busy++;
	}
	struct pool_snap old, nw;
	pool_snap_take(s, &old);
	pool_snap_take(s, &nw);
	pthread_mutex_unlock(&s->lock);
	snprintf(nw.uuid, sizeof(nw.uuid), "%.36s", sp);
	free(nw.name);
	nw.name = st_clean_text(name, ST_NAME_MAX);
	snprintf(nw.master, sizeof(nw.master), "%.36s", master);
	nw.master_ver = master_ver;
	nw.connected = !reconstruct_host;   /* reconstruct: the engine connects next */
	if (reconstruct_host)
		nw.host_id = reconstruct_host;
	if (nw.host_id <= 0)
		nw.host_id = 1;

	char *dommap = setup_dommap(master, doms, statuses, ndoms);
	struct st_domain pmd = { .master_ver = master_ver, .pool_desc = nw.name, .pool_doms = dommap,
				 .lease_renew_ms = renew, .lease_time_ms = ltime,
				 .lease_io_ms = io_ms, .lease_retries = retries };
	/* Domains first, then pool.meta; any failure puts back what was
	 * written, and memory changes only when everything is on disk. */
	/* (pool.intent first: a kill -9 half-way is undone at the next start,
	 * st_poolrec.c) */
	int rc = st_pool_intent_write(s, sp, doms, (const char (*)[37])old_pool, old_master,
				      skipped, ndoms);
	size_t done = 0, unrestored = 0;
	if (rc == 0)
		ST_CRASH("pool.intent");
	for (; rc == 0 && done < ndoms; done++) {
		bool is_master = strcmp(doms[done], master) == 0;
		if (skipped[done] || !list[done])
			continue;
		if ((rc = st_domain_write_meta_as(s, list[done], sp, is_master, &pmd)) < 0 &&
		    reconstruct_host && !is_master) {
			/* reconstruct: a member that cannot be written (often the
			 * old master, whose storage is why the engine rebuilds)
			 * keeps its metadata; the new master's map is what counts */
			log_warn("storage: reconstructMaster: domain %s not updated: %s",
				 list[done]->uuid, st_rc_text(rc));
			skipped[done] = true;
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		ST_CRASH("pool.domain-one");
	}
	if (rc == 0) {
		ST_CRASH("pool.domains");
		rc = pool_write(s, &nw);
	}
	if (rc == 0)
		ST_CRASH("pool.meta");
	if (rc < 0) {
		for (size_t i = 0; i < done; i++)
			if (!skipped[i] && list[i] &&
			    st_domain_write_meta_as(s, list[i], old_pool[i], old_master[i], list[i]) < 0) {
				log_error("storage: pool create: cannot restore domain %s metadata",
					  list[i]->uuid);
				unrestored++;
			}
	}
	if (!unrestored)
		st_pool_intent_clear(s);
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		setup_apply(s, sp, master, doms, list, skipped, ndoms, &pmd);
		pool_snap_apply(s, &nw);
	}
	for (size_t i = 0; i < ndoms; i++)
		if (list[i])
			list[i]->busy--;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->reg_lock);
	free(old.name);
	free(nw.name);
	free(dommap);
	free(skipped);
	free(list);
	free(old_pool);
	free(old_master);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot write pool metadata");
	return 0;
fail:
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->reg_lock);
	return -1;
}

/* StoragePool.connect to a pool this host does not know yet (another host
 * created it): find its master domain on connected storage, check it
 * names this pool, register it and take the pool from its metadata. */
static int pool_adopt(struct storage_state *s, const char *sp, const char *master,
		      int master_ver, int host_id, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_domain *known = map_get(&s->domains, master);
	bool busy = s->pool_uuid[0] != '\0';
	pthread_mutex_unlock(&s->lock);
	if (busy)
		return st_fail(e, RPC_E_NO_POOL, "%s (this host is in pool %s)", sp, s->pool_uuid);
	struct st_domain *d = known ? NULL : st_conn_find_domain(s, master);
	if (!known && !d)
		return st_fail(e, RPC_E_NO_POOL, "%s: master domain %s not found on connected storage",
			       sp, master);
	pthread_mutex_lock(&s->lock);
	const struct st_domain *m = known ? known : d;
	bool ok = strcmp(m->pool, sp) == 0 && m->master &&
		  (master_ver <= 0 || m->master_ver == master_ver);
	struct pool_snap nw = { .master_ver = m->master_ver, .host_id = host_id };
	snprintf(nw.uuid, sizeof(nw.uuid), "%s", sp);
	snprintf(nw.master, sizeof(nw.master), "%s", master);
	nw.name = xstrdup(m->pool_desc ? m->pool_desc : "");
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		dom_free(d);
		free(nw.name);
		return st_fail(e, RPC_E_WRONG_MASTER, "SD=%s, pool=%s", master, sp);
	}
	int rc = 0;
	if (d) {
		st_scan_domain(s, d);   /* not yet visible: no lock needed */
		pthread_mutex_lock(&s->lock);
		if (!map_get(&s->domains, master)) {
			map_put(&s->domains, d->uuid, d);
			d = NULL;
		}
		pthread_mutex_unlock(&s->lock);
		dom_free(d);
		rc = st_registry_save(s);
	}
	pthread_mutex_lock(&s->reg_lock);
	if (rc == 0)
		rc = pool_write(s, &nw);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		pool_snap_apply(s, &nw);
		st_pool_lease_from_master(s);
		pthread_mutex_unlock(&s->lock);
		log_info("storage: joined pool %s (master domain %s)", sp, master);
	}
	pthread_mutex_unlock(&s->reg_lock);
	free(nw.name);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot record pool %s", sp);
	return 0;
}

int st_pool_connect(struct storage_state *s, const char *sp, bool connect, int host_id,
		    const char *master, int master_ver, struct st_err *e)
{
	if (host_id < 1 || host_id > 2000)
		return st_fail(e, RPC_E_PARAMS, "hostID: must be 1..2000, got %d", host_id);
	pthread_mutex_lock(&s->lock);
	bool unknown = !s->pool_uuid[0] || !sp || strcmp(s->pool_uuid, sp) != 0;
	pthread_mutex_unlock(&s->lock);
	if (unknown && connect && sp && master && st_is_uuid(master) &&
	    strcmp(master, ST_BLANK_UUID) != 0 && pool_adopt(s, sp, master, master_ver, host_id, e) < 0)
		return -1;
	pthread_mutex_lock(&s->reg_lock);
	pthread_mutex_lock(&s->lock);
	int rc = 0;
	if (!s->pool_uuid[0] || !sp || strcmp(s->pool_uuid, sp) != 0) {
		st_fail(e, RPC_E_NO_POOL, "%s", sp ? sp : "");
		rc = -1;
	} else if (connect && master && *master && strcmp(master, ST_BLANK_UUID) != 0 &&
		   (strcmp(master, s->pool_master) != 0 ||
		    (master_ver > 0 && master_ver != s->pool_master_ver))) {
		st_fail(e, RPC_E_WRONG_MASTER, "SD=%s (version %d), pool=%s has master %s (version %d)",
			master, master_ver, sp, s->pool_master, s->pool_master_ver);
		rc = -1;
	}
	if (rc < 0) {
		pthread_mutex_unlock(&s->lock);
		pthread_mutex_unlock(&s->reg_lock);
		return -1;
	}
	struct pool_snap nw;
	pool_snap_take(s, &nw);
	pthread_mutex_unlock(&s->lock);
	nw.connected = connect;
	if (connect)
		nw.host_id = host_id;
	rc = pool_write(s, &nw);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		pool_snap_apply(s, &nw);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&s->reg_lock);
	free(nw.name);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot write pool metadata");
	if (connect) {
		st_pool_reload(s);   /* the domain map as the SPM last wrote it */
		st_pool_adopt_members(s);
		st_spm_observe(s);   /* who holds the lease, for getSpmStatus */
	}
	return 0;
}


int st_pool_forget(struct storage_state *s)
{
	struct pool_snap none = { .name = NULL };
	pthread_mutex_lock(&s->reg_lock);
	int rc = pool_write(s, &none);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		pool_snap_apply(s, &none);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&s->reg_lock);
	return rc;
}
