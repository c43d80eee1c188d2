/* tests/unit/test_stomp_broker.c - the STOMP mini-broker driven without
 * sockets: session commands of PROTOCOL.md section 2 (CONNECT, heart-beat,
 * SUBSCRIBE/UNSUBSCRIBE, ACK/NACK/transactions, DISCONNECT, receipts,
 * framing errors, limits).  Routing of requests and replies is in
 * test_stomp_routing.c; the shared fixture in stomp_test.h. */
#include "stomp_test.h"

/* ---- CONNECT ------------------------------------------------------------- */

START_TEST(test_connect)
{
	ck_assert_int_gt(FEED(&A, "CONNECT\naccept-version:1.2\nhost:[::1]:54321\n\n\0"), 0);
	struct stomp_frame *f = expect(&A, STOMP_CONNECTED);
	ck_assert_str_eq(hdr(f, "version"), "1.2");
	ck_assert_str_eq(hdr(f, "heart-beat"), "0,0");
	ck_assert_str_eq(hdr(f, "server"), "vdsmd/test");
	ck_assert_uint_eq(strlen(hdr(f, "session")), 36);
	ck_assert_str_eq(f->hdr[0].name, "version");
	ck_assert_int_eq(H.nhb, 1);
	ck_assert_uint_eq(H.hb_send, 0);
	ck_assert_uint_eq(H.hb_recv, 0);
	ck_assert(stomp_session_connected(A.s));
	ck_assert(!stomp_session_closing(A.s));
	ck_assert_ptr_eq(stomp_session_conn(A.s), &A.conn_tag);
	expect_none(&A);

	/* no vdsmd-framing header: the engine's framing */
	ck_assert_int_eq(H.nframing, 1);
	ck_assert(!H.packed);

	/* STOMP works too, with a version list */
	FEED(&B, "STOMP\naccept-version:1.0,1.1,1.2\n\n\0");
	expect(&B, STOMP_CONNECTED);
	expect_none(&B);
}
END_TEST

START_TEST(test_connect_framing)
{
	/* vdsmd-framing:packed asks for frames as they are; any other value
	 * (and a refused CONNECT) does not */
	FEED(&A, "CONNECT\naccept-version:1.2\nvdsmd-framing:packed\n\n\0");
	expect(&A, STOMP_CONNECTED);
	ck_assert_int_eq(H.nframing, 1);
	ck_assert(H.packed);
	FEED(&B, "CONNECT\naccept-version:1.2\nvdsmd-framing:packedx\n\n\0");
	expect(&B, STOMP_CONNECTED);
	ck_assert_int_eq(H.nframing, 2);
	ck_assert(!H.packed);
	FEED(&B, "CONNECT\naccept-version:1.1\nvdsmd-framing:packed\n\n\0");
	expect(&B, STOMP_ERROR);
	ck_assert_int_eq(H.nframing, 2);
}
END_TEST

START_TEST(test_connect_version)
{
	static const char *const bad[] = {
		"CONNECT\naccept-version:1.0,1.1\n\n",
		"CONNECT\n\n",
		"CONNECT\naccept-version:1.20\n\n",
		"CONNECT\naccept-version:\n\n",
	};
	for (size_t i = 0; i < 4; i++) {
		ck_assert_int_gt(feed(&A, bad[i], strlen(bad[i]) + 1), 0);
		struct stomp_frame *f = expect(&A, STOMP_ERROR);
		ck_assert_str_eq(hdr(f, "message"), "Version unsupported");
		ck_assert(!stomp_session_closing(A.s));
		ck_assert(!stomp_session_connected(A.s));
	}
	/* the error carries the receipt; the connection stays usable */
	FEED(&A, "CONNECT\naccept-version:1.1\nreceipt:r1\n\n\0");
	struct stomp_frame *f = expect(&A, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "receipt-id"), "r1");
	expect_none(&A);
	FEED(&A, "CONNECT\naccept-version:1.1, 1.2 \nreceipt:r2\n\n\0");
	expect(&A, STOMP_CONNECTED);
	expect_receipt(&A, "r2");
	expect_none(&A);
	ck_assert_int_eq(H.nhb, 1);
}
END_TEST

struct hb_case {
	const char *in;
	const char *reply;
	unsigned send, recv;
};

static const struct hb_case hb_cases[] = {
	{ "heart-beat:0,15000\n", "15000,0", 15000, 0 },
	{ "heart-beat:0,500\n", "1000,0", 1000, 0 },
	{ "heart-beat:6000,5000\n", "5000,6000", 5000, 6000 },
	{ "", "0,0", 0, 0 },
	{ "heart-beat:0,0\n", "0,0", 0, 0 },
	{ "heart-beat:1,1\n", "1000,1000", 1000, 1000 },
	{ "heart-beat:10000,0\n", "0,10000", 0, 10000 },
	{ "heart-beat:junk\n", "0,0", 0, 0 },
	{ "heart-beat: 0 , 15000 \n", "15000,0", 15000, 0 },
	{ "heart-beat:99999999999,1\n", "1000,86400000", 1000, 86400000 },
	{ "heart-beat:1,2,3\n", "0,0", 0, 0 },
	{ "heart-beat:5\n", "0,0", 0, 0 },
	{ "heart-beat:,5\n", "0,0", 0, 0 },
};

