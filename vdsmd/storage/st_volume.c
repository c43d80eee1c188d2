/* vdsmd/storage/st_volume.c - volume files: images/<imgUUID>/<volUUID> data,
 * <volUUID>.meta metadata and, on domains with volume leases, the
 * <volUUID>.lease file (VDSM's fileVolume.newVolumeLease).
 *
 * RAW sparse: ftruncate.  RAW preallocated: fallocate in chunks (falling back
 * to writing zeros when the filesystem cannot), with progress and abort
 * checks between chunks.  COW: qcow2 through `qemu-img create`, with a
 * relative backing file for snapshots.  Errors leave no data file behind. */
#include "st_crash.h"
#include "st_model.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PREALLOC_CHUNK ((off_t)64 << 20)
#define ZERO_CHUNK ((size_t)1 << 20)

extern char **environ;

const char *st_volfmt_name(int f)
{
	return f == ST_FMT_COW ? "COW" : "RAW";
}

const char *st_alloc_name(int a)
{
	return a == ST_PREALLOCATED ? "PREALLOCATED" : "SPARSE";
}

/* VDSM's hasVolumeLeases: sanlock domains (NFS / POSIXFS of version 3 and
 * up); LOCALFS uses LocalLock, versions 0-2 SafeLease, neither has them. */
bool st_dom_has_volume_leases(const struct st_domain *d)
{
	return d->type != ST_DT_LOCALFS && d->version >= 3;
}

/* <vol>.lease beside the data file, empty: VDSM truncates it to its offset
 * (0) and then has sanlock write the resource; vdsmd takes no volume
 * leases (no sanlock), so the file is there for what reads the path. */
static int make_lease(int ifd, const char *vol, char *err, size_t errlen)
{
	char name[48];
	snprintf(name, sizeof(name), "%.36s" ST_LEASE_EXT, vol);
	int fd = openat(ifd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0660);
	int rc = fd < 0 ? vd_sys(errno) : 0;
	if (fd >= 0) {
		if (fsync(fd) < 0)
			rc = vd_sys(errno);
		close(fd);
	}
	if (rc < 0)
		st_errf(err, errlen, rc, "creating volume lease %s", name);
	return rc;
}

