/* tests/unit/test_storage_crash.c - kill -9 at every named step of every
 * multi-step storage change (vdsmd/storage/st_crash.h), then restart.
 *
 * For each step of ST_CRASH_STEPS and each operation that step lists, a
 * forked child opens the storage tree with VDSMD_TEST_CRASH_AT=<step>,
 * runs the operation and must die by SIGKILL at that step (a step it never
 * reaches fails the test).  Its qemu-img children, if any, are killed too,
 * as systemd would kill the service's cgroup.  The parent then opens the
 * same tree, as vdsmd does at startup, and checks:
 *   - every volume listed before is still listed with the same legality and
 *     the same bytes, unless the operation was about it;
 *   - the operation was completed or rolled back, and its task reports it
 *     (success, or cleanSuccess with code 411 "aborted by restart");
 *     a completed copy or move compares equal (qemu-img compare) to the
 *     source as it was;
 *   - nothing unlisted is left: every file under images/ belongs to a listed
 *     volume, every task record to a listed task, no *.tmp, no pool.intent;
 *   - a second restart reports the same task outcome (it was persisted).
 * Needs a VD_TEST_HOOKS build (make asan-unit, make tsan); elsewhere each
 * test reports SKIP. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#ifdef VD_TEST_HOOKS

#define SD1 "11111111-1111-1111-1111-111111111111"
#define SD2 "22222222-2222-2222-2222-222222222222"
#define IMG1 "aaaaaaaa-0000-0000-0000-000000000001"   /* VOL1 (raw) <- VOL2 (cow) */
#define IMG2 "aaaaaaaa-0000-0000-0000-000000000002"   /* VOL3, a bystander / copy source */
#define IMG3 "aaaaaaaa-0000-0000-0000-000000000003"   /* VOL4 on SD2, copy_data target */
#define IMG4 "aaaaaaaa-0000-0000-0000-000000000004"   /* new image of a create */
#define VOL1 "bbbbbbbb-0000-0000-0000-000000000001"
#define VOL2 "bbbbbbbb-0000-0000-0000-000000000002"
#define VOL3 "bbbbbbbb-0000-0000-0000-000000000003"
#define VOL4 "bbbbbbbb-0000-0000-0000-000000000004"
#define VOL5 "bbbbbbbb-0000-0000-0000-000000000005"   /* created (RAW) */
#define VOL6 "bbbbbbbb-0000-0000-0000-000000000006"   /* created (snapshot of VOL2) */
#define SP1 "cccccccc-0000-0000-0000-000000000001"
#define JOB1 "dddddddd-0000-0000-0000-000000000001"
#define MiB (1024 * 1024)

static char root[200];        /* the test's directory */
static char tpl[2][240];      /* templates: plain, and with IMG1 cloned to SD2 */
static char state[240];       /* root/state: the storage root */
static unsigned orphans_killed;

/* ---- helpers -------------------------------------------------------------- */

static int sh(const char *fmt, ...) VD_PRINTF(1, 2);
static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static struct storage_state *open_state(void)
{
	char why[256] = "";
	struct storage_state *s = st_open(state, why, sizeof(why));
	ck_assert_msg(s != NULL, "%s", why);
	return s;
}

static char *vpath(const char *exp, const char *sd, const char *img, const char *vol)
{
	return st_pathf("%s/%s/%s/images/%s/%s", root, exp, sd, img, vol);
}

static uint64_t file_sum(const char *path)
{
	uint64_t h = 1469598103934665603ULL;
	int fd = open(path, O_RDONLY | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	unsigned char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * 1099511628211ULL;
	close(fd);
	return h;
}

static void pattern(const char *path, unsigned char seed)
{
	int fd = open(path, O_WRONLY | O_NOFOLLOW);
	ck_assert_int_ge(fd, 0);
	unsigned char buf[4096];
	for (int blk = 0; blk < 256; blk += 37) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char)(seed + blk + i * 7);
		ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), (off_t)blk * 4096), (ssize_t)sizeof(buf));
	}
	fsync(fd);
	close(fd);
}

static struct st_task_status wait_task(struct storage_state *s, const char *tid)
{
	struct st_task_status st;
	ck_assert_int_eq(st_task_wait(s, tid, 30000, &st), 0);
	return st;
}

