/* tests/unit/test_image_ticket.c - the image ticket table (vdsmd/image/
 * ticket.h) with ovirt-imageio's semantics: parsing and its refusals,
 * add/get/extend/remove, expiry and idle time by an injected clock, ops and
 * size refusals, transferred ranges, the table cap, and a remove that
 * cancels an operation running in another thread and waits for it. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../codecs/codec.h"
#include "../../common/arena.h"
#include "../../vdsmd/image/ticket.h"
#include "check_main.h"

#define U1 "11111111-2222-3333-4444-555555555555"
#define U2 "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

static int64_t fake_now;

static int64_t fake_clock(void *ctx)
{
	return *(int64_t *)ctx;
}

static struct vd_arena A;

static const struct vd_value *json(const char *s)
{
	const struct vd_codec *k = codec_find("yajl");
	struct vd_limits lim = { .max_depth = 64, .max_size = 1 << 20 };
	struct vd_value *v = NULL;
	struct vd_codec_error e;
	ck_assert_int_eq(k->decode(&A, s, strlen(s), &lim, &v, &e), 0);
	return v;
}

/* parse, expecting success */
static void spec(const char *s, struct ticket_spec *out)
{
	char why[256] = "";
	int rc = ticket_parse(json(s), out, why, sizeof(why));
	ck_assert_msg(rc == 0, "parse %s: %s", s, why);
}

/* parse, expecting a refusal whose text contains want */
static void refused(const char *s, const char *want)
{
	struct ticket_spec sp;
	char why[256] = "";
	ck_assert_int_eq(ticket_parse(json(s), &sp, why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, want), "parse %s: '%s' lacks '%s'", s, why, want);
	ck_assert_ptr_null(sp.url);
}

static struct ticket_table *T;

static void setup(void)
{
	arena_init(&A, 4096);
	fake_now = 1000;
	T = ticket_table_new(4, fake_clock, &fake_now);
}

static void teardown(void)
{
	ticket_table_free(T);
	arena_free(&A);
}

static void add(const char *s)
{
	struct ticket_spec sp;
	spec(s, &sp);
	ck_assert_int_eq(ticket_add(T, &sp), 0);
	ck_assert_ptr_null(sp.url);
}

#define ENGINE_FORM(uuid, ops, size) \
	"{\"uuid\":\"" uuid "\",\"timeout\":300,\"inactivity_timeout\":120," \
	"\"size\":" #size ",\"url\":\"file:///rhev/data-center/mnt/x/img/vol\"," \
	"\"ops\":" ops ",\"sparse\":true,\"transfer_id\":\"tx-1\",\"dirty\":false," \
	"\"filename\":\"disk.qcow2\"}"

START_TEST(parse_engine_form)
{
	struct ticket_spec s;
	spec(ENGINE_FORM(U1, "[\"write\"]", 1073741824), &s);
	ck_assert_str_eq(s.uuid, U1);
	ck_assert_uint_eq(s.size, 1073741824u);
	ck_assert_uint_eq(s.ops, TICKET_OP_WRITE);
	ck_assert_uint_eq(s.nops, 1);
	ck_assert_int_eq(s.timeout, 300);
	ck_assert_int_eq(s.inactivity_timeout, 120);
	ck_assert_str_eq(s.url, "file:///rhev/data-center/mnt/x/img/vol");
	ck_assert_str_eq(s.transfer_id, "tx-1");
	ck_assert_str_eq(s.filename, "disk.qcow2");
	ck_assert(s.sparse);
	ck_assert(!s.dirty);
	ticket_spec_clear(&s);
	/* the minimal imageio ticket: defaults; unknown keys and nulls ignored */
	spec("{\"uuid\":\"" U1 "\",\"size\":0,\"ops\":[\"read\"],\"timeout\":0,"
	     "\"url\":\"nbd:unix:/run/x.sock:exportname=sda\",\"future_key\":[1],"
	     "\"transfer_id\":null,\"filename\":null}", &s);
	ck_assert_int_eq(s.inactivity_timeout, TICKET_INACTIVITY_DEFAULT);
	ck_assert_str_eq(s.transfer_id, "(ticket/11111111-2222-3333)");
	ck_assert_ptr_null(s.filename);
	ck_assert(!s.sparse && !s.dirty);
	ticket_spec_clear(&s);
}
END_TEST

