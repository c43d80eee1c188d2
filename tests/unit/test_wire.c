/* tests/unit/test_wire.c - vdsmd/wire.c without sockets: the frame
 * boundaries conn_flush() writes by (one frame per write, PROTOCOL.md 2),
 * the layout for the engine's library (short MESSAGE frames padded with
 * spaces after their JSON body, content-length rewritten; over TLS records
 * of at least 8448 bytes, long frames cut into equal records), none of it
 * for a packed client, and events held behind the replies of the requests
 * in flight when they came. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../../vdsmd/server.h"
#include "../../stomp/stomp.h"
#include "check_main.h"

struct fixture {
	struct vdsmd d;
	struct vd_server s;
	struct vd_conn c;
};

static void fx_init(struct fixture *f, size_t pad_to)
{
	memset(f, 0, sizeof(*f));
	f->d.cfg.max_output = 1 << 20;
	f->s.d = &f->d;
	f->s.pad_to = pad_to;
	f->c.srv = &f->s;
	buf_init(&f->c.out);
}

static void fx_free(struct fixture *f)
{
	wire_free(&f->c);
	buf_free(&f->c.out);
}

/* Append a MESSAGE with the given body, as the broker does, and record it. */
static void message(struct vd_conn *c, const char *body)
{
	struct stomp_header h[] = {
		{ "destination", 0, "jms.topic.vdsm_responses", 24 },
		{ "content-type", 0, "application/json", 16 },
		{ "subscription", 0, "s1", 2 },
	};
	stomp_write_frame(&c->out, STOMP_MESSAGE, h, 3, body, strlen(body));
	wire_frame_end(c);
}

static void receipt(struct vd_conn *c)
{
	struct stomp_header h[] = { { "receipt-id", 0, "r1", 2 } };
	stomp_write_frame(&c->out, STOMP_RECEIPT, h, 1, NULL, 0);
	wire_frame_end(c);
}

/* What conn_flush does with n bytes written. */
static void written(struct vd_conn *c, size_t n)
{
	buf_consume(&c->out, n);
	c->out_base += n;
}

/* Parse the frame at the start of c->out (len bytes). */
static void parse_one(struct vd_conn *c, size_t len, struct stomp_frame *f,
		      struct stomp_header *hdr, unsigned cap)
{
	struct stomp_parser p;
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	stomp_parser_init(&p);
	f->hdr = hdr;
	f->hdr_cap = cap;
	const char *why = NULL;
	long n = stomp_parse(&p, &lim, c->out.data, len, f, &why);
	ck_assert_msg(n == (long)len, "parsed %ld of %zu (%s)", n, len, why ? why : "");
}

/* The frame (len bytes at the start of c->out) is body + spaces, all of it
 * inside content-length, with the headers message() wrote, in order. */
static void check_padded(struct vd_conn *c, size_t len, const char *body)
{
	struct stomp_header hdr[16];
	struct stomp_frame f;
	parse_one(c, len, &f, hdr, 16);
	ck_assert_int_eq(f.cmd, STOMP_MESSAGE);
	ck_assert_uint_ge(f.body_len, strlen(body));
	ck_assert(memcmp(f.body, body, strlen(body)) == 0);
	for (size_t i = strlen(body); i < f.body_len; i++)
		ck_assert_int_eq(f.body[i], ' ');
	ck_assert_uint_eq(f.nhdr, 4);
	ck_assert_str_eq(hdr[0].name, "destination");
	ck_assert_str_eq(hdr[1].name, "content-type");
	ck_assert_str_eq(hdr[2].name, "subscription");
	ck_assert_str_eq(hdr[3].name, "content-length");
}

