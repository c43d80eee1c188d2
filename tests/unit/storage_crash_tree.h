/* tests/unit/storage_crash_tree.h - the storage tree of the kill -9 tests
 * of test_storage_crash.c (create, delete, extend, pool) and
 * test_storage_crash_copy.c (copy_data, cloneStructure, syncData, move):
 * the template, what is listed before a crash, and the checks after the
 * restart that every operation shares (see test_storage_crash.c).  Each
 * includer defines start_op() (in the child: start the operation), check_op()
 * (its own checks after the restart) and crash_before() / crash_after()
 * (what it adds around the crash).  Header-only, for
 * VD_TEST_HOOKS builds. */
#ifndef VD_TESTS_UNIT_STORAGE_CRASH_TREE_H
#define VD_TESTS_UNIT_STORAGE_CRASH_TREE_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>

#include "crash_harness.h"

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

/* ---- helpers -------------------------------------------------------------- */

static inline struct storage_state *open_state(void)
{
	char why[256] = "";
	struct storage_state *s = st_open(state, why, sizeof(why));
	ck_assert_msg(s != NULL, "%s", why);
	return s;
}

static inline char *vpath(const char *exp, const char *sd, const char *img, const char *vol)
{
	return st_pathf("%s/%s/%s/images/%s/%s", root, exp, sd, img, vol);
}

static inline uint64_t file_sum(const char *path)
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

static inline void pattern(const char *path, unsigned char seed)
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

static inline struct st_task_status wait_task(struct storage_state *s, const char *tid)
{
	struct st_task_status st;
	ck_assert_int_eq(st_task_wait(s, tid, 30000, &st), 0);
	return st;
}

static inline void clear_tasks(struct storage_state *s)
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

static inline void mkvol(struct storage_state *s, const char *sd, const char *img,
			 const char *vol, int fmt, const char *pimg, const char *pvol)
{
	struct st_volreq r = { sd, img, vol, MiB, fmt, ST_SPARSE, "DATA", "", pimg, pvol,
			       false, false, 0, 0 };
	struct st_err e = {0};
	char tid[37];
	ck_assert_msg(st_volume_create(s, &r, tid, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(wait_task(s, tid).result, ST_TR_SUCCESS);
}

/* ---- the trees ------------------------------------------------------------ */

static inline void reset_dirs(void)
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
static inline void build_template(int which)
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
	ck_assert_int_eq(crash_sh("qemu-io -f qcow2 -c 'write -P 0x5a 65536 131072' %s >/dev/null", p), 0);
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
	ck_assert_int_eq(crash_sh("mkdir -p %s/save && cp -a %s/e1/%s/images/%s %s/save/", root, root,
			    SD1, IMG1, root), 0);
	ck_assert_int_eq(crash_sh("rm -rf %s && mkdir -p %s && cp -a %s/state %s/e1 %s/e2 %s/save %s/",
			    tpl[which], tpl[which], root, root, root, root, tpl[which]), 0);
	free(e1);
	free(e2);
}

static inline void restore(int which)
{
	reset_dirs();
	ck_assert_int_eq(crash_sh("cp -a %s/. %s/", tpl[which], root), 0);
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

static inline const char *exp_of(const char *sd)
{
	return strcmp(sd, SD1) == 0 ? "e1" : "e2";
}

static inline void take_listing(struct storage_state *s, struct listing *l)
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

static inline const struct lvol *find_l(const struct listing *l, const char *sd, const char *vol)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].sd, sd) == 0 && strcmp(l->v[i].vol, vol) == 0)
			return &l->v[i];
	return NULL;
}

static inline bool has_image(struct storage_state *s, const char *sd, const char *img)
{
	struct st_domain *d = map_get(&s->domains, sd);
	return d && map_get(&d->images, img);
}

static inline struct st_volume *get_vol(struct storage_state *s, const char *sd, const char *vol)
{
	struct st_domain *d = map_get(&s->domains, sd);
	return d ? map_get(&d->volumes, vol) : NULL;
}

static inline bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Nothing on disk that the index does not list. */
static inline void check_tree(struct storage_state *s, const char *ctx)
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
static inline bool the_task(struct storage_state *s, struct st_task_status *out)
{
	size_t n = 0;
	for (struct st_map_ent *it = map_first(&s->tasks); it; it = map_next(&s->tasks, it)) {
		st_task_status_copy(map_val(it), out);
		n++;
	}
	ck_assert_uint_le(n, 1);
	return n == 1;
}

static inline void assert_aborted(const struct st_task_status *t, const char *ctx)
{
	ck_assert_msg(t->state == ST_TS_FINISHED && t->result == ST_TR_CLEAN_SUCCESS &&
		      t->code == 411, "%s: rolled back but the task says %s/%d %s", ctx,
		      st_task_result_name(t->result), t->code, t->message);
}