START_TEST(parse_refusals)
{
	const char *ok = "\"size\":1,\"ops\":[\"read\"],\"timeout\":1,\"url\":\"file:///x\"";
	char b[512];
	refused("[1]", "expecting a dict");
	snprintf(b, sizeof b, "{%s}", ok);
	refused(b, "missing: uuid");
	refused("{\"uuid\":\"" U1 "\",\"ops\":[\"read\"],\"timeout\":1,\"url\":\"file:///x\"}",
		"missing: size");
	refused("{\"uuid\":\"" U1 "\",\"size\":1,\"timeout\":1,\"url\":\"file:///x\"}",
		"missing: ops");
	refused("{\"uuid\":\"" U1 "\",\"size\":1,\"ops\":[],\"url\":\"file:///x\"}",
		"missing: timeout");
	refused("{\"uuid\":\"" U1 "\",\"size\":1,\"ops\":[],\"timeout\":1}", "missing: url");
	const char *bad[][2] = {
		{ "\"uuid\":\"not-a-uuid\"", "'uuid'" },
		{ "\"uuid\":7", "'uuid'" },
		{ "\"size\":-1", "'size'" },
		{ "\"size\":\"1\"", "'size'" },
		{ "\"size\":1.5", "'size'" },
		{ "\"size\":18446744073709551615", "'size'" },
		{ "\"ops\":[\"read\",\"delete\"]", "'ops'" },
		{ "\"ops\":\"read\"", "'ops'" },
		{ "\"ops\":[\"read\",\"read\",\"read\",\"read\",\"read\",\"read\",\"read\",\"read\","
		  "\"read\"]", "'ops'" },
		{ "\"timeout\":-5", "'timeout'" },
		{ "\"timeout\":2147483648", "'timeout'" },
		{ "\"inactivity_timeout\":-1", "'inactivity_timeout'" },
		{ "\"url\":\"ftp://x\"", "'url'" },
		{ "\"url\":\"file:///a\\u0000b\"", "'url'" },
		{ "\"url\":5", "'url'" },
		{ "\"sparse\":\"yes\"", "'sparse'" },
		{ "\"dirty\":1", "'dirty'" },
		{ "\"transfer_id\":5", "'transfer_id'" },
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(bad); i++) {
		/* the bad member comes first: the first one of a key counts */
		snprintf(b, sizeof b, "{%s,\"uuid\":\"" U1 "\",%s}", bad[i][0], ok);
		refused(b, bad[i][1]);
	}
	/* bounded strings */
	char *big = malloc(TICKET_URL_MAX + 200);
	int n = snprintf(big, TICKET_URL_MAX + 200, "{\"uuid\":\"" U1 "\",\"size\":1,"
			 "\"ops\":[\"read\"],\"timeout\":1,\"url\":\"file:///");
	memset(big + n, 'a', TICKET_URL_MAX);
	strcpy(big + n + TICKET_URL_MAX, "\"}");
	refused(big, "longer than 4096");
	n = snprintf(big, TICKET_URL_MAX + 200, "{\"uuid\":\"" U1 "\",%s,\"filename\":\"", ok);
	memset(big + n, 'f', TICKET_STR_MAX + 1);
	strcpy(big + n + TICKET_STR_MAX + 1, "\"}");
	refused(big, "'filename'");
	free(big);
}
END_TEST

