/* vdsmd/server.h - the network core: listener, connections, protocol
 * detection, TLS, the STOMP broker glue, HTTP and metrics.
 *
 * Everything runs on the one libev loop thread.  Ownership:
 *  - struct vd_server (d->srv) owns the listening socket, every connection,
 *    the STOMP broker and the per-loop scratch read buffer.
 *  - struct vd_conn owns its fd, its buffers, its SSL object and its protocol
 *    state (STOMP session or HTTP state).  A connection is never freed inside
 *    its own callback: conn_close() marks it and a prepare watcher frees it
 *    once every reference (pending requests) is gone.
 *
 * The pure parts (detect_protocol, http_parse) are usable without a socket;
 * the fuzzer and the unit tests call them directly. */
#ifndef VD_VDSMD_SERVER_H
#define VD_VDSMD_SERVER_H

#include <ev.h>
#include <netinet/in.h>
#include "vdsmd.h"
#include "../stomp/stomp.h"
#include "../common/log.h"

/* ---- protocol detection (detect.c) ------------------------------------ */

enum vd_proto { PROTO_NONE = 0, PROTO_HTTP, PROTO_STOMP, PROTO__COUNT };

/* Decide from the first bytes of a stream: PROTO_HTTP, PROTO_STOMP,
 * PROTO_NONE (not a protocol we speak) or VD_AGAIN (need more bytes).
 * Decides as soon as the bytes disambiguate, trying detect.c's table of
 * protocols in order; the daemon's table (struct conn_proto, indexed by
 * enum vd_proto, handed to server_start) holds what a connection does in
 * each (its state, open, feed). */
int detect_protocol(const char *buf, size_t len);
const char *proto_name(enum vd_proto p);

/* ---- HTTP request parser (http.c) ------------------------------------- */

struct http_req {
	const char *method;
	size_t method_len;
	const char *path;
	size_t path_len;
	int minor;                  /* HTTP/1.<minor> */
	const char *content_type;
	size_t ct_len;
	long long content_length;   /* -1 when absent */
	bool chunked;
	bool conn_close;            /* "Connection: close" */
	bool conn_keep_alive;       /* "Connection: keep-alive" */
	size_t header_len;          /* bytes up to and including the blank line */
};

/* Parse the request line and headers at the start of buf.  Returns the
 * header length (> 0), VD_AGAIN (incomplete; nothing over max_header yet),
 * VD_ETOOBIG (header section longer than max_header) or VD_EPROTO. */
long http_parse(const char *buf, size_t len, size_t max_header, struct http_req *r);

/* ---- server ----------------------------------------------------------- */

enum conn_state { CS_HANDSHAKE, CS_DETECT, CS_STOMP, CS_HTTP };

struct vd_conn;
struct ssl_ctx_st;

struct vd_counters {
	uint64_t accepted, refused, closed, detect_timeouts, unknown_proto;
	uint64_t tls_failures, overflow_closes, hb_timeouts;
	uint64_t bytes_in, bytes_out;
	uint64_t http_requests, stomp_requests, http_errors;
	uint64_t events_delivered;
	/* guard.c (issue 17) */
	uint64_t budget_closes, budget_refused;
	uint64_t frame_timeouts, connect_timeouts, idle_timeouts, keepalive_timeouts;
	uint64_t accept_pauses, refused_per_address, evicted_unestablished;
};

