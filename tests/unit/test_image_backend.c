/* tests/unit/test_image_backend.c - the image server's file backend
 * (vdsmd/image/backend_file.c) on real sparse files in a temp directory:
 * write and read back, zero with and without punching (st_blocks tell),
 * extents checked against SEEK_DATA/SEEK_HOLE and `qemu-img map`, and the
 * urls that must be refused (outside the root, "..", symlinks out). */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/vd.h"
#include "vdsmd/image/backend.h"
#include "check_main.h"

#define MiB (1024u * 1024u)

/* Where the temp directories go: the build machine's /tmp (ext4 or xfs
 * here: ZERO_RANGE works) and tmpfs, which has PUNCH_HOLE but no
 * ZERO_RANGE, so the allocate-after-punch way runs too.  Both are made once
 * in the runner process (an unchecked fixture), so that a failed test, which
 * ends its forked child, still leaves nothing behind. */
static const char *const bases[] = { "/tmp", "/dev/shm" };
static int nbases; /* 1 or 2 (VD_ARRAY_SIZE(bases)) */
static char tmps[2][PATH_MAX], roots[2][PATH_MAX];
static const char *tmp, *root; /* the pair a test uses (use()) */

static void setup(void)
{
	for (int i = 0; i < nbases && i < (int)VD_ARRAY_SIZE(bases); i++) {
		ck_assert_int_lt(snprintf(tmps[i], sizeof(tmps[i]), "%s/vd-imgbe-XXXXXX", bases[i]),
				 (int)sizeof(tmps[i]));
		ck_assert_ptr_nonnull(mkdtemp(tmps[i]));
		ck_assert_int_lt(snprintf(roots[i], sizeof(roots[i]), "%s/root", tmps[i]),
				 (int)sizeof(roots[i]));
		ck_assert_int_eq(mkdir(roots[i], 0700), 0);
	}
}

static void teardown(void)
{
	for (int i = 0; i < nbases && i < (int)VD_ARRAY_SIZE(bases); i++) {
		char cmd[PATH_MAX + 16];
		if (!tmps[i][0])
			continue;
		ck_assert_int_lt(snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmps[i]), (int)sizeof(cmd));
		ck_assert_int_eq(system(cmd), 0);
	}
}

static void use(int i)
{
	tmp = tmps[i];
	root = roots[i];
}

static void path_in(char *out, size_t n, const char *dir, const char *name)
{
	ck_assert_int_lt(snprintf(out, n, "%s/%s", dir, name), (int)n);
}

/* Creates dir/name: a sparse file of size bytes. */
static void make_file(const char *path, uint64_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

static void fill(const char *path, uint64_t off, uint64_t len, int byte)
{
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	char *b = malloc(len);
	memset(b, byte, len);
	ck_assert_int_eq(pwrite(fd, b, len, (off_t)off), (ssize_t)len);
	ck_assert_int_eq(fsync(fd), 0);
	free(b);
	close(fd);
}

static uint64_t blocks_of(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return (uint64_t)st.st_blocks;
}

static struct img_backend *open_ok(const char *path, bool writable)
{
	char url[PATH_MAX + 8];
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s", path), (int)sizeof(url));
	struct img_backend_opts o = { .root = root, .writable = writable };
	struct img_backend *be = NULL;
	int rc = img_backend_open(url, &o, &be);
	ck_assert_msg(rc == 0, "%s: %s", url, vd_strerror(rc));
	ck_assert_ptr_nonnull(be);
	ck_assert_str_eq(be->ops->name, "file");
	return be;
}

static int open_rc(const char *url)
{
	struct img_backend_opts o = { .root = root, .writable = true };
	struct img_backend *be = (struct img_backend *)&o; /* must be reset */
	int rc = img_backend_open(url, &o, &be);
	if (rc == 0)
		img_backend_close(be);
	else
		ck_assert_ptr_null(be);
	return rc;
}

static bool all_bytes(const char *b, size_t n, int byte)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)b[i] != (unsigned char)byte)
			return false;
	return true;
}

