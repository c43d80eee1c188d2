/* tests/unit/test_stomp_client.c - the STOMP client session: exact frames
 * it writes, and full round trips against the real broker session (bytes
 * shuttled between the two in memory). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "stomp/stomp.h"
#include "check_main.h"

#define S(lit) lit, sizeof(lit) - 1

START_TEST(test_frames_written)
{
	struct vd_buf out = VD_BUF_INIT;
	struct stomp_client c;
	stomp_client_init(&c, &out);
	stomp_client_connect(&c, "[::1]", NULL, NULL, 0, 15000);
	const char conn[] = "CONNECT\naccept-version:1.2\nhost:[::1]\nheart-beat:0,15000\n"
				  "vdsmd-framing:packed\n\n";
	ck_assert_uint_eq(out.len, sizeof(conn));
	ck_assert_mem_eq(out.data, conn, sizeof(conn));
	buf_reset(&out);

	stomp_client_subscribe(&c, "jms.topic.a:b", "sub-1", NULL);
	const char sub[] = "SUBSCRIBE\ndestination:jms.topic.a\\cb\nid:sub-1\nack:auto\n\n";
	ck_assert_uint_eq(out.len, sizeof(sub));
	ck_assert_mem_eq(out.data, sub, sizeof(sub));
	buf_reset(&out);

	struct stomp_header extra[] = { { "ovirtCorrelationId", 18, "f\n1", 3 } };
	stomp_client_send(&c, "jms.topic.vdsm_requests", "jms.topic.me", "application/json",
			  extra, 1, "{}", 2);
	const char send[] = "SEND\ndestination:jms.topic.vdsm_requests\ncontent-type:application/json\n"
			    "reply-to:jms.topic.me\novirtCorrelationId:f\\n1\ncontent-length:2\n\n{}";
	ck_assert_uint_eq(out.len, sizeof(send));
	ck_assert_mem_eq(out.data, send, sizeof(send));
	buf_reset(&out);

	/* many extra headers, no reply-to / content-type, no body */
	struct stomp_header many[20];
	for (int i = 0; i < 20; i++)
		many[i] = (struct stomp_header){ "x", 1, "y", 1 };
	stomp_client_send(&c, "d", NULL, NULL, many, 20, NULL, 0);
	struct stomp_parser p;
	struct stomp_header hdr[32];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 32 };
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	stomp_parser_init(&p);
	ck_assert_int_eq(stomp_parse(&p, &lim, out.data, out.len, &f, NULL), (long)out.len);
	ck_assert_uint_eq(f.nhdr, 22);
	ck_assert_str_eq(stomp_frame_get(&f, "content-length", NULL), "0");
	buf_reset(&out);

	stomp_client_ack(&c, "m1");
	stomp_client_disconnect(&c, "bye");
	stomp_client_disconnect(&c, NULL);
	const char tail[] = "ACK\nid:m1\n\n\0DISCONNECT\nreceipt:bye\n\n\0DISCONNECT\n\n";
	ck_assert_uint_eq(out.len, sizeof(tail));
	ck_assert_mem_eq(out.data, tail, sizeof(tail));
	buf_free(&out);
}
END_TEST

/* ---- against the broker -------------------------------------------------- */

struct rig {
	struct stomp_broker *b;
	struct stomp_session *s;
	struct vd_buf c2s, s2c;   /* client->server and server->client bytes */
	struct stomp_client c;
	int nreq;
};

static void r_request(void *hp, struct stomp_session *s, const char *body, size_t len,
		      const char *ct, size_t ctlen, const char *rt, size_t rtlen,
		      const char *flow, size_t flen)
{
	struct rig *r = hp;
	r->nreq++;
	ck_assert_uint_eq(flen, 3);
	ck_assert_mem_eq(flow, "f-1", 3);
	/* echo the request back as the "response" */
	stomp_broker_reply(r->b, s, rt, rtlen, "application/json", body, len);
}

static const struct stomp_broker_ops rig_ops = { .request = r_request };

static void rig_open(struct rig *r)
{
	memset(r, 0, sizeof(*r));
	struct stomp_broker_config cfg = { STOMP_LIMITS_DEFAULT, 0, "vdsmd/t" };
	r->b = stomp_broker_new(&cfg, &rig_ops, r);
	r->s = stomp_session_new(r->b, &r->s2c, NULL);
	stomp_client_init(&r->c, &r->c2s);
}