struct vd_server {
	struct vdsmd *d;
	int lfd;
	char bound[INET6_ADDRSTRLEN + 16];  /* "addr:port" as bound */
	unsigned bound_port;
	ev_io lio;
	ev_prepare reaper;
	ev_async ev_wake;
	/* event batching (server.c, "events"): events queued on the bus are
	 * fanned out by bus_timer, VD_EVENT_BATCH after the first of a batch;
	 * bus_prepare arms it before the loop blocks and sets loop_polling,
	 * bus_check clears that when the loop wakes, and the bus's wake
	 * function signals ev_wake (which arms the timer) only while the loop
	 * is blocked.  During a fan-out, output is flushed once per connection
	 * after the batch (fan[]), not once per event. */
	ev_prepare bus_prepare;
	ev_check bus_check;
	ev_timer bus_timer;
	bool loop_polling;          /* __atomic: publishing threads read it */
	bool fanning;               /* inside a batch's fan-out */
	struct vd_conn **fan;       /* connections with output from this batch */
	size_t nfan, capfan;
	ev_signal sigterm, sigint, sighup;
	ev_timer stop_timer;
	struct stomp_broker *broker;
	struct ssl_ctx_st *tls;
	struct ssl_ctx_st *peer_tls;   /* client side, for peer hosts (tls on) */
	struct ssl_ctx_st *image_tls;  /* the image port's (tls on, image_port set) */
	struct vd_conn *conns;      /* doubly-linked list of live connections */
	struct vd_conn *dead;       /* closed, waiting to be freed */
	unsigned nconns;
	bool stopping;
	const struct conn_proto *protos;  /* per enum vd_proto (server_start) */
	struct vd_conn *feeding;    /* connection whose input is being parsed */
	bool publishing;            /* inside event fan-out (frames may be held) */
	size_t pad_to;              /* plaintext: shorter MESSAGE frames are padded
	                               to this size (wire.c); 0: no padding, over
	                               TLS either */
	char *rbuf;                 /* scratch read buffer, VD_RBUF bytes */
	struct vd_counters n;
	/* guard.c: memory budget, timeouts, accept pause, log limits */
	size_t budget;              /* bytes clients may hold together */
	size_t mem_used;            /* sum of every live connection's charge */
	size_t mem_peak;
	size_t freed_since_trim;    /* large buffers freed: malloc_trim soon */
	bool overloaded;            /* over 7/8 of the budget (the engine answers 1100) */
	ev_timer sweep;             /* timeouts, once a second */
	ev_timer accept_resume;     /* accept paused on EMFILE / ENFILE */
	void (*close_conn)(struct vd_conn *c, const char *why);  /* conn_close (guard_start) */
	struct vd_log_limit ll_accept, ll_refuse, ll_tls, ll_detect, ll_timeout, ll_budget,
			    ll_overflow;
};

#define VD_RBUF (64 * 1024)
/* Seconds a connection closed by the server keeps draining input after its
 * last frame went out, so the peer reads that frame instead of a reset. */
#define VD_LINGER 2.0

/* Create d->srv: the TLS context (when tls is on) and the bound listening
 * socket; logs "listening on ADDR:PORT" at info level (the first info line,
 * which tests read to find an ephemeral port).  0 or vd_err with why. */
int server_listen(struct vdsmd *d, char *why, size_t whylen);
/* What a connection does in each protocol detect_protocol() finds: the
 * daemon composes the table (daemon.c) and hands it to server_start; conn.c
 * only calls through it. */
struct conn_proto {
	enum conn_state state;
	void (*open)(struct vd_conn *c);                         /* NULL: nothing */
	long (*feed)(struct vd_conn *c, char *buf, size_t len);  /* bytes used, < 0 close */
};

/* Create the broker and start accepting, event fan-out and the signal
 * watchers (after the engine, bus and pool exist).  protos: PROTO__COUNT
 * entries indexed by enum vd_proto (a NULL feed: refused), kept. */
void server_start(struct vdsmd *d, const struct conn_proto *protos);
/* Stop accepting, flush and close every connection (no loop run needed). */
void server_stop(struct vd_server *s);
void server_free(struct vd_server *s);

/* ---- connections (conn.c) --------------------------------------------- */