static int write_zeros(int fd, off_t off, off_t len)
{
	static const char zeros[65536];
	while (len > 0) {
		size_t n = (size_t)VD_MIN(len, (off_t)sizeof(zeros));
		ssize_t w = pwrite(fd, zeros, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return vd_sys(errno);
		off += w;
		len -= w;
	}
	return 0;
}

static void vol_to_kv(const struct st_domain *d, const struct st_volume *v, struct st_kv *kv)
{
	kv_init(kv);
	kv_set(kv, "DOMAIN", d->uuid);
	kv_set(kv, "IMAGE", v->image);
	kv_set(kv, "PUUID", v->parent);
	kv_setf(kv, "CAP", "%lld", (long long)v->capacity);
	kv_set(kv, "FORMAT", st_volfmt_name(v->format));
	kv_set(kv, "TYPE", st_alloc_name(v->alloc));
	kv_set(kv, "DISKTYPE", v->disktype);
	kv_set(kv, "DESCRIPTION", v->description ? v->description : "");
	kv_set(kv, "LEGALITY", v->legal ? "LEGAL" : "ILLEGAL");
	if (v->shared)   /* LEAF/INTERNAL are derived from the chain, never written */
		kv_set(kv, "VOLTYPE", "SHARED");
	kv_setf(kv, "CTIME", "%lld", (long long)v->ctime);
	kv_setf(kv, "MTIME", "%lld", (long long)v->mtime);
	kv_setf(kv, "GEN", "%u", v->generation);
	kv_setf(kv, "SEQ", "%d", v->sequence);
}

int st_vol_write_meta(const struct st_domain *d, const struct st_volume *v)
{
	int ifd = st_img_open(d, v->image, false);
	if (ifd < 0)
		return ifd;
	struct st_kv kv;
	vol_to_kv(d, v, &kv);
	char name[48];
	snprintf(name, sizeof(name), "%.36s.meta", v->uuid);
	int rc = kv_write_at(&kv, ifd, name);
	close(ifd);
	kv_free(&kv);
	return rc;
}

int st_vol_read_meta_at(int ifd, const char *name, struct st_volume *v)
{
	struct st_kv kv;
	int rc = kv_read_at(&kv, ifd, name);
	if (rc)
		return rc;
	const char *fmt = kv_get(&kv, "FORMAT"), *type = kv_get(&kv, "TYPE");
	const char *leg = kv_get(&kv, "LEGALITY"), *pu = kv_get(&kv, "PUUID");
	const char *img = kv_get(&kv, "IMAGE");
	int64_t cap = kv_get_int(&kv, "CAP", -1);
	if (!fmt || !type || !leg || !st_is_uuid(pu) || !img || strcmp(img, v->image) != 0 ||
	    cap <= 0 || (strcmp(fmt, "RAW") != 0 && strcmp(fmt, "COW") != 0)) {
		kv_free(&kv);
		return VD_EPROTO;
	}
	v->format = strcmp(fmt, "COW") == 0 ? ST_FMT_COW : ST_FMT_RAW;
	v->alloc = strcmp(type, "PREALLOCATED") == 0 ? ST_PREALLOCATED : ST_SPARSE;
	v->legal = strcmp(leg, "LEGAL") == 0;
	v->shared = kv_get(&kv, "VOLTYPE") && strcmp(kv_get(&kv, "VOLTYPE"), "SHARED") == 0;
	snprintf(v->parent, sizeof(v->parent), "%.36s", pu);
	v->capacity = cap;
	snprintf(v->disktype, sizeof(v->disktype), "%s",
		 kv_get(&kv, "DISKTYPE") ? kv_get(&kv, "DISKTYPE") : "DATA");
	free(v->description);
	v->description = xstrdup(kv_get(&kv, "DESCRIPTION") ? kv_get(&kv, "DESCRIPTION") : "");
	v->ctime = kv_get_int(&kv, "CTIME", 0);
	v->mtime = kv_get_int(&kv, "MTIME", 0);
	v->generation = (unsigned)kv_get_int(&kv, "GEN", 0);
	v->sequence = (int)kv_get_int(&kv, "SEQ", 0);
	kv_free(&kv);
	return 0;
}

int st_vol_stat(const struct st_domain *d, const char *img, const char *vol, int64_t *apparent,
		int64_t *truesize)
{
	int ifd = st_img_open(d, img, false);
	if (ifd < 0)
		return ifd;
	struct stat st;
	int rc = fstatat(ifd, vol, &st, AT_SYMLINK_NOFOLLOW) < 0 ? vd_sys(errno)
		 : S_ISREG(st.st_mode) ? 0 : VD_ESYS(ELOOP);
	close(ifd);
	if (rc == 0) {
		*apparent = st.st_size;
		*truesize = (int64_t)st.st_blocks * 512;
	}
	return rc;
}

int st_vol_unlink(const struct st_domain *d, const char *img, const char *vol, bool meta)
{
	int ifd = st_img_open(d, img, false);
	if (ifd < 0)
		return ifd == VD_ESYS(ENOENT) ? 0 : ifd;
	char name[48];
	snprintf(name, sizeof(name), "%.36s%s", vol, meta ? ".meta" : "");
	int rc = unlinkat(ifd, name, 0) < 0 && errno != ENOENT ? vd_sys(errno) : 0;
	/* the lease goes with the data (fileVolume.delete: rmFile of both) */
	snprintf(name, sizeof(name), "%.36s" ST_LEASE_EXT, vol);
	if (rc == 0 && !meta && unlinkat(ifd, name, 0) < 0 && errno != ENOENT)
		rc = vd_sys(errno);
	if (rc == 0 && fsync(ifd) < 0)
		rc = vd_sys(errno);
	close(ifd);
	return rc;
}

int st_vol_scrub(const struct st_domain *d, const char *img, const char *vol, bool zero,
		 bool discard)
{
	int ifd = st_img_open(d, img, false);
	if (ifd < 0)
		return ifd;
	int fd = openat(ifd, vol, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	int rc = fd < 0 ? (errno == ENOENT ? 0 : vd_sys(errno)) : 0;
	close(ifd);
	if (fd < 0)
		return rc;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return VD_ESYS(EINVAL);
	}
	if (zero) {
		/* Only what is allocated holds data: holes read as zeros
		 * already (and zeroing them could fill the filesystem). */
		off_t o = 0;
		while (rc == 0 && o < st.st_size) {
			off_t data = lseek(fd, o, SEEK_DATA);
			if (data < 0)
				break;   /* ENXIO: no data after o */
			off_t hole = lseek(fd, data, SEEK_HOLE);
			if (hole < 0)
				hole = st.st_size;
			for (off_t p = data; p < hole && rc == 0; p += (off_t)ZERO_CHUNK)
				rc = write_zeros(fd, p, VD_MIN((off_t)ZERO_CHUNK, hole - p));
			o = hole;
		}
		if (rc == 0 && fdatasync(fd) < 0)
			rc = vd_sys(errno);
	}
	if (rc == 0 && discard && st.st_size > 0 &&
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, st.st_size) < 0 &&
	    errno != EOPNOTSUPP)
		rc = vd_sys(errno);
	close(fd);
	return rc;
}

