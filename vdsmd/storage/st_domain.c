/* vdsmd/storage/st_domain.c - the storage domain model: a domain's
 * metadata (read, written, its pool and role), the registry of known
 * domains under storage_root.  StorageDomain.create/format are in
 * st_sdcreate.c, the pool in st_pool.c, st_open/st_close in st_open.c.
 *
 * On disk:
 *   <storage_root>/domains.reg       key=value: sdUUID=<base directory>
 *   <storage_root>/pool.meta         the pool (this host is always SPM)
 *   <storage_root>/tasks/<id>.task   task records (st_task.c)
 *   <base>/<sdUUID>/dom_md/metadata  the domain's key=value metadata
 *   <base>/<sdUUID>/images/<imgUUID>/<volUUID>{,.meta}
 * Every file is replaced atomically (st_write_atomic). */
#include "st_state.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { int v; const char *name; } domtypes[] = {
	{ ST_DT_NFS, "NFS" }, { ST_DT_LOCALFS, "LOCALFS" }, { ST_DT_POSIXFS, "POSIXFS" },
};

const char *st_domtype_name(int type)
{
	for (size_t i = 0; i < VD_ARRAY_SIZE(domtypes); i++)
		if (domtypes[i].v == type)
			return domtypes[i].name;
	return NULL;
}

static int domtype_parse(const char *s)
{
	for (size_t i = 0; s && i < VD_ARRAY_SIZE(domtypes); i++)
		if (strcmp(domtypes[i].name, s) == 0)
			return domtypes[i].v;
	return 0;
}

const char *st_domclass_name(int dclass)
{
	switch (dclass) {
	case ST_DC_DATA: return "Data";
	case ST_DC_ISO: return "Iso";
	case ST_DC_BACKUP: return "Backup";
	}
	return NULL;
}

int st_domclass_parse(const char *s)
{
	if (!s)
		return 0;
	if (strcasecmp(s, "Data") == 0 || strcmp(s, "1") == 0)
		return ST_DC_DATA;
	if (strcasecmp(s, "Iso") == 0 || strcmp(s, "2") == 0)
		return ST_DC_ISO;
	if (strcasecmp(s, "Backup") == 0 || strcmp(s, "3") == 0)
		return ST_DC_BACKUP;
	return 0;
}

struct st_domain *st_domain_get(struct storage_state *s, const char *sd, struct st_err *e)
{
	struct st_domain *d = st_is_uuid(sd) ? map_get(&s->domains, sd) : NULL;
	if (!d || d->formatting) {
		st_fail(e, RPC_E_NO_DOMAIN, "%s", st_is_uuid(sd) ? sd : "invalid id");
		return NULL;
	}
	return d;
}

/* ---- metadata ------------------------------------------------------------ */

static void dom_to_kv(const struct st_domain *d, struct st_kv *kv)
{
	kv_init(kv);
	kv_set(kv, "SDUUID", d->uuid);
	kv_set(kv, "TYPE", st_domtype_name(d->type));
	kv_set(kv, "CLASS", st_domclass_name(d->dclass));
	kv_set(kv, "DESCRIPTION", d->name);
	kv_set(kv, "REMOTE_PATH", d->remote);
	kv_setf(kv, "VERSION", "%d", d->version);
	kv_set(kv, "POOL_UUID", d->pool);
	kv_set(kv, "ROLE", d->master ? "Master" : "Regular");
	if (d->master) {
		kv_setf(kv, "MASTER_VERSION", "%d", d->master_ver);
		kv_set(kv, "POOL_DESCRIPTION", d->pool_desc ? d->pool_desc : "");
		kv_set(kv, "POOL_DOMAINS", d->pool_doms ? d->pool_doms : "");
		kv_setf(kv, "LEASE_RENEW_MS", "%u", d->lease_renew_ms);
		kv_setf(kv, "LEASE_TIME_MS", "%u", d->lease_time_ms);
		kv_setf(kv, "LEASE_IO_TIMEOUT_MS", "%u", d->lease_io_ms);
		kv_setf(kv, "LEASE_RETRIES", "%u", d->lease_retries);
	}
	kv_set(kv, "BLOCK_SIZE", "512");
	kv_set(kv, "ALIGNMENT", "1048576");
}

static int write_dom_kv(const char *dir, const struct st_kv *kv)
{
	int md = st_dir_at(dir, "dom_md");
	if (md < 0)
		return md;
	int rc = kv_write_at(kv, md, "metadata");
	close(md);
	return rc;
}

int st_domain_write_meta(struct storage_state *s, struct st_domain *d)
{
	struct st_kv kv;
	pthread_mutex_lock(&s->lock);
	dom_to_kv(d, &kv);
	char *dir = xstrdup(d->dir);
	pthread_mutex_unlock(&s->lock);
	int rc = write_dom_kv(dir, &kv);
	kv_free(&kv);
	free(dir);
	return rc;
}

/* The metadata d would have with pool and role changed (d itself is not
 * touched: memory follows only once the disk has it). */