static inline void assert_success(const struct st_task_status *t, const char *ctx)
{
	ck_assert_msg(t->state == ST_TS_FINISHED && t->result == ST_TR_SUCCESS && t->code == 0,
		      "%s: completed but the task says %s/%d %s", ctx,
		      st_task_result_name(t->result), t->code, t->message);
}

/* A volume exactly as listed before. */
static inline void assert_same(struct storage_state *s, const struct listing *before,
			       const char *sd, const char *vol, const char *ctx)
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
static inline void assert_copy_equal(const char *ctx)
{
	for (int k = 0; k < 2; k++) {
		const char *vol = k ? VOL2 : VOL1, *fmt = k ? "qcow2" : "raw";
		ck_assert_msg(crash_sh("qemu-img compare -q -f %s -F %s %s/save/%s/%s %s/e2/%s/images/%s/%s",
				 fmt, fmt, root, IMG1, vol, root, SD2, IMG1, vol) == 0,
			      "%s: the copy of %s differs from the source", ctx, vol);
	}
}

/* Every volume listed before that the operation does not own (mine_sd1,
 * mine_sd2: up to 3 each, NULL-padded) is exactly as it was. */
static inline void assert_others_same(struct storage_state *s, const struct listing *before,
				      const char *const mine_sd1[3], const char *const mine_sd2[3],
				      const char *ctx)
{
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

/* ---- one crash, and every step ---------------------------------------------- */

/* Defined by the includer: start operation op (its task id, if it has
 * one, into tid) and, for a job, wait for it; < 0 with e filled when it is
 * refused. */
static int start_op(struct storage_state *s, unsigned op, char tid[37], struct st_err *e);
/* The operation's own checks after a restart (task: the run's one task, if
 * any); it names in mine_sd1 / mine_sd2 the volumes it may change. */
static void check_op(struct storage_state *s, unsigned op, const struct listing *before,
		     const char *ctx, const struct st_task_status *task, bool has_task,
		     const char *mine_sd1[3], const char *mine_sd2[3]);
/* after the listing, before the fork */
static void crash_before(unsigned op);
/* at the first restart, after check_outcome */
static void crash_after(struct storage_state *s, unsigned op, const char *ctx);

/* The child: returns only when the operation ended without the crash
 * (exit 0: the step was not reached). */
static inline void run_op(unsigned op)
{
	char why[256];
	struct storage_state *s = st_open(state, why, sizeof(why));
	if (!s || st_start_workers(s, 1) < 0)
		_exit(2);
	struct st_err e = {0};
	char tid[37] = "";
	if (start_op(s, op, tid, &e) < 0) {
		fprintf(stderr, "operation refused: %s\n", e.msg);
		_exit(3);
	}
	if (tid[0])
		st_task_wait(s, tid, 30000, NULL);
	_exit(0);
}

/* What a restart finds: the operation's checks, and every other volume
 * as it was. */
static inline void check_outcome(struct storage_state *s, unsigned op,
				 const struct listing *before, const char *ctx,
				 struct st_task_status *task, bool *has_task)
{
	*has_task = the_task(s, task);
	const char *mine_sd1[3] = { NULL, NULL, NULL }, *mine_sd2[3] = { NULL, NULL, NULL };
	check_op(s, op, before, ctx, task, *has_task, mine_sd1, mine_sd2);
	assert_others_same(s, before, mine_sd1, mine_sd2, ctx);
}

/* Restore the template, kill the operation at step, restart twice: the
 * outcome is whole (check_outcome), nothing unlisted is left (check_tree),
 * and the second start reports the same task outcome as the first. */
static inline void crash_run(const char *step, unsigned op)
{
	char ctx[160];
	snprintf(ctx, sizeof(ctx), "step %s, operation %#x", step, op);
	restore(op == ST_CO_SYNC ? 1 : 0);
	struct listing before;
	struct storage_state *s = open_state();
	take_listing(s, &before);
	check_tree(s, "template");
	st_close(s);
	crash_before(op);
	crash_fork_at(step, op, run_op, ctx);

	s = open_state();
	struct st_task_status t1, t2;
	bool has1, has2;
	check_outcome(s, op, &before, ctx, &t1, &has1);
	crash_after(s, op, ctx);
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

static inline void crash_run_step(const char *step, void *arg)
{
	crash_run(step, *(const unsigned *)arg);
}

static inline void run_all_steps(unsigned op)
{
	unsigned n = crash_each_step(op, crash_run_step, &op);
	printf("crash: operation %#x: killed at %u step(s), each recovered; %u qemu-img "
	       "child(ren) left running were killed\n", op, n, crash_orphans_killed);
}

static inline void suite_setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-crash-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(state, sizeof(state), "%s/state", root);
	for (int k = 0; k < 2; k++) {
		snprintf(tpl[k], sizeof(tpl[k]), "%s/tpl%d", root, k);
		build_template(k);
	}
}

static inline void suite_teardown(void)
{
	st_rmtree(root);
}

#define OP_TEST(name, op)            \
	START_TEST(name)             \
	{                            \
		run_all_steps(op);   \
	}                            \
	END_TEST

#endif