START_TEST(one_write_per_frame)
{
	struct fixture fx;
	fx_init(&fx, 0);
	struct vd_conn *c = &fx.c;
	message(c, "{\"id\":1}");
	size_t a = c->out.len;
	receipt(c);
	size_t b = c->out.len - a;
	buf_putc(&c->out, '\n');  /* a heart-beat is a frame of its own */
	wire_frame_end(c);
	message(c, "{\"id\":2}");
	size_t d = c->out.len - a - b - 1;
	/* each write stops at the end of the frame it starts in */
	ck_assert_uint_eq(wire_next_len(c, c->out_base, c->out.len), a);
	/* a partial write: the rest of that frame only */
	written(c, 10);
	ck_assert_uint_eq(wire_next_len(c, c->out_base, c->out.len), a - 10);
	written(c, a - 10);
	ck_assert_uint_eq(wire_next_len(c, c->out_base, c->out.len), b);
	written(c, b);
	ck_assert_uint_eq(wire_next_len(c, c->out_base, c->out.len), 1);
	written(c, 1);
	ck_assert_uint_eq(wire_next_len(c, c->out_base, c->out.len), d);
	written(c, d);
	ck_assert_uint_eq(c->out.len, 0);
	ck_assert_uint_eq(c->fend_n, 1);  /* dropped on the next call */
	/* bytes no frame was recorded for (HTTP): written as they are */
	buf_append(&c->out, "HTTP/1.1 200 OK\r\n\r\n", 19);
	ck_assert_uint_eq(wire_next_len(c, c->out_base, c->out.len), 19);
	ck_assert_uint_eq(c->fend_n, 0);
	fx_free(&fx);
}
END_TEST

START_TEST(many_frames_grow_the_ring)
{
	struct fixture fx;
	fx_init(&fx, 0);
	struct vd_conn *c = &fx.c;
	size_t len[100];
	for (int i = 0; i < 100; i++) {
		size_t before = c->out.len;
		message(c, i % 2 ? "{}" : "{\"result\":true}");
		len[i] = c->out.len - before;
		if (i == 40) {  /* consume a few in between: the ring wraps */
			for (int j = 0; j < 30; j++) {
				size_t n = wire_next_len(c, c->out_base, c->out.len);
				ck_assert_uint_eq(n, len[j]);
				written(c, n);
			}
		}
	}
	for (int j = 30; j < 100; j++) {
		size_t n = wire_next_len(c, c->out_base, c->out.len);
		ck_assert_uint_eq(n, len[j]);
		written(c, n);
	}
	ck_assert_uint_eq(c->out.len, 0);
	fx_free(&fx);
}
END_TEST

START_TEST(short_message_padded_on_plaintext)
{
	struct fixture fx;
	fx_init(&fx, 1024);
	struct vd_conn *c = &fx.c;
	const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}";
	message(c, body);
	ck_assert_uint_eq(c->out.len, 1024);
	ck_assert_uint_eq(wire_next_len(c, c->out_base, c->out.len), 1024);
	/* headers first and short: the header block ends in the first 200 bytes */
	const char *blank = memmem(c->out.data, c->out.len, "\n\n", 2);
	ck_assert_ptr_nonnull(blank);
	ck_assert_int_lt(blank - c->out.data, 200);
	check_padded(c, 1024, body);  /* (parsing writes NULs into the headers) */
	fx_free(&fx);
}
END_TEST

