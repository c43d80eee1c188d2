/* vdsmd/conn.c - one client connection: non-blocking I/O with write-first
 * output, input buffering, detection/handshake timeouts, STOMP heart-beats,
 * output bound, deferred free.  The protocols are above it: what a detected
 * protocol does is the table server_start was handed (s->protos); conn.c
 * calls no protocol handler by name. */
#include "server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "../common/log.h"

/* Output buffers bigger than this are released once flushed, input
 * buffers always: an idle connection holds no buffer memory. */
#define OUT_KEEP 4096

static void io_cb(struct ev_loop *loop, ev_io *w, int revents);
static void rt_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void st_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void wt_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void conn_linger(struct vd_conn *c);

static void peer_name(const struct sockaddr *sa, char *out, size_t n)
{
	char a[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		port = ntohs(in->sin_port);
		snprintf(out, n, "%s:%u", a, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		port = ntohs(in6->sin6_port);
		snprintf(out, n, "[%s]:%u", a, port);
	} else {
		snprintf(out, n, "unknown");
	}
}

/* The server-side address of the socket, numeric; an IPv4-mapped IPv6
 * address as plain IPv4 (what VDSM's getDeviceByIP matches either way). */
static void local_name(int fd, char *out, size_t n)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl = sizeof(ss);
	out[0] = '\0';
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)&ss)->sin_addr, out,
			  (socklen_t)n);
	} else if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)&ss)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a))
			inet_ntop(AF_INET, &a->s6_addr[12], out, (socklen_t)n);
		else
			inet_ntop(AF_INET6, a, out, (socklen_t)n);
	}
}

void conn_new(struct vd_server *s, int fd, const struct sockaddr *sa)
{
	struct vdsmd *d = s->d;
	struct vd_conn *c = xcalloc(1, sizeof(*c));
	c->srv = s;
	c->fd = fd;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	peer_name(sa, c->peer, sizeof(c->peer));
	local_name(fd, c->local, sizeof(c->local));
	guard_set_address(c, sa);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	c->last_in = c->last_out = c->t_open = ev_now(d->loop);
	ev_io_init(&c->io, io_cb, fd, EV_READ);
	c->io.data = c;
	ev_io_start(d->loop, &c->io);
	ev_init(&c->rt, rt_cb);
	c->rt.data = c;
	ev_init(&c->st, st_cb);
	c->st.data = c;
	ev_init(&c->wt, wt_cb);
	c->wt.data = c;
	if (s->tls) {
		c->state = CS_HANDSHAKE;
		c->rt.repeat = d->cfg.handshake_timeout;
		tls_conn_start(c);
	} else {
		c->state = CS_DETECT;
		c->rt.repeat = d->cfg.detect_timeout;
	}
	ev_timer_again(d->loop, &c->rt);
	guard_account(c);
	log_debug("connection from %s", c->peer);
}

void conn_ref(struct vd_conn *c)
{
	c->refs++;
}

/* After the peer's end of stream: close once nothing is owed to it. */
static void conn_check_eof(struct vd_conn *c)
{
	if (c->eof && !c->dead && c->refs == 0 && c->out.len == 0)
		conn_close(c, "peer closed");
}

void conn_unref(struct vd_conn *c)
{
	c->refs--;
	conn_check_eof(c);
}

/* A closed connection's memory goes back now, not when the reaper frees it
 * at the end of the loop iteration (every readable connection of one
 * iteration could fill the memory budget again meanwhile).  The input only
 * when it is not being parsed up the stack; nothing holds on to the output
 * (a late delivery to the session starts a new, small buffer). */
static void conn_release_buffers(struct vd_conn *c)
{
	buf_free(&c->out);
	if (c->srv->feeding != c)
		buf_free(&c->in);
}

