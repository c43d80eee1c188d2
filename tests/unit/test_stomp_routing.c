/* tests/unit/test_stomp_routing.c - the STOMP mini-broker driven without
 * sockets: routing of PROTOCOL.md section 2 (request destinations, replies
 * between sessions, prefix forwarding, publish and drop) and the throughput
 * shape (pipelined sends, split and nested feeds, many sessions, direct
 * writes).  Session commands are in test_stomp_broker.c; the shared fixture
 * in stomp_test.h. */
#include "stomp_test.h"

/* ---- requests and replies ------------------------------------------------ */

START_TEST(test_request_destinations)
{
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_requests\ncontent-type:application/json\n"
		 "reply-to:jms.topic.mine\novirtCorrelationId:flow-1\n\n{\"id\":1}\0");
	ck_assert_int_eq(H.nreq, 1);
	ck_assert_ptr_eq(H.req_s, A.s);
	ck_assert_uint_eq(H.body_len, 8);
	ck_assert_mem_eq(H.body, "{\"id\":1}", 8);
	ck_assert_str_eq(H.ct, "application/json");
	ck_assert_str_eq(H.rt, "jms.topic.mine");
	ck_assert_str_eq(H.flow, "flow-1");
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_irs_requests\n\n[]\0");
	ck_assert_int_eq(H.nreq, 2);
	ck_assert(!H.has_ct && !H.has_rt && !H.has_flow);
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_requests.host1\n\n{}\0"
		 "SEND\ndestination:jms.topic.vdsm_irs_requests.a.b\n\n{}\0");
	ck_assert_int_eq(H.nreq, 4);
	expect_none(&A);
	/* look-alikes are not request destinations */
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_requestsX\n\n{}\0");
	expect_error(&A, "Subscription not available");
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_request\n\n{}\0");
	expect_error(&A, "Subscription not available");
	FEED(&A, "SEND\n\n{}\0");
	expect_error(&A, "Missing destination header");
	ck_assert_int_eq(H.nreq, 4);
	ck_assert(!stomp_session_closing(A.s));
}
END_TEST

START_TEST(test_reply_routing)
{
	FEED(&A, "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:a1\n\n\0");
	FEED(&B, "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:b1\n\n\0");
	/* origin has a subscription on the destination: only origin */
	H.noutput = 0;
	ck_assert_uint_eq(stomp_broker_reply(H.b, A.s, NULL, 0, "application/json", S("{\"r\":1}")), 1);
	struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(f->hdr[0].name, "destination");
	ck_assert_str_eq(f->hdr[0].value, "jms.topic.vdsm_responses");
	ck_assert_str_eq(f->hdr[1].name, "content-type");
	ck_assert_str_eq(f->hdr[1].value, "application/json");
	ck_assert_str_eq(f->hdr[2].name, "subscription");
	ck_assert_str_eq(f->hdr[2].value, "a1");
	ck_assert_str_eq(f->hdr[3].name, "message-id");
	ck_assert_str_eq(f->hdr[4].name, "content-length");
	ck_assert_str_eq(f->hdr[4].value, "7");
	ck_assert_uint_eq(f->nhdr, 5);
	ck_assert_mem_eq(f->body, "{\"r\":1}", 7);
	expect_none(&B);
	ck_assert_int_eq(H.noutput, 1);  /* outside feed: the host is told */
	ck_assert_ptr_eq(H.output_conn, &A.conn_tag);

	/* subscribed twice on the destination: one copy, to the first */
	FEED(&A, "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:a2\n\n\0");
	ck_assert_uint_eq(stomp_broker_reply(H.b, A.s, NULL, 0, NULL, S("{}")), 1);
	f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "subscription"), "a1");
	expect_none(&A);
	expect_none(&B);

	/* origin listens elsewhere: nobody gets it, not even the subscribers
	 * of the reply-to (replies are private); counted */
	FEED(&B, "SUBSCRIBE\ndestination:jms.topic.other\nid:b2\n\n\0");
	ck_assert_uint_eq(stomp_broker_reply(H.b, A.s, S("jms.topic.other"), NULL, S("x")), 0);
	expect_none(&B);
	expect_none(&A);
	struct stomp_broker_stats st;
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.replies_unrouted, 1);

	/* no subscriber at all: nothing delivered */
	ck_assert_uint_eq(stomp_broker_reply(H.b, A.s, S("jms.topic.none"), NULL, S("x")), 0);

	/* origin closed while its request was pending: nobody */
	stomp_session_ref(A.s);
	struct stomp_session *old = A.s;
	stomp_session_free(A.s);
	ck_assert(!stomp_session_alive(old));
	ck_assert_ptr_null(stomp_session_conn(old));
	buf_free(&A.out);
	buf_free(&A.in);
	peer_open(&A, 3);
	FEED(&A, "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:a9\n\n\0");
	ck_assert_uint_eq(stomp_broker_reply(H.b, old, NULL, 0, "application/json", S("{}")), 0);
	stomp_session_unref(old);
	expect_none(&A);
	expect_none(&B);
	/* origin NULL: nobody as well */
	ck_assert_uint_eq(stomp_broker_reply(H.b, NULL, NULL, 0, NULL, S("{}")), 0);
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.replies_unrouted, 4);
	/* an empty reply-to means the default destination */
	ck_assert_uint_eq(stomp_broker_reply(H.b, B.s, "", 0, NULL, S("{}")), 1);
	f = expect(&B, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "destination"), "jms.topic.vdsm_responses");
	expect_none(&A);
}
END_TEST

