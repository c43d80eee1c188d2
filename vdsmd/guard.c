/* vdsmd/guard.c - what keeps the daemon bounded under attack (issue 17):
 * the global memory budget every connection is charged to, the timeouts of
 * connections that hold a slot without doing anything useful, the pause of
 * accept() when descriptors run out, the per-address connection limit and
 * giving freed memory back to the system.
 *
 * Charging: a connection's charge is recomputed (guard_account) after its
 * input was processed and after its output was flushed; it is its input and
 * output buffers' capacity, its STOMP session and subscriptions, a fixed
 * share for the connection itself and, on TLS, OpenSSL's buffers.  Before a
 * buffer grows (input appended, a reply queued), guard_admit() makes room:
 * the biggest holders are closed first (an ERROR frame when nothing else is
 * queued for them, one log line each, rate-limited), so the sum never passes
 * the budget by more than one read.  Past 7/8 of the budget new requests get
 * code 1100 (guard_overloaded).
 *
 * Below the connections (conn.c calls in to charge and admit): a connection
 * is closed through the function guard_start was handed (conn_close), never
 * by calling up into conn.c.  Loop thread only, like the rest of the server. */
#include "server.h"

#include <errno.h>
#include <malloc.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "../common/log.h"
#include "../rpc/rpc.h"

#define CONN_COST 2048            /* the struct, watchers, peer name */
#define TLS_COST (48 * 1024)      /* OpenSSL's read/write buffers and state */
#define TRIM_AFTER (4u << 20)     /* malloc_trim once this much was freed */
#define SWEEP_EVERY 1.0
#define ACCEPT_PAUSE 0.5

static size_t conn_charge(const struct vd_conn *c)
{
	if (c->dead)
		return 0;
	return CONN_COST + (c->ssl ? TLS_COST : 0) + c->in.cap + c->out.cap + c->held_bytes +
	       stomp_session_memory(c->sess);
}

static void note_usage(struct vd_server *s);

/* What the main port's connections and the image server's transfers hold
 * (the image threads charge the same budget, vdsmd.h struct vd_mem_share). */
static size_t in_use(const struct vd_server *s)
{
	return s->mem_used + __atomic_load_n(&s->d->mem.image, __ATOMIC_RELAXED);
}

static void publish(struct vd_server *s)
{
	__atomic_store_n(&s->d->mem.loop, s->mem_used, __ATOMIC_RELAXED);
}

void guard_account(struct vd_conn *c)
{
	struct vd_server *s = c->srv;
	size_t now = conn_charge(c);
	s->mem_used = s->mem_used - c->charged + now;
	c->charged = now;
	note_usage(s);
}

static void note_usage(struct vd_server *s)
{
	publish(s);
	if (s->mem_used > s->mem_peak)
		s->mem_peak = s->mem_used;
	bool over = guard_overloaded(s);
	if (over != s->overloaded) {
		s->overloaded = over;
		if (s->d->rpc)
			rpc_engine_set_overloaded(s->d->rpc, over);
		log_limited(&s->ll_budget, over ? VD_LOG_WARN : VD_LOG_INFO,
			    "%s of memory_budget %zu in use: %s", over ? "over 7/8" : "below 7/8",
			    s->budget, over ? "new requests get code 1100" : "requests run again");
	}
}

void guard_release(struct vd_conn *c)
{
	struct vd_server *s = c->srv;
	size_t bufs = c->in.cap + c->out.cap;
	s->mem_used -= c->charged;
	c->charged = 0;
	publish(s);
	if (s->overloaded && !guard_overloaded(s)) {
		s->overloaded = false;
		if (s->d->rpc)
			rpc_engine_set_overloaded(s->d->rpc, false);
	}
	if (bufs >= 64 * 1024)
		s->freed_since_trim += bufs;
}

bool guard_overloaded(const struct vd_server *s)
{
	return s->budget && in_use(s) > s->budget - s->budget / 8;
}

/* Best effort: an ERROR frame straight to the socket (the victim's buffers
 * are about to be freed; nothing is queued behind it). */