START_TEST(padding_only_where_needed)
{
	struct fixture fx;
	/* not a MESSAGE: RECEIPT stays as it is */
	fx_init(&fx, 1024);
	receipt(&fx.c);
	ck_assert_uint_lt(fx.c.out.len, 100);
	fx_free(&fx);
	/* a packed client: none, and no boundaries (one write for all) */
	fx_init(&fx, 1024);
	fx.c.packed = true;
	message(&fx.c, "{}");
	ck_assert_uint_lt(fx.c.out.len, 200);
	fx.c.ssl = &fx;  /* any non-NULL SSL */
	size_t before = fx.c.out.len;
	message(&fx.c, "{}");
	ck_assert_uint_eq(fx.c.out.len, 2 * before);
	ck_assert_uint_eq(wire_next_len(&fx.c, fx.c.out_base, fx.c.out.len), 2 * before);
	ck_assert_uint_eq(fx.c.fend_n, 0);
	fx_free(&fx);
	/* stomp_pad_frames 0: one frame per write, unpadded, over TLS too */
	fx_init(&fx, 0);
	fx.c.ssl = &fx;
	message(&fx.c, "{}");
	ck_assert_uint_eq(wire_next_len(&fx.c, fx.c.out_base, fx.c.out.len), before);
	fx_free(&fx);
	/* not JSON (a forwarded message): its body stays as it was sent */
	fx_init(&fx, 1024);
	struct stomp_header h[] = { { "destination", 0, "x", 1 },
				    { "content-type", 0, "text/plain", 10 } };
	stomp_write_frame(&fx.c.out, STOMP_MESSAGE, h, 2, "hi", 2);
	before = fx.c.out.len;
	wire_frame_end(&fx.c);
	ck_assert_uint_eq(fx.c.out.len, before);
	fx_free(&fx);
	/* long enough already */
	fx_init(&fx, 1024);
	char big[1100];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	message(&fx.c, big);
	size_t plain = fx.c.out.len;
	fx_free(&fx);
	fx_init(&fx, 0);
	message(&fx.c, big);
	ck_assert_uint_eq(fx.c.out.len, plain);
	fx_free(&fx);
	/* every length under it, across content-length's digit steps (99 ->
	 * 100, 999 -> 1000): at least 1024, at most one byte over */
	for (size_t blen = 1; blen < 1000; blen++) {
		fx_init(&fx, 0);
		big[blen] = 0;
		message(&fx.c, big);
		size_t raw = fx.c.out.len;
		fx_free(&fx);
		fx_init(&fx, 1024);
		message(&fx.c, big);
		if (raw >= 1024) {
			ck_assert_uint_eq(fx.c.out.len, raw);
		} else {
			ck_assert_uint_ge(fx.c.out.len, 1024);
			ck_assert_uint_le(fx.c.out.len, 1025);
		}
		check_padded(&fx.c, fx.c.out.len, big);
		fx_free(&fx);
		big[blen] = 'x';
	}
}
END_TEST

/* Write a TLS connection's output as conn_flush does; the record sizes. */
static unsigned records(struct vd_conn *c, size_t *len, unsigned cap)
{
	unsigned n = 0;
	while (c->out.len && n < cap) {
		len[n] = wire_next_len(c, c->out_base, c->out.len);
		written(c, len[n++]);
	}
	return n;
}

