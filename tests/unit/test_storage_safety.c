/* tests/unit/test_storage_safety.c - the storage core's data-safety rules
 * against real files: failed rollbacks keep the volume and a record, tasks
 * queued at shutdown are rolled back and reported aborted, a delete cut
 * short by a crash completes at restart, pool state follows the disk,
 * planted symlinks never lead outside the domain, qemu-img children die
 * with the task, and the parameters that used to be ignored. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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
#define IMG1 "aaaaaaaa-0000-0000-0000-000000000001"
#define IMG2 "aaaaaaaa-0000-0000-0000-000000000002"
#define VOL1 "bbbbbbbb-0000-0000-0000-000000000001"
#define VOL2 "bbbbbbbb-0000-0000-0000-000000000002"
#define VOL3 "bbbbbbbb-0000-0000-0000-000000000003"
#define SP1 "cccccccc-0000-0000-0000-000000000001"
#define MiB (1024 * 1024)

static char root[256];
static char mnt[300];
static char outside[300];
static struct storage_state *S;

static void open_state(unsigned threads)
{
	char why[256];
	char *r = st_path(root, "state");
	S = st_open(r, why, sizeof(why));
	free(r);
	ck_assert_msg(S != NULL, "%s", why);
	if (threads)
		ck_assert_int_eq(st_start_workers(S, threads), 0);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-sts-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(mnt, sizeof(mnt), "%s/export", root);
	snprintf(outside, sizeof(outside), "%s/outside", root);
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	ck_assert_int_eq(mkdir(outside, 0755), 0);
	open_state(2);
}

static void teardown(void)
{
	st_close(S);
	S = NULL;
	st_rmtree(root);
}

/* A restart after a kill -9: no rollback of anything in flight. */
static void crash_and_restart(void)
{
	S->quit = true;   /* executors (if any) were stopped by the test */
	st_close(S);
	open_state(2);
}

static void reopen(void)
{
	st_close(S);
	open_state(2);
}

static void mkdomain(void)
{
	struct st_err e = {0};
	ck_assert_msg(st_domain_create(S, SD1, ST_DT_LOCALFS, mnt, "dom", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
}

static struct st_volreq req(const char *img, const char *vol, int64_t size, int fmt, int alloc)
{
	struct st_volreq r = { SD1, img, vol, size, fmt, alloc, "DATA", "", NULL, NULL,
			       false, false, 0, 0 };
	return r;
}

static struct st_task_status wait_task(const char *tid)
{
	struct st_task_status st;
	ck_assert_int_eq(st_task_wait(S, tid, 30000, &st), 0);
	return st;
}

static struct st_task_status create(const char *img, const char *vol, int64_t size, int fmt,
				    int alloc)
{
	struct st_err e = {0};
	struct st_volreq r = req(img, vol, size, fmt, alloc);
	char tid[37];
	ck_assert_msg(st_volume_create(S, &r, tid, &e) == 0, "%s", e.msg);
	return wait_task(tid);
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

static bool vol_legal(const char *img, const char *vol, bool *legal)
{
	struct st_err e = {0};
	struct st_volume v;
	if (st_volume_info(S, SD1, img, vol, &v, &e) < 0)
		return false;
	free(v.description);
	*legal = v.legal;
	return true;
}

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* ---- failed rollbacks ---------------------------------------------------- */

/* A delete stopped before it ran must make the volume LEGAL again; when that
 * metadata write fails the volume stays, ILLEGAL, the task says so, and the
 * next start keeps it (it used to be deleted by the scan). */
START_TEST(failed_restore_keeps_volume_and_record)
{
	mkdomain();
	ck_assert_int_eq(create(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE).result, ST_TR_SUCCESS);
	st_stop_workers(S);
	struct st_err e = {0};
	char tid[37];
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, VOL1, NULL, tid, &e), 0);
	ck_assert_int_eq(st_task_stop(S, tid, &e), 0);
	/* the rewrite's temporary name is taken by a non-empty directory */
	char *blocker = vpath(IMG1, VOL1, ".meta.tmp");
	char *inner = st_pathf("%s/x", blocker);
	ck_assert_int_eq(mkdir(blocker, 0755), 0);
	ck_assert_int_eq(mkdir(inner, 0755), 0);
	ck_assert_int_eq(st_start_workers(S, 1), 0);
	struct st_task_status st = wait_task(tid);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_FAILURE);
	ck_assert_msg(strstr(st.message, "kept ILLEGAL"), "%s", st.message);
	bool legal = true;
	ck_assert(vol_legal(IMG1, VOL1, &legal));
	ck_assert(!legal);
	reopen();
	ck_assert(vol_legal(IMG1, VOL1, &legal));   /* still there */
	ck_assert(!legal);
	char *dp = vpath(IMG1, VOL1, "");
	ck_assert(exists(dp));
	ck_assert_int_eq(st_task_get(S, tid, &st, &e), 0);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_FAILURE);
	/* the ILLEGAL volume can still be deleted for real */
	st_rmtree(blocker);
	char tid2[37];
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, VOL1, NULL, tid2, &e), 0);
	ck_assert_int_eq(wait_task(tid2).result, ST_TR_SUCCESS);
	ck_assert(!exists(dp));
	free(dp);
	free(inner);
	free(blocker);
}
END_TEST