START_TEST(test_reply_between_sessions)
{
	/* A sends requests naming B's destination as reply-to: B never gets
	 * A's replies, A gets them only once it subscribes there itself */
	H.reply_inline = true;
	FEED(&B, "CONNECT\naccept-version:1.2\n\n\0SUBSCRIBE\ndestination:jms.topic.b\nid:x\n\n\0"
		 "SUBSCRIBE\ndestination:jms\nid:eavesdrop\n\n\0");
	expect(&B, STOMP_CONNECTED);
	FEED(&A, "CONNECT\naccept-version:1.2\n\n\0"
		 "SEND\ndestination:jms.topic.vdsm_requests\nreply-to:jms.topic.b\n\n{\"id\":7}\0");
	expect(&A, STOMP_CONNECTED);
	expect_none(&A);
	expect_none(&B);
	FEED(&A, "SUBSCRIBE\ndestination:jms.topic.b\nid:mine\n\n\0"
		 "SEND\ndestination:jms.topic.vdsm_requests\nreply-to:jms.topic.b\n\n{\"id\":8}\0");
	struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "destination"), "jms.topic.b");
	ck_assert_str_eq(hdr(f, "subscription"), "mine");
	ck_assert_mem_eq(f->body, "{\"id\":8}", 8);
	expect_none(&B);
	/* default reply destination when there is no reply-to */
	FEED(&B, "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:y\n\n\0");
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_requests\n\n{\"id\":9}\0");
	expect_none(&B);
	expect_none(&A);
}
END_TEST

/* Clients may not SEND to the events destination or to a reply destination
 * (the default, or one a request named in reply-to): ERROR, nothing
 * delivered, not even through a prefix; the connection stays. */
START_TEST(test_reserved_destinations)
{
	FEED(&B, "SUBSCRIBE\ndestination:jms.queue.events\nid:e\n\n\0"
		 "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:r\n\n\0"
		 "SUBSCRIBE\ndestination:jms.topic.mine\nid:m\n\n\0");
	FEED(&A, "SEND\ndestination:jms.queue.events\nreceipt:1\n\n{\"forged\":1}\0");
	struct stomp_frame *f = expect(&A, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), "destination is reserved");
	ck_assert_str_eq(hdr(f, "receipt-id"), "1");
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_responses\n\n{\"id\":1}\0");
	expect_error(&A, "destination is reserved");
	/* before B names it as reply-to, jms.topic.mine is an ordinary topic */
	FEED(&A, "SEND\ndestination:jms.topic.mine\n\nhello\0");
	f = expect(&B, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "subscription"), "m");
	FEED(&B, "SEND\ndestination:jms.topic.vdsm_requests\nreply-to:jms.topic.mine\n\n{}\0");
	FEED(&A, "SEND\ndestination:jms.topic.mine\n\n{\"id\":1}\0");
	expect_error(&A, "destination is reserved");
	/* forwarding into a reserved destination through its prefix: not delivered */
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_responses.x\n\nz\0"
		 "SEND\ndestination:jms.queue.events.x\n\nz\0");
	expect_error(&A, "Subscription not available");
	expect_error(&A, "Subscription not available");
	expect_none(&B);
	ck_assert(!stomp_session_closing(A.s));
	struct stomp_broker_stats st;
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.reserved_refused, 3);
	/* events reach the events destination's own subscribers, never a prefix */
	FEED(&A, "SUBSCRIBE\ndestination:jms\nid:p\n\n\0SUBSCRIBE\ndestination:jms.queue\nid:q\n\n\0");
	ck_assert_uint_eq(stomp_broker_publish(H.b, "jms.queue.events", NULL, S("{}")), 1);
	f = expect(&B, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "subscription"), "e");
	expect_none(&A);
}
END_TEST