static void rig_close(struct rig *r)
{
	stomp_session_free(r->s);
	stomp_broker_free(r->b);
	buf_free(&r->c2s);
	buf_free(&r->s2c);
}

/* Client output to the server session (in odd-sized chunks). */
static void pump(struct rig *r)
{
	struct vd_buf in = VD_BUF_INIT;
	size_t off = 0;
	while (off < r->c2s.len) {
		size_t n = VD_MIN((size_t)7, r->c2s.len - off);
		buf_append(&in, r->c2s.data + off, n);
		off += n;
		long k = stomp_session_feed(r->s, in.data, in.len);
		ck_assert_int_ge(k, 0);
		buf_consume(&in, (size_t)k);
	}
	ck_assert_uint_eq(in.len, 0);
	buf_free(&in);
	buf_reset(&r->c2s);
}

/* Next frame the client got; the frame's slices stay valid until the next
 * call (bytes are consumed lazily). */
static size_t pending_consume;

static struct stomp_frame *recv_frame(struct rig *r, struct stomp_frame *f)
{
	buf_consume(&r->s2c, pending_consume);
	pending_consume = 0;
	for (;;) {
		const char *why = NULL;
		f->hdr = NULL;
		long k = stomp_client_feed(&r->c, r->s2c.data, r->s2c.len, f, &why);
		if (k == VD_AGAIN)
			return NULL;
		ck_assert_int_gt(k, 0);
		if (f->cmd == STOMP_NONE) {
			buf_consume(&r->s2c, (size_t)k);
			continue;
		}
		pending_consume = (size_t)k;
		return f;
	}
}

START_TEST(test_round_trip)
{
	struct rig r;
	struct stomp_frame f;
	rig_open(&r);
	pending_consume = 0;
	stomp_client_connect(&r.c, "localhost", NULL, NULL, 0, 500);
	stomp_client_subscribe(&r.c, "jms.topic.me", "s1", NULL);
	pump(&r);
	ck_assert_ptr_nonnull(recv_frame(&r, &f));
	ck_assert_int_eq(f.cmd, STOMP_CONNECTED);
	ck_assert(r.c.connected);
	/* asked 0,500: the server sends every 1000, client expects 1000 */
	ck_assert_str_eq(stomp_frame_get(&f, "heart-beat", NULL), "1000,0");
	ck_assert_uint_eq(r.c.hb_recv_ms, 1000);
	ck_assert_uint_eq(r.c.hb_send_ms, 0);
	ck_assert_ptr_null(recv_frame(&r, &f));

	struct stomp_header extra[] = { { "ovirtCorrelationId", 18, "f-1", 3 } };
	for (int i = 0; i < 50; i++) {
		char body[64];
		int n = snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":%d}", i);
		stomp_client_send(&r.c, "jms.topic.vdsm_requests", "jms.topic.me",
				  "application/json", extra, 1, body, (size_t)n);
	}
	pump(&r);
	ck_assert_int_eq(r.nreq, 50);
	for (int i = 0; i < 50; i++) {
		char body[64];
		int n = snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":%d}", i);
		ck_assert_ptr_nonnull(recv_frame(&r, &f));
		ck_assert_int_eq(f.cmd, STOMP_MESSAGE);
		ck_assert_str_eq(stomp_frame_get(&f, "subscription", NULL), "s1");
		ck_assert_str_eq(stomp_frame_get(&f, "destination", NULL), "jms.topic.me");
		ck_assert_uint_eq(f.body_len, (size_t)n);
		ck_assert_mem_eq(f.body, body, (size_t)n);
	}
	ck_assert_ptr_null(recv_frame(&r, &f));

	/* an ERROR and a RECEIPT */
	stomp_client_send(&r.c, "nobody.listens", NULL, NULL, NULL, 0, "x", 1);
	stomp_client_disconnect(&r.c, "bye");
	pump(&r);
	ck_assert_ptr_nonnull(recv_frame(&r, &f));
	ck_assert_int_eq(f.cmd, STOMP_ERROR);
	ck_assert_str_eq(stomp_frame_get(&f, "message", NULL), "Subscription not available");
	ck_assert_ptr_nonnull(recv_frame(&r, &f));
	ck_assert_int_eq(f.cmd, STOMP_RECEIPT);
	ck_assert_str_eq(stomp_frame_get(&f, "receipt-id", NULL), "bye");
	ck_assert(stomp_session_closing(r.s));
	rig_close(&r);
}
END_TEST

