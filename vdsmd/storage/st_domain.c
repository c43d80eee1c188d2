/* vdsmd/storage/st_domain.c - storage domains, the registry of known domains
 * under storage_root and the storage pool (st_open/st_close: st_open.c).
 *
 * On disk:
 *   <storage_root>/domains.reg       key=value: sdUUID=<base directory>
 *   <storage_root>/pool.meta         the pool (this host is always SPM)
 *   <storage_root>/tasks/<id>.task   task records (st_task.c)
 *   <base>/<sdUUID>/dom_md/metadata  the domain's key=value metadata
 *   <base>/<sdUUID>/images/<imgUUID>/<volUUID>{,.meta}
 * Every file is replaced atomically (st_write_atomic). */
#include "st.h"
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
		return -errno;
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
static int write_meta_as(struct storage_state *s, struct st_domain *d, const char *pool,
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
		return errno == ENOENT ? VD_ENOENT : VD_EPROTO;
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

/* ---- create / format ----------------------------------------------------- */

/* The directory that holds <sdUUID>/ for typeArgs: LOCALFS (or any type
 * given an absolute directory) that directory; "server:/export" or a
 * POSIXFS spec connected by connectStorageServer its mount point under
 * <storage_root>/mnt (VDSM's layout); empty: storage_root itself. */
static char *resolve_base(struct storage_state *s, int type, const char *type_args,
			  struct st_err *e)
{
	if (!type_args || !*type_args)
		return xstrdup(s->root);
	if (strstr(type_args, "/../") || strstr(type_args, "/./") || strcmp(type_args, ".") == 0 ||
	    strcmp(type_args, "..") == 0 ||
	    (strlen(type_args) >= 3 && strcmp(type_args + strlen(type_args) - 3, "/..") == 0)) {
		st_fail(e, RPC_E_PARAMS, "typeArgs: path must be canonical");
		return NULL;
	}
	char *mp = st_conn_mountpoint(s, type_args);
	if (type_args[0] == '/') {
		if (type != ST_DT_LOCALFS && st_is_mounted(mp))
			return mp;   /* a connected POSIXFS device spec */
		free(mp);
		return xstrdup(type_args);
	}
	return mp;
}

int st_domain_create(struct storage_state *s, const char *sd, int type, const char *type_args,
		     const char *name, int dclass, int version, struct st_err *e)
{
	if (!st_is_uuid(sd))
		return st_fail(e, RPC_E_PARAMS, "storagedomainID: not a UUID");
	if (!st_domtype_name(type))
		return st_fail(e, RPC_E_PARAMS, "domainType: unsupported storage type %d "
			       "(file domains: 1 NFS, 4 LOCALFS, 6 POSIXFS)", type);
	if (!st_domclass_name(dclass))
		return st_fail(e, RPC_E_PARAMS, "domainClass: unknown class %d", dclass);
	if (version == 0)
		version = 5;
	if (version < 0 || version > 5)
		return st_fail(e, RPC_E_PARAMS, "version: unsupported domain version %d", version);
	char *base = resolve_base(s, type, type_args, e);
	if (!base)
		return -1;
	struct stat st;
	if (stat(base, &st) < 0 || !S_ISDIR(st.st_mode)) {
		st_fail(e, RPC_E_GENERAL, "storage path %s is not an accessible directory", base);
		free(base);
		return -1;
	}
	/* LOCALFS: an existing directory (not a link) owned by vdsm (uid 36,
	 * as VDSM requires) or by the user vdsmd runs as, and writable by no
	 * one else. */
	if (type == ST_DT_LOCALFS && type_args && *type_args) {
		struct stat lst;
		const char *sys = st_system_dir(base);
		if (sys) {
			st_fail(e, RPC_E_PARAMS, "typeArgs: %s is a system directory (%s), never a "
				"storage domain", base, sys);
			free(base);
			return -1;
		}
		if (lstat(base, &lst) < 0 || !S_ISDIR(lst.st_mode) ||
		    (lst.st_uid != 36 && lst.st_uid != geteuid()) || (lst.st_mode & S_IWOTH)) {
			st_fail(e, RPC_E_PARAMS, "typeArgs: %s must be a directory (not a symlink) "
				"owned by vdsm (36) or uid %u and not world-writable", base,
				(unsigned)geteuid());
			free(base);
			return -1;
		}
	}
	struct st_domain *d = dom_new(sd);
	d->type = type;
	d->dclass = dclass;
	d->version = version;
	d->name = st_clean_text(name, ST_NAME_MAX);
	d->remote = st_clean_text(type_args, 4096);
	d->base = base;
	d->dir = st_path(base, sd);
	d->formatting = true;   /* invisible until complete */
	pthread_mutex_lock(&s->lock);
	if (map_get(&s->domains, sd)) {
		pthread_mutex_unlock(&s->lock);
		dom_free(d);
		return st_fail(e, RPC_E_DOMAIN_EXISTS, "%s", sd);
	}
	map_put(&s->domains, d->uuid, d);
	pthread_mutex_unlock(&s->lock);

	int rc = 0;
	char *md = st_path(d->dir, "dom_md"), *im = st_path(d->dir, "images");
	if (mkdir(d->dir, 0755) < 0) {
		rc = -errno;
		if (errno == EEXIST)
			st_fail(e, RPC_E_DOMAIN_EXISTS, "%s already exists in %s", sd, base);
		else
			st_fail(e, RPC_E_GENERAL, "cannot create %s: %s", d->dir, strerror(-rc));
		goto fail;
	}
	if (mkdir(md, 0755) < 0 || mkdir(im, 0755) < 0) {
		rc = -errno;
		st_fail(e, RPC_E_GENERAL, "cannot create domain layout: %s", strerror(-rc));
		st_rmtree(d->dir);
		goto fail;
	}
	if ((rc = write_meta_as(s, d, d->pool, d->master, NULL)) < 0 || (rc = st_fsync_dir(d->dir)) < 0 ||
	    (rc = st_fsync_dir(base)) < 0) {
		st_fail(e, RPC_E_GENERAL, "cannot write domain metadata: %s", strerror(-rc));
		st_rmtree(d->dir);
		goto fail;
	}
	pthread_mutex_lock(&s->lock);
	d->formatting = false;
	pthread_mutex_unlock(&s->lock);
	rc = st_registry_save(s);
	if (rc < 0) {
		pthread_mutex_lock(&s->lock);
		d->formatting = true;
		pthread_mutex_unlock(&s->lock);
		st_fail(e, RPC_E_GENERAL, "cannot update the domain registry: %s", strerror(-rc));
		st_rmtree(d->dir);
		goto fail;
	}
	free(md);
	free(im);
	log_info("storage: created domain %s (%s) at %s", sd, st_domtype_name(type), d->dir);
	st_monitor_once(s);
	return 0;
fail:
	pthread_mutex_lock(&s->lock);
	map_del(&s->domains, sd);
	pthread_mutex_unlock(&s->lock);
	dom_free(d);
	free(md);
	free(im);
	return -1;
}

int st_domain_format(struct storage_state *s, const char *sd, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, sd, e);
	if (!d) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	if (d->busy) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_GENERAL, "storage domain %s has operations in progress", sd);
	}
	d->formatting = true;   /* no new operation can find it */
	pthread_mutex_unlock(&s->lock);
	int rc = st_registry_save(s);
	if (rc < 0) {
		pthread_mutex_lock(&s->lock);
		d->formatting = false;
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_GENERAL, "cannot update the domain registry: %s", strerror(-rc));
	}
	/* Unregistered first: a crash midway leaves an unknown directory,
	 * never a half-removed domain that is still served. */
	rc = st_rmtree(d->dir);
	if (rc < 0)
		log_warn("storage: format %s: removing %s: %s", sd, d->dir, strerror(-rc));
	pthread_mutex_lock(&s->lock);
	map_del(&s->domains, sd);
	pthread_mutex_unlock(&s->lock);
	log_info("storage: formatted domain %s", sd);
	dom_free(d);
	return 0;
}

