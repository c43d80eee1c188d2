/* tests/unit/test_storage_crash_merge.c - kill -9 at every step of a cold
 * merge (StoragePool.prepareMerge, SDM.merge, StoragePool.finalizeMerge: the
 * "prepare_merge.*", "merge.*" and "finalize_merge.*" steps of
 * vdsmd/storage/st_crash.h), then restart.
 *
 * The image: BASE (raw, 1 MiB) <- MID (qcow2, 2 MiB) <- TOP (qcow2, 2 MiB),
 * each written with its own pattern (MID beyond BASE's end too), and a
 * second image CBASE (qcow2, 1 MiB) <- CTOP (qcow2, 2 MiB) for a COW base
 * that grows.  What the guest sees (qemu-img convert of the chain to raw)
 * is saved first.  A forked child runs the merge up to the step named in
 * VDSMD_TEST_CRASH_AT and must die there by SIGKILL; the parent opens the
 * tree as vdsmd does at startup and checks that the chain is the old one
 * or the new one, never a mixture:
 *   - every volume's metadata parent is what its qcow2 header names;
 *   - old chain: every volume LEGAL, the task (if any) rolled back (411);
 *     new chain: the merged top ILLEGAL and out of the chain, its child
 *     (internal merge) backed by base, the task done;
 *   - prepare: base's capacity is the old one or top's, and its data holds
 *     it; the job: base's generation unchanged (not bumped before a crash);
 *   - the guest-visible data of the chain (through the leaf of the chain
 *     as it now is) equals what was saved;
 *   - no *.tmp left; a second restart reports the same outcome.
 * Needs a VD_TEST_HOOKS build (make asan-unit, make tsan). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#ifdef VD_TEST_HOOKS
#include "crash_harness.h"

#define SD1 "11111111-1111-1111-1111-111111111111"
#define IMG1 "aaaaaaaa-0000-0000-0000-000000000001"
#define IMG2 "aaaaaaaa-0000-0000-0000-000000000002"
#define BASE "bbbbbbbb-0000-0000-0000-000000000001"
#define MID "bbbbbbbb-0000-0000-0000-000000000002"
#define TOP "bbbbbbbb-0000-0000-0000-000000000003"
#define CBASE "bbbbbbbb-0000-0000-0000-000000000004"
#define CTOP "bbbbbbbb-0000-0000-0000-000000000005"
#define JOB1 "dddddddd-0000-0000-0000-000000000001"
#define MiB (1024 * 1024)

static char root[200], state[240], tpl[240];

static struct storage_state *open_state(void)
{
	char why[256] = "";
	struct storage_state *s = st_open(state, why, sizeof(why));
	ck_assert_msg(s != NULL, "%s", why);
	return s;
}

static char *vpath(const char *img, const char *vol)
{
	return st_pathf("%s/e1/%s/images/%s/%s", root, SD1, img, vol);
}

static void mkvol(struct storage_state *s, const char *img, const char *vol, int fmt,
		  int64_t size, const char *pvol)
{
	struct st_volreq r = { SD1, img, vol, size, fmt, ST_SPARSE, "DATA", "", pvol ? img : NULL,
			       pvol, false, false, 0, 0 };
	struct st_err e = {0};
	char tid[37];
	ck_assert_msg(st_volume_create(s, &r, tid, &e) == 0, "%s", e.msg);
	struct st_task_status st;
	ck_assert_int_eq(st_task_wait(s, tid, 30000, &st), 0);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	ck_assert_int_eq(st_task_clear(s, tid, &e), 0);
}

static void qemu_io(const char *img, const char *vol, const char *fmt, const char *cmd)
{
	char *p = vpath(img, vol);
	ck_assert_int_eq(crash_sh("qemu-io -f %s -c '%s' %s >/dev/null", fmt, cmd, p), 0);
	free(p);
}

/* What the guest reads through vol (qcow2 headers), as raw into out. */
static void guest_data(const char *img, const char *vol, const char *out)
{
	char *p = vpath(img, vol);
	ck_assert_int_eq(crash_sh("qemu-img convert -O raw %s %s", p, out), 0);
	free(p);
}