START_TEST(add_get_extend_remove)
{
	add(ENGINE_FORM(U1, "[\"read\"]", 4096));
	struct ticket_info in;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_str_eq(in.uuid, U1);
	ck_assert_uint_eq(in.size, 4096);
	ck_assert_int_eq(in.expires, 1300);
	ck_assert_int_eq(in.timeout, 300);
	ck_assert_int_eq(in.inactivity_timeout, 120);
	ck_assert_int_eq(in.idle_time, 0);
	ck_assert(!in.active && !in.canceled && in.sparse && !in.dirty);
	ck_assert_uint_eq(in.connections, 0);
	ck_assert(in.has_transferred);
	ck_assert_uint_eq(in.transferred, 0);
	ck_assert_uint_eq(in.nops, 1);
	ck_assert_uint_eq(in.oplist[0], TICKET_OP_READ);
	ck_assert_str_eq(in.url, "file:///rhev/data-center/mnt/x/img/vol");
	ck_assert_str_eq(in.transfer_id, "tx-1");
	ck_assert_str_eq(in.filename, "disk.qcow2");
	ck_assert_int_eq(ticket_get(T, U2, &in), VD_ENOENT);

	fake_now += 50;
	ck_assert_int_eq(ticket_extend(T, U1, 10), 0);
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_int_eq(in.expires, 1060);
	ck_assert_int_eq(in.timeout, 300);  /* imageio: extend keeps the timeout */
	ck_assert_int_eq(in.idle_time, 50);
	ck_assert_int_eq(ticket_extend(T, U2, 10), VD_ENOENT);
	ck_assert_int_eq(ticket_extend(T, U1, -1), VD_EINVAL);

	/* add of the same uuid replaces it */
	add(ENGINE_FORM(U1, "[\"read\",\"write\"]", 8192));
	ck_assert_uint_eq(ticket_table_count(T), 1);
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_uint_eq(in.size, 8192);
	ck_assert(!in.has_transferred);  /* read+write: imageio reports none */

	ck_assert_int_eq(ticket_remove(T, U1, 1000), 0);
	ck_assert_int_eq(ticket_get(T, U1, &in), VD_ENOENT);
	ck_assert_int_eq(ticket_remove(T, U1, 1000), 0);  /* idempotent */
	ck_assert_uint_eq(ticket_table_count(T), 0);
}
END_TEST

START_TEST(expiry_by_clock)
{
	add(ENGINE_FORM(U1, "[\"read\"]", 4096));
	struct ticket_ref *r;
	char why[128];
	fake_now = 1299;
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_READ, 0, 1, &r, why, sizeof why),
			 TICKET_OK);
	ticket_ref_release(r);
	fake_now = 1300;  /* expires <= now */
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_READ, 0, 1, &r, why, sizeof why),
			 TICKET_EXPIRED);
	ck_assert_ptr_null(r);
	ck_assert_str_eq(why, "Transfer=tx-1 expired");
	/* expired tickets stay: get and extend work, then it authorizes again */
	struct ticket_info in;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_int_eq(ticket_extend(T, U1, 30), 0);
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_READ, 0, 1, &r, why, sizeof why),
			 TICKET_OK);
	/* the end of an operation touches the ticket: now + timeout */
	struct ticket_op *op;
	ck_assert_int_eq(ticket_op_begin(r, 0, &op), 0);
	fake_now = 1320;
	ck_assert_int_eq(ticket_op_end(op), 0);
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_int_eq(in.expires, 1620);
	ticket_ref_release(r);
	/* timeout 0: expired at once */
	add("{\"uuid\":\"" U2 "\",\"size\":1,\"ops\":[\"read\"],\"timeout\":0,\"url\":\"file:///x\"}");
	ck_assert_int_eq(ticket_authorize(T, U2, TICKET_OP_READ, 0, 1, &r, why, sizeof why),
			 TICKET_EXPIRED);
}
END_TEST

START_TEST(idle_and_inactivity)
{
	add("{\"uuid\":\"" U1 "\",\"size\":100,\"ops\":[\"write\"],\"timeout\":300,"
	    "\"url\":\"file:///x\"}");
	struct ticket_ref *r;
	char why[128];
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_WRITE, 0, 10, &r, why, sizeof why),
			 TICKET_OK);
	ck_assert_int_eq(ticket_ref_inactivity_timeout(r), TICKET_INACTIVITY_DEFAULT);
	ck_assert_int_eq(ticket_conn_attach(r), 0);
	struct ticket_info in;
	fake_now += 7;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_int_eq(in.idle_time, 7);
	ck_assert_uint_eq(in.connections, 1);
	struct ticket_op *op;
	ck_assert_int_eq(ticket_op_begin(r, 0, &op), 0);
	fake_now += 5;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert(in.active);
	ck_assert_int_eq(in.idle_time, 0);  /* active: never idle */
	ticket_op_progress(op, 4);
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_uint_eq(in.transferred, 4);  /* ongoing bytes count */
	ticket_op_progress(op, 10);
	ck_assert_int_eq(ticket_op_end(op), 0);
	fake_now += 3;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert(!in.active);
	ck_assert_int_eq(in.idle_time, 3);  /* from the op's end */
	ck_assert_uint_eq(in.transferred, 10);
	ticket_conn_detach(r);
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_uint_eq(in.connections, 0);
	ticket_ref_release(r);
}
END_TEST

