/* tests/unit/stomp_test.h - shared fixture of the STOMP broker unit tests
 * (test_stomp_broker.c, test_stomp_routing.c): a fake host recording what the
 * broker hands it, two peers (A, B) with their own sessions and a reader for
 * what each was sent, and the expect_* helpers.  Header-only (static
 * functions): each test program includes it once; the Makefile would link a
 * tests/unit/<name>.c helper into every unit test. */
#ifndef VD_TESTS_UNIT_STOMP_TEST_H
#define VD_TESTS_UNIT_STOMP_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "stomp/stomp.h"
#include "check_main.h"

#define S(lit) lit, sizeof(lit) - 1

/* ---- a fake host --------------------------------------------------------- */

struct host {
	struct stomp_broker *b;
	int nreq;
	struct stomp_session *req_s;
	char body[256], ct[64], rt[64], flow[64];
	size_t body_len;
	bool has_ct, has_rt, has_flow;
	bool reply_inline;   /* answer each request from inside the callback */
	struct peer *nested; /* feed this peer a SUBSCRIBE from inside the callback */
	int noutput;
	void *output_conn;
	int nhb;
	unsigned hb_send, hb_recv;
	int nframing;
	bool packed;
	/* a memory budget (budget_on): what admit / admit_fanout may take */
	bool budget_on;
	size_t budget_left;
	int nadmit_fanout;
	size_t fanout_n, fanout_bytes;
	bool pause_on;       /* pause: the feed stops after each frame */
};

static void copy_opt(char *dst, size_t cap, bool *has, const char *v, size_t n)
{
	*has = v != NULL;
	dst[0] = '\0';
	if (v) {
		ck_assert_uint_lt(n, cap);
		memcpy(dst, v, n);
		dst[n] = '\0';
	}
}

struct peer;
static void nested_feed(struct peer *p);

static void h_request(void *hp, struct stomp_session *s, const char *body, size_t len,
		      const char *ct, size_t ctlen, const char *rt, size_t rtlen,
		      const char *flow, size_t flen)
{
	struct host *h = hp;
	h->nreq++;
	h->req_s = s;
	h->body_len = len;
	memcpy(h->body, body, VD_MIN(len, sizeof(h->body)));
	copy_opt(h->ct, sizeof(h->ct), &h->has_ct, ct, ctlen);
	copy_opt(h->rt, sizeof(h->rt), &h->has_rt, rt, rtlen);
	copy_opt(h->flow, sizeof(h->flow), &h->has_flow, flow, flen);
	if (h->reply_inline)
		stomp_broker_reply(h->b, s, rt, rtlen, "application/json", body, len);
	if (h->nested)
		nested_feed(h->nested);
}

static void h_output(void *hp, struct stomp_session *s, void *conn)
{
	struct host *h = hp;
	h->noutput++;
	h->output_conn = conn;
}

static void h_heartbeat(void *hp, struct stomp_session *s, void *conn, unsigned send_ms,
			unsigned recv_ms)
{
	struct host *h = hp;
	h->nhb++;
	h->hb_send = send_ms;
	h->hb_recv = recv_ms;
}

static void h_framing(void *hp, struct stomp_session *s, void *conn, bool packed)
{
	struct host *h = hp;
	h->nframing++;
	h->packed = packed;
}

static bool h_admit(void *hp, struct stomp_session *s, void *conn, size_t bytes)
{
	struct host *h = hp;
	if (!h->budget_on)
		return true;
	if (bytes > h->budget_left)
		return false;
	h->budget_left -= bytes;
	return true;
}

static bool h_admit_fanout(void *hp, struct stomp_session *origin, size_t n, size_t bytes)
{
	struct host *h = hp;
	h->nadmit_fanout++;
	h->fanout_n = n;
	h->fanout_bytes = bytes;
	return !h->budget_on || bytes <= h->budget_left;
}

static bool h_pause(void *hp, struct stomp_session *s, void *conn)
{
	return ((struct host *)hp)->pause_on;
}