int st_domain_write_meta_as(struct storage_state *s, struct st_domain *d, const char *pool,
			 bool master, const struct st_domain *pool_md)
{
	struct st_kv kv;
	pthread_mutex_lock(&s->lock);
	struct st_domain tmp = *d;
	snprintf(tmp.pool, sizeof(tmp.pool), "%.36s", pool);
	tmp.master = master;
	if (pool_md) {
		tmp.master_ver = pool_md->master_ver;
		tmp.pool_desc = pool_md->pool_desc;
		tmp.pool_doms = pool_md->pool_doms;
		tmp.lease_renew_ms = pool_md->lease_renew_ms;
		tmp.lease_time_ms = pool_md->lease_time_ms;
		tmp.lease_io_ms = pool_md->lease_io_ms;
		tmp.lease_retries = pool_md->lease_retries;
	}
	dom_to_kv(&tmp, &kv);
	char *dir = xstrdup(d->dir);
	pthread_mutex_unlock(&s->lock);
	int rc = write_dom_kv(dir, &kv);
	kv_free(&kv);
	free(dir);
	return rc;
}

int st_master_write_map(struct storage_state *s, struct st_domain *m, const char *map)
{
	struct st_kv kv;
	pthread_mutex_lock(&s->lock);
	struct st_domain tmp = *m;
	tmp.pool_doms = (char *)map;
	dom_to_kv(&tmp, &kv);
	char *dir = xstrdup(m->dir);
	pthread_mutex_unlock(&s->lock);
	int rc = write_dom_kv(dir, &kv);
	kv_free(&kv);
	free(dir);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		free(m->pool_doms);
		m->pool_doms = xstrdup(map);
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

int st_dom_load(struct st_domain *d, const char *base)
{
	struct st_kv kv;
	d->base = xstrdup(base);
	d->dir = st_path(base, d->uuid);
	int dfd = st_dom_open(d->dir);
	if (dfd < 0)
		return dfd == VD_ESYS(ENOENT) ? VD_ENOENT : VD_EPROTO;
	int rc = kv_read_at(&kv, dfd, "dom_md/metadata");
	close(dfd);
	if (rc)
		return rc;
	const char *u = kv_get(&kv, "SDUUID");
	d->type = domtype_parse(kv_get(&kv, "TYPE"));
	d->dclass = st_domclass_parse(kv_get(&kv, "CLASS"));
	if (!u || strcmp(u, d->uuid) != 0 || !d->type || !d->dclass) {
		kv_free(&kv);
		return VD_EPROTO;
	}
	d->name = xstrdup(kv_get(&kv, "DESCRIPTION") ? kv_get(&kv, "DESCRIPTION") : "");
	d->remote = xstrdup(kv_get(&kv, "REMOTE_PATH") ? kv_get(&kv, "REMOTE_PATH") : "");
	d->version = (int)kv_get_int(&kv, "VERSION", 5);
	const char *p = kv_get(&kv, "POOL_UUID");
	snprintf(d->pool, sizeof(d->pool), "%.36s", p && st_is_uuid(p) ? p : "");
	d->master = kv_get(&kv, "ROLE") && strcmp(kv_get(&kv, "ROLE"), "Master") == 0;
	d->master_ver = (int)kv_get_int(&kv, "MASTER_VERSION", 0);
	d->pool_desc = xstrdup(kv_get(&kv, "POOL_DESCRIPTION") ? kv_get(&kv, "POOL_DESCRIPTION") : "");
	/* NULL: metadata written before POOL_DOMAINS was kept (st_pool_doms.c) */
	d->pool_doms = kv_get(&kv, "POOL_DOMAINS") ? xstrdup(kv_get(&kv, "POOL_DOMAINS")) : NULL;
	d->lease_renew_ms = (unsigned)kv_get_int(&kv, "LEASE_RENEW_MS", 5000);
	d->lease_time_ms = (unsigned)kv_get_int(&kv, "LEASE_TIME_MS", 60000);
	d->lease_io_ms = (unsigned)kv_get_int(&kv, "LEASE_IO_TIMEOUT_MS", 10000);
	d->lease_retries = (unsigned)kv_get_int(&kv, "LEASE_RETRIES", 3);
	kv_free(&kv);
	return 0;
}

int st_registry_save(struct storage_state *s)
{
	struct st_kv kv;
	kv_init(&kv);
	pthread_mutex_lock(&s->reg_lock);
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *e = map_first(&s->domains); e; e = map_next(&s->domains, e)) {
		struct st_domain *d = map_val(e);
		if (!d->formatting)
			kv_set(&kv, d->uuid, d->base);
	}
	pthread_mutex_unlock(&s->lock);
	char *path = st_path(s->root, "domains.reg");
	int rc = kv_write_file(&kv, path);
	pthread_mutex_unlock(&s->reg_lock);
	free(path);
	kv_free(&kv);
	return rc;
}

int st_domain_set_pool(struct storage_state *s, struct st_domain *d, const char *pool,
		       bool master)
{
	int rc = st_domain_write_meta_as(s, d, pool, master, NULL);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		snprintf(d->pool, sizeof(d->pool), "%.36s", pool);
		d->master = master;
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}