START_TEST(test_client_heartbeat_negotiation)
{
	struct rig r;
	struct stomp_frame f;
	rig_open(&r);
	pending_consume = 0;
	stomp_client_connect(&r.c, NULL, NULL, NULL, 6000, 5000);
	pump(&r);
	ck_assert_ptr_nonnull(recv_frame(&r, &f));
	ck_assert_str_eq(stomp_frame_get(&f, "heart-beat", NULL), "5000,6000");
	/* server sends every 5000, wants every 6000 */
	ck_assert_uint_eq(r.c.hb_send_ms, 6000);
	ck_assert_uint_eq(r.c.hb_recv_ms, 5000);
	rig_close(&r);
}
END_TEST

START_TEST(test_client_rejects)
{
	struct vd_buf out = VD_BUF_INIT;
	struct stomp_client c;
	struct stomp_frame f = { 0 };
	const char *why = NULL;
	stomp_client_init(&c, &out);
	char send[] = "SEND\ndestination:x\n\n\0";
	ck_assert_int_eq(stomp_client_feed(&c, send, sizeof(send) - 1, &f, &why), VD_EPROTO);
	ck_assert_ptr_nonnull(why);
	stomp_client_init(&c, &out);
	char bad[] = "MESSAGE\na:\\q\n\n\0";
	f.hdr = NULL;
	ck_assert_int_eq(stomp_client_feed(&c, bad, sizeof(bad) - 1, &f, &why), VD_EPROTO);
	stomp_client_init(&c, &out);
	char hb[] = "\n\n";
	f.hdr = NULL;
	ck_assert_int_eq(stomp_client_feed(&c, hb, 2, &f, &why), 2);
	ck_assert_int_eq(f.cmd, STOMP_NONE);
	char conn[] = "CONNECTED\nversion:1.2\nheart-beat:x\n\n";
	f.hdr = NULL;
	c.hb_want_send = c.hb_want_recv = 1000;
	ck_assert_int_eq(stomp_client_feed(&c, conn, sizeof(conn), &f, &why), (long)sizeof(conn));
	ck_assert(c.connected);
	ck_assert_uint_eq(c.hb_send_ms, 0);
	ck_assert_uint_eq(c.hb_recv_ms, 0);
	char part[] = "RECEIPT\nreceipt-id:1\n";
	ck_assert_int_eq(stomp_client_feed(&c, part, sizeof(part) - 1, &f, &why), VD_AGAIN);
	buf_free(&out);
}
END_TEST

/* The server's heart-beat header is parsed strictly: an out-of-range or
 * malformed pair means no heart-beats (sscanf("%u") overflowed: UB). */
START_TEST(test_client_heartbeat_header_bounds)
{
	static const struct { const char *hb; unsigned send, recv; } cases[] = {
		{ "5000,6000", 6000, 5000 },
		{ "0,0", 0, 0 },
		{ "99999999999999999999,6000", 0, 0 },
		{ "5000,99999999999", 0, 0 },
		{ "5000", 0, 0 },
		{ "5000,", 0, 0 },
		{ ",6000", 0, 0 },
		{ "-1,6000", 0, 0 },
		{ "5000,6000x", 0, 0 },
		{ "864000000,864000000", 864000000, 864000000 },
		{ "864000001,1000", 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct vd_buf out = VD_BUF_INIT;
		struct stomp_client c;
		struct stomp_frame f = { 0 };
		const char *why = NULL;
		stomp_client_init(&c, &out);
		c.hb_want_send = c.hb_want_recv = 1000;
		char conn[128];
		int n = snprintf(conn, sizeof(conn), "CONNECTED\nversion:1.2\nheart-beat:%s\n\n", cases[i].hb);
		ck_assert_int_eq(stomp_client_feed(&c, conn, (size_t)n + 1, &f, &why), n + 1);
		ck_assert(c.connected);
		ck_assert_msg(c.hb_send_ms == cases[i].send && c.hb_recv_ms == cases[i].recv,
			      "%s: send %u recv %u", cases[i].hb, c.hb_send_ms, c.hb_recv_ms);
		buf_free(&out);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stomp_client");
	TCase *tc = tcase_create("client");
	tcase_add_test(tc, test_frames_written);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_client_heartbeat_negotiation);
	tcase_add_test(tc, test_client_rejects);
	tcase_add_test(tc, test_client_heartbeat_header_bounds);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
