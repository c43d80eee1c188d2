/* vdsmd/storage/st_conn.c - StoragePool.connectStorageServer /
 * disconnectStorageServer for file storage.
 *
 *   LOCALFS  the connection is an existing local directory (owned by vdsm,
 *            uid 36, or by the user vdsmd runs as; not world-writable);
 *            nothing is mounted.
 *   NFS      mount -t nfs -o soft,nosharecache,timeo=T,retrans=R[,nfsvers=N
 *            [,minorversion=M]][,<mnt_options>][,nolock] server:/export <mp>
 *   POSIXFS  mount -t <vfs_type> [-o <mnt_options>] <spec> <mount point>
 * (st_conn_mount_cmd, a pure function: see st.h for VDSM's rules).  The
 * mount point is VDSM's: <storage_root>/mnt/<normalized spec, '_' doubled,
 * '/' turned into '_'>, which is also where StorageDomain.create looks for
 * a "server:/export" typeArgs; disconnect runs umount -f -l.  mount(8) and
 * umount(8) run through posix_spawn (st_run_tool); connecting what is
 * already mounted is success, as in VDSM.
 * Statuses are VDSM's per-connection codes. */
#include "st_ops.h"
#include "../../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A connection's status: VDSM's code of its failure (rpc/ names them). */
#define ST_CONN_BAD rpc_err_code(RPC_E_CONN_ERROR)
#define ST_CONN_DISC_ERR rpc_err_code(RPC_E_DISCONN_ERROR)
#define ST_CONN_ACCESS rpc_err_code(RPC_E_CONN_ACCESS)
#define ST_CONN_TYPE rpc_err_code(RPC_E_MOUNT_TYPE)
#define ST_CONN_MOUNT rpc_err_code(RPC_E_MOUNT)

/* os.path.normpath (POSIX) as VDSM's fileUtils.normpath uses it: "//"
 * collapses, "." and "dir/.." go, no trailing '/', a leading "//" is one
 * '/', "" is ".". */
static void normpath(const char *in, size_t n, struct vd_buf *out)
{
	bool abs = n > 0 && in[0] == '/';
	size_t start = out->len;
	size_t depth = 0;   /* components written that ".." may remove */
	if (abs)
		buf_append(out, "/", 1);
	for (size_t i = 0; i < n;) {
		while (i < n && in[i] == '/')
			i++;
		size_t j = i;
		while (j < n && in[j] != '/')
			j++;
		size_t len = j - i;
		const char *c = in + i;
		i = j;
		if (len == 0 || (len == 1 && c[0] == '.'))
			continue;
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			if (depth > 0) {   /* drop the last component */
				while (out->len > start + abs && out->data[out->len - 1] != '/')
					out->len--;
				if (out->len > start + abs)
					out->len--;   /* its separator */
				depth--;
				continue;
			}
			if (abs)
				continue;     /* "/.." is "/" */
		} else {
			depth++;
		}
		if (out->len > start + abs)
			buf_append(out, "/", 1);
		buf_append(out, c, len);
	}
	if (out->len == start)
		buf_append(out, ".", 1);
	buf_append(out, "", 1);   /* NUL, not counted */
	out->len--;
}

static bool is_port(const char *s, size_t n)
{
	if (n == 0 || n > 5 || s[0] == '0')
		return false;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	return v >= 1 && v <= 65535;
}

char *st_conn_normalize(const char *spec)
{
	struct vd_buf whole = VD_BUF_INIT, b = VD_BUF_INIT;
	/* NFSConnection normalizes the whole export first, then
	 * MountConnection the host:tail form. */
	normpath(spec, strlen(spec), &whole);
	const char *p = whole.data;
	char *out = NULL;
	if (p[0] == '/' || !strchr(p, ':')) {
		out = xstrdup(p);
		goto out;
	}
	const char *host, *tail;
	size_t hlen;
	if (p[0] == '[') {   /* "[v6 address]:tail" */
		const char *e = strstr(p, "]:");
		if (!e)
			goto out;
		host = p + 1;
		hlen = (size_t)(e - host);
		tail = e + 2;
	} else {
		const char *c = strchr(p, ':');
		host = p;
		hlen = (size_t)(c - p);
		tail = c + 1;
	}
	if (hlen == 0 || !*tail)
		goto out;
	if (memchr(host, ':', hlen))
		buf_printf(&b, "[%.*s]:", (int)hlen, host);
	else
		buf_printf(&b, "%.*s:", (int)hlen, host);
	const char *c = strchr(tail, ':');
	if (c && is_port(tail, (size_t)(c - tail))) {   /* "host:port:/path" */
		buf_append(&b, tail, (size_t)(c - tail) + 1);
		normpath(c + 1, strlen(c + 1), &b);
	} else {
		normpath(tail, strlen(tail), &b);
	}
	out = xstrndup(b.data, b.len);
out:
	buf_free(&whole);
	buf_free(&b);
	return out;
}