/* STOMP 1.2: MESSAGE frames of client / client-individual subscriptions
 * carry ack:<id>, auto ones do not; ACK / NACK of those ids are accepted. */
START_TEST(test_ack_header)
{
	FEED(&A, "SUBSCRIBE\ndestination:t.c\nid:c\nack:client\n\n\0"
		 "SUBSCRIBE\ndestination:t.i\nid:i\nack:client-individual\n\n\0"
		 "SUBSCRIBE\ndestination:t.a\nid:a\nack:auto\n\n\0"
		 "SUBSCRIBE\ndestination:t.n\nid:n\n\n\0");
	const char *dests[] = { "t.c", "t.i", "t.a", "t.n" };
	for (int i = 0; i < 4; i++) {
		ck_assert_uint_eq(stomp_broker_publish(H.b, dests[i], NULL, S("x")), 1);
		struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
		const char *mid = hdr(f, "message-id");
		ck_assert_ptr_nonnull(mid);
		if (i < 2) {
			ck_assert_ptr_nonnull(hdr(f, "ack"));
			ck_assert_str_eq(hdr(f, "ack"), mid);
			char ack[128];
			int n = snprintf(ack, sizeof(ack), "%s\nid:%s\nreceipt:k%d\n\n",
					 i ? "NACK" : "ACK", mid, i);
			ck_assert_int_eq(feed(&A, ack, (size_t)n + 1), n + 1);
			char rid[16];
			snprintf(rid, sizeof(rid), "k%d", i);
			expect_receipt(&A, rid);
		} else {
			ck_assert_ptr_null(hdr(f, "ack"));
		}
	}
	expect_none(&A);
	ck_assert(!stomp_session_closing(A.s));
}
END_TEST


START_TEST(test_prefix_forwarding)
{
	FEED(&B, "SUBSCRIBE\ndestination:jms\nid:1\n\n\0"
		 "SUBSCRIBE\ndestination:jms.topic\nid:2\n\n\0"
		 "SUBSCRIBE\ndestination:jms.top\nid:3\n\n\0"
		 "SUBSCRIBE\ndestination:jms.topic.x\nid:4\n\n\0"
		 "SUBSCRIBE\ndestination:jms.topic.x.y\nid:5\n\n\0"
		 "SUBSCRIBE\ndestination:other\nid:6\n\n\0");
	expect_none(&B);
	H.noutput = 0;
	FEED(&A, "SEND\ndestination:jms.topic.x\ncontent-type:text/plain\ncustom:v\\c1\n"
		 "receipt:r\nmessage-id:fake\nsubscription:fake\ntransaction:t\n"
		 "content-length:2\n\nhi\0");
	expect_receipt(&A, "r");
	expect_none(&A);
	const char *subs[] = { "1", "2", "4" };
	for (int i = 0; i < 3; i++) {
		struct stomp_frame *f = expect(&B, STOMP_MESSAGE);
		ck_assert_str_eq(f->hdr[0].value, "jms.topic.x");
		ck_assert_str_eq(f->hdr[1].name, "content-type");
		ck_assert_str_eq(f->hdr[1].value, "text/plain");
		ck_assert_str_eq(f->hdr[2].name, "subscription");
		ck_assert_str_eq(f->hdr[2].value, subs[i]);
		ck_assert_str_eq(f->hdr[3].name, "message-id");
		ck_assert_str_eq(f->hdr[4].name, "content-length");
		ck_assert_str_eq(f->hdr[5].name, "custom");    /* the SEND's own header */
		ck_assert_str_eq(f->hdr[5].value, "v:1");
		ck_assert_uint_eq(f->nhdr, 6);                 /* no receipt, no duplicates */
		ck_assert_uint_eq(f->body_len, 2);
	}
	expect_none(&B);
	ck_assert_int_eq(H.noutput, 3);
	ck_assert_ptr_eq(H.output_conn, &B.conn_tag);
	/* message ids differ */
	FEED(&A, "SEND\ndestination:other\n\n\0SEND\ndestination:other\n\n\0");
	struct stomp_frame *f = expect(&B, STOMP_MESSAGE);
	char id1[32];
	snprintf(id1, sizeof(id1), "%s", hdr(f, "message-id"));
	f = expect(&B, STOMP_MESSAGE);
	ck_assert_str_ne(id1, hdr(f, "message-id"));
	/* no match at all */
	FEED(&A, "SEND\ndestination:jm\n\n\0SEND\ndestination:jmsx.topic\nreceipt:q\n\n\0");
	expect_error(&A, "Subscription not available");
	f = expect(&A, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "receipt-id"), "q");
	expect_none(&A);
	expect_none(&B);
}
END_TEST