/* A create rolled back whose metadata cannot be removed (a bind mount over
 * it: EBUSY) keeps the volume ILLEGAL with a cleanFailure record. */
START_TEST(failed_create_rollback_keeps_volume)
{
	mkdomain();
	st_stop_workers(S);
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = req(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE);
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	ck_assert_int_eq(st_task_stop(S, tid, &e), 0);
	char *mp = vpath(IMG1, VOL1, ".meta");
	char *src = st_pathf("%s/pin", outside);
	FILE *f = fopen(src, "w");
	fclose(f);
	if (mount(src, mp, NULL, MS_BIND, NULL) < 0) {
		fprintf(stderr, "SKIP failed_create_rollback_keeps_volume: bind mount: %s\n",
			strerror(errno));
		free(mp);
		free(src);
		ck_assert_int_eq(st_start_workers(S, 1), 0);
		return;
	}
	ck_assert_int_eq(st_start_workers(S, 1), 0);
	struct st_task_status st = wait_task(tid);
	umount2(mp, MNT_DETACH);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_FAILURE);
	ck_assert_int_eq(st.code, 411);
	ck_assert_msg(strstr(st.message, "rollback failed"), "%s", st.message);
	bool legal = true;
	ck_assert(vol_legal(IMG1, VOL1, &legal));
	ck_assert(!legal);
	reopen();
	ck_assert(vol_legal(IMG1, VOL1, &legal));
	ck_assert(!legal);
	ck_assert(exists(mp));
	free(mp);
	free(src);
}
END_TEST

/* ---- shutdown and crashes ------------------------------------------------ */

#ifdef VD_TEST_HOOKS   /* slowed-down preallocation keeps tasks queued */
START_TEST(queued_tasks_aborted_at_shutdown)
{
	mkdomain();
	ck_assert_int_eq(create(IMG2, VOL3, MiB, ST_FMT_RAW, ST_SPARSE).result, ST_TR_SUCCESS);
	st_stop_workers(S);
	ck_assert_int_eq(st_start_workers(S, 1), 0);
	S->prealloc_force_write = true;
	S->prealloc_chunk_delay_us = 100000;
	struct st_err e = {0};
	char t1[37], t2[37], t3[37];
	struct st_volreq r1 = req(IMG1, VOL1, 1024 * MiB, ST_FMT_RAW, ST_PREALLOCATED);
	struct st_volreq r2 = req(IMG1, VOL2, MiB, ST_FMT_RAW, ST_SPARSE);
	ck_assert_int_eq(st_volume_create(S, &r1, t1, &e), 0);
	ck_assert_int_eq(st_volume_create(S, &r2, t2, &e), 0);
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG2, VOL3, NULL, t3, &e), 0);
	usleep(150000);
	st_stop_workers(S);   /* a clean shutdown */
	const char *ids[] = { t1, t2, t3 };
	for (int i = 0; i < 3; i++) {
		struct st_task_status st;
		ck_assert_int_eq(st_task_get(S, ids[i], &st, &e), 0);
		ck_assert_int_eq(st.state, ST_TS_FINISHED);
		ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
		ck_assert_int_eq(st.code, 411);
		ck_assert_msg(strstr(st.message, "shutting down"), "%s", st.message);
	}
	bool legal = false;
	ck_assert(!vol_legal(IMG1, VOL1, &legal));
	ck_assert(!vol_legal(IMG1, VOL2, &legal));
	ck_assert(vol_legal(IMG2, VOL3, &legal));
	ck_assert(legal);
	reopen();
	ck_assert_int_eq(S->tasks_aborted, 0);   /* all records were finished */
	ck_assert(vol_legal(IMG2, VOL3, &legal));
	ck_assert(legal);
	ck_assert(!vol_legal(IMG1, VOL1, &legal));
	char *d1 = vpath(IMG1, VOL1, "");
	ck_assert(!exists(d1));
	free(d1);
	for (int i = 0; i < 3; i++) {
		struct st_task_status st;
		ck_assert_int_eq(st_task_get(S, ids[i], &st, &e), 0);
		ck_assert_int_eq(st.code, 411);
	}
}
END_TEST
#endif

