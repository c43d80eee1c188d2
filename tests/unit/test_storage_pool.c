/* tests/unit/test_storage_pool.c - the pool's domain map (POOL_DOMAINS) and
 * the SPM lease's safety rule, against real files: the encoded map as VDSM
 * writes it, statuses changed on disk before memory (a failed write leaves
 * memory as it was), and an SPM whose lease renewals stall stops acting as
 * SPM before a contender could take the lease over. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#define SP1 "cccccccc-0000-0000-0000-000000000001"
#define SD1 "11111111-1111-1111-1111-111111111111"
#define SD2 "22222222-2222-2222-2222-222222222222"
#define SD3 "33333333-3333-3333-3333-333333333333"

static char root[256], dir[300];
static struct storage_state *S;

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-stp-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/dom", root);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char why[256];
	char *r = st_path(root, "state");
	S = st_open(r, why, sizeof(why));
	free(r);
	ck_assert_msg(S != NULL, "%s", why);
	ck_assert_int_eq(st_start_workers(S, 1), 0);
}

static void teardown(void)
{
	st_close(S);
	S = NULL;
	st_rmtree(root);
}

START_TEST(dommap_encoding)
{
	char *m = st_dommap_put("", SD1, ST_DS_ACTIVE);
	ck_assert_str_eq(m, SD1 ":Active");
	char *m2 = st_dommap_put(m, SD2, ST_DS_ATTACHED);
	ck_assert_str_eq(m2, SD1 ":Active," SD2 ":Attached");
	ck_assert_int_eq(st_dommap_get(m2, SD1), ST_DS_ACTIVE);
	ck_assert_int_eq(st_dommap_get(m2, SD2), ST_DS_ATTACHED);
	ck_assert_int_eq(st_dommap_get(m2, SD3), ST_DS_NONE);
	char *m3 = st_dommap_put(m2, SD1, ST_DS_NONE);   /* removed */
	ck_assert_str_eq(m3, SD2 ":Attached");
	char *m4 = st_dommap_put(m3, SD2, ST_DS_ACTIVE);   /* replaced, not added */
	ck_assert_str_eq(m4, SD2 ":Active");
	/* VDSM reads statuses case-insensitively; lower case as written by
	 * older tools, unknown words read as Unknown */
	ck_assert_int_eq(st_dommap_get(SD1 ":active," SD2 ":garbage", SD1), ST_DS_ACTIVE);
	ck_assert_int_eq(st_dommap_get(SD1 ":active," SD2 ":garbage", SD2), ST_DS_UNKNOWN);
	ck_assert_int_eq(st_dom_status_parse("inactive"), ST_DS_ATTACHED);
	ck_assert_int_eq(st_dom_status_parse("UNATTACHED"), ST_DS_UNATTACHED);
	ck_assert_int_eq(st_dom_status_parse("Maintenance"), ST_DS_NONE);
	free(m);
	free(m2);
	free(m3);
	free(m4);
}
END_TEST

