/* tests/unit/test_storage_ops.c - the table of storage operations and the
 * task engine's side of it, against real files: every kind registered with
 * its run and recover, a record of a kind nobody registered read as kind
 * 0's, each operation's crash steps present in ST_CRASH_STEPS, and the
 * st_io a task hands to volume I/O (stop, progress, the child it runs). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#define TASK_ID "dddddddd-0000-4000-8000-000000000001"

static char root[256];
static char *state;
static struct storage_state *S;

static void open_state(void)
{
	char why[256];
	S = st_open(state, why, sizeof(why));
	ck_assert_msg(S != NULL, "%s", why);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-stops-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	state = st_path(root, "state");
	open_state();
}

static void teardown(void)
{
	st_close(S);
	S = NULL;
	st_rmtree(root);
	free(state);
}

START_TEST(every_kind_registered)
{
	static const struct { int kind; const char *verb; } want[] = {
		{ ST_TK_CREATE, "createVolume" },   { ST_TK_DELETE, "deleteVolume" },
		{ ST_TK_IMAGE_DELETE, "deleteImage" }, { ST_TK_SPM_START, "spmStart" },
		{ ST_TK_EXTEND, "extendVolumeSize" }, { ST_TK_IMAGE_COPY, "moveImage" },
		{ ST_TK_PREPARE_MERGE, "prepareMerge" }, { ST_TK_FINALIZE_MERGE, "finalizeMerge" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct st_task_op *op = st_task_op_of(S, want[i].kind);
		ck_assert_ptr_nonnull(op);
		ck_assert_int_eq(op->kind, want[i].kind);
		ck_assert_str_eq(op->verb, want[i].verb);
		ck_assert_ptr_nonnull(op->run);
		ck_assert_ptr_nonnull(op->recover);
	}
	for (int k = ST_TK_FINALIZE_MERGE + 1; k < ST_TASK_KINDS; k++)
		ck_assert_ptr_null(st_task_op_of(S, k));
	ck_assert_ptr_null(st_task_op_of(S, -1));
	ck_assert_ptr_null(st_task_op_of(S, ST_TASK_KINDS));
}
END_TEST

/* A finished record as st_task_persist writes it, of kind `kind`. */
static void write_record(int kind, const char *extra_key, const char *extra_val)
{
	struct st_kv kv;
	kv_init(&kv);
	kv_set(&kv, "ID", TASK_ID);
	kv_set(&kv, "VERB", "somethingElse");
	kv_setf(&kv, "KIND", "%d", kind);
	kv_set(&kv, "STATE", "finished");
	kv_set(&kv, "RESULT", "success");
	kv_set(&kv, "CODE", "0");
	kv_set(&kv, "MESSAGE", "1 jobs completed successfully");
	if (extra_key)
		kv_set(&kv, extra_key, extra_val);
	char *path = st_pathf("%s/tasks/%s.task", state, TASK_ID);
	ck_assert_int_eq(kv_write_file(&kv, path), 0);
	free(path);
	kv_free(&kv);
}

static void reopen_and_expect_verb(const char *verb)
{
	st_close(S);
	open_state();
	struct st_task_status st;
	struct st_err e = { 0 };
	ck_assert_int_eq(st_task_get(S, TASK_ID, &st, &e), 0);
	ck_assert_str_eq(st.verb, verb);
	ck_assert_int_eq(st.state, ST_TS_FINISHED);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
}

START_TEST(record_kind_picks_its_operation)
{
	/* the verb comes from the kind's descriptor, never from the record */
	write_record(ST_TK_EXTEND, "SIZE", "1048576");
	reopen_and_expect_verb("extendVolumeSize");
	/* the image copy's own field (OP) names its verb */
	write_record(ST_TK_IMAGE_COPY, "OP", "1");
	reopen_and_expect_verb("cloneImageStructure");
	/* a kind nobody registered reads as kind 0's, as before the table */
	write_record(99, NULL, NULL);
	reopen_and_expect_verb("createVolume");
}
END_TEST