/* kill -9 after a delete marked its volumes ILLEGAL: the restart completes
 * the delete and reports success (it used to report failure while the scan
 * removed the volume). */
START_TEST(delete_interrupted_completes_at_restart)
{
	mkdomain();
	ck_assert_int_eq(create(IMG1, VOL1, MiB, ST_FMT_COW, ST_SPARSE).result, ST_TR_SUCCESS);
	struct st_err e = {0};
	struct st_volreq snap = req(IMG1, VOL2, MiB, ST_FMT_COW, ST_SPARSE);
	snap.src_img = IMG1;
	snap.src_vol = VOL1;
	char tid[37];
	ck_assert_int_eq(st_volume_create(S, &snap, tid, &e), 0);
	ck_assert_int_eq(wait_task(tid).result, ST_TR_SUCCESS);
	ck_assert_int_eq(create(IMG2, VOL3, MiB, ST_FMT_RAW, ST_SPARSE).result, ST_TR_SUCCESS);
	st_stop_workers(S);
	char ti[37], tv[37];
	ck_assert_int_eq(st_image_delete(S, SD1, IMG1, NULL, ti, &e), 0);
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG2, VOL3, NULL, tv, &e), 0);
	crash_and_restart();
	struct st_task_status st;
	ck_assert_int_eq(st_task_get(S, ti, &st, &e), 0);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	ck_assert_int_eq(st_task_get(S, tv, &st, &e), 0);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	bool legal;
	ck_assert(!vol_legal(IMG1, VOL1, &legal));
	ck_assert(!vol_legal(IMG1, VOL2, &legal));
	ck_assert(!vol_legal(IMG2, VOL3, &legal));
	char *idir = st_pathf("%s/%s/images/%s", mnt, SD1, IMG1);
	ck_assert(!exists(idir));
	free(idir);
	ck_assert_int_eq(S->tasks_aborted, 2);
}
END_TEST

/* ---- pool state follows the disk ----------------------------------------- */

