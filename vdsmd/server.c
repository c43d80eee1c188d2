/* vdsmd/server.c - the listener (bind, accept, connection limit), the glue
 * between the STOMP broker and the JSON-RPC engine, event fan-out, signals
 * and graceful shutdown. */
#include "server.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "../common/log.h"
#include "broker.h"
#include "../rpc/event.h"
#include "../rpc/rpc.h"

#define EVENTS_DEST STOMP_EVENTS_DEST
#define STOP_GRACE 2.0  /* seconds to flush before connections are cut */
/* events are fanned out in batches: at most this long (s) after the first
 * event of a batch was queued (bus_arm) */
#define VD_EVENT_BATCH 0.005

/* ---- listener ---------------------------------------------------------- */

static int try_bind(const struct sockaddr *sa, socklen_t sl, char *why, size_t whylen)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return -1;
	}
	int one = 1, zero = 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, sa, sl) < 0 || listen(fd, 511) < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int bind_listener(struct vd_server *s, const char *addr, unsigned port,
			 char *why, size_t whylen)
{
	char r[256] = "";
	int fd = -1;
	if (strcmp(addr, "::") == 0) {
		struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
					   .sin6_addr = IN6ADDR_ANY_INIT };
		fd = try_bind((struct sockaddr *)&a6, sizeof(a6), r, sizeof(r));
		if (fd < 0) {
			log_warn("cannot listen on [::]:%u (%s), falling back to 0.0.0.0", port, r);
			struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(port),
						  .sin_addr.s_addr = htonl(INADDR_ANY) };
			fd = try_bind((struct sockaddr *)&a4, sizeof(a4), r, sizeof(r));
		}
	} else {
		char ps[16];
		snprintf(ps, sizeof(ps), "%u", port);
		struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
					  .ai_socktype = SOCK_STREAM }, *ai = NULL;
		int g = getaddrinfo(addr, ps, &hints, &ai);
		if (g) {
			snprintf(why, whylen, "listen: cannot resolve \"%s\": %s", addr, gai_strerror(g));
			return VD_EINVAL;
		}
		for (struct addrinfo *p = ai; p && fd < 0; p = p->ai_next)
			fd = try_bind(p->ai_addr, p->ai_addrlen, r, sizeof(r));
		freeaddrinfo(ai);
	}
	if (fd < 0) {
		snprintf(why, whylen, "cannot listen on %s port %u: %s", addr, port, r);
		return VD_EIO;
	}
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));  /* getsockname may fail: AF_INET 0.0.0.0:0 */
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	char a[INET6_ADDRSTRLEN] = "?";
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (void *)&ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		s->bound_port = ntohs(in6->sin6_port);
		snprintf(s->bound, sizeof(s->bound), "[%s]:%u", a, s->bound_port);
	} else {
		struct sockaddr_in *in = (void *)&ss;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		s->bound_port = ntohs(in->sin_port);
		snprintf(s->bound, sizeof(s->bound), "%s:%u", a, s->bound_port);
	}
	s->lfd = fd;
	return 0;
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct vd_server *s = w->data;
	const struct vd_config *cfg = &s->d->cfg;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				guard_pause_accept(s, errno);  /* would spin: pause, resume on a timer */
			else if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_limited(&s->ll_accept, VD_LOG_ERROR, "accept: %s", strerror(errno));
			return;
		}
		if (cfg->max_connections_per_address &&
		    guard_count_address(s, (struct sockaddr *)&ss) >= cfg->max_connections_per_address) {
			s->n.refused_per_address++;
			log_limited(&s->ll_refuse, VD_LOG_WARN,
				    "connection limit per address %u reached, refusing a connection",
				    cfg->max_connections_per_address);
			close(fd);
			continue;
		}
		/* Full: a connection that has not finished its handshake or shown
		 * a protocol makes room before a new one is refused (bare connects
		 * must not keep valid clients out). */
		if (s->nconns >= cfg->max_connections && !guard_evict_unestablished(s)) {
			s->n.refused++;
			log_limited(&s->ll_refuse, VD_LOG_WARN,
				    "connection limit %u reached, refusing a connection",
				    cfg->max_connections);
			close(fd);
			continue;
		}
		s->n.accepted++;
		conn_new(s, fd, (struct sockaddr *)&ss);
	}
}