START_TEST(write_read_back)
{
	use(0);
	char p[PATH_MAX];
	path_in(p, sizeof(p), root, "vol");
	make_file(p, 16 * MiB);
	struct img_backend *be = open_ok(p, true);
	ck_assert_uint_eq(be->max_readers, 8);
	ck_assert_uint_eq(be->max_writers, 1);
	uint64_t size;
	ck_assert_int_eq(be->ops->size(be, &size), 0);
	ck_assert_uint_eq(size, 16 * MiB);
	size_t n = 3 * MiB + 123;
	char *w = malloc(n), *r = malloc(n);
	for (size_t i = 0; i < n; i++)
		w[i] = (char)(i * 7 + 3);
	ck_assert_int_eq(be->ops->pwrite(be, w, n, MiB + 5), 0);
	ck_assert_int_eq(be->ops->flush(be), 0);
	ck_assert_int_eq(be->ops->pread(be, r, n, MiB + 5), (long)n);
	ck_assert_int_eq(memcmp(w, r, n), 0);
	/* what is around it still reads as zeroes */
	ck_assert_int_eq(be->ops->pread(be, r, MiB + 5, 0), (long)(MiB + 5));
	ck_assert(all_bytes(r, MiB + 5, 0));
	/* short only at the end, 0 past it */
	ck_assert_int_eq(be->ops->pread(be, r, 100, 16 * MiB - 10), 10);
	ck_assert_int_eq(be->ops->pread(be, r, 100, 16 * MiB), 0);
	ck_assert_int_eq(be->ops->pread(be, r, 100, 17 * MiB), 0);
	/* a write past the end grows the file (the ticket's size bounds it) */
	ck_assert_int_eq(be->ops->pwrite(be, w, 10, 16 * MiB), 0);
	ck_assert_int_eq(be->ops->size(be, &size), 0);
	ck_assert_uint_eq(size, 16 * MiB + 10);
	/* offsets beyond off_t are refused, not wrapped */
	ck_assert_int_eq(be->ops->pwrite(be, w, 10, UINT64_MAX - 4), VD_EINVAL);
	ck_assert_int_eq(be->ops->pread(be, r, 10, (uint64_t)INT64_MAX), VD_EINVAL);
	img_backend_close(be);
	/* read back through a fresh read-only backend; writing through it fails */
	be = open_ok(p, false);
	ck_assert_int_eq(be->ops->pread(be, r, n, MiB + 5), (long)n);
	ck_assert_int_eq(memcmp(w, r, n), 0);
	ck_assert_int_eq(be->ops->pwrite(be, w, 1, 0), VD_EPERM);
	ck_assert_int_eq(be->ops->zero(be, 0, 4096, true), VD_EPERM);
	img_backend_close(be);
	free(w);
	free(r);
}
END_TEST

START_TEST(zero_punches_hole)
{
	use(_i);
	char p[PATH_MAX];
	path_in(p, sizeof(p), root, "vol");
	make_file(p, 8 * MiB);
	fill(p, 0, 8 * MiB, 0xab);
	uint64_t before = blocks_of(p);
	ck_assert_uint_ge(before, 8 * MiB / 512);
	struct img_backend *be = open_ok(p, true);
	ck_assert_int_eq(be->ops->zero(be, 2 * MiB, 4 * MiB, true), 0);
	ck_assert_int_eq(be->ops->flush(be), 0);
	uint64_t after = blocks_of(p);
	ck_assert_msg(before - after >= 4 * MiB / 512, "blocks %lu -> %lu", (unsigned long)before,
		      (unsigned long)after);
	char *r = malloc(8 * MiB);
	ck_assert_int_eq(be->ops->pread(be, r, 8 * MiB, 0), (long)(8 * MiB));
	ck_assert(all_bytes(r, 2 * MiB, 0xab));
	ck_assert(all_bytes(r + 2 * MiB, 4 * MiB, 0));
	ck_assert(all_bytes(r + 6 * MiB, 2 * MiB, 0xab));
	/* unaligned: the partial blocks at both ends are zeroed, nothing more */
	ck_assert_int_eq(be->ops->zero(be, 100, 5000, true), 0);
	ck_assert_int_eq(be->ops->pread(be, r, 8192, 0), 8192);
	ck_assert(all_bytes(r, 100, 0xab));
	ck_assert(all_bytes(r + 100, 5000, 0));
	ck_assert(all_bytes(r + 5100, 8192 - 5100, 0xab));
	/* a sparse zero past the end grows the file without allocating */
	uint64_t blocks = blocks_of(p);
	ck_assert_int_eq(be->ops->zero(be, 8 * MiB, 8 * MiB, true), 0);
	uint64_t size;
	ck_assert_int_eq(be->ops->size(be, &size), 0);
	ck_assert_uint_eq(size, 16 * MiB);
	ck_assert_uint_le(blocks_of(p), blocks);
	ck_assert_int_eq(be->ops->zero(be, 0, 0, true), 0);
	ck_assert_int_eq(be->ops->zero(be, UINT64_MAX - 1, 2, true), VD_EINVAL);
	free(r);
	img_backend_close(be);
}
END_TEST

