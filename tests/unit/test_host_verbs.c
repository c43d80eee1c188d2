/* tests/unit/test_host_verbs.c - the Host verbs' handlers on the real host:
 * result shapes and value types as VDSM sends them (decoded back with the
 * real codecs), the capabilities encoding cache per codec, concurrent
 * readers during sampling, and the verbs through the real rpc engine. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/rpc.h"
#include "rpc/schema.h"
#include "vdsmd/host/host_int.h"
#include "check_main.h"
#include "host_test.h"

static struct vdsmd g_d;

static rpc_handler find_handler(const char *name)
{
	for (const struct rpc_binding *b = host_bindings; b->name; b++)
		if (strcmp(b->name, name) == 0)
			return b->fn;
	return NULL;
}

/* Run a handler writing with codec into out; returns its rc. */
static int run(const char *verb, const struct vd_codec *codec, struct vd_buf *out)
{
	rpc_handler fn = find_handler(verb);
	ck_assert_ptr_nonnull(fn);
	struct vd_writer w;
	struct vd_arena a;
	arena_init(&a, 4096);
	codec->writer_init(&w, out);
	struct rpc_call c;
	memset(&c, 0, sizeof(c));
	c.verb = rpc_schema_find(verb);
	c.w = &w;
	c.arena = &a;
	c.app = &g_d;
	int rc = fn(&c);
	ck_assert_int_eq(w.error, 0);
	arena_free(&a);
	return rc;
}

/* A string holding a decimal number (VDSM's "1.23"); returns it. */
static double num_str(const struct vd_value *o, const char *k)
{
	const struct vd_value *v = get(o, k, VD_STRING);
	char tmp[64];
	ck_assert_uint_lt(v->v.s.len, sizeof(tmp));
	memcpy(tmp, v->v.s.ptr, v->v.s.len);
	tmp[v->v.s.len] = '\0';
	char *e;
	double d = strtod(tmp, &e);
	if (e == tmp || *e)
		ck_abort_msg("key %s: \"%s\" is not a number", k, tmp);
	return d;
}

static bool digits_only(const struct vd_value *v)
{
	if (v->type != VD_STRING || v->v.s.len == 0)
		return false;
	for (size_t i = 0; i < v->v.s.len; i++)
		if (v->v.s.ptr[i] < '0' || v->v.s.ptr[i] > '9')
			return false;
	return true;
}

