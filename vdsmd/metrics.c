/* vdsmd/metrics.c - GET /metrics: Prometheus text exposition format 0.0.4.
 * Connection and frame counters come from the server and the broker,
 * requests by verb/result and the latency histogram from the engine. */
#include "server.h"

#include <malloc.h>

#include "../common/log.h"
#include "../rpc/event.h"
#include "../rpc/rpc.h"
#include "pool.h"
#include "broker.h"
#include "image/image.h"

static void metric(struct vd_buf *o, const char *name, const char *type, const char *help,
		   uint64_t v)
{
	buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name,
		   (unsigned long long)v);
}

bool server_ready(const struct vd_server *s)
{
	return s->d->rpc && rpc_engine_ready(s->d->rpc);
}

void metrics_format(struct vd_server *s, struct vd_buf *o)
{
	struct vdsmd *d = s->d;
	const struct vd_counters *n = &s->n;
	metric(o, "vdsmd_up", "gauge", "Whether the agent is ready: host and VM samples taken (1) or not (0).",
	       server_ready(s) ? 1 : 0);
	metric(o, "vdsmd_uptime_seconds", "gauge", "Seconds since startup.",
	       (vd_now_ms() - d->start_ms) / 1000);
	buf_printf(o, "# HELP vdsmd_codec_info JSON codec chosen at startup.\n"
		      "# TYPE vdsmd_codec_info gauge\nvdsmd_codec_info{codec=\"%s\"} 1\n",
		   d->codec ? d->codec->name : "none");
	metric(o, "vdsmd_connections", "gauge", "Client connections open now.", s->nconns);
	metric(o, "vdsmd_connections_accepted_total", "counter", "Connections accepted.",
	       n->accepted);
	metric(o, "vdsmd_connections_refused_total", "counter",
	       "Connections closed at once because max_connections was reached.", n->refused);
	metric(o, "vdsmd_connections_closed_total", "counter", "Connections closed.", n->closed);
	buf_puts(o, "# HELP vdsmd_connection_errors_total Connections closed for a reason.\n"
		    "# TYPE vdsmd_connection_errors_total counter\n");
	const struct {
		const char *reason;
		uint64_t n;
	} errs[] = {
		{ "detect_timeout", n->detect_timeouts },
		{ "unknown_protocol", n->unknown_proto },
		{ "tls", n->tls_failures },
		{ "output_overflow", n->overflow_closes },
		{ "heartbeat_timeout", n->hb_timeouts },
		{ "frame_timeout", n->frame_timeouts },
		{ "connect_timeout", n->connect_timeouts },
		{ "idle_timeout", n->idle_timeouts },
		{ "keepalive_timeout", n->keepalive_timeouts },
		{ "memory_budget", n->budget_closes },
		{ "evicted_unestablished", n->evicted_unestablished },
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(errs); i++)
		buf_printf(o, "vdsmd_connection_errors_total{reason=\"%s\"} %llu\n", errs[i].reason,
			   (unsigned long long)errs[i].n);
	metric(o, "vdsmd_connections_refused_per_address_total", "counter",
	       "Connections refused by max_connections_per_address.", n->refused_per_address);
	metric(o, "vdsmd_accept_pauses_total", "counter",
	       "Times accept() was paused (out of descriptors or memory).", n->accept_pauses);
	metric(o, "vdsmd_memory_budget_bytes", "gauge", "memory_budget.", s->budget);
	metric(o, "vdsmd_memory_charged_bytes", "gauge",
	       "Memory connections hold now (buffers, subscriptions, TLS).", s->mem_used);
	metric(o, "vdsmd_memory_charged_peak_bytes", "gauge", "Highest memory_charged so far.",
	       s->mem_peak);
	struct mallinfo2 mi = mallinfo2();
	metric(o, "vdsmd_heap_allocated_bytes", "gauge",
	       "Bytes allocated with malloc now (glibc mallinfo2: heap and mmapped chunks).",
	       (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd);
	metric(o, "vdsmd_budget_refused_total", "counter",
	       "Requests answered 1100 and events dropped near the memory budget.", n->budget_refused);
	metric(o, "vdsmd_received_bytes_total", "counter", "Bytes read from clients.", n->bytes_in);
	metric(o, "vdsmd_sent_bytes_total", "counter", "Bytes written to clients.", n->bytes_out);
	if (s->broker) {
		struct stomp_broker_stats bs;
		stomp_broker_stats(s->broker, &bs);
		metric(o, "vdsmd_stomp_frames_received_total", "counter", "STOMP frames received.",
		       bs.frames_in);
		metric(o, "vdsmd_stomp_frames_sent_total", "counter", "STOMP frames sent.",
		       bs.frames_out);
		metric(o, "vdsmd_stomp_sessions", "gauge", "STOMP sessions open now.", bs.sessions);
		metric(o, "vdsmd_stomp_subscriptions", "gauge", "STOMP subscriptions now.",
		       bs.subscriptions);
		metric(o, "vdsmd_stomp_messages_dropped_total", "counter",
		       "Messages dropped for slow subscribers.", bs.messages_dropped);
		metric(o, "vdsmd_stomp_replies_unrouted_total", "counter",
		       "Replies not sent: the requesting connection had no subscription on the "
		       "reply destination (or was gone).", bs.replies_unrouted);
		metric(o, "vdsmd_stomp_reserved_refused_total", "counter",
		       "SENDs refused: the destination is a reply or events destination.",
		       bs.reserved_refused);
		metric(o, "vdsmd_stomp_budget_dropped_total", "counter",
		       "Messages (forwarded SENDs, events) dropped for a subscriber: the memory "
		       "budget could not take them.", bs.budget_dropped);
		metric(o, "vdsmd_stomp_fanout_refused_total", "counter",
		       "SENDs refused with ERROR: their fan-out to every subscriber did not fit "
		       "the memory budget whole.", bs.fanout_refused);
	}
	metric(o, "vdsmd_stomp_requests_total", "counter", "JSON-RPC requests received over STOMP.",
	       n->stomp_requests);
	metric(o, "vdsmd_http_requests_total", "counter", "HTTP requests.", n->http_requests);
	metric(o, "vdsmd_http_errors_total", "counter", "HTTP requests answered 4xx/5xx.",
	       n->http_errors);
	if (d->bus) {
		struct event_bus_stats es;
		event_bus_stats(d->bus, &es);
		metric(o, "vdsmd_events_published_total", "counter", "Events accepted by the bus.",
		       es.published);
		metric(o, "vdsmd_events_dropped_total", "counter",
		       "Events dropped at the bus (queue full or not ready).", es.dropped);
	}
	metric(o, "vdsmd_events_delivered_total", "counter", "Event MESSAGE frames delivered.",
	       n->events_delivered);
	if (d->pool) {
		struct pool_stats ps;
		pool_stats(d->pool, &ps);
		metric(o, "vdsmd_pool_submitted_total", "counter", "Blocking jobs queued.",
		       ps.submitted);
		metric(o, "vdsmd_pool_rejected_total", "counter", "Blocking jobs refused (1100).",
		       ps.rejected);
		metric(o, "vdsmd_pool_queued", "gauge", "Blocking jobs waiting.", ps.queued);
		metric(o, "vdsmd_pool_busy", "gauge", "Workers running a job.", ps.busy);
	}
	if (d->broker)
		broker_metrics_format(d->broker, o);
	if (d->rpc)
		rpc_metrics_format(d->rpc, o);
	image_metrics_write(d, o);
}