START_TEST(zero_keeps_allocation)
{
	use(_i);
	char p[PATH_MAX];
	path_in(p, sizeof(p), root, "vol");
	make_file(p, 8 * MiB);
	fill(p, 0, 8 * MiB, 0x5a);
	uint64_t before = blocks_of(p);
	struct img_backend *be = open_ok(p, true);
	ck_assert_int_eq(be->ops->zero(be, MiB, 4 * MiB, false), 0);
	ck_assert_int_eq(be->ops->flush(be), 0);
	/* ZERO_RANGE (or punch + allocate) keeps the space */
	ck_assert_uint_ge(blocks_of(p), before);
	char *r = malloc(8 * MiB);
	ck_assert_int_eq(be->ops->pread(be, r, 8 * MiB, 0), (long)(8 * MiB));
	ck_assert(all_bytes(r, MiB, 0x5a));
	ck_assert(all_bytes(r + MiB, 4 * MiB, 0));
	ck_assert(all_bytes(r + 5 * MiB, 3 * MiB, 0x5a));
	/* past the end: the file grows and the new range is allocated */
	ck_assert_int_eq(be->ops->zero(be, 8 * MiB, 2 * MiB, false), 0);
	uint64_t size;
	ck_assert_int_eq(be->ops->size(be, &size), 0);
	ck_assert_uint_eq(size, 10 * MiB);
	ck_assert_uint_ge(blocks_of(p), before + 2 * MiB / 512);
	ck_assert_int_eq(be->ops->pread(be, r, 2 * MiB, 8 * MiB), (long)(2 * MiB));
	ck_assert(all_bytes(r, 2 * MiB, 0));
	free(r);
	img_backend_close(be);
}
END_TEST

/* The extents SEEK_DATA/SEEK_HOLE give, walked independently here. */
static void seek_walk(const char *path, struct img_extents *out)
{
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	off_t pos = 0;
	out->n = 0;
	while (pos < st.st_size) {
		off_t d = lseek(fd, pos, SEEK_DATA);
		if (d < 0)
			d = st.st_size;
		ck_assert_int_eq(img_extents_add(out, (uint64_t)pos, (uint64_t)(d - pos), true, false,
						 false),
				 0);
		if (d >= st.st_size)
			break;
		off_t h = lseek(fd, d, SEEK_HOLE);
		ck_assert_int_gt(h, d);
		ck_assert_int_eq(img_extents_add(out, (uint64_t)d, (uint64_t)(h - d), false, false,
						 false),
				 0);
		pos = h;
	}
	close(fd);
}

/* `qemu-img map --output=json -f raw path`, merged by "zero". */
static void qemu_map(const char *path, struct img_extents *out)
{
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof(cmd), "qemu-img map --output=json -f raw '%s'", path);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	char line[512];
	out->n = 0;
	int entries = 0;
	while (fgets(line, sizeof(line), f)) {
		const char *s = strstr(line, "\"start\":");
		if (!s)
			continue;
		unsigned long long start, length;
		ck_assert_int_eq(sscanf(s, "\"start\": %llu, \"length\": %llu", &start, &length), 2);
		bool zero = strstr(line, "\"zero\": true") != NULL;
		ck_assert_int_eq(img_extents_add(out, start, length, zero, false, false), 0);
		entries++;
	}
	ck_assert_int_eq(pclose(f), 0);
	ck_assert_int_gt(entries, 0);
}

static void assert_same(const struct img_extents *a, const struct img_extents *b, const char *what)
{
	ck_assert_msg(a->n == b->n, "%s: %zu extents, expected %zu", what, a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		ck_assert_msg(a->v[i].start == b->v[i].start && a->v[i].length == b->v[i].length &&
				      a->v[i].zero == b->v[i].zero && a->v[i].hole == b->v[i].hole,
			      "%s: extent %zu differs", what, i);
	}
}

