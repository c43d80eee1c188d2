/* bench/host.c - cost of the host backend: one sample of /proc + /sys (the
 * sampler's work every interval, wall and CPU time), the Host.getStats
 * handler (snapshot read + encode), Host.getCapabilities from its cached
 * encoding vs encoding it field by field, and a snapshot get/put pair.
 *
 *   build/bench/host [iterations-scale]      (default 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vdsmd/host/host_int.h"

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static rpc_handler handler(const char *name)
{
	for (const struct rpc_binding *b = host_bindings; b->name; b++)
		if (strcmp(b->name, name) == 0)
			return b->fn;
	fprintf(stderr, "no handler %s\n", name);
	exit(1);
}

/* ns per call of verb, encoding with codec into a reused buffer. */
static double bench_verb(struct vdsmd *d, const char *verb, const struct vd_codec *codec,
			 long n, size_t *bytes)
{
	rpc_handler fn = handler(verb);
	struct vd_buf out = VD_BUF_INIT;
	struct vd_arena a;
	arena_init(&a, 4096);
	uint64_t t0 = vd_now_ns();
	for (long i = 0; i < n; i++) {
		struct vd_writer w;
		buf_reset(&out);
		codec->writer_init(&w, &out);
		struct rpc_call c;
		memset(&c, 0, sizeof(c));
		c.w = &w;
		c.arena = &a;
		c.app = d;
		if (fn(&c) != 0) {
			fprintf(stderr, "%s failed\n", verb);
			exit(1);
		}
	}
	uint64_t t1 = vd_now_ns();
	*bytes = out.len;
	buf_free(&out);
	arena_free(&a);
	return (double)(t1 - t0) / (double)n;
}

int main(int argc, char **argv)
{
	long scale = argc > 1 ? atol(argv[1]) : 1;
	if (scale < 1)
		scale = 1;
	static struct vdsmd d;
	d.start_ms = vd_now_ms();
	struct host_opts o = { .first_ms = 100 };
	d.host = host_state_new(&d, &o);
	const struct vd_codec *json = codec_find("yajl");
	const struct vd_codec *mp = codec_find("msgpack");

	printf("host backend (%s, %zu interfaces in the last sample)\n",
	       d.host->caps->cpu.model, d.host->snap ? d.host->snap->nif : (size_t)0);
	printf("%-44s %12s %12s\n", "operation", "per op", "detail");

	long ns = 200 * scale;
	uint64_t w0 = vd_now_ns(), c0 = cpu_ns();
	for (long i = 0; i < ns; i++)
		host_sample_now(d.host);
	double wall = (double)(vd_now_ns() - w0) / (double)ns, cpu = (double)(cpu_ns() - c0) / (double)ns;
	printf("%-44s %9.1f us %9.1f us cpu\n", "one sample (/proc + /sys, build, swap)",
	       wall / 1e3, cpu / 1e3);
	printf("%-44s %12s %9.4f %% cpu\n", "  sampler share of one CPU at 15 s interval", "",
	       cpu / 15e9 * 100.0);

	size_t bytes;
	long nv = 20000 * scale;
	double t = bench_verb(&d, "Host.getStats", json, nv, &bytes);
	printf("%-44s %9.0f ns %9zu B\n", "Host.getStats handler (json)", t, bytes);
	if (mp) {
		t = bench_verb(&d, "Host.getStats", mp, nv, &bytes);
		printf("%-44s %9.0f ns %9zu B\n", "Host.getStats handler (msgpack)", t, bytes);
	}
	t = bench_verb(&d, "Host.getCapabilities", json, nv * 5, &bytes);
	printf("%-44s %9.0f ns %9zu B\n", "Host.getCapabilities cached (json, vw_raw)", t, bytes);

	struct vd_buf out = VD_BUF_INIT;
	uint64_t e0 = vd_now_ns();
	for (long i = 0; i < nv; i++) {
		struct vd_writer w;
		buf_reset(&out);
		json->writer_init(&w, &out);
		host_caps_encode(d.host->caps, &w, NULL);
	}
	printf("%-44s %9.0f ns %9zu B\n", "Host.getCapabilities encoded each time (json)",
	       (double)(vd_now_ns() - e0) / (double)nv, out.len);
	buf_free(&out);

	long np = 1000000 * scale;
	uint64_t p0 = vd_now_ns();
	for (long i = 0; i < np; i++)
		host_snapshot_put(host_snapshot_get(d.host));
	printf("%-44s %9.1f ns\n", "snapshot get + put (uncontended)",
	       (double)(vd_now_ns() - p0) / (double)np);

	host_state_free(d.host);
	return 0;
}
