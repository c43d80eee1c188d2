/* tests/unit/test_event.c - the event bus: encoding of an event, notify_time
 * from the monotonic clock, not published while disabled, bounded queue that
 * drops and counts, wake callback, drain on a real libev loop fed by
 * publishers on other threads. */
#include <check.h>
#include <ev.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../rpc/event.h"
#include "check_main.h"

static const struct vd_codec *json(void)
{
	const struct vd_codec *c = codec_find("yajl");
	ck_assert_ptr_nonnull(c);
	return c;
}

struct got {
	int n;
	char last[512];
	size_t last_len;
	const struct vd_codec *codec;
};

static void deliver(void *ctx, const char *bytes, size_t len, const struct vd_codec *codec)
{
	struct got *g = ctx;
	g->n++;
	g->codec = codec;
	g->last_len = len;
	size_t k = len < sizeof(g->last) - 1 ? len : sizeof(g->last) - 1;
	memcpy(g->last, bytes, k);
	g->last[k] = '\0';
}

static void publish_status(struct event_bus *bus, const char *vm, const char *status)
{
	struct rpc_event ev;
	struct vd_writer *w = rpc_event_begin(&ev, bus, "|virt|VM_status|%s", vm);
	vw_keyz(w, vm);
	vw_begin_object(w);
	vw_kstr(w, "status", status);
	vw_end_object(w);
	rpc_event_publish(bus, &ev);
}

START_TEST(event_encoding)
{
	struct event_bus *bus = event_bus_new(json(), 16);
	event_bus_set_enabled(bus, true);
	uint64_t before = vd_now_ms() + INT32_MAX;
	publish_status(bus, "vm-1", "Paused");
	uint64_t after = vd_now_ms() + INT32_MAX;
	struct got g = { 0 };
	ck_assert_int_eq(event_bus_drain(bus, deliver, &g), 1);
	ck_assert_int_eq(g.n, 1);
	ck_assert_ptr_eq(g.codec, json());
	const char *head = "{\"jsonrpc\":\"2.0\",\"method\":\"|virt|VM_status|vm-1\","
			   "\"params\":{\"vm-1\":{\"status\":\"Paused\"},\"notify_time\":";
	ck_assert_msg(strncmp(g.last, head, strlen(head)) == 0, "%s", g.last);
	ck_assert(strcmp(g.last + strlen(g.last) - 2, "}}") == 0);
	/* notify_time: an integer, 2^31-1 + monotonic milliseconds (VDSM) */
	struct vd_arena a;
	arena_init(&a, 1024);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err;
	ck_assert_int_eq(json()->decode(&a, g.last, g.last_len, &lim, &v, &err), 0);
	const struct vd_value *nt = vd_obj_get(vd_obj_get(v, "params"), "notify_time");
	ck_assert_ptr_nonnull(nt);
	ck_assert_int_eq(nt->type, VD_INT);
	ck_assert((uint64_t)nt->v.i >= before && (uint64_t)nt->v.i <= after);
	arena_free(&a);
	/* the method has "|" then three parts */
	struct event_bus_stats st;
	event_bus_stats(bus, &st);
	ck_assert_int_eq(st.published, 1);
	ck_assert_int_eq(st.dropped, 0);
	ck_assert_int_eq(st.queued, 0);
	ck_assert_int_eq(event_bus_drain(bus, deliver, &g), 0);
	event_bus_free(bus);
}
END_TEST

START_TEST(not_published_while_disabled)
{
	struct event_bus *bus = event_bus_new(json(), 16);
	ck_assert(!event_bus_enabled(bus));  /* starts disabled (code 99) */
	publish_status(bus, "a", "Up");
	struct got g = { 0 };
	ck_assert_int_eq(event_bus_drain(bus, deliver, &g), 0);
	struct event_bus_stats st;
	event_bus_stats(bus, &st);
	ck_assert_int_eq(st.published, 0);
	ck_assert_int_eq(st.dropped, 1);
	event_bus_set_enabled(bus, true);
	publish_status(bus, "a", "Up");
	/* queued, then the agent goes back to initializing: not delivered */
	event_bus_set_enabled(bus, false);
	ck_assert_int_eq(event_bus_drain(bus, deliver, &g), 0);
	ck_assert_int_eq(g.n, 0);
	event_bus_stats(bus, &st);
	ck_assert_int_eq(st.dropped, 2);
	event_bus_free(bus);
}
END_TEST

