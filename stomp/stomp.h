/* stomp/stomp.h - STOMP 1.2: pure frame parser and writer, the server side
 * mini-broker (sessions and subscriptions), and a client session.
 *
 * No I/O here and no daemon headers: sessions are fed bytes and append their
 * output to a struct vd_buf the caller owns, so tests and fuzzers drive them
 * without sockets.  PROTOCOL.md section 2 is the contract. */
#ifndef VD_STOMP_STOMP_H
#define VD_STOMP_STOMP_H

#include "../common/buf.h"

enum stomp_cmd {
	STOMP_NONE = 0,
	/* client frames */
	STOMP_CONNECT, STOMP_STOMP, STOMP_SEND, STOMP_SUBSCRIBE, STOMP_UNSUBSCRIBE,
	STOMP_ACK, STOMP_NACK, STOMP_BEGIN, STOMP_COMMIT, STOMP_ABORT,
	STOMP_DISCONNECT,
	/* server frames */
	STOMP_CONNECTED, STOMP_MESSAGE, STOMP_RECEIPT, STOMP_ERROR,
};

const char *stomp_cmd_name(enum stomp_cmd c);

struct stomp_limits {
	size_t max_frame;        /* whole frame, default 16 MiB */
	unsigned max_headers;    /* default 128 */
	size_t max_header_line;  /* default 8 KiB */
};

#define STOMP_LIMITS_DEFAULT { (size_t)16 << 20, 128, 8192 }

struct stomp_header {
	const char *name;
	size_t nlen;
	const char *value;
	size_t vlen;
};

/* A parsed frame: slices into the caller's buffer (header names and values
 * unescaped in place and NUL-terminated there; the body is followed by its
 * NUL terminator, so body[body_len] == '\0'), valid until the caller
 * consumes those bytes.  STOMP frames, like CONNECT, are not unescaped. */
struct stomp_frame {
	enum stomp_cmd cmd;
	struct stomp_header *hdr;   /* caller-provided array of hdr_cap entries */
	unsigned hdr_cap;
	unsigned nhdr;
	char *body;
	size_t body_len;
};

/* First occurrence of a header (first wins), or NULL; *vlen set when non-NULL
 * (vlen may be NULL). */
const char *stomp_frame_get(const struct stomp_frame *f, const char *name, size_t *vlen);

/* Resumable parse state for one stream (a few words; keeps a long body
 * without content-length from being rescanned from the start). */
struct stomp_parser {
	size_t scanned;
	unsigned flags;
	/* (added) resumable state of the frame in progress; offsets are from
	 * the frame's first byte (after any heart-beat EOLs). */
	size_t line_start;      /* start of the header line being scanned */
	size_t body_start;      /* first body byte, once the blank line is seen */
	size_t clen;            /* content-length (valid with STOMP_PF_CLEN) */
	unsigned lines;         /* header lines seen so far */
	enum stomp_cmd cmd;     /* command, once the first line is complete */
};

void stomp_parser_init(struct stomp_parser *p);

/* Parse one frame at the start of buf.  Leading heart-beat EOLs are skipped
 * (and counted in the return value; when the frame after them is not
 * complete yet, only the EOLs are returned, with STOMP_NONE).  After a
 * positive return the caller drops that many bytes and calls again with the
 * rest at the start of buf (the parser's offsets are relative to it); after
 * VD_AGAIN it calls again with the same bytes plus more.  Returns:
 *   > 0       bytes consumed; *f filled when f->cmd != STOMP_NONE (a pure
 *             heart-beat run yields STOMP_NONE)
 *   VD_AGAIN  need more bytes (nothing consumed)
 *   < 0       framing error (VD_EPROTO, VD_ETOOBIG); *why says why
 * No allocation: f->hdr should hold lim->max_headers entries (a frame
 * with more header lines than f->hdr_cap fails with VD_ETOOBIG). */
long stomp_parse(struct stomp_parser *p, const struct stomp_limits *lim,
		 char *buf, size_t len, struct stomp_frame *f, const char **why);

/* Append a frame.  Header names and values are escaped except on
 * CONNECT/STOMP/CONNECTED; content-length is added whenever body != NULL
 * (even when empty) and a caller-supplied content-length is then dropped.
 * A header whose value is NULL is skipped; nlen 0 means strlen(name). */
void stomp_write_frame(struct vd_buf *out, enum stomp_cmd cmd,
		       const struct stomp_header *hdr, unsigned nhdr,
		       const void *body, size_t len);

/* ---- server: the mini-broker ------------------------------------------ */

