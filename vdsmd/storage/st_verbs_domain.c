/* vdsmd/storage/st_verbs_domain.c - StorageDomain.* and
 * Host.getStorageDomains.  Reads come from the index under the lock (memory
 * only); create/format/attach/activate are RPC_F_BLOCKING. */
#include "st_verbs.h"
#include "../vdsmd.h"
#include "../../common/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The engine sends "" for "any" (storageType, remotePath). */
static bool is_any(const struct vd_value *v)
{
	return verb_is_null(v) || (v->type == VD_STRING && v->v.s.len == 0);
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
	if (!verb_is_null(sp)) {
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
	if (!verb_is_null(rp) && rp->type != VD_STRING)
		return rpc_fail(c, RPC_E_PARAMS, "remotePath: not a string");
	/* domains another host made on storage connected here (VDSM's
	 * sdCache.refreshStorage) */
	st_conn_discover(s);
	/* remotePath as VDSM compares it: both sides normalized (host:/a//b/
	 * is host:/a/b) */
	char *want_rp = NULL;
	if (!verb_is_null(rp)) {
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
	int version = verb_is_null(ver) ? 0 : enum_arg(ver, NULL);
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
