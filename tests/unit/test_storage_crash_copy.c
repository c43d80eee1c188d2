/* tests/unit/test_storage_crash_copy.c - kill -9 at every named step of the
 * image copies (vdsmd/storage/st_crash.h): SDM.copy_data into an existing
 * volume, Image.cloneStructure, Image.syncData, Image.move op=copy and
 * op=move, then restart; the trees and the checks every operation shares
 * are test_storage_crash.c's (storage_crash_tree.h), the kill -9 harness
 * crash_harness.h.  After each crash the copy is whole or not there: a
 * completed copy compares equal (qemu-img compare) to its source as it was,
 * a rolled-back one left nothing on the destination (its task 411), a
 * cloneStructure's volumes are LEGAL (VDSM's), an unfinished syncData failed
 * (100) with the one layer that may be half-written ILLEGAL and every LEGAL
 * layer either synced (equal to its source) or untouched (empty),
 * a move removed the source only once the destination is complete; every
 * other volume is as listed before, nothing unlisted is left, and a second
 * restart says the same.  Needs a VD_TEST_HOOKS build (make asan-unit, make
 * tsan); elsewhere each test reports SKIP. */
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

static int copy_data(struct storage_state *s, struct st_err *e)
{
	const char *src[3] = { SD1, IMG2, VOL3 }, *dst[3] = { SD2, IMG3, VOL4 };
	int rc = st_copy_data(s, JOB1, src, dst, e);
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
	return rc;
}

static int start_op(struct storage_state *s, unsigned op, char tid[37], struct st_err *e)
{
	struct st_imgcopy_req ic = { NULL, SD1, IMG1, SD2, 0, ST_SYNC_ALL, false, false, false };
	switch (op) {
	case ST_CO_COPY_DATA:
		return copy_data(s, e);
	case ST_CO_CLONE:
	case ST_CO_SYNC:
	case ST_CO_COPY:
	case ST_CO_MOVE:
		ic.op = op == ST_CO_CLONE ? ST_IC_CLONE : op == ST_CO_SYNC ? ST_IC_SYNC
			: op == ST_CO_COPY ? ST_IC_COPY : ST_IC_MOVE;
		return st_image_copy(s, &ic, tid, e);
	default:
		_exit(2);
	}
}

/* ---- the checks after the restart ---------------------------------------- */

static void check_copy_data(struct storage_state *s, const char *ctx, bool has_task,
			    const char *mine_sd2[3])
{
	ck_assert(!has_task);
	mine_sd2[0] = VOL4;
	pthread_mutex_lock(&s->lock);
	ck_assert_uint_eq(map_first(&s->jobs) == NULL, 1);   /* jobs end with vdsmd */
	pthread_mutex_unlock(&s->lock);
	struct st_volume *v = get_vol(s, SD2, VOL4);
	ck_assert_msg(v != NULL, "%s: copy_data destination lost", ctx);
	if (v->legal)
		ck_assert_int_eq(crash_sh("qemu-img compare -q -f raw -F raw %s/e1/%s/images/%s/%s "
					  "%s/e2/%s/images/%s/%s", root, SD1, IMG2, VOL3, root, SD2,
					  IMG3, VOL4), 0);
}

/* cloneStructure, Image.move op=copy and op=move */
static void check_struct(struct storage_state *s, unsigned op, const struct listing *before,
			 const char *ctx, const struct st_task_status *task, bool has_task,
			 const char *mine_sd1[3])
{
	ck_assert(has_task);
	mine_sd1[0] = op == ST_CO_MOVE ? VOL1 : NULL;
	mine_sd1[1] = op == ST_CO_MOVE ? VOL2 : NULL;
	if (has_image(s, SD2, IMG1)) {
		struct st_volume *d1 = get_vol(s, SD2, VOL1), *d2 = get_vol(s, SD2, VOL2);
		ck_assert_msg(d1 && d2, "%s: half a structure on the destination", ctx);
		/* a clone LEGAL as VDSM's; a copy or move LEGAL once synced */
		ck_assert_msg(d1->legal && d2->legal, "%s: destination legality", ctx);
		if (op != ST_CO_CLONE)
			assert_copy_equal(ctx);
		if (op == ST_CO_MOVE)
			ck_assert_msg(!get_vol(s, SD1, VOL1) && !get_vol(s, SD1, VOL2) &&
				      !has_image(s, SD1, IMG1),
				      "%s: moved, but the source is still there", ctx);
		assert_success(task, ctx);
	} else {
		if (op == ST_CO_MOVE) {
			assert_same(s, before, SD1, VOL1, ctx);
			assert_same(s, before, SD1, VOL2, ctx);
		}
		assert_aborted(task, ctx);
	}
}

