/* vdsmd/broker_int.h - internals shared by broker.c (connection, I/O, TLS,
 * backoff) and broker_msg.c (requests, reply cache, events, metrics). */
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

struct vd_broker {
	struct vdsmd *d;
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

/* broker.c */
void brk_flush(struct vd_broker *b);
/* Drop the connection and schedule a reconnect (why is logged). */
void brk_disconnect(struct vd_broker *b, const char *why);
bool brk_online(const struct vd_broker *b);

/* broker_msg.c */
void brk_on_connected(struct vd_broker *b);
void brk_on_message(struct vd_broker *b, const struct stomp_frame *f);
void brk_on_lost(struct vd_broker *b);
void brk_cache_free(struct vd_broker *b);
void brk_parked_free(struct vd_broker *b);
/* Called when the last pending request completed after broker_free. */
void brk_release(struct vd_broker *b);

#endif
