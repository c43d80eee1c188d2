/* vdsmd/storage/st_conn.c - StoragePool.connectStorageServer /
 * disconnectStorageServer for file storage.
 *
 *   LOCALFS  the connection is an existing local directory (owned by vdsm,
 *            uid 36, or by the user vdsmd runs as; not world-writable);
 *            nothing is mounted.
 *   NFS      mount -t nfs -o soft,nosharecache,timeo=T,retrans=R[,vers=V]
 *            [,<mnt_options>] server:/export <mount point>
 *   POSIXFS  mount -t <vfs_type> [-o <mnt_options>] <spec> <mount point>
 * The mount point is VDSM's: <storage_root>/mnt/<spec, '_' doubled, '/'
 * turned into '_'>, which is also where StorageDomain.create looks for a
 * "server:/export" typeArgs.  mount(8)/umount(8) run through posix_spawn
 * (st_run_tool); connecting what is already mounted is success, as in VDSM.
 * Statuses are VDSM's per-connection codes. */
#include "st.h"
#include "../../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_CONN_BAD 451        /* StorageServerConnectionError */
#define ST_CONN_DISC_ERR 452   /* StorageServerDisconnectionError */
#define ST_CONN_ACCESS 469     /* StorageServerAccessPermissionError */
#define ST_CONN_TYPE 470       /* MountTypeError */
#define ST_CONN_MOUNT 477      /* MountError */

char *st_conn_mountpoint(const struct storage_state *s, const char *spec)
{
	struct vd_buf b = VD_BUF_INIT;
	buf_printf(&b, "%s/mnt/", s->root);
	for (const char *p = spec; *p; p++) {
		if (*p == '_')
			buf_append(&b, "__", 2);
		else if (*p == '/')
			buf_append(&b, "_", 1);
		else
			buf_append(&b, p, 1);
	}
	char *out = xstrndup(b.data, b.len);
	buf_free(&b);
	return out;
}

/* mountinfo escapes ' ', '\t', '\n', '\\' as \ooo. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

bool st_is_mounted(const char *dir)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* id parent major:minor root mountpoint ... */
		char *save = NULL, *tok = strtok_r(line, " ", &save);
		for (int i = 0; tok && i < 4; i++)
			tok = strtok_r(NULL, " ", &save);
		if (tok) {
			unescape(tok);
			found = strcmp(tok, dir) == 0;
		}
	}
	fclose(f);
	return found;
}

static bool text_ok(const char *s, size_t max)
{
	if (!s)
		return true;
	size_t n = strlen(s);
	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20)
			return false;
	return true;
}

static int check_localfs(const char *dir, char *msg, size_t msglen)
{
	struct stat st;
	if (dir[0] != '/' || strstr(dir, "/../") || lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(msg, msglen, "%s is not an existing directory (symlinks refused)", dir);
		return ST_CONN_ACCESS;
	}
	if ((st.st_uid != 36 && st.st_uid != geteuid()) || (st.st_mode & S_IWOTH)) {
		snprintf(msg, msglen, "%s must be owned by vdsm (36) or uid %u and not "
			 "world-writable", dir, (unsigned)geteuid());
		return ST_CONN_ACCESS;
	}
	return 0;
}

static int nfs_options(const struct st_conn_req *r, char *out, size_t len, char *msg,
		       size_t msglen)
{
	int n = snprintf(out, len, "soft,nosharecache,timeo=%d,retrans=%d",
			 r->timeo > 0 ? r->timeo : 100, r->retrans > 0 ? r->retrans : 3);
	const char *v = r->protocol_version;
	if (v && *v && strcmp(v, "auto") != 0) {
		if (strcmp(v, "3") && strcmp(v, "4") && strcmp(v, "4.0") && strcmp(v, "4.1") &&
		    strcmp(v, "4.2")) {
			snprintf(msg, msglen, "protocol_version %s: expected auto, 3, 4, 4.1 or 4.2", v);
			return ST_CONN_BAD;
		}
		n += snprintf(out + n, len - (size_t)n, ",vers=%s", v);
	}
	if (r->mnt_options && *r->mnt_options)
		n += snprintf(out + n, len - (size_t)n, ",%s", r->mnt_options);
	return n >= (int)len ? ST_CONN_BAD : 0;
}