/* ---- STOMP broker glue ------------------------------------------------- */

void stomp_conn_open(struct vd_conn *c)
{
	c->sess = stomp_session_new(c->srv->broker, &c->out, c);
	wire_set_framing(c, false);  /* the engine's framing until CONNECT says otherwise */
}

long stomp_conn_feed(struct vd_conn *c, char *buf, size_t len)
{
	long n = stomp_session_feed(c->sess, buf, len);
	if (n >= 0 && stomp_session_closing(c->sess))
		c->closing = true;
	return n;
}

static void stomp_reply(void *ctx, const struct rpc_response *r)
{
	struct stomp_req *q = ctx;
	struct vd_server *s = q->srv;
	struct vd_conn *c = q->conn;
	size_t total = r->len + r->ext_len;  /* a borrowed result in the middle */
	if (total && c && !c->dead && !guard_admit_buf(c, &c->out, total + 512)) {
		/* no room in the memory budget even after closing bigger holders:
		 * c was closed (it was the biggest) */
	} else if (total && c && !c->dead && c->out.len &&
	    c->out.len + total > s->d->cfg.max_output) {
		/* The output bound holds before a reply is queued: a peer that
		 * does not read its replies is closed, not buffered for. */
		s->n.overflow_closes++;
		log_limited(&s->ll_overflow, VD_LOG_WARN,
			    "connection %s: %zu bytes of output pending (max_output %zu), closing "
			    "slow reader (a %zu-byte reply was next)", c->peer, c->out.len,
			    s->d->cfg.max_output, total);
		conn_close(c, "output overflow");
	} else if (total) {
		/* a connection closed but not yet reaped gets nothing (counted) */
		struct stomp_session *origin = stomp_session_alive(q->sess) && !(c && c->dead) ?
			q->sess : NULL;
		/* the cached part of a reply (rpc_result_borrow) is written from
		 * the cache: no copy into the engine's buffer first */
		const struct stomp_iov body[STOMP_BODY_PIECES] = {
			{ r->bytes, r->ext ? r->at : r->len },
			{ r->ext, r->ext_len },
			{ r->ext ? r->bytes + r->at : NULL, r->ext ? r->len - r->at : 0 },
		};
		stomp_broker_reply_iov(s->broker, origin, q->rtlen ? q->reply_to : NULL, q->rtlen,
				       r->codec->content_type, body, STOMP_BODY_PIECES);
	}
	if (q->conn) {
		/* Events held behind this request follow its reply (wire.c). */
		wire_req_done(q->conn, q);
		/* Replies finishing later (worker pool) are flushed here; those
		 * answered during the connection's own feed are written after it. */
		if (q->conn != s->feeding && q->conn->out.len)
			conn_flush(q->conn);
	}
	stomp_session_unref(q->sess);
	if (q->conn)
		conn_unref(q->conn);
	free(q);
}

