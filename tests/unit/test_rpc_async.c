/* tests/unit/test_rpc_async.c - RPC_F_BLOCKING verbs through the real worker
 * pool and a real libev loop: replies later on the loop thread with copied
 * args (the body is freed right after rpc_dispatch), code 1100 at once when
 * the queue is full, batches mixing blocking and fast members,
 * notifications. */
#include "rpc_test.h"

#include <arpa/inet.h>
#include <ev.h>
#include "../../vdsmd/pool.h"
#include "check_main.h"

enum { MAXR = 16 };

struct replies {
	int n;
	struct collected r[MAXR];
	pthread_t loop_thread;
	bool on_loop_thread;
};

static void multi_reply(void *ctx, const struct rpc_response *r)
{
	struct replies *rs = ctx;
	if (!pthread_equal(pthread_self(), rs->loop_thread))
		rs->on_loop_thread = false;
	ck_assert_int_lt(rs->n, MAXR);
	collect_reply(&rs->r[rs->n++], r);
}

static void replies_init(struct replies *rs)
{
	memset(rs, 0, sizeof(*rs));
	rs->loop_thread = pthread_self();
	rs->on_loop_thread = true;
}

static void replies_free(struct replies *rs)
{
	for (int i = 0; i < rs->n; i++)
		collected_reset(&rs->r[i]);
}

static struct test_app app;
static struct rpc_engine *eng;
static struct ev_loop *loop;
static struct vd_pool *pool;

static void start(unsigned threads, unsigned queue)
{
	test_app_init(&app);
	eng = test_engine(&app, true);
	loop = ev_loop_new(EVFLAG_AUTO);
	pool = pool_new(loop, threads, queue);
	rpc_engine_set_submit(eng, pool_submit, pool);
}

static void stop(void)
{
	pool_free(pool);
	ev_loop_destroy(loop);
	rpc_engine_free(eng);
	test_app_fini(&app);
}

static void send_req(const char *body, struct replies *rs)
{
	struct rpc_request_info info = { json_codec_for_tests(), "flow-a", "test", NULL };
	size_t n = strlen(body);
	char *copy = malloc(n + 1);
	memcpy(copy, body, n + 1);
	rpc_dispatch(eng, &info, copy, n, multi_reply, rs);
	memset(copy, 'X', n);  /* the engine must not read the body later */
	free(copy);
}

static void wait_blocked(int n)
{
	pthread_mutex_lock(&app.mu);
	while (app.blocked < n)
		pthread_cond_wait(&app.cv, &app.mu);
	pthread_mutex_unlock(&app.mu);
}

static void release_all(void)
{
	pthread_mutex_lock(&app.mu);
	app.release = true;
	pthread_cond_broadcast(&app.cv);
	pthread_mutex_unlock(&app.mu);
}

START_TEST(blocking_reply_later)
{
	start(2, 8);
	struct replies rs;
	replies_init(&rs);
	send_req("{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"Test.slowEcho\","
	     "\"params\":{\"value\":{\"name\":\"a\\tb\",\"list\":[1,\"two\",{\"x\":null}]}}}", &rs);
	ck_assert_int_eq(rs.n, 0);  /* not answered before the worker ran */
	ev_run(loop, 0);
	ck_assert_int_eq(rs.n, 1);
	ck_assert(rs.on_loop_thread);
	ck_assert_str_eq(rs.r[0].bytes, "{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"result\":"
			 "{\"name\":\"a\\tb\",\"list\":[1,\"two\",{\"x\":null}]}}");
	ck_assert(rs.r[0].id_present);
	ck_assert_str_eq(rs.r[0].id_str, "s1");
	replies_free(&rs);
	stop();
}
END_TEST

/* The transport's local address reaches the handler, fast or on the pool,
 * though the caller's buffer is gone once rpc_dispatch returns. */