START_TEST(test_heartbeat_table)
{
	const struct hb_case *c = &hb_cases[_i];
	char frame[128];
	int n = snprintf(frame, sizeof(frame), "CONNECT\naccept-version:1.2\n%s\n", c->in);
	feed(&A, frame, (size_t)n + 1);
	struct stomp_frame *f = expect(&A, STOMP_CONNECTED);
	ck_assert_str_eq(hdr(f, "heart-beat"), c->reply);
	ck_assert_int_eq(H.nhb, 1);
	ck_assert_uint_eq(H.hb_send, c->send);
	ck_assert_uint_eq(H.hb_recv, c->recv);
}
END_TEST

/* ---- SUBSCRIBE / UNSUBSCRIBE -------------------------------------------- */

START_TEST(test_subscribe_before_connect)
{
	/* the engine may queue SUBSCRIBE and SEND ahead of CONNECT */
	FEED(&A, "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:s1\nack:client\n\n\0"
		 "SEND\ndestination:jms.topic.vdsm_requests\n\n{}\0"
		 "CONNECT\naccept-version:1.2\n\n\0");
	ck_assert_int_eq(H.nreq, 1);
	expect(&A, STOMP_CONNECTED);
	expect_none(&A);
	ck_assert_uint_eq(stomp_broker_reply(H.b, A.s, NULL, 0, "application/json", S("{}")), 1);
	struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "subscription"), "s1");
}
END_TEST

START_TEST(test_subscribe_errors)
{
	FEED(&A, "SUBSCRIBE\nid:1\n\n\0");
	expect_error(&A, "Missing destination header");
	FEED(&A, "SUBSCRIBE\ndestination:x\nreceipt:r\n\n\0");
	struct stomp_frame *f = expect(&A, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), "Missing id header");
	ck_assert_str_eq(hdr(f, "receipt-id"), "r");
	FEED(&A, "SUBSCRIBE\ndestination:x\nid:1\n\n\0");
	expect_none(&A);
	FEED(&A, "SUBSCRIBE\ndestination:y\nid:1\n\n\0");
	expect_error(&A, "Subscription id already in use");
	/* the same id on another connection is fine */
	FEED(&B, "SUBSCRIBE\ndestination:y\nid:1\n\n\0");
	expect_none(&B);
	ck_assert(!stomp_session_closing(A.s));
	FEED(&A, "UNSUBSCRIBE\nreceipt:u\n\n\0");
	f = expect(&A, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), "Missing id header");
	ck_assert_str_eq(hdr(f, "receipt-id"), "u");
	expect_none(&A);
	struct stomp_broker_stats st;
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.subscriptions, 2);
	ck_assert_uint_eq(st.sessions, 2);
}
END_TEST

START_TEST(test_unsubscribe)
{
	FEED(&A, "SUBSCRIBE\ndestination:x.y\nid:1\n\n\0");
	FEED(&B, "SEND\ndestination:x.y\n\nhi\0");
	expect(&A, STOMP_MESSAGE);
	expect_none(&B);
	FEED(&A, "UNSUBSCRIBE\nid:nope\nreceipt:a\n\n\0UNSUBSCRIBE\nid:1\nreceipt:b\n\n\0");
	expect_receipt(&A, "a");
	expect_receipt(&A, "b");
	FEED(&B, "SEND\ndestination:x.y\n\nhi\0");
	expect_error(&B, "Subscription not available");
	expect_none(&A);
	/* the id can be reused after UNSUBSCRIBE */
	FEED(&A, "SUBSCRIBE\ndestination:x\nid:1\n\n\0");
	expect_none(&A);
	FEED(&B, "SEND\ndestination:x.y\n\nhi\0");
	struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "destination"), "x.y");
	struct stomp_broker_stats st;
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.subscriptions, 1);
}
END_TEST

/* ---- other commands ------------------------------------------------------ */

START_TEST(test_ack_nack_transactions)
{
	FEED(&A, "ACK\nid:1\n\n\0NACK\nid:2\n\n\0ACK\nid:3\nreceipt:k\n\n\0");
	expect_receipt(&A, "k");
	expect_none(&A);
	ck_assert(!stomp_session_closing(A.s));
	FEED(&A, "BEGIN\ntransaction:t\n\n\0COMMIT\ntransaction:t\n\n\0"
		 "ABORT\ntransaction:t\nreceipt:z\n\n\0");
	expect_error(&A, "transactions not supported");
	expect_error(&A, "transactions not supported");
	struct stomp_frame *f = expect(&A, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), "transactions not supported");
	ck_assert_str_eq(hdr(f, "receipt-id"), "z");
	expect_none(&A);
	ck_assert(!stomp_session_closing(A.s));
	FEED(&A, "CONNECT\naccept-version:1.2\n\n\0");
	expect(&A, STOMP_CONNECTED);
}
END_TEST