START_TEST(writers_bounded)
{
	add("{\"uuid\":\"" U1 "\",\"size\":100,\"ops\":[\"write\"],\"timeout\":300,"
	    "\"url\":\"file:///x\"}");
	struct ticket_ref *a, *b;
	char why[128];
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_WRITE, 0, 10, &a, why, sizeof why),
			 TICKET_OK);
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_WRITE, 0, 10, &b, why, sizeof why),
			 TICKET_OK);
	ck_assert_int_eq(ticket_writer_begin(a, 1), 0);
	ck_assert_int_eq(ticket_writer_begin(b, 1), VD_EBUSY);  /* through any reference */
	ck_assert_int_eq(ticket_writer_begin(b, 2), 0);         /* a backend that takes two */
	ticket_writer_end(a);
	ticket_writer_end(b);
	ck_assert_int_eq(ticket_writer_begin(b, 1), 0);
	ticket_writer_end(b);
	ticket_ref_release(a);
	ticket_ref_release(b);
}
END_TEST

START_TEST(ops_and_size_refusals)
{
	add("{\"uuid\":\"" U1 "\",\"size\":100,\"ops\":[\"read\"],\"timeout\":300,"
	    "\"url\":\"file:///x\",\"transfer_id\":\"t1\"}");
	add("{\"uuid\":\"" U2 "\",\"size\":100,\"ops\":[\"write\"],\"timeout\":300,"
	    "\"url\":\"file:///x\",\"transfer_id\":\"t2\"}");
	struct ticket_ref *r;
	char why[128];
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_WRITE, 0, 1, &r, why, sizeof why),
			 TICKET_FORBIDDEN);
	ck_assert_str_eq(why, "Transfer=t1 forbids write");
	/* write implies read */
	ck_assert_int_eq(ticket_authorize(T, U2, TICKET_OP_READ, 0, 100, &r, why, sizeof why),
			 TICKET_OK);
	ck_assert_uint_eq(ticket_ref_size(r), 100);
	ck_assert_str_eq(ticket_ref_url(r), "file:///x");
	ck_assert_str_eq(ticket_ref_transfer_id(r), "t2");
	ticket_ref_release(r);
	ck_assert_int_eq(ticket_authorize(T, U2, TICKET_OP_WRITE, 99, 2, &r, why, sizeof why),
			 TICKET_PAST_SIZE);
	ck_assert_int_eq(ticket_authorize(T, U2, TICKET_OP_WRITE, 101, 0, &r, why, sizeof why),
			 TICKET_PAST_SIZE);
	ck_assert_int_eq(ticket_authorize(T, U2, TICKET_OP_WRITE, 1, UINT64_MAX, &r, why,
					  sizeof why), TICKET_PAST_SIZE);
	ck_assert_int_eq(ticket_authorize(T, U2, TICKET_OP_WRITE, 100, 0, &r, why, sizeof why),
			 TICKET_OK);
	ticket_ref_release(r);
	ck_assert_int_eq(ticket_authorize(T, "00000000-0000-0000-0000-000000000000",
					  TICKET_OP_READ, 0, 1, &r, why, sizeof why), TICKET_UNKNOWN);
	ck_assert_str_eq(why, "No such ticket 00000000-0000-0000-0000-000000000000");
	/* removed: unknown; canceled but still held: canceled */
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_READ, 0, 1, &r, why, sizeof why),
			 TICKET_OK);
	struct ticket_op *op;
	ck_assert_int_eq(ticket_op_begin(r, 0, &op), 0);
	ck_assert_int_eq(ticket_remove(T, U1, 0), VD_ETIMEDOUT);
	struct ticket_ref *r2;
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_READ, 0, 1, &r2, why, sizeof why),
			 TICKET_CANCELED);
	ck_assert_str_eq(why, "Transfer=t1 was canceled");
	ck_assert(ticket_op_canceled(op));
	ck_assert(ticket_ref_canceled(r));
	ck_assert_int_eq(ticket_conn_attach(r), VD_EPERM);
	ck_assert_int_eq(ticket_op_end(op), VD_EPERM);
	struct ticket_op *op2;
	ck_assert_int_eq(ticket_op_begin(r, 0, &op2), VD_EPERM);
	ck_assert_int_eq(ticket_remove(T, U1, 0), 0);  /* no op now: gone */
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_READ, 0, 1, &r2, why, sizeof why),
			 TICKET_UNKNOWN);
	ticket_ref_release(r);  /* the last reference frees it (ASan checks) */
}
END_TEST