/* ---- throughput shape ---------------------------------------------------- */

START_TEST(test_pipelined_sends)
{
	H.reply_inline = true;
	FEED(&A, "CONNECT\naccept-version:1.2\n\n\0"
		 "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:1\n\n\0");
	expect(&A, STOMP_CONNECTED);
	struct vd_buf in = VD_BUF_INIT;
	for (int i = 0; i < 1000; i++)
		buf_printf(&in, "SEND\ndestination:jms.topic.vdsm_requests\ncontent-length:%d\n\n"
				"{\"id\":%04d}%c\n", 11, i, '\0');
	ck_assert_int_eq(feed(&A, in.data, in.len), (long)in.len);
	buf_free(&in);
	ck_assert_int_eq(H.nreq, 1000);
	for (int i = 0; i < 1000; i++) {
		struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
		char want[32];
		snprintf(want, sizeof(want), "{\"id\":%04d}", i);
		ck_assert_uint_eq(f->body_len, 11);
		ck_assert_mem_eq(f->body, want, 11);
	}
	expect_none(&A);
	ck_assert_int_eq(H.noutput, 0);  /* own replies during feed: no callback */
	struct stomp_broker_stats st;
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.frames_in, 1002);
	ck_assert_uint_eq(st.frames_out, 1001);
}
END_TEST

START_TEST(test_split_feed)
{
	/* a frame arriving in pieces across feeds */
	const char in[] = "\r\nSUBSCRIBE\r\ndestination:q\r\nid:1\r\n\r\n\0\n"
			  "SEND\ndestination:q\ncontent-length:3\n\na\0b\0";
	for (size_t i = 0; i < sizeof(in) - 1; i++)
		ck_assert_int_ge(feed(&A, in + i, 1), 0);
	ck_assert_uint_eq(A.in.len, 0);
	struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
	ck_assert_uint_eq(f->body_len, 3);
	ck_assert_mem_eq(f->body, "a\0b", 3);
	expect_none(&A);
}
END_TEST

START_TEST(test_publish_and_drop)
{
	teardown();
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	setup_cfg(200, lim);
	FEED(&A, "SUBSCRIBE\ndestination:jms.queue.events\nid:e\n\n\0");
	FEED(&B, "SUBSCRIBE\ndestination:jms.queue.events\nid:e\n\n\0");
	ck_assert_uint_eq(stomp_broker_publish(H.b, "jms.queue.events", "application/json",
					       S("{\"ev\":1}")), 2);
	ck_assert_uint_eq(stomp_broker_publish(H.b, "jms.queue.nothing", NULL, S("x")), 0);
	/* A does not flush: once over max_output it loses events; B reads */
	for (int i = 0; i < 10; i++) {
		stomp_broker_publish(H.b, "jms.queue.events", "application/json", S("{\"ev\":2}"));
		while (next(&B))
			;
		buf_reset(&B.out);
		B.rpos = 0;
	}
	ck_assert_uint_gt(stomp_session_dropped(A.s), 0);
	ck_assert_uint_eq(stomp_session_dropped(B.s), 0);
	struct stomp_broker_stats st;
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.messages_dropped, stomp_session_dropped(A.s));
	ck_assert_uint_le(A.out.len, 200 + 200);
	/* what A got is well-formed */
	struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "destination"), "jms.queue.events");
	ck_assert_str_eq(hdr(f, "content-type"), "application/json");
}
END_TEST