START_TEST(extents_match_seek_and_qemu)
{
	use(0);
	char p[PATH_MAX];
	path_in(p, sizeof(p), root, "vol");
	make_file(p, 64 * MiB);
	fill(p, 0, MiB, 1);
	fill(p, 3 * MiB, 2 * MiB, 2);
	fill(p, 40 * MiB, 64 * 1024, 3);
	fill(p, 63 * MiB, MiB, 4);
	struct img_backend *be = open_ok(p, true);
	struct img_extents got = { 0 }, seek = { 0 }, qemu = { 0 };
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_ZERO, &got), 0);
	/* the expected layout, exactly, on a file system with holes */
	const uint64_t want[][3] = {
		{ 0, MiB, 0 }, { MiB, 2 * MiB, 1 }, { 3 * MiB, 2 * MiB, 0 },
		{ 5 * MiB, 35 * MiB, 1 }, { 40 * MiB, 64 * 1024, 0 },
		{ 40 * MiB + 64 * 1024, 23 * MiB - 64 * 1024, 1 }, { 63 * MiB, MiB, 0 },
	};
	ck_assert_uint_eq(got.n, VD_ARRAY_SIZE(want));
	for (size_t i = 0; i < got.n; i++) {
		ck_assert_uint_eq(got.v[i].start, want[i][0]);
		ck_assert_uint_eq(got.v[i].length, want[i][1]);
		ck_assert_int_eq(got.v[i].zero, (bool)want[i][2]);
		ck_assert(!got.v[i].hole); /* raw: never a hole (imageio docs) */
	}
	seek_walk(p, &seek);
	assert_same(&got, &seek, "SEEK_DATA/SEEK_HOLE");
	qemu_map(p, &qemu);
	assert_same(&got, &qemu, "qemu-img map");
	/* punch through the backend: the extents follow */
	ck_assert_int_eq(be->ops->zero(be, 3 * MiB, MiB, true), 0);
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_ZERO, &got), 0);
	ck_assert_uint_eq(got.v[1].start, MiB);
	ck_assert_uint_eq(got.v[1].length, 3 * MiB);
	ck_assert(got.v[1].zero);
	qemu_map(p, &qemu);
	assert_same(&got, &qemu, "qemu-img map after zero");
	/* a file backend has no dirty bitmaps */
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_DIRTY, &got), VD_EUNSUPP);
	img_backend_close(be);
	/* an empty file has no extents; an all-hole file one zero extent */
	path_in(p, sizeof(p), root, "empty");
	make_file(p, 0);
	be = open_ok(p, false);
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_ZERO, &got), 0);
	ck_assert_uint_eq(got.n, 0);
	img_backend_close(be);
	path_in(p, sizeof(p), root, "holes");
	make_file(p, 100 * MiB);
	be = open_ok(p, false);
	ck_assert_int_eq(be->ops->extents(be, IMG_EXTENTS_ZERO, &got), 0);
	ck_assert_uint_eq(got.n, 1);
	ck_assert_uint_eq(got.v[0].length, 100 * MiB);
	ck_assert(got.v[0].zero);
	qemu_map(p, &qemu);
	assert_same(&got, &qemu, "qemu-img map of holes");
	img_backend_close(be);
	img_extents_free(&got);
	img_extents_free(&seek);
	img_extents_free(&qemu);
}
END_TEST

START_TEST(extent_list_merges_and_is_bounded)
{
	struct img_extents e = { 0 };
	ck_assert_int_eq(img_extents_add(&e, 0, 10, false, false, false), 0);
	ck_assert_int_eq(img_extents_add(&e, 10, 5, false, false, false), 0);
	ck_assert_uint_eq(e.n, 1);
	ck_assert_uint_eq(e.v[0].length, 15);
	ck_assert_int_eq(img_extents_add(&e, 15, 0, true, false, false), 0); /* empty: ignored */
	ck_assert_uint_eq(e.n, 1);
	ck_assert_int_eq(img_extents_add(&e, 15, 5, true, false, false), 0);
	ck_assert_int_eq(img_extents_add(&e, 20, 5, true, true, false), 0);
	ck_assert_int_eq(img_extents_add(&e, 30, 5, true, true, false), 0); /* not adjacent */
	ck_assert_uint_eq(e.n, 4);
	e.n = 0;
	int rc = 0;
	for (uint64_t i = 0; i <= IMG_EXTENTS_MAX && rc == 0; i++)
		rc = img_extents_add(&e, i * 2, 1, (i & 1) != 0, false, false);
	ck_assert_int_eq(rc, VD_ETOOBIG);
	ck_assert_uint_eq(e.n, IMG_EXTENTS_MAX);
	ck_assert_uint_le(e.cap, IMG_EXTENTS_MAX);
	img_extents_free(&e);
	ck_assert_ptr_null(e.v);
}
END_TEST

