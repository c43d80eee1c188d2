/* rpc/event.h - the event bus: JSON-RPC notifications published from any
 * thread, fanned out by the loop thread to every subscription on
 * jms.queue.events.
 *
 *     struct rpc_event ev;
 *     struct vd_writer *w = rpc_event_begin(&ev, bus, "|virt|VM_status|%s", id);
 *     vw_keyz(w, id); vw_begin_object(w); ... vw_end_object(w);
 *     rpc_event_publish(bus, &ev);     // adds notify_time, closes, enqueues
 *
 * The writer is positioned inside the "params" object.  Publishing never
 * blocks: when the bus queue is over its bound the event is dropped and
 * counted.  Events are never delivered while the engine is not ready (99).
 * rpc/ knows no sockets: the daemon supplies a wake function (ev_async_send)
 * and drains the queue on the loop thread with event_bus_drain(). */
#ifndef VD_RPC_EVENT_H
#define VD_RPC_EVENT_H

#include "../codecs/codec.h"

struct event_bus;

struct rpc_event {
	struct vd_buf buf;
	struct vd_writer w;
};

/* codec: the encoding of every event (the JSON codec chosen at startup).
 * max_queued: events waiting for the loop thread before new ones drop. */
struct event_bus *event_bus_new(const struct vd_codec *codec, size_t max_queued);
void event_bus_free(struct event_bus *bus);
/* Called (from the publishing thread) after an event is queued into an
 * empty queue: once per batch; the drain takes the whole batch. */
void event_bus_set_wake(struct event_bus *bus, void (*wake)(void *ctx), void *ctx);
/* Events are published only while enabled (the agent is ready). */
void event_bus_set_enabled(struct event_bus *bus, bool enabled);
/* Whether publishing is enabled now (lets a publisher skip building an
 * event that would be dropped; additive). */
bool event_bus_enabled(struct event_bus *bus);
/* The clock of notify_time: 2^31-1 + monotonic milliseconds (vd_now_ms), as
 * VDSM sends it; exported so VM statusTime values compare with event times. */
uint64_t rpc_event_time_ms(void);

struct vd_writer *rpc_event_begin(struct rpc_event *ev, struct event_bus *bus,
				  const char *method_fmt, ...) VD_PRINTF(3, 4);
void rpc_event_publish(struct event_bus *bus, struct rpc_event *ev);

/* Loop thread: hand every queued event to deliver(); bytes are valid during
 * the call only.  Returns the number delivered. */
size_t event_bus_drain(struct event_bus *bus,
		       void (*deliver)(void *ctx, const char *bytes, size_t len,
				       const struct vd_codec *codec),
		       void *ctx);

/* Any thread, lock-free: whether events wait for event_bus_drain().  An
 * event queued after a false answer still calls the wake function (the
 * queue was empty), so a loop that checks this before it blocks, and is
 * woken by the wake function only while blocked, loses none. */
bool event_bus_pending(const struct event_bus *bus);

struct event_bus_stats {
	uint64_t published;   /* accepted into the queue */
	uint64_t dropped;     /* dropped at the bus (queue full or not ready) */
	size_t queued;        /* waiting for the loop thread now (additive) */
};
void event_bus_stats(const struct event_bus *bus, struct event_bus_stats *out);

#endif
