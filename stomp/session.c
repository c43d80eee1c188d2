/* stomp/session.c - the server side of one STOMP connection: feeds bytes to
 * the parser and carries out each client command with the exact outcome of
 * PROTOCOL.md section 2.  Routing and subscriptions live in broker.c. */
#include "broker_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The headers a command looks at, first occurrence of each (first wins). */
struct hv {
	const char *v;
	size_t n;
};

struct known {
	struct hv dest, id, receipt, ct, reply_to, flow, accept, hb, ack, framing;
};

static void set_first(struct hv *x, const struct stomp_header *h)
{
	if (!x->v) {
		x->v = h->value;
		x->n = h->vlen;
	}
}

#define NAME_IS(h, lit) (!memcmp((h)->name, lit, sizeof(lit) - 1))

static void known_scan(const struct stomp_frame *f, struct known *k)
{
	memset(k, 0, sizeof(*k));
	for (unsigned i = 0; i < f->nhdr; i++) {
		const struct stomp_header *h = &f->hdr[i];
		switch (h->nlen) {
		case 2:
			if (NAME_IS(h, "id"))
				set_first(&k->id, h);
			break;
		case 3:
			if (NAME_IS(h, "ack"))
				set_first(&k->ack, h);
			break;
		case 7:
			if (NAME_IS(h, "receipt"))
				set_first(&k->receipt, h);
			break;
		case 8:
			if (NAME_IS(h, "reply-to"))
				set_first(&k->reply_to, h);
			break;
		case 10:
			if (NAME_IS(h, "heart-beat"))
				set_first(&k->hb, h);
			break;
		case 11:
			if (NAME_IS(h, "destination"))
				set_first(&k->dest, h);
			break;
		case 12:
			if (NAME_IS(h, "content-type"))
				set_first(&k->ct, h);
			break;
		case 13:
			if (NAME_IS(h, "vdsmd-framing"))
				set_first(&k->framing, h);
			break;
		case 14:
			if (NAME_IS(h, "accept-version"))
				set_first(&k->accept, h);
			break;
		case 18:
			if (NAME_IS(h, "ovirtCorrelationId"))
				set_first(&k->flow, h);
			break;
		}
	}
}

/* ---- lifecycle ----------------------------------------------------------- */

struct stomp_session *stomp_session_new(struct stomp_broker *b, struct vd_buf *out, void *conn)
{
	struct stomp_session *s = xcalloc(1, sizeof(*s));
	s->b = b;
	s->out = out;
	s->conn = conn;
	s->refs = 1;
	s->alive = true;
	stomp_parser_init(&s->parser);
	b->st.sessions++;
	return s;
}

void stomp_session_free(struct stomp_session *s)
{
	if (!s || !s->alive)
		return;
	while (s->subs)
		stomp_sub_remove(s, s->subs);
	s->alive = false;
	s->out = NULL;
	s->conn = NULL;
	s->b->st.sessions--;
	stomp_session_unref(s);
}

void stomp_session_ref(struct stomp_session *s)
{
	s->refs++;
}

void stomp_session_unref(struct stomp_session *s)
{
	if (s && --s->refs == 0)
		free(s);
}

bool stomp_session_alive(const struct stomp_session *s)
{
	return s && s->alive;
}

bool stomp_session_closing(const struct stomp_session *s)
{
	return s->closing;
}

bool stomp_session_connected(const struct stomp_session *s)
{
	return s->connected;
}

bool stomp_session_established(const struct stomp_session *s)
{
	return s->connected || s->served;
}

void *stomp_session_conn(const struct stomp_session *s)
{
	return s && s->alive ? s->conn : NULL;
}

size_t stomp_session_memory(const struct stomp_session *s)
{
	return s && s->alive ? sizeof(*s) + s->sub_bytes : 0;
}

uint64_t stomp_session_dropped(const struct stomp_session *s)
{
	return s->dropped;
}

/* ---- replies ------------------------------------------------------------- */

static void send_frame(struct stomp_session *s, enum stomp_cmd cmd,
		       const struct stomp_header *h, unsigned n)
{
	stomp_write_frame(s->out, cmd, h, n, NULL, 0);
	s->b->st.frames_out++;
	stomp_frame_done(s->b, s);
}

static void send_error(struct stomp_session *s, const char *msg, const struct hv *receipt)
{
	struct stomp_header h[2] = {
		{ "message", 7, msg, strlen(msg) },
		{ "receipt-id", 10, receipt ? receipt->v : NULL, receipt ? receipt->n : 0 },
	};
	send_frame(s, STOMP_ERROR, h, 2);
}

static void send_receipt(struct stomp_session *s, const struct hv *receipt)
{
	struct stomp_header h = { "receipt-id", 10, receipt->v, receipt->n };
	send_frame(s, STOMP_RECEIPT, &h, 1);
}