static void on_request(void *host, struct stomp_session *ss, const char *body, size_t len,
		       const char *ct, size_t ctlen, const char *reply_to, size_t rtlen,
		       const char *flow_id, size_t flen)
{
	struct vd_server *s = host;
	struct vdsmd *d = s->d;
	struct vd_conn *c = s->feeding;
	/* Closed while the rest of its input was being parsed (memory budget,
	 * slow reader): the requests still in that input are not run.  Running
	 * them built replies nobody would get (measured: a 2 s stall of the loop
	 * from one read burst of batched Host.getAllVmStats). */
	if (c && c->dead)
		return;
	/* An unknown content-type is decoded with the startup codec (VDSM
	 * ignores the header); a bad body then gets -32700. */
	const struct vd_codec *codec = daemon_codec_for(d, ct, ctlen);
	if (!codec)
		codec = d->codec;
	char flow[128];
	if (flow_id && flen) {
		snprintf(flow, sizeof(flow), "%.*s", (int)VD_MIN(flen, sizeof(flow) - 1), flow_id);
		vd_log_flow(VD_LOG_DEBUG, flow, "stomp request from %s, %zu bytes (%s)",
			    c ? c->peer : "?", len, codec->name);
	}
	s->n.stomp_requests++;
	if (!reply_to)
		rtlen = 0;
	struct stomp_req *q = xmalloc(sizeof(*q) + rtlen + 1);
	q->srv = s;
	q->sess = ss;
	q->conn = c;
	q->rtlen = rtlen;
	memcpy(q->reply_to, reply_to ? reply_to : "", rtlen);
	q->reply_to[rtlen] = '\0';
	stomp_session_ref(ss);
	if (c) {
		conn_ref(c);
		wire_req_start(c, q);
	}
	struct rpc_request_info info = {
		.codec = codec,
		.flow_id = flow_id && flen ? flow : NULL,
		.transport = "stomp",
		.local_addr = c && c->local[0] ? c->local : NULL,
	};
	if (guard_overloaded(s))
		s->n.budget_refused++;  /* the engine answers 1100 (guard_account set it) */
	rpc_dispatch_pieces(d->rpc, &info, body, len, stomp_reply, q);
}

static void on_output(void *host, struct stomp_session *ss, void *conn)
{
	struct vd_server *s = host;
	struct vd_conn *c = conn;
	if (c && s->fanning) {  /* an event batch: one flush per connection after it */
		if (!c->fan_queued) {
			if (s->nfan == s->capfan) {
				s->capfan = s->capfan ? 2 * s->capfan : 64;
				s->fan = xrealloc(s->fan, s->capfan * sizeof(*s->fan));
			}
			c->fan_queued = true;
			s->fan[s->nfan++] = c;
		}
		return;
	}
	if (c && c != s->feeding)
		conn_flush(c);
}

static void on_frame(void *host, struct stomp_session *ss, void *conn)
{
	struct vd_server *s = host;
	struct vd_conn *c = conn;
	if (!c || c->dead)
		return;
	if (s->publishing && wire_hold_event(c))
		return;
	wire_frame_end(c);
}

static void on_heartbeat(void *host, struct stomp_session *ss, void *conn,
			 unsigned send_ms, unsigned recv_ms)
{
	if (conn)
		conn_set_heartbeat(conn, send_ms, recv_ms);
}

static void on_framing(void *host, struct stomp_session *ss, void *conn, bool packed)
{
	if (conn)
		wire_set_framing(conn, packed);
}

static size_t iov_total(const struct stomp_iov *iov, unsigned n)
{
	size_t t = 0;
	for (unsigned i = 0; i < n; i++)
		t += iov[i].len;
	return t;
}

/* A large MESSAGE (see stomp_broker_set_write_direct) to a plaintext connection with
 * nothing queued: writev head, body and NUL from where they are, so a
 * 1.5 MB reply is not first copied into the connection's output buffer
 * (and that buffer never grows to the reply's size).  TLS connections take
 * the buffered path. */
static size_t on_write_direct(void *host, struct stomp_session *ss, void *conn,
			      const struct stomp_iov *iov, unsigned n)
{
	struct vd_server *s = host;
	struct vd_conn *c = conn;
	if (!c || c->dead || c->ssl || c->fd < 0 || c->out.len || n > 8 || s->publishing ||
	    !wire_write_fits(c, iov_total(iov, n)))
		return 0;
	struct iovec v[8];
	for (unsigned i = 0; i < n; i++) {
		v[i].iov_base = (void *)iov[i].base;
		v[i].iov_len = iov[i].len;
	}
	ssize_t w = writev(c->fd, v, (int)n);
	if (w <= 0)
		return 0;  /* EAGAIN or an error: the buffered path sees it */
	s->n.bytes_out += (uint64_t)w;
	wire_sent(c, (size_t)w);
	c->last_out = ev_now(s->d->loop);
	c->direct_tail = (size_t)w < iov_total(iov, n);
	c->mid_frame = c->direct_tail;
	return (size_t)w;
}