START_TEST(pool_memory_only_after_durable)
{
	mkdomain();
	struct st_err e = {0};
	const char *doms[] = { SD1 };
	char *blocker = st_pathf("%s/state/pool.meta.tmp", root);
	char *inner = st_pathf("%s/x", blocker);
	ck_assert_int_eq(mkdir(blocker, 0755), 0);
	ck_assert_int_eq(mkdir(inner, 0755), 0);
	ck_assert_int_eq(st_pool_create(S, SP1, "pool", SD1, 1, doms, 1, NULL, &e), -1);
	pthread_mutex_lock(&S->lock);
	ck_assert_str_eq(S->pool_uuid, "");
	struct st_domain *d = map_get(&S->domains, SD1);
	ck_assert_str_eq(d->pool, "");
	ck_assert(!d->master);
	pthread_mutex_unlock(&S->lock);
	reopen();   /* and the domain's metadata was put back */
	pthread_mutex_lock(&S->lock);
	d = map_get(&S->domains, SD1);
	ck_assert_str_eq(d->pool, "");
	pthread_mutex_unlock(&S->lock);
	st_rmtree(blocker);
	ck_assert_msg(st_pool_create(S, SP1, "pool", SD1, 1, doms, 1, NULL, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(st_pool_connect(S, SP1, true, 5, SD1, 1, &e), 0);
	/* a disconnect that cannot be written leaves the pool connected */
	ck_assert_int_eq(mkdir(blocker, 0755), 0);
	ck_assert_int_eq(mkdir(inner, 0755), 0);
	ck_assert_int_eq(st_pool_connect(S, SP1, false, 5, NULL, 0, &e), -1);
	ck_assert(S->pool_connected);
	ck_assert_int_eq(S->pool_host_id, 5);
	st_rmtree(blocker);
	reopen();
	ck_assert(S->pool_connected);
	ck_assert_int_eq(S->pool_host_id, 5);
	free(blocker);
	free(inner);
}
END_TEST

/* ---- symlinks ------------------------------------------------------------ */

static unsigned count_entries(const char *dir)
{
	DIR *dh = opendir(dir);
	ck_assert_ptr_nonnull(dh);
	unsigned n = 0;
	struct dirent *de;
	while ((de = readdir(dh)))
		if (de->d_name[0] != '.')
			n++;
	closedir(dh);
	return n;
}

/* Every name an attacker with write access inside the domain could plant
 * as a symlink to a directory / file outside: nothing outside changes. */
START_TEST(planted_symlinks_never_followed)
{
	mkdomain();
	char *victim = st_pathf("%s/victim", outside);
	FILE *f = fopen(victim, "w");
	fputs("precious", f);
	fclose(f);
	ck_assert_int_eq(create(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE).result, ST_TR_SUCCESS);
	struct st_err e = {0};
	char tid[37];

	/* 1. images/<img> is a link to a directory outside */
	char *img2 = st_pathf("%s/%s/images/%s", mnt, SD1, IMG2);
	ck_assert_int_eq(symlink(outside, img2), 0);
	struct st_volreq r = req(IMG2, VOL2, MiB, ST_FMT_RAW, ST_SPARSE);
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	r.format = ST_FMT_COW;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	unlink(img2);

	/* 2. the data file name of a new volume is a link to a file outside */
	char *d2 = vpath(IMG1, VOL2, "");
	ck_assert_int_eq(symlink(victim, d2), 0);
	for (int fmt = ST_FMT_COW; fmt <= ST_FMT_RAW; fmt++) {
		struct st_task_status st = create(IMG1, VOL2, MiB, fmt, ST_SPARSE);
		ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
		ck_assert(exists(d2));   /* the link itself is not ours to remove */
	}
	unlink(d2);

	/* 3. <vol>.meta and <vol>.meta.tmp are links to the victim */
	char *m1 = vpath(IMG1, VOL1, ".meta"), *t1 = vpath(IMG1, VOL1, ".meta.tmp");
	ck_assert_int_eq(symlink(victim, t1), 0);
	ck_assert_int_eq(st_volume_set_description(S, SD1, IMG1, VOL1, "new", &e), 0);
	ck_assert(!exists(t1));
	char *m3 = vpath(IMG1, VOL3, ".meta");
	ck_assert_int_eq(symlink(victim, m3), 0);
	ck_assert_int_eq(create(IMG1, VOL3, MiB, ST_FMT_RAW, ST_SPARSE).result, ST_TR_SUCCESS);
	struct stat sb;
	ck_assert_int_eq(lstat(m3, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode));   /* replaced, not written through */

	/* 4. the data file of an existing volume replaced by a link: delete
	 * with postZero must not zero the victim */
	char *d3 = vpath(IMG1, VOL3, "");
	unlink(d3);
	ck_assert_int_eq(symlink(victim, d3), 0);
	struct st_delopts zero = { .postzero = true, .discard = true };
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, VOL3, &zero, tid, &e), 0);
	wait_task(tid);

	/* 5. dom_md is a link to a directory outside: metadata is not written
	 * there, and the domain is reported invalid */
	char *md = st_pathf("%s/%s/dom_md", mnt, SD1), *mdold = st_pathf("%s.old", md);
	ck_assert_int_eq(rename(md, mdold), 0);
	ck_assert_int_eq(symlink(outside, md), 0);
	const char *doms[] = { SD1 };
	ck_assert_int_eq(st_pool_create(S, SP1, "p", SD1, 1, doms, 1, NULL, &e), -1);
	st_monitor_once(S);
	pthread_mutex_lock(&S->lock);
	ck_assert(!((struct st_domain *)map_get(&S->domains, SD1))->mon_valid);
	pthread_mutex_unlock(&S->lock);
	unlink(md);
	ck_assert_int_eq(rename(mdold, md), 0);

	/* 6. restart with links planted everywhere: the scan removes nothing
	 * outside */
	ck_assert_int_eq(symlink(outside, img2), 0);
	ck_assert_int_eq(symlink(victim, d2), 0);
	char *t2 = vpath(IMG1, VOL2, ".meta.tmp");
	ck_assert_int_eq(symlink(victim, t2), 0);
	char *images = st_pathf("%s/%s/images", mnt, SD1);
	reopen();
	ck_assert_int_eq(count_entries(outside), 2);   /* victim, the bind source */

	/* 7. images/ itself is a link: creation fails, nothing written */
	char *imold = st_pathf("%s.old", images);
	ck_assert_int_eq(rename(images, imold), 0);
	ck_assert_int_eq(symlink(outside, images), 0);
	r = req(IMG1, VOL2, MiB, ST_FMT_COW, ST_SPARSE);
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	unlink(images);
	ck_assert_int_eq(rename(imold, images), 0);

	char buf[64];
	slurp(victim, buf, sizeof(buf));
	ck_assert_str_eq(buf, "precious");
	ck_assert_int_eq(count_entries(outside), 2);
	free(victim);
	free(img2);
	free(d2);
	free(m1);
	free(t1);
	free(m3);
	free(d3);
	free(md);
	free(mdold);
	free(t2);
	free(images);
	free(imold);
}
END_TEST

