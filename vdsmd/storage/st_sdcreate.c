/* vdsmd/storage/st_sdcreate.c - StorageDomain.create and format: a new
 * domain's directory tree and metadata under its base (a connected mount
 * point or a LOCALFS directory), and its removal. */
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	if ((rc = st_mkdir(d->dir, 0755)) < 0) {
		if (rc == VD_ESYS(EEXIST))
			st_fail(e, RPC_E_DOMAIN_EXISTS, "%s already exists in %s", sd, base);
		else
			st_fail_rc(e, RPC_E_GENERAL, rc, "cannot create %s", d->dir);
		goto fail;
	}
	if ((rc = st_mkdir(md, 0755)) < 0 || (rc = st_mkdir(im, 0755)) < 0) {
		st_fail_rc(e, RPC_E_GENERAL, rc, "cannot create domain layout");
		st_rmtree(d->dir);
		goto fail;
	}
	if ((rc = st_domain_write_meta_as(s, d, d->pool, d->master, NULL)) < 0 || (rc = st_fsync_dir(d->dir)) < 0 ||
	    (rc = st_fsync_dir(base)) < 0) {
		st_fail_rc(e, RPC_E_GENERAL, rc, "cannot write domain metadata");
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
		st_fail_rc(e, RPC_E_GENERAL, rc, "cannot update the domain registry");
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
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot update the domain registry");
	}
	/* Unregistered first: a crash midway leaves an unknown directory,
	 * never a half-removed domain that is still served. */
	rc = st_rmtree(d->dir);
	if (rc < 0)
		log_warn("storage: format %s: removing %s: %s", sd, d->dir, st_rc_text(rc));
	pthread_mutex_lock(&s->lock);
	map_del(&s->domains, sd);
	pthread_mutex_unlock(&s->lock);
	log_info("storage: formatted domain %s", sd);
	dom_free(d);
	return 0;
}

/* ---- pool ---------------------------------------------------------------- */