/* ---- commands ------------------------------------------------------------ */

enum outcome {
	DONE = 0,      /* handled: a receipt follows when asked for */
	REFUSED = 1,   /* ERROR sent (it carries receipt-id): connection stays */
	CLOSE = -1,    /* ERROR sent: close once flushed */
};

/* "1.2" as one element of a comma-separated list. */
static bool has_v12(const struct hv *a)
{
	const char *p = a->v, *end = a->v + a->n;
	while (p < end) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		const char *e = c ? c : end;
		const char *q = p, *r = e;
		while (q < r && (*q == ' ' || *q == '\t'))
			q++;
		while (r > q && (r[-1] == ' ' || r[-1] == '\t'))
			r--;
		if (r - q == 3 && !memcmp(q, "1.2", 3))
			return true;
		p = e + 1;
	}
	return false;
}

/* Parses "cx,cy"; false when malformed.  Values clamp at one day. */
static bool parse_hb(const struct hv *hb, unsigned *cx, unsigned *cy)
{
	unsigned v[2] = { 0, 0 };
	size_t i = 0;
	for (int k = 0; k < 2; k++) {
		while (i < hb->n && (hb->v[i] == ' ' || hb->v[i] == '\t'))
			i++;
		size_t start = i;
		while (i < hb->n && hb->v[i] >= '0' && hb->v[i] <= '9') {
			if (v[k] < 86400000u)
				v[k] = v[k] * 10 + (unsigned)(hb->v[i] - '0');
			i++;
		}
		if (i == start)
			return false;
		if (v[k] > 86400000u)
			v[k] = 86400000u;
		while (i < hb->n && (hb->v[i] == ' ' || hb->v[i] == '\t'))
			i++;
		if (k == 0) {
			if (i >= hb->n || hb->v[i] != ',')
				return false;
			i++;
		}
	}
	if (i != hb->n)
		return false;
	*cx = v[0];
	*cy = v[1];
	return true;
}

static unsigned hb_raise(unsigned v)
{
	return v && v < 1000 ? 1000 : v;
}

static enum outcome on_connect(struct stomp_session *s, const struct known *k)
{
	struct stomp_broker *b = s->b;
	if (!k->accept.v || !has_v12(&k->accept)) {
		struct stomp_header h[3] = {
			{ "message", 7, "Version unsupported", 19 },
			{ "version", 7, "1.2", 3 },
			{ "receipt-id", 10, k->receipt.v, k->receipt.n },
		};
		send_frame(s, STOMP_ERROR, h, 3);
		return REFUSED;
	}
	unsigned cx = 0, cy = 0;
	if (k->hb.v && !parse_hb(&k->hb, &cx, &cy))
		cx = cy = 0;
	cx = hb_raise(cx);
	cy = hb_raise(cy);
	char hb[32], sid[37];
	int hn = snprintf(hb, sizeof(hb), "%u,%u", cy, cx);
	vd_uuid_generate(sid);
	struct stomp_header h[4] = {
		{ "version", 7, "1.2", 3 },
		{ "heart-beat", 10, hb, (size_t)hn },
		{ "server", 6, b->server_name, strlen(b->server_name) },
		{ "session", 7, sid, 36 },
	};
	/* Before CONNECTED is written: the host frames it by the choice. */
	if (b->ops.framing)
		b->ops.framing(b->host, s, s->conn,
			       k->framing.n == 6 && !memcmp(k->framing.v, "packed", 6));
	send_frame(s, STOMP_CONNECTED, h, 4);
	s->connected = true;
	if (b->ops.heartbeat)
		b->ops.heartbeat(b->host, s, s->conn, cy, cx);
	return DONE;
}

static enum outcome on_subscribe(struct stomp_session *s, const struct known *k)
{
	if (!k->dest.v) {
		send_error(s, "Missing destination header", &k->receipt);
		return REFUSED;
	}
	if (!k->id.v) {
		send_error(s, "Missing id header", &k->receipt);
		return REFUSED;
	}
	if (stomp_sub_find(s, k->id.v, k->id.n)) {
		send_error(s, "Subscription id already in use", &k->receipt);
		return REFUSED;
	}
	if (s->nsubs >= STOMP_MAX_SUBSCRIPTIONS) {
		send_error(s, "Too many subscriptions", &k->receipt);
		return REFUSED;
	}
	stomp_sub_add(s, k->dest.v, k->dest.n, k->id.v, k->id.n, k->ack.v, k->ack.n);
	return DONE;
}

static enum outcome on_unsubscribe(struct stomp_session *s, const struct known *k)
{
	if (!k->id.v) {
		send_error(s, "Missing id header", &k->receipt);
		return REFUSED;
	}
	struct stomp_sub *sub = stomp_sub_find(s, k->id.v, k->id.n);
	if (sub)
		stomp_sub_remove(s, sub);
	return DONE;
}