struct vd_conn {
	struct vd_server *srv;
	struct vd_conn *prev, *next;
	int fd;
	enum conn_state state;
	const struct conn_proto *proto;  /* its entry of srv->protos, once detected */
	bool closing;        /* close once out is flushed */
	bool dead;
	bool want_write;     /* EV_WRITE armed */
	bool http_busy;      /* an HTTP request is being answered */
	bool http_close;     /* close after the current HTTP response */
	bool eof;            /* peer shut its write side: no more reading; closed once
	                        pending requests are answered and output is flushed */
	bool lingering;      /* output flushed, write side shut: draining input until
	                        the peer closes or VD_LINGER passes (then close) */
	bool fan_queued;     /* in srv->fan[]: flushed after the event batch */
	bool throttled;      /* input left unprocessed: output backlogged (conn.c) */
	unsigned refs;       /* pending requests holding the connection */
	ev_io io;
	ev_timer rt;         /* detect / handshake timeout, then receive heart-beat */
	ev_timer st;         /* send heart-beat */
	ev_timer wt;         /* a frame write that must wait for send memory (wire.c) */
	int sndbuf;          /* SO_SNDBUF last read (wire_write_fits) */
	size_t outq_max;     /* at least SIOCOUTQ: its last reading plus the bytes
	                        written since (wire_sent; acks only lower it) */
	bool mid_frame;      /* the last write ended inside a frame */
	ev_tstamp last_in, last_out;
	double recv_iv, send_iv;  /* seconds; 0 = off */
	struct vd_buf in, out;
	/* One frame per write (PROTOCOL.md 2).  Offsets count every byte ever
	 * appended to out; fend is a ring of the offsets where queued frames
	 * end (oldest first), out_mark the end of the last frame recorded. */
	uint64_t out_base;   /* offset of out.data[0] */
	uint64_t out_mark;
	uint64_t *fend;
	unsigned fend_head, fend_n, fend_cap;
	bool direct_tail;    /* out ends with the rest of a frame write_direct began */
	bool packed;         /* frames as they are: the client sent vdsmd-framing:packed
	                        (or stomp_pad_frames is 0); else laid out for the
	                        engine's library (wire.c) */
	/* Reply before events: STOMP requests in flight in dispatch order, and
	 * events held until the requests in flight when they came are answered. */
	struct stomp_req *req_head, *req_tail;
	uint64_t req_seq;
	struct held_frame *held, **held_tail;
	size_t held_bytes;
	void *ssl;           /* struct io_conn * (io/io.h) of a TLS connection, NULL
	                        on a plain one (tls.c) */
	struct stomp_session *sess;
	char peer[INET6_ADDRSTRLEN + 16];
	char local[INET6_ADDRSTRLEN];  /* our address on it (rpc_call.local_addr), or "" */
	/* guard.c */
	ev_tstamp t_open;        /* accepted */
	ev_tstamp partial_since; /* input holds an incomplete frame since (0: none) */
	size_t charged;          /* bytes charged to the budget for it */
	unsigned char addr[16];  /* source address (IPv4 in the first 4 bytes) */
	unsigned char alen;
};

void conn_new(struct vd_server *s, int fd, const struct sockaddr *sa);
/* Try to write the output buffer now; arm EV_WRITE for leftovers.  Closes
 * (deferred) on error or when output exceeds max_output. */
void conn_flush(struct vd_conn *c);
/* Mark closed: watchers stopped, fd closed, freed later by the reaper. */
void conn_close(struct vd_conn *c, const char *why);
/* Arm or disarm EV_WRITE (EV_READ stays armed). */
void conn_want_write(struct vd_conn *c, bool want_write);
void conn_ref(struct vd_conn *c);
void conn_unref(struct vd_conn *c);
/* Free closed connections whose references are gone (reaper). */
void conn_reap(struct vd_server *s);
void conn_set_heartbeat(struct vd_conn *c, unsigned send_ms, unsigned recv_ms);
/* Dispatch buffered input according to the connection's state. */
void conn_process(struct vd_conn *c);
/* A whole frame now ends the output buffer: record where, so it goes out
 * in its own write (PROTOCOL.md 2). */
void conn_frame_end(struct vd_conn *c);
/* Free a closed connection's memory (after conn_close, once unreferenced). */
void conn_destroy(struct vd_conn *c);
/* STOMP output (queued and held) is over CONN_BACKLOG: no further frame of
 * the connection's input is handled until it drains (issue 27: 50 clients
 * that never read made the loop copy replies for seconds per iteration). */