struct stomp_broker;
struct stomp_session;

/* What the broker asks of its host (the daemon). */
/* One piece of an outgoing frame (write_direct below). */
struct stomp_iov {
	const char *base;
	size_t len;
};
#define STOMP_DIRECT_MIN (64u * 1024)

struct stomp_broker_ops {
	/* A SEND to a request destination.  The reply must be delivered with
	 * stomp_broker_reply() (possibly later, even after the session closed). */
	void (*request)(void *host, struct stomp_session *s, const char *body, size_t len,
			const char *content_type, size_t ctlen,
			const char *reply_to, size_t rtlen,
			const char *flow_id, size_t flen);
	/* A session got bytes in its output buffer outside of its own feed
	 * (routing from another connection): the host should flush it. */
	void (*output)(void *host, struct stomp_session *s, void *conn);
	/* Heart-beat negotiated: send every send_ms, expect traffic every
	 * recv_ms (0 = none). */
	void (*heartbeat)(void *host, struct stomp_session *s, void *conn,
			  unsigned send_ms, unsigned recv_ms);
	/* CONNECT/STOMP accepted: packed is true when it carried the header
	 * vdsmd-framing:packed (the client reads any framing; PROTOCOL.md 2).
	 * Called before CONNECTED is written. */
	void (*framing)(void *host, struct stomp_session *s, void *conn, bool packed);
	/* Before a MESSAGE of at most `bytes` is queued for s (a forwarded
	 * SEND or an event): the host charges them to its memory budget, or
	 * returns false when they do not fit; the message is then dropped for
	 * s (counted in messages_dropped and budget_dropped). */
	bool (*admit)(void *host, struct stomp_session *s, void *conn, size_t bytes);
	/* Before a client's SEND is fanned out to n subscriptions, `bytes` for
	 * all of them together: false when that does not fit the host's memory
	 * budget whole; nobody gets it and the sender (origin) gets ERROR
	 * "memory budget exceeded", its connection stays open (counted in
	 * fanout_refused). */
	bool (*admit_fanout)(void *host, struct stomp_session *origin, size_t n, size_t bytes);
	/* After each frame a session handled: true stops stomp_session_feed
	 * there (it returns what it consumed; the rest stays in the caller's
	 * buffer), so a client whose replies pile up unread gets its further
	 * requests run no faster than it reads. */
	bool (*pause)(void *host, struct stomp_session *s, void *conn);
};

struct stomp_broker_config {
	struct stomp_limits limits;  /* any field 0: all defaults */
	size_t max_output;          /* per-session output bound for fan-out (0: none) */
	const char *server_name;    /* "vdsmd/<version>" (copied) */
};

/* ops may be NULL, and any op may be NULL (not called). */
struct stomp_broker *stomp_broker_new(const struct stomp_broker_config *cfg,
				      const struct stomp_broker_ops *ops, void *host);
/* Free every session first. */
void stomp_broker_free(struct stomp_broker *b);

/* Optional hook.  A MESSAGE with a body of at least STOMP_DIRECT_MIN bytes
 * for a session whose output buffer is empty: the host may write the n
 * pieces (head, body, NUL) straight to its connection (writev) and returns
 * how many bytes it wrote (0 when it cannot); the broker appends the rest
 * to the output buffer.  Saves copying a large reply (a 1.5 MB cached
 * Host.getAllVmStats) into the buffer.  NULL (the default): always buffer. */
typedef size_t (*stomp_write_direct_fn)(void *host, struct stomp_session *s, void *conn,
					const struct stomp_iov *iov, unsigned n);
void stomp_broker_set_write_direct(struct stomp_broker *b, stomp_write_direct_fn fn);

/* Optional hook: a whole frame was just appended to a session's output
 * buffer and ends at the buffer's end (what write_direct wrote of it is no
 * longer there).  The host records the boundary so that each frame goes
 * out in its own write (PROTOCOL.md 2, one frame per write).  NULL (the
 * default): not called. */
typedef void (*stomp_frame_fn)(void *host, struct stomp_session *s, void *conn);
void stomp_broker_set_frame_hook(struct stomp_broker *b, stomp_frame_fn fn);

/* Optional hook: a MESSAGE of len bytes in all (NUL included) with a JSON
 * body (content-type application/json, parameters allowed; a non-empty
 * body) is about to be appended at offset off of the session's output
 * buffer, not written direct.  The host returns the size it must grow to
 * (0: as it is); the broker then writes it with that many bytes - or one
 * more, when content-length takes a digit more and the exact size cannot
 * be reached - spaces after the body, counted in content-length: the frame
 * the host's frame hook would otherwise have had to pad after the fact
 * (vdsmd/wire.c), byte for byte, without parsing it back.  NULL (the
 * default): not called. */
