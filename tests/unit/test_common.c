/* tests/unit/test_common.c - byte buffer, arena, UUID helpers, log levels,
 * the error codes. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/vd.h"
#include "check_main.h"

START_TEST(buf_append_consume)
{
	struct vd_buf b = VD_BUF_INIT;
	for (int i = 0; i < 1000; i++)
		buf_append(&b, "abcd", 4);
	ck_assert_uint_eq(b.len, 4000);
	ck_assert(b.cap >= 4000);
	buf_consume(&b, 3998);
	ck_assert_uint_eq(b.len, 2);
	ck_assert_int_eq(memcmp(b.data, "cd", 2), 0);
	buf_printf(&b, "%d-%s", 42, "x");
	ck_assert_uint_eq(b.len, 6);
	ck_assert_int_eq(memcmp(b.data, "cd42-x", 6), 0);
	buf_consume(&b, 100);
	ck_assert_uint_eq(b.len, 0);
	buf_shrink(&b);
	ck_assert_uint_eq(b.cap, 0);
	ck_assert_ptr_null(b.data);
	buf_free(&b);
}
END_TEST

START_TEST(buf_printf_long)
{
	struct vd_buf b = VD_BUF_INIT;
	char big[5000];
	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	buf_putc(&b, '<');
	buf_printf(&b, "%s>", big);
	ck_assert_uint_eq(b.len, 5001);
	ck_assert_int_eq(b.data[0], '<');
	ck_assert_int_eq(b.data[5000], '>');
	buf_free(&b);
}
END_TEST

START_TEST(arena_alloc_reset)
{
	struct vd_arena a;
	arena_init(&a, 64);
	char *first = arena_alloc(&a, 10);
	ck_assert(((uintptr_t)first & 7u) == 0);
	memset(first, 1, 10);
	/* larger than the first block: a new block is added */
	char *big = arena_alloc(&a, 10000);
	memset(big, 2, 10000);
	char *s = arena_strndup(&a, "hello world", 5);
	ck_assert_str_eq(s, "hello");
	ck_assert_uint_ge(a.total, 10016);
	arena_reset(&a);
	ck_assert_uint_eq(a.total, 0);
	char *again = arena_alloc(&a, 8);
	ck_assert_ptr_nonnull(again);
	arena_free(&a);
}
END_TEST

START_TEST(uuid_check_and_generate)
{
	ck_assert(vd_is_uuid("1f3b7bd9-86a7-4b8f-9f2c-0a2b3c4d5e6f", 36));
	ck_assert(vd_is_uuid("1F3B7BD9-86A7-4B8F-9F2C-0A2B3C4D5E6F", 36));
	ck_assert(!vd_is_uuid("1f3b7bd9-86a7-4b8f-9f2c-0a2b3c4d5e6", 35));
	ck_assert(!vd_is_uuid("1f3b7bd9_86a7-4b8f-9f2c-0a2b3c4d5e6f", 36));
	ck_assert(!vd_is_uuid("../../etc/passwd-aaaa-bbbb-cccccccccccc", 36));
	ck_assert(!vd_is_uuid(NULL, 36));
	char u1[37], u2[37];
	vd_uuid_generate(u1);
	vd_uuid_generate(u2);
	ck_assert(vd_is_uuid(u1, strlen(u1)));
	ck_assert_int_eq(u1[14], '4');
	ck_assert_str_ne(u1, u2);
}
END_TEST

START_TEST(log_levels)
{
	enum vd_log_level l;
	ck_assert_int_eq(log_level_parse("debug", &l), 0);
	ck_assert_int_eq(l, VD_LOG_DEBUG);
	ck_assert_int_eq(log_level_parse("WARNING", &l), 0);
	ck_assert_int_eq(l, VD_LOG_WARN);
	ck_assert_int_eq(log_level_parse("loud", &l), VD_EINVAL);
	ck_assert_str_eq(vd_strerror(VD_ETOOBIG), "over the size limit");
}
END_TEST

/* A system call's failure travels as vd_sys(errno): a range of its own,
 * below every named code, decoded back to the errno and the system's
 * text; nothing outside it decodes. */
START_TEST(sys_error_range)
{
	ck_assert_int_eq(vd_sys(ENOENT), VD_ESYS(ENOENT));
	ck_assert_int_eq(VD_ESYS(ENOENT), VD_ESYS_BASE - ENOENT);
	ck_assert_int_lt(vd_sys(1), VD_ESYS_BASE);
	ck_assert_int_ne(vd_sys(ENOENT), VD_EPROTO);   /* -ENOENT was */
	ck_assert_int_ne(vd_sys(EAGAIN), VD_EBUSY);    /* -EAGAIN was */
	ck_assert_int_ne(vd_sys(ENOEXEC), VD_EIO);     /* -ENOEXEC was */
	ck_assert_int_eq(vd_sys_errno(vd_sys(ENOENT)), ENOENT);
	ck_assert_int_eq(vd_sys_errno(vd_sys(EEXIST)), EEXIST);
	ck_assert_int_eq(vd_sys_errno(VD_ESYS(VD_ESYS_MAX)), VD_ESYS_MAX);
	/* a failure never reads as success or a named code */
	ck_assert_int_eq(vd_sys(0), VD_ESYS(EIO));
	ck_assert_int_eq(vd_sys(-3), VD_ESYS(EIO));
	ck_assert_int_eq(vd_sys(VD_ESYS_MAX + 1), VD_ESYS(EIO));
	for (int rc = 0; rc >= VD_ESYS_BASE; rc--)
		ck_assert_int_eq(vd_sys_errno(rc), 0);
	ck_assert_int_eq(vd_sys_errno(VD_ESYS(VD_ESYS_MAX) - 1), 0);
	ck_assert_int_eq(vd_sys_errno(INT_MIN), 0);
	ck_assert_int_eq(vd_sys_errno(1), 0);
	switch (vd_sys(EEXIST)) {   /* a constant expression: case labels */
	case VD_ESYS(EEXIST): break;
	default: ck_abort_msg("VD_ESYS(EEXIST) is not vd_sys(EEXIST)");
	}
	ck_assert_str_eq(vd_strerror(vd_sys(ENOENT)), "No such file or directory");
	ck_assert_str_eq(vd_strerror(VD_ESYS(ECANCELED)), "Operation canceled");
	ck_assert_str_eq(vd_strerror(VD_ESYS(4000)), "Unknown error 4000");
	ck_assert_str_eq(vd_strerror(VD_ECANCELED), "cancelled");
	ck_assert_str_eq(vd_strerror(VD_EPROTO), "malformed input");
	ck_assert_str_eq(vd_strerror(VD_ESYS_BASE), "unknown error");
	ck_assert_str_eq(vd_strerror(-999), "unknown error");
}
END_TEST