static void clear_tasks(struct storage_state *s)
{
	struct st_err e = {0};
	char ids[16][37];
	size_t n = 0;
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->tasks); it && n < 16; it = map_next(&s->tasks, it))
		snprintf(ids[n++], 37, "%s", map_key(it));
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(st_task_clear(s, ids[i], &e), 0);
}

static void mkvol(struct storage_state *s, const char *sd, const char *img, const char *vol,
		  int fmt, const char *pimg, const char *pvol)
{
	struct st_volreq r = { sd, img, vol, MiB, fmt, ST_SPARSE, "DATA", "", pimg, pvol,
			       false, false, 0, 0 };
	struct st_err e = {0};
	char tid[37];
	ck_assert_msg(st_volume_create(s, &r, tid, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(wait_task(s, tid).result, ST_TR_SUCCESS);
}

/* Kill and reap what the crashed child left running (its qemu-img): this
 * process is their subreaper. */
static void kill_orphans(void)
{
	DIR *dh = opendir("/proc");
	struct dirent *de;
	pid_t me = getpid();
	while (dh && (de = readdir(dh))) {
		pid_t pid = (pid_t)atoi(de->d_name);
		if (pid <= 0)
			continue;
		char p[64], buf[512];
		snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		char *rp = strrchr(buf, ')');
		int ppid = 0;
		char stc;
		if (rp && sscanf(rp + 1, " %c %d", &stc, &ppid) == 2 && ppid == me) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			orphans_killed++;
		}
	}
	if (dh)
		closedir(dh);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* ---- the trees ------------------------------------------------------------ */

static void reset_dirs(void)
{
	const char *names[] = { "state", "e1", "e2", "save" };
	for (size_t i = 0; i < 4; i++) {
		char *p = st_pathf("%s/%s", root, names[i]);
		st_rmtree(p);
		free(p);
	}
}

/* SD1 POSIXFS (volume leases: every volume has its <vol>.lease), SD2
 * LOCALFS (none); IMG1 = VOL1 (raw, data) <- VOL2 (qcow2, data of its
 * own), IMG2/VOL3 (raw, data) on SD1; IMG3/VOL4 (raw, empty) on SD2; with
 * cloned: IMG1's structure on SD2 too (for syncData).  Saved as tpl. */
static void build_template(int which)
{
	reset_dirs();
	char *e1 = st_pathf("%s/e1", root), *e2 = st_pathf("%s/e2", root);
	ck_assert_int_eq(mkdir(e1, 0755), 0);
	ck_assert_int_eq(mkdir(e2, 0755), 0);
	struct storage_state *s = open_state();
	ck_assert_int_eq(st_start_workers(s, 1), 0);
	struct st_err e = {0};
	ck_assert_msg(st_domain_create(s, SD1, ST_DT_POSIXFS, e1, "d1", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
	ck_assert_msg(st_domain_create(s, SD2, ST_DT_LOCALFS, e2, "d2", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
	mkvol(s, SD1, IMG1, VOL1, ST_FMT_RAW, NULL, NULL);
	char *p = vpath("e1", SD1, IMG1, VOL1);
	pattern(p, 1);
	free(p);
	mkvol(s, SD1, IMG1, VOL2, ST_FMT_COW, IMG1, VOL1);
	p = vpath("e1", SD1, IMG1, VOL2);
	ck_assert_int_eq(sh("qemu-io -f qcow2 -c 'write -P 0x5a 65536 131072' %s >/dev/null", p), 0);
	free(p);
	mkvol(s, SD1, IMG2, VOL3, ST_FMT_RAW, NULL, NULL);
	p = vpath("e1", SD1, IMG2, VOL3);
	pattern(p, 9);
	free(p);
	mkvol(s, SD2, IMG3, VOL4, ST_FMT_RAW, NULL, NULL);
	if (which == 1) {
		struct st_imgcopy_req r = { NULL, SD1, IMG1, SD2, ST_IC_CLONE, ST_SYNC_ALL,
					    false, false, false };
		char tid[37];
		ck_assert_msg(st_image_copy(s, &r, tid, &e) == 0, "%s", e.msg);
		ck_assert_int_eq(wait_task(s, tid).result, ST_TR_SUCCESS);
	}
	clear_tasks(s);
	st_close(s);
	/* IMG1 as it was, for qemu-img compare after a copy or move */
	ck_assert_int_eq(sh("mkdir -p %s/save && cp -a %s/e1/%s/images/%s %s/save/", root, root,
			    SD1, IMG1, root), 0);
	ck_assert_int_eq(sh("rm -rf %s && mkdir -p %s && cp -a %s/state %s/e1 %s/e2 %s/save %s/",
			    tpl[which], tpl[which], root, root, root, root, tpl[which]), 0);
	free(e1);
	free(e2);
}

static void restore(int which)
{
	reset_dirs();
	ck_assert_int_eq(sh("cp -a %s/. %s/", tpl[which], root), 0);
}

/* ---- what is listed --------------------------------------------------------- */

struct lvol {
	char sd[37], img[37], vol[37];
	bool legal;
	uint64_t sum;
};
struct listing {
	struct lvol v[32];
	size_t n;
};

static const char *exp_of(const char *sd)
{
	return strcmp(sd, SD1) == 0 ? "e1" : "e2";
}

static void take_listing(struct storage_state *s, struct listing *l)
{
	l->n = 0;
	for (struct st_map_ent *d = map_first(&s->domains); d; d = map_next(&s->domains, d)) {
		struct st_domain *dom = map_val(d);
		for (struct st_map_ent *it = map_first(&dom->volumes); it;
		     it = map_next(&dom->volumes, it)) {
			struct st_volume *v = map_val(it);
			ck_assert_uint_lt(l->n, 32);
			struct lvol *o = &l->v[l->n++];
			snprintf(o->sd, 37, "%s", dom->uuid);
			snprintf(o->img, 37, "%s", v->image);
			snprintf(o->vol, 37, "%s", v->uuid);
			o->legal = v->legal;
			char *p = vpath(exp_of(dom->uuid), dom->uuid, v->image, v->uuid);
			o->sum = file_sum(p);
			free(p);
		}
	}
}

static const struct lvol *find_l(const struct listing *l, const char *sd, const char *vol)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].sd, sd) == 0 && strcmp(l->v[i].vol, vol) == 0)
			return &l->v[i];
	return NULL;
}

static bool has_image(struct storage_state *s, const char *sd, const char *img)
{
	struct st_domain *d = map_get(&s->domains, sd);
	return d && map_get(&d->images, img);
}

static struct st_volume *get_vol(struct storage_state *s, const char *sd, const char *vol)
{
	struct st_domain *d = map_get(&s->domains, sd);
	return d ? map_get(&d->volumes, vol) : NULL;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Nothing on disk that the index does not list. */
static void check_tree(struct storage_state *s, const char *ctx)
{
	for (struct st_map_ent *d = map_first(&s->domains); d; d = map_next(&s->domains, d)) {
		struct st_domain *dom = map_val(d);
		char *images = st_path(dom->dir, "images");
		DIR *dh = opendir(images);
		ck_assert_ptr_nonnull(dh);
		struct dirent *de;
		while ((de = readdir(dh))) {
			if (de->d_name[0] == '.')
				continue;
			ck_assert_msg(map_get(&dom->images, de->d_name) != NULL,
				      "%s: unlisted image directory %s/%s", ctx, images, de->d_name);
			char *idir = st_path(images, de->d_name);
			DIR *ih = opendir(idir);
			ck_assert_ptr_nonnull(ih);
			struct dirent *fe;
			size_t files = 0;
			while ((fe = readdir(ih))) {
				if (fe->d_name[0] == '.')
					continue;
				char vol[64];
				snprintf(vol, sizeof(vol), "%.36s", fe->d_name);
				bool ok = strlen(fe->d_name) == 36 ||
					  (strlen(fe->d_name) == 41 && ends_with(fe->d_name, ".meta")) ||
					  (strlen(fe->d_name) == 42 && ends_with(fe->d_name, ".lease") &&
					   st_dom_has_volume_leases(dom));
				struct st_volume *v = map_get(&dom->volumes, vol);
				ck_assert_msg(ok && v && strcmp(v->image, de->d_name) == 0,
					      "%s: unlisted file %s/%s", ctx, idir, fe->d_name);
				files++;
			}
			closedir(ih);
			struct st_image *im = map_get(&dom->images, de->d_name);
			/* data and .meta, and the .lease where the domain has volume
			 * leases (SD1): a lease left behind or never made is caught */
			size_t per = st_dom_has_volume_leases(dom) ? 3 : 2;
			ck_assert_msg(files == per * im->n, "%s: %s holds %zu files for %zu volumes",
				      ctx, idir, files, im->n);
			free(idir);
		}
		closedir(dh);
		free(images);
		char *md = st_path(dom->dir, "dom_md");
		dh = opendir(md);
		ck_assert_ptr_nonnull(dh);
		while ((de = readdir(dh)))
			ck_assert_msg(!ends_with(de->d_name, ".tmp"), "%s: %s/%s left", ctx, md,
				      de->d_name);
		closedir(dh);
		free(md);
	}
	DIR *dh = opendir(state);
	struct dirent *de;
	while ((de = readdir(dh))) {
		const char *n = de->d_name;
		ck_assert_msg(n[0] == '.' || strcmp(n, "tasks") == 0 || strcmp(n, "domains.reg") == 0 ||
			      strcmp(n, "pool.meta") == 0, "%s: unexpected %s/%s", ctx, state, n);
	}
	closedir(dh);
	char *tasks = st_path(state, "tasks");
	dh = opendir(tasks);
	while ((de = readdir(dh))) {
		const char *n = de->d_name;
		if (n[0] == '.')
			continue;
		char id[64];
		snprintf(id, sizeof(id), "%.36s", n);
		ck_assert_msg(strlen(n) == 41 && ends_with(n, ".task") && map_get(&s->tasks, id),
			      "%s: unlisted task file %s/%s", ctx, tasks, n);
	}
	closedir(dh);
	free(tasks);
}

/* The one task of the run (NULL when the operation has none). */
static bool the_task(struct storage_state *s, struct st_task_status *out)
{
	size_t n = 0;
	for (struct st_map_ent *it = map_first(&s->tasks); it; it = map_next(&s->tasks, it)) {
		st_task_status_copy(map_val(it), out);
		n++;
	}
	ck_assert_uint_le(n, 1);
	return n == 1;
}

static void assert_aborted(const struct st_task_status *t, const char *ctx)
{
	ck_assert_msg(t->state == ST_TS_FINISHED && t->result == ST_TR_CLEAN_SUCCESS &&
		      t->code == 411, "%s: rolled back but the task says %s/%d %s", ctx,
		      st_task_result_name(t->result), t->code, t->message);
}

static void assert_success(const struct st_task_status *t, const char *ctx)
{
	ck_assert_msg(t->state == ST_TS_FINISHED && t->result == ST_TR_SUCCESS && t->code == 0,
		      "%s: completed but the task says %s/%d %s", ctx,
		      st_task_result_name(t->result), t->code, t->message);
}

/* A volume exactly as listed before. */
static void assert_same(struct storage_state *s, const struct listing *before, const char *sd,
			const char *vol, const char *ctx)
{
	const struct lvol *b = find_l(before, sd, vol);
	ck_assert_ptr_nonnull(b);
	struct st_volume *v = get_vol(s, sd, vol);
	ck_assert_msg(v != NULL, "%s: volume %s of %s was lost", ctx, vol, sd);
	ck_assert_msg(v->legal == b->legal && strcmp(v->image, b->img) == 0,
		      "%s: volume %s of %s changed legality or image", ctx, vol, sd);
	char *p = vpath(exp_of(sd), sd, v->image, vol);
	ck_assert_msg(file_sum(p) == b->sum, "%s: data of %s changed", ctx, vol);
	free(p);
}

/* The destination image on SD2 holds IMG1's data as it was. */
static void assert_copy_equal(const char *ctx)
{
	for (int k = 0; k < 2; k++) {
		const char *vol = k ? VOL2 : VOL1, *fmt = k ? "qcow2" : "raw";
		ck_assert_msg(sh("qemu-img compare -q -f %s -F %s %s/save/%s/%s %s/e2/%s/images/%s/%s",
				 fmt, fmt, root, IMG1, vol, root, SD2, IMG1, vol) == 0,
			      "%s: the copy of %s differs from the source", ctx, vol);
	}
}

/* ---- the operations (run by the child) ------------------------------------ */

/* Returns only when the operation ended without the crash (the caller
 * exits 0: the step was not reached). */
static void run_op(unsigned op)
{
	char why[256];
	struct storage_state *s = st_open(state, why, sizeof(why));
	if (!s || st_start_workers(s, 1) < 0)
		_exit(2);
	struct st_err e = {0};
	char tid[37] = "";
	int rc = 0;
	struct st_volreq r = { SD1, IMG4, VOL5, MiB, ST_FMT_RAW, ST_PREALLOCATED, "DATA", "", NULL,
			       NULL, false, false, 0, 0 };
	struct st_imgcopy_req ic = { NULL, SD1, IMG1, SD2, 0, ST_SYNC_ALL, false, false, false };
	const char *vols[] = { VOL1, VOL2 };
	switch (op) {
	case ST_CO_CREATE_RAW:
		rc = st_volume_create(s, &r, tid, &e);
		break;
	case ST_CO_CREATE_SNAP:
		r.img = IMG1;
		r.vol = VOL6;
		r.format = ST_FMT_COW;
		r.alloc = ST_SPARSE;
		r.src_img = IMG1;
		r.src_vol = VOL2;
		rc = st_volume_create(s, &r, tid, &e);
		break;
	case ST_CO_VOL_DELETE: {   /* with postZero: zeroed before it goes */
		struct st_delopts zero = { .postzero = true };
		rc = st_volume_delete(s, SD1, IMG1, VOL2, &zero, tid, &e);
		break;
	}
	case ST_CO_EXTEND_RAW:
		rc = st_volume_extend(s, SD1, IMG2, VOL3, 2 * MiB, tid, &e);
		break;
	case ST_CO_EXTEND_COW:
		rc = st_volume_extend(s, SD1, IMG1, VOL2, 2 * MiB, tid, &e);
		break;
	case ST_CO_IMG_DELETE:
		rc = st_image_delete(s, SD1, IMG1, NULL, tid, &e);
		break;
	case ST_CO_VOLS_DELETE:
		rc = st_volumes_delete(s, SD1, IMG1, vols, 2, NULL, tid, &e);
		break;
	case ST_CO_COPY_DATA: {
		const char *src[3] = { SD1, IMG2, VOL3 }, *dst[3] = { SD2, IMG3, VOL4 };
		rc = st_copy_data(s, JOB1, src, dst, &e);
		for (int i = 0; rc == 0 && i < 3000; i++) {
			pthread_mutex_lock(&s->lock);
			struct st_job *j = map_get(&s->jobs, JOB1);
			bool fin = !j || (j->info.status != ST_JOB_PENDING &&
					  j->info.status != ST_JOB_RUNNING);
			pthread_mutex_unlock(&s->lock);
			if (fin)
				break;
			usleep(10000);
		}
		break;
	}
	case ST_CO_CLONE:
	case ST_CO_SYNC:
	case ST_CO_COPY:
	case ST_CO_MOVE:
		ic.op = op == ST_CO_CLONE ? ST_IC_CLONE : op == ST_CO_SYNC ? ST_IC_SYNC
			: op == ST_CO_COPY ? ST_IC_COPY : ST_IC_MOVE;
		rc = st_image_copy(s, &ic, tid, &e);
		break;
	case ST_CO_POOL_CREATE: {
		const char *doms[] = { SD1, SD2 };
		rc = st_pool_create(s, SP1, "pool", SD1, 1, doms, 2, NULL, &e);
		break;
	}
	default:
		_exit(2);
	}
	if (rc < 0) {
		fprintf(stderr, "operation refused: %s\n", e.msg);
		_exit(3);
	}
	if (tid[0])
		st_task_wait(s, tid, 30000, NULL);
	_exit(0);
}

/* ---- the checks after the restart ---------------------------------------- */

static void check_outcome(struct storage_state *s, unsigned op, const struct listing *before,
			  const char *ctx, struct st_task_status *task, bool *has_task)
{
	*has_task = the_task(s, task);
	bool done = false;
	/* volumes the operation may change; every other one must be as before */
	const char *mine_sd1[3] = { NULL, NULL, NULL }, *mine_sd2[3] = { NULL, NULL, NULL };
	switch (op) {
	case ST_CO_CREATE_RAW:
	case ST_CO_CREATE_SNAP: {
		const char *vol = op == ST_CO_CREATE_RAW ? VOL5 : VOL6;
		struct st_volume *v = get_vol(s, SD1, vol);
		ck_assert(*has_task);
		if (v) {
			ck_assert_msg(v->legal, "%s: created volume kept but ILLEGAL", ctx);
			assert_success(task, ctx);
			done = true;
		} else {
			ck_assert(!has_image(s, SD1, IMG4));
			assert_aborted(task, ctx);
		}
		break;
	}
	case ST_CO_VOL_DELETE:
	case ST_CO_IMG_DELETE:
	case ST_CO_VOLS_DELETE: {
		ck_assert(*has_task);
		mine_sd1[0] = VOL2;
		if (op != ST_CO_VOL_DELETE)
			mine_sd1[1] = VOL1;
		bool gone2 = !get_vol(s, SD1, VOL2), gone1 = !get_vol(s, SD1, VOL1);
		if (gone2 && (op == ST_CO_VOL_DELETE || gone1)) {
			assert_success(task, ctx);
			done = true;
			if (op == ST_CO_VOL_DELETE)
				assert_same(s, before, SD1, VOL1, ctx);
		} else {
			ck_assert_msg(!gone2 && !gone1, "%s: half of the image was deleted", ctx);
			assert_same(s, before, SD1, VOL2, ctx);
			assert_same(s, before, SD1, VOL1, ctx);
			assert_aborted(task, ctx);
		}
		break;
	}
	case ST_CO_COPY_DATA: {
		ck_assert(!*has_task);
		mine_sd2[0] = VOL4;
		pthread_mutex_lock(&s->lock);
		ck_assert_uint_eq(map_first(&s->jobs) == NULL, 1);   /* jobs end with vdsmd */
		pthread_mutex_unlock(&s->lock);
		struct st_volume *v = get_vol(s, SD2, VOL4);
		ck_assert_msg(v != NULL, "%s: copy_data destination lost", ctx);
		if (v->legal) {
			done = true;
			ck_assert_int_eq(sh("qemu-img compare -q -f raw -F raw %s/e1/%s/images/%s/%s "
					    "%s/e2/%s/images/%s/%s", root, SD1, IMG2, VOL3, root, SD2,
					    IMG3, VOL4), 0);
		}
		break;
	}
	case ST_CO_CLONE:
	case ST_CO_COPY:
	case ST_CO_MOVE: {
		ck_assert(*has_task);
		mine_sd1[0] = op == ST_CO_MOVE ? VOL1 : NULL;
		mine_sd1[1] = op == ST_CO_MOVE ? VOL2 : NULL;
		bool dst = has_image(s, SD2, IMG1);
		if (dst) {
			struct st_volume *d1 = get_vol(s, SD2, VOL1), *d2 = get_vol(s, SD2, VOL2);
			ck_assert_msg(d1 && d2, "%s: half a structure on the destination", ctx);
			bool want_legal = op != ST_CO_CLONE;
			ck_assert_msg(d1->legal == want_legal && d2->legal == want_legal,
				      "%s: destination legality", ctx);
			if (op != ST_CO_CLONE)
				assert_copy_equal(ctx);
			if (op == ST_CO_MOVE)
				ck_assert_msg(!get_vol(s, SD1, VOL1) && !get_vol(s, SD1, VOL2) &&
					      !has_image(s, SD1, IMG1),
					      "%s: moved, but the source is still there", ctx);
			assert_success(task, ctx);
			done = true;
		} else {
			if (op == ST_CO_MOVE) {
				assert_same(s, before, SD1, VOL1, ctx);
				assert_same(s, before, SD1, VOL2, ctx);
			}
			assert_aborted(task, ctx);
		}
		break;
	}
	case ST_CO_SYNC: {
		ck_assert(*has_task);
		mine_sd2[0] = VOL1;
		mine_sd2[1] = VOL2;
		struct st_volume *d1 = get_vol(s, SD2, VOL1), *d2 = get_vol(s, SD2, VOL2);
		ck_assert_msg(d1 && d2, "%s: a syncData destination volume was lost", ctx);
		if (d1->legal && d2->legal) {
			assert_copy_equal(ctx);
			assert_success(task, ctx);
			done = true;
		} else {
			ck_assert_msg(task->result == ST_TR_CLEAN_FAILURE && task->code == 100,
				      "%s: unsynced destination, task says %s", ctx,
				      st_task_result_name(task->result));
		}
		break;
	}
	case ST_CO_EXTEND_RAW:
	case ST_CO_EXTEND_COW: {
		const char *vol = op == ST_CO_EXTEND_RAW ? VOL3 : VOL2;
		ck_assert(*has_task);
		mine_sd1[0] = vol;
		struct st_volume *v = get_vol(s, SD1, vol);
		ck_assert_msg(v && v->legal, "%s: extended volume lost or ILLEGAL", ctx);
		if (v->capacity == 2 * MiB) {
			ck_assert(st_volume_grown(map_get(&s->domains, SD1), v, 2 * MiB));
			assert_success(task, ctx);
			done = true;
		} else {
			ck_assert_int_eq(v->capacity, MiB);
			assert_same(s, before, SD1, vol, ctx);
			assert_aborted(task, ctx);
		}
		break;
	}
	case ST_CO_POOL_CREATE: {
		ck_assert(!*has_task);
		struct st_domain *a = map_get(&s->domains, SD1), *b = map_get(&s->domains, SD2);
		if (s->pool_uuid[0]) {
			ck_assert_str_eq(s->pool_uuid, SP1);
			ck_assert_str_eq(a->pool, SP1);
			ck_assert_str_eq(b->pool, SP1);
			ck_assert(a->master && !b->master);
			done = true;
		} else {
			ck_assert_msg(!a->pool[0] && !b->pool[0] && !a->master && !b->master,
				      "%s: no pool, but a domain is still attached to it", ctx);
		}
		break;
	}
	}
	(void)done;
	for (size_t i = 0; i < before->n; i++) {
		const struct lvol *b = &before->v[i];
		const char *const *mine = strcmp(b->sd, SD1) == 0 ? mine_sd1 : mine_sd2;
		bool skip = false;
		for (int k = 0; k < 3; k++)
			skip |= mine[k] && strcmp(mine[k], b->vol) == 0;
		if (!skip)
			assert_same(s, before, b->sd, b->vol, ctx);
	}
}

static void crash_run(const char *step, unsigned op)
{
	char ctx[160];
	snprintf(ctx, sizeof(ctx), "step %s, operation %#x", step, op);
	restore(op == ST_CO_SYNC ? 1 : 0);
	struct listing before;
	struct storage_state *s = open_state();
	take_listing(s, &before);
	check_tree(s, "template");
	st_close(s);

	/* a second name for VOL2's data, outside the domain: after a
	 * completed postZero delete its bytes must all be zero */
	char *keep = st_pathf("%s/keep", root), *d2 = vpath("e1", SD1, IMG1, VOL2);
	unlink(keep);
	if (op == ST_CO_VOL_DELETE)
		ck_assert_int_eq(link(d2, keep), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("VDSMD_TEST_CRASH_AT", step, 1);
		run_op(op);
		_exit(2);
	}
	int status = 0;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	kill_orphans();
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "%s: the child was not killed at the step (%s %d)", ctx,
		      WIFSIGNALED(status) ? "signal" : "exit status",
		      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));

	s = open_state();
	struct st_task_status t1, t2;
	bool has1, has2;
	check_outcome(s, op, &before, ctx, &t1, &has1);
	if (op == ST_CO_VOL_DELETE && !get_vol(s, SD1, VOL2)) {
		int fd = open(keep, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		unsigned char b[4096];
		ssize_t n;
		size_t nonzero = 0;
		while ((n = read(fd, b, sizeof(b))) > 0)
			for (ssize_t i = 0; i < n; i++)
				nonzero += b[i] != 0;
		close(fd);
		ck_assert_msg(nonzero == 0, "%s: deleted with postZero, %zu bytes not zeroed", ctx,
			      nonzero);
	}
	unlink(keep);
	free(keep);
	free(d2);
	check_tree(s, ctx);
	st_close(s);
	/* the outcome was persisted: a second start says the same */
	s = open_state();
	check_outcome(s, op, &before, ctx, &t2, &has2);
	check_tree(s, ctx);
	ck_assert_int_eq(has1, has2);
	if (has1) {
		ck_assert_str_eq(t1.id, t2.id);
		ck_assert_int_eq(t1.result, t2.result);
		ck_assert_int_eq(t1.code, t2.code);
	}
	st_close(s);
}

static void run_all_steps(unsigned op)
{
	/* the crashed child's qemu-img is reparented here (kill_orphans) */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	unsigned n = 0;
	for (size_t i = 0; i < st_crash_nsteps; i++) {
		if (!(st_crash_steps[i].ops & op))
			continue;
		crash_run(st_crash_steps[i].name, op);
		n++;
	}
	ck_assert_uint_gt(n, 0);
	printf("crash: operation %#x: killed at %u step(s), each recovered; %u qemu-img "
	       "child(ren) left running were killed\n", op, n, orphans_killed);
}

static void suite_setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-crash-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(state, sizeof(state), "%s/state", root);
	for (int k = 0; k < 2; k++) {
		snprintf(tpl[k], sizeof(tpl[k]), "%s/tpl%d", root, k);
		build_template(k);
	}
}

static void suite_teardown(void)
{
	st_rmtree(root);
}

#define OP_TEST(name, op)            \
	START_TEST(name)             \
	{                            \
		run_all_steps(op);   \
	}                            \
	END_TEST
OP_TEST(crash_create_raw, ST_CO_CREATE_RAW)
OP_TEST(crash_create_snapshot, ST_CO_CREATE_SNAP)
OP_TEST(crash_volume_delete, ST_CO_VOL_DELETE)
OP_TEST(crash_image_delete, ST_CO_IMG_DELETE)
OP_TEST(crash_delete_volumes, ST_CO_VOLS_DELETE)
OP_TEST(crash_copy_data, ST_CO_COPY_DATA)
OP_TEST(crash_clone_structure, ST_CO_CLONE)
OP_TEST(crash_sync_data, ST_CO_SYNC)
OP_TEST(crash_copy_image, ST_CO_COPY)
OP_TEST(crash_move_image, ST_CO_MOVE)
OP_TEST(crash_pool_create, ST_CO_POOL_CREATE)
OP_TEST(crash_extend_raw, ST_CO_EXTEND_RAW)
OP_TEST(crash_extend_cow, ST_CO_EXTEND_COW)

/* Every step is run by some operation, and a name that is not in the list
 * is a programming error the test build catches at the call. */
START_TEST(step_list_is_closed)
{
	unsigned all = 0;
	for (size_t i = 0; i < st_crash_nsteps; i++) {
		ck_assert_uint_ne(st_crash_steps[i].ops, 0);
		all |= st_crash_steps[i].ops;
		for (size_t k = 0; k < i; k++)
			ck_assert_str_ne(st_crash_steps[i].name, st_crash_steps[k].name);
	}
	ck_assert_uint_eq(all, (ST_CO_LAST << 1) - 1);
	pid_t pid = fork();
	if (pid == 0) {
		st_crash_point("no.such-step");
		_exit(0);
	}
	int status = 0;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	/* a known step that is not the one named does nothing */
	setenv("VDSMD_TEST_CRASH_AT", "pool.meta", 1);
	st_crash_point("create.record");
	unsetenv("VDSMD_TEST_CRASH_AT");
}
END_TEST

#endif /* VD_TEST_HOOKS */

static Suite *suite(void)
{
	Suite *s = suite_create("storage_crash");
	TCase *tc = tcase_create("crash");
#ifdef VD_TEST_HOOKS
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_test(tc, step_list_is_closed);
	tcase_add_test(tc, crash_create_raw);
	tcase_add_test(tc, crash_create_snapshot);
	tcase_add_test(tc, crash_volume_delete);
	tcase_add_test(tc, crash_image_delete);
	tcase_add_test(tc, crash_delete_volumes);
	tcase_add_test(tc, crash_copy_data);
	tcase_add_test(tc, crash_clone_structure);
	tcase_add_test(tc, crash_sync_data);
	tcase_add_test(tc, crash_copy_image);
	tcase_add_test(tc, crash_move_image);
	tcase_add_test(tc, crash_pool_create);
	tcase_add_test(tc, crash_extend_raw);
	tcase_add_test(tc, crash_extend_cow);
#else
	const char *why = "kill -9 at named steps needs the crash points of a VD_TEST_HOOKS "
			  "build (runs in make asan-unit / tsan)";
	const char *names[] = { "step_list_is_closed", "crash_create_raw", "crash_create_snapshot",
				"crash_volume_delete", "crash_image_delete", "crash_delete_volumes",
				"crash_copy_data", "crash_clone_structure", "crash_sync_data",
				"crash_copy_image", "crash_move_image", "crash_pool_create",
				"crash_extend_raw", "crash_extend_cow" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		check_skip(names[i], why);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_ERROR);
	return check_run(suite());
}