START_TEST(tls_records_for_the_library)
{
	struct fixture fx;
	size_t rec[16];
	static char big[60000];
	/* a short frame: one record of 8448 bytes (> 16709 / 2) */
	fx_init(&fx, 1024);
	fx.c.ssl = &fx;
	message(&fx.c, "{\"id\":1,\"result\":true}");
	ck_assert_uint_eq(fx.c.out.len, 8448);
	check_padded(&fx.c, 8448, "{\"id\":1,\"result\":true}");
	ck_assert_uint_eq(records(&fx.c, rec, 16), 1);
	fx_free(&fx);
	/* 8448..16384: one record, as it is */
	for (size_t blen = 9000; blen <= 16200; blen += 800) {
		fx_init(&fx, 1024);
		fx.c.ssl = &fx;
		memset(big, 'x', blen);
		big[blen] = 0;
		message(&fx.c, big);
		size_t total = fx.c.out.len;
		ck_assert_uint_lt(total, 16384);
		ck_assert_uint_eq(records(&fx.c, rec, 16), 1);
		ck_assert_uint_eq(rec[0], total);
		fx_free(&fx);
	}
	/* just over one record: padded to two of the minimum, never 16384 + a
	 * small rest */
	fx_init(&fx, 1024);
	fx.c.ssl = &fx;
	memset(big, 'x', 16300);
	big[16300] = 0;
	message(&fx.c, big);
	ck_assert_uint_eq(fx.c.out.len, 2 * 8448);
	ck_assert_uint_eq(records(&fx.c, rec, 16), 2);
	ck_assert_uint_eq(rec[0], 8448);
	ck_assert_uint_eq(rec[1], 8448);
	fx_free(&fx);
	/* longer: equal records, each between the minimum and 16384 */
	const size_t sizes[] = { 16896, 20000, 32769, 40000, 49153, 59999 };
	for (size_t i = 0; i < VD_ARRAY_SIZE(sizes); i++) {
		fx_init(&fx, 1024);
		fx.c.ssl = &fx;
		memset(big, 'x', sizes[i]);
		big[sizes[i]] = 0;
		message(&fx.c, big);
		size_t total = fx.c.out.len, sum = 0;
		unsigned n = records(&fx.c, rec, 16);
		ck_assert_uint_eq(n, (total + 16383) / 16384);
		for (unsigned r = 0; r < n; r++) {
			ck_assert_uint_ge(rec[r], 8448);
			ck_assert_uint_le(rec[r], 16384);
			ck_assert_uint_le(rec[0] - rec[r], 1);
			sum += rec[r];
		}
		ck_assert_uint_eq(sum, total);
		fx_free(&fx);
	}
	/* a packed client: the frame in one write (SSL_write cuts it) */
	fx_init(&fx, 1024);
	fx.c.ssl = &fx;
	fx.c.packed = true;
	message(&fx.c, big);
	size_t total = fx.c.out.len;
	ck_assert_uint_eq(records(&fx.c, rec, 16), 1);
	ck_assert_uint_eq(rec[0], total);
	fx_free(&fx);
}
END_TEST

/* A connected TCP pair on loopback: *w writes (non-blocking), *r reads. */
static void tcp_pair(int *w, int *r)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &al), 0);
	*w = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(*w, (struct sockaddr *)&a, sizeof(a)), 0);
	*r = accept(l, NULL, NULL);
	ck_assert_int_ge(*r, 0);
	close(l);
	fcntl(*w, F_SETFL, O_NONBLOCK);
}

START_TEST(frame_write_waits_for_send_memory)
{
	/* a real socket: a frame may start while little is unacknowledged, not
	 * once the reader fell behind (Linux then ends writes anywhere) */
	struct fixture fx;
	fx_init(&fx, 1024);
	struct vd_conn *c = &fx.c;
	int r;
	tcp_pair(&c->fd, &r);
	c->state = CS_STOMP;
	ck_assert(wire_write_fits(c, 1024));
	static char junk[65536];
	size_t queued = 0;
	for (;;) {   /* fill the reader's buffer and our send queue */
		ssize_t n = write(c->fd, junk, sizeof(junk));
		if (n < 0) {
			ck_assert_int_eq(errno, EAGAIN);
			break;
		}
		queued += (size_t)n;
	}
	ck_assert(!wire_write_fits(c, 1024));
	/* TLS, a packed client, HTTP and stomp_pad_frames 0 are not held */
	c->packed = true;
	ck_assert(wire_write_fits(c, 1024));
	c->packed = false;
	c->ssl = &fx;
	ck_assert(wire_write_fits(c, 1024));
	c->ssl = NULL;
	c->state = CS_HTTP;
	ck_assert(wire_write_fits(c, 1024));
	c->state = CS_STOMP;
	fx.s.pad_to = 0;
	ck_assert(wire_write_fits(c, 1024));
	fx.s.pad_to = 1024;
	/* the reader catches up: free to write again */
	while (queued) {
		ssize_t n = read(r, junk, sizeof(junk));
		ck_assert_int_gt(n, 0);
		queued -= (size_t)n;
	}
	for (int i = 0; i < 200 && !wire_write_fits(c, 1024); i++)
		usleep(5000);   /* the last ACKs */
	ck_assert(wire_write_fits(c, 1024));
	close(r);
	close(c->fd);
	fx_free(&fx);
}
END_TEST

