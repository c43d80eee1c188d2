/* vdsmd/storage/st_volume.c - volume files: images/<imgUUID>/<volUUID> data
 * and <volUUID>.meta metadata.
 *
 * RAW sparse: ftruncate.  RAW preallocated: fallocate in chunks (falling back
 * to writing zeros when the filesystem cannot), with progress and abort
 * checks between chunks.  COW: qcow2 through `qemu-img create`, with a
 * relative backing file for snapshots.  Errors leave no data file behind. */
#include "st.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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

char *st_img_dir(const struct st_domain *d, const char *img)
{
	return st_pathf("%s/images/%s", d->dir, img);
}

char *st_vol_data_path(const struct st_domain *d, const char *img, const char *vol)
{
	return st_pathf("%s/images/%s/%s", d->dir, img, vol);
}

char *st_vol_meta_path(const struct st_domain *d, const char *img, const char *vol)
{
	return st_pathf("%s/images/%s/%s.meta", d->dir, img, vol);
}

int st_vol_write_meta(const struct st_domain *d, const struct st_volume *v)
{
	struct st_kv kv;
	kv_init(&kv);
	kv_set(&kv, "DOMAIN", d->uuid);
	kv_set(&kv, "IMAGE", v->image);
	kv_set(&kv, "PUUID", v->parent);
	kv_setf(&kv, "CAP", "%lld", (long long)v->capacity);
	kv_set(&kv, "FORMAT", st_volfmt_name(v->format));
	kv_set(&kv, "TYPE", st_alloc_name(v->alloc));
	kv_set(&kv, "DISKTYPE", v->disktype);
	kv_set(&kv, "DESCRIPTION", v->description ? v->description : "");
	kv_set(&kv, "LEGALITY", v->legal ? "LEGAL" : "ILLEGAL");
	kv_setf(&kv, "CTIME", "%lld", (long long)v->ctime);
	kv_setf(&kv, "MTIME", "%lld", (long long)v->mtime);
	kv_setf(&kv, "GEN", "%u", v->generation);
	char *path = st_vol_meta_path(d, v->image, v->uuid);
	int rc = kv_write_file(&kv, path);
	free(path);
	kv_free(&kv);
	return rc;
}

int st_vol_read_meta(const char *path, struct st_volume *v)
{
	struct st_kv kv;
	int rc = kv_read_file(&kv, path);
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
	snprintf(v->parent, sizeof(v->parent), "%.36s", pu);
	v->capacity = cap;
	snprintf(v->disktype, sizeof(v->disktype), "%s",
		 kv_get(&kv, "DISKTYPE") ? kv_get(&kv, "DISKTYPE") : "DATA");
	free(v->description);
	v->description = xstrdup(kv_get(&kv, "DESCRIPTION") ? kv_get(&kv, "DESCRIPTION") : "");
	v->ctime = kv_get_int(&kv, "CTIME", 0);
	v->mtime = kv_get_int(&kv, "MTIME", 0);
	v->generation = (unsigned)kv_get_int(&kv, "GEN", 0);
	kv_free(&kv);
	return 0;
}

void st_vol_stat(const struct st_domain *d, struct st_volume *v)
{
	char *p = st_vol_data_path(d, v->image, v->uuid);
	struct stat st;
	if (stat(p, &st) == 0) {
		v->apparent = st.st_size;
		v->truesize = (int64_t)st.st_blocks * 512;
	}
	free(p);
}

/* ---- data creation ------------------------------------------------------- */

static bool task_aborted(struct storage_state *s, struct st_task *t)
{
	return t && __atomic_load_n(&t->abort, __ATOMIC_ACQUIRE);
}

static void task_progress(struct storage_state *s, struct st_task *t, int64_t done, int64_t total)
{
	if (!t || total <= 0)
		return;
	int pct = (int)(done * 100 / total);
	pthread_mutex_lock(&s->lock);
	t->progress = pct;
	pthread_mutex_unlock(&s->lock);
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
			return -errno;
		off += w;
		len -= w;
	}
	return 0;
}