void conn_close(struct vd_conn *c, const char *why)
{
	if (c->dead)
		return;
	struct vd_server *s = c->srv;
	struct ev_loop *loop = s->d->loop;
	guard_release(c);
	c->dead = true;
	ev_io_stop(loop, &c->io);
	ev_timer_stop(loop, &c->rt);
	ev_timer_stop(loop, &c->st);
	ev_timer_stop(loop, &c->wt);
	if (c->ssl)
		tls_conn_free(c, c->closing && c->out.len == 0 && c->state != CS_HANDSHAKE);
	close(c->fd);
	c->fd = -1;
	conn_release_buffers(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = NULL;
	c->next = s->dead;
	s->dead = c;
	s->nconns--;
	s->n.closed++;
	log_debug("connection %s closed: %s", c->peer, why ? why : "done");
}

void conn_reap(struct vd_server *s)
{
	struct vd_conn **pp = &s->dead;
	while (*pp) {
		struct vd_conn *c = *pp;
		if (c->sess) {
			stomp_session_free(c->sess);
			c->sess = NULL;
		}
		if (c->refs) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		conn_destroy(c);
	}
}

void conn_destroy(struct vd_conn *c)
{
	wire_free(c);
	buf_free(&c->in);
	buf_free(&c->out);
	free(c);
}

void conn_want_write(struct vd_conn *c, bool want_write)
{
	if (c->want_write == want_write || c->dead)
		return;
	c->want_write = want_write;
	struct ev_loop *loop = c->srv->d->loop;
	ev_io_stop(loop, &c->io);
	int events = (c->eof ? 0 : EV_READ) | (want_write ? EV_WRITE : 0);
	if (events) {
		ev_io_set(&c->io, c->fd, events);
		ev_io_start(loop, &c->io);
	}
}

/* One write: plain send(), or SSL_write (one TLS record per frame, or
 * several of at most 16 KiB for a bigger frame, none shared).  send() with
 * MSG_NOSIGNAL rather than write(): the socket's own call, which skips the
 * generic file write path in the kernel (issue 25), and a peer gone answers
 * EPIPE without SIGPIPE even where the signal is not ignored (the daemon
 * still ignores it for OpenSSL's writes). */
static long write_some(struct vd_conn *c, const char *p, size_t n)
{
	if (c->ssl) {
		/* 0 from SSL_write: the peer is gone (EPIPE, close_notify); it is
		 * no progress to retry (that would spin), close instead. */
		long w = tls_write(c, p, n);
		if (w == VD_AGAIN && tls_want_write(c))
			conn_want_write(c, true);
		return w == 0 ? VD_EIO : w;
	}
	long w = send(c->fd, p, n, MSG_NOSIGNAL);
	if (w < 0)
		w = (errno == EAGAIN || errno == EWOULDBLOCK) ? VD_AGAIN
		    : errno == EINTR ? 0 : VD_EIO;
	return w;
}

void conn_flush(struct vd_conn *c)
{
	if (c->dead || c->state == CS_HANDSHAKE)
		return;
	struct vd_server *s = c->srv;
	size_t off = 0;
	bool wait = false;
	while (off < c->out.len) {
		/* one frame (TLS record) per write, PROTOCOL.md 2; all that is
		 * queued for a packed client (no frame boundaries recorded) */
		size_t want = wire_next_len(c, c->out_base + off, c->out.len - off);
		if (!c->mid_frame && !wire_write_fits(c, want)) {
			wait = true;
			break;
		}
		long n = write_some(c, c->out.data + off, want);
		if (n == VD_AGAIN)
			break;
		if (n < 0) {
			conn_close(c, "write error");
			return;
		}
		c->mid_frame = (size_t)n < want;
		wire_sent(c, (size_t)n);
		off += (size_t)n;
		s->n.bytes_out += (uint64_t)n;
	}
	if (off) {
		c->last_out = ev_now(s->d->loop);
		buf_consume(&c->out, off);
		c->out_base += off;
	}
	if (c->throttled && !c->eof && !conn_backlogged(c))  /* drained: its next frames */
		ev_feed_event(s->d->loop, &c->io, EV_READ);
	if (c->out.len == 0) {
		if (c->out.cap > OUT_KEEP)
			buf_shrink(&c->out);
		guard_account(c);
		conn_want_write(c, false);
		if (c->closing && !c->eof)
			conn_linger(c);
		else if (c->closing && c->eof)
			conn_close(c, "closed after flush");
		else
			conn_check_eof(c);
		return;
	}
	if (c->out.len > s->d->cfg.max_output) {
		s->n.overflow_closes++;
		log_limited(&s->ll_overflow, VD_LOG_WARN,
			    "connection %s: %zu bytes of output pending (max_output %zu), closing slow reader",
			    c->peer, c->out.len, s->d->cfg.max_output);
		conn_close(c, "output overflow");
		return;
	}
	guard_account(c);
	if (wait) {
		/* writable, but not for a whole frame head: look again soon */
		conn_want_write(c, false);
		if (!ev_is_active(&c->wt)) {
			ev_timer_set(&c->wt, 0.002, 0.);
			ev_timer_start(s->d->loop, &c->wt);
		}
		return;
	}
	conn_want_write(c, true);
}

static void wt_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	conn_flush(w->data);
}

