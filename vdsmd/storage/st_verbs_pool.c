/* vdsmd/storage/st_verbs_pool.c - the single-host StoragePool.* verbs but
 * the storage server connections (st_verbs_conn.c).  Pool changes are
 * RPC_F_BLOCKING; getInfo / getSpmStatus read memory (and the lease). */
#include "st_verbs.h"
#include "../../common/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vh_sp_create(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const struct vd_value *list = rpc_arg(c, "domainList");
	size_t n = list->v.arr.n;
	if (n == 0 || n > 256)
		return rpc_fail(c, RPC_E_PARAMS, "domainList: 1 to 256 domain UUIDs expected");
	const char **doms = arena_alloc(c->arena, n * sizeof(*doms));
	for (size_t i = 0; i < n; i++) {
		const struct vd_value *it = &list->v.arr.items[i];
		if (it->type != VD_STRING || !vd_is_uuid(it->v.s.ptr, it->v.s.len))
			return rpc_fail(c, RPC_E_PARAMS, "domainList[%zu]: not a UUID", i);
		doms[i] = arena_strndup(c->arena, it->v.s.ptr, it->v.s.len);
	}
	int64_t renew = rpc_arg_int(c, "lockRenewalIntervalSec", 0);
	int64_t ltime = rpc_arg_int(c, "leaseTimeSec", 0);
	if (renew < 0 || renew > 3600 || ltime < 0 || ltime > 7200)
		return rpc_fail(c, RPC_E_PARAMS, "lockRenewalIntervalSec/leaseTimeSec out of range");
	int64_t io = rpc_arg_int(c, "ioOpTimeoutSec", 0), retries = rpc_arg_int(c, "leaseRetries", 0);
	if (io < 0 || io > 3600 || retries < 0 || retries > 1000)
		return rpc_fail(c, RPC_E_PARAMS, "ioOpTimeoutSec/leaseRetries out of range");
	struct st_lease_cfg lease = { (unsigned)renew * 1000, (unsigned)ltime * 1000,
				      (unsigned)io * 1000, (unsigned)retries };
	struct st_err e = { 0 };
	if (st_pool_create(s, rpc_arg_str(c, "storagepoolID", NULL), rpc_arg_str(c, "name", NULL),
			   rpc_arg_str(c, "masterSdUUID", NULL),
			   (int)rpc_arg_int(c, "masterVersion", 0), doms, n, &lease, &e) < 0)
		return verb_fail(c, &e);
	return 0;
}

/* StoragePool.reconstructMaster: domainDict maps each member to a status
 * (Active, Attached, ...); every listed domain becomes a member. */
int vh_sp_reconstruct_master(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const struct vd_value *dict = rpc_arg(c, "domainDict");
	size_t n = dict && dict->type == VD_OBJECT ? dict->v.obj.n : 0;
	if (n == 0 || n > 256)
		return rpc_fail(c, RPC_E_PARAMS, "domainDict: 1 to 256 domains expected");
	const char **doms = arena_alloc(c->arena, n * sizeof(*doms));
	int *sts = arena_alloc(c->arena, n * sizeof(*sts));
	for (size_t i = 0; i < n; i++) {
		const struct vd_member *m = &dict->v.obj.members[i];
		if (!vd_is_uuid(m->key, m->klen) || m->val.type != VD_STRING)
			return rpc_fail(c, RPC_E_PARAMS, "domainDict: sdUUID -> status expected");
		doms[i] = arena_strndup(c->arena, m->key, m->klen);
		const char *st = arena_strndup(c->arena, m->val.v.s.ptr,
					       m->val.v.s.len > 32 ? 32 : m->val.v.s.len);
		/* VDSM's validateSDStatus: Unknown, Attached, Unattached, Active
		 * (any case), the deprecated Inactive as Attached; else 376 */
		if (!(sts[i] = st_dom_status_parse(st)))
			return rpc_fail(c, RPC_E_DOM_STATUS, "%s: %s", doms[i], st);
	}
	int64_t renew = rpc_arg_int(c, "lockRenewalIntervalSec", 0);
	int64_t ltime = rpc_arg_int(c, "leaseTimeSec", 0);
	int64_t io = rpc_arg_int(c, "ioOpTimeoutSec", 0), retries = rpc_arg_int(c, "leaseRetries", 0);
	if (renew < 0 || renew > 3600 || ltime < 0 || ltime > 7200 || io < 0 || io > 3600 ||
	    retries < 0 || retries > 1000)
		return rpc_fail(c, RPC_E_PARAMS, "lease parameters out of range");
	int64_t host = rpc_arg_int(c, "hostId", 0), mver = rpc_arg_int(c, "masterVersion", -1);
	if (mver < 0 || mver > INT32_MAX)
		return rpc_fail(c, RPC_E_PARAMS, "masterVersion: 0 or more");
	struct st_lease_cfg lease = { (unsigned)renew * 1000, (unsigned)ltime * 1000,
				      (unsigned)io * 1000, (unsigned)retries };
	struct st_err e = { 0 };
	if (st_pool_reconstruct(s, rpc_arg_str(c, "storagepoolID", NULL),
				host < 1 || host > 2000 ? 0 : (int)host, rpc_arg_str(c, "name", NULL),
				rpc_arg_str(c, "masterSdUUID", NULL), (int)mver, doms, sts, n,
				&lease, &e) < 0)
		return verb_fail(c, &e);
	vw_bool(c->w, true);
	return 0;
}