START_TEST(urls_refused)
{
	use(0);
	char p[PATH_MAX], url[PATH_MAX + 16], out[PATH_MAX];
	path_in(p, sizeof(p), root, "vol");
	make_file(p, MiB);
	path_in(out, sizeof(out), tmp, "outside");
	make_file(out, MiB);
	/* the plain case opens */
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s", p), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), 0);
	/* outside the root */
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s", out), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), VD_EPERM);
	/* ".." climbing out, and ".." that stays inside: both refused */
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s/../outside", root), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), VD_EPERM);
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s/./vol", root), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), VD_EPERM);
	/* a symlink out, as the last component and as a directory */
	char l[PATH_MAX];
	path_in(l, sizeof(l), root, "link");
	ck_assert_int_eq(symlink(out, l), 0);
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s", l), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), VD_EPERM);
	path_in(l, sizeof(l), root, "dirlink");
	ck_assert_int_eq(symlink(tmp, l), 0);
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s/outside", l), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), VD_EPERM);
	/* a symlink that stays beneath the root is followed, as
	 * /rhev/data-center/<pool>/<sd> links into mnt/ */
	char sub[PATH_MAX];
	path_in(sub, sizeof(sub), root, "mnt");
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	path_in(p, sizeof(p), sub, "vol2");
	make_file(p, MiB);
	path_in(l, sizeof(l), root, "pool");
	ck_assert_int_eq(symlink(sub, l), 0);
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s/vol2", l), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), 0);
	/* the root itself, a directory, a missing file */
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s", root), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), VD_EPERM);
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s", sub), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), VD_EINVAL);
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s/missing", root), (int)sizeof(url));
	ck_assert_int_eq(open_rc(url), VD_ENOENT);
	/* malformed urls and other schemes */
	ck_assert_int_eq(open_rc("file://host/tmp/x"), VD_EINVAL);
	ck_assert_int_eq(open_rc("file:relative"), VD_EINVAL);
	ck_assert_int_eq(open_rc("http://127.0.0.1/x"), VD_EINVAL);
	ck_assert_int_eq(open_rc("nbd:unix:/run/vdsm/nbd/x.sock"), VD_EPERM);
	/* no root, or a relative one: nothing opens */
	struct img_backend_opts o = { .root = NULL };
	struct img_backend *be;
	ck_assert_int_lt(snprintf(url, sizeof(url), "file://%s/vol", root), (int)sizeof(url));
	ck_assert_int_eq(img_backend_open(url, &o, &be), VD_EINVAL);
	o.root = "tmp";
	ck_assert_int_eq(img_backend_open(url, &o, &be), VD_EINVAL);
	/* the root "/" admits every absolute path */
	o.root = "/";
	ck_assert_int_eq(img_backend_open(url, &o, &be), 0);
	img_backend_close(be);
}
END_TEST

static Suite *image_backend_suite(void)
{
	Suite *s = suite_create("image_backend");
	nbases = 1;
	if (access(bases[1], W_OK) == 0)
		nbases = 2;
	else
		check_skip("zero on tmpfs", "/dev/shm is not writable");
	TCase *tc = tcase_create("file");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, write_read_back);
	tcase_add_test(tc, extents_match_seek_and_qemu);
	tcase_add_test(tc, extent_list_merges_and_is_bounded);
	tcase_add_test(tc, urls_refused);
	tcase_add_loop_test(tc, zero_punches_hole, 0, nbases);
	tcase_add_loop_test(tc, zero_keeps_allocation, 0, nbases);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(image_backend_suite());
}