/* Close after the last output was written.  Closing a socket whose receive
 * queue holds unread bytes makes the kernel send a reset, and the peer may
 * then lose the ERROR frame (or HTTP error) it was just sent: shut the write
 * side instead, discard input until the peer closes, and close for good after
 * VD_LINGER seconds at most (a peer that keeps sending is cut then). */
static void conn_linger(struct vd_conn *c)
{
	struct vd_server *s = c->srv;
	struct ev_loop *loop = s->d->loop;
	if (c->lingering)
		return;
	if (s->stopping || shutdown(c->fd, SHUT_WR) < 0) {
		conn_close(c, "closed after flush");
		return;
	}
	c->lingering = true;
	ev_timer_stop(loop, &c->st);
	ev_timer_stop(loop, &c->rt);
	c->rt.repeat = VD_LINGER;
	ev_timer_again(loop, &c->rt);
}

void conn_set_heartbeat(struct vd_conn *c, unsigned send_ms, unsigned recv_ms)
{
	struct ev_loop *loop = c->srv->d->loop;
	c->send_iv = send_ms / 1000.0;
	c->recv_iv = recv_ms ? 2.0 * recv_ms / 1000.0 : 0;
	if (c->dead)
		return;
	ev_timer_stop(loop, &c->rt);
	ev_timer_stop(loop, &c->st);
	if (c->recv_iv > 0) {
		c->rt.repeat = c->recv_iv;
		ev_timer_again(loop, &c->rt);
	}
	if (c->send_iv > 0) {
		c->st.repeat = c->send_iv;
		ev_timer_again(loop, &c->st);
	}
}

/* Detection / handshake timeout, then the receive heart-beat: the timer is
 * rearmed lazily for the time left since the last input. */
static void rt_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vd_conn *c = w->data;
	struct vd_server *s = c->srv;
	if (c->lingering) {
		conn_close(c, "closed after flush");
		return;
	}
	if (c->state == CS_HANDSHAKE) {
		s->n.tls_failures++;
		log_limited(&s->ll_tls, VD_LOG_WARN, "connection %s: TLS handshake timed out",
			    c->peer);
		conn_close(c, "handshake timeout");
		return;
	}
	if (c->state == CS_DETECT) {
		s->n.detect_timeouts++;
		log_limited(&s->ll_detect, VD_LOG_WARN,
			    "connection %s: no protocol detected within %u s, closing", c->peer,
			    s->d->cfg.detect_timeout);
		conn_close(c, "detect timeout");
		return;
	}
	if (c->recv_iv <= 0) {
		ev_timer_stop(loop, w);
		return;
	}
	ev_tstamp idle = ev_now(loop) - c->last_in;
	if (idle >= c->recv_iv) {
		s->n.hb_timeouts++;
		log_warn("connection %s: no heart-beat for %.1f s, closing", c->peer, idle);
		conn_close(c, "heart-beat timeout");
		return;
	}
	w->repeat = c->recv_iv - idle;
	ev_timer_again(loop, w);
}