int vh_sp_connect(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	int64_t host = rpc_arg_int(c, "hostID", 1);
	int64_t mver = rpc_arg_int(c, "masterVersion", 0);
	struct st_err e = { 0 };
	if (st_pool_connect(s, rpc_arg_str(c, "storagepoolID", NULL), true,
			    host < 0 || host > 100000 ? 0 : (int)host,
			    rpc_arg_str(c, "masterSdUUID", NULL),
			    mver < 0 || mver > INT32_MAX ? -1 : (int)mver, &e) < 0)
		return verb_fail(c, &e);
	return 0;
}

int vh_sp_spm_start(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const char *sp = rpc_arg_str(c, "storagepoolID", NULL);
	int64_t max_host = rpc_arg_int(c, "maxHostID", 2000);
	/* absent: the master's own version (the schema hands "3" over as 3) */
	const bool dv_given = rpc_arg(c, "domVersion") != NULL;
	int64_t dom_version = rpc_arg_int(c, "domVersion", -1);
	if (dv_given && (dom_version < 0 || dom_version > 5))
		return rpc_fail(c, RPC_E_DOM_VERSION, "domVersion: not a supported version (0-5)");
	if (max_host < 1 || max_host > 2000)
		return rpc_fail(c, RPC_E_PARAMS, "maxHostID: 1 to 2000");
	pthread_mutex_lock(&s->lock);
	const struct st_domain *m = s->pool_connected && strcmp(s->pool_uuid, sp) == 0
				    ? map_get(&s->domains, s->pool_master) : NULL;
	int mver = m ? m->version : -1, me = s->pool_host_id, holder = s->spm_holder;
	int64_t lver = s->spm_lver;
	char mid[37];
	snprintf(mid, sizeof(mid), "%s", s->pool_master);
	pthread_mutex_unlock(&s->lock);
	/* VDSM: a master domain newer than the engine's domVersion refuses */
	if (m && dom_version >= 0 && mver > dom_version)
		return rpc_fail(c, RPC_E_VERSION_ADVANCED, "%s: expected %lld, found %d",
				mid, (long long)dom_version, mver);
	if (m && me > max_host)
		return rpc_fail(c, RPC_E_PARAMS, "maxHostID %lld: this host's id is %d",
				(long long)max_host, me);
	/* prevID / prevLver: what the engine last saw; VDSM logs a difference */
	const char *plv = rpc_arg_str(c, "prevLver", NULL);
	int64_t prev = rpc_arg_int(c, "prevID", -1);
	if (m && (prev != holder || (plv && strtoll(plv, NULL, 10) != lver)))
		log_info("storage: spmStart: the engine expected SPM %lld version %s, the lease "
			 "says %d version %lld", (long long)prev, plv ? plv : "?", holder,
			 (long long)lver);
	struct st_err e = { 0 };
	char tid[37];
	if (st_spm_start(s, sp, tid, &e) < 0)
		return verb_fail(c, &e);
	vw_strz(c->w, tid);
	return 0;
}

int vh_sp_spm_stop(struct rpc_call *c)
{
	return verb_by_id(c, "storagepoolID", st_spm_stop);
}

int vh_sp_disconnect(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	if (rpc_arg_bool(c, "remove", false))
		return rpc_fail(c, RPC_E_PARAMS, "remove: not supported (use StoragePool.destroy)");
	int64_t host = rpc_arg_int(c, "hostID", 1);
	struct st_err e = { 0 };
	pthread_mutex_lock(&s->lock);
	bool ours = s->pool_connected && s->pool_uuid[0] &&
		    strcmp(s->pool_uuid, rpc_arg_str(c, "storagepoolID", NULL)) == 0;
	pthread_mutex_unlock(&s->lock);
	if (ours)
		st_spm_release(s);   /* a disconnecting SPM frees its lease */
	if (st_pool_connect(s, rpc_arg_str(c, "storagepoolID", NULL), false,
			    host < 1 || host > 2000 ? 0 : (int)host, NULL, 0, &e) < 0)
		return verb_fail(c, &e);
	return 0;
}