#define CONN_BACKLOG ((size_t)1 << 20)
bool conn_backlogged(const struct vd_conn *c);

/* ---- one frame per write (wire.c) -------------------------------------- */

/* A STOMP request in flight (server.c), linked into its connection's list
 * in dispatch order. */
struct stomp_req {
	struct vd_server *srv;
	struct stomp_session *sess;
	struct vd_conn *conn;
	struct stomp_req *prev, *next;
	uint64_t seq;
	size_t rtlen;     /* 0: default response destination */
	char reply_to[];  /* inline: one allocation per request */
};

/* A whole frame now ends c->out: record where, so that it goes out in its
 * own write and TLS records (PROTOCOL.md 2); a short MESSAGE is padded
 * first unless c->packed (wire.c: the frame rules for the engine's
 * library). */
void wire_frame_end(struct vd_conn *c);
/* What a len-byte MESSAGE frame holds in c->out once padded (the budget
 * charges this, not len), and the most padding any frame of s may get. */
size_t wire_frame_size(const struct vd_conn *c, size_t len);
/* The size a JSON MESSAGE of len bytes the broker is about to append at
 * offset off of c->out must grow to (0: as it is): the padding of
 * wire_frame_end, laid out as the frame is written (stomp_broker_set_pad_hook). */
size_t wire_pad_frame(const struct vd_conn *c, size_t off, size_t len);
size_t wire_pad_max(const struct vd_server *s);
/* May a write that starts a frame of want bytes go now?  False on a
 * plaintext connection with engine framing whose send memory might not
 * take the frame's head whole (conn_flush retries on c->wt). */
bool wire_write_fits(struct vd_conn *c, size_t want);
/* n bytes went to c's socket (bounds its send queue for wire_write_fits). */
static inline void wire_sent(struct vd_conn *c, size_t n)
{
	c->outq_max += n;
}
/* The client's framing choice at CONNECT (and the default when a STOMP
 * connection opens: packed false). */
void wire_set_framing(struct vd_conn *c, bool packed);
/* How many bytes the next write at stream offset pos may take: up to the
 * end of the frame there (over TLS, one record of it: a longer frame is cut
 * into equal records), or avail when no boundary is known (HTTP output,
 * stomp_batch_writes).  Drops the boundaries already written. */
size_t wire_next_len(struct vd_conn *c, uint64_t pos, size_t avail);
/* Event fan-out just appended a frame to c->out: while requests of c that
 * were in flight before it are unanswered, move it aside (reply before the
 * events it causes).  Returns true when held. */
bool wire_hold_event(struct vd_conn *c);
void wire_req_start(struct vd_conn *c, struct stomp_req *q);
/* q was answered: unlink it and queue the held events now due. */
void wire_req_done(struct vd_conn *c, struct stomp_req *q);
void wire_free(struct vd_conn *c);

/* ---- guard.c: memory budget, timeouts (issue 17) ----------------------- */

/* Budget from cfg (0: a quarter of RAM), the timeout sweep; after
 * server_start's watchers, before the first connection.  close_conn is how
 * guard closes a connection (conn_close: guard is below conn.c). */
void guard_start(struct vd_server *s, void (*close_conn)(struct vd_conn *c, const char *why));
void guard_stop(struct vd_server *s);
/* Recompute what c holds (buffers, subscriptions, TLS) and charge it. */
void guard_account(struct vd_conn *c);
/* Before c's memory grows by `more` bytes: the biggest holders are closed
 * until it fits the budget.  false when c itself was closed (it was the
 * biggest, or nothing could make room): do not grow. */
bool guard_admit(struct vd_conn *c, size_t more);
/* guard_admit for appending n bytes to b, one of c's buffers (counts the
 * capacity buf_grow would add). */
bool guard_admit_buf(struct vd_conn *c, const struct vd_buf *b, size_t n);
/* Fan-out (issue 27): `bytes` are about to be queued in c's output; they
 * are charged now, or false (nothing charged) when the budget cannot take
 * them.  Never closes a connection. */