START_TEST(test_forward_drop)
{
	teardown();
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	setup_cfg(200, lim);
	FEED(&B, "SUBSCRIBE\ndestination:t\nid:1\n\n\0");
	/* B never reads: forwarded messages are dropped once it is over */
	for (int i = 0; i < 10; i++)
		FEED(&A, "SEND\ndestination:t\n\n0123456789012345678901234567890123456789\0");
	expect_none(&A);  /* a drop is not "Subscription not available" */
	ck_assert_uint_gt(stomp_session_dropped(B.s), 0);
	ck_assert_uint_le(B.out.len, 400);
}
END_TEST

/* Issue 27: a SEND's fan-out is charged before anything is queued; it fits
 * the host's budget whole or the sender gets ERROR and nobody gets it. */
START_TEST(test_forward_budget)
{
	static struct peer p[3];
	for (int i = 0; i < 3; i++) {
		peer_open(&p[i], 10 + i);
		FEED(&p[i], "SUBSCRIBE\ndestination:t\nid:1\n\n\0");
	}
	char send[2048];
	int n = snprintf(send, sizeof send, "SEND\ndestination:t\ncontent-length:1000\n\n");
	memset(send + n, 'x', 1000);
	send[n + 1000] = '\0';
	size_t slen = (size_t)n + 1001;
	/* fits: each of the three gets it, the host saw all three at once */
	H.budget_on = true;
	H.budget_left = 3 * 1400;
	ck_assert_int_eq(feed(&A, send, slen), (long)slen);
	ck_assert_int_eq(H.nadmit_fanout, 1);
	ck_assert_uint_eq(H.fanout_n, 3);
	ck_assert_uint_ge(H.fanout_bytes, 3 * 1000);
	ck_assert_uint_le(H.fanout_bytes, 3 * 1400);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(expect(&p[i], STOMP_MESSAGE)->body_len, 1000);
		expect_none(&p[i]);
	}
	expect_none(&A);
	/* does not fit whole: nobody gets it, the sender gets ERROR and stays */
	H.budget_left = 2 * 1400;
	ck_assert_int_eq(feed(&A, send, slen), (long)slen);
	struct stomp_frame *f = expect(&A, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), "memory budget exceeded");
	for (int i = 0; i < 3; i++)
		expect_none(&p[i]);
	struct stomp_broker_stats st;
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.fanout_refused, 1);
	ck_assert_uint_eq(st.budget_dropped, 0);
	/* events: each subscriber is charged before its copy is queued; those
	 * the budget cannot take lose it (counted) */
	for (int i = 0; i < 3; i++)
		FEED(&p[i], "SUBSCRIBE\ndestination:ev\nid:2\n\n\0");
	H.budget_left = 1400;
	char body[1000];
	memset(body, 'e', sizeof body);
	ck_assert_uint_eq(stomp_broker_publish(H.b, "ev", NULL, body, sizeof body), 1);
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.budget_dropped, 2);
	ck_assert_uint_eq(expect(&p[0], STOMP_MESSAGE)->body_len, 1000);
	expect_none(&p[1]);
	expect_none(&p[2]);
	ck_assert_uint_eq(stomp_session_dropped(p[1].s), 1);
	for (int i = 0; i < 3; i++)
		peer_close(&p[i]);
}
END_TEST

/* pause: the feed stops after the frame it was asked after; the rest is
 * left to the caller, and handled by the next feed. */
START_TEST(test_pause_stops_the_feed)
{
	const char one[] = "SUBSCRIBE\ndestination:a\nid:1\nreceipt:r1\n\n";
	const char two[] = "SUBSCRIBE\ndestination:b\nid:2\nreceipt:r2\n\n";
	char in[256];
	size_t n1 = sizeof(one), n2 = sizeof(two);   /* with their NULs */
	memcpy(in, one, n1);
	memcpy(in + n1, two, n2);
	H.pause_on = true;
	ck_assert_int_eq(stomp_session_feed(A.s, in, n1 + n2), (long)n1);
	ck_assert_str_eq(hdr(expect(&A, STOMP_RECEIPT), "receipt-id"), "r1");
	expect_none(&A);
	ck_assert_int_eq(stomp_session_feed(A.s, in + n1, n2), (long)n2);
	ck_assert_str_eq(hdr(expect(&A, STOMP_RECEIPT), "receipt-id"), "r2");
	H.pause_on = false;
}
END_TEST

