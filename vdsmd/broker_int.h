/* vdsmd/broker_int.h - internals shared by broker.c (connection, I/O, TLS,
 * backoff: the link) and broker_msg.c (requests, reply cache, events,
 * metrics, and broker.h's broker_start/broker_free), which is above it:
 * broker_msg.c calls the link, the link reports through struct brk_events. */
#ifndef VD_VDSMD_BROKER_INT_H
#define VD_VDSMD_BROKER_INT_H

#include <ev.h>
#include "broker.h"
#include "../io/io.h"
#include "../stomp/stomp.h"

enum brk_state {
	BRK_IDLE,        /* waiting for the retry timer */
	BRK_CONNECTING,  /* TCP connect in progress */
	BRK_HANDSHAKE,   /* TLS handshake */
	BRK_LOGIN,       /* CONNECT sent, waiting for CONNECTED */
	BRK_ONLINE,      /* subscribed */
	BRK_STOPPED,
};

#define BRK_BACKOFF_MIN 1.0
#define BRK_BACKOFF_MAX 60.0     /* delays are step..2*step, step <= MAX/2 */
#define BRK_HEARTBEAT_MS 10000u
#define BRK_CACHE_TTL_MS 60000u
#define BRK_CACHE_MAX 4096
#define BRK_CACHE_BYTES ((size_t)16 << 20)

struct brk_cache_entry {
	char *key;           /* "s:<id>" or "i:<id>" */
	char *bytes;
	size_t len;
	const struct vd_codec *codec;
	uint64_t t_ms;
};

/* A redelivered request held until the requests of the previous connection
 * finished (one of them may be the same request: it is answered from the
 * cache then, not executed twice).  Bounded by the prefetch count. */
struct brk_parked {
	struct brk_parked *next;
	char *body;
	size_t len;
	char *ack, *reply_to, *ct, *flow;
};

/* What the link (broker.c) tells the messages (broker_msg.c, above it):
 * handed down once, to brk_open. */
struct brk_events {
	/* CONNECTED: subscribe (once the engine is ready), run parked deliveries */
	void (*connected)(struct vd_broker *b);
	/* a MESSAGE while online */
	void (*message)(struct vd_broker *b, const struct stomp_frame *f);
	/* the connection is gone (lost or stopped): its deliveries are stale */
	void (*lost)(struct vd_broker *b);
};

struct vd_broker {
	struct vdsmd *d;
	const struct brk_events *on;  /* broker_msg.c's (brk_open) */
	char host[256];
	unsigned port;
	bool tls;
	char where[300];         /* "host:port" for messages */
	char requests_dest[300], events_dest[300];
	struct ssl_ctx_st *ssl_ctx;
	struct io_conn link;     /* the socket, plain or TLS; link.fd < 0: none */
	enum brk_state state;
	unsigned gen;            /* connection generation */
	struct vd_buf in, out;
	struct stomp_client sc;
	ev_io io;
	bool want_write;
	bool feeding;            /* inside process_input: flush after it */
	ev_timer retry;          /* reconnect after backoff */
	ev_timer tick;           /* heart-beats and connect/login timeout */
	ev_timer ready_poll;     /* subscribe once the engine is ready */
	bool subscribed;
	ev_tstamp last_in, last_out, phase_start;
	double backoff;          /* next delay before jitter */
	unsigned attempts;       /* since the last successful login */
	bool ever_connected;
	bool freed;              /* broker_free called; last completion frees */
	unsigned pending;        /* requests in the engine */
	unsigned stale_pending;  /* of them, from a previous connection */
	struct brk_parked *parked, **parked_tail;
	/* reply cache: a ring in insertion (= time) order */
	struct brk_cache_entry *cache;
	size_t cache_head, cache_n;
	size_t cache_bytes;
	struct vd_broker_stats st;
	unsigned rand_state;
};

/* broker.c: the link.  brk_open creates d->broker when broker_uri is set
 * (broker_start's checks; on is kept); brk_link_free frees what the link
 * holds and b itself. */
int brk_open(struct vdsmd *d, const struct brk_events *on, char *why, size_t whylen);
void brk_link_free(struct vd_broker *b);
void brk_flush(struct vd_broker *b);
/* Drop the connection and schedule a reconnect (why is logged). */
void brk_disconnect(struct vd_broker *b, const char *why);
bool brk_online(const struct vd_broker *b);

#endif
