/* bench/stomp.c - STOMP hot path without sockets: frame parse rate, a full
 * request -> reply cycle through the broker session (pipelined SENDs, each
 * answered inline with a MESSAGE), and event fan-out.
 *
 *   build/bench/stomp [seconds-per-case]   (default 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/vd.h"
#include "stomp/stomp.h"

static const char REQ_BODY[] =
	"{\"jsonrpc\":\"2.0\",\"method\":\"Host.ping2\",\"params\":{},"
	"\"id\":\"5a6e9f2c-8a1b-4c3d-9e7f-0123456789ab\"}";
static const char REPLY_BODY[] =
	"{\"jsonrpc\":\"2.0\",\"id\":\"5a6e9f2c-8a1b-4c3d-9e7f-0123456789ab\",\"result\":true}";

static void make_request(struct vd_buf *b)
{
	buf_printf(b, "SEND\ndestination:jms.topic.vdsm_requests\ncontent-type:application/json\n"
		      "reply-to:jms.topic.vdsm_responses\novirtCorrelationId:3b7c0f1e-flow\n"
		      "content-length:%zu\n\n%s%c\n", sizeof(REQ_BODY) - 1, REQ_BODY, '\0');
}

static double secs_since(uint64_t t0)
{
	return (double)(vd_now_ns() - t0) / 1e9;
}

static void bench_parse(double secs)
{
	struct vd_buf one = VD_BUF_INIT, batch = VD_BUF_INIT;
	make_request(&one);
	for (int i = 0; i < 1000; i++)
		buf_append(&batch, one.data, one.len);
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	struct stomp_header hdr[128];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 128 };
	struct stomp_parser p;
	char *work = xmalloc(batch.len);
	uint64_t frames = 0, t0 = vd_now_ns();
	while (secs_since(t0) < secs) {
		memcpy(work, batch.data, batch.len);  /* parsing unescapes in place */
		size_t pos = 0;
		stomp_parser_init(&p);
		while (pos < batch.len) {
			long r = stomp_parse(&p, &lim, work + pos, batch.len - pos, &f, NULL);
			if (r <= 0)
				abort();
			pos += (size_t)r;
			frames += f.cmd != STOMP_NONE;
		}
	}
	double el = secs_since(t0);
	printf("stomp parse: %.0f frames/s, %.0f ns/frame (%zu-byte SEND, incl. memcpy)\n",
	       (double)frames / el, el * 1e9 / (double)frames, one.len);
	free(work);
	buf_free(&one);
	buf_free(&batch);
}

struct host {
	struct stomp_broker *b;
	uint64_t nreq;
};

static void on_request(void *hp, struct stomp_session *s, const char *body, size_t len,
		       const char *ct, size_t ctlen, const char *rt, size_t rtlen,
		       const char *flow, size_t flen)
{
	struct host *h = hp;
	h->nreq++;
	stomp_broker_reply(h->b, s, rt, rtlen, "application/json", REPLY_BODY,
			   sizeof(REPLY_BODY) - 1);
}

static const struct stomp_broker_ops ops = { .request = on_request };

static void bench_session(double secs)
{
	struct host h = { 0 };
	struct stomp_broker_config cfg = { STOMP_LIMITS_DEFAULT, 0, "vdsmd/bench" };
	h.b = stomp_broker_new(&cfg, &ops, &h);
	struct vd_buf out = VD_BUF_INIT, one = VD_BUF_INIT, batch = VD_BUF_INIT;
	struct stomp_session *s = stomp_session_new(h.b, &out, NULL);
	char sub[] = "CONNECT\naccept-version:1.2\n\n\0"
		     "SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:1\n\n";
	stomp_session_feed(s, sub, sizeof(sub));
	buf_reset(&out);
	make_request(&one);
	enum { DEPTH = 64 };
	for (int i = 0; i < DEPTH; i++)
		buf_append(&batch, one.data, one.len);
	char *work = xmalloc(batch.len);
	uint64_t t0 = vd_now_ns(), bytes_out = 0;
	while (secs_since(t0) < secs) {
		memcpy(work, batch.data, batch.len);
		if (stomp_session_feed(s, work, batch.len) != (long)batch.len)
			abort();
		bytes_out += out.len;
		buf_reset(&out);
	}
	double el = secs_since(t0);
	printf("stomp session: %.0f req/s, %.0f ns per SEND->MESSAGE (pipelined by %d, "
	       "%.0f reply bytes each)\n", (double)h.nreq / el, el * 1e9 / (double)h.nreq, DEPTH,
	       (double)bytes_out / (double)h.nreq);
	free(work);
	stomp_session_free(s);
	stomp_broker_free(h.b);
	buf_free(&out);
	buf_free(&one);
	buf_free(&batch);
}

static void bench_publish(double secs)
{
	enum { N = 1000 };
	struct stomp_broker_config cfg = { STOMP_LIMITS_DEFAULT, 1 << 20, "vdsmd/bench" };
	struct stomp_broker *b = stomp_broker_new(&cfg, NULL, NULL);
	struct vd_buf *outs = xcalloc(N, sizeof(*outs));
	struct stomp_session **ss = xcalloc(N, sizeof(*ss));
	for (int i = 0; i < N; i++) {
		ss[i] = stomp_session_new(b, &outs[i], NULL);
		char sub[] = "SUBSCRIBE\ndestination:jms.queue.events\nid:e\n\n";
		stomp_session_feed(ss[i], sub, sizeof(sub));
	}
	static const char ev[] = "{\"jsonrpc\":\"2.0\",\"method\":\"|virt|VM_status|"
				 "5a6e9f2c-8a1b-4c3d-9e7f-0123456789ab\",\"params\":{\"notify_time\":1}}";
	uint64_t n = 0, t0 = vd_now_ns();
	while (secs_since(t0) < secs) {
		for (int k = 0; k < 100; k++)
			n += stomp_broker_publish(b, "jms.queue.events", "application/json", ev,
						  sizeof(ev) - 1);
		for (int i = 0; i < N; i++)
			buf_reset(&outs[i]);
	}
	double el = secs_since(t0);
	printf("stomp publish: %.0f deliveries/s to %d subscribers (%.0f ns each)\n",
	       (double)n / el, N, el * 1e9 / (double)n);
	for (int i = 0; i < N; i++) {
		stomp_session_free(ss[i]);
		buf_free(&outs[i]);
	}
	free(outs);
	free(ss);
	stomp_broker_free(b);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	if (secs <= 0)
		secs = 1.0;
	bench_parse(secs);
	bench_session(secs);
	bench_publish(secs);
	return 0;
}