static bool real_dir(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* <storage_root>/mnt and the mount point below it are real directories. */
static bool mount_root_ok(const struct storage_state *s, const char *mp)
{
	char *mnt = st_path(s->root, "mnt");
	bool ok = real_dir(mnt) && real_dir(mp);
	free(mnt);
	return ok;
}

int st_conn_connect(struct storage_state *s, int domtype, const struct st_conn_req *r,
		    char *msg, size_t msglen)
{
	msg[0] = '\0';
	const char *spec = r->connection;
	if (!spec || !*spec || spec[0] == '-' || !text_ok(spec, 1024) ||
	    !text_ok(r->mnt_options, 1024) || !text_ok(r->vfs_type, 64) ||
	    (r->mnt_options && r->mnt_options[0] == '-') || (r->vfs_type && r->vfs_type[0] == '-')) {
		snprintf(msg, msglen, "invalid connection parameters");
		return ST_CONN_BAD;
	}
	if (domtype == ST_DT_LOCALFS) {
		int st = check_localfs(spec, msg, msglen);
		if (st == 0)
			st_conn_note_localfs(s, spec);
		return st;
	}
	if (domtype != ST_DT_NFS && domtype != ST_DT_POSIXFS) {
		snprintf(msg, msglen, "storage type %d cannot be connected here", domtype);
		return ST_CONN_TYPE;
	}
	if (domtype == ST_DT_POSIXFS && (!r->vfs_type || !*r->vfs_type)) {
		snprintf(msg, msglen, "POSIXFS needs vfs_type");
		return ST_CONN_BAD;
	}
	char opts[2200] = "";
	if (domtype == ST_DT_NFS) {
		int rc = nfs_options(r, opts, sizeof(opts), msg, msglen);
		if (rc)
			return rc;
	} else if (r->mnt_options) {
		snprintf(opts, sizeof(opts), "%s", r->mnt_options);
	}
	char *mp = st_conn_mountpoint(s, spec);
	char *mnt = st_path(s->root, "mnt");
	int status = 0;
	/* the mount root is checked before anything is made in it, the mount
	 * point after: mount(8) would follow a symlink and mount elsewhere */
	int rc = st_mkdir_p(mnt, 0755);
	bool linked = rc == 0 && !real_dir(mnt);
	if (rc == 0 && !linked && mkdir(mp, 0755) < 0 && errno != EEXIST)
		rc = -errno;
	free(mnt);
	if (rc < 0) {
		snprintf(msg, msglen, "cannot create mount point %s: %s", mp, strerror(-rc));
		status = ST_CONN_MOUNT;
	} else if (linked || !mount_root_ok(s, mp)) {
		snprintf(msg, msglen, "mount point %s or the mount root is not a directory "
			 "(symlinks refused)", mp);
		status = ST_CONN_MOUNT;
	} else if (st_is_mounted(mp)) {
		log_info("storage: %s already mounted on %s", spec, mp);
	} else {
		char *argv[10];
		int n = 0;
		argv[n++] = (char *)"mount";
		argv[n++] = (char *)"-t";
		argv[n++] = (char *)(domtype == ST_DT_NFS ? "nfs" : r->vfs_type);
		if (opts[0]) {
			argv[n++] = (char *)"-o";
			argv[n++] = opts;
		}
		argv[n++] = (char *)spec;
		argv[n++] = mp;
		argv[n] = NULL;
		char err[512];
		rc = st_run_tool(s, NULL, "mount", "mount", argv, -1, err, sizeof(err));
		if (rc < 0) {
			snprintf(msg, msglen, "%s", err);
			status = ST_CONN_MOUNT;
			rmdir(mp);
		} else {
			log_info("storage: mounted %s on %s", spec, mp);
		}
	}
	free(mp);
	return status;
}

int st_conn_disconnect(struct storage_state *s, int domtype, const struct st_conn_req *r,
		       char *msg, size_t msglen)
{
	msg[0] = '\0';
	if (domtype == ST_DT_LOCALFS)
		return 0;
	if (!r->connection || !*r->connection || !text_ok(r->connection, 1024)) {
		snprintf(msg, msglen, "invalid connection parameters");
		return ST_CONN_BAD;
	}
	char *mp = st_conn_mountpoint(s, r->connection);
	int status = 0;
	if (!mount_root_ok(s, mp)) {
		/* a planted symlink: nothing of ours is mounted there; leave it */
		free(mp);
		return 0;
	}
	if (st_is_mounted(mp)) {
		char *argv[] = { (char *)"umount", mp, NULL };
		char err[512];
		if (st_run_tool(s, NULL, "umount", "mount", argv, -1, err, sizeof(err)) < 0) {
			snprintf(msg, msglen, "%s", err);
			status = ST_CONN_DISC_ERR;
		}
	}
	if (status == 0 && rmdir(mp) < 0 && errno != ENOENT)
		log_warn("storage: disconnect: cannot remove %s: %s", mp, strerror(errno));
	free(mp);
	return status;
}

void st_conn_note_localfs(struct storage_state *s, const char *dir)
{
	pthread_mutex_lock(&s->lock);
	bool have = false;
	for (size_t off = 0; off < s->localfs.len; off += strlen(s->localfs.data + off) + 1)
		if (strcmp(s->localfs.data + off, dir) == 0)
			have = true;
	if (!have)
		buf_append(&s->localfs, dir, strlen(dir) + 1);
	pthread_mutex_unlock(&s->lock);
}

static struct st_domain *try_base(const char *sd, const char *base)
{
	struct st_domain *d = dom_new(sd);
	if (st_dom_load(d, base) == 0)
		return d;
	dom_free(d);
	return NULL;
}

struct st_domain *st_conn_find_domain(struct storage_state *s, const char *sd)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct vd_buf dirs = VD_BUF_INIT;
	buf_append(&dirs, s->localfs.data ? s->localfs.data : "", s->localfs.len);
	pthread_mutex_unlock(&s->lock);
	for (size_t off = 0; !d && off < dirs.len; off += strlen(dirs.data + off) + 1)
		d = try_base(sd, dirs.data + off);
	buf_free(&dirs);
	char *mnt = st_path(s->root, "mnt");
	DIR *dh = d || !real_dir(mnt) ? NULL : opendir(mnt);
	struct dirent *de;
	while (dh && !d && (de = readdir(dh))) {
		if (de->d_name[0] == '.')
			continue;
		char *base = st_path(mnt, de->d_name);
		if (real_dir(base))   /* a symlink planted there is not a mount of ours */
			d = try_base(sd, base);
		free(base);
	}
	if (dh)
		closedir(dh);
	free(mnt);
	return d;
}
