/* tests/unit/test_storage_core.c - the storage core against real files in a
 * temporary directory: metadata, domains, volumes (raw sparse/preallocated,
 * qcow2 checked with qemu-img), tasks, restart recovery, monitor. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#define SD1 "11111111-1111-1111-1111-111111111111"
#define SD2 "22222222-2222-2222-2222-222222222222"
#define IMG1 "aaaaaaaa-0000-0000-0000-000000000001"
#define IMG2 "aaaaaaaa-0000-0000-0000-000000000002"
#define VOL1 "bbbbbbbb-0000-0000-0000-000000000001"
#define VOL2 "bbbbbbbb-0000-0000-0000-000000000002"
#define VOL3 "bbbbbbbb-0000-0000-0000-000000000003"
#define SP1 "cccccccc-0000-0000-0000-000000000001"
#define MiB (1024 * 1024)

static char root[256];
static char mnt[300];
static struct storage_state *S;

static void rm_rf(const char *p)
{
	st_rmtree(p);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-st-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(mnt, sizeof(mnt), "%s/export", root);
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	char why[256];
	char *r = st_path(root, "state");
	S = st_open(r, why, sizeof(why));
	free(r);
	ck_assert_msg(S != NULL, "%s", why);
	ck_assert_int_eq(st_start_workers(S, 2), 0);
}

static void teardown(void)
{
	st_close(S);
	S = NULL;
	rm_rf(root);
}

static void reopen(void)
{
	st_close(S);
	char why[256];
	char *r = st_path(root, "state");
	S = st_open(r, why, sizeof(why));
	free(r);
	ck_assert_msg(S != NULL, "%s", why);
	ck_assert_int_eq(st_start_workers(S, 2), 0);
}

static void mkdomain(const char *sd)
{
	struct st_err e = {0};
	ck_assert_msg(st_domain_create(S, sd, ST_DT_LOCALFS, mnt, "test domain", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
}

static struct st_task_status create_vol(const char *img, const char *vol, int64_t size, int fmt,
					int alloc, const char *pimg, const char *pvol)
{
	struct st_err e = {0};
	struct st_volreq r = { SD1, img, vol, size, fmt, alloc, "DATA", "a volume", pimg, pvol, false, false, 0, 0 };
	char tid[37];
	ck_assert_msg(st_volume_create(S, &r, tid, &e) == 0, "%s", e.msg);
	struct st_task_status st;
	ck_assert_int_eq(st_task_wait(S, tid, 20000, &st), 0);
	return st;
}

static char *vpath(const char *img, const char *vol, const char *suffix)
{
	return st_pathf("%s/%s/images/%s/%s%s", mnt, SD1, img, vol, suffix);
}

static bool exists(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0;
}

static char *run(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	static char out[8192];
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	pclose(f);
	return out;
}

/* ---- metadata ------------------------------------------------------------ */

START_TEST(kv_roundtrip_and_tamper)
{
	struct st_kv kv;
	kv_init(&kv);
	kv_set(&kv, "A", "1");
	kv_set(&kv, "DESC", "line\nbreak");
	kv_set(&kv, "A", "2");
	char *p = st_path(root, "m");
	ck_assert_int_eq(kv_write_file(&kv, p), 0);
	kv_free(&kv);
	ck_assert_int_eq(kv_read_file(&kv, p), 0);
	ck_assert_str_eq(kv_get(&kv, "A"), "2");
	ck_assert_str_eq(kv_get(&kv, "DESC"), "line break");
	ck_assert_int_eq(kv_get_int(&kv, "A", 0), 2);
	kv_free(&kv);
	/* flip one byte: checksum mismatch */
	int fd = open(p, O_WRONLY);
	ck_assert_int_eq(pwrite(fd, "B", 1, 0), 1);
	close(fd);
	ck_assert_int_eq(kv_read_file(&kv, p), VD_EPROTO);
	/* torn (truncated) file */
	ck_assert_int_eq(truncate(p, 5), 0);
	ck_assert_int_eq(kv_read_file(&kv, p), VD_EPROTO);
	char *tmp = st_pathf("%s.tmp", p);
	ck_assert(!exists(tmp));
	free(tmp);
	free(p);
	ck_assert_int_eq(kv_read_file(&kv, "/nonexistent/x"), VD_ENOENT);
}
END_TEST