bool st_conn_spec_canonical(const char *norm)
{
	/* After normpath only a lone "." and leading ".." components can be
	 * left; they are refused, in the path and in a host:tail's tail, so
	 * the mount point is never <root>/mnt/. or <root>/mnt/.. (issue 27:
	 * a POSIXFS connection of ".." mounted over the storage root). */
	for (const char *p = norm; *p;) {
		size_t n = strcspn(p, "/:");
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p)
			p++;
	}
	return *norm != '\0';
}

char *st_conn_mountpoint_at(const char *root, const char *spec)
{
	char *norm = st_conn_normalize(spec);
	const char *src = norm ? norm : spec;
	struct vd_buf b = VD_BUF_INIT;
	buf_printf(&b, "%s/mnt/", root);
	for (const char *p = src; *p; p++) {
		if (*p == '_')
			buf_append(&b, "__", 2);
		else if (*p == '/')
			buf_append(&b, "_", 1);
		else
			buf_append(&b, p, 1);
	}
	char *out = xstrndup(b.data, b.len);
	buf_free(&b);
	free(norm);
	return out;
}

char *st_conn_mountpoint(const struct storage_state *s, const char *spec)
{
	return st_conn_mountpoint_at(s->root, spec);
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

bool st_is_mounted(const char *path)
{
	/* mountinfo has canonical paths: compare with one (a storage_root
	 * given as "/srv//x/" made every mount look unmounted, so disconnect
	 * skipped the umount and answered 0) */
	struct vd_buf canon = VD_BUF_INIT;
	normpath(path, strlen(path), &canon);
	const char *dir = canon.data;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		buf_free(&canon);
		return false;
	}
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
	buf_free(&canon);
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

/* The directories of the system itself.  VDSM runs as vdsm (uid 36), who
 * cannot write to them, so its LOCALFS connect and domain create refuse
 * them (469, validateDirAccess); vdsmd may run as root, where every check
 * on the owner passes, so it refuses them by name (issue 27: as root "/"
 * and "/etc" were accepted).  Exact names, and everything below the ones
 * marked subtree. */
static const struct { const char *path; bool subtree; } system_dirs[] = {
	{ "/", false },        { "/bin", true },      { "/boot", true },
	{ "/dev", true },      { "/etc", true },      { "/home", false },
	{ "/lib", true },      { "/lib32", true },    { "/lib64", true },
	{ "/libx32", true },   { "/media", false },   { "/mnt", false },
	{ "/opt", false },     { "/proc", true },     { "/root", false },
	{ "/run", false },     { "/sbin", true },     { "/srv", false },
	{ "/sys", true },      { "/tmp", false },     { "/usr", true },
	{ "/var", false },     { "/var/lib", false }, { "/var/log", true },
	{ "/var/tmp", false }, { "/var/run", false }, { "/var/cache", false },
	{ "/var/spool", false },
};

const char *st_system_dir(const char *path)
{
	char *real = realpath(path, NULL);
	struct vd_buf canon = VD_BUF_INIT;
	normpath(real ? real : path, strlen(real ? real : path), &canon);
	free(real);
	const char *hit = NULL;
	for (size_t i = 0; !hit && i < VD_ARRAY_SIZE(system_dirs); i++) {
		const char *d = system_dirs[i].path;
		size_t n = strlen(d);
		if (strcmp(canon.data, d) == 0 ||
		    (system_dirs[i].subtree && strncmp(canon.data, d, n) == 0 && canon.data[n] == '/'))
			hit = d;
	}
	buf_free(&canon);
	return hit;
}

static int check_localfs(const char *dir, char *msg, size_t msglen)
{
	struct stat st;
	if (dir[0] != '/' || strstr(dir, "/../") || lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(msg, msglen, "%s is not an existing directory (symlinks refused)", dir);
		return ST_CONN_ACCESS;
	}
	const char *sys = st_system_dir(dir);
	if (sys) {
		snprintf(msg, msglen, "%s is a system directory (%s): not a storage directory", dir,
			 sys);
		return ST_CONN_ACCESS;
	}
	if ((st.st_uid != 36 && st.st_uid != geteuid()) || (st.st_mode & S_IWOTH)) {
		snprintf(msg, msglen, "%s must be owned by vdsm (36) or uid %u and not "
			 "world-writable", dir, (unsigned)geteuid());
		return ST_CONN_ACCESS;
	}
	return 0;
}

/* "3" -> 3/-1, "4.1" -> 4/1; false when it is not a version VDSM's
 * NFSConnection would turn into nfsvers/minorversion (we also bound it). */
static bool nfs_version(const char *v, int *major, int *minor)
{
	char *end;
	if (!(v[0] >= '0' && v[0] <= '9'))
		return false;
	long ma = strtol(v, &end, 10), mi = -1;
	if (*end == '.') {
		if (!(end[1] >= '0' && end[1] <= '9'))
			return false;
		mi = strtol(end + 1, &end, 10);
	}
	if (*end || ma < 2 || ma > 4 || mi > 2)
		return false;
	*major = (int)ma;
	*minor = (int)mi;
	return true;
}

/* Whether the comma-separated list has exactly this option. */
static bool has_option(const char *list, const char *opt)
{
	size_t n = strlen(opt);
	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && memcmp(p, opt, n) == 0)
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

/* NFS: VDSM's NFSConnection options, in its order. */
static int nfs_options(const struct st_conn_req *r, struct vd_buf *o, char *msg, size_t msglen)
{
	buf_printf(o, "soft,nosharecache,timeo=%d,retrans=%d", r->timeo > 0 ? r->timeo : 100,
		   r->retrans > 0 ? r->retrans : 3);
	/* absent: NFSv3 (VDSM's default); "auto": let mount negotiate */
	const char *v = r->protocol_version && *r->protocol_version ? r->protocol_version : "3";
	bool v3_or_auto = strcmp(v, "auto") == 0 || strcmp(v, "3") == 0;
	if (strcmp(v, "auto") != 0) {
		int ma, mi;
		if (!nfs_version(v, &ma, &mi)) {
			snprintf(msg, msglen, "protocol_version %s: expected auto, 3, 4, 4.0, 4.1 or 4.2",
				 v);
			return ST_CONN_BAD;
		}
		buf_printf(o, ",nfsvers=%d", ma);
		if (mi >= 0)
			buf_printf(o, ",minorversion=%d", mi);
	}
	const char *extra = r->mnt_options ? r->mnt_options : "";
	for (const char *p = extra; *p;) {   /* empty items dropped */
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len)
			buf_printf(o, ",%.*s", (int)len, p);
		p = c ? c + 1 : p + len;
	}
	/* NFSv3 remote locks break HA VM failover: local locks unless the
	 * engine asked for "lock" (VDSM, bz 1550127). */
	if (v3_or_auto && !has_option(extra, "lock") && !has_option(extra, "nolock"))
		buf_printf(o, ",nolock");
	return 0;
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

void st_mount_cmd_free(struct st_mount_cmd *m)
{
	free(m->spec);
	free(m->mountpoint);
	free(m->opts);
	memset(m, 0, sizeof(*m));
}

int st_conn_mount_cmd(const char *root, int domtype, const struct st_conn_req *r,
		      struct st_mount_cmd *m, char *msg, size_t msglen)
{
	memset(m, 0, sizeof(*m));
	msg[0] = '\0';
	const char *spec = r->connection;
	if (!spec || !*spec || spec[0] == '-' || !text_ok(spec, 1024) ||
	    !text_ok(r->mnt_options, 1024) || !text_ok(r->vfs_type, 64) ||
	    (r->mnt_options && r->mnt_options[0] == '-') || (r->vfs_type && r->vfs_type[0] == '-')) {
		snprintf(msg, msglen, "invalid connection parameters");
		return ST_CONN_BAD;
	}
	if (domtype != ST_DT_NFS && domtype != ST_DT_POSIXFS) {
		snprintf(msg, msglen, "storage type %d cannot be mounted", domtype);
		return ST_CONN_TYPE;
	}
	if (domtype == ST_DT_POSIXFS && (!r->vfs_type || !*r->vfs_type)) {
		snprintf(msg, msglen, "POSIXFS needs vfs_type");
		return ST_CONN_BAD;
	}
	m->spec = st_conn_normalize(spec);
	if (!m->spec || m->spec[0] == '-' || !st_conn_spec_canonical(m->spec)) {
		snprintf(msg, msglen, "%s is not a valid host:path (no \".\" or \"..\" "
			 "components)", spec);
		st_mount_cmd_free(m);
		return ST_CONN_BAD;
	}
	struct vd_buf o = VD_BUF_INIT;
	if (domtype == ST_DT_NFS) {
		int rc = nfs_options(r, &o, msg, msglen);
		if (rc) {
			buf_free(&o);
			st_mount_cmd_free(m);
			return rc;
		}
	} else if (r->mnt_options && *r->mnt_options) {
		buf_puts(&o, r->mnt_options);
	}
	m->opts = o.len ? xstrndup(o.data, o.len) : NULL;
	buf_free(&o);
	m->mountpoint = st_conn_mountpoint_at(root, m->spec);
	int n = 0;
	m->argv[n++] = (char *)"mount";
	m->argv[n++] = (char *)"-t";
	m->argv[n++] = (char *)(domtype == ST_DT_NFS ? "nfs" : r->vfs_type);
	if (m->opts) {
		m->argv[n++] = (char *)"-o";
		m->argv[n++] = m->opts;
	}
	m->argv[n++] = m->spec;
	m->argv[n++] = m->mountpoint;
	m->argv[n] = NULL;
	return 0;
}

int st_conn_connect(struct storage_state *s, int domtype, const struct st_conn_req *r,
		    char *msg, size_t msglen)
{
	msg[0] = '\0';
	if (domtype == ST_DT_LOCALFS) {
		if (!r->connection || !*r->connection || !text_ok(r->connection, 1024)) {
			snprintf(msg, msglen, "invalid connection parameters");
			return ST_CONN_BAD;
		}
		int st = check_localfs(r->connection, msg, msglen);
		if (st == 0)
			st_conn_note_localfs(s, r->connection);
		return st;
	}
	struct st_mount_cmd m;
	int status = st_conn_mount_cmd(s->root, domtype, r, &m, msg, msglen);
	if (status || !m.mountpoint)  /* (a 0 status always sets the mount point) */
		return status ? status : ST_CONN_BAD;
	/* the mount root is checked before anything is made in it, the mount
	 * point after: mount(8) would follow a symlink and mount elsewhere */
	char *mnt = st_path(s->root, "mnt");
	int rc = st_mkdir_p(mnt, 0755);
	bool linked = rc == 0 && !real_dir(mnt);
	if (rc == 0 && !linked && (rc = st_mkdir(m.mountpoint, 0755)) == VD_ESYS(EEXIST))
		rc = 0;
	free(mnt);
	if (rc < 0) {
		st_errf(msg, msglen, rc, "cannot create mount point %s", m.mountpoint);
		status = ST_CONN_MOUNT;
	} else if (linked || !mount_root_ok(s, m.mountpoint)) {
		snprintf(msg, msglen, "mount point %s or the mount root is not a directory "
			 "(symlinks refused)", m.mountpoint);
		status = ST_CONN_MOUNT;
	} else if (st_is_mounted(m.mountpoint)) {
		log_info("storage: %s already mounted on %s", m.spec, m.mountpoint);
	} else {
		char err[512];
		rc = st_run_tool(NULL, "mount", "mount", m.argv, -1, err, sizeof(err));
		if (rc < 0) {
			snprintf(msg, msglen, "%s", err);
			status = ST_CONN_MOUNT;
			rmdir(m.mountpoint);
		} else {
			log_info("storage: mounted %s on %s (%s)", m.spec, m.mountpoint,
				 m.opts ? m.opts : "defaults");
		}
	}
	st_mount_cmd_free(&m);
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
	char *norm = st_conn_normalize(r->connection);
	bool canonical = norm && st_conn_spec_canonical(norm);
	free(norm);
	if (!canonical) {
		/* connect refused it: nothing of ours is mounted for it, and its
		 * mount point would be the mount root or the storage root */
		snprintf(msg, msglen, "%s is not a valid host:path (no \".\" or \"..\" "
			 "components)", r->connection);
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
		/* VDSM: umount -f -l (a dead NFS server cannot hang it) */
		char *argv[] = { (char *)"umount", (char *)"-f", (char *)"-l", mp, NULL };
		char err[512];
		if (st_run_tool(NULL, "umount", "mount", argv, -1, err, sizeof(err)) < 0) {
			snprintf(msg, msglen, "%s", err);
			status = ST_CONN_DISC_ERR;
		}
	}
	int rc = status == 0 ? st_rmdir(mp) : 0;
	if (rc < 0 && rc != VD_ESYS(ENOENT))
		log_warn("storage: disconnect: cannot remove %s: %s", mp, st_rc_text(rc));
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