static size_t on_pad(void *host, struct stomp_session *ss, void *conn, size_t off, size_t len)
{
	return conn ? wire_pad_frame(conn, off, len) : 0;
}

/* Fan-out and events are charged to the memory budget before they are
 * queued (guard.c, issue 27). */
static bool on_admit(void *host, struct stomp_session *ss, void *conn, size_t bytes)
{
	struct vd_conn *c = conn;
	return c && guard_charge_out(c, wire_frame_size(c, bytes));
}

static bool on_admit_fanout(void *host, struct stomp_session *origin, size_t n, size_t bytes)
{
	struct vd_server *s = host;
	/* each copy may still be padded for the engine's library (wire.c) */
	bytes += n * wire_pad_max(s);
	if (guard_fanout_fits(s, bytes))
		return true;
	struct vd_conn *c = origin ? stomp_session_conn(origin) : NULL;
	log_limited(&s->ll_budget, VD_LOG_WARN,
		    "connection %s: a SEND to %zu subscriptions needs %zu bytes, %zu of "
		    "memory_budget %zu in use: refused", c ? c->peer : "?", n, bytes, s->mem_used,
		    s->budget);
	return false;
}

static bool on_pause(void *host, struct stomp_session *ss, void *conn)
{
	return conn && conn_backlogged(conn);
}

static const struct stomp_broker_ops broker_ops = {
	.request = on_request,
	.output = on_output,
	.heartbeat = on_heartbeat,
	.framing = on_framing,
	.admit = on_admit,
	.admit_fanout = on_admit_fanout,
	.pause = on_pause,
};

/* ---- events ------------------------------------------------------------ */

static void deliver_event(void *ctx, const char *bytes, size_t len, const struct vd_codec *codec)
{
	struct vd_server *s = ctx;
	s->publishing = true;
	s->n.events_delivered += stomp_broker_publish(s->broker, EVENTS_DEST, codec->content_type,
						      bytes, len);
	s->publishing = false;
	if (s->d->broker)  /* broker mode: the host's topic too */
		broker_publish_event(s->d->broker, bytes, len, codec);
}

/* Near the memory budget: no event is queued for local subscribers
 * (counted); broker mode still publishes to the host's topic. */
static void drop_event(void *ctx, const char *bytes, size_t len, const struct vd_codec *codec)
{
	struct vd_server *s = ctx;
	s->n.budget_refused++;
	if (s->d->broker)
		broker_publish_event(s->d->broker, bytes, len, codec);
}

/* Fan out every queued event, then flush each connection once (conn_flush
 * still writes one frame per write).
 * Connections closed meanwhile are only marked dead (freed by the reaper,
 * never during a callback), so fan[] holds no dangling pointer. */
static void bus_fanout(struct vd_server *s)
{
	if (!s->d->bus)
		return;
	s->fanning = true;
	event_bus_drain(s->d->bus, guard_overloaded(s) ? drop_event : deliver_event, s);
	s->fanning = false;
	for (size_t i = 0; i < s->nfan; i++) {
		struct vd_conn *c = s->fan[i];
		c->fan_queued = false;
		conn_flush(c);
	}
	s->nfan = 0;
}

static void bus_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	bus_fanout(w->data);
}

/* A batch has begun: fan it out VD_EVENT_BATCH from now (events queued
 * meanwhile join it: fewer wake-ups and one flush per subscriber). */
static void bus_arm(struct vd_server *s)
{
	if (!ev_is_active(&s->bus_timer)) {
		ev_timer_set(&s->bus_timer, VD_EVENT_BATCH, 0.);
		ev_timer_start(s->d->loop, &s->bus_timer);
	}
}

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct vd_server *s = w->data;
	if (s->d->bus && event_bus_pending(s->d->bus))
		bus_arm(s);
}

/* Publishing thread, once per batch (the bus queue was empty): a loop busy
 * with I/O sees the batch in bus_prepare before it blocks again, so only a
 * loop blocked in poll (or about to be) is woken. */
