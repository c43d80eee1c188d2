/* vdsmd/broker_msg.c - broker mode, the messages: subscribing, dispatching
 * each request MESSAGE through the JSON-RPC engine, reply-then-ACK, the
 * reply cache that answers redelivered requests, events to the topic, and
 * the /metrics lines.  See broker.h. */
#include "broker_int.h"

#include <stdlib.h>
#include <string.h>

#include "../common/arena.h"
#include "../common/log.h"
#include "../rpc/rpc.h"

struct brk_req {
	struct vd_broker *b;
	unsigned gen;
	char *ack;        /* ack id of the MESSAGE */
	char *reply_to;   /* NULL: nowhere to answer */
};

static struct stomp_header hdr(const char *n, const char *v)
{
	struct stomp_header h = { n, strlen(n), v, v ? strlen(v) : 0 };
	return h;
}

/* ---- reply cache ----------------------------------------------------------- */

/* "s:<string>" / "i:<int>" for a request id, then " <reply-to>" (ids are
 * only unique per requester); false for other id types. */
static bool id_key(const struct vd_value *id, const char *reply_to, char **out)
{
	if (!id)
		return false;
	struct vd_buf k = VD_BUF_INIT;
	if (id->type == VD_STRING) {
		buf_puts(&k, "s:");
		buf_append(&k, id->v.s.ptr, id->v.s.len);
	} else if (id->type == VD_INT) {
		buf_printf(&k, "i:%lld", (long long)id->v.i);
	} else if (id->type == VD_UINT) {
		buf_printf(&k, "i:%llu", (unsigned long long)id->v.u);
	} else {
		return false;
	}
	buf_putc(&k, ' ');
	buf_puts(&k, reply_to ? reply_to : "");
	buf_putc(&k, 0);
	*out = k.data;
	return true;
}

static struct brk_cache_entry *cache_at(struct vd_broker *b, size_t i)
{
	return &b->cache[(b->cache_head + i) % BRK_CACHE_MAX];
}

static void cache_pop(struct vd_broker *b)
{
	struct brk_cache_entry *e = cache_at(b, 0);
	b->cache_bytes -= e->len + strlen(e->key);
	free(e->key);
	free(e->bytes);
	memset(e, 0, sizeof(*e));
	b->cache_head = (b->cache_head + 1) % BRK_CACHE_MAX;
	b->cache_n--;
}

static void cache_expire(struct vd_broker *b)
{
	uint64_t now = vd_now_ms();
	while (b->cache_n && now - cache_at(b, 0)->t_ms > BRK_CACHE_TTL_MS)
		cache_pop(b);
}

/* Takes key. */
static void cache_put(struct vd_broker *b, char *key, const struct rpc_response *r)
{
	size_t need = r->len + strlen(key);
	if (need > BRK_CACHE_BYTES / 4) {  /* one huge reply would flush everything */
		free(key);
		return;
	}
	cache_expire(b);
	while (b->cache_n && (b->cache_n == BRK_CACHE_MAX ||
			      b->cache_bytes + need > BRK_CACHE_BYTES))
		cache_pop(b);
	struct brk_cache_entry *e = cache_at(b, b->cache_n);
	e->key = key;
	e->bytes = xmalloc(r->len ? r->len : 1);
	memcpy(e->bytes, r->bytes, r->len);
	e->len = r->len;
	e->codec = r->codec;
	e->t_ms = vd_now_ms();
	b->cache_n++;
	b->cache_bytes += need;
}

static const struct brk_cache_entry *cache_get(struct vd_broker *b, const char *key)
{
	cache_expire(b);
	for (size_t i = b->cache_n; i-- > 0;) {
		const struct brk_cache_entry *e = cache_at(b, i);
		if (strcmp(e->key, key) == 0)
			return e;
	}
	return NULL;
}

static void brk_cache_free(struct vd_broker *b)
{
	while (b->cache_n)
		cache_pop(b);
	free(b->cache);
	b->cache = NULL;
}

/* The id of a request body (single request or a batch of one), as a cache
 * key; false when it has none we can key on.  Only redelivered requests pay
 * for this decode. */
static bool body_key(struct vd_broker *b, const struct vd_codec *codec, const char *body,
		     size_t len, const char *reply_to, char **key)
{
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_value *v = NULL;
	struct vd_codec_error err;
	bool ok = false;
	if (codec->decode(&a, body, len, &b->d->limits, &v, &err) == 0 && v) {
		if (v->type == VD_ARRAY && v->v.arr.n == 1)
			v = &v->v.arr.items[0];
		if (v->type == VD_OBJECT)
			ok = id_key(vd_obj_get(v, "id"), reply_to, key);
	}
	arena_free(&a);
	return ok;
}