static void setup_symlink(void)
{
	setup();
	/* a second entry outside, so that "count unchanged" means something */
	char *p = st_pathf("%s/pin", outside);
	FILE *f = fopen(p, "w");
	fclose(f);
	free(p);
}

/* ---- qemu-img children --------------------------------------------------- */

START_TEST(qemu_img_child_killed_on_stop)
{
	mkdomain();
	char *bin = st_pathf("%s/bin", root);
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	char *fake = st_pathf("%s/qemu-img", bin);
	char *pidf = st_pathf("%s/child.pid", root);
	FILE *f = fopen(fake, "w");
	fprintf(f, "#!/bin/sh\necho $$ > %s\nexec sleep 60\n", pidf);
	fclose(f);
	ck_assert_int_eq(chmod(fake, 0755), 0);
	const char *path0 = getenv("PATH");
	char *old = strdup(path0 ? path0 : "/usr/bin:/bin");
	char *path = st_pathf("%s:%s", bin, old);
	setenv("PATH", path, 1);
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = req(IMG1, VOL1, MiB, ST_FMT_COW, ST_SPARSE);
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	for (int i = 0; i < 100 && !exists(pidf); i++)
		usleep(50000);
	setenv("PATH", old, 1);
	ck_assert(exists(pidf));
	char buf[32];
	slurp(pidf, buf, sizeof(buf));
	pid_t child = (pid_t)atoi(buf);
	ck_assert_int_gt(child, 0);
	st_stop_workers(S);   /* shutdown kills and reaps it */
	ck_assert_int_eq(kill(child, 0), -1);
	ck_assert_int_eq(errno, ESRCH);
	struct st_task_status st;
	ck_assert_int_eq(st_task_get(S, tid, &st, &e), 0);
	ck_assert_int_eq(st.result, ST_TR_CLEAN_SUCCESS);
	ck_assert_int_eq(st.code, 411);
	char *dp = vpath(IMG1, VOL1, "");
	ck_assert(!exists(dp));
	free(dp);
	free(bin);
	free(fake);
	free(pidf);
	free(old);
	free(path);
}
END_TEST

/* ---- parameters ---------------------------------------------------------- */