static void check_sync(struct storage_state *s, const char *ctx,
		       const struct st_task_status *task, bool has_task, const char *mine_sd2[3])
{
	ck_assert(has_task);
	mine_sd2[0] = VOL1;
	mine_sd2[1] = VOL2;
	struct st_volume *d1 = get_vol(s, SD2, VOL1), *d2 = get_vol(s, SD2, VOL2);
	ck_assert_msg(d1 && d2, "%s: a syncData destination volume was lost", ctx);
	if (task->result == ST_TR_SUCCESS) {
		ck_assert_msg(d1->legal && d2->legal, "%s: synced, yet ILLEGAL", ctx);
		assert_copy_equal(ctx);
		assert_success(task, ctx);
		return;
	}
	ck_assert_msg(task->result == ST_TR_CLEAN_FAILURE && task->code == 100,
		      "%s: unfinished syncData, task says %s", ctx, st_task_result_name(task->result));
	/* layers go in order (VOL1, then VOL2): the one the record does not
	 * call synced is ILLEGAL, one only */
	ck_assert_msg(d1->legal != d2->legal, "%s: unfinished syncData, VOL1 %s, VOL2 %s", ctx,
		      d1->legal ? "LEGAL" : "ILLEGAL", d2->legal ? "LEGAL" : "ILLEGAL");
	if (d1->legal)   /* synced: the raw base equal to its source */
		ck_assert_msg(crash_sh("cmp -s %s/save/%s/%s %s/e2/%s/images/%s/%s", root, IMG1, VOL1,
				       root, SD2, IMG1, VOL1) == 0,
			      "%s: VOL1 LEGAL but not what the source holds", ctx);
	else             /* untouched: the clone's empty qcow2 layer */
		ck_assert_msg(crash_sh("! qemu-img map -U --output=json %s/e2/%s/images/%s/%s | "
				       "grep '\"depth\": 0' | grep -q '\"data\": true'",
				       root, SD2, IMG1, VOL2) == 0,
			      "%s: VOL2 LEGAL but holds data before VOL1 was synced", ctx);
}

static void check_op(struct storage_state *s, unsigned op, const struct listing *before,
		     const char *ctx, const struct st_task_status *task, bool has_task,
		     const char *mine_sd1[3], const char *mine_sd2[3])
{
	if (op == ST_CO_COPY_DATA)
		check_copy_data(s, ctx, has_task, mine_sd2);
	else if (op & ST_CO_STRUCT)
		check_struct(s, op, before, ctx, task, has_task, mine_sd1);
	else if (op == ST_CO_SYNC)
		check_sync(s, ctx, task, has_task, mine_sd2);
	else
		ck_abort_msg("%s: not an operation of this test", ctx);
}

static void crash_before(unsigned op)
{
	(void)op;
}

static void crash_after(struct storage_state *s, unsigned op, const char *ctx)
{
	(void)s;
	(void)op;
	(void)ctx;
}

OP_TEST(crash_copy_data, ST_CO_COPY_DATA)
OP_TEST(crash_clone_structure, ST_CO_CLONE)
OP_TEST(crash_sync_data, ST_CO_SYNC)
OP_TEST(crash_copy_image, ST_CO_COPY)
OP_TEST(crash_move_image, ST_CO_MOVE)
#endif /* VD_TEST_HOOKS */

static Suite *suite(void)
{
	Suite *s = suite_create("storage_crash_copy");
	TCase *tc = tcase_create("crash");
#ifdef VD_TEST_HOOKS
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_test(tc, crash_copy_data);
	tcase_add_test(tc, crash_clone_structure);
	tcase_add_test(tc, crash_sync_data);
	tcase_add_test(tc, crash_copy_image);
	tcase_add_test(tc, crash_move_image);
#else
	const char *why = "kill -9 at named steps needs the crash points of a VD_TEST_HOOKS "
			  "build (runs in make asan-unit / tsan)";
	const char *names[] = { "crash_copy_data", "crash_clone_structure", "crash_sync_data",
				"crash_copy_image", "crash_move_image" };
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