/* ---- domains ------------------------------------------------------------- */

START_TEST(domain_create_layout_and_reload)
{
	mkdomain(SD1);
	char *md = st_pathf("%s/%s/dom_md/metadata", mnt, SD1);
	char *im = st_pathf("%s/%s/images", mnt, SD1);
	ck_assert(exists(md));
	ck_assert(exists(im));
	struct st_kv kv;
	ck_assert_int_eq(kv_read_file(&kv, md), 0);
	ck_assert_str_eq(kv_get(&kv, "SDUUID"), SD1);
	ck_assert_str_eq(kv_get(&kv, "TYPE"), "LOCALFS");
	ck_assert_str_eq(kv_get(&kv, "CLASS"), "Data");
	kv_free(&kv);
	/* path-less domain lives under storage_root */
	struct st_err e = {0};
	ck_assert_int_eq(st_domain_create(S, SD2, ST_DT_POSIXFS, "", "rootdom", ST_DC_ISO, 0, &e), 0);
	char *md2 = st_pathf("%s/state/%s/dom_md/metadata", root, SD2);
	ck_assert(exists(md2));
	reopen();
	pthread_mutex_lock(&S->lock);
	struct st_domain *d1 = map_get(&S->domains, SD1), *d2 = map_get(&S->domains, SD2);
	ck_assert_ptr_nonnull(d1);
	ck_assert_ptr_nonnull(d2);
	ck_assert_int_eq(d2->type, ST_DT_POSIXFS);
	ck_assert_int_eq(d2->dclass, ST_DC_ISO);
	ck_assert_int_eq(d2->version, 5);
	ck_assert_str_eq(d1->name, "test domain");
	pthread_mutex_unlock(&S->lock);
	free(md);
	free(md2);
	free(im);
}
END_TEST