START_TEST(test_many_sessions)
{
	/* many sessions on one destination; the destination table grows */
	enum { N = 300 };
	static struct peer p[N];
	for (int i = 0; i < N; i++) {
		peer_open(&p[i], 100 + i);
		char sub[96];
		int n = snprintf(sub, sizeof(sub), "SUBSCRIBE\ndestination:d.%d\nid:1\n\n%c"
				 "SUBSCRIBE\ndestination:all\nid:2\n\n", i, '\0');
		feed(&p[i], sub, (size_t)n + 1);
	}
	ck_assert_uint_eq(stomp_broker_publish(H.b, "all", NULL, S("x")), N);
	for (int i = 0; i < N; i++) {
		char d[16];
		snprintf(d, sizeof(d), "d.%d", i);
		ck_assert_uint_eq(stomp_broker_publish(H.b, d, NULL, S("y")), 1);
	}
	for (int i = 0; i < N; i += 2)
		peer_close(&p[i]);
	ck_assert_uint_eq(stomp_broker_publish(H.b, "all", NULL, S("x")), N / 2);
	ck_assert_uint_eq(stomp_broker_publish(H.b, "d.0", NULL, S("y")), 0);
	for (int i = 1; i < N; i += 2)
		peer_close(&p[i]);
	struct stomp_broker_stats st;
	stomp_broker_stats(H.b, &st);
	ck_assert_uint_eq(st.subscriptions, 0);
	ck_assert_uint_eq(st.sessions, 2);
}
END_TEST

START_TEST(test_escaped_names)
{
	/* destination and id with characters that need escaping on the wire */
	FEED(&A, "SUBSCRIBE\ndestination:q\\c1\\\\x\nid:i\\nd\n\n\0");
	expect_none(&A);
	ck_assert_uint_eq(stomp_broker_publish(H.b, "q:1\\x", "a:b", S("e")), 1);
	struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "destination"), "q:1\\x");
	ck_assert_str_eq(hdr(f, "subscription"), "i\nd");
	ck_assert_str_eq(hdr(f, "content-type"), "a:b");
	/* forwarded to a prefix: the full destination is escaped too */
	FEED(&B, "SEND\ndestination:q\\c1\\\\x.sub\\c\n\nz\0");
	f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "destination"), "q:1\\x.sub:");
	ck_assert_str_eq(hdr(f, "subscription"), "i\nd");
	expect_none(&B);
	ck_assert_uint_eq(stomp_broker_reply(H.b, A.s, S("q:1\\x"), NULL, S("r")), 1);
	f = expect(&A, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "destination"), "q:1\\x");
	ck_assert_str_eq(hdr(f, "subscription"), "i\nd");
}
END_TEST

START_TEST(test_nested_feed)
{
	/* a host may feed another session from inside a callback */
	H.nested = &B;
	FEED(&A, "SEND\ndestination:jms.topic.vdsm_requests\nx:1\n\n{}\0"
		 "SEND\ndestination:n\nreceipt:after\n\nhello\0");
	ck_assert_int_eq(H.nreq, 1);
	expect_receipt(&B, "nr");
	struct stomp_frame *f = expect(&B, STOMP_MESSAGE);
	ck_assert_str_eq(hdr(f, "subscription"), "n1");
	expect_receipt(&A, "after");
	expect_none(&A);
}
END_TEST

START_TEST(test_too_many_subscriptions)
{
	struct vd_buf in = VD_BUF_INIT;
	for (int i = 0; i < STOMP_MAX_SUBSCRIPTIONS; i++)
		buf_printf(&in, "SUBSCRIBE\ndestination:d%d\nid:%d\n\n%c", i % 7, i, '\0');
	ck_assert_int_eq(feed(&A, in.data, in.len), (long)in.len);
	buf_free(&in);
	expect_none(&A);
	FEED(&A, "SUBSCRIBE\ndestination:x\nid:one-more\n\n\0");
	expect_error(&A, "Too many subscriptions");
	ck_assert(!stomp_session_closing(A.s));
	/* after an UNSUBSCRIBE there is room again */
	FEED(&A, "UNSUBSCRIBE\nid:5\n\n\0SUBSCRIBE\ndestination:x\nid:one-more\n\n\0");
	expect_none(&A);
	ck_assert_uint_eq(stomp_broker_publish(H.b, "d3", NULL, S("x")),
			  (STOMP_MAX_SUBSCRIPTIONS + 3) / 7);
}
END_TEST

/* The write_direct hook: a large reply to a session with nothing queued is
 * offered to the host as head/body/NUL pieces; whatever the host did not
 * write (nothing, part of the head, part of the body, all but the NUL,
 * everything) ends up in the output buffer, so the bytes on the wire are
 * always one whole MESSAGE frame. */