typedef size_t (*stomp_pad_fn)(void *host, struct stomp_session *s, void *conn, size_t off,
			       size_t len);
void stomp_broker_set_pad_hook(struct stomp_broker *b, stomp_pad_fn fn);

/* The padding rule both the pad hook's broker and vdsmd/wire.c's after-the-
 * fact padding use (stomp/writer.c): a MESSAGE of flen bytes whose body is
 * blen bytes (its content-length value cln digits) grows to target bytes
 * with n spaces after the body, counted in content-length: the fewest n
 * that reach target, one byte over when content-length taking a digit more
 * makes target unreachable.  Returns n (0 when flen >= target) and in *dd
 * the digits content-length gains. */
size_t stomp_pad_count(size_t flen, size_t blen, unsigned cln, size_t target, unsigned *dd);
/* Decimal digits of v (1 for 0). */
unsigned stomp_u64_digits(uint64_t v);
/* Decimal digits of v at w; returns the end (at most 20 bytes). */
char *stomp_put_u64(char *w, uint64_t v);
/* A content-type value (n bytes) that is application/json, parameters
 * allowed: the bodies that may be padded with spaces. */
bool stomp_ct_is_json(const char *v, size_t n);

/* A session for one connection; out is the connection's output buffer. */
struct stomp_session *stomp_session_new(struct stomp_broker *b, struct vd_buf *out, void *conn);
/* Unsubscribes everything and frees the session. */
void stomp_session_free(struct stomp_session *s);

/* Feed received bytes.  Returns the number of bytes consumed (the caller
 * drops them from its input buffer), or a negative vd_err after a framing
 * error: the ERROR frame is already in out and the connection must be closed
 * once out is flushed.  Check stomp_session_closing() after every call:
 * true after DISCONNECT (close once flushed); later calls consume and
 * ignore everything.  Frames are handled as they complete, so a partial
 * frame stays in the caller's buffer (the parser remembers how far it got).
 * The buffer is modified in place (unescaping).
 *
 * Outcomes (PROTOCOL.md 2): ERROR frames carry a `message` header and, when
 * the offending frame had `receipt`, a `receipt-id` (no RECEIPT follows
 * then).  ERROR that keeps the connection open: Version unsupported,
 * missing destination/id, duplicate subscription id, transactions not
 * supported, Subscription not available.  ERROR then close (negative
 * return): framing errors, limits, and a server frame (MESSAGE, ...) sent
 * by the client.
 *
 * Callbacks (ops) run inside feed/reply/publish: they must not free any
 * session (free at a safe point after the callback returns); a request's
 * body and header slices are valid only during ops->request. */
long stomp_session_feed(struct stomp_session *s, char *buf, size_t len);
bool stomp_session_closing(const struct stomp_session *s);

#define STOMP_REPLY_DEST "jms.topic.vdsm_responses"
#define STOMP_EVENTS_DEST "jms.queue.events"

/* Deliver a response, privately: once, to the origin session's first
 * subscription on dest (exactly that name).  Nobody else ever gets it: an
 * origin that is gone (NULL or dead) or has no such subscription gets
 * nothing (counted in replies_unrouted).  dest NULL (or dlen 0) means
 * STOMP_REPLY_DEST.  Returns deliveries made (0 or 1); content_type NULL
 * leaves the header out.  The caller bounds the origin's output first. */
size_t stomp_broker_reply(struct stomp_broker *b, struct stomp_session *origin,
			  const char *dest, size_t dlen, const char *content_type,
			  const char *body, size_t len);
/* The same with a body in n pieces (1..STOMP_BODY_PIECES), sent one after
 * the other (a large piece goes out from where it is, see write_direct). */
#define STOMP_BODY_PIECES 3
size_t stomp_broker_reply_iov(struct stomp_broker *b, struct stomp_session *origin,
			      const char *dest, size_t dlen, const char *content_type,
			      const struct stomp_iov *body, unsigned n);
/* Fan a message out to every subscription on dest (exact match); a session
 * whose output would go over max_output with it loses it (counted).
 * Returns deliveries.  (Forwarded client SENDs obey the same bound.)
 * Every MESSAGE: destination, content-type (when given), subscription,
 * message-id, content-length, then (forwarded SENDs only) the SEND's own
 * other headers.  ops->output is called for every session written to except
 * the one currently inside stomp_session_feed(). */