START_TEST(domain_create_errors)
{
	struct st_err e = {0};
	mkdomain(SD1);
	ck_assert_int_eq(st_domain_create(S, SD1, ST_DT_LOCALFS, mnt, "x", ST_DC_DATA, 5, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_DOMAIN_EXISTS);
	ck_assert_int_eq(st_domain_create(S, SD2, 3 /* iSCSI */, mnt, "x", ST_DC_DATA, 5, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	ck_assert_int_eq(st_domain_create(S, SD2, ST_DT_NFS, mnt, "x", 9, 5, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	ck_assert_int_eq(st_domain_create(S, "../../etc", ST_DT_NFS, mnt, "x", 1, 5, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	ck_assert_int_eq(st_domain_create(S, SD2, ST_DT_NFS, "/nonexistent/dir", "x", 1, 5, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_GENERAL);
	ck_assert_int_eq(st_domain_create(S, SD2, ST_DT_NFS, "/tmp/../etc", "x", 1, 5, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	/* server:/export maps to <root>/mnt/server:_export, which must exist */
	ck_assert_int_eq(st_domain_create(S, SD2, ST_DT_NFS, "srv:/exp", "x", 1, 5, &e), -1);
	char *m = st_pathf("%s/state/mnt/srv:_exp", root);
	ck_assert_int_eq(st_mkdir_p(m, 0755), 0);
	ck_assert_msg(st_domain_create(S, SD2, ST_DT_NFS, "srv:/exp", "x", 1, 5, &e) == 0, "%s", e.msg);
	char *md = st_pathf("%s/%s/dom_md/metadata", m, SD2);
	ck_assert(exists(md));
	free(md);
	free(m);
}
END_TEST

START_TEST(domain_format)
{
	struct st_err e = {0};
	mkdomain(SD1);
	create_vol(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE, NULL, NULL);
	ck_assert_int_eq(st_domain_format(S, SD1, &e), 0);
	char *dir = st_path(mnt, SD1);
	ck_assert(!exists(dir));
	ck_assert_int_eq(st_domain_format(S, SD1, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_DOMAIN);
	reopen();
	pthread_mutex_lock(&S->lock);
	ck_assert_ptr_null(map_get(&S->domains, SD1));
	pthread_mutex_unlock(&S->lock);
	free(dir);
}
END_TEST

/* ---- volumes ------------------------------------------------------------- */

START_TEST(volume_raw_sparse_and_prealloc)
{
	mkdomain(SD1);
	struct st_task_status st = create_vol(IMG1, VOL1, 64 * MiB, ST_FMT_RAW, ST_SPARSE, NULL, NULL);
	ck_assert_int_eq(st.state, ST_TS_FINISHED);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	ck_assert_int_eq(st.code, 0);
	st = create_vol(IMG1, VOL2, 8 * MiB, ST_FMT_RAW, ST_PREALLOCATED, NULL, NULL);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	ck_assert_int_eq(st.progress, 100);
	struct stat a, b;
	char *p1 = vpath(IMG1, VOL1, ""), *p2 = vpath(IMG1, VOL2, "");
	ck_assert_int_eq(stat(p1, &a), 0);
	ck_assert_int_eq(stat(p2, &b), 0);
	ck_assert_int_eq(a.st_size, 64 * MiB);
	ck_assert_int_lt((int64_t)a.st_blocks * 512, MiB);          /* sparse */
	ck_assert_int_eq(b.st_size, 8 * MiB);
	ck_assert_int_ge((int64_t)b.st_blocks * 512, 8 * MiB);      /* allocated */
	struct st_volume v;
	struct st_err e = {0};
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL2, &v, &e), 0);
	ck_assert(v.legal);
	ck_assert(!v.busy);
	ck_assert_int_eq(v.capacity, 8 * MiB);
	ck_assert_int_ge(v.truesize, 8 * MiB);
	ck_assert_int_eq(v.apparent, 8 * MiB);
	ck_assert_str_eq(v.description, "a volume");
	free(v.description);
	/* the metadata on disk says LEGAL */
	char *mp = vpath(IMG1, VOL1, ".meta");
	struct st_kv kv;
	ck_assert_int_eq(kv_read_file(&kv, mp), 0);
	ck_assert_str_eq(kv_get(&kv, "LEGALITY"), "LEGAL");
	ck_assert_str_eq(kv_get(&kv, "FORMAT"), "RAW");
	ck_assert_str_eq(kv_get(&kv, "TYPE"), "SPARSE");
	ck_assert_str_eq(kv_get(&kv, "CAP"), "67108864");
	kv_free(&kv);
	free(mp);
	free(p1);
	free(p2);
}
END_TEST

START_TEST(volume_qcow2_and_snapshot)
{
	mkdomain(SD1);
	struct st_task_status st = create_vol(IMG1, VOL1, 1024 * MiB, ST_FMT_COW, ST_SPARSE, NULL, NULL);
	ck_assert_msg(st.result == ST_TR_SUCCESS, "%s", st.message);
	char *p1 = vpath(IMG1, VOL1, "");
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "qemu-img info --output=json '%s'", p1);
	char *out = run(cmd);
	ck_assert_msg(strstr(out, "\"format\": \"qcow2\""), "%s", out);
	ck_assert_msg(strstr(out, "\"virtual-size\": 1073741824"), "%s", out);
	/* snapshot: child backed by the parent, capacity inherited */
	st = create_vol(IMG1, VOL2, 512, ST_FMT_COW, ST_SPARSE, IMG1, VOL1);
	ck_assert_msg(st.result == ST_TR_SUCCESS, "%s", st.message);
	char *p2 = vpath(IMG1, VOL2, "");
	snprintf(cmd, sizeof(cmd), "qemu-img info --output=json '%s'", p2);
	out = run(cmd);
	ck_assert_msg(strstr(out, "\"backing-filename\": \"" VOL1 "\""), "%s", out);
	ck_assert_msg(strstr(out, "\"backing-filename-format\": \"qcow2\""), "%s", out);
	ck_assert_msg(strstr(out, "\"virtual-size\": 1073741824"), "%s", out);
	struct st_volume v;
	struct st_err e = {0};
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL2, &v, &e), 0);
	ck_assert_str_eq(v.parent, VOL1);
	ck_assert_int_eq(v.format, ST_FMT_COW);
	free(v.description);
	/* a parent with children cannot be deleted */
	char tid[37];
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, VOL1, NULL, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_GENERAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "children"));
	/* snapshot of a missing parent */
	struct st_volreq r = { SD1, IMG1, VOL3, MiB, ST_FMT_COW, ST_SPARSE, NULL, "", IMG1,
			       "bbbbbbbb-0000-0000-0000-00000000dead", false, false, 0, 0 };
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_VOLUME);
	/* the parent's data vanished behind our back: the task fails naming
	 * it and leaves nothing behind */
	char *p1data = vpath(IMG1, VOL1, "");
	char *moved = st_pathf("%s.moved", p1data);
	ck_assert_int_eq(rename(p1data, moved), 0);
	st = create_vol(IMG1, VOL3, MiB, ST_FMT_COW, ST_SPARSE, IMG1, VOL1);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
	ck_assert_msg(strstr(st.message, "parent volume"), "%s", st.message);
	char *p3 = vpath(IMG1, VOL3, ""), *m3 = vpath(IMG1, VOL3, ".meta");
	ck_assert(!exists(p3));
	ck_assert(!exists(m3));
	ck_assert_int_eq(rename(moved, p1data), 0);
	free(p1data);
	free(moved);
	free(p3);
	free(m3);
	/* RAW cannot have a parent */
	r.format = ST_FMT_RAW;
	r.src_vol = VOL1;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	free(p1);
	free(p2);
}
END_TEST

/* qemu-img's exit status decides: a wrapper that makes a valid image but
 * exits 3 without a word fails the task (it used to be judged by output). */
START_TEST(qemu_img_exit_status_counts)
{
	mkdomain(SD1);
	char *bin = st_pathf("%s/bin", root);
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	char *fake = st_pathf("%s/qemu-img", bin);
	FILE *f = fopen(fake, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\n/usr/bin/qemu-img \"$@\"\nexit 3\n");
	fclose(f);
	ck_assert_int_eq(chmod(fake, 0755), 0);
	const char *path0 = getenv("PATH");
	char *old = strdup(path0 ? path0 : "/usr/bin:/bin");
	char *path = st_pathf("%s:%s", bin, old);
	setenv("PATH", path, 1);
	struct st_task_status st = create_vol(IMG1, VOL1, MiB, ST_FMT_COW, ST_SPARSE, NULL, NULL);
	setenv("PATH", old, 1);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
	ck_assert_msg(strstr(st.message, "exit 3"), "%s", st.message);
	char *p = vpath(IMG1, VOL1, "");
	ck_assert(!exists(p));
	free(p);
	free(path);
	free(old);
	free(fake);
	free(bin);
}
END_TEST

START_TEST(volume_create_errors)
{
	mkdomain(SD1);
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = { SD1, IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE, NULL, "", NULL, NULL, false, false, 0, 0 };
	int64_t bad_sizes[] = { 0, -512, 1000, 513, INT64_MIN };
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		r.size = bad_sizes[i];
		ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
		ck_assert_int_eq(e.code, RPC_E_PARAMS);
	}
	r.size = MiB;
	r.format = 3;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	r.format = ST_FMT_RAW;
	r.alloc = 0;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	r.alloc = ST_SPARSE;
	/* traversal in every id */
	const char *evil[] = { "../../../../etc/passwd", "..", "a/b", "", "bbbbbbbb-0000-0000-0000-00000000000/",
			       "../bbbbbbbb-0000-0000-0000-0000000001" };
	for (size_t i = 0; i < sizeof(evil) / sizeof(evil[0]); i++) {
		struct st_volreq x = r;
		x.sd = evil[i];
		ck_assert_int_eq(st_volume_create(S, &x, tid, &e), -1);
		ck_assert_int_eq(e.code, RPC_E_PARAMS);
		x = r;
		x.img = evil[i];
		ck_assert_int_eq(st_volume_create(S, &x, tid, &e), -1);
		ck_assert_int_eq(e.code, RPC_E_PARAMS);
		x = r;
		x.vol = evil[i];
		ck_assert_int_eq(st_volume_create(S, &x, tid, &e), -1);
		ck_assert_int_eq(e.code, RPC_E_PARAMS);
		ck_assert_int_eq(st_volume_delete(S, SD1, evil[i], VOL1, NULL, tid, &e), -1);
		ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, evil[i], NULL, tid, &e), -1);
		ck_assert_int_eq(st_image_delete(S, SD1, evil[i], NULL, tid, &e), -1);
		ck_assert_int_eq(st_task_stop(S, evil[i], &e), -1);
		ck_assert_int_eq(e.code, RPC_E_NO_TASK);
		ck_assert_int_eq(st_domain_format(S, evil[i], &e), -1);
	}
	/* unknown domain */
	r.sd = SD2;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_DOMAIN);
	r.sd = SD1;
	/* duplicate id: the second create fails at once */
	r.alloc = ST_PREALLOCATED;
	r.size = 64 * MiB;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_VOLUME_EXISTS);
	ck_assert_ptr_nonnull(strstr(e.msg, VOL1));
	/* lookups */
	struct st_volume v;
	ck_assert_int_eq(st_volume_info(S, SD1, IMG2, VOL1, &v, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_IMAGE);
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL3, &v, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_VOLUME);
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG2, VOL1, NULL, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_IMAGE);
	ck_assert_int_eq(st_image_delete(S, SD1, IMG2, NULL, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_IMAGE);
	ck_assert_int_eq(st_volume_info(S, SD2, IMG1, VOL1, &v, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_DOMAIN);
}
END_TEST

START_TEST(volume_delete_and_image_delete)
{
	mkdomain(SD1);
	create_vol(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE, NULL, NULL);
	create_vol(IMG2, VOL2, MiB, ST_FMT_COW, ST_SPARSE, NULL, NULL);
	create_vol(IMG2, VOL3, MiB, ST_FMT_COW, ST_SPARSE, IMG2, VOL2);
	struct st_err e = {0};
	char tid[37];
	struct st_task_status st;
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, VOL1, NULL, tid, &e), 0);
	ck_assert_int_eq(st_task_wait(S, tid, 10000, &st), 0);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	char *d1 = vpath(IMG1, VOL1, ""), *m1 = vpath(IMG1, VOL1, ".meta");
	char *idir = st_pathf("%s/%s/images/%s", mnt, SD1, IMG1);
	ck_assert(!exists(d1));
	ck_assert(!exists(m1));
	ck_assert(!exists(idir));    /* last volume gone: image dir removed */
	ck_assert_int_eq(st_image_delete(S, SD1, IMG2, NULL, tid, &e), 0);
	ck_assert_int_eq(st_task_wait(S, tid, 10000, &st), 0);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	char *idir2 = st_pathf("%s/%s/images/%s", mnt, SD1, IMG2);
	ck_assert(!exists(idir2));
	pthread_mutex_lock(&S->lock);
	struct st_domain *d = map_get(&S->domains, SD1);
	ck_assert_int_eq(d->volumes.n, 0);
	ck_assert_int_eq(d->images.n, 0);
	ck_assert_int_eq(d->busy, 0);
	pthread_mutex_unlock(&S->lock);
	free(d1);
	free(m1);
	free(idir);
	free(idir2);
}
END_TEST

