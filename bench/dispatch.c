/* bench/dispatch.c - JSON-RPC engine and worker pool benchmarks (no sockets).
 *
 *   dispatch [--quick]
 *
 * 1. ns per request for decode → envelope → lookup → params → handler →
 *    encode, for a ping-like verb (no params) and a verb with a UUID and an
 *    int param, with every codec compiled in.
 * 2. Worker pool scaling: throughput of an RPC_F_BLOCKING verb that sleeps
 *    1 ms and of one that burns 1 ms of CPU, through the engine, the pool and
 *    a libev loop, with 1, 2, 4 and 8 workers; the serial baseline (same
 *    handler run inline on the loop thread) is measured in the same run. */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../rpc/rpc.h"
#include "../vdsmd/pool.h"

#define REPEAT 3

static void print_load(void)
{
	double l1 = 0;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &l1) != 1)
			l1 = 0;
		fclose(f);
	}
	printf("(load average at start: %.2f)\n", l1);
}

static int h_ping(struct rpc_call *c)
{
	(void)c;
	return 0;
}

static int h_stats(struct rpc_call *c)
{
	size_t n;
	const char *id = rpc_arg_str(c, "vmID", &n);
	struct vd_writer *w = c->w;
	vw_begin_array(w);
	vw_begin_object(w);
	vw_keyz(w, "vmId");
	vw_string(w, id, n);
	vw_kstr(w, "status", "Up");
	vw_kint(w, "level", rpc_arg_int(c, "level", 0));
	vw_end_object(w);
	vw_end_array(w);
	return 0;
}