bool guard_charge_out(struct vd_conn *c, size_t bytes);
/* Whether a fan-out of `bytes` (all subscribers together) fits the budget
 * whole, staying below 7/8 of it. */
bool guard_fanout_fits(const struct vd_server *s, size_t bytes);
/* Near the budget (7/8 of it): new requests are answered 1100. */
bool guard_overloaded(const struct vd_server *s);
/* c is being closed: its charge goes back; large buffers trigger a trim. */
void guard_release(struct vd_conn *c);
/* Input changed: track how long an incomplete frame has been waiting
 * (progress: bytes of the buffered input were consumed). */
void guard_input(struct vd_conn *c, bool progress);
/* The connection limit is reached: close the oldest connection that has not
 * finished its TLS handshake or shown a protocol (true when one was). */
bool guard_evict_unestablished(struct vd_server *s);
/* Connections from the source address of sa (for max_connections_per_address). */
unsigned guard_count_address(const struct vd_server *s, const struct sockaddr *sa);
void guard_set_address(struct vd_conn *c, const struct sockaddr *sa);
/* accept() failed with EMFILE / ENFILE / ENOBUFS / ENOMEM: stop accepting
 * for a moment. */
void guard_pause_accept(struct vd_server *s, int err);

/* ---- TLS (tls.c) ------------------------------------------------------ */

/* Build the server context from cfg (key, cert, CA); names a missing or
 * unreadable file in why. */
int tls_ctx_new(const struct vd_config *cfg, struct ssl_ctx_st **out, char *why, size_t whylen);
/* The image port's context: the same certificate and key, no client
 * certificate asked for (ca_file is not read). */
int tls_image_ctx_new(const struct vd_config *cfg, struct ssl_ctx_st **out, char *why,
		      size_t whylen);
/* The client context for calls to peer hosts (VM.migrationCreate on the
 * destination): this host's certificate and key, the peer's certificate
 * must chain to ca_file (no host name check, as VDSM). */
int tls_peer_ctx_new(const struct vd_config *cfg, struct ssl_ctx_st **out, char *why,
		     size_t whylen);
void tls_ctx_free(struct ssl_ctx_st *ctx);
void tls_conn_start(struct vd_conn *c);
/* Drive the handshake; returns 1 done, 0 in progress (tls_want_write: wait
 * for EV_WRITE, else EV_READ), < 0 failed: logged and counted, *why says
 * why for conn_close (the caller closes). */
int tls_handshake(struct vd_conn *c, const char **why);
/* Like read/write: > 0 bytes, 0 EOF, VD_AGAIN, or VD_EIO. */
long tls_read(struct vd_conn *c, char *buf, size_t len);
/* TLS holds bytes it already read from the socket (read-ahead: records not
 * yet returned by tls_read): the socket's readiness does not show them. */
bool tls_pending(const struct vd_conn *c);
long tls_write(struct vd_conn *c, const char *buf, size_t len);
/* After VD_AGAIN (handshake, read or write): TLS must write before it can
 * go on (the caller arms EV_WRITE). */
bool tls_want_write(const struct vd_conn *c);
/* Free the SSL object; notify sends close_notify first (graceful close). */
void tls_conn_free(struct vd_conn *c, bool notify);

/* ---- STOMP glue (server.c) and HTTP (http.c) --------------------------- */

void stomp_conn_open(struct vd_conn *c);
/* Feed input to the STOMP session; bytes consumed or < 0 (close after
 * flush).  Marks c closing once the session is (DISCONNECT, ERROR). */
long stomp_conn_feed(struct vd_conn *c, char *buf, size_t len);
/* Feed buffered input; returns bytes consumed or < 0 (close after flush). */
long http_conn_feed(struct vd_conn *c, char *buf, size_t len);

/* ---- metrics (metrics.c) ---------------------------------------------- */

/* Ready for /health and vdsmd_up (engine ready). */
bool server_ready(const struct vd_server *s);
void metrics_format(struct vd_server *s, struct vd_buf *out);

#endif