int st_file_grow(int fd, const char *name, off_t old, off_t size, bool prealloc)
{
	int rc = ftruncate(fd, size) < 0 ? vd_sys(errno) : 0;
	if (rc == 0 && prealloc && size > old && fallocate(fd, 0, old, size - old) < 0 &&
	    errno != EOPNOTSUPP)
		rc = vd_sys(errno);
	if (rc < 0 && ftruncate(fd, old) < 0)
		log_error("storage: volume %s: cannot shrink back: %s", name, strerror(errno));
	return rc;
}

/* ---- data creation ------------------------------------------------------- */

static bool io_stopped(const struct st_io *io, char *err, size_t errlen)
{
	return io && io->stopped && io->stopped(io->ctx, err, errlen);
}

static void io_progress(const struct st_io *io, int64_t done, int64_t total)
{
	if (!io || !io->progress || total <= 0)
		return;
	io->progress(io->ctx, (int)(done * 100 / total));
}

static int preallocate(const struct st_vol_spec *sp, const struct st_io *io, int fd,
		       int64_t size, char *err, size_t errlen)
{
#ifdef VD_TEST_HOOKS
	bool use_write = sp->prealloc_force_write;
#else
	bool use_write = false;
	(void)sp;
#endif
	for (off_t off = 0; off < size;) {
		if (io_stopped(io, err, errlen))
			return VD_ECANCELED;
		off_t len = VD_MIN(PREALLOC_CHUNK, (off_t)size - off);
		int rc = 0;
		if (!use_write) {
			if (fallocate(fd, 0, off, len) < 0) {
				rc = vd_sys(errno);
				if (rc == VD_ESYS(EOPNOTSUPP)) {
					use_write = true;
					rc = 0;
					continue;
				}
			}
		} else {
			for (off_t o = off; o < off + len && rc == 0; o += (off_t)ZERO_CHUNK)
				rc = write_zeros(fd, o, VD_MIN((off_t)ZERO_CHUNK, off + len - o));
		}
		if (rc < 0) {
			return st_errf(err, errlen, rc, "preallocating %lld bytes", (long long)size);
		}
		off += len;
		io_progress(io, off, size);
		ST_CRASH("create.prealloc-chunk");
#ifdef VD_TEST_HOOKS
		if (sp->prealloc_chunk_delay_us)
			usleep(sp->prealloc_chunk_delay_us);
#endif
	}
	return 0;
}

/* qemu-img runs through posix_spawn.  It never gets a path we did not
 * check: the data file is created here (openat O_EXCL|O_NOFOLLOW under the
 * image directory descriptor) and handed to the child as descriptor 3, which
 * qemu-img opens as /proc/self/fd/3; a backing file is recorded with -u
 * (not opened: its relative name is resolved by readers against the
 * volume's real directory).  The child's pid goes to io->child, whose
 * owner (a task, a job) kills it when the work is stopped; the thread that
 * spawned it always reaps it.  Output goes to a pipe (first 512 bytes kept
 * for the error message). */
char *st_find_exe(const char *name)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		const char *c = strchr(p, ':');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		if (n) {
			char *cand = st_pathf("%.*s/%s", (int)n, p, name);
			if (access(cand, X_OK) == 0)
				return cand;
			free(cand);
		}
		p += n + (c ? 1 : 0);
	}
	return NULL;
}

static void set_child(const struct st_io *io, pid_t pid)
{
	if (io && io->child)
		io->child(io->ctx, pid);
}

int st_run_qemu_img(const struct st_io *io, char *const argv[], int datafd, char *err,
		    size_t errlen)
{
	return st_run_tool(io, "qemu-img", "qemu-utils", argv, datafd, err, errlen);
}

int st_run_tool(const struct st_io *io, const char *tool, const char *pkg, char *const argv[],
		int datafd, char *err, size_t errlen)
{
	return st_run_tool_out(io, tool, pkg, argv, datafd, NULL, err, errlen);
}