START_TEST(create_legal_initial_size_sequence)
{
	mkdomain();
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = req(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE);
	r.illegal = true;
	r.sequence = 7;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	ck_assert_int_eq(wait_task(tid).result, ST_TR_SUCCESS);
	bool legal = true;
	ck_assert(vol_legal(IMG1, VOL1, &legal));
	ck_assert(!legal);
	reopen();   /* an ILLEGAL volume no task claims is kept */
	ck_assert(vol_legal(IMG1, VOL1, &legal));
	ck_assert(!legal);
	struct st_volume v;
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL1, &v, &e), 0);
	ck_assert_int_eq(v.sequence, 7);
	free(v.description);
	/* initialSize: VDSM's file-volume rules */
	r = req(IMG1, VOL2, MiB, ST_FMT_RAW, ST_SPARSE);
	r.initial_given = true;
	r.initial_size = 0;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	r.format = ST_FMT_COW;
	r.initial_size = 4096;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	r.format = ST_FMT_RAW;
	r.alloc = ST_PREALLOCATED;
	r.initial_size = 2 * MiB;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	r.initial_size = MiB / 2;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	ck_assert_int_eq(wait_task(tid).result, ST_TR_SUCCESS);
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL2, &v, &e), 0);
	ck_assert_int_ge(v.truesize, MiB / 2);   /* at least initialSize allocated */
	free(v.description);
	/* Volume.delete's force is refused, not ignored */
	struct st_delopts force = { .force = true };
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, VOL2, &force, tid, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	/* ... except Image.delete's, deprecated and not evaluated (VDSM) */
	ck_assert_int_eq(st_image_delete(S, SD1, IMG1, &force, tid, &e), 0);
	ck_assert_int_eq(wait_task(tid).result, ST_TR_SUCCESS);
}
END_TEST

/* postZero writes zeros over the data before it is unlinked, discard punches
 * it out: seen through a second hard link to the same inode. */
START_TEST(delete_post_zero_and_discard)
{
	mkdomain();
	ck_assert_int_eq(create(IMG1, VOL1, MiB, ST_FMT_RAW, ST_PREALLOCATED).result, ST_TR_SUCCESS);
	ck_assert_int_eq(create(IMG2, VOL2, MiB, ST_FMT_RAW, ST_PREALLOCATED).result, ST_TR_SUCCESS);
	char *d1 = vpath(IMG1, VOL1, ""), *d2 = vpath(IMG2, VOL2, "");
	char *l1 = st_pathf("%s/link1", mnt), *l2 = st_pathf("%s/link2", mnt);
	int fd = open(d1, O_WRONLY);
	char junk[4096];
	memset(junk, 0xab, sizeof(junk));
	for (int i = 0; i < 256; i++)
		ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	ck_assert_int_eq(link(d1, l1), 0);
	ck_assert_int_eq(link(d2, l2), 0);
	struct st_err e = {0};
	char tid[37];
	struct st_delopts zero = { .postzero = true };
	ck_assert_int_eq(st_volume_delete(S, SD1, IMG1, VOL1, &zero, tid, &e), 0);
	ck_assert_int_eq(wait_task(tid).result, ST_TR_SUCCESS);
	ck_assert(!exists(d1));
	char buf[4096];
	fd = open(l1, O_RDONLY);
	ssize_t n, total = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			ck_assert_int_eq(buf[i], 0);
		total += n;
	}
	close(fd);
	ck_assert_int_eq(total, MiB);
	struct st_delopts disc = { .discard = true };
	ck_assert_int_eq(st_image_delete(S, SD1, IMG2, &disc, tid, &e), 0);
	ck_assert_int_eq(wait_task(tid).result, ST_TR_SUCCESS);
	struct stat sb;
	ck_assert_int_eq(stat(l2, &sb), 0);
	ck_assert_int_eq(sb.st_size, MiB);
	ck_assert_int_lt(sb.st_blocks * 512, MiB);   /* punched out */
	free(d1);
	free(d2);
	free(l1);
	free(l2);
}
END_TEST

/* Sizes are refreshed by the monitor (off the loop thread, no lock held
 * during the stat), not only at create and startup. */