START_TEST(volume_set_description)
{
	mkdomain(SD1);
	create_vol(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE, NULL, NULL);
	struct st_err e = {0};
	char longd[400];
	memset(longd, 'x', sizeof(longd) - 1);
	longd[sizeof(longd) - 1] = '\0';
	ck_assert_int_eq(st_volume_set_description(S, SD1, IMG1, VOL1, longd, &e), 0);
	reopen();
	struct st_volume v;
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL1, &v, &e), 0);
	ck_assert_int_eq(strlen(v.description), ST_DESC_MAX);
	free(v.description);
	ck_assert_int_eq(st_volume_set_description(S, SD1, IMG1, VOL2, "x", &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_VOLUME);
}
END_TEST

/* ---- tasks --------------------------------------------------------------- */

#ifdef VD_TEST_HOOKS   /* slowed-down preallocation */
START_TEST(task_stop_rolls_back_preallocation)
{
	mkdomain(SD1);
	S->prealloc_force_write = true;
	S->prealloc_chunk_delay_us = 200000;   /* 64 MiB chunks, slowed down */
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = { SD1, IMG1, VOL1, 1024 * MiB, ST_FMT_RAW, ST_PREALLOCATED, NULL, "", NULL, NULL, false, false, 0, 0 };
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	struct st_task_status st;
	ck_assert_int_eq(st_task_get(S, tid, &st, &e), 0);
	ck_assert(st.state == ST_TS_INIT || st.state == ST_TS_RUNNING);
	/* clear refuses an unfinished task */
	ck_assert_int_eq(st_task_clear(S, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_TASK_STATE);
	/* revert refuses a task not done: VDSM's TaskNotFinished (task.py:1209-1210) */
	ck_assert_int_eq(st_task_revert(S, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_TASK_NOT_DONE);
	ck_assert_int_eq(rpc_err_code(RPC_E_TASK_NOT_DONE), 403);
	usleep(300000);
	ck_assert_int_eq(st_task_stop(S, tid, &e), 0);
	ck_assert_int_eq(st_task_wait(S, tid, 10000, &st), 0);
	ck_assert_int_eq(st.state, ST_TS_FINISHED);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
	ck_assert_int_eq(st.code, 411);   /* VDSM TaskAborted */
	ck_assert_int_eq(rpc_err_code(RPC_E_TASK_STATE), 410);
	ck_assert_ptr_nonnull(strstr(st.message, "aborted"));
	char *dp = vpath(IMG1, VOL1, ""), *mp = vpath(IMG1, VOL1, ".meta");
	ck_assert(!exists(dp));
	ck_assert(!exists(mp));
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL1, NULL, &e), -1);
	/* stopping a finished task is ignored, as VDSM does (task.py:1343-1347):
	 * 0 and the task as it was */
	ck_assert_int_eq(st_task_stop(S, tid, &e), 0);
	ck_assert_int_eq(st_task_get(S, tid, &st, &e), 0);
	ck_assert_int_eq(st.state, ST_TS_FINISHED);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
	ck_assert_int_eq(st.code, 411);
	/* reverting a task already rolled back: VDSM's "recovered" cannot move
	 * to racquiring (task.py _moveto), TaskStateTransitionError 441 */
	ck_assert_int_eq(st_task_revert(S, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_TASK_MOVE);
	ck_assert_int_eq(rpc_err_code(RPC_E_TASK_MOVE), 441);
	/* clearing it works */
	ck_assert_int_eq(st_task_clear(S, tid, &e), 0);
	ck_assert_int_eq(st_task_get(S, tid, &st, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_TASK);
	char *tp = st_task_path(S, tid);
	ck_assert(!exists(tp));
	free(tp);
	free(dp);
	free(mp);
}
END_TEST
#endif

START_TEST(task_results_survive_restart)
{
	mkdomain(SD1);
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = { SD1, IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE, NULL, "", NULL, NULL, false, false, 0, 0 };
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	ck_assert_int_eq(st_task_wait(S, tid, 10000, NULL), 0);
	reopen();
	struct st_task_status st;
	ck_assert_int_eq(st_task_get(S, tid, &st, &e), 0);
	ck_assert_int_eq(st.state, ST_TS_FINISHED);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	ck_assert_str_eq(st.verb, "createVolume");
	struct st_volume v;
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL1, &v, &e), 0);
	ck_assert(v.legal);
	free(v.description);
}
END_TEST