static void tell(struct vd_conn *c, const char *msg)
{
	if (c->state != CS_STOMP || c->out.len)
		return;
	struct vd_buf b = VD_BUF_INIT;
	struct stomp_header h = { "message", 7, msg, strlen(msg) };
	stomp_write_frame(&b, STOMP_ERROR, &h, 1, NULL, 0);
	if (c->ssl)
		(void)tls_write(c, b.data, b.len);
	else if (write(c->fd, b.data, b.len) < 0)
		(void)0;  /* the peer is not reading: nothing more to do */
	buf_free(&b);
}

/* Close a holder of too much memory.  conn_close() (s->close_conn) gives
 * its buffers back at once: every readable connection of one loop iteration
 * may fill up to the budget, and when closed connections were freed only at
 * the end of the iteration, 10 slow readers took 275 MB through a 48 MB
 * budget. */
static void evict(struct vd_conn *v, const char *what)
{
	struct vd_server *s = v->srv;
	s->n.budget_closes++;
	log_limited(&s->ll_budget, VD_LOG_WARN,
		    "connection %s holds %zu bytes, %zu of memory_budget %zu in use: %s",
		    v->peer, v->charged, s->mem_used, s->budget, what);
	tell(v, "memory budget exceeded");
	s->close_conn(v, "memory budget");  /* frees its buffers at once (conn.c) */
}

static struct vd_conn *biggest(struct vd_server *s)
{
	struct vd_conn *best = NULL;
	for (struct vd_conn *c = s->conns; c; c = c->next)
		if (!c->dead && (!best || c->charged > best->charged))
			best = c;
	return best;
}

bool guard_admit(struct vd_conn *c, size_t more)
{
	struct vd_server *s = c->srv;
	if (c->dead)
		return false;
	guard_account(c);
	while (s->budget && in_use(s) + more > s->budget) {
		struct vd_conn *v = biggest(s);
		if (!v || v->charged <= CONN_COST + TLS_COST) {
			/* nothing big left to close: this growth alone does not fit,
			 * and c cannot go on without it (its stream would lose bytes) */
			evict(c, "what it needs next does not fit, closing it");
			return false;
		}
		evict(v, "closing the biggest holder");
		if (v == c)
			return false;
	}
	return true;
}

/* What buf_grow adds to b's capacity (doubling) for n more bytes, which is
 * what the connection is charged for. */
static size_t growth(const struct vd_buf *b, size_t n)
{
	size_t need = b->len + n, cap = b->cap ? b->cap : 256;
	if (need <= b->cap)
		return 0;
	while (cap < need)
		cap = cap * 2 > cap ? cap * 2 : need;
	return cap - b->cap;
}

bool guard_admit_buf(struct vd_conn *c, const struct vd_buf *b, size_t n)
{
	return guard_admit(c, growth(b, n));
}

/* Issue 27: fan-out (a SEND forwarded to every subscriber, an event) was
 * copied into each subscriber's output before anything was charged.  Now
 * each copy is charged before it is queued, and one that does not fit is
 * not queued (the broker drops it for that subscriber, counted).  Nobody is
 * closed here: the loop is inside the broker's walk of a destination. */
bool guard_charge_out(struct vd_conn *c, size_t bytes)
{
	struct vd_server *s = c->srv;
	if (c->dead)
		return false;
	size_t more = growth(&c->out, bytes);
	if (s->budget && in_use(s) + more > s->budget)
		return false;
	/* charged now; guard_account (after the flush) puts the exact figure */
	c->charged += more;
	s->mem_used += more;
	note_usage(s);
	return true;
}

bool guard_fanout_fits(const struct vd_server *s, size_t bytes)
{
	/* whole, and without taking the daemon into the 1100 regime */
	return !s->budget || in_use(s) + bytes <= s->budget - s->budget / 8;
}

void guard_input(struct vd_conn *c, bool progress)
{
	/* A frame completed (progress): what is left is a new frame, its clock
	 * starts now.  A busy client whose frames straddle reads is not an
	 * incomplete frame that never ends. */
	if (c->in.len == 0)
		c->partial_since = 0;
	else if (progress || !c->partial_since)
		c->partial_since = ev_now(c->srv->d->loop);
}