START_TEST(transferred_ranges)
{
	add("{\"uuid\":\"" U1 "\",\"size\":1000000,\"ops\":[\"read\"],\"timeout\":300,"
	    "\"url\":\"file:///x\"}");
	struct ticket_ref *r;
	char why[128];
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_READ, 0, 1, &r, why, sizeof why),
			 TICKET_OK);
	static const uint64_t ops[][2] = { { 0, 100 }, { 50, 100 }, { 300, 50 }, { 150, 150 },
					   { 500, 0 }, { 600, 10 } };
	for (size_t i = 0; i < VD_ARRAY_SIZE(ops); i++) {
		struct ticket_op *op;
		ck_assert_int_eq(ticket_op_begin(r, ops[i][0], &op), 0);
		ticket_op_progress(op, ops[i][1]);
		ck_assert_int_eq(ticket_op_end(op), 0);
	}
	/* [0,350) + [600,610): overlaps and touching ranges counted once */
	struct ticket_info in;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_uint_eq(in.transferred, 360);
	/* beyond TICKET_RANGES_MAX disjoint ranges the closest pair merges:
	 * bounded memory, an over-count of at most the gaps merged */
	for (uint64_t i = 0; i < TICKET_RANGES_MAX + 10; i++) {
		struct ticket_op *op;
		ck_assert_int_eq(ticket_op_begin(r, 1000 + i * 100, &op), 0);
		ticket_op_progress(op, 10);
		ck_assert_int_eq(ticket_op_end(op), 0);
	}
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	uint64_t exact = 360 + (TICKET_RANGES_MAX + 10) * 10;
	ck_assert_uint_ge(in.transferred, exact);
	ck_assert_uint_le(in.transferred, exact + 20 * 90);
	ticket_ref_release(r);
}
END_TEST

START_TEST(table_cap)
{
	static const char *ids[] = { "00000000-0000-0000-0000-000000000001",
				     "00000000-0000-0000-0000-000000000002",
				     "00000000-0000-0000-0000-000000000003",
				     "00000000-0000-0000-0000-000000000004",
				     "00000000-0000-0000-0000-000000000005" };
	char b[256];
	for (int i = 0; i < 5; i++) {
		snprintf(b, sizeof b, "{\"uuid\":\"%s\",\"size\":1,\"ops\":[\"read\"],"
			 "\"timeout\":0,\"url\":\"file:///x\"}", ids[i]);
		struct ticket_spec s;
		spec(b, &s);
		ck_assert_int_eq(ticket_add(T, &s), i < 4 ? 0 : VD_EBUSY);
		ck_assert_ptr_null(s.url);  /* taken or freed either way */
	}
	ck_assert_uint_eq(ticket_table_count(T), 4);
	/* expired tickets still count; replacing one needs no room */
	snprintf(b, sizeof b, "{\"uuid\":\"%s\",\"size\":2,\"ops\":[\"read\"],"
		 "\"timeout\":9,\"url\":\"file:///y\"}", ids[2]);
	add(b);
	ck_assert_int_eq(ticket_remove(T, ids[0], 0), 0);
	snprintf(b, sizeof b, "{\"uuid\":\"%s\",\"size\":1,\"ops\":[\"read\"],"
		 "\"timeout\":0,\"url\":\"file:///x\"}", ids[4]);
	add(b);
	ck_assert_uint_eq(ticket_table_count(T), 4);
}
END_TEST

/* ---- remove cancels an operation running in another thread ---------------- */

struct worker {
	struct ticket_ref *ref;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started;
	bool saw_cancel;
	int end_rc;
	unsigned delay_ms;  /* how long it runs on after seeing the cancel */
};

static void *transfer(void *arg)
{
	struct worker *w = arg;
	struct ticket_op *op;
	ck_assert_int_eq(ticket_op_begin(w->ref, 0, &op), 0);
	pthread_mutex_lock(&w->mu);
	w->started = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	uint64_t done = 0;
	for (int i = 0; i < 5000 && !ticket_op_canceled(op); i++) {
		done += 512;
		ticket_op_progress(op, done);
		usleep(1000);
	}
	w->saw_cancel = ticket_op_canceled(op);
	usleep(w->delay_ms * 1000);
	w->end_rc = ticket_op_end(op);
	return NULL;
}

static void start(struct worker *w, pthread_t *th)
{
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	char why[128];
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_WRITE, 0, 1, &w->ref, why, sizeof why),
			 TICKET_OK);
	ck_assert_int_eq(pthread_create(th, NULL, transfer, w), 0);
	pthread_mutex_lock(&w->mu);
	while (!w->started)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