/* ---- replies ----------------------------------------------------------------- */

static void send_reply(struct vd_broker *b, const char *reply_to, const char *bytes,
		       size_t len, const struct vd_codec *codec)
{
	struct stomp_header h[] = {
		hdr("destination", reply_to),
		hdr("content-type", codec->content_type),
	};
	stomp_write_frame(&b->out, STOMP_SEND, h, VD_ARRAY_SIZE(h), bytes, len);
	b->st.replies++;
}

static void send_ack(struct vd_broker *b, const char *ack)
{
	if (!ack)
		return;
	stomp_client_ack(&b->sc, ack);
	b->st.acked++;
}

static void dispatch(struct vd_broker *b, const char *body, size_t len, const char *ack,
		     const char *reply_to, const char *ct, const char *flow);
static bool answer_from_cache(struct vd_broker *b, const char *body, size_t len,
			      const char *ack, const char *reply_to, const char *ct);

static void run_parked(struct vd_broker *b)
{
	while (b->parked && b->stale_pending == 0 && brk_online(b)) {
		struct brk_parked *p = b->parked;
		b->parked = p->next;
		if (!b->parked)
			b->parked_tail = &b->parked;
		if (!answer_from_cache(b, p->body, p->len, p->ack, p->reply_to, p->ct))
			dispatch(b, p->body, p->len, p->ack, p->reply_to, p->ct, p->flow);
		free(p->body);
		free(p->ack);
		free(p->reply_to);
		free(p->ct);
		free(p->flow);
		free(p);
	}
}

static void brk_parked_free(struct vd_broker *b)
{
	while (b->parked) {
		struct brk_parked *p = b->parked;
		b->parked = p->next;
		free(p->body);
		free(p->ack);
		free(p->reply_to);
		free(p->ct);
		free(p->flow);
		free(p);
	}
	b->parked_tail = &b->parked;
}

static void brk_release(struct vd_broker *b);

static void on_reply(void *ctx, const struct rpc_response *r)
{
	struct brk_req *q = ctx;
	struct vd_broker *b = q->b;
	bool current = q->gen == b->gen && brk_online(b) && !b->freed;
	/* Off the books first: a flush below may lose the connection, which
	 * counts what is still pending as stale. */
	b->pending--;
	if (!current && b->stale_pending)
		b->stale_pending--;
	char *key = NULL;
	if (r->len && id_key(r->id, q->reply_to, &key)) {
		if (!b->freed)
			cache_put(b, key, r);
		else
			free(key);
	}
	if (current) {
		/* The reply first, then the ACK, in one stream: the broker
		 * cannot see the ACK without the reply before it. */
		if (r->len && q->reply_to)
			send_reply(b, q->reply_to, r->bytes, r->len, r->codec);
		else if (r->len)
			log_warn("broker: request without reply-to answered into the void");
		send_ack(b, q->ack);
		brk_flush(b);
	} else {
		/* Its delivery died with the old connection: the broker
		 * redelivers the request, which the cache now answers. */
		b->st.stale_replies++;
	}
	free(q->ack);
	free(q->reply_to);
	free(q);
	if (b->freed) {
		if (b->pending == 0)
			brk_release(b);
		return;
	}
	if (!current)
		run_parked(b);
}

static void dispatch(struct vd_broker *b, const char *body, size_t len, const char *ack,
		     const char *reply_to, const char *ct, const char *flow)
{
	struct vdsmd *d = b->d;
	const struct vd_codec *codec = daemon_codec_for(d, ct, ct ? strlen(ct) : 0);
	if (!codec)
		codec = d->codec;
	struct brk_req *q = xcalloc(1, sizeof(*q));
	q->b = b;
	q->gen = b->gen;
	q->ack = ack ? xstrdup(ack) : NULL;
	q->reply_to = reply_to ? xstrdup(reply_to) : NULL;
	b->pending++;
	if (flow)
		vd_log_flow(VD_LOG_DEBUG, flow, "broker request, %zu bytes (%s)", len, codec->name);
	struct rpc_request_info info = { .codec = codec, .flow_id = flow, .transport = "broker" };
	rpc_dispatch(d->rpc, &info, body, len, on_reply, q);
}