static uint64_t meminfo_kb(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	ck_assert_ptr_nonnull(f);
	char line[256], fmt[64];
	snprintf(fmt, sizeof(fmt), "%s: %%llu kB", key);
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void setup(void)
{
	memset(&g_d, 0, sizeof(g_d));
	g_d.start_ms = vd_now_ms();
	struct host_opts o = { .first_ms = 100 };
	g_d.host = host_state_new(&g_d, &o);
}

static void teardown(void)
{
	host_state_free(g_d.host);
	g_d.host = NULL;
}

START_TEST(ping_writes_nothing)
{
	struct vd_buf b = VD_BUF_INIT;
	ck_assert_int_eq(run("Host.ping2", codec_find("yajl"), &b), 0);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_int_eq(run("Host.confirmConnectivity", codec_find("yajl"), &b), 0);
	ck_assert_uint_eq(b.len, 0);
	buf_free(&b);
}
END_TEST

static void check_stats(const struct vd_value *s)
{
	ck_assert_int_eq(s->type, VD_OBJECT);
	double u = num_str(s, "cpuUser"), y = num_str(s, "cpuSys"), i = num_str(s, "cpuIdle");
	ck_assert(u >= 0 && u <= 100 && y >= 0 && y <= 100 && i >= 0 && i <= 100);
	ck_assert(fabs(u + y + i - 100.0) <= 0.02);   /* three "%.2f" roundings */
	ck_assert(num_str(s, "cpuLoad") >= 0);
	ck_assert(num_str(s, "cpuUserVdsmd") >= 0);
	double used = num_str(s, "memUsed");
	ck_assert(used >= 0 && used <= 100);
	ck_assert(digits_only(vd_obj_get(s, "memUsed")));
	int64_t mem_free = get(s, "memFree", VD_INT)->v.i;
	ck_assert_int_gt(mem_free, 0);
	ck_assert_int_le(mem_free, (int64_t)(meminfo_kb("MemTotal") / 1024));
	ck_assert_int_eq(get(s, "swapTotal", VD_INT)->v.i, (int64_t)(meminfo_kb("SwapTotal") / 1024));
	ck_assert_int_le(get(s, "swapFree", VD_INT)->v.i, get(s, "swapTotal", VD_INT)->v.i);
	ck_assert_int_eq(get(s, "vmCount", VD_INT)->v.i, 0);
	ck_assert_int_eq(get(s, "vmActive", VD_INT)->v.i, 0);
	ck_assert(digits_only(get(s, "elapsedTime", VD_STRING)));
	ck_assert(digits_only(get(s, "bootTime", VD_STRING)));
	ck_assert(num_str(s, "bootTime") > 1e9);
	ck_assert(digits_only(get(s, "rxDropped", VD_STRING)));
	ck_assert(digits_only(get(s, "txDropped", VD_STRING)));
	/* "2026-11-30T01:23:45 GMT" */
	const struct vd_value *dt = get(s, "dateTime", VD_STRING);
	ck_assert_uint_eq(dt->v.s.len, 23);
	ck_assert_int_eq(dt->v.s.ptr[10], 'T');
	ck_assert_int_eq(memcmp(dt->v.s.ptr + 19, " GMT", 4), 0);
	const struct vd_value *net = get(s, "network", VD_OBJECT);
	ck_assert_uint_ge(net->v.obj.n, 1);
	for (size_t k = 0; k < net->v.obj.n; k++) {
		const struct vd_value *it = &net->v.obj.members[k].val;
		ck_assert_int_eq(it->type, VD_OBJECT);
		const struct vd_value *name = get(it, "name", VD_STRING);
		ck_assert_uint_eq(name->v.s.len, net->v.obj.members[k].klen);
		ck_assert_int_eq(memcmp(name->v.s.ptr, net->v.obj.members[k].key, name->v.s.len), 0);
		const char *nums[] = { "rx", "tx", "rxDropped", "txDropped", "rxErrors",
				       "txErrors", "speed" };
		for (size_t n = 0; n < sizeof(nums) / sizeof(nums[0]); n++)
			ck_assert(digits_only(get(it, nums[n], VD_STRING)));
		const struct vd_value *st = get(it, "state", VD_STRING);
		ck_assert(vd_str_eq(st, "up") || vd_str_eq(st, "down") || vd_str_eq(st, "unknown"));
		ck_assert(get(it, "sampleTime", VD_DOUBLE)->v.d > 1e9);
	}
	const struct vd_value *cpus = get(s, "cpuStatistics", VD_OBJECT);
	ck_assert_uint_ge(cpus->v.obj.n, 1);
	for (size_t k = 0; k < cpus->v.obj.n; k++) {
		const struct vd_value *cs = &cpus->v.obj.members[k].val;
		ck_assert_int_ge(get(cs, "nodeIndex", VD_INT)->v.i, 0);
		double cu = num_str(cs, "cpuUser"), cy = num_str(cs, "cpuSys"), ci = num_str(cs, "cpuIdle");
		ck_assert(fabs(cu + cy + ci - 100.0) <= 0.02);
	}
	const struct vd_value *nodes = get(s, "numaNodeMemFree", VD_OBJECT);
	ck_assert_uint_ge(nodes->v.obj.n, 1);
	for (size_t k = 0; k < nodes->v.obj.n; k++) {
		const struct vd_value *nm = &nodes->v.obj.members[k].val;
		ck_assert(digits_only(get(nm, "memFree", VD_STRING)));
		int64_t p = get(nm, "memPercent", VD_INT)->v.i;
		ck_assert(p >= 0 && p <= 100);
	}
	get(s, "storageDomains", VD_OBJECT);
	get(s, "haStats", VD_OBJECT);
}

START_TEST(get_stats_json_and_msgpack)
{
	const char *names[] = { "yajl", "fallback", "msgpack" };
	for (size_t n = 0; n < 3; n++) {
		const struct vd_codec *codec = codec_find(names[n]);
		if (!codec) {
			ck_assert_str_eq(names[n], "msgpack");   /* optional codec */
			continue;
		}
		struct vd_buf b = VD_BUF_INIT;
		struct vd_arena a;
		arena_init(&a, 4096);
		ck_assert_int_eq(run("Host.getStats", codec, &b), 0);
		check_stats(decode_with(codec, &a, &b));
		arena_free(&a);
		buf_free(&b);
	}
}
END_TEST

START_TEST(get_capabilities)
{
	const struct vd_codec *json = codec_find("yajl");
	struct vd_buf b1 = VD_BUF_INIT, b2 = VD_BUF_INIT;
	struct vd_arena a;
	arena_init(&a, 4096);
	ck_assert_uint_eq(atomic_load(&g_d.host->caps->nenc), 0);
	ck_assert_int_eq(run("Host.getCapabilities", json, &b1), 0);
	ck_assert_uint_eq(atomic_load(&g_d.host->caps->nenc), 1);
	const struct vd_value *c = decode_with(json, &a, &b1);
	ck_assert_int_eq(c->type, VD_OBJECT);

	char want[32];
	snprintf(want, sizeof(want), "%llu", (unsigned long long)(meminfo_kb("MemTotal") / 1024));
	ck_assert(vd_str_eq(get(c, "memSize", VD_STRING), want));
	const char *counts[] = { "cpuCores", "cpuSockets", "cpuThreads" };
	for (size_t i = 0; i < 3; i++) {
		ck_assert(digits_only(get(c, counts[i], VD_STRING)));
		ck_assert(num_str(c, counts[i]) >= 1);
	}
	ck_assert(num_str(c, "cpuThreads") >= num_str(c, "cpuCores"));
	get(c, "cpuModel", VD_STRING);
	get(c, "cpuSpeed", VD_STRING);
	const struct vd_value *flags = get(c, "cpuFlags", VD_STRING);
	ck_assert_ptr_null(memchr(flags->v.s.ptr, ' ', flags->v.s.len));
	ck_assert(vd_str_eq(get(c, "kvmEnabled", VD_STRING),
			    access("/dev/kvm", F_OK) == 0 ? "true" : "false"));
	const struct vd_value *os = get(c, "operatingSystem", VD_OBJECT);
	get(os, "name", VD_STRING);
	get(os, "version", VD_STRING);
	get(os, "release", VD_STRING);
	ck_assert(vd_str_eq(get(c, "software_version", VD_STRING), VDSMD_VERSION));
	const struct vd_value *uuid = get(c, "uuid", VD_STRING);
	ck_assert(uuid->v.s.len == 0 || vd_is_uuid(uuid->v.s.ptr, uuid->v.s.len));
	get(c, "hostname", VD_STRING);
	get(c, "clusterLevels", VD_ARRAY);
	const struct vd_value *nodes = get(c, "numaNodes", VD_OBJECT);
	ck_assert_uint_ge(nodes->v.obj.n, 1);
	const struct vd_value *n0 = &nodes->v.obj.members[0].val;
	ck_assert(digits_only(get(n0, "totalMemory", VD_STRING)));
	ck_assert_uint_ge(get(n0, "cpus", VD_ARRAY)->v.arr.n, 1);
	ck_assert_uint_eq(get(c, "numaNodeDistance", VD_OBJECT)->v.obj.n, nodes->v.obj.n);
	int64_t an = get(c, "autoNumaBalancing", VD_INT)->v.i;
	ck_assert(an >= 0 && an <= 2);
	get(c, "hugepages", VD_ARRAY);

	/* the second call copies the cached bytes; the other JSON codec shares
	 * the emitter, so it shares the cache entry too */
	ck_assert_int_eq(run("Host.getCapabilities", codec_find("fallback"), &b2), 0);
	ck_assert_uint_eq(b1.len, b2.len);
	ck_assert_int_eq(memcmp(b1.data, b2.data, b1.len), 0);
	ck_assert_uint_eq(atomic_load(&g_d.host->caps->nenc), 1);

	const struct vd_codec *mp = codec_find("msgpack");
	if (mp) {
		struct vd_buf b3 = VD_BUF_INIT;
		ck_assert_int_eq(run("Host.getCapabilities", mp, &b3), 0);
		ck_assert_uint_eq(atomic_load(&g_d.host->caps->nenc), 2);
		ck_assert(vd_value_equal(decode_with(mp, &a, &b3), c));
		buf_free(&b3);
	}
	arena_free(&a);
	buf_free(&b1);
	buf_free(&b2);
}
END_TEST

/* ---- concurrency: lazy encoding and snapshot reads vs the sampler --------- */

struct reader_arg {
	const char *verb;
	int iterations;
	char *first;
	size_t first_len;
	bool mismatch;
};

static void *reader(void *p)
{
	struct reader_arg *ra = p;
	const struct vd_codec *json = codec_find("yajl");
	for (int i = 0; i < ra->iterations; i++) {
		struct vd_buf b = VD_BUF_INIT;
		if (run(ra->verb, json, &b) != 0 || b.len == 0)
			ra->mismatch = true;
		if (!ra->first) {
			ra->first = b.data;
			ra->first_len = b.len;
			continue;
		}
		if (strcmp(ra->verb, "Host.getCapabilities") == 0 &&
		    (b.len != ra->first_len || memcmp(b.data, ra->first, b.len) != 0))
			ra->mismatch = true;
		buf_free(&b);
	}
	return NULL;
}

START_TEST(concurrent_readers)
{
	/* a sampler swapping every millisecond while 4 threads read stats and
	 * capabilities (first capabilities encode races between threads) */
	host_state_free(g_d.host);
	struct host_opts o = { .interval_ms = 1, .first_ms = 1, .start_thread = true };
	g_d.host = host_state_new(&g_d, &o);
	pthread_t t[4];
	struct reader_arg ra[4];
	for (int i = 0; i < 4; i++) {
		ra[i] = (struct reader_arg){ .verb = i % 2 ? "Host.getStats" : "Host.getCapabilities",
					     .iterations = 300 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, reader, &ra[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++) {
		ck_assert(!ra[i].mismatch);
		free(ra[i].first);
	}
	ck_assert_uint_eq(atomic_load(&g_d.host->caps->nenc), 1);
	ck_assert_uint_eq(ra[0].first_len, ra[2].first_len);
	/* the sampler thread may be starved under load: wait (bounded, 10 s)
	 * for it to produce more than one sample rather than a fixed time */
	for (int i = 0; i < 1000 && atomic_load(&g_d.host->samples) <= 1; i++)
		usleep(10 * 1000);
	ck_assert_uint_gt(atomic_load(&g_d.host->samples), 1);
}
END_TEST

/* ---- through the real engine ------------------------------------------------ */

struct reply {
	char *bytes;
	size_t len;
	int calls;
};

static void on_reply(void *ctx, const struct rpc_response *r)
{
	struct reply *rp = ctx;
	rp->calls++;
	free(rp->bytes);
	rp->bytes = r->len ? strndup(r->bytes, r->len) : NULL;
	rp->len = r->len;
}

static const struct vd_value *dispatch(struct rpc_engine *e, const char *body,
				       struct vd_arena *a, struct reply *rp)
{
	struct rpc_request_info info = { .codec = codec_find("yajl"), .transport = "test" };
	rp->calls = 0;
	rpc_dispatch(e, &info, body, strlen(body), on_reply, rp);
	ck_assert_int_eq(rp->calls, 1);
	struct vd_buf b = { rp->bytes, rp->len, rp->len };
	return decode_with(codec_find("yajl"), a, &b);
}

START_TEST(through_engine)
{
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct rpc_engine *e = rpc_engine_new(&lim);
	char why[256] = "";
	ck_assert_int_eq(rpc_engine_declare(e, rpc_schema_host), 0);
	ck_assert_int_eq(rpc_engine_bind(e, host_bindings, &g_d), 0);
	int rc = rpc_engine_seal(e, why, sizeof(why));
	if (rc)
		ck_abort_msg("seal: %s", why);
	struct vd_arena a;
	arena_init(&a, 4096);
	struct reply rp = { 0 };

	/* before the agent is ready: ping2 answers, the others say 99 */
	const struct vd_value *v = dispatch(e, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Host.ping2\"}", &a, &rp);
	ck_assert(get(v, "result", VD_BOOL)->v.b);
	v = dispatch(e, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Host.getStats\",\"params\":{}}", &a, &rp);
	ck_assert_int_eq(get(get(v, "error", VD_OBJECT), "code", VD_INT)->v.i, 99);

	rpc_engine_set_ready(e, true);
	v = dispatch(e, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"Host.confirmConnectivity\"}", &a, &rp);
	ck_assert(get(v, "result", VD_BOOL)->v.b);
	v = dispatch(e, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"Host.getStats\",\"params\":[]}", &a, &rp);
	check_stats(get(v, "result", VD_OBJECT));
	v = dispatch(e, "[{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"Host.getCapabilities\"}]", &a, &rp);
	get(get(v, "result", VD_OBJECT), "memSize", VD_STRING);
	ck_assert_int_eq(get(v, "id", VD_INT)->v.i, 5);
	free(rp.bytes);
	arena_free(&a);
	rpc_engine_free(e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("host_verbs");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, ping_writes_nothing);
	tcase_add_test(tc, get_stats_json_and_msgpack);
	tcase_add_test(tc, get_capabilities);
	tcase_add_test(tc, concurrent_readers);
	tcase_add_test(tc, through_engine);
	suite_add_tcase(s, tc);
	return check_run(s);
}