static bool is_request_dest(const char *d, size_t n)
{
	static const struct {
		const char *s;
		size_t n;
	} req[] = {
		{ "jms.topic.vdsm_requests", 23 },
		{ "jms.topic.vdsm_irs_requests", 27 },
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(req); i++)
		if (n >= req[i].n && !memcmp(d, req[i].s, req[i].n) &&
		    (n == req[i].n || d[req[i].n] == '.'))
			return true;
	return false;
}

static enum outcome on_send(struct stomp_session *s, const struct stomp_frame *f,
			    const struct known *k)
{
	struct stomp_broker *b = s->b;
	if (!k->dest.v) {
		send_error(s, "Missing destination header", &k->receipt);
		return REFUSED;
	}
	if (is_request_dest(k->dest.v, k->dest.n)) {
		/* The reply-to becomes a reply destination: nobody may SEND to it. */
		stomp_dest_reserve(b, k->reply_to.v, k->reply_to.n);
		s->served = true;
		if (b->ops.request)
			b->ops.request(b->host, s, f->body, f->body_len, k->ct.v, k->ct.n,
				       k->reply_to.v, k->reply_to.n, k->flow.v, k->flow.n);
		return DONE;
	}
	if (stomp_dest_reserved(b, k->dest.v, k->dest.n)) {
		/* Replies and events come from the server only: no forgeries. */
		b->st.reserved_refused++;
		send_error(s, "destination is reserved", &k->receipt);
		return REFUSED;
	}
	bool refused;
	size_t n = stomp_forward(b, k->dest.v, k->dest.n, k->ct.v, k->ct.n, f->hdr, f->nhdr,
				 f->body, f->body_len, &refused);
	if (refused) {
		send_error(s, "memory budget exceeded", &k->receipt);
		return REFUSED;
	}
	if (!n) {
		send_error(s, "Subscription not available", &k->receipt);
		return REFUSED;
	}
	return DONE;
}

static enum outcome handle(struct stomp_session *s, const struct stomp_frame *f)
{
	struct known k;
	enum outcome o;
	known_scan(f, &k);
	switch (f->cmd) {
	case STOMP_CONNECT:
	case STOMP_STOMP:
		o = on_connect(s, &k);
		break;
	case STOMP_SEND:
		o = on_send(s, f, &k);
		break;
	case STOMP_SUBSCRIBE:
		o = on_subscribe(s, &k);
		break;
	case STOMP_UNSUBSCRIBE:
		o = on_unsubscribe(s, &k);
		break;
	case STOMP_ACK:
	case STOMP_NACK:
		o = DONE;  /* delivery is auto-ack */
		break;
	case STOMP_BEGIN:
	case STOMP_COMMIT:
	case STOMP_ABORT:
		send_error(s, "transactions not supported", &k.receipt);
		o = REFUSED;
		break;
	case STOMP_DISCONNECT:
		if (k.receipt.v)
			send_receipt(s, &k.receipt);
		s->closing = true;
		return DONE;
	default: {
		/* A server frame from a client. */
		char msg[48];
		snprintf(msg, sizeof(msg), "Unexpected frame %s", stomp_cmd_name(f->cmd));
		send_error(s, msg, &k.receipt);
		return CLOSE;
	}
	}
	if (o == DONE && k.receipt.v)
		send_receipt(s, &k.receipt);
	return o;
}

long stomp_session_feed(struct stomp_session *s, char *buf, size_t len)
{
	struct stomp_broker *b = s->b;
	if (s->closing || !s->alive)
		return (long)len;  /* after DISCONNECT or an error: input is ignored */
	struct stomp_header *hdr = b->hdr;
	struct stomp_session *outer = b->feeding;
	if (outer)  /* fed from inside another session's callback */
		hdr = xcalloc(b->cfg.limits.max_headers, sizeof(*hdr));
	b->feeding = s;
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = b->cfg.limits.max_headers };
	size_t pos = 0;
	long ret;
	while (pos < len && !s->closing) {
		const char *why = "Malformed frame";
		long r = stomp_parse(&s->parser, &b->cfg.limits, buf + pos, len - pos, &f, &why);
		if (r == VD_AGAIN)
			break;
		if (r < 0) {
			send_error(s, why, NULL);
			s->closing = true;
			ret = r;
			goto out;
		}
		pos += (size_t)r;
		if (f.cmd == STOMP_NONE)
			continue;
		b->st.frames_in++;
		if (handle(s, &f) == CLOSE) {
			s->closing = true;
			ret = VD_EPROTO;
			goto out;
		}
		if (b->ops.pause && b->ops.pause(b->host, s, s->conn))
			break;
	}
	ret = (long)pos;
out:
	b->feeding = outer;
	if (outer)
		free(hdr);
	return ret;
}