static struct stomp_req *req(void)
{
	return calloc(1, sizeof(struct stomp_req));
}

/* An event arriving during fan-out: the frame is appended, then offered. */
static bool event(struct vd_conn *c, const char *body)
{
	struct stomp_header h[] = { { "destination", 0, "jms.queue.events", 16 } };
	stomp_write_frame(&c->out, STOMP_MESSAGE, h, 1, body, strlen(body));
	if (wire_hold_event(c))
		return true;
	wire_frame_end(c);
	return false;
}

static bool out_has(struct vd_conn *c, const char *s)
{
	return memmem(c->out.data, c->out.len, s, strlen(s)) != NULL;
}

START_TEST(events_wait_for_replies_in_flight)
{
	struct fixture fx;
	fx_init(&fx, 0);
	struct vd_conn *c = &fx.c;
	/* no request in flight: delivered at once */
	ck_assert(!event(c, "E0"));
	ck_assert(out_has(c, "E0"));
	struct stomp_req *q1 = req(), *q2 = req(), *q3 = req();
	wire_req_start(c, q1);
	ck_assert(event(c, "E1"));          /* caused by q1, perhaps */
	ck_assert(!out_has(c, "E1"));
	wire_req_start(c, q2);
	ck_assert(event(c, "E2"));          /* q1 and q2 in flight */
	wire_req_start(c, q3);
	/* q2 answers first: E1 and E2 still wait for q1 */
	message(c, "R2");
	wire_req_done(c, q2);
	ck_assert(!out_has(c, "E1"));
	/* q1 answers: its reply, then E1 and E2 (q3 came after both) */
	message(c, "R1");
	wire_req_done(c, q1);
	const char *r1 = memmem(c->out.data, c->out.len, "R1", 2);
	const char *e1 = memmem(c->out.data, c->out.len, "E1", 2);
	const char *e2 = memmem(c->out.data, c->out.len, "E2", 2);
	ck_assert(r1 && e1 && e2 && r1 < e1 && e1 < e2);
	ck_assert_ptr_null(c->held);
	ck_assert_uint_eq(c->held_bytes, 0);
	/* q3 still in flight: a new event waits for it */
	ck_assert(event(c, "E3"));
	wire_req_done(c, q3);
	ck_assert(out_has(c, "E3"));
	/* every released frame is its own write */
	unsigned frames = 0;
	while (c->out.len) {
		size_t n = wire_next_len(c, c->out_base, c->out.len);
		ck_assert_int_eq(c->out.data[n - 1], '\0');
		written(c, n);
		frames++;
	}
	ck_assert_uint_eq(frames, 6);  /* E0 R2 R1 E1 E2 E3 */
	free(q1);
	free(q2);
	free(q3);
	fx_free(&fx);
}
END_TEST

START_TEST(held_events_bounded)
{
	struct fixture fx;
	fx_init(&fx, 0);
	fx.d.cfg.max_output = 4096;   /* held events may take half */
	struct vd_conn *c = &fx.c;
	struct stomp_req *q = req();
	wire_req_start(c, q);
	char body[900];
	memset(body, 'e', sizeof(body) - 1);
	body[sizeof(body) - 1] = 0;
	ck_assert(event(c, body));
	ck_assert(event(c, body));
	/* past the bound: goes out now rather than being lost */
	ck_assert(!event(c, body));
	ck_assert_uint_gt(c->out.len, 900);
	wire_req_done(c, q);
	ck_assert_ptr_null(c->held);
	/* a connection freed with events held frees them */
	wire_req_start(c, q);
	ck_assert(event(c, "x"));
	free(q);
	fx_free(&fx);
}
END_TEST

/* The broker pads as it writes (stomp_broker_set_pad_hook, wire_pad_frame)
 * to exactly the bytes wire_frame_end's pad_body made of the unpadded
 * frame: a broker with the pad hook against one with the frame hook only,
 * over every short body length, ack header or not, content types with and
 * without parameters or not JSON, plaintext and TLS record sizes. */