static const struct stomp_broker_ops ops = {
	.request = h_request, .output = h_output, .heartbeat = h_heartbeat,
	.framing = h_framing, .admit = h_admit, .admit_fanout = h_admit_fanout,
	.pause = h_pause,
};

/* A connection: input and output buffers and a reader for what was sent. */
struct peer {
	struct stomp_session *s;
	struct vd_buf in, out;
	size_t rpos;
	struct stomp_parser p;
	struct stomp_header hdr[64];
	struct stomp_frame f;
	int conn_tag;
};

static struct host H;
static struct peer A, B;

static void peer_open(struct peer *p, int tag)
{
	memset(p, 0, sizeof(*p));
	p->conn_tag = tag;
	p->s = stomp_session_new(H.b, &p->out, &p->conn_tag);
	stomp_parser_init(&p->p);
	p->f.hdr = p->hdr;
	p->f.hdr_cap = 64;
}

static void peer_close(struct peer *p)
{
	if (p->s)
		stomp_session_free(p->s);
	p->s = NULL;
	buf_free(&p->in);
	buf_free(&p->out);
}

static void setup_cfg(size_t max_output, struct stomp_limits lim)
{
	memset(&H, 0, sizeof(H));
	struct stomp_broker_config cfg = { lim, max_output, "vdsmd/test" };
	H.b = stomp_broker_new(&cfg, &ops, &H);
	peer_open(&A, 1);
	peer_open(&B, 2);
}

static void setup(void)
{
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	setup_cfg(0, lim);
}

static void teardown(void)
{
	peer_close(&A);
	peer_close(&B);
	stomp_broker_free(H.b);
}

static long feed(struct peer *p, const char *data, size_t len)
{
	buf_append(&p->in, data, len);
	long r = stomp_session_feed(p->s, p->in.data, p->in.len);
	if (r > 0)
		buf_consume(&p->in, (size_t)r);
	return r;
}

#define FEED(p, lit) feed((p), lit, sizeof(lit) - 1)

static void nested_feed(struct peer *p)
{
	ck_assert_int_gt(FEED(p, "SUBSCRIBE\ndestination:n\nid:n1\nreceipt:nr\n\n\0"), 0);
}

/* Next frame the peer received, or NULL. */
static struct stomp_frame *next(struct peer *p)
{
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	while (p->rpos < p->out.len) {
		long r = stomp_parse(&p->p, &lim, p->out.data + p->rpos, p->out.len - p->rpos,
				     &p->f, NULL);
		ck_assert_int_gt(r, 0);
		p->rpos += (size_t)r;
		if (p->f.cmd != STOMP_NONE)
			return &p->f;
	}
	return NULL;
}

static const char *hdr(const struct stomp_frame *f, const char *name)
{
	return stomp_frame_get(f, name, NULL);
}

static void expect_none(struct peer *p)
{
	struct stomp_frame *f = next(p);
	if (f)
		ck_abort_msg("unexpected %s frame", stomp_cmd_name(f->cmd));
}

static struct stomp_frame *expect(struct peer *p, enum stomp_cmd cmd)
{
	struct stomp_frame *f = next(p);
	ck_assert_ptr_nonnull(f);
	if (f->cmd != cmd)
		ck_abort_msg("got %s (message=%s receipt-id=%s), expected %s",
			     stomp_cmd_name(f->cmd), hdr(f, "message") ? hdr(f, "message") : "",
			     hdr(f, "receipt-id") ? hdr(f, "receipt-id") : "", stomp_cmd_name(cmd));
	return f;
}

static void expect_error(struct peer *p, const char *msg)
{
	struct stomp_frame *f = expect(p, STOMP_ERROR);
	ck_assert_str_eq(hdr(f, "message"), msg);
}

static void expect_receipt(struct peer *p, const char *id)
{
	struct stomp_frame *f = expect(p, STOMP_RECEIPT);
	ck_assert_str_eq(hdr(f, "receipt-id"), id);
}

#endif
