/* vdsmd/storage/st_verbs_domain.c - Host.getStorageDomains, StorageDomain.*
 * and the single-host StoragePool.* verbs.  Reads come from the index under
 * the lock (memory only); create/format/pool changes are RPC_F_BLOCKING. */
#include "st_verbs.h"
#include "../vdsmd.h"
#include "../../common/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct storage_state *verb_state(struct rpc_call *c)
{
	struct vdsmd *d = c->app;
	if (!d || !d->storage) {
		rpc_fail(c, RPC_E_GENERAL, "storage is not available (see the log for storage_root)");
		return NULL;
	}
	return d->storage;
}

int verb_fail(struct rpc_call *c, const struct st_err *e)
{
	return rpc_fail(c, e->code ? e->code : RPC_E_GENERAL, "%s", e->msg);
}

int verb_by_id(struct rpc_call *c, const char *arg,
	       int (*op)(struct storage_state *s, const char *id, struct st_err *e))
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (op(s, rpc_arg_str(c, arg, NULL), &e) < 0)
		return verb_fail(c, &e);
	return 0;
}

const struct st_domain *verb_lock_domain(struct rpc_call *c, struct storage_state **sp)
{
	struct storage_state *s = *sp = verb_state(c);
	if (!s)
		return NULL;
	struct st_err e = { 0 };
	pthread_mutex_lock(&s->lock);
	const struct st_domain *d = st_domain_get(s, rpc_arg_str(c, "storagedomainID", NULL), &e);
	if (!d) {
		pthread_mutex_unlock(&s->lock);
		verb_fail(c, &e);
	}
	return d;
}

/* An int, a string of digits, or (names) via parse: 0 when unusable. */
static int enum_arg(const struct vd_value *v, int (*parse)(const char *))
{
	if (!v)
		return 0;
	if (v->type == VD_INT)
		return v->v.i > 0 && v->v.i < 100 ? (int)v->v.i : -1;
	if (v->type != VD_STRING || v->v.s.len == 0 || v->v.s.len > 16)
		return -1;
	char tmp[17];
	memcpy(tmp, v->v.s.ptr, v->v.s.len);
	tmp[v->v.s.len] = '\0';
	if (tmp[0] >= '0' && tmp[0] <= '9') {
		char *end;
		long x = strtol(tmp, &end, 10);
		return *end || x <= 0 || x >= 100 ? -1 : (int)x;
	}
	return parse ? (parse(tmp) ? parse(tmp) : -1) : -1;
}

static int domtype_from_name(const char *s)
{
	if (strcmp(s, "NFS") == 0)
		return ST_DT_NFS;
	if (strcmp(s, "LOCALFS") == 0)
		return ST_DT_LOCALFS;
	if (strcmp(s, "POSIXFS") == 0)
		return ST_DT_POSIXFS;
	return 0;
}

/* Absent, null or "" : "no filter", as VDSM reads these params. */
static bool is_null(const struct vd_value *v)
{
	return !v || v->type == VD_NULL || (v->type == VD_STRING && v->v.s.len == 0);
}

/* The engine sends "" for "any" (storageType, remotePath). */
static bool is_any(const struct vd_value *v)
{
	return is_null(v) || (v->type == VD_STRING && v->v.s.len == 0);
}