/* A crash leaves: an ILLEGAL volume with a "running" task record (rolled
 * back), a torn .tmp (removed); and things no task claims, which are kept:
 * an orphan data file, a corrupt .meta, an ILLEGAL volume whose rollback
 * failed (finished record). */
START_TEST(restart_reconciles_leftovers)
{
	mkdomain(SD1);
	create_vol(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE, NULL, NULL);
	st_stop_workers(S);
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = { SD1, IMG1, VOL2, MiB, ST_FMT_RAW, ST_SPARSE, NULL, "", NULL, NULL, false, false, 0, 0 };
	/* queued with no executor and never run: what a kill -9 leaves */
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	char *m2 = vpath(IMG1, VOL2, ".meta");
	ck_assert(exists(m2));
	char *orphan = vpath(IMG1, VOL3, "");
	char *tmp = vpath(IMG1, VOL1, ".meta.tmp");
	char *bad = st_pathf("%s/%s/images/%s/%s.meta", mnt, SD1, IMG2, VOL3);
	char *bad_dir = st_pathf("%s/%s/images/%s", mnt, SD1, IMG2);
	mkdir(bad_dir, 0755);
	FILE *f = fopen(orphan, "w");
	fclose(f);
	f = fopen(tmp, "w");
	fputs("garbage", f);
	fclose(f);
	f = fopen(bad, "w");
	fputs("FORMAT=RAW\n", f);
	fclose(f);
	S->threads = NULL;
	S->nthreads = 0;
	reopen();
	ck_assert(!exists(m2));
	ck_assert(!exists(tmp));
	ck_assert(exists(orphan));   /* no task claims them: never deleted */
	ck_assert(exists(bad));
	ck_assert_int_eq(S->scan_removed, 2);
	ck_assert_int_eq(S->tasks_aborted, 1);
	struct st_task_status st;
	ck_assert_int_eq(st_task_get(S, tid, &st, &e), 0);
	ck_assert_int_eq(st.state, ST_TS_FINISHED);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
	ck_assert_int_eq(st.code, 411);
	ck_assert_str_eq(st.message, "aborted by restart");
	struct st_volume v;
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL1, &v, &e), 0);
	free(v.description);
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL2, &v, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_VOLUME);
	free(m2);
	free(orphan);
	free(tmp);
	free(bad);
	free(bad_dir);
}
END_TEST