static void make_pool(unsigned renew_ms, unsigned lease_ms)
{
	struct st_err e = {0};
	const char *doms[] = { SD1, SD2 };
	for (int i = 0; i < 2; i++)
		ck_assert_msg(st_domain_create(S, doms[i], ST_DT_LOCALFS, dir, "d", ST_DC_DATA, 5,
					       &e) == 0, "%s", e.msg);
	struct st_lease_cfg lease = { renew_ms, lease_ms, 10000, 3 };
	ck_assert_msg(st_pool_create(S, SP1, "pool", SD1, 1, doms, 2, &lease, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(st_pool_connect(S, SP1, true, 1, NULL, 0, &e), 0);
}

static void become_spm(void)
{
	struct st_err e = {0};
	char tid[37];
	ck_assert_int_eq(st_spm_start(S, SP1, tid, &e), 0);
	struct st_task_status ts;
	ck_assert_int_eq(st_task_wait(S, tid, 20000, &ts), 0);
	ck_assert_msg(ts.result == ST_TR_SUCCESS, "%s", ts.message);
}

static int status_of(const char *sd)
{
	pthread_mutex_lock(&S->lock);
	int st = st_pool_dom_status(S, sd);
	pthread_mutex_unlock(&S->lock);
	return st;
}

START_TEST(status_on_disk_before_memory)
{
	make_pool(1000, 3000);
	ck_assert_int_eq(status_of(SD1), ST_DS_ACTIVE);     /* the master */
	ck_assert_int_eq(status_of(SD2), ST_DS_ATTACHED);
	become_spm();
	struct st_err e = {0};
	ck_assert_int_eq(st_domain_activate(S, SD2, SP1, true, NULL, &e), 0);
	ck_assert_int_eq(status_of(SD2), ST_DS_ACTIVE);
	char *md = st_pathf("%s/%s/dom_md/metadata", dir, SD1);
	struct st_kv kv;
	ck_assert_int_eq(kv_read_file(&kv, md), 0);
	ck_assert_int_eq(st_dommap_get(kv_get(&kv, "POOL_DOMAINS"), SD2), ST_DS_ACTIVE);
	kv_free(&kv);
	/* the master's metadata cannot be written: the verb fails and memory
	 * keeps the old status */
	char *mdd = st_pathf("%s/%s/dom_md", dir, SD1), *moved = st_pathf("%s.x", mdd);
	ck_assert_int_eq(rename(mdd, moved), 0);
	ck_assert_int_eq(st_domain_activate(S, SD2, SP1, false, ST_BLANK_UUID, &e), -1);
	ck_assert_int_eq(status_of(SD2), ST_DS_ACTIVE);
	ck_assert_int_eq(rename(moved, mdd), 0);
	ck_assert_msg(st_domain_activate(S, SD2, SP1, false, ST_BLANK_UUID, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(status_of(SD2), ST_DS_ATTACHED);
	/* a reopened state reads the map back from the master */
	st_close(S);
	char why[256];
	char *r = st_path(root, "state");
	S = st_open(r, why, sizeof(why));
	free(r);
	ck_assert_ptr_nonnull(S);
	ck_assert_int_eq(status_of(SD1), ST_DS_ACTIVE);
	ck_assert_int_eq(status_of(SD2), ST_DS_ATTACHED);
	free(md);
	free(mdd);
	free(moved);
}
END_TEST

/* An SPM counts as SPM only while its last renewal began less than the
 * lease time minus half an interval ago (a contender waits the whole lease
 * time without seeing a change); when the renewer cannot write the lease
 * (dom_md moved away) the host stops being SPM and its verbs say so. */
START_TEST(spm_stops_before_its_lease_could_expire)
{
	make_pool(400, 1200);
	become_spm();
	pthread_mutex_lock(&S->lock);
	uint64_t now = vd_now_ms(), saved = S->spm_ok_ms;
	S->spm_ok_ms = now - (1200 - 200) + 100;
	ck_assert(st_spm_valid(S));
	S->spm_ok_ms = now - (1200 - 200) - 1;
	ck_assert(!st_spm_valid(S));
	S->spm_ok_ms = saved;
	ck_assert(st_spm_valid(S));
	pthread_mutex_unlock(&S->lock);
	char *mdd = st_pathf("%s/%s/dom_md", dir, SD1), *moved = st_pathf("%s.x", mdd);
	ck_assert_int_eq(rename(mdd, moved), 0);
	bool valid = true;
	for (int i = 0; valid && i < 500; i++) {
		usleep(20000);
		pthread_mutex_lock(&S->lock);
		valid = st_spm_valid(S);
		pthread_mutex_unlock(&S->lock);
	}
	ck_assert(!valid);
	struct st_err e = {0};
	ck_assert_int_eq(st_domain_activate(S, SD2, SP1, true, NULL, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_NOT_SPM);
	ck_assert_int_eq(rename(moved, mdd), 0);
	free(mdd);
	free(moved);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_pool");
	TCase *tc = tcase_create("pool");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, dommap_encoding);
	tcase_add_test(tc, status_on_disk_before_memory);
	tcase_add_test(tc, spm_stops_before_its_lease_could_expire);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_ERROR);
	return check_run(suite());
}