static void hook_frame(void *host, struct stomp_session *ss, void *conn)
{
	wire_frame_end(conn);
}

static size_t hook_pad(void *host, struct stomp_session *ss, void *conn, size_t off, size_t len)
{
	return wire_pad_frame(conn, off, len);
}

struct padded_side {
	struct fixture fx;
	struct stomp_broker *b;
	struct stomp_session *ss;
};

static void side_open(struct padded_side *p, bool pad_hook, bool tls, const char *sub)
{
	fx_init(&p->fx, 1024);
	if (tls)
		p->fx.c.ssl = &p->fx;  /* any non-NULL SSL */
	struct stomp_broker_config cfg = { .server_name = "t" };
	p->b = stomp_broker_new(&cfg, NULL, NULL);
	stomp_broker_set_frame_hook(p->b, hook_frame);
	if (pad_hook)
		stomp_broker_set_pad_hook(p->b, hook_pad);
	p->ss = stomp_session_new(p->b, &p->fx.c.out, &p->fx.c);
	char in[256];
	int n = snprintf(in, sizeof(in), "CONNECT\naccept-version:1.2\n\n%cSUBSCRIBE\n"
			 "destination:jms.topic.vdsm_responses\nid:s1\n%s\n%c", 0, sub, 0);
	ck_assert_int_eq(stomp_session_feed(p->ss, in, (size_t)n), n);
	written(&p->fx.c, p->fx.c.out.len);
}

static void side_close(struct padded_side *p)
{
	stomp_session_free(p->ss);
	stomp_broker_free(p->b);
	fx_free(&p->fx);
}

START_TEST(broker_pads_as_frame_end_did)
{
	static const char *const types[] = { "application/json", "application/json;charset=utf-8",
					     "application/jsonx", "text/plain" };
	static char body[17200];
	memset(body, 'x', sizeof(body));
	for (unsigned mode = 0; mode < 4; mode++) {
		bool tls = mode >= 2;
		struct padded_side a, b;
		side_open(&a, false, tls, mode % 2 ? "ack:client\n" : "");
		side_open(&b, true, tls, mode % 2 ? "ack:client\n" : "");
		size_t padded = 0;
		for (size_t len = 0; len < sizeof(body); len += len < 1100 ? 1 : len < 8300 ? 97 : 7) {
			if (!tls && len > 1100)
				break;
			const char *ct = types[len % 4];
			ck_assert_uint_eq(stomp_broker_reply(a.b, a.ss, NULL, 0, ct, body, len), 1);
			ck_assert_uint_eq(stomp_broker_reply(b.b, b.ss, NULL, 0, ct, body, len), 1);
			ck_assert_uint_eq(a.fx.c.out.len, b.fx.c.out.len);
			ck_assert(memcmp(a.fx.c.out.data, b.fx.c.out.data, a.fx.c.out.len) == 0);
			ck_assert_uint_eq(a.fx.c.fend_n, b.fx.c.fend_n);
			if (a.fx.c.out.len > len + 200)
				padded++;
			written(&a.fx.c, a.fx.c.out.len);
			written(&b.fx.c, b.fx.c.out.len);
		}
		ck_assert_uint_gt(padded, 100);  /* the padding was exercised */
		side_close(&a);
		side_close(&b);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("wire");
	tcase_add_test(tc, one_write_per_frame);
	tcase_add_test(tc, many_frames_grow_the_ring);
	tcase_add_test(tc, short_message_padded_on_plaintext);
	tcase_add_test(tc, padding_only_where_needed);
	tcase_add_test(tc, tls_records_for_the_library);
	tcase_add_test(tc, frame_write_waits_for_send_memory);
	tcase_add_test(tc, events_wait_for_replies_in_flight);
	tcase_add_test(tc, held_events_bounded);
	tcase_add_test(tc, broker_pads_as_frame_end_did);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
