/* tests/unit/test_image_nbd.c - the image server's nbd backend
 * (vdsmd/image/backend_nbd.c) against a real qemu-nbd serving a qcow2 (or
 * raw) file on a unix socket in a temp directory: read, write, zero with
 * and without punching, flush, zero extents (holes of the chain from
 * qemu:allocation-depth), dirty extents from a bitmap, and the urls and
 * tickets that must be refused.  What the backend wrote is checked
 * independently with qemu-img once qemu-nbd has exited.
 *
 * Every qemu-nbd writes a pid file into the temp directory; the runner's
 * unchecked teardown kills what is left of them, so that a failed test
 * (its forked child ends) leaves no process behind. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/vd.h"
#include "vdsmd/image/backend.h"
#include "check_main.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

static char tmp[PATH_MAX];  /* the temp dir; its nbd/ is the allowed dir */
static char nbd_dir[PATH_MAX + 8];

static void setup(void)
{
	ck_assert_int_lt(snprintf(tmp, sizeof(tmp), "/tmp/vd-imgnbd-XXXXXX"), (int)sizeof(tmp));
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(nbd_dir, sizeof(nbd_dir), "%s/nbd", tmp);
	ck_assert_int_eq(mkdir(nbd_dir, 0700), 0);
}

/* Kills every qemu-nbd whose pid file is in nbd_dir. */
static void kill_servers(void)
{
	DIR *d = opendir(nbd_dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 5 || strcmp(e->d_name + l - 4, ".pid") != 0)
			continue;
		char p[PATH_MAX * 2];
		snprintf(p, sizeof(p), "%s/%s", nbd_dir, e->d_name);
		FILE *f = fopen(p, "r");
		int pid = 0;
		if (f) {
			if (fscanf(f, "%d", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		if (pid > 1)
			kill(pid, SIGKILL);
		unlink(p);
	}
	closedir(d);
}

static void teardown(void)
{
	kill_servers();
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	ck_assert_int_eq(system(cmd), 0);
}

static void run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void run(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	ck_assert_int_lt(n, (int)sizeof(cmd));
	ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

struct server {
	pid_t pid;
	char sock[PATH_MAX + 32];
	char url[PATH_MAX + 64];
};

static bool sock_accepts(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* Starts qemu-nbd on nbd_dir/<name>.sock over file (format fmt) with the
 * extra options given, and waits until its socket accepts. */
static void serve(struct server *s, const char *name, const char *file, const char *fmt,
		  const char *const extra[])
{
	snprintf(s->sock, sizeof(s->sock), "%s/%s.sock", nbd_dir, name);
	snprintf(s->url, sizeof(s->url), "nbd:unix:%s", s->sock);
	char sockopt[PATH_MAX + 48], pidopt[PATH_MAX + 48], fmtopt[32];
	snprintf(sockopt, sizeof(sockopt), "--socket=%s", s->sock);
	snprintf(pidopt, sizeof(pidopt), "--pid-file=%s/%s.pid", nbd_dir, name);
	snprintf(fmtopt, sizeof(fmtopt), "--format=%s", fmt);
	const char *argv[16] = { "qemu-nbd", sockopt, pidopt, fmtopt, "--persistent",
				 "--shared=8", "--cache=writeback" };
	size_t k = 7;
	for (size_t i = 0; extra && extra[i]; i++)
		argv[k++] = extra[i];
	argv[k++] = file;
	argv[k] = NULL;
	s->pid = fork();
	ck_assert_int_ge(s->pid, 0);
	if (s->pid == 0) {
		/* its complaints about the readiness probe go to a log */
		char log[PATH_MAX + 48];
		snprintf(log, sizeof(log), "%s/%s.log", nbd_dir, name);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0)
			dup2(fd, 2);
		execvp("qemu-nbd", (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		if (access(s->sock, F_OK) == 0 && sock_accepts(s->sock))
			return;
		int st;
		ck_assert_msg(waitpid(s->pid, &st, WNOHANG) == 0, "qemu-nbd exited");
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	ck_abort_msg("qemu-nbd's socket %s never accepted", s->sock);
}

static void stop(struct server *s)
{
	ck_assert_int_eq(kill(s->pid, SIGTERM), 0);
	int st;
	ck_assert_int_eq(waitpid(s->pid, &st, 0), s->pid);
}

static struct img_backend *open_ok(const char *url, bool writable, bool dirty)
{
	struct img_backend_opts o = { .nbd_dir = nbd_dir, .writable = writable, .dirty = dirty };
	struct img_backend *be = NULL;
	int rc = img_backend_open(url, &o, &be);
	ck_assert_msg(rc == 0, "open %s: %s", url, vd_strerror(rc));
	ck_assert_str_eq(be->ops->name, "nbd");
	return be;
}

static int open_rc(const char *url, const char *dir, bool writable)
{
	struct img_backend_opts o = { .nbd_dir = dir, .writable = writable };
	struct img_backend *be = NULL;
	int rc = img_backend_open(url, &o, &be);
	img_backend_close(be);
	return rc;
}

static void path_in(char *out, size_t n, const char *name)
{
	ck_assert_int_lt(snprintf(out, n, "%s/%s", tmp, name), (int)n);
}

/* Reads the whole of path as raw bytes (qemu-img convert) into a buffer. */
static char *raw_of(const char *img, const char *fmt, size_t size)
{
	char raw[PATH_MAX];
	path_in(raw, sizeof(raw), "check.raw");
	run("qemu-img convert -f %s -O raw '%s' '%s'", fmt, img, raw);
	int fd = open(raw, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	char *b = malloc(size + 1);
	ck_assert_int_eq(pread(fd, b, size + 1, 0), (ssize_t)size);
	close(fd);
	unlink(raw);
	return b;
}

static void want_extent(const struct img_extents *e, size_t i, uint64_t start, uint64_t len,
			bool zero, bool hole_or_dirty, bool dirty_ctx)
{
	ck_assert_msg(i < e->n, "only %zu extents", e->n);
	const struct img_extent *x = &e->v[i];
	ck_assert_msg(x->start == start && x->length == len,
		      "extent %zu: %llu+%llu, expected %llu+%llu", i, (unsigned long long)x->start,
		      (unsigned long long)x->length, (unsigned long long)start,
		      (unsigned long long)len);
	ck_assert_msg(x->zero == zero, "extent %zu: zero %d", i, x->zero);
	if (dirty_ctx)
		ck_assert_msg(x->dirty == hole_or_dirty && !x->hole, "extent %zu: dirty %d", i,
			      x->dirty);
	else
		ck_assert_msg(x->hole == hole_or_dirty && !x->dirty, "extent %zu: hole %d", i,
			      x->hole);
}

START_TEST(qcow2_read_write_zero_flush)
{
	char img[PATH_MAX];
	path_in(img, sizeof(img), "vol.qcow2");
	run("qemu-img create -q -f qcow2 '%s' 8M", img);
	run("qemu-io -f qcow2 -c 'write -P 0x11 0 1M' '%s' >/dev/null", img);
	struct server s;
	const char *const extra[] = { "--allocation-depth", NULL };
	serve(&s, "rw", img, "qcow2", extra);
	struct img_backend *be = open_ok(s.url, true, false);
	uint64_t size = 0;
	ck_assert_int_eq(be->ops->size(be, &size), 0);
	ck_assert_uint_eq(size, 8 * MiB);
	ck_assert_uint_eq(be->max_writers, 8);
	char *want = calloc(1, 8 * MiB), *got = malloc(8 * MiB);
	memset(want, 0x11, MiB);
	/* reads: the whole image in one call (split under the block size) */
	ck_assert_int_eq(be->ops->pread(be, got, 8 * MiB, 0), (long)(8 * MiB));
	ck_assert_mem_eq(got, want, 8 * MiB);
	/* short at the end, nothing past it */
	ck_assert_int_eq(be->ops->pread(be, got, MiB, 8 * MiB - 4096), 4096);
	ck_assert_int_eq(be->ops->pread(be, got, MiB, 8 * MiB), 0);
	/* writes, then zero keeping allocation and zero punching */
	memset(got, 0xab, 2 * MiB);
	ck_assert_int_eq(be->ops->pwrite(be, got, 2 * MiB, 3 * MiB), 0);
	memset(want + 3 * MiB, 0xab, 2 * MiB);
	ck_assert_int_eq(be->ops->zero(be, 3 * MiB + 256 * KiB, 256 * KiB, false), 0);
	memset(want + 3 * MiB + 256 * KiB, 0, 256 * KiB);
	ck_assert_int_eq(be->ops->zero(be, 4 * MiB, MiB, true), 0);
	memset(want + 4 * MiB, 0, MiB);
	/* an export does not grow */
	ck_assert_int_eq(be->ops->pwrite(be, got, 4096, 8 * MiB - 1024), VD_EINVAL);
	ck_assert_int_eq(be->ops->zero(be, 8 * MiB, 1, false), VD_EINVAL);
	ck_assert_int_eq(be->ops->flush(be), 0);
	ck_assert_int_eq(be->ops->pread(be, got, 8 * MiB, 0), (long)(8 * MiB));
	ck_assert_mem_eq(got, want, 8 * MiB);
	/* zero extents: data, holes of the chain (never written), zeroes */
	struct img_extents e = { 0 };
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_ZERO, &e), 0);
	want_extent(&e, 0, 0, MiB, false, false, false);
	want_extent(&e, 1, MiB, 2 * MiB, true, true, false);
	want_extent(&e, 2, 3 * MiB, 256 * KiB, false, false, false);
	/* the NO_HOLE zero: allocated, reads as zero (qemu may report
	 * either); the punched MiB: zero, allocated in the top layer */
	ck_assert_uint_eq(e.v[e.n - 1].start + e.v[e.n - 1].length, 8 * MiB);
	want_extent(&e, e.n - 1, 5 * MiB, 3 * MiB, true, true, false);
	bool punched_zero = false;
	for (size_t i = 0; i < e.n; i++)
		if (e.v[i].start <= 4 * MiB && e.v[i].start + e.v[i].length >= 5 * MiB)
			punched_zero = e.v[i].zero && !e.v[i].hole;
	ck_assert_msg(punched_zero, "the punched range is not a zero extent");
	/* no dirty extents without a dirty ticket */
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_DIRTY, &e), VD_EUNSUPP);
	img_extents_free(&e);
	img_backend_close(be);
	stop(&s);
	/* what qemu-img reads from the file is what was written */
	char *raw = raw_of(img, "qcow2", 8 * MiB);
	ck_assert_mem_eq(raw, want, 8 * MiB);
	run("qemu-img check -q '%s'", img);
	free(raw);
	free(want);
	free(got);
}
END_TEST

START_TEST(raw_export_has_no_holes)
{
	char img[PATH_MAX];
	path_in(img, sizeof(img), "vol.raw");
	run("truncate -s 4M '%s' && printf 'xyz' | dd of='%s' bs=1 seek=1048576 conv=notrunc "
	    "status=none",
	    img, img);
	struct server s;
	const char *const extra[] = { "--read-only", NULL };
	serve(&s, "ro", img, "raw", extra);
	struct img_backend *be = open_ok(s.url, false, false);
	char buf[8];
	ck_assert_int_eq(be->ops->pread(be, buf, 3, MiB), 3);
	ck_assert_mem_eq(buf, "xyz", 3);
	/* a read ticket never writes */
	ck_assert_int_eq(be->ops->pwrite(be, buf, 3, 0), VD_EPERM);
	ck_assert_int_eq(be->ops->zero(be, 0, 4096, true), VD_EPERM);
	struct img_extents e = { 0 };
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_ZERO, &e), 0);
	/* without allocation depth nothing is a hole; the data block of the
	 * file system (4 KiB here) is data, the rest zero */
	ck_assert_uint_ge(e.n, 3);
	want_extent(&e, 0, 0, MiB, true, false, false);
	ck_assert(!e.v[1].zero && !e.v[1].hole);
	ck_assert_uint_eq(e.v[1].start, MiB);
	want_extent(&e, e.n - 1, e.v[e.n - 1].start, 4 * MiB - e.v[e.n - 1].start, true, false,
		    false);
	img_extents_free(&e);
	img_backend_close(be);
	/* a write ticket over a read-only export is refused at open */
	ck_assert_int_eq(open_rc(s.url, nbd_dir, true), VD_EPERM);
	stop(&s);
}
END_TEST

START_TEST(dirty_extents_from_bitmap)
{
	char img[PATH_MAX];
	path_in(img, sizeof(img), "inc.qcow2");
	run("qemu-img create -q -f qcow2 '%s' 8M", img);
	run("qemu-io -f qcow2 -c 'write -P 1 0 2M' '%s' >/dev/null", img);
	run("qemu-img bitmap --add '%s' b1", img);
	run("qemu-io -f qcow2 -c 'write -P 2 1M 64k' -c 'write -z 3M 128k' -c 'write -P 3 6M 192k' "
	    "'%s' >/dev/null",
	    img);
	struct server s;
	const char *const extra[] = { "--read-only", "--allocation-depth", "--bitmap=b1", NULL };
	serve(&s, "dirty", img, "qcow2", extra);
	struct img_backend *be = open_ok(s.url, false, true);
	struct img_extents e = { 0 };
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_DIRTY, &e), 0);
	want_extent(&e, 0, 0, MiB, false, false, true);
	want_extent(&e, 1, MiB, 64 * KiB, false, true, true);
	want_extent(&e, 2, MiB + 64 * KiB, MiB - 64 * KiB, false, false, true);
	want_extent(&e, 3, 2 * MiB, MiB, true, false, true);
	want_extent(&e, 4, 3 * MiB, 128 * KiB, true, true, true);
	want_extent(&e, 5, 3 * MiB + 128 * KiB, 3 * MiB - 128 * KiB, true, false, true);
	want_extent(&e, 6, 6 * MiB, 192 * KiB, false, true, true);
	want_extent(&e, 7, 6 * MiB + 192 * KiB, 2 * MiB - 192 * KiB, true, false, true);
	ck_assert_uint_eq(e.n, 8);
	/* the zero context works on the same connection */
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_ZERO, &e), 0);
	want_extent(&e, 0, 0, 2 * MiB, false, false, false);
	img_extents_free(&e);
	img_backend_close(be);
	/* not a dirty ticket: no bitmap looked up, no dirty extents */
	be = open_ok(s.url, false, false);
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_DIRTY, &e), VD_EUNSUPP);
	img_backend_close(be);
	stop(&s);
	/* an export without a bitmap: a dirty ticket opens, dirty is refused */
	serve(&s, "nobitmap", img, "qcow2", (const char *const[]){ "--read-only", NULL });
	be = open_ok(s.url, false, true);
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_DIRTY, &e), VD_EUNSUPP);
	img_backend_close(be);
	stop(&s);
	img_extents_free(&e);
}
END_TEST