START_TEST(test_disconnect)
{
	FEED(&A, "CONNECT\naccept-version:1.2\n\n\0");
	expect(&A, STOMP_CONNECTED);
	const char in[] = "DISCONNECT\nreceipt:77\n\n\0SEND\ndestination:jms.topic.vdsm_requests\n\n{}\0";
	ck_assert_int_eq(feed(&A, in, sizeof(in) - 1), (long)sizeof("DISCONNECT\nreceipt:77\n\n"));
	expect_receipt(&A, "77");
	expect_none(&A);
	ck_assert(stomp_session_closing(A.s));
	ck_assert_int_eq(H.nreq, 0);  /* nothing after DISCONNECT is handled */
	/* further input is swallowed */
	long want = (long)A.in.len + (long)sizeof("SEND\n\n");
	ck_assert_int_eq(FEED(&A, "SEND\n\n\0"), want);

	FEED(&B, "DISCONNECT\n\n\0");
	expect_none(&B);
	ck_assert(stomp_session_closing(B.s));
}
END_TEST

START_TEST(test_receipts)
{
	FEED(&A, "CONNECT\naccept-version:1.2\nreceipt:c\n\n\0"
		 "SUBSCRIBE\ndestination:d\nid:1\nreceipt:s\n\n\0"
		 "SEND\ndestination:d\nreceipt:m\n\nx\0"
		 "SEND\ndestination:jms.topic.vdsm_requests\nreceipt:r\n\n{}\0");
	expect(&A, STOMP_CONNECTED);
	expect_receipt(&A, "c");
	expect_receipt(&A, "s");
	struct stomp_frame *f = expect(&A, STOMP_MESSAGE);  /* own subscription */
	ck_assert_ptr_null(hdr(f, "receipt"));
	expect_receipt(&A, "m");
	expect_receipt(&A, "r");
	expect_none(&A);
	ck_assert_int_eq(H.nreq, 1);
	/* escaped receipt value round-trips */
	FEED(&A, "ACK\nreceipt:a\\cb\\\\c\n\n\0");
	expect_receipt(&A, "a:b\\c");
}
END_TEST

/* ---- framing errors ------------------------------------------------------ */

static const char *const framing[] = {
	"SEND\ndestination:x\\t\n\n\0",
	"BOGUS\n\n\0",
	"SEND\ncontent-length:1\n\nab\0",
	"MESSAGE\ndestination:x\n\n\0",
	"CONNECTED\n\n\0",
};

START_TEST(test_framing_errors)
{
	const char *in = framing[_i];
	size_t len = strlen(in) + 1;
	long r = feed(&A, in, len);
	ck_assert_int_lt(r, 0);
	struct stomp_frame *f = expect(&A, STOMP_ERROR);
	ck_assert_ptr_nonnull(hdr(f, "message"));
	ck_assert_uint_gt(strlen(hdr(f, "message")), 0);
	expect_none(&A);
	ck_assert(stomp_session_closing(A.s));
}
END_TEST

START_TEST(test_limits)
{
	teardown();
	struct stomp_limits lim = { 256, 4, 64 };
	setup_cfg(0, lim);
	/* within limits */
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_requests\na:1\nb:2\nc:3\n\n{}\0");
	ck_assert_int_eq(H.nreq, 1);
	/* too many headers: ERROR then close, before the frame ends */
	ck_assert_int_lt(FEED(&A, "SEND\na:1\nb:2\nc:3\nd:4\ne:5\n"), 0);
	struct stomp_frame *f = expect(&A, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), "Too many headers");
	ck_assert(stomp_session_closing(A.s));
	/* header line */
	char line[200];
	memset(line, 'x', sizeof(line));
	FEED(&B, "SEND\nk:");
	ck_assert_int_lt(feed(&B, line, 100), 0);
	f = expect(&B, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), "Header line too long");
	peer_close(&B);
	peer_open(&B, 2);
	/* frame size via content-length: refused at once */
	ck_assert_int_lt(FEED(&B, "SEND\ncontent-length:1000\n\n"), 0);
	f = expect(&B, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), "Frame too large");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stomp_broker");
	TCase *tc = tcase_create("broker");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_connect);
	tcase_add_test(tc, test_connect_framing);
	tcase_add_test(tc, test_connect_version);
	tcase_add_loop_test(tc, test_heartbeat_table, 0, (int)VD_ARRAY_SIZE(hb_cases));
	tcase_add_test(tc, test_subscribe_before_connect);
	tcase_add_test(tc, test_subscribe_errors);
	tcase_add_test(tc, test_unsubscribe);
	tcase_add_test(tc, test_ack_nack_transactions);
	tcase_add_test(tc, test_disconnect);
	tcase_add_test(tc, test_receipts);
	tcase_add_loop_test(tc, test_framing_errors, 0, (int)VD_ARRAY_SIZE(framing));
	tcase_add_test(tc, test_limits);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
