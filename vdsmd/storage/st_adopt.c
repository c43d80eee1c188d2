/* vdsmd/storage/st_adopt.c - domains another host made, found on connected
 * storage (LOCALFS directories, mounts under <storage_root>/mnt), scanned
 * and registered here: Host.getStorageDomains' discovery and the pool
 * members a host that is not SPM serves.  Above the connections
 * (st_conn.c), the scan and the pool's domain map, called by the verbs and
 * StoragePool.connect. */
#include "st_ops.h"
#include "../../common/log.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int st_domain_adopt(struct storage_state *s, const char *sd, struct st_err *e)
{
	if (!st_is_uuid(sd))
		return st_fail(e, RPC_E_NO_DOMAIN, "invalid id");
	pthread_mutex_lock(&s->lock);
	bool known = map_get(&s->domains, sd) != NULL;
	pthread_mutex_unlock(&s->lock);
	if (known)
		return 0;
	struct st_domain *d = st_conn_find_domain(s, sd);
	if (!d)
		return st_fail(e, RPC_E_NO_DOMAIN, "%s (not found on connected storage)", sd);
	st_scan_domain(s, d);   /* not yet visible: no lock needed */
	pthread_mutex_lock(&s->lock);
	if (!map_get(&s->domains, sd)) {
		map_put(&s->domains, d->uuid, d);
		d = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	dom_free(d);
	int rc = st_registry_save(s);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot update the domain registry");
	log_info("storage: domain %s found on connected storage and loaded", sd);
	return 0;
}

void st_pool_adopt_members(struct storage_state *s)
{
	pthread_mutex_lock(&s->lock);
	char *map = xstrdup(st_pool_dommap(s));
	pthread_mutex_unlock(&s->lock);
	for (char *p = map, *save = NULL, *tok; (tok = strtok_r(p, ",", &save)); p = NULL) {
		char *colon = strchr(tok, ':');
		if (colon)
			*colon = '\0';
		struct st_err e = { 0 };
		if (st_domain_adopt(s, tok, &e) < 0)
			log_warn("storage: pool member %s: %s", tok, e.msg);
	}
	free(map);
}

/* The domain UUIDs directly under dir that this host has not loaded. */
static void discover_in(struct storage_state *s, const char *dir, struct vd_buf *found)
{
	DIR *dh = opendir(dir);
	struct dirent *de;
	while (dh && (de = readdir(dh))) {
		if (!st_is_uuid(de->d_name))
			continue;
		pthread_mutex_lock(&s->lock);
		bool known = map_get(&s->domains, de->d_name) != NULL;
		pthread_mutex_unlock(&s->lock);
		if (!known)
			buf_append(found, de->d_name, 37);
	}
	if (dh)
		closedir(dh);
}

void st_conn_discover(struct storage_state *s)
{
	struct vd_buf dirs = VD_BUF_INIT, found = VD_BUF_INIT;
	pthread_mutex_lock(&s->lock);
	buf_append(&dirs, s->localfs.data ? s->localfs.data : "", s->localfs.len);
	pthread_mutex_unlock(&s->lock);
	for (size_t off = 0; off < dirs.len; off += strlen(dirs.data + off) + 1)
		discover_in(s, dirs.data + off, &found);
	char *mnt = st_path(s->root, "mnt");
	struct stat mst;
	/* only a real mount root, and only what is mounted below it (a
	 * symlink planted there is no mount point in mountinfo) */
	DIR *dh = lstat(mnt, &mst) == 0 && S_ISDIR(mst.st_mode) ? opendir(mnt) : NULL;
	struct dirent *de;
	while (dh && (de = readdir(dh))) {
		if (de->d_name[0] == '.')
			continue;
		char *base = st_path(mnt, de->d_name);
		if (st_is_mounted(base))
			discover_in(s, base, &found);
		free(base);
	}
	if (dh)
		closedir(dh);
	free(mnt);
	for (size_t off = 0; off + 37 <= found.len; off += 37) {
		struct st_err e = { 0 };
		if (st_domain_adopt(s, found.data + off, &e) < 0)
			log_warn("storage: %s", e.msg);
	}
	buf_free(&dirs);
	buf_free(&found);
}
