/* vdsmd/broker.h - broker mode: vdsmd as a STOMP 1.2 client of an external
 * broker (RabbitMQ), beside the listener.
 *
 * When broker_uri is set, vdsmd connects to it (stomp:// or stomps:// with
 * the cert/key/CA of the listener; the broker's certificate must chain to
 * ca_file and name the URI's host), logs in (host = broker_vhost), and
 * subscribes to /queue/vdsm.<host_id>.requests with ack:client-individual
 * and prefetch-count:broker_prefetch.  Every MESSAGE is a JSON-RPC request
 * dispatched through the same engine as local requests; the response is sent
 * to the message's reply-to and the request is ACKed after that SEND in the
 * same stream (so the broker sees the reply before the ACK; a vdsmd that
 * dies before gets the request redelivered).  A redelivered request whose
 * id was answered in the last minute is answered from a bounded reply cache,
 * not executed again.  Events also go to /topic/vdsm.<host_id>.events.
 *
 * Broker unreachable or refusing the login: local clients are unaffected;
 * the reason is logged and vdsmd reconnects with jittered exponential
 * backoff (1 s doubling to 60 s).  Events produced while disconnected are
 * dropped and counted, never queued.
 *
 * Ownership: struct vd_broker (d->broker) owns its socket, TLS state,
 * buffers, reply cache and timers.  Everything runs on the loop thread. */
#ifndef VD_VDSMD_BROKER_H
#define VD_VDSMD_BROKER_H

#include "vdsmd.h"

struct vd_broker;

struct vd_broker_stats {
	bool connected;           /* CONNECTED received and subscribed */
	uint64_t connects;        /* successful logins */
	uint64_t reconnects;      /* connection attempts after the first */
	uint64_t connect_failures;
	uint64_t requests;        /* MESSAGE frames received on the request queue */
	uint64_t acked;
	uint64_t redelivered;     /* with redelivered:true */
	uint64_t duplicates;      /* answered from the reply cache */
	uint64_t replies;         /* responses sent */
	uint64_t events;          /* events published to the topic */
	uint64_t publish_failures;/* events dropped: disconnected or output over bound */
	uint64_t stale_replies;   /* finished after their connection was lost (cached only) */
	size_t cache_entries, cache_bytes;
};

/* Parse cfg's broker_uri (stomp://host[:port], stomps://host[:port]; host
 * may be [v6]).  0, or VD_EINVAL with why.  Exposed for tests. */
int broker_parse_uri(const char *uri, char *host, size_t hostlen, unsigned *port,
		     bool *tls, char *why, size_t whylen);

/* Create d->broker when d->cfg.broker_uri is set (nothing otherwise):
 * checks the URI and host_id, reads the TLS files (call it before dropping
 * privileges).  Needs d->loop.  0 or vd_err with why (bad URI or host_id,
 * unreadable TLS files). */
int broker_start(struct vdsmd *d, char *why, size_t whylen);
/* Start connecting (once the engine exists: d->rpc). */
void broker_connect(struct vd_broker *b);
/* Close the connection (unACKed requests go back to the queue) and stop
 * the timers; replies finishing afterwards are dropped. */
void broker_stop(struct vd_broker *b);
/* Free (after broker_stop and after the pool ran its completions). */
void broker_free(struct vd_broker *b);

/* Publish one encoded event to the topic (loop thread; never blocks). */
void broker_publish_event(struct vd_broker *b, const char *bytes, size_t len,
			  const struct vd_codec *codec);

void broker_stats(const struct vd_broker *b, struct vd_broker_stats *out);
/* Prometheus lines (vdsmd_broker_*). */
void broker_metrics_format(const struct vd_broker *b, struct vd_buf *out);

#endif