START_TEST(local_address_reaches_handlers)
{
	start(1, 4);
	struct replies rs;
	replies_init(&rs);
	static const char *const bodies[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.where\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.slowWhere\"}",
	};
	for (int i = 0; i < 2; i++) {
		char addr[INET6_ADDRSTRLEN] = "192.0.2.1";
		struct rpc_request_info info = { json_codec_for_tests(), NULL, "test", addr };
		rpc_dispatch(eng, &info, bodies[i], strlen(bodies[i]), multi_reply, &rs);
		memset(addr, 'X', sizeof(addr) - 1);
	}
	ev_run(loop, 0);
	ck_assert_int_eq(rs.n, 2);
	ck_assert_str_eq(rs.r[0].bytes, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"
			 "{\"flow\":null,\"local\":\"192.0.2.1\"}}");
	ck_assert_str_eq(rs.r[1].bytes, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":"
			 "{\"flow\":null,\"local\":\"192.0.2.1\"}}");
	/* none given: null */
	struct rpc_request_info none = { json_codec_for_tests(), "f", "test", NULL };
	rpc_dispatch(eng, &none, bodies[1], strlen(bodies[1]), multi_reply, &rs);
	ev_run(loop, 0);
	ck_assert_int_eq(rs.n, 3);
	ck_assert_str_eq(rs.r[2].bytes, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":"
			 "{\"flow\":\"f\",\"local\":null}}");
	replies_free(&rs);
	stop();
}
END_TEST

START_TEST(queue_full_answers_1100)
{
	start(1, 1);
	struct replies rs;
	replies_init(&rs);
	send_req("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.block\",\"params\":[\"one\"]}", &rs);
	wait_blocked(1);  /* the only worker is busy */
	send_req("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.block\",\"params\":[\"two\"]}", &rs);
	ck_assert_int_eq(rs.n, 0);  /* queued */
	send_req("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"Test.block\",\"params\":[\"three\"]}", &rs);
	ck_assert_int_eq(rs.n, 1);  /* answered at once */
	ck_assert_str_eq(rs.r[0].bytes, "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":1100,"
			 "\"message\":\"Not enough resources: worker queue full, Test.block not run\"}}");
	/* fast verbs still run on the loop thread meanwhile */
	send_req("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"Test.echo\",\"params\":[4]}", &rs);
	ck_assert_int_eq(rs.n, 2);
	ck_assert_str_eq(rs.r[1].bytes, "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":4}");
	release_all();
	ev_run(loop, 0);
	ck_assert_int_eq(rs.n, 4);
	ck_assert_str_eq(rs.r[2].bytes, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"one\"}");
	ck_assert_str_eq(rs.r[3].bytes, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\"two\"}");
	ck_assert_int_eq(app.ran, 2);
	struct vd_buf m = VD_BUF_INIT;
	rpc_metrics_format(eng, &m);
	buf_putc(&m, '\0');
	ck_assert_ptr_nonnull(strstr(m.data, "vdsmd_rpc_requests_total{verb=\"Test.block\",result=\"ok\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(m.data,
		"vdsmd_rpc_requests_total{verb=\"Test.block\",result=\"error\",code=\"1100\"} 1\n"));
	buf_free(&m);
	replies_free(&rs);
	stop();
}
END_TEST