START_TEST(bounded_queue_drops_and_counts)
{
	struct event_bus *bus = event_bus_new(json(), 3);
	event_bus_set_enabled(bus, true);
	for (int i = 0; i < 5; i++)
		publish_status(bus, "vm", "Up");
	struct event_bus_stats st;
	event_bus_stats(bus, &st);
	ck_assert_int_eq(st.published, 3);
	ck_assert_int_eq(st.dropped, 2);
	ck_assert_int_eq(st.queued, 3);
	struct got g = { 0 };
	ck_assert_int_eq(event_bus_drain(bus, deliver, &g), 3);
	/* room again after draining */
	publish_status(bus, "vm", "Down");
	ck_assert_int_eq(event_bus_drain(bus, deliver, &g), 1);
	ck_assert_ptr_nonnull(strstr(g.last, "\"Down\""));
	event_bus_stats(bus, &st);
	ck_assert_int_eq(st.published, 4);
	ck_assert_int_eq(st.dropped, 2);
	/* events left queued are freed with the bus */
	publish_status(bus, "vm", "Up");
	event_bus_free(bus);
}
END_TEST

static void count_wake(void *ctx)
{
	__atomic_fetch_add((int *)ctx, 1, __ATOMIC_SEQ_CST);
}

START_TEST(wake_callback)
{
	struct event_bus *bus = event_bus_new(json(), 2);
	int wakes = 0;
	event_bus_set_wake(bus, count_wake, &wakes);
	publish_status(bus, "x", "Up");  /* disabled: dropped, no wake */
	ck_assert_int_eq(wakes, 0);
	event_bus_set_enabled(bus, true);
	ck_assert(!event_bus_pending(bus));
	publish_status(bus, "x", "Up");  /* the queue was empty: wakes */
	ck_assert_int_eq(wakes, 1);
	ck_assert(event_bus_pending(bus));
	publish_status(bus, "x", "Up");  /* joins the batch: no second wake */
	publish_status(bus, "x", "Up");  /* over the bound: dropped, no wake */
	ck_assert_int_eq(wakes, 1);
	/* one drain takes the whole batch; the next event starts a new one */
	struct got g = { 0 };
	ck_assert_int_eq(event_bus_drain(bus, deliver, &g), 2);
	ck_assert(!event_bus_pending(bus));
	publish_status(bus, "x", "Up");
	ck_assert_int_eq(wakes, 2);
	event_bus_free(bus);
}
END_TEST

START_TEST(null_bus_is_harmless)
{
	struct rpc_event ev;
	struct vd_writer *w = rpc_event_begin(&ev, NULL, "|jobs|status|%d", 5);
	vw_kint(w, "x", 1);
	rpc_event_publish(NULL, &ev);
}
END_TEST

/* ---- publishers on threads, drained by a real loop ---- */

enum { PUBLISHERS = 4, PER_THREAD = 2000 };

struct loop_ctx {
	struct ev_loop *loop;
	ev_async async;
	struct event_bus *bus;
	struct got got;
	uint64_t last_time[PUBLISHERS];
	bool order_ok;
	int expected;
};

static void on_wake(void *ctx)
{
	struct loop_ctx *lc = ctx;
	ev_async_send(lc->loop, &lc->async);
}