int vh_host_get_storage_domains(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const struct vd_value *sp = rpc_arg(c, "storagepoolID");
	const struct vd_value *cls = rpc_arg(c, "domainClass");
	const struct vd_value *typ = rpc_arg(c, "storageType");
	const struct vd_value *rp = rpc_arg(c, "remotePath");
	char spid[37] = "";
	if (!is_null(sp)) {
		if (sp->type != VD_STRING || !vd_is_uuid(sp->v.s.ptr, sp->v.s.len))
			return rpc_fail(c, RPC_E_PARAMS, "storagepoolID: not a UUID");
		memcpy(spid, sp->v.s.ptr, 36);
		if (strcmp(spid, ST_BLANK_UUID) == 0)
			spid[0] = '\0';
	}
	int want_class = is_any(cls) ? 0 : enum_arg(cls, st_domclass_parse);
	int want_type = is_any(typ) ? 0 : enum_arg(typ, domtype_from_name);
	if (want_class < 0)
		return rpc_fail(c, RPC_E_PARAMS, "domainClass: unknown class");
	if (want_type < 0)
		return rpc_fail(c, RPC_E_PARAMS, "storageType: unknown type");
	if (!is_null(rp) && rp->type != VD_STRING)
		return rpc_fail(c, RPC_E_PARAMS, "remotePath: not a string");
	/* domains another host made on storage connected here (VDSM's
	 * sdCache.refreshStorage) */
	st_conn_discover(s);
	/* remotePath as VDSM compares it: both sides normalized (host:/a//b/
	 * is host:/a/b) */
	char *want_rp = NULL;
	if (!is_null(rp)) {
		char *raw = arena_strndup(c->arena, rp->v.s.ptr, rp->v.s.len);
		want_rp = st_conn_normalize(raw);
		if (!want_rp)
			want_rp = xstrdup(raw);
	}
	vw_begin_array(c->w);
	pthread_mutex_lock(&s->lock);
	/* our connected pool: its members are the pool's map (VDSM's
	 * pool.getDomains()), including domains this host has not loaded */
	const char *map = spid[0] && s->pool_connected && strcmp(s->pool_uuid, spid) == 0
			  ? st_pool_dommap(s) : NULL;
	for (const char *p = map; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char sd[37];
		snprintf(sd, sizeof(sd), "%.*s", (int)(len < 36 ? len : 36), p);
		p = end ? end + 1 : p + len;
		if (!st_is_uuid(sd) || map_get(&s->domains, sd))
			continue;   /* known ones are filtered below */
		if (!want_class && !want_type && !want_rp)
			vw_strz(c->w, sd);
	}
	for (struct st_map_ent *e = map_first(&s->domains); e; e = map_next(&s->domains, e)) {
		const struct st_domain *d = map_val(e);
		if (d->formatting || (want_class && d->dclass != want_class) ||
		    (want_type && d->type != want_type))
			continue;
		if (map ? st_dommap_get(map, d->uuid) == ST_DS_NONE
			: spid[0] && strcmp(d->pool, spid) != 0)
			continue;
		if (want_rp) {
			char *have = st_conn_normalize(d->remote);
			bool same = strcmp(have ? have : d->remote, want_rp) == 0;
			free(have);
			if (!same)
				continue;
		}
		vw_strz(c->w, d->uuid);
	}
	pthread_mutex_unlock(&s->lock);
	vw_end_array(c->w);
	free(want_rp);
	return 0;
}

int vh_sd_create(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	int type = enum_arg(rpc_arg(c, "domainType"), domtype_from_name);
	int cls = enum_arg(rpc_arg(c, "domainClass"), st_domclass_parse);
	const struct vd_value *ver = rpc_arg(c, "version");
	int version = is_null(ver) ? 0 : enum_arg(ver, NULL);
	if (type <= 0)
		return rpc_fail(c, RPC_E_PARAMS, "domainType: expected 1 (NFS), 4 (LOCALFS) or 6 (POSIXFS)");
	if (cls <= 0)
		return rpc_fail(c, RPC_E_PARAMS, "domainClass: expected 1 (Data), 2 (Iso) or 3 (Backup)");
	if (version < 0)
		return rpc_fail(c, RPC_E_PARAMS, "version: not a domain version");
	int64_t bs = rpc_arg_int(c, "blockSize", 512);
	if (bs != 512 && bs != 0)
		return rpc_fail(c, RPC_E_PARAMS, "blockSize: only 512 (or 0, detect) is supported");
	struct st_err e = { 0 };
	if (st_domain_create(s, rpc_arg_str(c, "storagedomainID", NULL), type,
			     rpc_arg_str(c, "typeArgs", NULL), rpc_arg_str(c, "name", NULL), cls,
			     version, &e) < 0)
		return verb_fail(c, &e);
	return 0;
}