#ifdef VD_TEST_HOOKS
START_TEST(crash_steps_belong_to_operations)
{
	size_t owned = 0;
	for (int k = 0; k < ST_TASK_KINDS; k++) {
		const struct st_task_op *op = st_task_op_of(S, k);
		if (!op || !op->crash_prefix)
			continue;
		size_t n = strlen(op->crash_prefix), mine = 0;
		for (size_t i = 0; i < st_crash_nsteps; i++)
			if (strncmp(st_crash_steps[i].name, op->crash_prefix, n) == 0 &&
			    st_crash_steps[i].name[n] == '.')
				mine++;
		ck_assert_msg(mine > 0, "%s: no step named %s.*", op->verb, op->crash_prefix);
		if (k != ST_TK_IMAGE_DELETE)   /* shares "delete" with ST_TK_DELETE */
			owned += mine;
	}
	/* every step but the host jobs' (SDM.copy_data, merge, update_volume,
	 * amend_volume, sparsify_volume) and StoragePool.create's (no task)
	 * belongs to one registered operation */
	static const char *const not_tasks[] = { "copy_data.", "merge.", "update_volume.",
						 "amend.", "sparsify.", "pool." };
	size_t other = 0;
	for (size_t i = 0; i < st_crash_nsteps; i++)
		for (size_t j = 0; j < sizeof(not_tasks) / sizeof(not_tasks[0]); j++)
			if (strncmp(st_crash_steps[i].name, not_tasks[j], strlen(not_tasks[j])) == 0)
				other++;
	ck_assert_int_eq(owned + other, st_crash_nsteps);
}
END_TEST
#endif

static void on_child(void *ctx, pid_t pid)
{
	pid_t *seen = ctx;
	if (pid > 0)
		seen[0] = pid;
	else
		seen[1] = 1;   /* told it was reaped */
}

START_TEST(task_io_stop_progress_child)
{
	struct st_task *t = st_task_alloc(st_task_op_of(S, ST_TK_CREATE));
	struct st_task_io x;
	st_task_io_init(&x, S, t);
	char why[128] = "";
	ck_assert(!x.io.stopped(x.io.ctx, why, sizeof(why)));
	x.io.progress(x.io.ctx, 42);
	ck_assert_int_eq(t->progress, 42);
	snprintf(t->abort_why, sizeof(t->abort_why), "stopped by request");
	t->abort = true;
	ck_assert(x.io.stopped(x.io.ctx, why, sizeof(why)));
	ck_assert_str_eq(why, "Task is aborted: stopped by request");
	/* a stopped task's tool is not run to its end: VD_ECANCELED */
	char *argv[] = { (char *)"sleep", (char *)"5", NULL };
	char err[256] = "";
	ck_assert_int_eq(st_run_tool(&x.io, "sleep", "coreutils", argv, -1, err, sizeof(err)),
			 VD_ECANCELED);
	ck_assert_str_eq(err, "Task is aborted: stopped by request");
	ck_assert_int_eq(t->child, 0);
	st_task_free(t);

	/* any owner's io: the child is reported, then its reaping */
	pid_t seen[2] = { 0, 0 };
	struct st_io io = { .ctx = seen, .child = on_child };
	char *tru[] = { (char *)"true", NULL };
	ck_assert_int_eq(st_run_tool(&io, "true", "coreutils", tru, -1, err, sizeof(err)), 0);
	ck_assert_int_gt(seen[0], 0);
	ck_assert_int_eq(seen[1], 1);
	/* no io at all: never stopped */
	ck_assert_int_eq(st_run_tool(NULL, "true", "coreutils", tru, -1, err, sizeof(err)), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_ops");
	TCase *tc = tcase_create("ops");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, every_kind_registered);
	tcase_add_test(tc, record_kind_picks_its_operation);
#ifdef VD_TEST_HOOKS
	tcase_add_test(tc, crash_steps_belong_to_operations);
#else
	check_skip("crash_steps_belong_to_operations",
		   "ST_CRASH_STEPS exists only in a VD_TEST_HOOKS build (runs in make asan-unit / tsan)");
#endif
	tcase_add_test(tc, task_io_stop_progress_child);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_ERROR);
	return check_run(suite());
}
