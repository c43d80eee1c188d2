/* tests/unit/test_storage_crash.c - kill -9 at every named step of every
 * multi-step storage change (vdsmd/storage/st_crash.h), then restart: the
 * volume operations (create, delete, extend) and StoragePool.create here,
 * the image copies (copy_data, cloneStructure, syncData, move) in
 * test_storage_crash_copy.c, over the same trees (storage_crash_tree.h).
 *
 * For each step of ST_CRASH_STEPS and each operation that step lists, a
 * forked child opens the storage tree with VDSMD_TEST_CRASH_AT=<step>,
 * runs the operation and must die by SIGKILL at that step (a step it never
 * reaches fails the test; crash_harness.h).  Its qemu-img children, if any,
 * are killed too, as systemd would kill the service's cgroup.  The parent
 * then opens the same tree, as vdsmd does at startup, and checks:
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
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#ifdef VD_TEST_HOOKS
#include "storage_crash_tree.h"

/* ---- the operations (run by the child) ------------------------------------ */

static int start_op(struct storage_state *s, unsigned op, char tid[37], struct st_err *e)
{
	struct st_volreq r = { SD1, IMG4, VOL5, MiB, ST_FMT_RAW, ST_PREALLOCATED, "DATA", "", NULL,
			       NULL, false, false, 0, 0 };
	const char *vols[] = { VOL1, VOL2 };
	switch (op) {
	case ST_CO_CREATE_RAW:
		return st_volume_create(s, &r, tid, e);
	case ST_CO_CREATE_SNAP:
		r.img = IMG1;
		r.vol = VOL6;
		r.format = ST_FMT_COW;
		r.alloc = ST_SPARSE;
		r.src_img = IMG1;
		r.src_vol = VOL2;
		return st_volume_create(s, &r, tid, e);
	case ST_CO_VOL_DELETE: {   /* with postZero: zeroed before it goes */
		struct st_delopts zero = { .postzero = true };
		return st_volume_delete(s, SD1, IMG1, VOL2, &zero, tid, e);
	}
	case ST_CO_EXTEND_RAW:
		return st_volume_extend(s, SD1, IMG2, VOL3, 2 * MiB, tid, e);
	case ST_CO_EXTEND_COW:
		return st_volume_extend(s, SD1, IMG1, VOL2, 2 * MiB, tid, e);
	case ST_CO_IMG_DELETE:
		return st_image_delete(s, SD1, IMG1, NULL, tid, e);
	case ST_CO_VOLS_DELETE:
		return st_volumes_delete(s, SD1, IMG1, vols, 2, NULL, tid, e);
	case ST_CO_POOL_CREATE: {
		const char *doms[] = { SD1, SD2 };
		return st_pool_create(s, SP1, "pool", SD1, 1, doms, 2, NULL, e);
	}
	default:
		_exit(2);
	}
}

/* ---- the checks after the restart ---------------------------------------- */

static void check_create(struct storage_state *s, unsigned op, const char *ctx,
			 const struct st_task_status *task, bool has_task)
{
	const char *vol = op == ST_CO_CREATE_RAW ? VOL5 : VOL6;
	struct st_volume *v = get_vol(s, SD1, vol);
	ck_assert(has_task);
	if (v) {
		ck_assert_msg(v->legal, "%s: created volume kept but ILLEGAL", ctx);
		assert_success(task, ctx);
	} else {
		ck_assert(!has_image(s, SD1, IMG4));
		assert_aborted(task, ctx);
	}
}

static void check_delete(struct storage_state *s, unsigned op, const struct listing *before,
			 const char *ctx, const struct st_task_status *task, bool has_task,
			 const char *mine_sd1[3])
{
	ck_assert(has_task);
	mine_sd1[0] = VOL2;
	if (op != ST_CO_VOL_DELETE)
		mine_sd1[1] = VOL1;
	bool gone2 = !get_vol(s, SD1, VOL2), gone1 = !get_vol(s, SD1, VOL1);
	if (gone2 && (op == ST_CO_VOL_DELETE || gone1)) {
		assert_success(task, ctx);
		if (op == ST_CO_VOL_DELETE)
			assert_same(s, before, SD1, VOL1, ctx);
	} else {
		ck_assert_msg(!gone2 && !gone1, "%s: half of the image was deleted", ctx);
		assert_same(s, before, SD1, VOL2, ctx);
		assert_same(s, before, SD1, VOL1, ctx);
		assert_aborted(task, ctx);
	}
}