/* ---- frames ------------------------------------------------------------------ */

static char *hdup(const struct stomp_frame *f, const char *name)
{
	size_t n = 0;
	const char *v = stomp_frame_get(f, name, &n);
	return v ? xstrndup(v, n) : NULL;
}

/* Answer a redelivered request from the cache; true when it was. */
static bool answer_from_cache(struct vd_broker *b, const char *body, size_t len,
			      const char *ack, const char *reply_to, const char *ct)
{
	const struct vd_codec *codec = daemon_codec_for(b->d, ct, ct ? strlen(ct) : 0);
	char *key = NULL;
	const struct brk_cache_entry *e = NULL;
	if (codec && body_key(b, codec, body, len, reply_to, &key))
		e = cache_get(b, key);
	if (e) {
		log_info("broker: redelivered request %s answered from the reply cache", key + 2);
		b->st.duplicates++;
		if (reply_to)
			send_reply(b, reply_to, e->bytes, e->len, e->codec);
		send_ack(b, ack);
		brk_flush(b);
	}
	free(key);
	return e != NULL;
}

static void brk_on_message(struct vd_broker *b, const struct stomp_frame *f)
{
	b->st.requests++;
	char *ack = hdup(f, "ack");
	if (!ack)
		ack = hdup(f, "message-id");
	char *reply_to = hdup(f, "reply-to");
	char *ct = hdup(f, "content-type");
	char *flow = hdup(f, "ovirtCorrelationId");
	const char *redel = stomp_frame_get(f, "redelivered", NULL);
	const char *body = f->body ? f->body : "";
	size_t len = f->body_len;
	if (redel && strcmp(redel, "true") == 0) {
		b->st.redelivered++;
		if (b->stale_pending) {
			/* Maybe still running from the previous connection: wait
			 * for those to finish, then look in the cache. */
			struct brk_parked *p = xcalloc(1, sizeof(*p));
			p->body = xmalloc(len + 1);
			memcpy(p->body, body, len);
			p->body[len] = 0;
			p->len = len;
			p->ack = ack;
			p->reply_to = reply_to;
			p->ct = ct;
			p->flow = flow;
			*b->parked_tail = p;
			b->parked_tail = &p->next;
			return;
		}
		if (answer_from_cache(b, body, len, ack, reply_to, ct))
			goto out;
	}
	dispatch(b, body, len, ack, reply_to, ct, flow);
out:
	free(ack);
	free(reply_to);
	free(ct);
	free(flow);
}

static void subscribe(struct vd_broker *b)
{
	char prefetch[16];
	snprintf(prefetch, sizeof(prefetch), "%u", b->d->cfg.broker_prefetch);
	struct stomp_header h[] = {
		hdr("destination", b->requests_dest),
		hdr("id", "vdsm-requests"),
		hdr("ack", "client-individual"),
		hdr("prefetch-count", prefetch),
		hdr("durable", "true"),
		hdr("auto-delete", "false"),
	};
	stomp_write_frame(&b->out, STOMP_SUBSCRIBE, h, VD_ARRAY_SIZE(h), NULL, 0);
	b->subscribed = true;
	log_info("broker %s: consuming %s (prefetch %s)", b->where, b->requests_dest, prefetch);
	brk_flush(b);
}

/* Requests wait in the broker's queue until the engine is ready: consuming
 * them earlier would only answer code 99 (e.g. right after a restart). */
static void ready_poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vd_broker *b = w->data;
	if (!brk_online(b) || b->subscribed) {
		ev_timer_stop(loop, w);
		return;
	}
	if (rpc_engine_ready(b->d->rpc)) {
		ev_timer_stop(loop, w);
		subscribe(b);
	}
}

static void brk_on_connected(struct vd_broker *b)
{
	b->subscribed = false;
	if (rpc_engine_ready(b->d->rpc)) {
		subscribe(b);
	} else {
		ev_timer_init(&b->ready_poll, ready_poll_cb, 0.05, 0.05);
		b->ready_poll.data = b;
		ev_timer_start(b->d->loop, &b->ready_poll);
	}
	run_parked(b);
}

static void brk_on_lost(struct vd_broker *b)
{
	b->subscribed = false;
	ev_timer_stop(b->d->loop, &b->ready_poll);
	/* Every request still in the engine belongs to a dead delivery now. */
	b->stale_pending = b->pending;
	/* Parked deliveries died with the connection too: the broker
	 * redelivers them. */
	brk_parked_free(b);
}