/* A child whose parent vanished is served ILLEGAL, never LEGAL. */
START_TEST(restart_marks_orphaned_child_illegal)
{
	mkdomain(SD1);
	create_vol(IMG1, VOL1, MiB, ST_FMT_COW, ST_SPARSE, NULL, NULL);
	create_vol(IMG1, VOL2, MiB, ST_FMT_COW, ST_SPARSE, IMG1, VOL1);
	char *d1 = vpath(IMG1, VOL1, ""), *m1 = vpath(IMG1, VOL1, ".meta");
	ck_assert_int_eq(unlink(d1), 0);
	ck_assert_int_eq(unlink(m1), 0);
	reopen();
	struct st_volume v;
	struct st_err e = {0};
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL2, &v, &e), 0);
	ck_assert(!v.legal);
	free(v.description);
	/* it can still be deleted */
	char tid[37];
	struct st_task_status st;
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, VOL2, NULL, tid, &e), 0);
	ck_assert_int_eq(st_task_wait(S, tid, 10000, &st), 0);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	free(d1);
	free(m1);
}
END_TEST

START_TEST(out_of_space_efbig)
{
	mkdomain(SD1);
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = { 4 * MiB, 4 * MiB };
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
#ifdef VD_TEST_HOOKS
	S->prealloc_force_write = true;   /* the write-zeros path; fallocate otherwise */
#endif
	struct st_task_status st = create_vol(IMG1, VOL1, 16 * MiB, ST_FMT_RAW, ST_PREALLOCATED, NULL, NULL);
	ck_assert_int_eq(st.state, ST_TS_FINISHED);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
	ck_assert_int_eq(st.code, 100);
	ck_assert_msg(strstr(st.message, strerror(EFBIG)), "%s", st.message);
	char *dp = vpath(IMG1, VOL1, "");
	ck_assert(!exists(dp));
	free(dp);
	/* sparse too: ftruncate past the limit */
	st = create_vol(IMG1, VOL2, 16 * MiB, ST_FMT_RAW, ST_SPARSE, NULL, NULL);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
	ck_assert_msg(strstr(st.message, strerror(EFBIG)), "%s", st.message);
	/* a small one still works */
	st = create_vol(IMG1, VOL3, MiB, ST_FMT_RAW, ST_PREALLOCATED, NULL, NULL);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
}
END_TEST