static void deliver_check(void *ctx, const char *bytes, size_t len, const struct vd_codec *codec)
{
	struct loop_ctx *lc = ctx;
	deliver(&lc->got, bytes, len, codec);
	/* "|test|tick|<thread>" and notify_time non-decreasing per thread */
	const char *m = strstr(lc->got.last, "|test|tick|");
	const char *t = strstr(lc->got.last, "\"notify_time\":");
	if (!m || !t) {
		lc->order_ok = false;
		return;
	}
	int th = atoi(m + strlen("|test|tick|"));
	uint64_t nt = strtoull(t + strlen("\"notify_time\":"), NULL, 10);
	if (th < 0 || th >= PUBLISHERS || nt < lc->last_time[th])
		lc->order_ok = false;
	else
		lc->last_time[th] = nt;
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct loop_ctx *lc = w->data;
	event_bus_drain(lc->bus, deliver_check, lc);
	if (lc->got.n >= lc->expected)
		ev_break(loop, EVBREAK_ALL);
}

struct pub_arg {
	struct event_bus *bus;
	int idx;
};

static void *publisher(void *arg)
{
	struct pub_arg *pa = arg;
	for (int i = 0; i < PER_THREAD; i++) {
		struct rpc_event ev;
		struct vd_writer *w = rpc_event_begin(&ev, pa->bus, "|test|tick|%d", pa->idx);
		vw_kint(w, "i", i);
		rpc_event_publish(pa->bus, &ev);
	}
	return NULL;
}

START_TEST(drain_on_loop_thread)
{
	struct loop_ctx lc;
	memset(&lc, 0, sizeof(lc));
	lc.order_ok = true;
	lc.expected = PUBLISHERS * PER_THREAD;
	lc.loop = ev_loop_new(EVFLAG_AUTO);
	lc.bus = event_bus_new(json(), (size_t)lc.expected);
	event_bus_set_enabled(lc.bus, true);
	ev_async_init(&lc.async, async_cb);
	lc.async.data = &lc;
	ev_async_start(lc.loop, &lc.async);
	event_bus_set_wake(lc.bus, on_wake, &lc);
	pthread_t th[PUBLISHERS];
	struct pub_arg pa[PUBLISHERS];
	for (int i = 0; i < PUBLISHERS; i++) {
		pa[i] = (struct pub_arg){ lc.bus, i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, publisher, &pa[i]), 0);
	}
	ev_run(lc.loop, 0);
	for (int i = 0; i < PUBLISHERS; i++)
		pthread_join(th[i], NULL);
	event_bus_drain(lc.bus, deliver_check, &lc);
	ck_assert_int_eq(lc.got.n, lc.expected);
	ck_assert(lc.order_ok);
	struct event_bus_stats st;
	event_bus_stats(lc.bus, &st);
	ck_assert_int_eq(st.published, (uint64_t)lc.expected);
	ck_assert_int_eq(st.dropped, 0);
	ev_async_stop(lc.loop, &lc.async);
	ev_loop_destroy(lc.loop);
	event_bus_free(lc.bus);
}
END_TEST

START_TEST(concurrent_publish_bounded)
{
	/* nobody drains: exactly max_queued accepted, the rest counted */
	struct event_bus *bus = event_bus_new(json(), 100);
	event_bus_set_enabled(bus, true);
	pthread_t th[PUBLISHERS];
	struct pub_arg pa[PUBLISHERS];
	for (int i = 0; i < PUBLISHERS; i++) {
		pa[i] = (struct pub_arg){ bus, i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, publisher, &pa[i]), 0);
	}
	for (int i = 0; i < PUBLISHERS; i++)
		pthread_join(th[i], NULL);
	struct event_bus_stats st;
	event_bus_stats(bus, &st);
	ck_assert_int_eq(st.published, 100);
	ck_assert_int_eq(st.dropped, PUBLISHERS * PER_THREAD - 100);
	struct got g = { 0 };
	ck_assert_int_eq(event_bus_drain(bus, deliver, &g), 100);
	event_bus_free(bus);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("event");
	TCase *tc = tcase_create("bus");
	tcase_add_test(tc, event_encoding);
	tcase_add_test(tc, not_published_while_disabled);
	tcase_add_test(tc, bounded_queue_drops_and_counts);
	tcase_add_test(tc, wake_callback);
	tcase_add_test(tc, null_bus_is_harmless);
	tcase_add_test(tc, drain_on_loop_thread);
	tcase_add_test(tc, concurrent_publish_bounded);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