static int preallocate(struct storage_state *s, struct st_task *t, int fd, int64_t size,
		       char *err, size_t errlen)
{
#ifdef VD_TEST_HOOKS
	bool use_write = s->prealloc_force_write;
#else
	bool use_write = false;
#endif
	for (off_t off = 0; off < size;) {
		if (task_aborted(s, t)) {
			snprintf(err, errlen, "Task is aborted: %s", t->abort_why);
			return -ECANCELED;
		}
		off_t len = VD_MIN(PREALLOC_CHUNK, (off_t)size - off);
		int rc = 0;
		if (!use_write) {
			if (fallocate(fd, 0, off, len) < 0) {
				rc = -errno;
				if (rc == -EOPNOTSUPP) {
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
			snprintf(err, errlen, "preallocating %lld bytes: %s", (long long)size,
				 strerror(-rc));
			return rc;
		}
		off += len;
		task_progress(s, t, off, size);
#ifdef VD_TEST_HOOKS
		if (s->prealloc_chunk_delay_us)
			usleep(s->prealloc_chunk_delay_us);
#endif
	}
	return 0;
}

/* qemu-img is started with PR_SET_PDEATHSIG so that it dies with vdsmd (a
 * kill -9 leaves no orphan writing behind the restart's scan).  Success is
 * its exit status 0 (the daemon's loop is an ev_loop_new loop, which does
 * not reap children; see daemon_init), plus a valid qcow2 header of the
 * requested size (checked by the caller). */
struct qemu_child {
	const char *exe;
	char *const *argv;
	int out;   /* write end of the output pipe */
};

static int qemu_child_main(void *arg)
{
	const struct qemu_child *q = arg;
	int nul = open("/dev/null", O_RDONLY);
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(q->out, 1) < 0 || dup2(q->out, 2) < 0)
		_exit(126);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	execve(q->exe, q->argv, environ);
	_exit(127);
}

static char *find_exe(const char *name)
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

static int run_qemu_img(char *const argv[], char *err, size_t errlen)
{
	char *exe = find_exe("qemu-img");
	if (!exe) {
		snprintf(err, errlen, "qemu-img not found in PATH (install qemu-utils)");
		return -ENOENT;
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		int e = errno;
		free(exe);
		snprintf(err, errlen, "pipe: %s", strerror(e));
		return -e;
	}
	struct qemu_child q = { exe, argv, pfd[1] };
	size_t stack_size = 64 * 1024;
	char *stack = xmalloc(stack_size);
#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer cannot follow a CLONE_VM child (it runs its
	 * interceptors on the calling thread's sanitizer state and corrupts
	 * it): the TSan build (make tsan) forks. */
	pid_t pid = fork();
	if (pid == 0)
		qemu_child_main(&q);
#else
	/* CLONE_VM|CLONE_VFORK: like vfork, the parent resumes after exec. */
	pid_t pid = clone(qemu_child_main, stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &q);
#endif
	int cerr = errno;
	free(stack);
	free(exe);
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		snprintf(err, errlen, "cannot run qemu-img: %s", strerror(cerr));
		return -cerr;
	}
	char out[512];
	size_t got = 0;
	for (;;) {
		char tmp[512];
		ssize_t r = read(pfd[0], tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
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
	if (w != pid) {
		snprintf(err, errlen, "qemu-img create: cannot get its exit status: %s",
			 strerror(errno));
		return -EIO;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	while (got && (out[got - 1] == '\n' || out[got - 1] == ' '))
		out[--got] = '\0';
	for (char *p = out; *p; p++)
		if (*p == '\n')
			*p = ' ';
	if (WIFSIGNALED(status))
		snprintf(err, errlen, "qemu-img create killed by signal %d: %s", WTERMSIG(status),
			 got ? out : "(no output)");
	else
		snprintf(err, errlen, "qemu-img create failed (exit %d): %s", WEXITSTATUS(status),
			 got ? out : "(no output)");
	if (strstr(out, "No space left"))
		return -ENOSPC;
	if (strstr(out, "too large"))
		return -EFBIG;
	return -EIO;
}

/* The qcow2 header says what qemu-img made: magic, version, virtual size. */
static int check_qcow2(const char *path, int64_t size, char *err, size_t errlen)
{
	unsigned char h[32] = { 0 };  /* read below even when pread fails */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t r = fd >= 0 ? pread(fd, h, sizeof(h), 0) : -1;
	if (fd >= 0)
		close(fd);
	uint64_t vsize = 0;
	for (int i = 0; i < 8; i++)
		vsize = vsize << 8 | h[24 + i];
	if (r != (ssize_t)sizeof(h) || memcmp(h, "QFI\xfb", 4) != 0 || vsize != (uint64_t)size) {
		snprintf(err, errlen, "qemu-img create did not produce a %lld-byte qcow2 image",
			 (long long)size);
		return -EIO;
	}
	return 0;
}

static int create_cow(struct st_task *t, const char *path, char *err, size_t errlen)
{
	char size[32], backing[128];
	snprintf(size, sizeof(size), "%lld", (long long)t->size);
	char *argv[16];
	int n = 0;
	argv[n++] = (char *)"qemu-img";
	argv[n++] = (char *)"create";
	argv[n++] = (char *)"-q";
	argv[n++] = (char *)"-f";
	argv[n++] = (char *)"qcow2";
	argv[n++] = (char *)"-o";
	argv[n++] = (char *)(t->alloc == ST_PREALLOCATED ? "compat=1.1,preallocation=falloc"
							 : "compat=1.1");
	if (t->parent[0] && strcmp(t->parent, ST_BLANK_UUID) != 0) {
		if (strcmp(t->parent_img, t->img) == 0)
			snprintf(backing, sizeof(backing), "%s", t->parent);
		else
			snprintf(backing, sizeof(backing), "../%s/%s", t->parent_img, t->parent);
		argv[n++] = (char *)"-b";
		argv[n++] = backing;
		argv[n++] = (char *)"-F";
		argv[n++] = (char *)(t->parent_format == ST_FMT_COW ? "qcow2" : "raw");
	}
	argv[n++] = (char *)path;
	argv[n++] = size;
	argv[n] = NULL;
	return run_qemu_img(argv, err, errlen);
}

int st_vol_create_data(struct storage_state *s, struct st_task *t, const struct st_domain *d,
		       char *err, size_t errlen)
{
	char *path = st_vol_data_path(d, t->img, t->vol);
	int rc = 0;
	if (t->format == ST_FMT_COW) {
		rc = create_cow(t, path, err, errlen);
		if (rc == 0)
			rc = check_qcow2(path, t->size, err, errlen);
		if (rc == 0) {
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0 || fsync(fd) < 0) {
				rc = -errno;
				snprintf(err, errlen, "syncing %s: %s", path, strerror(-rc));
			}
			if (fd >= 0)
				close(fd);
		}
		goto out;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0660);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "creating %s: %s", path, strerror(-rc));
		goto out;
	}
	if (t->alloc == ST_PREALLOCATED) {
		rc = preallocate(s, t, fd, t->size, err, errlen);
		if (rc == 0 && ftruncate(fd, t->size) < 0) {
			rc = -errno;
			snprintf(err, errlen, "sizing to %lld bytes: %s", (long long)t->size,
				 strerror(-rc));
		}
	} else if (ftruncate(fd, t->size) < 0) {
		rc = -errno;
		snprintf(err, errlen, "truncating to %lld bytes: %s", (long long)t->size,
			 strerror(-rc));
	}
	if (rc == 0 && fsync(fd) < 0) {
		rc = -errno;
		snprintf(err, errlen, "syncing %s: %s", path, strerror(-rc));
	}
	close(fd);
out:
	if (rc < 0)
		unlink(path);
	free(path);
	return rc;
}