/* A repeated line: burst lines per 10 s window, the rest counted and
 * reported with the next line logged. */
START_TEST(log_rate_limit)
{
	struct vd_log_limit l = { .burst = 3 };
	uint64_t sup = 99, t = 1000000;
	for (int i = 0; i < 3; i++) {
		ck_assert(log_limit(&l, t + (uint64_t)i, &sup));
		ck_assert_uint_eq(sup, 0);
	}
	for (int i = 0; i < 1000; i++)
		ck_assert(!log_limit(&l, t + 100, &sup));
	ck_assert(!log_limit(&l, t + VD_LOG_LIMIT_WINDOW_MS - 1, &sup));
	ck_assert(log_limit(&l, t + VD_LOG_LIMIT_WINDOW_MS, &sup));
	ck_assert_uint_eq(sup, 1001);
	ck_assert_uint_eq(l.total_suppressed, 1001);
	ck_assert(log_limit(&l, t + VD_LOG_LIMIT_WINDOW_MS + 1, &sup));
	ck_assert_uint_eq(sup, 0);
}
END_TEST

/* The sink: a struct vd_log of the caller's, written through by every
 * vd_log() line; its level filters, SIGHUP's reopen follows a renamed file,
 * and after log_close the process has no sink (level info, set ignored). */
static size_t slurp(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(out, 1, cap - 1, f);
	fclose(f);
	out[n] = '\0';
	return n;
}

START_TEST(log_sink_owned_by_caller)
{
	char dir[] = "/tmp/vdsmd-log-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[64], moved[64], text[4096];
	snprintf(path, sizeof(path), "%s/vdsmd.log", dir);
	snprintf(moved, sizeof(moved), "%s/vdsmd.log.1", dir);
	struct vd_log lg;
	memset(&lg, 0xA5, sizeof(lg));   /* log_open ignores what was there */
	ck_assert_int_eq(log_open(&lg, path, VD_LOG_WARN), 0);
	ck_assert_int_eq(log_get_level(), VD_LOG_WARN);
	log_info("dropped %d", 1);
	log_warn("kept %d\nsame line", 2);
	vd_log_flow(VD_LOG_ERROR, "flow-1", "with flow");
	ck_assert_uint_gt(slurp(path, text, sizeof(text)), 0);
	ck_assert_ptr_null(strstr(text, "dropped"));
	ck_assert_ptr_nonnull(strstr(text, " WARN kept 2 same line\n"));
	ck_assert_ptr_nonnull(strstr(text, " ERROR [flow_id=flow-1] with flow\n"));
	log_set_level(VD_LOG_DEBUG);
	ck_assert_int_eq(log_get_level(), VD_LOG_DEBUG);
	/* reopened in place (reconfigured, not re-initialised) */
	ck_assert_int_eq(log_open(&lg, path, VD_LOG_INFO), 0);
	ck_assert_int_eq(log_get_level(), VD_LOG_INFO);
	ck_assert_int_eq(rename(path, moved), 0);
	ck_assert_int_eq(log_reopen(&lg), 0);
	log_info("after reopen");
	ck_assert_uint_gt(slurp(path, text, sizeof(text)), 0);
	ck_assert_ptr_nonnull(strstr(text, "after reopen"));
	ck_assert_ptr_null(strstr(text, "kept 2"));
	log_close(&lg);
	ck_assert_int_eq(lg.fd, 2);
	log_set_level(VD_LOG_ERROR);      /* no sink: nothing to set */
	ck_assert_int_eq(log_get_level(), VD_LOG_INFO);
	log_debug("to nowhere");
	slurp(path, text, sizeof(text));
	ck_assert_ptr_null(strstr(text, "nowhere"));
	unlink(path);
	unlink(moved);
	rmdir(dir);
}
END_TEST

START_TEST(clock_monotonic)
{
	uint64_t a = vd_now_ns(), b = vd_now_ns();
	ck_assert_uint_ge(b, a);
	ck_assert_uint_gt(vd_now_ms(), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, buf_append_consume);
	tcase_add_test(tc, buf_printf_long);
	tcase_add_test(tc, arena_alloc_reset);
	tcase_add_test(tc, uuid_check_and_generate);
	tcase_add_test(tc, log_levels);
	tcase_add_test(tc, sys_error_range);
	tcase_add_test(tc, clock_monotonic);
	tcase_add_test(tc, log_rate_limit);
	tcase_add_test(tc, log_sink_owned_by_caller);
	suite_add_tcase(s, tc);
	return check_run(s);
}