/* ---- pool + monitor ------------------------------------------------------ */

START_TEST(pool_and_monitor)
{
	mkdomain(SD1);
	struct st_err e = {0};
	const char *doms[] = { SD1 };
	ck_assert_int_eq(st_pool_create(S, SP1, "pool", SD2, 1, doms, 1, NULL, &e), -1);
	ck_assert_msg(st_pool_create(S, SP1, "pool", SD1, 1, doms, 1, NULL, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(st_pool_connect(S, SP1, true, 1, NULL, 0, &e), 0);
	ck_assert_int_eq(st_pool_connect(S, SD2, true, 1, NULL, 0, &e), -1);
	reopen();
	ck_assert_str_eq(S->pool_uuid, SP1);
	ck_assert_str_eq(S->pool_master, SD1);
	st_monitor_once(S);
	pthread_mutex_lock(&S->lock);
	struct st_domain *d = map_get(&S->domains, SD1);
	ck_assert_str_eq(d->pool, SP1);
	ck_assert(d->master);
	ck_assert(d->mon_valid);
	ck_assert_int_eq(d->mon_code, 0);
	ck_assert_int_gt(d->disktotal, 0);
	ck_assert_int_gt(d->mon_last_ms, 0);
	pthread_mutex_unlock(&S->lock);
	/* break the metadata: the monitor notices */
	char *md = st_pathf("%s/%s/dom_md/metadata", mnt, SD1);
	ck_assert_int_eq(truncate(md, 10), 0);
	ck_assert_int_eq(st_start_monitor(S, 50), 0);
	usleep(200000);
	st_stop_monitor(S);
	pthread_mutex_lock(&S->lock);
	ck_assert(!d->mon_valid);
	ck_assert_int_eq(d->mon_code, 350);
	ck_assert_int_ge(S->monitor_rounds, 2);
	pthread_mutex_unlock(&S->lock);
	free(md);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_core");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, kv_roundtrip_and_tamper);
	tcase_add_test(tc, domain_create_layout_and_reload);
	tcase_add_test(tc, domain_create_errors);
	tcase_add_test(tc, domain_format);
	tcase_add_test(tc, volume_raw_sparse_and_prealloc);
	tcase_add_test(tc, volume_qcow2_and_snapshot);
	tcase_add_test(tc, volume_create_errors);
	tcase_add_test(tc, qemu_img_exit_status_counts);
	tcase_add_test(tc, volume_delete_and_image_delete);
	tcase_add_test(tc, volume_set_description);
#ifdef VD_TEST_HOOKS
	tcase_add_test(tc, task_stop_rolls_back_preallocation);
#else
	check_skip("task_stop_rolls_back_preallocation",
		   "needs the slowed preallocation of a VD_TEST_HOOKS build (runs in make asan-unit / tsan)");
#endif
	tcase_add_test(tc, task_results_survive_restart);
	tcase_add_test(tc, restart_reconciles_leftovers);
	tcase_add_test(tc, restart_marks_orphaned_child_illegal);
	tcase_add_test(tc, out_of_space_efbig);
	tcase_add_test(tc, pool_and_monitor);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_ERROR);
	return check_run(suite());
}