int st_run_tool_out(const struct st_io *io, const char *tool, const char *pkg,
		    char *const argv[], int datafd, struct vd_buf *output, char *err,
		    size_t errlen)
{
	return st_run_tool_cb(io, tool, pkg, argv, datafd, output, NULL, NULL, err, errlen);
}

int st_spawn_tool(const char *exe, char *const argv[], int outfd, int datafd, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, outfd, 1);
	posix_spawn_file_actions_adddup2(&fa, outfd, 2);
	if (datafd >= 0)
		posix_spawn_file_actions_adddup2(&fa, datafd, 3);
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	*pid = -1;
	int serr = posix_spawn(pid, exe, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return serr;
}

int st_run_tool_cb(const struct st_io *io, const char *tool, const char *pkg,
		   char *const argv[], int datafd, struct vd_buf *output,
		   void (*cb)(void *ctx, const char *data, size_t n), void *ctx, char *err,
		   size_t errlen)
{
	char *exe = st_find_exe(tool);
	if (!exe) {
		snprintf(err, errlen, "%s not found in PATH (install %s)", tool, pkg);
		return VD_ESYS(ENOENT);
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		int e = errno;
		free(exe);
		snprintf(err, errlen, "pipe: %s", strerror(e));
		return vd_sys(e);
	}
	pid_t pid = -1;
	int serr = st_spawn_tool(exe, argv, pfd[1], datafd, &pid);
	free(exe);
	close(pfd[1]);
	if (serr != 0) {
		close(pfd[0]);
		snprintf(err, errlen, "cannot run qemu-img: %s", strerror(serr));
		return vd_sys(serr);
	}
	set_child(io, pid);
#ifdef VD_TEST_HOOKS
	if (io && io->crash_step)
		st_crash_point(io->crash_step);
#endif
	char out[512];
	size_t got = 0;
	for (;;) {
		char tmp[512];
		ssize_t r = read(pfd[0], tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (output && output->len < ((size_t)1 << 20))
			buf_append(output, tmp, (size_t)r);
		if (cb)
			cb(ctx, tmp, (size_t)r);
		size_t take = VD_MIN((size_t)r, sizeof(out) - 1 - got);
		memcpy(out + got, tmp, take);
		got += take;
	}
	out[got] = '\0';
	close(pfd[0]);
	int status = 0;
	pid_t w;
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	set_child(io, 0);
	const char *what = argv[1] ? argv[1] : "";
	if (w != pid) {
		snprintf(err, errlen, "%s %s: cannot get its exit status: %s", tool, what,
			 strerror(errno));
		return VD_EIO;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	while (got && (out[got - 1] == '\n' || out[got - 1] == ' '))
		out[--got] = '\0';
	for (char *p = out; *p; p++)
		if (*p == '\n')
			*p = ' ';
	if (io_stopped(io, err, errlen))
		return VD_ECANCELED;
	/* "-p" progress lines end in '\r': the message is what follows */
	const char *msg = strrchr(out, '\r') ? strrchr(out, '\r') + 1 : out;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) {
		/* past RLIMIT_FSIZE (a tool that does not ignore SIGXFSZ) */
		snprintf(err, errlen, "%s %s: file size limit exceeded: File too large", tool, what);
		return VD_ESYS(EFBIG);
	}
	if (WIFSIGNALED(status))
		snprintf(err, errlen, "%s %s killed by signal %d: %s", tool, what, WTERMSIG(status),
			 *msg ? msg : "(no output)");
	else
		snprintf(err, errlen, "%s %s failed (exit %d): %s", tool, what, WEXITSTATUS(status),
			 *msg ? msg : "(no output)");
	if (strstr(out, "No space left"))
		return VD_ESYS(ENOSPC);   /* what the tool's own call failed with */
	if (strstr(out, "too large"))
		return VD_ESYS(EFBIG);
	return VD_EIO;   /* the tool failed: err says how */
}

/* The qcow2 header says what qemu-img made: magic, version, virtual size. */
static int check_qcow2(int fd, int64_t size, char *err, size_t errlen)
{
	unsigned char h[32] = { 0 };
	ssize_t r = pread(fd, h, sizeof(h), 0);
	uint64_t vsize = 0;
	for (int i = 0; i < 8; i++)
		vsize = vsize << 8 | h[24 + i];
	if (r != (ssize_t)sizeof(h) || memcmp(h, "QFI\xfb", 4) != 0 || vsize != (uint64_t)size) {
		snprintf(err, errlen, "qemu-img create did not produce a %lld-byte qcow2 image",
			 (long long)size);
		return VD_EIO;
	}
	return 0;
}

static bool has_parent(const struct st_vol_spec *t)
{
	return t->parent && t->parent[0] && strcmp(t->parent, ST_BLANK_UUID) != 0;
}

static int create_cow(const struct st_vol_spec *t, const struct st_io *io, int fd, char *err,
		      size_t errlen)
{
	char size[32], backing[128];
	snprintf(size, sizeof(size), "%lld", (long long)t->size);
	char *argv[20];
	int n = 0;
	argv[n++] = (char *)"qemu-img";
	argv[n++] = (char *)"create";
	argv[n++] = (char *)"-q";
	argv[n++] = (char *)"-f";
	argv[n++] = (char *)"qcow2";
	argv[n++] = (char *)"-o";
	argv[n++] = (char *)(t->alloc == ST_PREALLOCATED ? "compat=1.1,preallocation=falloc"
							 : "compat=1.1");
	if (has_parent(t)) {
		if (strcmp(t->parent_img, t->img) == 0)
			snprintf(backing, sizeof(backing), "%s", t->parent);
		else
			snprintf(backing, sizeof(backing), "../%s/%s", t->parent_img, t->parent);
		argv[n++] = (char *)"-u";
		argv[n++] = (char *)"-b";
		argv[n++] = backing;
		argv[n++] = (char *)"-F";
		argv[n++] = (char *)(t->parent_format == ST_FMT_COW ? "qcow2" : "raw");
	}
	argv[n++] = (char *)"/proc/self/fd/3";
	argv[n++] = size;
	argv[n] = NULL;
	return st_run_qemu_img(io, argv, fd, err, errlen);
}

int st_vol_create_data(const struct st_domain *d, const struct st_vol_spec *t,
		       const struct st_io *io, char *err, size_t errlen)
{
	if (has_parent(t)) {
		/* qemu-img does not open the backing file (-u): check it here,
		 * through the domain's descriptors like everything else. */
		int64_t app, tru;
		int prc = st_vol_stat(d, t->parent_img, t->parent, &app, &tru);
		if (prc < 0) {
			return st_errf(err, errlen, prc, "parent volume %s/%s: data file unusable",
				       t->parent_img, t->parent);
		}
	}
	int ifd = st_img_open(d, t->img, false);
	if (ifd < 0) {
		return st_errf(err, errlen, ifd, "opening image directory %s", t->img);
	}
	int rc = 0;
	int fd = openat(ifd, t->vol, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0660);
	if (fd < 0) {
		rc = st_errf(err, errlen, vd_sys(errno), "creating volume %s", t->vol);
		close(ifd);
		return rc;   /* not ours: nothing to remove */
	}
	ST_CRASH("create.data-file");
	if (t->format == ST_FMT_COW) {
		rc = create_cow(t, io, fd, err, errlen);
		if (rc == 0)
			ST_CRASH("create.cow-written");
		if (rc == 0)
			rc = check_qcow2(fd, t->size, err, errlen);
	} else if (t->alloc == ST_PREALLOCATED) {
		rc = preallocate(t, io, fd, t->size, err, errlen);
		if (rc == 0 && ftruncate(fd, t->size) < 0) {
			rc = st_errf(err, errlen, vd_sys(errno), "sizing to %lld bytes", (long long)t->size);
		}
	} else if (ftruncate(fd, t->size) < 0) {
		rc = st_errf(err, errlen, vd_sys(errno), "truncating to %lld bytes", (long long)t->size);
	}
	if (rc == 0 && fsync(fd) < 0) {
		rc = st_errf(err, errlen, vd_sys(errno), "syncing volume %s", t->vol);
	}
	if (rc == 0)
		ST_CRASH("create.data-synced");
	close(fd);
	if (rc == 0 && st_dom_has_volume_leases(d)) {
		rc = make_lease(ifd, t->vol, err, errlen);
		if (rc == 0 && fsync(ifd) < 0) {
			rc = st_errf(err, errlen, vd_sys(errno), "syncing image directory %s", t->img);
		}
		if (rc == 0)
			ST_CRASH("create.lease");
	}
	if (rc < 0) {
		char lname[48];
		snprintf(lname, sizeof(lname), "%.36s" ST_LEASE_EXT, t->vol);
		unlinkat(ifd, lname, 0);
		unlinkat(ifd, t->vol, 0);
		fsync(ifd);
	}
	close(ifd);
	return rc;
}