static void check_extend(struct storage_state *s, unsigned op, const struct listing *before,
			 const char *ctx, const struct st_task_status *task, bool has_task,
			 const char *mine_sd1[3])
{
	const char *vol = op == ST_CO_EXTEND_RAW ? VOL3 : VOL2;
	ck_assert(has_task);
	mine_sd1[0] = vol;
	struct st_volume *v = get_vol(s, SD1, vol);
	ck_assert_msg(v && v->legal, "%s: extended volume lost or ILLEGAL", ctx);
	if (v->capacity == 2 * MiB) {
		ck_assert(st_volume_grown(map_get(&s->domains, SD1), v, 2 * MiB));
		assert_success(task, ctx);
	} else {
		ck_assert_int_eq(v->capacity, MiB);
		assert_same(s, before, SD1, vol, ctx);
		assert_aborted(task, ctx);
	}
}

static void check_pool(struct storage_state *s, const char *ctx, bool has_task)
{
	ck_assert(!has_task);
	struct st_domain *a = map_get(&s->domains, SD1), *b = map_get(&s->domains, SD2);
	if (s->pool_uuid[0]) {
		ck_assert_str_eq(s->pool_uuid, SP1);
		ck_assert_str_eq(a->pool, SP1);
		ck_assert_str_eq(b->pool, SP1);
		ck_assert(a->master && !b->master);
	} else {
		ck_assert_msg(!a->pool[0] && !b->pool[0] && !a->master && !b->master,
			      "%s: no pool, but a domain is still attached to it", ctx);
	}
}

static void check_op(struct storage_state *s, unsigned op, const struct listing *before,
		     const char *ctx, const struct st_task_status *task, bool has_task,
		     const char *mine_sd1[3], const char *mine_sd2[3])
{
	(void)mine_sd2;
	if (op & ST_CO_CREATE)
		check_create(s, op, ctx, task, has_task);
	else if (op & ST_CO_DELETE)
		check_delete(s, op, before, ctx, task, has_task, mine_sd1);
	else if (op & (ST_CO_EXTEND_RAW | ST_CO_EXTEND_COW))
		check_extend(s, op, before, ctx, task, has_task, mine_sd1);
	else if (op == ST_CO_POOL_CREATE)
		check_pool(s, ctx, has_task);
	else
		ck_abort_msg("%s: not an operation of this test", ctx);
}

/* A second name for VOL2's data, outside the domain: after a completed
 * postZero delete its bytes must all be zero. */
static void crash_before(unsigned op)
{
	char *keep = st_pathf("%s/keep", root), *d2 = vpath("e1", SD1, IMG1, VOL2);
	unlink(keep);
	if (op == ST_CO_VOL_DELETE)
		ck_assert_int_eq(link(d2, keep), 0);
	free(keep);
	free(d2);
}

static void crash_after(struct storage_state *s, unsigned op, const char *ctx)
{
	char *keep = st_pathf("%s/keep", root);
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
}

OP_TEST(crash_create_raw, ST_CO_CREATE_RAW)
OP_TEST(crash_create_snapshot, ST_CO_CREATE_SNAP)
OP_TEST(crash_volume_delete, ST_CO_VOL_DELETE)
OP_TEST(crash_image_delete, ST_CO_IMG_DELETE)
OP_TEST(crash_delete_volumes, ST_CO_VOLS_DELETE)
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
	tcase_add_test(tc, crash_pool_create);
	tcase_add_test(tc, crash_extend_raw);
	tcase_add_test(tc, crash_extend_cow);
#else
	const char *why = "kill -9 at named steps needs the crash points of a VD_TEST_HOOKS "
			  "build (runs in make asan-unit / tsan)";
	const char *names[] = { "step_list_is_closed", "crash_create_raw", "crash_create_snapshot",
				"crash_volume_delete", "crash_image_delete", "crash_delete_volumes",
				"crash_pool_create", "crash_extend_raw", "crash_extend_cow" };
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