/* ---- events ------------------------------------------------------------------ */

void broker_publish_event(struct vd_broker *b, const char *bytes, size_t len,
			  const struct vd_codec *codec)
{
	if (!b)
		return;
	/* Never queued while down, never over a bound while up. */
	if (!brk_online(b) || b->out.len > b->d->cfg.max_output / 2) {
		b->st.publish_failures++;
		return;
	}
	struct stomp_header h[] = {
		hdr("destination", b->events_dest),
		hdr("content-type", codec->content_type),
	};
	stomp_write_frame(&b->out, STOMP_SEND, h, VD_ARRAY_SIZE(h), bytes, len);
	b->st.events++;
	brk_flush(b);
}

/* ---- stats and metrics --------------------------------------------------------- */

void broker_stats(const struct vd_broker *b, struct vd_broker_stats *out)
{
	*out = b->st;
	out->connected = brk_online(b);
	out->cache_entries = b->cache_n;
	out->cache_bytes = b->cache_bytes;
}

static void metric(struct vd_buf *o, const char *name, const char *type, const char *help,
		   uint64_t v)
{
	buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name,
		   (unsigned long long)v);
}

void broker_metrics_format(const struct vd_broker *b, struct vd_buf *o)
{
	if (!b)
		return;
	struct vd_broker_stats s;
	broker_stats(b, &s);
	metric(o, "vdsmd_broker_connected", "gauge",
	       "Whether broker mode is logged in and subscribed (1) or not (0).", s.connected);
	metric(o, "vdsmd_broker_connects_total", "counter", "Successful broker logins.",
	       s.connects);
	metric(o, "vdsmd_broker_reconnects_total", "counter",
	       "Broker connection attempts after the first.", s.reconnects);
	metric(o, "vdsmd_broker_connect_failures_total", "counter",
	       "Broker connection attempts that failed (refused, TLS, login).",
	       s.connect_failures);
	metric(o, "vdsmd_broker_requests_received_total", "counter",
	       "Request messages received from the broker.", s.requests);
	metric(o, "vdsmd_broker_requests_acked_total", "counter",
	       "Request messages ACKed (after their reply was written).", s.acked);
	metric(o, "vdsmd_broker_requests_redelivered_total", "counter",
	       "Request messages the broker marked redelivered.", s.redelivered);
	metric(o, "vdsmd_broker_requests_deduplicated_total", "counter",
	       "Redelivered requests answered from the reply cache (not executed again).",
	       s.duplicates);
	metric(o, "vdsmd_broker_replies_total", "counter", "Responses sent to reply-to.",
	       s.replies);
	metric(o, "vdsmd_broker_stale_replies_total", "counter",
	       "Responses finished after their broker connection was lost (cached only).",
	       s.stale_replies);
	metric(o, "vdsmd_broker_events_published_total", "counter",
	       "Events published to the broker topic.", s.events);
	metric(o, "vdsmd_broker_publish_failures_total", "counter",
	       "Events not published: broker disconnected or output over its bound.",
	       s.publish_failures);
	metric(o, "vdsmd_broker_reply_cache_entries", "gauge", "Replies in the reply cache.",
	       s.cache_entries);
	metric(o, "vdsmd_broker_reply_cache_bytes", "gauge", "Bytes in the reply cache.",
	       s.cache_bytes);
}

/* ---- lifecycle --------------------------------------------------------------- */

static const struct brk_events link_events = {
	.connected = brk_on_connected,
	.message = brk_on_message,
	.lost = brk_on_lost,
};

int broker_start(struct vdsmd *d, char *why, size_t whylen)
{
	int rc = brk_open(d, &link_events, why, whylen);
	struct vd_broker *b = d->broker;
	if (rc == 0 && b) {
		b->cache = xcalloc(BRK_CACHE_MAX, sizeof(*b->cache));
		b->parked_tail = &b->parked;
	}
	return rc;
}

/* Everything goes: the reply cache, parked deliveries, then the link's
 * (after broker_free, once no request is left in the engine). */
static void brk_release(struct vd_broker *b)
{
	brk_cache_free(b);
	brk_parked_free(b);
	brk_link_free(b);
}

void broker_free(struct vd_broker *b)
{
	if (!b)
		return;
	broker_stop(b);
	b->d->broker = NULL;
	b->freed = true;
	if (b->pending == 0)
		brk_release(b);
}