static int h_sleep(struct rpc_call *c)
{
	(void)c;
	struct timespec ts = { 0, 1000 * 1000 };
	nanosleep(&ts, NULL);
	return 0;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int h_burn(struct rpc_call *c)
{
	(void)c;
	uint64_t end = thread_cpu_ns() + 1000 * 1000;
	volatile uint64_t x = 1;
	while (thread_cpu_ns() < end)
		for (int i = 0; i < 200; i++)
			x = x * 6364136223846793005u + 1442695040888963407u;
	return 0;
}

static const struct rpc_param p_stats[] = {
	{ "vmID", RPC_T_UUID, true, NULL, NULL },
	{ "level", RPC_T_INT, false, "0", NULL },
};

static const struct rpc_verb_decl decls[] = {
	{ .name = "Host.ping2", .flags = RPC_F_ALWAYS },
	{ .name = "VM.getStats", .params = p_stats, .nparams = 2 },
	{ .name = "Bench.sleep", .flags = RPC_F_BLOCKING },
	{ .name = "Bench.burn", .flags = RPC_F_BLOCKING },
	{ .name = NULL },
};

static const struct rpc_binding binds[] = {
	{ "Host.ping2", h_ping }, { "VM.getStats", h_stats },
	{ "Bench.sleep", h_sleep }, { "Bench.burn", h_burn }, { NULL, NULL },
};

static struct rpc_engine *new_engine(void)
{
	struct rpc_engine *e = rpc_engine_new(NULL);
	char why[256];
	if (rpc_engine_declare(e, decls) || rpc_engine_bind(e, binds, NULL) ||
	    rpc_engine_seal(e, why, sizeof(why))) {
		fprintf(stderr, "dispatch: engine: %s\n", why);
		exit(1);
	}
	rpc_engine_set_ready(e, true);
	return e;
}

struct sink {
	size_t replies;
	size_t bytes;
};

static void on_reply(void *ctx, const struct rpc_response *r)
{
	struct sink *s = ctx;
	s->replies++;
	s->bytes += r->len;
}

static void encode_request(const struct vd_codec *cd, struct vd_buf *out, const char *method,
			   bool with_params)
{
	struct vd_writer w;
	cd->writer_init(&w, out);
	vw_begin_object(&w);
	vw_kstr(&w, "jsonrpc", "2.0");
	vw_kstr(&w, "id", "5ba6c0f4-2b05-4e5d-9d0b-6f5e0d4c1a11");
	vw_kstr(&w, "method", method);
	vw_keyz(&w, "params");
	vw_begin_object(&w);
	if (with_params) {
		vw_kstr(&w, "vmID", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d");
		vw_kint(&w, "level", 2);
	}
	vw_end_object(&w);
	vw_end_object(&w);
}

static void bench_dispatch(bool quick)
{
	struct rpc_engine *e = new_engine();
	const struct vd_codec *const *l = codec_list();
	size_t ncodecs = 0;
	while (l[ncodecs])
		ncodecs++;
	/* One budget of requests for the table (what three codecs had before
	 * auto came), shared by its rows: a codec more does not make the run
	 * longer. */
	const size_t iters = (quick ? 100000 : 1000000) * 3 / (ncodecs ? ncodecs : 1);
	printf("## rpc dispatch: decode -> dispatch -> encode, no sockets (best of %d x %zu requests)\n",
	       REPEAT, iters);
	printf("%-10s %-12s %10s %12s %14s\n", "codec", "verb", "req bytes", "ns/request", "requests/s");
	for (size_t k = 0; l[k]; k++) {
		for (int v = 0; v < 2; v++) {
			const char *method = v ? "VM.getStats" : "Host.ping2";
			struct vd_buf req = VD_BUF_INIT;
			encode_request(l[k], &req, method, v == 1);
			struct rpc_request_info info = { l[k], NULL, "bench", NULL };
			struct sink s = { 0, 0 };
			for (size_t i = 0; i < iters / 20; i++)  /* warm up */
				rpc_dispatch(e, &info, req.data, req.len, on_reply, &s);
			/* best of REPEAT rounds: the machine is shared */
			double ns = 0;
			for (int r = 0; r < REPEAT; r++) {
				s.replies = 0;
				uint64_t t0 = vd_now_ns();
				for (size_t i = 0; i < iters; i++)
					rpc_dispatch(e, &info, req.data, req.len, on_reply, &s);
				uint64_t dt = vd_now_ns() - t0;
				if (s.replies != iters) {
					fprintf(stderr, "dispatch: %zu replies for %zu requests\n",
						s.replies, iters);
					exit(1);
				}
				double x = (double)dt / (double)iters;
				if (r == 0 || x < ns)
					ns = x;
			}
			printf("%-10s %-12s %10zu %12.0f %14.0f\n", l[k]->name, method, req.len, ns,
			       1e9 / ns);
			buf_free(&req);
		}
	}
	rpc_engine_free(e);
	printf("\n");
}

/* Throughput of n blocking requests; workers == 0: inline (serial). */
static double run_pool(const char *method, unsigned workers, size_t n)
{
	struct rpc_engine *e = new_engine();
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct vd_pool *p = NULL;
	if (workers) {
		p = pool_new(loop, workers, (unsigned)n);
		rpc_engine_set_submit(e, pool_submit, p);
	}
	struct vd_buf req = VD_BUF_INIT;
	encode_request(codec_find("yajl"), &req, method, false);
	struct rpc_request_info info = { codec_find("yajl"), NULL, "bench", NULL };
	struct sink s = { 0, 0 };
	uint64_t t0 = vd_now_ns();
	for (size_t i = 0; i < n; i++)
		rpc_dispatch(e, &info, req.data, req.len, on_reply, &s);
	ev_run(loop, 0);  /* returns once every completion ran */
	uint64_t dt = vd_now_ns() - t0;
	if (s.replies != n) {
		fprintf(stderr, "dispatch: pool %s/%u: %zu replies for %zu\n", method, workers,
			s.replies, n);
		exit(1);
	}
	pool_free(p);
	ev_loop_destroy(loop);
	buf_free(&req);
	rpc_engine_free(e);
	return (double)n * 1e9 / (double)dt;
}

static void bench_pool(bool quick)
{
	static const unsigned counts[] = { 1, 2, 4, 8 };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t n = quick ? 200 : 800;
	printf("## worker pool scaling: %zu blocking requests per run, best of %d, %ld CPUs online\n",
	       n, REPEAT, cpus);
	printf("%-12s %-8s %12s %9s\n", "verb", "workers", "requests/s", "speedup");
	const char *methods[] = { "Bench.sleep", "Bench.burn" };
	const char *labels[] = { "sleep 1ms", "burn 1ms" };
	print_load();
	for (int m = 0; m < 2; m++) {
		/* best of REPEAT runs per setup, rounds interleaved so a burst
		 * of load elsewhere does not hit one setup only */
		double best[1 + VD_ARRAY_SIZE(counts)] = { 0 };
		for (int r = 0; r < REPEAT; r++)
			for (size_t c = 0; c <= VD_ARRAY_SIZE(counts); c++) {
				double x = run_pool(methods[m], c ? counts[c - 1] : 0, n);
				if (x > best[c])
					best[c] = x;
			}
		printf("%-12s %-8s %12.0f %9s\n", labels[m], "serial", best[0], "1.00x");
		for (size_t c = 0; c < VD_ARRAY_SIZE(counts); c++)
			printf("%-12s %-8u %12.0f %8.2fx\n", labels[m], counts[c], best[c + 1],
			       best[c + 1] / best[0]);
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	bool only_dispatch = argc > 1 && strcmp(argv[1], "--dispatch") == 0;
	bool only_pool = argc > 1 && strcmp(argv[1], "--pool") == 0;
	if (!only_pool)
		bench_dispatch(quick);
	if (!only_dispatch)
		bench_pool(quick);
	return 0;
}