START_TEST(monitor_refreshes_sizes)
{
	mkdomain();
	ck_assert_int_eq(create(IMG1, VOL1, MiB, ST_FMT_RAW, ST_SPARSE).result, ST_TR_SUCCESS);
	struct st_err e = {0};
	struct st_volume v;
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL1, &v, &e), 0);
	free(v.description);
	ck_assert_int_eq(v.truesize, 0);
	char *dp = vpath(IMG1, VOL1, "");
	int fd = open(dp, O_WRONLY);
	char junk[65536];
	memset(junk, 1, sizeof(junk));
	ck_assert_int_eq(pwrite(fd, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
	ck_assert_int_eq(ftruncate(fd, 3 * MiB), 0);
	fsync(fd);
	close(fd);
	st_monitor_once(S);
	ck_assert_int_eq(st_volume_info(S, SD1, IMG1, VOL1, &v, &e), 0);
	free(v.description);
	ck_assert_int_eq(v.apparent, 3 * MiB);
	ck_assert_int_ge(v.truesize, 65536);
	free(dp);
}
END_TEST

/* Image.prepare's chain for the virt backend: leaf first, checked paths. */
START_TEST(prepare_image_chain)
{
	mkdomain();
	ck_assert_int_eq(create(IMG1, VOL1, MiB, ST_FMT_COW, ST_SPARSE).result, ST_TR_SUCCESS);
	struct st_err e = {0};
	char tid[37];
	struct st_volreq r = req(IMG1, VOL2, MiB, ST_FMT_COW, ST_SPARSE);
	r.src_img = IMG1;
	r.src_vol = VOL1;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	ck_assert_int_eq(wait_task(tid).result, ST_TR_SUCCESS);
	r.vol = VOL3;
	r.src_vol = VOL2;
	ck_assert_int_eq(st_volume_create(S, &r, tid, &e), 0);
	ck_assert_int_eq(wait_task(tid).result, ST_TR_SUCCESS);
	struct st_chain c;
	ck_assert_msg(st_image_prepare(S, SD1, NULL, IMG1, VOL3, &c, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(c.n, 3);
	const char *want[] = { VOL3, VOL2, VOL1 };
	for (int i = 0; i < 3; i++) {
		char *p = vpath(IMG1, want[i], "");
		ck_assert_str_eq(c.paths[i], p);
		free(p);
	}
	st_chain_free(&c);
	/* wrong pool, unknown image / volume */
	ck_assert_int_eq(st_image_prepare(S, SD1, SP1, IMG1, VOL3, &c, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_POOL);
	ck_assert_int_eq(st_image_prepare(S, SD1, NULL, IMG2, VOL3, &c, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_IMAGE);
	ck_assert_int_eq(st_image_prepare(S, SD1, NULL, IMG1, "bbbbbbbb-0000-0000-0000-0000000000ff",
					  &c, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NO_VOLUME);
	/* the base replaced by a symlink: refused, no path handed out */
	char *d1 = vpath(IMG1, VOL1, ""), *moved = st_pathf("%s/base", outside);
	ck_assert_int_eq(rename(d1, moved), 0);
	ck_assert_int_eq(symlink(moved, d1), 0);
	ck_assert_int_eq(st_image_prepare(S, SD1, NULL, IMG1, VOL3, &c, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_GENERAL);
	ck_assert_ptr_null(c.paths);
	free(d1);
	free(moved);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_safety");
	TCase *tc = tcase_create("safety");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, failed_restore_keeps_volume_and_record);
	tcase_add_test(tc, failed_create_rollback_keeps_volume);
#ifdef VD_TEST_HOOKS
	tcase_add_test(tc, queued_tasks_aborted_at_shutdown);
#else
	check_skip("queued_tasks_aborted_at_shutdown",
		   "needs the slowed preallocation of a VD_TEST_HOOKS build (runs in make asan-unit / tsan)");
#endif
	tcase_add_test(tc, delete_interrupted_completes_at_restart);
	tcase_add_test(tc, pool_memory_only_after_durable);
	tcase_add_test(tc, qemu_img_child_killed_on_stop);
	tcase_add_test(tc, create_legal_initial_size_sequence);
	tcase_add_test(tc, delete_post_zero_and_discard);
	tcase_add_test(tc, monitor_refreshes_sizes);
	tcase_add_test(tc, prepare_image_chain);
	suite_add_tcase(s, tc);
	TCase *ts = tcase_create("symlinks");
	tcase_set_timeout(ts, 60);
	tcase_add_checked_fixture(ts, setup_symlink, teardown);
	tcase_add_test(ts, planted_symlinks_never_followed);
	suite_add_tcase(s, ts);
	return s;
}

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_ERROR);
	return check_run(suite());
}