/* ---- pool ---------------------------------------------------------------- */

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
	bool master_listed = false;
	pthread_mutex_lock(&s->reg_lock);
	pthread_mutex_lock(&s->lock);
	if (s->pool_uuid[0] && strcmp(s->pool_uuid, sp) != 0) {
		st_fail(e, RPC_E_GENERAL, "this host already has storage pool %s", s->pool_uuid);
		goto fail;
	}
	if (reconstruct_host && s->pool_connected && strcmp(s->pool_uuid, sp) == 0) {
		st_fail(e, RPC_E_POOL_CONNECTED, "%s is connected on this host", sp);
		goto fail;
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
			goto fail;
		if (reconstruct_host && d->pool[0] && strcmp(d->pool, sp) != 0) {
			st_fail(e, RPC_E_GENERAL, "domain %s is attached to pool %s", d->uuid, d->pool);
			goto fail;
		}
		if (strcmp(doms[i], master) == 0)
			master_listed = true;
	}
	if (!master_listed) {
		st_fail(e, RPC_E_PARAMS, "masterSdUUID: not in domainList");
		goto fail;
	}
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

	/* POOL_DOMAINS: as given (reconstructMaster's domDict), else VDSM's
	 * create: the master Active, every other domain Attached */
	char *dommap = xstrdup("");
	for (size_t i = 0; i < ndoms; i++) {
		int st = statuses ? statuses[i] : strcmp(doms[i], master) == 0 ? ST_DS_ACTIVE
									   : ST_DS_ATTACHED;
		char *m2 = st ? st_dommap_put(dommap, doms[i], st) : dommap;
		if (m2 != dommap)
			free(dommap);
		dommap = m2;
	}
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
		if ((rc = write_meta_as(s, list[done], sp, is_master, &pmd)) < 0 &&
		    reconstruct_host && !is_master) {
			/* reconstruct: a member that cannot be written (often the
			 * old master, whose storage is why the engine rebuilds)
			 * keeps its metadata; the new master's map is what counts */
			log_warn("storage: reconstructMaster: domain %s not updated: %s",
				 list[done]->uuid, strerror(-rc));
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
			    write_meta_as(s, list[i], old_pool[i], old_master[i], list[i]) < 0) {
				log_error("storage: pool create: cannot restore domain %s metadata",
					  list[i]->uuid);
				unrestored++;
			}
	}
	if (!unrestored)
		st_pool_intent_clear(s);
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		for (size_t i = 0; i < ndoms; i++) {
			if (skipped[i])
				continue;
			snprintf(list[i]->pool, sizeof(list[i]->pool), "%.36s", sp);
			list[i]->master = strcmp(doms[i], master) == 0;
			if (list[i]->master) {
				list[i]->master_ver = master_ver;
				free(list[i]->pool_desc);
				list[i]->pool_desc = xstrdup(nw.name);
				free(list[i]->pool_doms);
				list[i]->pool_doms = xstrdup(dommap);
				list[i]->lease_renew_ms = renew;
				list[i]->lease_time_ms = ltime;
				list[i]->lease_io_ms = io_ms;
				list[i]->lease_retries = retries;
			}
		}
		s->lease_renew_ms = renew;
		s->lease_time_ms = ltime;
		s->lease_io_ms = io_ms;
		s->lease_retries = retries;
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
		return st_fail(e, RPC_E_GENERAL, "cannot write pool metadata: %s", strerror(-rc));
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
		return st_fail(e, RPC_E_GENERAL, "cannot record pool %s: %s", sp, strerror(-rc));
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
		return st_fail(e, RPC_E_GENERAL, "cannot write pool metadata: %s", strerror(-rc));
	if (connect) {
		st_pool_reload(s);   /* the domain map as the SPM last wrote it */
		st_pool_adopt_members(s);
		st_spm_observe(s);   /* who holds the lease, for getSpmStatus */
	}
	return 0;
}

int st_domain_set_pool(struct storage_state *s, struct st_domain *d, const char *pool,
		       bool master)
{
	int rc = write_meta_as(s, d, pool, master, NULL);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		snprintf(d->pool, sizeof(d->pool), "%.36s", pool);
		d->master = master;
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
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
