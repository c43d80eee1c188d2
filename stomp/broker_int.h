/* stomp/broker_int.h - the mini-broker's private structures, shared by
 * broker.c (destinations, subscriptions, routing, MESSAGE output) and
 * session.c (per-connection command handling).  Not part of the API. */
#ifndef VD_STOMP_BROKER_INT_H
#define VD_STOMP_BROKER_INT_H

#include "stomp.h"
#include "internal.h"

struct stomp_sub;

/* A destination with at least one subscription (freed with its last one). */
struct stomp_dest {
	struct stomp_dest *next;     /* hash chain */
	uint32_t hash;
	size_t len;
	struct stomp_sub *subs;      /* doubly linked via dnext/dprev */
	struct stomp_sub *tail;      /* last of subs (appends are O(1)) */
	bool reserved;               /* a reply or events destination: never a SEND target */
	char *esc;                   /* name escaped for MESSAGE headers */
	size_t esclen;
	char name[];                 /* NUL-terminated; esc follows it */
};

struct stomp_sub {
	struct stomp_dest *dest;
	struct stomp_session *s;
	struct stomp_sub *dnext, *dprev;   /* subscriptions on dest */
	struct stomp_sub *snext;           /* subscriptions of s */
	size_t idlen;
	char *escid;                       /* id escaped for MESSAGE headers */
	size_t escidlen;
	char ack[24];                      /* recorded; delivery is auto-ack */
	size_t bytes;                      /* charged to the session */
	bool ack_hdr;                      /* client / client-individual: MESSAGE carries ack */
	char id[];                         /* NUL-terminated; escid follows it */
};

struct stomp_session {
	struct stomp_broker *b;
	struct vd_buf *out;
	void *conn;
	struct stomp_parser parser;
	struct stomp_sub *subs;
	unsigned nsubs;
	size_t sub_bytes;            /* allocated for subs (and their share of dests) */
	uint64_t dropped;
	unsigned refs;
	bool alive;
	bool closing;
	bool connected;
	bool served;                 /* a request SEND was handed on */
};

struct stomp_broker {
	struct stomp_broker_config cfg;
	char *server_name;
	struct stomp_broker_ops ops;
	void *host;
	struct stomp_dest **buckets;
	size_t nbuckets;                   /* power of two */
	size_t ndests;
	struct stomp_header *hdr;          /* parse scratch, max_headers entries */
	struct stomp_session *feeding;     /* session inside stomp_session_feed */
	uint64_t msg_seq;
	struct stomp_broker_stats st;
	stomp_write_direct_fn write_direct;  /* NULL: always buffer */
	stomp_frame_fn frame_hook;           /* NULL: none */
	stomp_pad_fn pad_hook;               /* NULL: none */
};

/* FNV-1a, incremental: h = stomp_hash_step(h, c) from STOMP_HASH_INIT. */
#define STOMP_HASH_INIT 2166136261u
static inline uint32_t stomp_hash_step(uint32_t h, unsigned char c)
{
	return (h ^ c) * 16777619u;
}

struct stomp_dest *stomp_dest_find(struct stomp_broker *b, const char *name, size_t len,
				   uint32_t hash);
uint32_t stomp_hash(const char *s, size_t n);
/* Whether a client may not SEND to dest: the events destination, the
 * default reply destination, or a destination a request named in reply-to. */
bool stomp_dest_reserved(struct stomp_broker *b, const char *dest, size_t dlen);
/* A request named dest as its reply-to (NULL/0: the default): reserve it. */
void stomp_dest_reserve(struct stomp_broker *b, const char *dest, size_t dlen);

/* Tell the host a whole frame now ends s's output buffer (frame hook). */
static inline void stomp_frame_done(struct stomp_broker *b, struct stomp_session *s)
{
	if (b->frame_hook)
		b->frame_hook(b->host, s, s->conn);
}

/* Subscriptions (broker.c). */
struct stomp_sub *stomp_sub_find(struct stomp_session *s, const char *id, size_t idlen);
void stomp_sub_add(struct stomp_session *s, const char *dest, size_t dlen,
		   const char *id, size_t idlen, const char *ack, size_t acklen);
void stomp_sub_remove(struct stomp_session *s, struct stomp_sub *sub);

/* Append one MESSAGE for sub; dest NULL means sub's own destination (its
 * escaped form is cached); extra: a SEND's own headers to keep (the ones
 * the MESSAGE sets itself are skipped). */
void stomp_deliver(struct stomp_broker *b, struct stomp_sub *sub,
		   const char *dest, size_t dlen, const char *ct, size_t ctlen,
		   const struct stomp_header *extra, unsigned nextra,
		   const char *body, size_t len);
/* stomp_deliver with the body in n pieces (at most STOMP_BODY_PIECES). */
void stomp_deliver_iov(struct stomp_broker *b, struct stomp_sub *sub,
		       const char *dest, size_t dlen, const char *ct, size_t ctlen,
		       const struct stomp_header *extra, unsigned nextra,
		       const struct stomp_iov *body, unsigned n);

/* Forward a SEND to every subscription whose destination equals dest or is
 * a dot-separated prefix of it, except reserved (reply / events)
 * destinations.  Returns the subscriptions matched (those over their output
 * bound or the host's budget drop the message but still count); *refused:
 * the host's budget could not take the fan-out whole, nothing was queued. */
size_t stomp_forward(struct stomp_broker *b, const char *dest, size_t dlen,
		     const char *ct, size_t ctlen, const struct stomp_header *extra,
		     unsigned nextra, const char *body, size_t len, bool *refused);

#endif
