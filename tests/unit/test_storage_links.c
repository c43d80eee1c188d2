/* tests/unit/test_storage_links.c - symlinks planted in the places of the
 * storage tree test_storage_safety.c does not cover: the domain directory
 * itself, dom_md/metadata and its .tmp, the SPM lease file and its .tmp,
 * the source volume of a copy (reading a file outside into a disk the
 * attacker can read), the task record directory, the mount root and a mount
 * point under it, a volume's data file; and a qcow2 header whose backing
 * file points outside.
 * Every case checks that nothing outside the domain is
 * written (or read into the domain) and that the operation fails cleanly. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#define SD1 "11111111-1111-1111-1111-111111111111"
#define SD2 "22222222-2222-2222-2222-222222222222"
#define SD3 "33333333-3333-3333-3333-333333333333"
#define IMG1 "aaaaaaaa-0000-0000-0000-000000000001"
#define IMG2 "aaaaaaaa-0000-0000-0000-000000000002"
#define VOL1 "bbbbbbbb-0000-0000-0000-000000000001"
#define VOL2 "bbbbbbbb-0000-0000-0000-000000000002"
#define VOL3 "bbbbbbbb-0000-0000-0000-000000000003"
#define SP1 "cccccccc-0000-0000-0000-000000000001"
#define JOB1 "dddddddd-0000-0000-0000-000000000001"
#define MiB (1024 * 1024)
#define PRECIOUS "precious: nobody may read or change this"

static char root[200], export1[240], export2[240], outside[240], victim[260], state[240];
static struct storage_state *S;

static void open_state(void)
{
	char why[256];
	S = st_open(state, why, sizeof(why));
	ck_assert_msg(S != NULL, "%s", why);
	ck_assert_int_eq(st_start_workers(S, 1), 0);
}

static void reopen(void)
{
	st_close(S);
	open_state();
}

/* A fingerprint of everything below dir (names, types, sizes, bytes). */
static uint64_t tree_sum(const char *dir)
{
	uint64_t h = 1469598103934665603ULL;
	DIR *dh = opendir(dir);
	if (!dh)
		return 0;
	struct dirent *de;
	while ((de = readdir(dh))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		for (const char *c = de->d_name; *c; c++)
			h = (h ^ (unsigned char)*c) * 1099511628211ULL;
		char *p = st_path(dir, de->d_name);
		struct stat st;
		ck_assert_int_eq(lstat(p, &st), 0);
		h = (h ^ (uint64_t)st.st_mode) * 1099511628211ULL;
		if (S_ISDIR(st.st_mode)) {
			h ^= tree_sum(p);
		} else if (S_ISREG(st.st_mode)) {
			int fd = open(p, O_RDONLY);
			unsigned char b[4096];
			ssize_t n;
			while (fd >= 0 && (n = read(fd, b, sizeof(b))) > 0)
				for (ssize_t i = 0; i < n; i++)
					h = (h ^ b[i]) * 1099511628211ULL;
			if (fd >= 0)
				close(fd);
		}
		free(p);
	}
	closedir(dh);
	return h;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static bool file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	return memmem(buf, n, needle, strlen(needle)) != NULL;
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-stl-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(export1, sizeof(export1), "%s/e1", root);
	snprintf(export2, sizeof(export2), "%s/e2", root);
	snprintf(outside, sizeof(outside), "%s/outside", root);
	snprintf(victim, sizeof(victim), "%s/victim", outside);
	snprintf(state, sizeof(state), "%s/state", root);
	ck_assert_int_eq(mkdir(export1, 0755), 0);
	ck_assert_int_eq(mkdir(export2, 0755), 0);
	ck_assert_int_eq(mkdir(outside, 0755), 0);
	write_file(victim, PRECIOUS);
	open_state();
	struct st_err e = {0};
	ck_assert_msg(st_domain_create(S, SD1, ST_DT_LOCALFS, export1, "d1", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
	ck_assert_msg(st_domain_create(S, SD2, ST_DT_LOCALFS, export2, "d2", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
}

static void teardown(void)
{
	st_close(S);
	S = NULL;
	st_rmtree(root);
}

static struct st_task_status run(const char *tid)
{
	struct st_task_status st;
	ck_assert_int_eq(st_task_wait(S, tid, 30000, &st), 0);
	return st;
}

static struct st_task_status create(const char *sd, const char *img, const char *vol, int fmt)
{
	struct st_volreq r = { sd, img, vol, MiB, fmt, ST_SPARSE, "DATA", "", NULL, NULL, false,
			       false, 0, 0 };
	struct st_err e = {0};
	char tid[37];
	ck_assert_msg(st_volume_create(S, &r, tid, &e) == 0, "%s", e.msg);
	return run(tid);
}

static bool domain_valid(const char *sd)
{
	st_monitor_once(S);
	pthread_mutex_lock(&S->lock);
	struct st_domain *d = map_get(&S->domains, sd);
	bool ok = d && d->mon_valid;
	pthread_mutex_unlock(&S->lock);
	return ok;
}

/* <export>/<sdUUID> is a link to a copy of the domain outside. */
START_TEST(domain_directory_link)
{
	ck_assert_int_eq(create(SD1, IMG1, VOL1, ST_FMT_RAW).result, ST_TR_SUCCESS);
	char *dom = st_pathf("%s/%s", export1, SD1), *copy = st_pathf("%s/dom", outside);
	ck_assert_int_eq(rename(dom, copy), 0);
	ck_assert_int_eq(symlink(copy, dom), 0);
	uint64_t before = tree_sum(outside);
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = { SD1, IMG1, VOL2, MiB, ST_FMT_COW, ST_SPARSE, "DATA", "", NULL, NULL,
			       false, false, 0, 0 };
	if (st_volume_create(S, &r, tid, &e) == 0)
		ck_assert_int_ne(run(tid).result, ST_TR_SUCCESS);
	ck_assert_int_eq(st_volume_set_description(S, SD1, IMG1, VOL1, "x", &e), -1);
	if (st_volume_delete(S, SD1, IMG1, VOL1, NULL, tid, &e) == 0)
		ck_assert_int_ne(run(tid).result, ST_TR_SUCCESS);
	const char *doms[] = { SD1 };
	ck_assert_int_eq(st_pool_create(S, SP1, "p", SD1, 1, doms, 1, NULL, &e), -1);
	ck_assert(!domain_valid(SD1));
	reopen();   /* not loaded through the link, nothing scanned there */
	pthread_mutex_lock(&S->lock);
	ck_assert_ptr_null(map_get(&S->domains, SD1));
	pthread_mutex_unlock(&S->lock);
	ck_assert_uint_eq(tree_sum(outside), before);
	free(dom);
	free(copy);
}
END_TEST

/* dom_md/metadata and dom_md/metadata.tmp are links to a file outside. */
START_TEST(domain_metadata_links)
{
	char *md = st_pathf("%s/%s/dom_md/metadata", export1, SD1);
	char *tmp = st_pathf("%s.tmp", md), *copy = st_pathf("%s/md", outside);
	/* the .tmp name: replaced, never written through */
	ck_assert_int_eq(symlink(victim, tmp), 0);
	uint64_t before = tree_sum(outside);
	struct st_err e = {0};
	const char *doms[] = { SD1 };
	ck_assert_msg(st_pool_create(S, SP1, "p", SD1, 1, doms, 1, NULL, &e) == 0, "%s", e.msg);
	struct stat sb;
	ck_assert_int_eq(lstat(tmp, &sb), -1);
	ck_assert_uint_eq(tree_sum(outside), before);
	/* metadata itself a link to a valid copy outside: never read through
	 * (the domain is invalid), and writing replaces the link */
	ck_assert_int_eq(rename(md, copy), 0);
	ck_assert_int_eq(symlink(copy, md), 0);
	before = tree_sum(outside);
	ck_assert(!domain_valid(SD1));
	reopen();   /* not loaded through the link */
	pthread_mutex_lock(&S->lock);
	ck_assert_ptr_null(map_get(&S->domains, SD1));
	pthread_mutex_unlock(&S->lock);
	ck_assert_uint_eq(tree_sum(outside), before);
	/* the metadata writer replaces the link, never writes through it */
	struct st_domain *d = dom_new(SD1);
	ck_assert_int_eq(st_dom_load(d, export1), VD_EPROTO);
	snprintf(d->pool, sizeof(d->pool), "%s", SP1);
	d->name = xstrdup("d1");
	d->remote = xstrdup(export1);
	d->type = ST_DT_LOCALFS;
	d->dclass = ST_DC_DATA;
	d->version = 5;
	ck_assert_int_eq(st_domain_write_meta(S, d), 0);
	dom_free(d);
	ck_assert_int_eq(lstat(md, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode));
	ck_assert_uint_eq(tree_sum(outside), before);
	free(md);
	free(tmp);
	free(copy);
}
END_TEST

/* dom_md/spm_lease (or its .tmp) of the master domain is a link to a file
 * outside: spmStart never writes through it. */
START_TEST(spm_lease_links)
{
	struct st_err e = {0};
	const char *doms[] = { SD1 };
	struct st_lease_cfg lc = { 50, 200, 1000, 3 };
	ck_assert_msg(st_pool_create(S, SP1, "p", SD1, 1, doms, 1, &lc, &e) == 0, "%s", e.msg);
	char *lease = st_pathf("%s/%s/dom_md/spm_lease", export1, SD1);
	char *tmp = st_pathf("%s.tmp", lease);
	uint64_t before = tree_sum(outside);
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(symlink(victim, k ? tmp : lease), 0);
		char tid[37];
		ck_assert_msg(st_spm_start(S, SP1, tid, &e) == 0, "%s", e.msg);
		struct st_task_status st = run(tid);
		if (k == 0) {   /* the lease cannot be read: no SPM */
			ck_assert_int_ne(st.result, ST_TR_SUCCESS);
			unlink(lease);
		} else {        /* the planted .tmp is replaced, the lease taken */
			ck_assert_msg(st.result == ST_TR_SUCCESS, "%s", st.message);
			struct stat sb;
			ck_assert_int_eq(lstat(lease, &sb), 0);
			ck_assert(S_ISREG(sb.st_mode));
			ck_assert_int_eq(st_spm_stop(S, SP1, &e), 0);
		}
		ck_assert_int_eq(st_task_clear(S, tid, &e), 0);
		ck_assert_uint_eq(tree_sum(outside), before);
		ck_assert(file_has(victim, PRECIOUS));
	}
	free(lease);
	free(tmp);
}
END_TEST

/* The source of a copy is a link to a file outside: its bytes never end up
 * in a volume (SDM.copy_data, Image.move op=copy, Image.prepare). */
START_TEST(copy_source_link)
{
	ck_assert_int_eq(create(SD1, IMG1, VOL1, ST_FMT_RAW).result, ST_TR_SUCCESS);
	ck_assert_int_eq(create(SD1, IMG2, VOL2, ST_FMT_RAW).result, ST_TR_SUCCESS);
	char *data = st_pathf("%s/%s/images/%s/%s", export1, SD1, IMG1, VOL1);
	ck_assert_int_eq(unlink(data), 0);
	ck_assert_int_eq(symlink(victim, data), 0);
	struct st_err e = {0};
	const char *src[3] = { SD1, IMG1, VOL1 }, *dst[3] = { SD1, IMG2, VOL2 };
	if (st_copy_data(S, JOB1, src, dst, &e) == 0) {
		for (int i = 0; i < 3000; i++) {
			pthread_mutex_lock(&S->lock);
			struct st_job *j = map_get(&S->jobs, JOB1);
			bool fin = j->info.status != ST_JOB_PENDING && j->info.status != ST_JOB_RUNNING;
			int status = j->info.status;
			pthread_mutex_unlock(&S->lock);
			if (fin) {
				ck_assert_int_eq(status, ST_JOB_FAILED);
				break;
			}
			usleep(10000);
		}
	}
	char *d2 = st_pathf("%s/%s/images/%s/%s", export1, SD1, IMG2, VOL2);
	ck_assert(!file_has(d2, "precious"));
	struct st_imgcopy_req r = { NULL, SD1, IMG1, SD2, ST_IC_COPY, ST_SYNC_ALL, false, false,
				    false };
	char tid[37];
	if (st_image_copy(S, &r, tid, &e) == 0)
		ck_assert_int_ne(run(tid).result, ST_TR_SUCCESS);
	char *d3 = st_pathf("%s/%s/images/%s/%s", export2, SD2, IMG1, VOL1);
	ck_assert(!file_has(d3, "precious"));
	struct st_chain c = { 0 };
	ck_assert_int_eq(st_image_prepare(S, SD1, NULL, IMG1, VOL1, &c, &e), -1);
	ck_assert(file_has(victim, PRECIOUS));
	free(data);
	free(d2);
	free(d3);
}
END_TEST

/* Not a symlink but the same escape: the qcow2 header of a volume names a
 * backing file outside the domain.  Copies read the chain our metadata
 * describes (st_chain_json), so the outside file's bytes never reach a
 * destination. */
START_TEST(copy_source_backing_outside)
{
	ck_assert_int_eq(create(SD1, IMG1, VOL1, ST_FMT_RAW).result, ST_TR_SUCCESS);
	struct st_volreq r = { SD1, IMG1, VOL2, MiB, ST_FMT_COW, ST_SPARSE, "DATA", "", IMG1, VOL1,
			       false, false, 0, 0 };
	struct st_err e = {0};
	char tid[37];
	ck_assert_msg(st_volume_create(S, &r, tid, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(run(tid).result, ST_TR_SUCCESS);
	ck_assert_int_eq(create(SD1, IMG2, VOL3, ST_FMT_RAW).result, ST_TR_SUCCESS);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "qemu-img rebase -u -f qcow2 -b %s -F raw %s/%s/images/%s/%s",
		 victim, export1, SD1, IMG1, VOL2);
	ck_assert_int_eq(system(cmd), 0);
	const char *src[3] = { SD1, IMG1, VOL2 }, *dst[3] = { SD1, IMG2, VOL3 };
	ck_assert_msg(st_copy_data(S, JOB1, src, dst, &e) == 0, "%s", e.msg);
	int status = -1;
	for (int i = 0; i < 3000 && (status == -1 || status == ST_JOB_PENDING ||
				     status == ST_JOB_RUNNING); i++) {
		usleep(10000);
		pthread_mutex_lock(&S->lock);
		status = ((struct st_job *)map_get(&S->jobs, JOB1))->info.status;
		pthread_mutex_unlock(&S->lock);
	}
	ck_assert_int_eq(status, ST_JOB_DONE);   /* from the real base */
	char *d3 = st_pathf("%s/%s/images/%s/%s", export1, SD1, IMG2, VOL3);
	ck_assert(!file_has(d3, "precious"));
	struct st_imgcopy_req ic = { NULL, SD1, IMG1, SD2, ST_IC_COPY, ST_SYNC_ALL, false, false,
				     false };
	ck_assert_msg(st_image_copy(S, &ic, tid, &e) == 0, "%s", e.msg);
	struct st_task_status st = run(tid);
	ck_assert_msg(st.result == ST_TR_SUCCESS, "%s", st.message);
	for (int k = 0; k < 2; k++) {
		char *p = st_pathf("%s/%s/images/%s/%s", export2, SD2, IMG1, k ? VOL2 : VOL1);
		ck_assert(!file_has(p, "precious"));
		free(p);
	}
	ck_assert(file_has(victim, PRECIOUS));
	free(d3);
}
END_TEST

/* <storage_root>/tasks is a link outside: the storage is not opened (task
 * records would be written there). */
START_TEST(tasks_directory_link)
{
	st_close(S);
	S = NULL;
	char *tasks = st_path(state, "tasks"), *away = st_path(outside, "tasks");
	ck_assert_int_eq(rename(tasks, away), 0);
	ck_assert_int_eq(symlink(away, tasks), 0);
	uint64_t before = tree_sum(outside);
	char why[256] = "";
	struct storage_state *s = st_open(state, why, sizeof(why));
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(why, "Not a directory"));
	ck_assert_uint_eq(tree_sum(outside), before);
	unlink(tasks);
	ck_assert_int_eq(rename(away, tasks), 0);
	open_state();
	free(tasks);
	free(away);
}
END_TEST

/* <storage_root>/mnt, or a mount point below it, is a link outside:
 * connectStorageServer mounts nothing (mount(8) would follow it), and a
 * domain planted behind such a link is not found by StoragePool.connect. */
START_TEST(mount_root_links)
{
	struct st_conn_req r = { .id = SD1, .connection = "vdsm_test:tmpfs", .vfs_type = "tmpfs",
				 .mnt_options = "size=4m" };
	char *mnt = st_path(state, "mnt"), *mp = st_conn_mountpoint(S, r.connection);
	char *target = st_path(outside, "target");
	ck_assert_int_eq(mkdir(target, 0755), 0);
	char msg[512];
	for (int k = 0; k < 2; k++) {
		if (k == 0) {   /* the mount root */
			ck_assert_int_eq(symlink(outside, mnt), 0);
		} else {        /* the mount point */
			ck_assert_int_eq(unlink(mnt), 0);
			ck_assert_int_eq(mkdir(mnt, 0755), 0);
			ck_assert_int_eq(symlink(target, mp), 0);
		}
		uint64_t before = tree_sum(outside);
		int st = st_conn_connect(S, ST_DT_POSIXFS, &r, msg, sizeof(msg));
		/* (a mount that went through the link is undone before failing) */
		char *real = st_path(outside, strrchr(mp, '/') + 1);
		bool leaked = st_is_mounted(target) || st_is_mounted(real);
		umount2(target, MNT_DETACH);
		umount2(real, MNT_DETACH);
		free(real);
		ck_assert(!leaked);
		ck_assert_uint_eq(tree_sum(outside), before);   /* no mount point made there */
		ck_assert_int_eq(st, 477);
		ck_assert_msg(strstr(msg, "symlinks refused") != NULL, "%s", msg);
		/* disconnect leaves the link and what it points to alone */
		ck_assert_int_eq(st_conn_disconnect(S, ST_DT_POSIXFS, &r, msg, sizeof(msg)), 0);
		struct stat sb;
		ck_assert_int_eq(lstat(k ? mp : mnt, &sb), 0);
		ck_assert(S_ISLNK(sb.st_mode));
	}
	/* a domain behind a link under the mount root: not found */
	char *base = st_path(outside, "base"), *link = st_path(mnt, "evil");
	ck_assert_int_eq(mkdir(base, 0755), 0);
	struct st_err e = {0};
	ck_assert_msg(st_domain_create(S, SD3, ST_DT_LOCALFS, base, "d3", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
	pthread_mutex_lock(&S->lock);
	struct st_domain *d3 = map_del(&S->domains, SD3);   /* forget it here */
	pthread_mutex_unlock(&S->lock);
	dom_free(d3);
	ck_assert_int_eq(symlink(base, link), 0);
	struct st_domain *found = st_conn_find_domain(S, SD3);
	ck_assert_ptr_null(found);
	free(mnt);
	free(mp);
	free(target);
	free(base);
	free(link);
}
END_TEST

/* A volume's data file that is a link (to a file outside), a directory or
 * missing: st_vol_open refuses it with the system's reason, and the error
 * idiom tells it as "<context>: <system text>", truncated as snprintf. */
START_TEST(volume_data_file_link)
{
	ck_assert_int_eq(create(SD1, IMG1, VOL1, ST_FMT_RAW).result, ST_TR_SUCCESS);
	char *vol = st_pathf("%s/%s/images/%s/%s", export1, SD1, IMG1, VOL1);
	ck_assert_int_eq(unlink(vol), 0);
	ck_assert_int_eq(symlink(victim, vol), 0);
	uint64_t before = tree_sum(outside);
	pthread_mutex_lock(&S->lock);
	const struct st_domain *d = map_get(&S->domains, SD1);
	pthread_mutex_unlock(&S->lock);
	struct stat st;
	ck_assert_int_eq(st_vol_open(d, IMG1, VOL1, O_RDWR, &st), VD_ESYS(ELOOP));
	ck_assert_int_eq(st_vol_open(d, IMG1, VOL1, O_RDONLY, NULL), VD_ESYS(ELOOP));
	ck_assert_int_eq(st_vol_open(d, IMG1, VOL2, O_RDONLY, NULL), VD_ESYS(ENOENT));
	ck_assert_int_eq(st_vol_open(d, IMG2, VOL1, O_RDONLY, NULL), VD_ESYS(ENOENT));
	ck_assert_int_eq(unlink(vol), 0);
	ck_assert_int_eq(mkdir(vol, 0755), 0);
	ck_assert_int_eq(st_vol_open(d, IMG1, VOL1, O_RDONLY, &st), VD_ESYS(EINVAL));
	ck_assert_int_eq(rmdir(vol), 0);
	ck_assert_uint_eq(tree_sum(outside), before);

	struct st_err e = {0};
	ck_assert_int_eq(st_fail_rc(&e, RPC_E_GENERAL, VD_ESYS(ELOOP), "volume %s data file", VOL1), -1);
	ck_assert_int_eq(e.code, RPC_E_GENERAL);
	char want[300];
	snprintf(want, sizeof(want), "volume %s data file: %s", VOL1, strerror(ELOOP));
	ck_assert_str_eq(e.msg, want);
	char small[20];
	ck_assert_int_eq(st_errf(small, sizeof(small), VD_ESYS(ENOENT), "creating %s", VOL1), VD_ESYS(ENOENT));
	snprintf(want, sizeof(want), "creating %s: %s", VOL1, strerror(ENOENT));
	want[sizeof(small) - 1] = '\0';   /* the context alone fills it */
	ck_assert_str_eq(small, want);
	ck_assert_int_eq(st_errf(small, sizeof(small), VD_ESYS(ENOENT), "mkdir"), VD_ESYS(ENOENT));
	snprintf(want, sizeof(want), "mkdir: %s", strerror(ENOENT));
	want[sizeof(small) - 1] = '\0';   /* the system text cut */
	ck_assert_str_eq(small, want);
	/* storage's named outcomes keep the system text of the errno they
	 * replaced; other codes read as vd_strerror */
	ck_assert_str_eq(st_rc_text(VD_ECANCELED), strerror(ECANCELED));
	ck_assert_str_eq(st_rc_text(VD_EBUSY), strerror(EBUSY));
	ck_assert_str_eq(st_rc_text(VD_EIO), strerror(EIO));
	ck_assert_str_eq(st_rc_text(VD_EPROTO), strerror(EBADMSG));
	ck_assert_str_eq(st_rc_text(VD_ENOENT), strerror(ENOENT));
	ck_assert_str_eq(st_rc_text(VD_ESYS(ENOSPC)), strerror(ENOSPC));
	ck_assert_str_eq(st_rc_text(VD_ETIMEDOUT), vd_strerror(VD_ETIMEDOUT));
	char msg[64];
	ck_assert_int_eq(st_errf(msg, sizeof(msg), VD_ECANCELED, "copying"), VD_ECANCELED);
	ck_assert_str_eq(msg, "copying: Operation canceled");
	free(vol);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_links");
	TCase *tc = tcase_create("links");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, domain_directory_link);
	tcase_add_test(tc, domain_metadata_links);
	tcase_add_test(tc, spm_lease_links);
	tcase_add_test(tc, copy_source_link);
	tcase_add_test(tc, copy_source_backing_outside);
	tcase_add_test(tc, tasks_directory_link);
	tcase_add_test(tc, mount_root_links);
	tcase_add_test(tc, volume_data_file_link);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_ERROR);
	return check_run(suite());
}