static void build_template(void)
{
	char *e1 = st_pathf("%s/e1", root);
	ck_assert_int_eq(mkdir(e1, 0755), 0);
	struct storage_state *s = open_state();
	ck_assert_int_eq(st_start_workers(s, 1), 0);
	struct st_err e = {0};
	ck_assert_msg(st_domain_create(s, SD1, ST_DT_LOCALFS, e1, "d1", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
	mkvol(s, IMG1, BASE, ST_FMT_RAW, MiB, NULL);
	qemu_io(IMG1, BASE, "raw", "write -P 0x11 0 1M");
	mkvol(s, IMG1, MID, ST_FMT_COW, 2 * MiB, BASE);
	qemu_io(IMG1, MID, "qcow2", "write -P 0x22 64k 128k");
	qemu_io(IMG1, MID, "qcow2", "write -P 0x23 1536k 64k");
	mkvol(s, IMG1, TOP, ST_FMT_COW, 2 * MiB, MID);
	qemu_io(IMG1, TOP, "qcow2", "write -P 0x33 128k 64k");
	qemu_io(IMG1, TOP, "qcow2", "write -P 0x34 1800k 4k");
	mkvol(s, IMG2, CBASE, ST_FMT_COW, MiB, NULL);
	qemu_io(IMG2, CBASE, "qcow2", "write -P 0x44 0 256k");
	mkvol(s, IMG2, CTOP, ST_FMT_COW, 2 * MiB, CBASE);
	qemu_io(IMG2, CTOP, "qcow2", "write -P 0x55 1280k 64k");
	st_close(s);
	char *g = st_pathf("%s/guest1.raw", root);
	guest_data(IMG1, TOP, g);
	free(g);
	g = st_pathf("%s/guest2.raw", root);
	guest_data(IMG2, CTOP, g);
	free(g);
	ck_assert_int_eq(crash_sh("rm -rf %s && mkdir -p %s && cp -a %s/state %s/e1 %s/guest1.raw "
			    "%s/guest2.raw %s/", tpl, tpl, root, root, root, root, tpl), 0);
	free(e1);
}

static void restore(void)
{
	ck_assert_int_eq(crash_sh("rm -rf %s/state %s/e1 && cp -a %s/. %s/", root, root, tpl, root), 0);
}

/* ---- the child: the engine's order, up to the crash ------------------------ */

static void child_task(struct storage_state *s, int rc, const char *tid)
{
	struct st_task_status st;
	if (rc < 0 || st_task_wait(s, tid, 30000, &st) < 0 || st.result != ST_TR_SUCCESS)
		_exit(3);
}

static void child_job(struct storage_state *s, const struct st_subchain *sc)
{
	struct st_err e = {0};
	if (st_merge_job(s, JOB1, sc, false, &e) < 0)
		_exit(4);
	for (int i = 0; i < 3000; i++) {
		pthread_mutex_lock(&s->lock);
		struct st_job *j = map_get(&s->jobs, JOB1);
		enum st_job_status st = j->info.status;
		pthread_mutex_unlock(&s->lock);
		if (st == ST_JOB_DONE)
			return;
		if (st == ST_JOB_FAILED || st == ST_JOB_ABORTED)
			_exit(5);
		usleep(10000);
	}
	_exit(6);
}

static void fill(struct st_subchain *sc, const char *img, const char *top, const char *base)
{
	memset(sc, 0, sizeof(*sc));
	snprintf(sc->sd, sizeof(sc->sd), "%s", SD1);
	snprintf(sc->img, sizeof(sc->img), "%s", img);
	snprintf(sc->top, sizeof(sc->top), "%s", top);
	snprintf(sc->base, sizeof(sc->base), "%s", base);
	sc->base_gen = -1;
}

static void run_op(unsigned op)
{
	char why[256];
	struct storage_state *s = st_open(state, why, sizeof(why));
	if (!s || st_start_workers(s, 1) < 0)
		_exit(2);
	struct st_err e = {0};
	char tid[37] = "";
	struct st_subchain sc;
	if (op == ST_CO_PREP_MERGE_COW)
		fill(&sc, IMG2, CTOP, CBASE);
	else if (op == ST_CO_FIN_MERGE_LEAF)
		fill(&sc, IMG1, TOP, MID);
	else
		fill(&sc, IMG1, MID, BASE);
	child_task(s, st_merge_prepare(s, NULL, &sc, tid, &e), tid);
	if (op & (ST_CO_MERGE_JOB | ST_CO_FIN_MERGE))
		child_job(s, &sc);
	if (op & ST_CO_FIN_MERGE)
		child_task(s, st_merge_finalize(s, NULL, &sc, tid, &e), tid);
	st_close(s);
}

/* ---- the parent: what restart finds ----------------------------------------- */

static struct st_volume *vol(struct storage_state *s, const char *id)
{
	struct st_domain *d = map_get(&s->domains, SD1);
	return map_get(&d->volumes, id);
}

/* The metadata's parent of every COW volume is its qcow2 backing file. */
static void assert_headers_agree(struct storage_state *s, const char *ctx)
{
	struct st_domain *d = map_get(&s->domains, SD1);
	for (struct st_map_ent *it = map_first(&d->volumes); it; it = map_next(&d->volumes, it)) {
		struct st_volume *v = map_val(it);
		if (v->format != ST_FMT_COW)
			continue;
		char *p = vpath(v->image, v->uuid);
		bool none = strcmp(v->parent, ST_BLANK_UUID) == 0;
		int rc = none ? crash_sh("! qemu-img info -U %s | grep -q '^backing file:'", p)
			      : crash_sh("qemu-img info -U %s | grep -Eq '^backing file: %s( |$)'", p, v->parent);
		ck_assert_msg(rc == 0, "%s: %s: metadata parent %s, qcow2 header differs", ctx,
			      v->uuid, v->parent);
		free(p);
	}
}

static void assert_guest(const char *img, const char *leaf, const char *ctx)
{
	char *now = st_pathf("%s/now.raw", root);
	guest_data(img, leaf, now);
	ck_assert_msg(crash_sh("cmp -s %s %s/guest%d.raw", now, root, strcmp(img, IMG1) ? 2 : 1) == 0,
		      "%s: the guest's data through %s changed", ctx, leaf);
	unlink(now);
	free(now);
}

/* The task of verb, or NULL. */
static bool task_of(struct storage_state *s, const char *verb, struct st_task_status *out)
{
	for (struct st_map_ent *it = map_first(&s->tasks); it; it = map_next(&s->tasks, it)) {
		struct st_task *t = map_val(it);
		if (strcmp(t->verb, verb) == 0) {
			st_task_status_copy(t, out);
			return true;
		}
	}
	return false;
}

static void assert_result(const struct st_task_status *t, bool done, const char *ctx)
{
	if (done)
		ck_assert_msg(t->result == ST_TR_SUCCESS && t->code == 0, "%s: done, task says %s/%d %s",
			      ctx, st_task_result_name(t->result), t->code, t->message);
	else
		ck_assert_msg(t->result == ST_TR_CLEAN_SUCCESS && t->code == 411,
			      "%s: rolled back, task says %s/%d %s", ctx,
			      st_task_result_name(t->result), t->code, t->message);
}

/* 1: the new chain, 0: the old one. */
static int check_outcome(struct storage_state *s, unsigned op, const char *ctx)
{
	assert_headers_agree(s, ctx);
	ck_assert_int_eq(crash_sh("! find %s/e1 -name '*.tmp' | grep -q .", root), 0);
	struct st_task_status pt, ft;
	bool has_p = task_of(s, "prepareMerge", &pt), has_f = task_of(s, "finalizeMerge", &ft);
	ck_assert_msg(has_p, "%s: the prepareMerge task was lost", ctx);
	int outcome = 0;
	if (op & ST_CO_PREP_MERGE) {
		const char *b = op == ST_CO_PREP_MERGE_COW ? CBASE : BASE;
		struct st_volume *v = vol(s, b);
		ck_assert_msg(v && v->legal, "%s: base lost or ILLEGAL", ctx);
		outcome = v->capacity == 2 * MiB;
		ck_assert_msg(outcome || v->capacity == MiB, "%s: base capacity %lld", ctx,
			      (long long)v->capacity);
		if (outcome && v->format == ST_FMT_RAW)
			ck_assert(st_volume_grown(map_get(&s->domains, SD1), v, 2 * MiB));
		assert_result(&pt, outcome, ctx);
		for (const char *const *id = (const char *const[]){ BASE, MID, TOP, CBASE, CTOP, NULL };
		     *id; id++)
			ck_assert_msg(vol(s, *id)->legal, "%s: %s ILLEGAL", ctx, *id);
		assert_guest(IMG1, TOP, ctx);
		assert_guest(IMG2, CTOP, ctx);
		ck_assert(!has_f);
		return outcome;
	}
	assert_result(&pt, true, ctx);
	pthread_mutex_lock(&s->lock);
	ck_assert_msg(map_first(&s->jobs) == NULL, "%s: a job survived", ctx);   /* jobs end with vdsmd */
	pthread_mutex_unlock(&s->lock);
	struct st_volume *base = vol(s, BASE), *mid = vol(s, MID), *top = vol(s, TOP);
	ck_assert_msg(base && mid && top, "%s: a volume was lost", ctx);
	ck_assert_int_eq(base->capacity, op == ST_CO_FIN_MERGE_LEAF ? MiB : 2 * MiB);
	if (op == ST_CO_MERGE_JOB) {
		ck_assert(!has_f);
		ck_assert_msg(base->legal && mid->legal && top->legal, "%s: legality changed", ctx);
		ck_assert_msg(base->generation == 0, "%s: generation %u bumped before the job ended",
			      ctx, base->generation);
		assert_guest(IMG1, TOP, ctx);
		return 0;
	}
	ck_assert_msg(has_f, "%s: the finalizeMerge task was lost", ctx);
	ck_assert_msg(base->legal, "%s: base ILLEGAL", ctx);
	if (op == ST_CO_FIN_MERGE_INT) {
		bool moved = strcmp(top->parent, BASE) == 0;
		ck_assert_msg(moved || strcmp(top->parent, MID) == 0, "%s: TOP's parent %s", ctx,
			      top->parent);
		ck_assert_msg(mid->legal == !moved && top->legal,
			      "%s: chain %s, but MID is %s", ctx, moved ? "new" : "old",
			      mid->legal ? "LEGAL" : "ILLEGAL");
		ck_assert_uint_eq(mid->nchildren, moved ? 0 : 1);
		ck_assert_uint_eq(base->nchildren, moved ? 2 : 1);
		assert_result(&ft, moved, ctx);
		assert_guest(IMG1, TOP, ctx);
		return moved;
	}
	/* the leaf left the chain, or it did not */
	ck_assert_msg(mid->legal, "%s: MID ILLEGAL", ctx);
	assert_result(&ft, !top->legal, ctx);
	assert_guest(IMG1, top->legal ? TOP : MID, ctx);
	return !top->legal;
}

static void crash_run(const char *step, unsigned op, unsigned *outcomes)
{
	char ctx[160];
	snprintf(ctx, sizeof(ctx), "step %s, operation %#x", step, op);
	restore();
	crash_fork_at(step, op, run_op, ctx);
	struct storage_state *s = open_state();
	int first = check_outcome(s, op, ctx);
	st_close(s);
	s = open_state();   /* persisted: a second start says the same */
	ck_assert_int_eq(check_outcome(s, op, ctx), first);
	st_close(s);
	*outcomes |= 1u << first;
}

struct steps_arg {
	unsigned op, outcomes;
};

static void crash_run_step(const char *step, void *arg)
{
	struct steps_arg *a = arg;
	crash_run(step, a->op, &a->outcomes);
}

static void run_all_steps(unsigned op, unsigned want_outcomes)
{
	struct steps_arg a = { op, 0 };
	unsigned n = crash_each_step(op, crash_run_step, &a);
	/* both ends are reached: the early steps roll back, the late finish */
	ck_assert_uint_eq(a.outcomes, want_outcomes);
	printf("crash merge: operation %#x: killed at %u step(s), each recovered to one chain; "
	       "%u qemu-img child(ren) killed\n", op, n, crash_orphans_killed);
}

static void suite_setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-crash-merge-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(tpl, sizeof(tpl), "%s/tpl", root);
	build_template();
}

static void suite_teardown(void)
{
	st_rmtree(root);
}

START_TEST(crash_prepare_raw_base)
{
	run_all_steps(ST_CO_PREP_MERGE_RAW, 3);
}
END_TEST

START_TEST(crash_prepare_cow_base)
{
	run_all_steps(ST_CO_PREP_MERGE_COW, 3);
}
END_TEST

START_TEST(crash_merge_job)
{
	run_all_steps(ST_CO_MERGE_JOB, 1);
}
END_TEST

START_TEST(crash_finalize_internal)
{
	run_all_steps(ST_CO_FIN_MERGE_INT, 3);
}
END_TEST

START_TEST(crash_finalize_leaf)
{
	run_all_steps(ST_CO_FIN_MERGE_LEAF, 3);
}
END_TEST
#endif /* VD_TEST_HOOKS */

static Suite *suite(void)
{
	Suite *s = suite_create("storage_crash_merge");
	TCase *tc = tcase_create("crash");
#ifdef VD_TEST_HOOKS
	tcase_set_timeout(tc, 180);
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_test(tc, crash_prepare_raw_base);
	tcase_add_test(tc, crash_prepare_cow_base);
	tcase_add_test(tc, crash_merge_job);
	tcase_add_test(tc, crash_finalize_internal);
	tcase_add_test(tc, crash_finalize_leaf);
#else
	const char *why = "kill -9 at named steps needs the crash points of a VD_TEST_HOOKS "
			  "build (runs in make asan-unit / tsan)";
	const char *names[] = { "crash_prepare_raw_base", "crash_prepare_cow_base",
				"crash_merge_job", "crash_finalize_internal", "crash_finalize_leaf" };
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
