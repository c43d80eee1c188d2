/* tests/fuzz/fuzz_stomp_session.c - feeds the STOMP server session (the
 * mini-broker) directly, no sockets.
 *
 * Input: byte 0 = chunk size for feeding (0 means 1), byte 1 = flags
 * (bit 0: close the fuzzed session before its pending requests are
 * answered; bit 1: answer requests inline), rest = the wire bytes of one
 * connection.  A second session is subscribed to a few destinations so
 * forwarding, replies and events are exercised.  Oracle: besides the
 * sanitizers, everything the broker writes must parse back as valid frames
 * of the server kind, and the session must stop at the first framing
 * error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "stomp/stomp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
	struct stomp_broker *b;
	bool inline_reply;
	struct stomp_session *pending[32];
	char pending_rt[32][64];
	size_t pending_rtlen[32];
	unsigned npending;
};

static void fz_request(void *hp, struct stomp_session *s, const char *body, size_t len,
		       const char *ct, size_t ctlen, const char *rt, size_t rtlen,
		       const char *flow, size_t flen)
{
	struct fz *z = hp;
	if (body[len] != '\0')
		abort();  /* the parser promises a NUL after the body */
	if (z->inline_reply) {
		stomp_broker_reply(z->b, s, rt, rtlen, "application/json", body, len);
		return;
	}
	if (z->npending < 32) {
		unsigned i = z->npending++;
		stomp_session_ref(s);
		z->pending[i] = s;
		z->pending_rtlen[i] = rt ? VD_MIN(rtlen, sizeof(z->pending_rt[i])) : (size_t)-1;
		if (rt)
			memcpy(z->pending_rt[i], rt, z->pending_rtlen[i]);
	}
}

static void fz_output(void *hp, struct stomp_session *s, void *conn)
{
	if (!stomp_session_alive(s))
		abort();
}

static void fz_heartbeat(void *hp, struct stomp_session *s, void *conn, unsigned send_ms,
			 unsigned recv_ms)
{
	if ((send_ms && send_ms < 1000) || (recv_ms && recv_ms < 1000))
		abort();
}

static const struct stomp_broker_ops fz_ops = {
	.request = fz_request, .output = fz_output, .heartbeat = fz_heartbeat,
};

/* Every byte the broker wrote must be valid server frames. */
static void check_output(struct vd_buf *out)
{
	struct stomp_limits lim = { (size_t)64 << 20, 4096, (size_t)1 << 20 };
	static struct stomp_header hdr[4096];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 4096 };
	struct stomp_parser p;
	stomp_parser_init(&p);
	size_t pos = 0;
	while (pos < out->len) {
		long r = stomp_parse(&p, &lim, out->data + pos, out->len - pos, &f, NULL);
		if (r <= 0)
			abort();
		pos += (size_t)r;
		if (f.cmd != STOMP_CONNECTED && f.cmd != STOMP_MESSAGE && f.cmd != STOMP_RECEIPT &&
		    f.cmd != STOMP_ERROR)
			abort();
		if (f.cmd == STOMP_MESSAGE && (!stomp_frame_get(&f, "message-id", NULL) ||
					       !stomp_frame_get(&f, "subscription", NULL) ||
					       !stomp_frame_get(&f, "content-length", NULL)))
			abort();
		if (f.cmd == STOMP_ERROR && !stomp_frame_get(&f, "message", NULL))
			abort();
	}
}

static void feed_str(struct stomp_session *s, const char *str)
{
	size_t n = strlen(str) + 1;
	char *tmp = malloc(n);
	memcpy(tmp, str, n);
	if (stomp_session_feed(s, tmp, n) != (long)n)
		abort();
	free(tmp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t chunk = data[0] ? data[0] : 1;
	unsigned flags = data[1];
	data += 2;
	size -= 2;

	struct fz z;
	memset(&z, 0, sizeof(z));
	z.inline_reply = flags & 2;
	struct stomp_broker_config cfg = { { 4096, 16, 512 }, 1 << 16, "vdsmd/fuzz" };
	z.b = stomp_broker_new(&cfg, &fz_ops, &z);
	struct vd_buf aout = VD_BUF_INIT, bout = VD_BUF_INIT, in = VD_BUF_INIT;
	struct stomp_session *a = stomp_session_new(z.b, &aout, &aout);
	struct stomp_session *b = stomp_session_new(z.b, &bout, &bout);
	feed_str(b, "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:1\n\n");
	feed_str(b, "SUBSCRIBE\ndestination:jms\nid:2\n\n");
	feed_str(b, "SUBSCRIBE\ndestination:jms.queue.events\nid:3\n\n");

	size_t off = 0;
	unsigned rounds = 0;
	bool failed = false;
	while (off < size) {
		size_t n = VD_MIN(chunk, size - off);
		buf_append(&in, data + off, n);
		off += n;
		/* Small inputs go through an exact-size copy so a read past the
		 * bytes given is caught (frames are only modified once complete,
		 * and complete frames are consumed, so the copy is equivalent). */
		long r;
		if (in.len <= 4096) {
			char *exact = malloc(in.len);
			memcpy(exact, in.data, in.len);
			r = stomp_session_feed(a, exact, in.len);
			free(exact);
		} else {
			r = stomp_session_feed(a, in.data, in.len);
		}
		if (r < 0) {
			failed = true;
			if (!stomp_session_closing(a))
				abort();
			break;
		}
		if ((size_t)r > in.len)
			abort();
		buf_consume(&in, (size_t)r);
		if (stomp_session_closing(a))
			break;
		if ((++rounds & 15) == 1)
			stomp_broker_publish(z.b, "jms.queue.events", "application/json", "{}", 2);
	}
	if (failed && aout.len == 0)
		abort();  /* a framing error is always answered with ERROR */
	if (flags & 1) {
		stomp_session_free(a);
		a = NULL;
	}
	for (unsigned i = 0; i < z.npending; i++) {
		const char *rt = z.pending_rtlen[i] == (size_t)-1 ? NULL : z.pending_rt[i];
		stomp_broker_reply(z.b, z.pending[i], rt, rt ? z.pending_rtlen[i] : 0, NULL, "r", 1);
		stomp_session_unref(z.pending[i]);
	}
	check_output(&aout);
	check_output(&bout);
	if (a)
		stomp_session_free(a);
	stomp_session_free(b);
	struct stomp_broker_stats st;
	stomp_broker_stats(z.b, &st);
	if (st.sessions != 0 || st.subscriptions != 0)
		abort();
	stomp_broker_free(z.b);
	buf_free(&aout);
	buf_free(&bout);
	buf_free(&in);
	return 0;
}