static struct vd_buf wd_wire;
static size_t wd_limit;
static int wd_calls;

static size_t wd_hook(void *hp, struct stomp_session *s, void *conn,
		      const struct stomp_iov *iov, unsigned n)
{
	ck_assert_ptr_eq(conn, &A.conn_tag);
	wd_calls++;
	size_t done = 0;
	for (unsigned i = 0; i < n && done < wd_limit; i++) {
		size_t take = VD_MIN(iov[i].len, wd_limit - done);
		buf_append(&wd_wire, iov[i].base, take);
		done += take;
	}
	return done;
}

START_TEST(test_write_direct)
{
	size_t len = STOMP_DIRECT_MIN + 1000;
	char *body = malloc(len);
	for (size_t i = 0; i < len; i++)
		body[i] = (char)('a' + i % 26);
	stomp_broker_set_write_direct(H.b, wd_hook);
	ck_assert_int_gt(FEED(&A, "SUBSCRIBE\ndestination:r\nid:s1\n\n\0"), 0);
	/* the body whole, or in three pieces (stomp_broker_reply_iov: a
	 * borrowed result between the envelope's head and tail), the limits
	 * then also falling inside the first and the last piece */
	const struct stomp_iov three[3] = { { body, 150 }, { body + 150, len - 160 },
					    { body + len - 10, 10 } };
	const size_t limits[] = { 0, 5, 100, 200, 250, 70000, len + 145, len + 150,
				  (size_t)-1 };
	for (size_t k = 0; k < 2 * VD_ARRAY_SIZE(limits); k++) {
		bool pieces = k >= VD_ARRAY_SIZE(limits);
		wd_limit = limits[k % VD_ARRAY_SIZE(limits)];
		wd_calls = 0;
		buf_reset(&wd_wire);
		A.out.len = A.rpos = 0;
		ck_assert_uint_eq(pieces ? stomp_broker_reply_iov(H.b, A.s, "r", 1, "application/json",
								  three, 3)
				  : stomp_broker_reply(H.b, A.s, "r", 1, "application/json", body, len),
				  1);
		ck_assert_int_eq(wd_calls, 1);
		buf_append(&wd_wire, A.out.data, A.out.len);   /* wire, then the buffered rest */
		A.out.len = 0;
		buf_append(&A.out, wd_wire.data, wd_wire.len);
		struct stomp_frame *f = expect(&A, STOMP_MESSAGE);
		ck_assert_str_eq(hdr(f, "destination"), "r");
		ck_assert_str_eq(hdr(f, "subscription"), "s1");
		ck_assert_uint_eq(f->body_len, len);
		ck_assert(memcmp(f->body, body, len) == 0);
		expect_none(&A);
	}
	/* something already queued, or a small body: buffered as before */
	A.out.len = A.rpos = 0;
	wd_calls = 0;
	buf_append(&A.out, "\n", 1);
	stomp_broker_reply(H.b, A.s, "r", 1, NULL, body, len);
	stomp_broker_reply(H.b, A.s, "r", 1, NULL, body, 100);
	A.out.len = A.rpos = 0;
	stomp_broker_reply(H.b, A.s, "r", 1, NULL, body, 100);
	ck_assert_int_eq(wd_calls, 0);
	buf_free(&wd_wire);
	free(body);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stomp_routing");
	TCase *tc = tcase_create("routing");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_request_destinations);
	tcase_add_test(tc, test_reply_routing);
	tcase_add_test(tc, test_reply_between_sessions);
	tcase_add_test(tc, test_reserved_destinations);
	tcase_add_test(tc, test_ack_header);
	tcase_add_test(tc, test_prefix_forwarding);
	tcase_add_test(tc, test_pipelined_sends);
	tcase_add_test(tc, test_split_feed);
	tcase_add_test(tc, test_publish_and_drop);
	tcase_add_test(tc, test_many_sessions);
	tcase_add_test(tc, test_escaped_names);
	tcase_add_test(tc, test_nested_feed);
	tcase_add_test(tc, test_too_many_subscriptions);
	tcase_add_test(tc, test_forward_drop);
	tcase_add_test(tc, test_forward_budget);
	tcase_add_test(tc, test_pause_stops_the_feed);
	tcase_add_test(tc, test_write_direct);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