static void timeout_close(struct vd_conn *c, uint64_t *counter, const char *what,
			  unsigned limit)
{
	struct vd_server *s = c->srv;
	(*counter)++;
	log_limited(&s->ll_timeout, VD_LOG_WARN, "connection %s: %s for %u s, closing", c->peer,
		    what, limit);
	tell(c, what);
	s->close_conn(c, what);
}

/* Over 7/8 of the budget (requests answered 1100): close the biggest
 * holders, each holding more than a sixteenth of the budget, until below
 * it again, so the refusal of new work lasts only as long as it takes to
 * cut the connections that hold the memory (slow readers, huge frames), and
 * well-behaved small clients are served again. */
static void relieve(struct vd_server *s)
{
	ev_tstamp now = ev_now(s->d->loop);
	while (guard_overloaded(s)) {
		struct vd_conn *v = biggest(s);
		if (v && v->charged > s->budget / 16) {
			evict(v, "over 7/8 of it, closing the biggest holder");
			continue;
		}
		/* Many small holders (slow readers throttled at CONN_BACKLOG,
		 * issue 27): the biggest whose output has not moved for 2 s. */
		v = NULL;
		for (struct vd_conn *c = s->conns; c; c = c->next)
			if (!c->dead && c->out.len && now - c->last_out >= 2.0 &&
			    (!v || c->charged > v->charged))
				v = c;
		if (!v)
			return;
		evict(v, "over 7/8 of it, closing the biggest reader that does not read");
	}
}

/* Bytes already waiting in the socket: the timer may run before the read
 * callback of the same loop iteration (after a long iteration), and a
 * client whose bytes are here is not silent. */
static bool input_waiting(const struct vd_conn *c)
{
	int n = 0;
	return c->fd >= 0 && ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

static void sweep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vd_server *s = w->data;
	const struct vd_config *cfg = &s->d->cfg;
	ev_tstamp now = ev_now(loop);
	relieve(s);
	for (struct vd_conn *c = s->conns, *next; c; c = next) {
		next = c->next;
		if (c->dead || c->lingering || c->closing)
			continue;
		/* waiting for us (a request pending, output still being written) or
		 * already sent more: not a connection to time out now.  Output that
		 * has not moved for 2 s does not count: a peer that does not read
		 * must not keep its slot that way. */
		bool busy = c->refs > 0 || input_waiting(c) ||
			    (c->out.len > 0 && now - c->last_out < 2.0);
		if ((c->state == CS_STOMP || c->state == CS_HTTP) && c->partial_since && !busy &&
		    !c->http_busy && now - c->partial_since >= cfg->frame_timeout) {
			timeout_close(c, &s->n.frame_timeouts, "incomplete frame", cfg->frame_timeout);
			continue;
		}
		if (c->state == CS_STOMP && !stomp_session_established(c->sess) && !busy &&
		    now - c->t_open >= cfg->connect_timeout) {
			timeout_close(c, &s->n.connect_timeouts, "no CONNECT", cfg->connect_timeout);
			continue;
		}
		if (c->state == CS_STOMP && c->recv_iv <= 0 && !busy &&
		    now - c->last_in >= cfg->idle_timeout) {
			timeout_close(c, &s->n.idle_timeouts, "idle without heart-beats",
				      cfg->idle_timeout);
			continue;
		}
		if (c->state == CS_HTTP && !busy && !c->http_busy && c->in.len == 0 &&
		    now - VD_MAX(c->last_in, c->last_out) >= cfg->http_keepalive_timeout) {
			s->n.keepalive_timeouts++;
			s->close_conn(c, "keep-alive timeout");
		}
	}
	if (s->freed_since_trim >= TRIM_AFTER) {
		/* Large buffers of closed connections: give the pages back (glibc
		 * keeps freed heap memory otherwise; measured 4.1 GB kept). */
		s->freed_since_trim = 0;
		malloc_trim(0);
	}
}

static void accept_resume_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vd_server *s = w->data;
	if (!s->stopping && s->lfd >= 0)
		ev_io_start(loop, &s->lio);
}