size_t stomp_broker_publish(struct stomp_broker *b, const char *dest,
			    const char *content_type, const char *body, size_t len);

/* Sessions call this when one of their requests finishes so a closed
 * session is not referenced: a pending request holds a reference.
 * stomp_session_new() returns a session holding one reference, which
 * stomp_session_free() drops (after unsubscribing everything and marking it
 * dead); the memory goes with the last unref.  A dead session is still a
 * valid `origin` for stomp_broker_reply() (its reply goes to every
 * subscriber of the destination).  Loop thread only (no atomics). */
void stomp_session_ref(struct stomp_session *s);
void stomp_session_unref(struct stomp_session *s);
bool stomp_session_alive(const struct stomp_session *s);

/* (added) The conn pointer given to stomp_session_new(), NULL once the
 * session was freed; whether a CONNECT/STOMP was accepted; whether the
 * session is a working client: CONNECTed, or it has had a request SEND
 * served without one (VDSM serves SEND before or without CONNECT, and the
 * engine's client library can lose its queued CONNECT to a race and go on
 * sending requests). */
void *stomp_session_conn(const struct stomp_session *s);
bool stomp_session_connected(const struct stomp_session *s);
bool stomp_session_established(const struct stomp_session *s);

/* (added) Subscriptions one session may hold; past it SUBSCRIBE gets
 * ERROR "Too many subscriptions" (bounds memory and per-frame work). */
#define STOMP_MAX_SUBSCRIPTIONS 1024

struct stomp_broker_stats {
	uint64_t frames_in, frames_out, messages_dropped, sessions, subscriptions;
	uint64_t replies_unrouted;   /* replies whose requester had no subscription */
	uint64_t reserved_refused;   /* SENDs to a reply or events destination */
	uint64_t budget_dropped;     /* messages dropped for a session: ops->admit said no */
	uint64_t fanout_refused;     /* SENDs refused whole: ops->admit_fanout said no */
};
void stomp_broker_stats(const struct stomp_broker *b, struct stomp_broker_stats *out);
/* Bytes a session holds (itself and its subscriptions), for a memory budget. */
size_t stomp_session_memory(const struct stomp_session *s);
/* Messages dropped for one session (slow subscriber). */
uint64_t stomp_session_dropped(const struct stomp_session *s);

/* ---- client session ---------------------------------------------------- */

struct stomp_client {
	struct vd_buf *out;
	struct stomp_parser parser;
	struct stomp_limits limits;
	struct stomp_header hdr[128];
	unsigned next_receipt;
	/* (added) heart-beat asked for in CONNECT, and the intervals negotiated
	 * from CONNECTED (STOMP 1.2: max of both sides, 0 when either is 0):
	 * send a frame or EOL every hb_send_ms, expect traffic every hb_recv_ms. */
	unsigned hb_want_send, hb_want_recv;
	unsigned hb_send_ms, hb_recv_ms;
	bool connected;         /* CONNECTED received */
};

/* Frames are appended to out (owned by the caller).  Header values are
 * escaped as STOMP 1.2 requires (not on CONNECT).  NULL optional arguments
 * leave their header out; subscribe's ack defaults to "auto";
 * connect always sends accept-version:1.2 and heart-beat. */
void stomp_client_init(struct stomp_client *c, struct vd_buf *out);
void stomp_client_connect(struct stomp_client *c, const char *host, const char *login,
			  const char *passcode, unsigned hb_send_ms, unsigned hb_recv_ms);
void stomp_client_subscribe(struct stomp_client *c, const char *dest, const char *id,
			    const char *ack);
/* extra: additional headers (may be NULL/0). */
void stomp_client_send(struct stomp_client *c, const char *dest, const char *reply_to,
		       const char *content_type, const struct stomp_header *extra,
		       unsigned nextra, const void *body, size_t len);
void stomp_client_ack(struct stomp_client *c, const char *id);
void stomp_client_disconnect(struct stomp_client *c, const char *receipt);
/* Parse one incoming frame (CONNECTED, MESSAGE, RECEIPT, ERROR); same
 * return convention as stomp_parse().  f->hdr may be NULL: the client's own
 * hdr array is used.  A client frame (SEND, ...) from the server is a
 * framing error (VD_EPROTO).  CONNECTED sets connected and the negotiated
 * heart-beat.  Header slices point into buf (see struct stomp_frame). */
long stomp_client_feed(struct stomp_client *c, char *buf, size_t len,
		       struct stomp_frame *f, const char **why);

#endif