static void bus_wake(void *ctx)
{
	struct vd_server *s = ctx;
	if (__atomic_load_n(&s->loop_polling, __ATOMIC_SEQ_CST))
		ev_async_send(s->d->loop, &s->ev_wake);
}

/* Before the loop blocks: say so first, then look at the queue (an event
 * queued after this look finds loop_polling set and wakes the loop). */
static void bus_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct vd_server *s = w->data;
	__atomic_store_n(&s->loop_polling, true, __ATOMIC_SEQ_CST);
	if (s->d->bus && event_bus_pending(s->d->bus))
		bus_arm(s);
}

static void bus_check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	struct vd_server *s = w->data;
	__atomic_store_n(&s->loop_polling, false, __ATOMIC_SEQ_CST);
}

/* ---- signals and shutdown --------------------------------------------- */

static void reaper_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct vd_server *s = w->data;
	if (s->dead)
		conn_reap(s);
	if (s->stopping && s->nconns == 0)
		ev_break(loop, EVBREAK_ALL);
}

static void stop_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vd_server *s = w->data;
	while (s->conns)
		conn_close(s->conns, "shutdown");
	ev_break(loop, EVBREAK_ALL);
}

static void begin_stop(struct vd_server *s, const char *why)
{
	struct ev_loop *loop = s->d->loop;
	if (s->stopping) {
		stop_timer_cb(loop, &s->stop_timer, 0);
		return;
	}
	log_info("%s: stopping (%u connections)", why, s->nconns);
	s->stopping = true;
	ev_io_stop(loop, &s->lio);
	if (s->lfd >= 0) {
		close(s->lfd);
		s->lfd = -1;
	}
	/* Close every connection once what it has pending is written. */
	for (struct vd_conn *c = s->conns, *next; c; c = next) {
		next = c->next;
		c->closing = true;
		conn_flush(c);
	}
	ev_timer_start(loop, &s->stop_timer);
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct vd_server *s = w->data;
	if (w->signum == SIGHUP) {
		if (log_reopen(&s->d->log) < 0)
			log_error("SIGHUP: cannot reopen the log file: %s", strerror(errno));
		else
			log_info("SIGHUP: log file reopened");
		return;
	}
	begin_stop(s, w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ---- lifecycle --------------------------------------------------------- */

int server_listen(struct vdsmd *d, char *why, size_t whylen)
{
	struct vd_server *s = xcalloc(1, sizeof(*s));
	struct ev_loop *loop = d->loop;
	s->d = d;
	s->lfd = -1;
	d->srv = s;
	/* Signals first: a SIGTERM during startup is handled once the loop
	 * runs (tests may signal right after the listening line). */
	ev_init(&s->lio, accept_cb);
	ev_init(&s->reaper, reaper_cb);
	ev_init(&s->ev_wake, wake_cb);
	ev_init(&s->bus_prepare, bus_prepare_cb);
	ev_init(&s->bus_check, bus_check_cb);
	ev_init(&s->bus_timer, bus_timer_cb);
	s->bus_timer.data = s;
	ev_timer_init(&s->stop_timer, stop_timer_cb, STOP_GRACE, 0);
	s->stop_timer.data = s;
	ev_signal_init(&s->sigterm, signal_cb, SIGTERM);
	ev_signal_init(&s->sigint, signal_cb, SIGINT);
	ev_signal_init(&s->sighup, signal_cb, SIGHUP);
	s->sigterm.data = s->sigint.data = s->sighup.data = s;
	ev_signal_start(loop, &s->sigterm);
	ev_signal_start(loop, &s->sigint);
	ev_signal_start(loop, &s->sighup);
	if (d->cfg.tls) {
		int rc = tls_ctx_new(&d->cfg, &s->tls, why, whylen);
		if (!rc)
			rc = tls_peer_ctx_new(&d->cfg, &s->peer_tls, why, whylen);
		if (!rc && d->cfg.image_port)
			rc = tls_image_ctx_new(&d->cfg, &s->image_tls, why, whylen);
		if (rc)
			return rc;
	}
	int rc = bind_listener(s, d->cfg.listen, d->cfg.port, why, whylen);
	if (rc)
		return rc;
	log_info("vdsmd %s listening on %s (tls %s, codec %s)", VDSMD_VERSION, s->bound,
		 d->cfg.tls ? "on" : "off", d->codec->name);
	return 0;
}

void server_start(struct vdsmd *d, const struct conn_proto *protos)
{
	struct vd_server *s = d->srv;
	s->protos = protos;
	struct ev_loop *loop = d->loop;
	struct stomp_broker_config bc = {
		.limits = { d->cfg.max_frame_size, d->cfg.max_headers, d->cfg.max_header_line },
		/* Events are dropped for a slow subscriber well before the
		 * connection itself is closed for overflow. */
		.max_output = d->cfg.max_output / 2,
		.server_name = "vdsmd/" VDSMD_VERSION,
	};
	s->broker = stomp_broker_new(&bc, &broker_ops, s);
	s->pad_to = d->cfg.stomp_batch_writes ? 0 : d->cfg.stomp_pad_frames;
	stomp_broker_set_write_direct(s->broker, on_write_direct);
	stomp_broker_set_pad_hook(s->broker, on_pad);
	stomp_broker_set_frame_hook(s->broker, on_frame);
	s->rbuf = xmalloc(VD_RBUF);
	ev_io_init(&s->lio, accept_cb, s->lfd, EV_READ);
	s->lio.data = s;
	ev_io_start(loop, &s->lio);
	ev_prepare_init(&s->reaper, reaper_cb);
	s->reaper.data = s;
	ev_prepare_start(loop, &s->reaper);
	ev_async_init(&s->ev_wake, wake_cb);
	s->ev_wake.data = s;
	ev_async_start(loop, &s->ev_wake);
	ev_prepare_init(&s->bus_prepare, bus_prepare_cb);
	s->bus_prepare.data = s;
	ev_prepare_start(loop, &s->bus_prepare);
	ev_check_init(&s->bus_check, bus_check_cb);
	s->bus_check.data = s;
	ev_check_start(loop, &s->bus_check);
	if (d->bus)
		event_bus_set_wake(d->bus, bus_wake, s);
	guard_start(s, conn_close);
}

void server_stop(struct vd_server *s)
{
	if (!s)
		return;
	struct ev_loop *loop = s->d->loop;
	ev_io_stop(loop, &s->lio);
	guard_stop(s);
	if (s->lfd >= 0) {
		close(s->lfd);
		s->lfd = -1;
	}
	while (s->conns) {
		struct vd_conn *c = s->conns;
		conn_flush(c);
		conn_close(c, "shutdown");
	}
}

void server_free(struct vd_server *s)
{
	if (!s)
		return;
	struct ev_loop *loop = s->d->loop;
	server_stop(s);
	conn_reap(s);
	if (s->d->bus)
		event_bus_set_wake(s->d->bus, NULL, NULL);
	ev_async_stop(loop, &s->ev_wake);
	ev_prepare_stop(loop, &s->bus_prepare);
	ev_check_stop(loop, &s->bus_check);
	ev_timer_stop(loop, &s->bus_timer);
	free(s->fan);
	ev_prepare_stop(loop, &s->reaper);
	ev_timer_stop(loop, &s->stop_timer);
	ev_signal_stop(loop, &s->sigterm);
	ev_signal_stop(loop, &s->sigint);
	ev_signal_stop(loop, &s->sighup);
	/* Connections still referenced by requests that never completed are
	 * released here. */
	while (s->dead) {
		struct vd_conn *c = s->dead;
		s->dead = c->next;
		conn_destroy(c);
	}
	if (s->broker)
		stomp_broker_free(s->broker);
	if (s->tls)
		tls_ctx_free(s->tls);
	if (s->peer_tls)
		tls_ctx_free(s->peer_tls);
	if (s->image_tls)
		tls_ctx_free(s->image_tls);
	free(s->rbuf);
	s->d->srv = NULL;
	free(s);
}