START_TEST(urls_refused)
{
	char img[PATH_MAX], url[PATH_MAX * 2];
	path_in(img, sizeof(img), "u.qcow2");
	run("qemu-img create -q -f qcow2 '%s' 1M", img);
	struct server s;
	serve(&s, "u", img, "qcow2", (const char *const[]){ "--read-only", NULL });
	/* the export name is passed on: qemu-nbd's export is "" */
	snprintf(url, sizeof(url), "%s:exportname=", s.url);
	ck_assert_int_eq(open_rc(url, nbd_dir, false), 0);
	snprintf(url, sizeof(url), "%s:exportname=other", s.url);
	ck_assert_int_eq(open_rc(url, nbd_dir, false), VD_EIO);
	/* no allowed directory, or another one: refused */
	ck_assert_int_eq(open_rc(s.url, NULL, false), VD_EPERM);
	ck_assert_int_eq(open_rc(s.url, "/run", false), VD_EPERM);
	ck_assert_int_eq(open_rc(s.url, tmp, false), 0); /* beneath tmp too */
	/* a socket outside the allowed dir, ".." out of it, a symlink out */
	char dir2[PATH_MAX + 8];
	snprintf(dir2, sizeof(dir2), "%s/other", tmp);
	ck_assert_int_eq(mkdir(dir2, 0700), 0);
	ck_assert_int_eq(open_rc(s.url, dir2, false), VD_EPERM);
	snprintf(url, sizeof(url), "nbd:unix:%s/../nbd/u.sock", dir2);
	ck_assert_int_eq(open_rc(url, dir2, false), VD_EPERM);
	char link[PATH_MAX + 16];
	snprintf(link, sizeof(link), "%s/l.sock", dir2);
	ck_assert_int_eq(symlink(s.sock, link), 0);
	snprintf(url, sizeof(url), "nbd:unix:%s", link);
	ck_assert_int_eq(open_rc(url, dir2, false), VD_EPERM);
	/* not a socket, missing, malformed */
	snprintf(url, sizeof(url), "nbd:unix:%s/u.pid", nbd_dir);
	ck_assert_int_eq(open_rc(url, nbd_dir, false), VD_EINVAL);
	snprintf(url, sizeof(url), "nbd:unix:%s/missing.sock", nbd_dir);
	ck_assert_int_eq(open_rc(url, nbd_dir, false), VD_ENOENT);
	ck_assert_int_eq(open_rc("nbd:unix:relative.sock", nbd_dir, false), VD_EINVAL);
	ck_assert_int_eq(open_rc("nbd:127.0.0.1:10809", nbd_dir, false), VD_EINVAL);
	snprintf(url, sizeof(url), "%s:export=x", s.url);
	ck_assert_int_eq(open_rc(url, nbd_dir, false), VD_EINVAL);
	/* the url parser itself */
	char p[64], n[16];
	ck_assert_int_eq(img_nbd_url_parse("nbd:unix:/a/b.sock:exportname=sda", p, sizeof(p), n,
					   sizeof(n)),
			 0);
	ck_assert_str_eq(p, "/a/b.sock");
	ck_assert_str_eq(n, "sda");
	ck_assert_int_eq(img_nbd_url_parse("nbd:unix:/a/b.sock", p, sizeof(p), n, sizeof(n)), 0);
	ck_assert_str_eq(n, "");
	ck_assert_int_eq(img_nbd_url_parse("nbd:unix:/a/b.sock:exportname=0123456789abcdef", p,
					   sizeof(p), n, sizeof(n)),
			 VD_ETOOBIG);
	stop(&s);
}
END_TEST

static Suite *image_nbd_suite(void)
{
	Suite *s = suite_create("image_nbd");
	TCase *tc = tcase_create("nbd");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, qcow2_read_write_zero_flush);
	tcase_add_test(tc, raw_export_has_no_holes);
	tcase_add_test(tc, dirty_extents_from_bitmap);
	tcase_add_test(tc, urls_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(image_nbd_suite());
}