/* Caller holds the lock. */
static bool pool_known(struct storage_state *s, struct rpc_call *c)
{
	const char *sp = rpc_arg_str(c, "storagepoolID", NULL);
	if (!s->pool_uuid[0] || strcmp(s->pool_uuid, sp) != 0 || !s->pool_connected) {
		rpc_fail(c, RPC_E_NO_POOL, "%s", sp);
		return false;
	}
	return true;
}

int vh_sp_get_info(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct vd_writer *w = c->w;
	pthread_mutex_lock(&s->lock);
	if (!pool_known(s, c)) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	const struct st_domain *master = map_get(&s->domains, s->pool_master);
	/* the pool's domain map (POOL_DOMAINS), as VDSM reports it */
	const char *map = st_pool_dommap(s);
	vw_begin_object(w);
	vw_keyz(w, "info");
	vw_begin_object(w);
	vw_kint(w, "spm_id", s->spm_holder);
	vw_kstr(w, "master_uuid", s->pool_master);
	vw_kstr(w, "name", s->pool_name ? s->pool_name : "");
	vw_kstrf(w, "version", "%d", master ? master->version : 5);
	vw_kstr(w, "domains", map);
	vw_kstr(w, "pool_status", "connected");
	vw_kstr(w, "isoprefix", "");
	vw_kstr(w, "type", master ? st_domtype_name(master->type) : "LOCALFS");
	vw_kint(w, "master_ver", master ? master->master_ver : s->pool_master_ver);
	vw_kint(w, "lver", s->spm_lver);
	vw_end_object(w);
	vw_keyz(w, "dominfo");
	vw_begin_object(w);
	for (const char *p = map; *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char sd[37];
		if (len > 37 && p[36] == ':') {
			memcpy(sd, p, 36);
			sd[36] = '\0';
			int st = st_dommap_get(map, sd);
			const struct st_domain *d = map_get(&s->domains, sd);
			vw_keyz(w, sd);
			vw_begin_object(w);
			vw_kstr(w, "status", st_dom_status_name(st));
			vw_keyz(w, "alerts");
			vw_begin_array(w);
			vw_end_array(w);
			vw_kstr(w, "isoprefix", "");
			/* VDSM: version and sizes for Active domains only */
			if (st == ST_DS_ACTIVE && d && !d->formatting) {
				vw_kint(w, "version", d->version);
				vw_kstrf(w, "disktotal", "%lld", (long long)d->disktotal);
				vw_kstrf(w, "diskfree", "%lld", (long long)d->diskfree);
			}
			vw_end_object(w);
		}
		p = end ? end + 1 : p + len;
	}
	vw_end_object(w);
	vw_end_object(w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_sp_get_spm_status(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	pthread_mutex_lock(&s->lock);
	bool ok = pool_known(s, c);
	int state = s->spm_state, holder = s->spm_holder;
	int64_t lver = s->spm_lver;
	pthread_mutex_unlock(&s->lock);
	if (!ok)
		return -1;
	/* This host when it holds the lease (its renewer keeps the figures);
	 * otherwise the lease as it is on the master domain now, as VDSM reads
	 * its cluster lock for every call: the holder's hostID and version,
	 * or -1 and the last version when it is free (hsm.py getSpmStatus). */
	if (state != ST_SPM_SPM) {
		int rc = st_spm_inspect(s, &holder, &lver);
		if (rc < 0)
			return rpc_fail(c, RPC_E_MASTER_ERR, "reading the SPM lease of pool %s: %s",
					rpc_arg_str(c, "storagepoolID", NULL), st_rc_text(rc));
	}
	vw_begin_object(c->w);
	vw_kstr(c->w, "spmStatus", state == ST_SPM_SPM ? "SPM" : state == ST_SPM_CONTEND ? "Contend"
									      : "Free");
	vw_kint(c->w, "spmLver", lver);
	vw_kint(c->w, "spmId", holder);
	vw_end_object(c->w);
	return 0;
}

int vh_sp_destroy(struct rpc_call *c)
{
	return verb_by_id(c, "storagepoolID", st_pool_destroy);
}

int vh_sp_refresh(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	int64_t ver = rpc_arg_int(c, "masterVersion", 0);
	struct st_err e = { 0 };
	if (st_pool_refresh(s, rpc_arg_str(c, "storagepoolID", NULL),
			    rpc_arg_str(c, "masterSdUUID", NULL),
			    ver < 0 || ver > INT32_MAX ? -1 : (int)ver, &e) < 0)
		return verb_fail(c, &e);
	vw_bool(c->w, true);
	return 0;
}