void guard_pause_accept(struct vd_server *s, int err)
{
	struct ev_loop *loop = s->d->loop;
	s->n.accept_pauses++;
	log_limited(&s->ll_accept, VD_LOG_ERROR, "accept: %s; not accepting for %.1f s",
		    strerror(err), ACCEPT_PAUSE);
	ev_io_stop(loop, &s->lio);
	ev_timer_stop(loop, &s->accept_resume);
	ev_timer_set(&s->accept_resume, ACCEPT_PAUSE, 0);
	ev_timer_start(loop, &s->accept_resume);
}

/* A connection that holds a slot without being a client yet: TLS handshake
 * or protocol detection not done, or STOMP that neither CONNECTed nor had
 * a request served and has nothing pending (the engine sends CONNECT right
 * after its SUBSCRIBEs; a client whose CONNECT was lost but which sends
 * requests is a client, as under VDSM). */
static bool unestablished(const struct vd_conn *c)
{
	if (c->dead || c->closing)
		return false;
	if (c->state == CS_HANDSHAKE || c->state == CS_DETECT)
		return true;
	return c->state == CS_STOMP && c->refs == 0 && !stomp_session_established(c->sess);
}

bool guard_evict_unestablished(struct vd_server *s)
{
	struct vd_conn *old = NULL;
	for (struct vd_conn *c = s->conns; c; c = c->next)
		if (unestablished(c) && (!old || c->t_open <= old->t_open))
			old = c;
	if (!old)
		return false;
	s->n.evicted_unestablished++;
	log_limited(&s->ll_refuse, VD_LOG_WARN,
		    "connection limit %u reached: closing %s, the oldest connection that is not a "
		    "client yet", s->d->cfg.max_connections, old->peer);
	tell(old, "connection limit reached");
	s->close_conn(old, "evicted: connection limit reached before it was a client");
	return true;
}

static void sa_addr(const struct sockaddr *sa, unsigned char *out, unsigned char *len)
{
	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		*len = 4;
	} else if (sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
		*len = 16;
	} else {
		*len = 0;
	}
}

void guard_set_address(struct vd_conn *c, const struct sockaddr *sa)
{
	sa_addr(sa, c->addr, &c->alen);
}

unsigned guard_count_address(const struct vd_server *s, const struct sockaddr *sa)
{
	unsigned char a[16], alen;
	sa_addr(sa, a, &alen);
	unsigned n = 0;
	/* O(connections); only when max_connections_per_address is set. */
	for (const struct vd_conn *c = s->conns; c; c = c->next)
		if (!c->dead && c->alen == alen && !memcmp(c->addr, a, alen))
			n++;
	return n;
}

static size_t default_budget(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || psz <= 0)
		return (size_t)1 << 30;
	return (size_t)pages * (size_t)psz / 4;
}

void guard_start(struct vd_server *s, void (*close_conn)(struct vd_conn *c, const char *why))
{
	struct ev_loop *loop = s->d->loop;
	s->close_conn = close_conn;
	s->budget = s->d->cfg.memory_budget ? s->d->cfg.memory_budget : default_budget();
	__atomic_store_n(&s->d->mem.budget, s->budget, __ATOMIC_RELAXED);
	/* Buffers of 256 KiB and more (partial frames, pending output) come from
	 * mmap and go back to the system when freed; glibc's default threshold
	 * climbs to 32 MiB after the first large free, leaving them on the heap. */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	/* 20 lines per kind per 10 s, then a count (was: one line per event,
	 * 43 594 failed handshakes logged in 20 s) */
	s->ll_accept.burst = s->ll_refuse.burst = s->ll_tls.burst = 20;
	s->ll_detect.burst = s->ll_timeout.burst = s->ll_budget.burst = 20;
	s->ll_overflow.burst = 20;
	ev_timer_init(&s->sweep, sweep_cb, SWEEP_EVERY, SWEEP_EVERY);
	s->sweep.data = s;
	ev_timer_start(loop, &s->sweep);
	ev_init(&s->accept_resume, accept_resume_cb);
	s->accept_resume.data = s;
	log_info("memory_budget %zu bytes%s", s->budget,
		 s->d->cfg.memory_budget ? "" : " (a quarter of RAM)");
}

void guard_stop(struct vd_server *s)
{
	struct ev_loop *loop = s->d->loop;
	ev_timer_stop(loop, &s->sweep);
	ev_timer_stop(loop, &s->accept_resume);
}