START_TEST(remove_waits_for_op)
{
	add("{\"uuid\":\"" U1 "\",\"size\":100000000,\"ops\":[\"write\"],\"timeout\":300,"
	    "\"url\":\"file:///x\"}");
	struct worker w = { .delay_ms = 100 };
	pthread_t th;
	start(&w, &th);
	struct ticket_info in;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert(in.active);
	uint64_t t0 = vd_now_ms();
	/* blocks until the op has seen the cancel and ended */
	ck_assert_int_eq(ticket_remove(T, U1, 10000), 0);
	uint64_t took = vd_now_ms() - t0;
	ck_assert(w.saw_cancel);  /* set before the op ended, so before remove returned */
	ck_assert_uint_ge(took, 90);
	ck_assert_uint_lt(took, 5000);
	ck_assert_int_eq(ticket_get(T, U1, &in), VD_ENOENT);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.end_rc, VD_EPERM);  /* the op learnt it was canceled */
	ticket_ref_release(w.ref);
}
END_TEST

START_TEST(remove_times_out_then_finishes)
{
	add("{\"uuid\":\"" U1 "\",\"size\":100000000,\"ops\":[\"write\"],\"timeout\":300,"
	    "\"url\":\"file:///x\"}");
	struct worker w = { .delay_ms = 400 };
	pthread_t th;
	start(&w, &th);
	ck_assert_int_eq(ticket_remove(T, U1, 50), VD_ETIMEDOUT);
	struct ticket_info in;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);  /* stays, canceled */
	ck_assert(in.canceled);
	ck_assert(in.active);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.end_rc, VD_EPERM);
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert(!in.active);
	ck_assert_int_eq(ticket_remove(T, U1, 50), 0);
	ck_assert_int_eq(ticket_get(T, U1, &in), VD_ENOENT);
	ticket_ref_release(w.ref);
}
END_TEST

START_TEST(replaced_ticket_keeps_its_ops)
{
	add("{\"uuid\":\"" U1 "\",\"size\":100,\"ops\":[\"write\"],\"timeout\":300,"
	    "\"url\":\"file:///old\"}");
	struct ticket_ref *r;
	char why[128];
	ck_assert_int_eq(ticket_authorize(T, U1, TICKET_OP_WRITE, 0, 1, &r, why, sizeof why),
			 TICKET_OK);
	add("{\"uuid\":\"" U1 "\",\"size\":200,\"ops\":[\"read\"],\"timeout\":300,"
	    "\"url\":\"file:///new\"}");
	/* the held reference still sees the old ticket, not canceled */
	ck_assert_str_eq(ticket_ref_url(r), "file:///old");
	ck_assert(!ticket_ref_canceled(r));
	struct ticket_op *op;
	ck_assert_int_eq(ticket_op_begin(r, 0, &op), 0);
	ck_assert_int_eq(ticket_op_end(op), 0);
	struct ticket_info in;
	ck_assert_int_eq(ticket_get(T, U1, &in), 0);
	ck_assert_str_eq(in.url, "file:///new");
	ck_assert_uint_eq(in.transferred, 0);
	ticket_ref_release(r);
}
END_TEST

START_TEST(real_clock)
{
	struct ticket_table *t = ticket_table_new(1, NULL, NULL);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = ticket_table_now(t);
	ck_assert(now >= ts.tv_sec && now <= ts.tv_sec + 1);
	ticket_table_free(t);
	ck_assert_str_eq(ticket_refusal_name(TICKET_PAST_SIZE), "past size");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("image_ticket");
	TCase *tc = tcase_create("ticket");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, parse_engine_form);
	tcase_add_test(tc, parse_refusals);
	tcase_add_test(tc, add_get_extend_remove);
	tcase_add_test(tc, expiry_by_clock);
	tcase_add_test(tc, idle_and_inactivity);
	tcase_add_test(tc, ops_and_size_refusals);
	tcase_add_test(tc, transferred_ranges);
	tcase_add_test(tc, table_cap);
	tcase_add_test(tc, remove_waits_for_op);
	tcase_add_test(tc, remove_times_out_then_finishes);
	tcase_add_test(tc, replaced_ticket_keeps_its_ops);
	tcase_add_test(tc, real_clock);
	tcase_add_test(tc, writers_bounded);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