int vh_sd_get_info(struct rpc_call *c)
{
	struct storage_state *s;
	struct vd_writer *w = c->w;
	const struct st_domain *d = verb_lock_domain(c, &s);
	if (!d)
		return -1;
	/* The keys of VDSM's sd.py / fileSD.py getInfo, no more: the pool's
	 * lver, spm_id and master_ver are StoragePool.getInfo's. */
	vw_begin_object(w);
	vw_kstr(w, "uuid", d->uuid);
	vw_kstr(w, "type", st_domtype_name(d->type));
	vw_kstr(w, "class", st_domclass_name(d->dclass));
	vw_kstr(w, "name", d->name);
	vw_kstr(w, "role", d->master ? "Master" : "Regular");
	vw_kstr(w, "remotePath", d->remote[0] ? d->remote : d->base);
	vw_kstrf(w, "version", "%d", d->version);
	vw_keyz(w, "pool");
	vw_begin_array(w);
	if (d->pool[0])
		vw_strz(w, d->pool);
	vw_end_array(w);
	vw_kint(w, "block_size", 512);
	vw_kint(w, "alignment", 1048576);
	vw_end_object(w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_sd_get_stats(struct rpc_call *c)
{
	struct storage_state *s;
	struct vd_writer *w = c->w;
	const struct st_domain *d = verb_lock_domain(c, &s);
	if (!d)
		return -1;
	vw_begin_object(w);
	vw_kstrf(w, "disktotal", "%lld", (long long)d->disktotal);
	vw_kstrf(w, "diskfree", "%lld", (long long)d->diskfree);
	vw_kbool(w, "mdavalid", d->mon_last_ms == 0 || d->mon_valid);
	vw_kbool(w, "mdathreshold", true);
	vw_kint(w, "mdasize", 0);
	vw_kint(w, "mdafree", 0);
	vw_keyz(w, "alerts");
	vw_begin_array(w);
	vw_end_array(w);
	vw_end_object(w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_sd_get_volumes(struct rpc_call *c)
{
	struct storage_state *s;
	const char *img = rpc_arg_str(c, "imageID", NULL);
	const struct st_domain *d = verb_lock_domain(c, &s);
	if (!d)
		return -1;
	vw_begin_array(c->w);
	if (!img || strcmp(img, ST_BLANK_UUID) == 0) {
		for (struct st_map_ent *it = map_first(&d->volumes); it; it = map_next(&d->volumes, it))
			vw_strz(c->w, map_key(it));
	} else {
		const struct st_image *im = map_get(&d->images, img);
		for (size_t i = 0; im && i < im->n; i++)
			vw_strz(c->w, im->vols[i]->uuid);
	}
	vw_end_array(c->w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_sd_get_images(struct rpc_call *c)
{
	struct storage_state *s;
	const struct st_domain *d = verb_lock_domain(c, &s);
	if (!d)
		return -1;
	vw_begin_array(c->w);
	for (struct st_map_ent *it = map_first(&d->images); it; it = map_next(&d->images, it))
		vw_strz(c->w, map_key(it));
	vw_end_array(c->w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_sd_format(struct rpc_call *c)
{
	return verb_by_id(c, "storagedomainID", st_domain_format);
}

/* ---- StoragePool --------------------------------------------------------- */

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
	const struct vd_value *dv = rpc_arg(c, "domVersion");
	int64_t dom_version = -1;   /* absent: the master's own version */
	if (!is_null(dv) && dv->type == VD_INT)
		dom_version = dv->v.i;
	else if (!is_null(dv) && dv->v.s.len > 0 && dv->v.s.len < 4 &&
		 strspn(dv->v.s.ptr, "0123456789") == dv->v.s.len)
		dom_version = atoi(arena_strndup(c->arena, dv->v.s.ptr, dv->v.s.len));
	else if (!is_null(dv))
		dom_version = -2;
	if (!is_null(dv) && (dom_version < 0 || dom_version > 5))
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
					rpc_arg_str(c, "storagepoolID", NULL), strerror(-rc));
	}
	vw_begin_object(c->w);
	vw_kstr(c->w, "spmStatus", state == ST_SPM_SPM ? "SPM" : state == ST_SPM_CONTEND ? "Contend"
									      : "Free");
	vw_kint(c->w, "spmLver", lver);
	vw_kint(c->w, "spmId", holder);
	vw_end_object(c->w);
	return 0;
}

/* StorageDomain.activate / deactivate: the domain's status in the pool
 * (st_domain_activate), changed by the SPM only. */
static int sd_pool_op(struct rpc_call *c, bool activate)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (st_domain_activate(s, rpc_arg_str(c, "storagedomainID", NULL),
			       rpc_arg_str(c, "storagepoolID", NULL), activate,
			       activate ? NULL : rpc_arg_str(c, "masterSdUUID", NULL), &e) < 0)
		return verb_fail(c, &e);
	vw_bool(c->w, true);
	return 0;
}

int vh_sd_activate(struct rpc_call *c)
{
	return sd_pool_op(c, true);
}

int vh_sd_deactivate(struct rpc_call *c)
{
	return sd_pool_op(c, false);
}

static int sd_attach(struct rpc_call *c, bool attach)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (!attach && rpc_arg_bool(c, "force", false)) {
		if (st_domain_force_detach(s, rpc_arg_str(c, "storagedomainID", NULL),
					   rpc_arg_str(c, "storagepoolID", NULL), &e) < 0)
			return verb_fail(c, &e);
		vw_bool(c->w, true);
		return 0;
	}
	if (st_domain_attach(s, rpc_arg_str(c, "storagedomainID", NULL),
			     rpc_arg_str(c, "storagepoolID", NULL), attach, &e) < 0)
		return verb_fail(c, &e);
	vw_bool(c->w, true);
	return 0;
}

int vh_sd_attach(struct rpc_call *c)
{
	return sd_attach(c, true);
}

int vh_sd_detach(struct rpc_call *c)
{
	return sd_attach(c, false);
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