static void st_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vd_conn *c = w->data;
	ev_tstamp idle = ev_now(loop) - c->last_out;
	if (idle + 0.001 >= c->send_iv) {
		if (c->out.len == 0) {
			buf_putc(&c->out, '\n');
			wire_frame_end(c);
			conn_flush(c);
			if (c->dead)
				return;
		}
		/* Pending output (slow reader): a heart-beat would only queue. */
		w->repeat = c->send_iv;
	} else {
		w->repeat = c->send_iv - idle;
	}
	ev_timer_again(loop, w);
}

bool conn_backlogged(const struct vd_conn *c)
{
	return c->state == CS_STOMP && c->out.len + c->held_bytes >= CONN_BACKLOG;
}

/* Hand input to the protocol; returns bytes consumed.  A STOMP connection
 * whose output is backlogged gets one frame handled per call (the session
 * stops after it: on_pause); the rest waits in its input buffer until the
 * output drains (conn_flush) or more bytes come. */
static size_t process(struct vd_conn *c, char *buf, size_t len)
{
	struct vd_server *s = c->srv;
	size_t used = 0;
	while (used < len && !c->dead && !c->closing) {
		if (c->state == CS_DETECT) {
			int p = detect_protocol(buf + used, len - used);
			if (p == VD_AGAIN)
				break;
			if (p <= PROTO_NONE || p >= PROTO__COUNT || !s->protos[p].feed) {
				s->n.unknown_proto++;
				log_limited(&s->ll_detect, VD_LOG_WARN,
					    "unrecognized protocol from %s, closing", c->peer);
				conn_close(c, "unrecognized protocol");
				break;
			}
			ev_timer_stop(s->d->loop, &c->rt);
			log_debug("connection %s speaks %s", c->peer, proto_name((enum vd_proto)p));
			c->proto = &s->protos[p];
			c->state = c->proto->state;
			if (c->proto->open)
				c->proto->open(c);
			continue;
		}
		long n;
		struct vd_conn *outer = s->feeding;
		s->feeding = c;
		n = c->proto->feed(c, buf + used, len - used);
		s->feeding = outer;
		if (n < 0) {
			/* Framing error: the answer is in out; close once flushed. */
			c->closing = true;
			return len;
		}
		if (n == 0)
			break;
		used += (size_t)n;
		if (conn_backlogged(c)) {
			c->throttled = used < len;
			break;
		}
	}
	return used;
}

void conn_process(struct vd_conn *c)
{
	if (c->dead || c->in.len == 0)
		return;
	size_t used = process(c, c->in.data, c->in.len);
	buf_consume(&c->in, used);
	if (c->in.len == 0)
		buf_shrink(&c->in);
	guard_input(c, used > 0);
}

/* New bytes: parse straight from the scratch buffer when nothing is
 * buffered (the common case), keep only the unparsed tail. */
