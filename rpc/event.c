/* rpc/event.c - the event bus: events encoded on the publishing thread,
 * queued under a mutex (bounded: over the bound they are dropped and
 * counted), and handed to the loop thread by event_bus_drain().  The wake
 * function is called once per batch (when the queue goes from empty to
 * non-empty); the loop drains everything queued per wake-up, and may drain
 * without one whenever event_bus_pending() says so.
 *
 * An event is a JSON-RPC notification
 *   {"jsonrpc":"2.0","method":"|ns|Name|id","params":{...,"notify_time":<ms>}}
 * with notify_time taken from the monotonic clock at publish time. */
#include "event.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct event_node {
	struct event_node *next;
	struct vd_buf buf;
};

struct event_bus {
	const struct vd_codec *codec;
	size_t max_queued;
	pthread_mutex_t mu;
	struct event_node *head, *tail;
	size_t queued;
	bool enabled;
	void (*wake)(void *ctx);
	void *wake_ctx;
	uint64_t published, dropped;
};

static const struct vd_codec *default_codec(void)
{
	const struct vd_codec *const *l = codec_list();
	for (size_t i = 0; l[i]; i++)
		if (l[i]->is_json)
			return l[i];
	return l[0];
}

struct event_bus *event_bus_new(const struct vd_codec *codec, size_t max_queued)
{
	struct event_bus *bus = xcalloc(1, sizeof(*bus));
	bus->codec = codec ? codec : default_codec();
	bus->max_queued = max_queued ? max_queued : 1024;
	pthread_mutex_init(&bus->mu, NULL);
	return bus;
}

void event_bus_free(struct event_bus *bus)
{
	if (!bus)
		return;
	struct event_node *n = bus->head;
	while (n) {
		struct event_node *next = n->next;
		buf_free(&n->buf);
		free(n);
		n = next;
	}
	pthread_mutex_destroy(&bus->mu);
	free(bus);
}

void event_bus_set_wake(struct event_bus *bus, void (*wake)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&bus->mu);
	bus->wake = wake;
	bus->wake_ctx = ctx;
	pthread_mutex_unlock(&bus->mu);
}

void event_bus_set_enabled(struct event_bus *bus, bool enabled)
{
	pthread_mutex_lock(&bus->mu);
	bus->enabled = enabled;
	pthread_mutex_unlock(&bus->mu);
}

bool event_bus_enabled(struct event_bus *bus)
{
	pthread_mutex_lock(&bus->mu);
	bool en = bus->enabled;
	pthread_mutex_unlock(&bus->mu);
	return en;
}

struct vd_writer *rpc_event_begin(struct rpc_event *ev, struct event_bus *bus,
				  const char *method_fmt, ...)
{
	const struct vd_codec *codec = bus ? bus->codec : default_codec();
	buf_init(&ev->buf);
	codec->writer_init(&ev->w, &ev->buf);
	struct vd_writer *w = &ev->w;
	vw_begin_object(w);
	vw_keyz(w, "jsonrpc");
	vw_string(w, "2.0", 3);
	vw_keyz(w, "method");
	char method[256];
	va_list ap;
	va_start(ap, method_fmt);
	int n = vsnprintf(method, sizeof(method), method_fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	vw_string(w, method, VD_MIN((size_t)n, sizeof(method) - 1));
	vw_keyz(w, "params");
	vw_begin_object(w);
	return w;
}

uint64_t rpc_event_time_ms(void)
{
	/* VDSM's event_time(): 2^31-1 + monotonic ms (older engines reject
	 * values below INT_MAX) */
	return (uint64_t)INT32_MAX + vd_now_ms();
}

void rpc_event_publish(struct event_bus *bus, struct rpc_event *ev)
{
	struct vd_writer *w = &ev->w;
	vw_keyz(w, "notify_time");
	vw_int(w, (int64_t)rpc_event_time_ms());
	vw_end_object(w);  /* params */
	vw_end_object(w);
	if (!bus) {
		buf_free(&ev->buf);
		return;
	}
	bool ok = w->error == 0 && w->depth == 0;
	pthread_mutex_lock(&bus->mu);
	if (!ok || !bus->enabled || bus->queued >= bus->max_queued) {
		bus->dropped++;
		pthread_mutex_unlock(&bus->mu);
		buf_free(&ev->buf);
		return;
	}
	struct event_node *n = xmalloc(sizeof(*n));
	n->next = NULL;
	n->buf = ev->buf;
	buf_init(&ev->buf);
	bool was_empty = !bus->head;
	if (bus->tail)
		bus->tail->next = n;
	else
		bus->head = n;
	bus->tail = n;
	__atomic_store_n(&bus->queued, bus->queued + 1, __ATOMIC_SEQ_CST);
	bus->published++;
	/* one wake-up per batch: only the event that makes the queue
	 * non-empty wakes the loop, whose drain takes every queued one */
	void (*wake)(void *) = was_empty ? bus->wake : NULL;
	void *wctx = bus->wake_ctx;
	pthread_mutex_unlock(&bus->mu);
	if (wake)
		wake(wctx);
}

size_t event_bus_drain(struct event_bus *bus,
		       void (*deliver)(void *ctx, const char *bytes, size_t len,
				       const struct vd_codec *codec),
		       void *ctx)
{
	pthread_mutex_lock(&bus->mu);
	struct event_node *n = bus->head;
	bus->head = bus->tail = NULL;
	__atomic_store_n(&bus->queued, 0, __ATOMIC_SEQ_CST);
	bool enabled = bus->enabled;
	pthread_mutex_unlock(&bus->mu);
	size_t count = 0, discarded = 0;
	while (n) {
		struct event_node *next = n->next;
		if (enabled) {
			deliver(ctx, n->buf.data, n->buf.len, bus->codec);
			count++;
		} else {
			discarded++;  /* queued before the bus was disabled: not sent */
		}
		buf_free(&n->buf);
		free(n);
		n = next;
	}
	if (discarded) {
		pthread_mutex_lock(&bus->mu);
		bus->dropped += discarded;
		pthread_mutex_unlock(&bus->mu);
	}
	return count;
}

bool event_bus_pending(const struct event_bus *bus)
{
	return __atomic_load_n(&bus->queued, __ATOMIC_SEQ_CST) != 0;
}

void event_bus_stats(const struct event_bus *bus, struct event_bus_stats *out)
{
	struct event_bus *mb = (struct event_bus *)bus;
	pthread_mutex_lock(&mb->mu);
	out->published = bus->published;
	out->dropped = bus->dropped;
	out->queued = bus->queued;
	pthread_mutex_unlock(&mb->mu);
}