START_TEST(batch_mixed)
{
	start(2, 8);
	struct replies rs;
	replies_init(&rs);
	send_req("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.slowEcho\",\"params\":[\"slow\"]},"
	     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.echo\",\"params\":[\"fast\"]},"
	     "{\"jsonrpc\":\"2.0\",\"method\":\"Test.slowEcho\",\"params\":[\"quiet\"]},"
	     "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"Test.slowEcho\",\"params\":[[1,{\"k\":\"v\"}]]}]", &rs);
	ck_assert_int_eq(rs.n, 0);
	ev_run(loop, 0);
	ck_assert_int_eq(rs.n, 1);  /* one reply for the whole batch, in order */
	ck_assert_str_eq(rs.r[0].bytes,
			 "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"slow\"},"
			 "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\"fast\"},"
			 "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":[1,{\"k\":\"v\"}]}]");
	ck_assert_int_eq(app.ran, 3);  /* the notification ran too */
	replies_free(&rs);
	stop();
}
END_TEST

START_TEST(batch_member_rejected)
{
	start(1, 1);
	struct replies rs;
	replies_init(&rs);
	send_req("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"Test.block\"}", &rs);
	wait_blocked(1);
	send_req("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.block\",\"params\":[\"q\"]},"
	     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.block\"}]", &rs);
	ck_assert_int_eq(rs.n, 0);
	release_all();
	ev_run(loop, 0);
	ck_assert_int_eq(rs.n, 2);
	ck_assert_str_eq(rs.r[0].bytes, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":\"t\"}");
	ck_assert_str_eq(rs.r[1].bytes,
			 "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"q\"},"
			 "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":1100,"
			 "\"message\":\"Not enough resources: worker queue full, Test.block not run\"}}]");
	replies_free(&rs);
	stop();
}
END_TEST

START_TEST(blocking_notification)
{
	start(2, 4);
	struct replies rs;
	replies_init(&rs);
	send_req("{\"jsonrpc\":\"2.0\",\"method\":\"Test.slowEcho\",\"params\":[1]}", &rs);
	ck_assert_int_eq(rs.n, 0);
	ev_run(loop, 0);
	ck_assert_int_eq(app.ran, 1);
	ck_assert_int_eq(rs.n, 1);  /* reply called once, with nothing to send */
	ck_assert(!rs.r[0].had_bytes);
	ck_assert_int_eq(rs.r[0].len, 0);
	replies_free(&rs);
	stop();
}
END_TEST

START_TEST(shutdown_with_work_in_flight)
{
	start(2, 16);
	struct replies rs;
	replies_init(&rs);
	for (int i = 0; i < 6; i++)
		send_req("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"Test.slowEcho\",\"params\":[7]}", &rs);
	/* pool_free finishes the jobs and runs the completions: each reply once */
	pool_free(pool);
	pool = pool_new(loop, 1, 1);
	ck_assert_int_eq(rs.n, 6);
	for (int i = 0; i < 6; i++)
		ck_assert_str_eq(rs.r[i].bytes, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":7}");
	replies_free(&rs);
	stop();
}
END_TEST

START_TEST(every_codec_async)
{
	start(2, 8);
	const struct vd_codec *const *l = codec_list();
	for (size_t i = 0; l[i]; i++) {
		const struct vd_codec *cd = l[i];
		struct vd_buf req = VD_BUF_INIT;
		struct vd_writer w;
		cd->writer_init(&w, &req);
		vw_begin_object(&w);
		vw_kstr(&w, "jsonrpc", "2.0");
		vw_kstr(&w, "id", "abc");
		vw_kstr(&w, "method", "Test.slowEcho");
		vw_keyz(&w, "params");
		vw_begin_object(&w);
		vw_keyz(&w, "value");
		vw_begin_array(&w);
		vw_strz(&w, "deep");
		vw_int(&w, 3);
		vw_end_array(&w);
		vw_end_object(&w);
		vw_end_object(&w);
		struct replies rs;
		replies_init(&rs);
		struct rpc_request_info info = { cd, NULL, "test", NULL };
		rpc_dispatch(eng, &info, req.data, req.len, multi_reply, &rs);
		memset(req.data, 0, req.len);
		buf_free(&req);
		ev_run(loop, 0);
		ck_assert_int_eq(rs.n, 1);
		ck_assert_ptr_eq(rs.r[0].codec, cd);
		struct vd_arena a;
		arena_init(&a, 1024);
		struct vd_value *v = decode_reply(&a, cd, rs.r[0].bytes, rs.r[0].len);
		ck_assert(vd_str_eq(vd_obj_get(v, "id"), "abc"));
		const struct vd_value *r = vd_obj_get(v, "result");
		ck_assert(r && r->type == VD_ARRAY && r->v.arr.n == 2);
		ck_assert(vd_str_eq(&r->v.arr.items[0], "deep"));
		arena_free(&a);
		replies_free(&rs);
	}
	stop();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rpc_async");
	TCase *tc = tcase_create("async");
	tcase_add_test(tc, blocking_reply_later);
	tcase_add_test(tc, local_address_reaches_handlers);
	tcase_add_test(tc, queue_full_answers_1100);
	tcase_add_test(tc, batch_mixed);
	tcase_add_test(tc, batch_member_rejected);
	tcase_add_test(tc, blocking_notification);
	tcase_add_test(tc, shutdown_with_work_in_flight);
	tcase_add_test(tc, every_codec_async);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