static void input(struct vd_conn *c, char *data, size_t n)
{
	struct vd_server *s = c->srv;
	s->n.bytes_in += n;
	c->last_in = ev_now(s->d->loop);
	if (c->closing)
		return; /* after an error or DISCONNECT input is discarded */
	if (c->in.len == 0) {
		size_t used = process(c, data, n);
		if (!c->dead && !c->closing && used < n) {
			if (!guard_admit_buf(c, &c->in, n - used))
				return;  /* closed: the budget has no room for it */
			buf_append(&c->in, data + used, n - used);
			guard_input(c, true);  /* a new partial frame */
		}
	} else {
		/* Fill up to the bound and let the parser look first: it answers an
		 * over-limit frame with an ERROR frame before the bound is hit. */
		size_t limit = s->d->cfg.max_frame_size + s->d->cfg.max_header_line * 2 + 4096;
		while (n && !c->dead && !c->closing) {
			size_t take = c->in.len < limit ? VD_MIN(n, limit - c->in.len) : 0;
			if (!take) {
				log_warn("connection %s: input over %zu bytes unparsed, closing",
					 c->peer, limit);
				conn_close(c, "input overflow");
				return;
			}
			if (!guard_admit_buf(c, &c->in, take))
				return;
			buf_append(&c->in, data, take);
			data += take;
			n -= take;
			conn_process(c);
		}
	}
}

static void on_readable(struct vd_conn *c)
{
	struct vd_server *s = c->srv;
	if (c->throttled && !c->dead) {
		/* frames left over by the backlog: one more each time */
		c->throttled = false;
		conn_process(c);
	}
	/* While backlogged: buffered frames first, else one read (one frame)
	 * per loop iteration, so the connection still moves towards
	 * max_output and every readable event does some work. */
	for (int i = 0; i < 16 && !c->dead && !c->throttled; i++) {
		long n;
		if (c->ssl) {
			n = tls_read(c, s->rbuf, VD_RBUF);
			if (n == VD_AGAIN && tls_want_write(c))
				conn_want_write(c, true);  /* TLS must write to read on */
		} else {
			/* recv(), not read(): the socket's own call (issue 25) */
			n = recv(c->fd, s->rbuf, VD_RBUF, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				n = (errno == EAGAIN || errno == EWOULDBLOCK) ? VD_AGAIN : VD_EIO;
		}
		if (n == VD_AGAIN)
			break;
		if (n == 0 && !c->closing && (c->refs || c->out.len) &&
		    (c->state == CS_STOMP || c->state == CS_HTTP)) {
			/* Half-close: requests already received are still answered
			 * (conn_check_eof closes once they are). */
			bool w = c->want_write;
			c->eof = true;
			c->want_write = !w;  /* re-arm the watcher without EV_READ */
			conn_want_write(c, w);
			break;
		}
		if (n <= 0) {
			conn_close(c, n == 0 ? "peer closed" : "read error");
			return;
		}
		input(c, s->rbuf, (size_t)n);
		/* Drained: a short plain read, or TLS holding nothing read ahead
		 * (one read less per request than reading on to VD_AGAIN; the
		 * socket's next bytes show as readable again). */
		if (conn_backlogged(c) || (c->ssl ? !tls_pending(c) : (size_t)n < VD_RBUF))
			break;
	}
	/* Records TLS read ahead and this call left (backlog, the 16-read
	 * cap) are in no socket: come back for them as conn_flush does for
	 * throttled input, or on the next loop iteration. */
	if (!c->dead && c->ssl && !c->eof && tls_pending(c)) {
		if (conn_backlogged(c))
			c->throttled = true;
		else
			ev_feed_event(s->d->loop, &c->io, EV_READ);
	}
	if (!c->dead)
		conn_flush(c);
	if (!c->dead)
		guard_account(c);
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct vd_conn *c = w->data;
	if (c->state == CS_HANDSHAKE) {
		const char *why = NULL;
		int r = tls_handshake(c, &why);
		if (r < 0) {
			conn_close(c, why);
			return;
		}
		conn_want_write(c, r == 0 && tls_want_write(c));
		if (r == 0)
			return;
		c->state = CS_DETECT;
		c->rt.repeat = c->srv->d->cfg.detect_timeout;
		ev_timer_again(loop, &c->rt);
		revents |= EV_READ; /* decrypted bytes may already be waiting */
	}
	if (revents & EV_WRITE) {
		conn_flush(c);
		if (c->dead)
			return;
	}
	if (revents & EV_READ)
		on_readable(c);
}
