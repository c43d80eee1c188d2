/* bench/codec.c - codec microbenchmarks (issue 2, Benchmark section).
 *
 * Fixtures are generated here: a 141-byte VM.getStats request and
 * Host.getAllVmStats responses for 1, 100 and 1000 VMs built from a realistic
 * VDSM VM stats object (~45 keys, nested network/disks/memoryStats/..., most
 * numbers as strings).  For each codec: decode MB/s, encode MB/s (the decoded
 * tree written back through the codec's streaming writer) and ns per request
 * for "request bytes -> method, id and params found".  References in the same
 * run: raw yajl SAX with no-op callbacks (the ceiling of the yajl path),
 * yajl_gen writing the same tree (to pick the yajl codec's emitter), and
 * Python's json (bench/codec_ref.py, run with /usr/bin/python3).
 *
 * Throughput is JSON-equivalent: the minified JSON size of the document
 * divided by the time, also for msgpack.  Each figure is the median of RUNS
 * timed runs (each >= ~40 ms of this thread's CPU time, so that time spent
 * preempted on a shared machine does not count) with the spread (max-min over
 * the median) in percent.
 *
 *   build/bench/codec [--quick] [--no-python] [--only CODEC] [--json FILE]
 *                     [--dump DIR]   (write the fixtures there and exit)
 * Output: a table, then one JSON object per row. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

#include "codecs/codec.h"

#define MAX_ROWS 256
#define NFX 7

struct fixture {
	const char *name;
	struct vd_buf json;       /* minified JSON */
	struct vd_buf mp;         /* msgpack encoding of the same value */
	bool is_request;
};

struct row {
	char codec[32], fixture[16], op[16];
	double mb_per_s, ns_per_op, spread_pct;
};

static struct row rows[MAX_ROWS];
static int nrows;
static int runs = 7;
static double run_ms = 40;

/* --- fixtures ------------------------------------------------------------ */

static void uuid_n(char out[37], unsigned seed, unsigned n)
{
	snprintf(out, 37, "%08x-%04x-4%03x-8%03x-%012x", seed * 2654435761u, n & 0xffff,
		 n % 4096, (n * 7) % 4096, n * 40503u);
}

static void vm_stats(struct vd_writer *w, unsigned i)
{
	char id[37], img[37];
	uuid_n(id, 1, i);
	vw_begin_object(w);
	vw_kstr(w, "vmId", id);
	vw_kstrf(w, "vmName", "web-%04u", i);
	vw_kstr(w, "status", i % 17 == 0 ? "Paused" : "Up");
	vw_kstrf(w, "statusTime", "%lu", 4295012345ul + i);
	vw_kstrf(w, "elapsedTime", "%u", 86400 + i * 13);
	vw_kstr(w, "monitorResponse", "0");
	vw_kstr(w, "acpiEnable", "true");
	vw_kstr(w, "kvmEnable", "true");
	vw_kstr(w, "vmType", "kvm");
	vw_kstr(w, "timeOffset", "0");
	vw_kstr(w, "pauseCode", "NOERR");
	vw_kstr(w, "clientIp", "");
	vw_kstrf(w, "cpuUser", "%u.%02u", i % 50, (i * 7) % 100);
	vw_kstrf(w, "cpuSys", "%u.%02u", i % 10, (i * 3) % 100);
	vw_kstrf(w, "cpuUsage", "%lu", 12340000000ul + i * 1000ul);
	vw_kstrf(w, "memUsage", "%u", 20 + i % 60);
	vw_kstr(w, "vcpuCount", "2");
	vw_kint(w, "vcpuPeriod", 100000);
	vw_kstr(w, "vcpuQuota", "-1");
	vw_kstrf(w, "hash", "%d", (int)(i * 2654435761u));
	vw_keyz(w, "memoryStats");
	vw_begin_object(w);
	vw_kstr(w, "mem_total", "4194304");
	vw_kstrf(w, "mem_unused", "%u", 2097152 + i);
	vw_kstrf(w, "mem_free", "%u", 2200000 + i);
	vw_kstr(w, "swap_in", "0");
	vw_kstr(w, "swap_out", "0");
	vw_kstr(w, "majflt", "0");
	vw_kstrf(w, "minflt", "%u", 1234 + i);
	vw_kstrf(w, "pageflt", "%u", 1234 + i);
	vw_end_object(w);
	vw_keyz(w, "balloonInfo");
	vw_begin_object(w);
	vw_kstr(w, "balloon_max", "4194304");
	vw_kstr(w, "balloon_min", "0");
	vw_kstr(w, "balloon_cur", "4194304");
	vw_kstr(w, "balloon_target", "4194304");
	vw_end_object(w);
	vw_keyz(w, "network");
	vw_begin_object(w);
	vw_keyz(w, "vnet0");
	vw_begin_object(w);
	vw_kstrf(w, "macAddr", "56:6f:%02x:%02x:00:01", (i >> 8) & 255, i & 255);
	vw_kstr(w, "name", "vnet0");
	vw_kstr(w, "state", "unknown");
	vw_kstr(w, "speed", "1000");
	vw_kstrf(w, "rx", "%u", 123456789 + i * 11);
	vw_kstrf(w, "tx", "%u", 98765432 + i * 13);
	vw_kstr(w, "rxDropped", "0");
	vw_kstr(w, "rxErrors", "0");
	vw_kstr(w, "txDropped", "0");
	vw_kstr(w, "txErrors", "0");
	vw_keyz(w, "sampleTime");
	vw_double(w, 4295012.34 + i * 0.01);
	vw_end_object(w);
	vw_end_object(w);
	vw_keyz(w, "disks");
	vw_begin_object(w);
	for (int d = 0; d < 2; d++) {
		vw_keyz(w, d ? "sda" : "vda");
		vw_begin_object(w);
		uuid_n(img, 2 + (unsigned)d, i);
		vw_kstr(w, "imageID", img);
		vw_kstrf(w, "readLatency", "%u", 100000 + i);
		vw_kstrf(w, "writeLatency", "%u", 200000 + i);
		vw_kstr(w, "flushLatency", "0");
		vw_kstrf(w, "readRate", "%u.%u", i % 1000, i % 10);
		vw_kstrf(w, "writeRate", "%u.%u", i % 500, i % 10);
		vw_kstrf(w, "readBytes", "%u", 1048576 * (i % 100 + 1));
		vw_kstrf(w, "writeBytes", "%u", 524288 * (i % 100 + 1));
		vw_kstrf(w, "readOps", "%u", 1000 + i);
		vw_kstrf(w, "writeOps", "%u", 500 + i);
		vw_kstr(w, "apparentsize", "10737418240");
		vw_kstr(w, "truesize", "2147483648");
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "displayInfo");
	vw_begin_array(w);
	vw_begin_object(w);
	vw_kstr(w, "type", "spice");
	vw_kstrf(w, "port", "%u", 5900 + 2 * (i % 100));
	vw_kstrf(w, "tlsPort", "%u", 5901 + 2 * (i % 100));
	vw_kstr(w, "ipAddress", "0");
	vw_end_object(w);
	vw_end_array(w);
	vw_kstrf(w, "guestIPs", "192.168.%u.%u", (i >> 8) & 255, i & 255);
	vw_kstrf(w, "guestFQDN", "web-%04u.example.com", i);
	vw_kstr(w, "guestOs", "5.14.0-362.el9.x86_64");
	vw_keyz(w, "guestTimezone");
	vw_begin_object(w);
	vw_kint(w, "offset", 0);
	vw_kstr(w, "zone", "UTC");
	vw_end_object(w);
	vw_kstr(w, "username", "Unknown");
	vw_kstr(w, "session", "Unknown");
	vw_keyz(w, "vmJobs");
	vw_begin_object(w);
	vw_end_object(w);
	vw_kbool(w, "guestAgentAPIVersion", true);
	vw_end_object(w);
}

/* Number-heavy, escape-heavy and long-string documents: the paths the VM
 * stats fixtures barely touch (issue 25: none of them may get slower). */
enum { FX_VMS, FX_REQUEST, FX_NUMBERS, FX_ESCAPES, FX_LONGSTR };

static void numbers_doc(struct vd_writer *w)
{
	vw_begin_array(w);
	for (unsigned i = 0; i < 4000; i++) {
		vw_int(w, (int64_t)i * 7919);
		vw_int(w, -(int64_t)i * 104729 - 1);
		vw_uint(w, 18446744073709551615ull - i);
		vw_double(w, 399.306 + i);               /* a few decimals */
		vw_double(w, 4295012.34 + i * 0.01);     /* 16-17 digits */
		vw_double(w, 6.02214076e23 * (i + 1));   /* exponent */
		vw_double(w, (double)i);
	}
	vw_end_array(w);
}

static void escapes_doc(struct vd_writer *w)
{
	/* raw text so the input carries \u escapes and surrogate pairs too */
	static const char esc1[] = "\"line\\none\\ttab \\\"quoted\\\" back\\\\slash\\u0001\"";
	static const char esc2[] = "\"caf\\u00e9 \\u20ac \\ud83d\\ude00 na\\u00efve\"";
	static const char utf8[] = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 plain utf-8";
	static const char ctl[] = "C:\\Windows\\System32\r\n\"x\"\t\x01";
	vw_begin_array(w);
	for (unsigned i = 0; i < 2000; i++) {
		vw_raw(w, esc1, sizeof(esc1) - 1);
		vw_raw(w, esc2, sizeof(esc2) - 1);
		vw_string(w, utf8, sizeof(utf8) - 1);
		vw_string(w, ctl, sizeof(ctl) - 1);
	}
	vw_end_array(w);
}

static void longstr_doc(struct vd_writer *w)
{
	static char s[65536];
	for (size_t i = 0; i < sizeof(s); i++)
		s[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(i * 37) % 64];
	vw_begin_object(w);
	for (unsigned i = 0; i < 16; i++) {
		char k[16];
		snprintf(k, sizeof(k), "blob%u", i);
		vw_keyz(w, k);
		vw_string(w, s, sizeof(s) - i * 1000);
	}
	vw_end_object(w);
}

static void make_fixture(struct fixture *f, const char *name, int nvms)
{
	f->name = name;
	buf_init(&f->json);
	buf_init(&f->mp);
	struct vd_writer w;
	codec_find("fallback")->writer_init(&w, &f->json);
	f->is_request = false;
	if (nvms == -FX_NUMBERS) {
		numbers_doc(&w);
	} else if (nvms == -FX_ESCAPES) {
		escapes_doc(&w);
	} else if (nvms == -FX_LONGSTR) {
		longstr_doc(&w);
	} else if (nvms < 0) {
		f->is_request = true;
		vw_begin_object(&w);
		vw_kstr(&w, "jsonrpc", "2.0");
		vw_kstr(&w, "method", "VM.getStats");
		vw_keyz(&w, "params");
		vw_begin_object(&w);
		vw_kstr(&w, "vmID", "4b4c5a1e-5b6c-4d7e-8f90-a1b2c3d4e5f6");
		vw_end_object(&w);
		vw_kstr(&w, "id", "a1b2c3d4-0000-4000-8000-000000000001");
		vw_end_object(&w);
	} else {
		f->is_request = false;
		vw_begin_object(&w);
		vw_kstr(&w, "jsonrpc", "2.0");
		vw_kstr(&w, "id", "a1b2c3d4-0000-4000-8000-000000000002");
		vw_keyz(&w, "result");
		vw_begin_array(&w);
		for (int i = 0; i < nvms; i++)
			vm_stats(&w, (unsigned)i);
		vw_end_array(&w);
		vw_end_object(&w);
	}
	if (w.error) {
		fprintf(stderr, "fixture %s: writer error\n", name);
		exit(1);
	}
	const struct vd_codec *mp = codec_find("msgpack");
	if (mp) {
		struct vd_arena a;
		struct vd_value *v;
		struct vd_codec_error e;
		struct vd_limits lim = VD_LIMITS_DEFAULT;
		arena_init(&a, 0);
		if (codec_find("fallback")->decode(&a, f->json.data, f->json.len, &lim, &v, &e)) {
			fprintf(stderr, "fixture %s does not decode: %s\n", name, e.reason);
			exit(1);
		}
		mp->writer_init(&w, &f->mp);
		vw_value(&w, v);
		arena_free(&a);
	}
}

/* --- timing ---------------------------------------------------------------- */

typedef void (*op_fn)(void *ctx);

/* CPU time of this thread: the machine is shared, and time spent preempted
 * by other processes is not the codec's. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median ns per call of fn over `runs` runs; spread = (max-min)/median. */
static double measure(op_fn fn, void *ctx, double *spread_pct)
{
	fn(ctx);   /* warm up: caches, arena blocks, buffer capacity */
	uint64_t t0 = cpu_ns();
	fn(ctx);
	uint64_t one = cpu_ns() - t0;
	long iters = (long)(run_ms * 1e6 / (double)(one ? one : 1));
	if (iters < 1)
		iters = 1;
	double samples[32];
	for (int r = 0; r < runs; r++) {
		t0 = cpu_ns();
		for (long i = 0; i < iters; i++)
			fn(ctx);
		samples[r] = (double)(cpu_ns() - t0) / (double)iters;
	}
	qsort(samples, (size_t)runs, sizeof(double), cmp_double);
	double med = samples[runs / 2];
	*spread_pct = med > 0 ? 100.0 * (samples[runs - 1] - samples[0]) / med : 0;
	return med;
}

static void add_row(const char *codec, const struct fixture *f, const char *op, double ns,
		    double spread)
{
	if (nrows >= MAX_ROWS)
		return;
	struct row *r = &rows[nrows++];
	snprintf(r->codec, sizeof(r->codec), "%s", codec);
	snprintf(r->fixture, sizeof(r->fixture), "%s", f->name);
	snprintf(r->op, sizeof(r->op), "%s", op);
	r->ns_per_op = ns;
	r->spread_pct = spread;
	r->mb_per_s = ns > 0 ? (double)f->json.len / ns * 1e3 : 0;   /* bytes/ns = GB/s */
	fprintf(stderr, ".");
}

/* --- operations -------------------------------------------------------- */

struct op_ctx {
	const struct vd_codec *codec;
	const char *bytes;
	size_t len;
	struct vd_arena arena;
	struct vd_value *tree;
	struct vd_buf out;
};

static void op_decode(void *p)
{
	struct op_ctx *c = p;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error e;
	struct vd_value *v;
	if (c->codec->decode(&c->arena, c->bytes, c->len, &lim, &v, &e) != 0) {
		fprintf(stderr, "%s: decode failed: %s\n", c->codec->name, e.reason);
		exit(1);
	}
	arena_reset(&c->arena);
}

static void op_request(void *p)
{
	struct op_ctx *c = p;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error e;
	struct vd_value *v;
	if (c->codec->decode(&c->arena, c->bytes, c->len, &lim, &v, &e) != 0 ||
	    !vd_obj_get(v, "method") || !vd_obj_get(v, "id") || !vd_obj_get(v, "params")) {
		fprintf(stderr, "%s: request not found\n", c->codec->name);
		exit(1);
	}
	arena_reset(&c->arena);
}

static void op_encode(void *p)
{
	struct op_ctx *c = p;
	struct vd_writer w;
	buf_reset(&c->out);
	c->codec->writer_init(&w, &c->out);
	vw_value(&w, c->tree);
}

static int noop0(void *ctx) { return 1; }
static int noop_bool(void *ctx, int b) { return 1; }
static int noop_str(void *ctx, const unsigned char *s, size_t n) { return 1; }
static int noop_num(void *ctx, const char *s, size_t n) { return 1; }

static const yajl_callbacks noop_callbacks = {
	.yajl_null = noop0, .yajl_boolean = noop_bool, .yajl_number = noop_num,
	.yajl_string = noop_str, .yajl_start_map = noop0, .yajl_map_key = noop_str,
	.yajl_end_map = noop0, .yajl_start_array = noop0, .yajl_end_array = noop0,
};

static void op_yajl_sax(void *p)
{
	struct op_ctx *c = p;
	yajl_handle h = yajl_alloc(&noop_callbacks, NULL, NULL);
	if (yajl_parse(h, (const unsigned char *)c->bytes, c->len) != yajl_status_ok ||
	    yajl_complete_parse(h) != yajl_status_ok) {
		fprintf(stderr, "yajl SAX failed\n");
		exit(1);
	}
	yajl_free(h);
}

static void gen_print(void *ctx, const char *s, size_t n)
{
	buf_append(ctx, s, n);
}

static void gen_value(yajl_gen g, const struct vd_value *v)
{
	char tmp[32];
	switch (v->type) {
	case VD_NULL: yajl_gen_null(g); break;
	case VD_BOOL: yajl_gen_bool(g, v->v.b); break;
	case VD_INT: yajl_gen_integer(g, v->v.i); break;
	case VD_UINT:
		snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v->v.u);
		yajl_gen_number(g, tmp, strlen(tmp));
		break;
	case VD_DOUBLE: yajl_gen_double(g, v->v.d); break;
	case VD_STRING:
		yajl_gen_string(g, (const unsigned char *)v->v.s.ptr, v->v.s.len);
		break;
	case VD_ARRAY:
		yajl_gen_array_open(g);
		for (size_t i = 0; i < v->v.arr.n; i++)
			gen_value(g, &v->v.arr.items[i]);
		yajl_gen_array_close(g);
		break;
	case VD_OBJECT:
		yajl_gen_map_open(g);
		for (size_t i = 0; i < v->v.obj.n; i++) {
			const struct vd_member *m = &v->v.obj.members[i];
			yajl_gen_string(g, (const unsigned char *)m->key, m->klen);
			gen_value(g, &m->val);
		}
		yajl_gen_map_close(g);
		break;
	}
}

static void op_yajl_gen(void *p)
{
	struct op_ctx *c = p;
	buf_reset(&c->out);
	yajl_gen g = yajl_gen_alloc(NULL);
	yajl_gen_config(g, yajl_gen_print_callback, gen_print, &c->out);
	yajl_gen_config(g, yajl_gen_validate_utf8, 1);
	gen_value(g, c->tree);
	yajl_gen_free(g);
}

static void ctx_init(struct op_ctx *c, const struct vd_codec *codec, const struct fixture *f,
		     struct vd_value *tree)
{
	c->codec = codec;
	bool json = !codec || codec->is_json;
	c->bytes = json ? f->json.data : f->mp.data;
	c->len = json ? f->json.len : f->mp.len;
	arena_init(&c->arena, 4 * f->json.len + 65536);
	c->tree = tree;
	buf_init(&c->out);
}

static void ctx_fini(struct op_ctx *c)
{
	arena_free(&c->arena);
	buf_free(&c->out);
}

/* --- Python's json (bench/codec_ref.py) ----------------------------------- */

static void run_python(struct fixture *fx, int nfx)
{
	const char *py = getenv("PYTHON");
	const char *script = getenv("VD_BENCH_PY");
	if (!py || !*py)
		py = "/usr/bin/python3";
	if (!script)
		script = "bench/codec_ref.py";
	if (access(script, R_OK) != 0 || access(py, X_OK) != 0) {
		fprintf(stderr, "\npython reference skipped: %s or %s missing\n", py, script);
		return;
	}
	char dir[] = "/tmp/vdbench-XXXXXX";
	if (!mkdtemp(dir))
		return;
	char cmd[4096];
	int n = snprintf(cmd, sizeof(cmd), "%s %s %s %d %g", py, script, dir, runs, run_ms);
	for (int i = 0; i < nfx; i++) {
		char path[64];
		snprintf(path, sizeof(path), "%s/%s.json", dir, fx[i].name);
		FILE *f = fopen(path, "wb");
		if (!f)
			return;
		fwrite(fx[i].json.data, 1, fx[i].json.len, f);
		fclose(f);
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " %s%s", fx[i].name,
			      fx[i].is_request ? ":request" : "");
	}
	FILE *p = popen(cmd, "r");
	char line[1024];
	const struct vd_codec *json = codec_find("fallback");
	while (p && fgets(line, sizeof(line), p)) {
		struct vd_arena a;
		struct vd_value *v;
		struct vd_codec_error e;
		struct vd_limits lim = VD_LIMITS_DEFAULT;
		arena_init(&a, 0);
		if (json->decode(&a, line, strlen(line), &lim, &v, &e) == 0) {
			const struct vd_value *fxn = vd_obj_get(v, "fixture"), *op = vd_obj_get(v, "op"),
					     *ns = vd_obj_get(v, "ns_per_op"),
					     *sp = vd_obj_get(v, "spread_pct");
			for (int i = 0; i < nfx && fxn && op && ns && sp; i++)
				if (vd_str_eq(fxn, fx[i].name)) {
					char opz[16];
					snprintf(opz, sizeof(opz), "%.*s", (int)op->v.s.len, op->v.s.ptr);
					add_row("python-json", &fx[i], opz,
						ns->type == VD_DOUBLE ? ns->v.d : (double)ns->v.i,
						sp->type == VD_DOUBLE ? sp->v.d : (double)sp->v.i);
				}
		}
		arena_free(&a);
	}
	if (p)
		pclose(p);
	for (int i = 0; i < nfx; i++) {
		char path[64];
		snprintf(path, sizeof(path), "%s/%s.json", dir, fx[i].name);
		unlink(path);
	}
	rmdir(dir);
}

/* --- report ------------------------------------------------------------ */

static const struct row *find_row(const char *codec, const char *fixture, const char *op)
{
	for (int i = 0; i < nrows; i++)
		if (!strcmp(rows[i].codec, codec) && !strcmp(rows[i].fixture, fixture) &&
		    !strcmp(rows[i].op, op))
			return &rows[i];
	return NULL;
}

static void check_target(const char *what, double got, double want, const char *unit)
{
	if (got <= 0)
		printf("  %-52s n/a\n", what);
	else
		printf("  %-52s %8.2f %-5s (target %s %.2f) %s\n", what, got, unit,
		       strcmp(unit, "x-sax") ? ">=" : "<=", want,
		       (strcmp(unit, "x-sax") ? got >= want : got <= want) ? "ok" : "MISSED");
}

static double mbps(const char *codec, const char *fixture, const char *op)
{
	const struct row *r = find_row(codec, fixture, op);
	return r ? r->mb_per_s : 0;
}

/* The in-tree baseline of a row, measured in the same run: raw yajl SAX
 * with no-op callbacks for decode and request (a parser that builds
 * nothing), yajl_gen writing the same tree for encode.  (yyjson, the
 * outside reference of issue 25, is not a Debian package: its ratio is
 * measured beside these outside the build.) */
static const struct row *baseline_of(const struct row *r)
{
	if (!strcmp(r->op, "encode"))
		return find_row("yajl_gen", r->fixture, "encode");
	return find_row("yajl-sax-noop", r->fixture, "decode");
}

static void report(FILE *jf)
{
	printf("\n%-14s %-9s %-8s %10s %8s %12s %9s %13s\n", "codec", "fixture", "op", "MB/s",
	       "spread", "ns/op", "x python", "x baseline");
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		const struct row *py = find_row("python-json", r->fixture, r->op);
		const struct row *base = baseline_of(r);
		char x[16] = "", xb[32] = "";
		if (py && py != r && r->ns_per_op > 0)
			snprintf(x, sizeof(x), "%.1fx", py->ns_per_op / r->ns_per_op);
		/* time of the baseline over the row's: > 1 is faster than it */
		if (base && base != r && r->ns_per_op > 0)
			snprintf(xb, sizeof(xb), "%.2fx (+-%.0f%%)", base->ns_per_op / r->ns_per_op,
				 r->spread_pct + base->spread_pct);
		printf("%-14s %-9s %-8s %10.1f %7.1f%% %12.0f %9s %13s\n", r->codec, r->fixture,
		       r->op, r->mb_per_s, r->spread_pct, r->ns_per_op, x, xb);
	}
	printf("x baseline: the baseline's time over the row's in this run (decode and request: "
	       "raw yajl SAX, no-op callbacks; encode: yajl_gen on the same tree); +-: the two "
	       "spreads added\n");
	printf("\n");
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		for (FILE *o = stdout; o; o = o == stdout ? jf : NULL)
			fprintf(o, "{\"codec\":\"%s\",\"fixture\":\"%s\",\"op\":\"%s\","
				"\"mb_per_s\":%.1f,\"ns_per_op\":%.0f,\"spread_pct\":%.1f,"
				"\"runs\":%d}\n", r->codec, r->fixture, r->op, r->mb_per_s,
				r->ns_per_op, r->spread_pct, runs);
	}
	const char *big = "vms1000";
	printf("\ntargets on the 1000-VM response (JSON-equivalent MB/s; ratios from this run):\n");
	check_target("fallback decode", mbps("fallback", big, "decode"), 1000, "MB/s");
	check_target("fallback encode", mbps("fallback", big, "encode"), 1000, "MB/s");
	check_target("msgpack decode", mbps("msgpack", big, "decode"), 800, "MB/s");
	check_target("msgpack encode", mbps("msgpack", big, "encode"), 800, "MB/s");
	check_target("yajl encode (our emitter)", mbps("yajl", big, "encode"), 1000, "MB/s");
	double sax = mbps("yajl-sax-noop", big, "decode"), yd = mbps("yajl", big, "decode");
	check_target("yajl decode time / raw yajl SAX time", yd > 0 ? sax / yd : 0, 1.2, "x-sax");
	double ge = mbps("yajl_gen", big, "encode"), oe = mbps("yajl", big, "encode");
	if (ge > 0 && oe > 0)
		printf("  yajl codec encoder: our emitter %.0f MB/s vs yajl_gen %.0f MB/s -> %s\n",
		       oe, ge, oe >= ge ? "our emitter (in use)" : "yajl_gen would be faster");
	double pd = mbps("python-json", big, "decode"), pe = mbps("python-json", big, "encode");
	if (pd > 0 && pe > 0) {
		check_target("yajl decode vs python json.loads", yd / pd, 2.5, "x");
		check_target("fallback decode vs python json.loads",
			     mbps("fallback", big, "decode") / pd, 6, "x");
		check_target("msgpack decode vs python json.loads",
			     mbps("msgpack", big, "decode") / pd, 6, "x");
		check_target("yajl encode vs python json.dumps", oe / pe, 6, "x");
		check_target("fallback encode vs python json.dumps",
			     mbps("fallback", big, "encode") / pe, 6, "x");
		check_target("msgpack encode vs python json.dumps",
			     mbps("msgpack", big, "encode") / pe, 6, "x");
	}
}

int main(int argc, char **argv)
{
	bool python = true;
	FILE *jf = NULL;
	const char *only = NULL;   /* one codec (for profiling) */
	const char *dump = NULL;   /* write the fixtures to this directory and exit */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			runs = 5;
			run_ms = 10;
		} else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
			dump = argv[++i];
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(argv[i], "--no-python")) {
			python = false;
		} else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
			jf = fopen(argv[++i], "w");
		} else {
			fprintf(stderr, "usage: %s [--quick] [--no-python] [--only CODEC] [--json FILE] [--dump DIR]\n",
				argv[0]);
			return 2;
		}
	}
	struct fixture fx[NFX];
	make_fixture(&fx[0], "request", -FX_REQUEST);
	make_fixture(&fx[1], "vms1", 1);
	make_fixture(&fx[2], "vms100", 100);
	make_fixture(&fx[3], "vms1000", 1000);
	make_fixture(&fx[4], "numbers", -FX_NUMBERS);
	make_fixture(&fx[5], "escapes", -FX_ESCAPES);
	make_fixture(&fx[6], "longstr", -FX_LONGSTR);
	if (dump) {
		for (int i = 0; i < NFX; i++) {
			char path[1024];
			snprintf(path, sizeof(path), "%s/%s.json", dump, fx[i].name);
			FILE *f = fopen(path, "wb");
			if (f) {
				fwrite(fx[i].json.data, 1, fx[i].json.len, f);
				fclose(f);
			}
			snprintf(path, sizeof(path), "%s/%s.mp", dump, fx[i].name);
			f = fopen(path, "wb");
			if (f) {
				fwrite(fx[i].mp.data, 1, fx[i].mp.len, f);
				fclose(f);
			}
		}
		return 0;
	}
	printf("codec benchmark: %d runs per figure, >= %.0f ms each; fixtures (minified JSON / "
	       "msgpack bytes):", runs, run_ms);
	for (int i = 0; i < NFX; i++)
		printf(" %s %zu/%zu", fx[i].name, fx[i].json.len, fx[i].mp.len);
	printf("\n");
	fflush(stdout);
	const struct vd_codec *const *list = codec_list();
	for (int i = 0; i < NFX; i++) {
		struct fixture *f = &fx[i];
		struct vd_arena ta;
		struct vd_value *tree;
		struct vd_codec_error e;
		struct vd_limits lim = VD_LIMITS_DEFAULT;
		arena_init(&ta, 0);
		codec_find("fallback")->decode(&ta, f->json.data, f->json.len, &lim, &tree, &e);
		struct op_ctx c;
		double sp, ns;
		ctx_init(&c, NULL, f, tree);
		if (!only) {
			ns = measure(op_yajl_sax, &c, &sp);
			add_row("yajl-sax-noop", f, "decode", ns, sp);
			ns = measure(op_yajl_gen, &c, &sp);
			add_row("yajl_gen", f, "encode", ns, sp);
		}
		ctx_fini(&c);
		for (int k = 0; list[k]; k++) {
			if (only && strcmp(only, list[k]->name))
				continue;
			/* auto hands a body of VD_AUTO_SMALL_BODY or more to yajl
			 * (its decode there is the yajl row) and writes with the
			 * emitter of yajl and fallback (their encode rows): only
			 * its own path is measured, so the run stays as long */
			bool is_auto = !strcmp(list[k]->name, "auto");
			if (is_auto && f->json.len >= VD_AUTO_SMALL_BODY)
				continue;
			ctx_init(&c, list[k], f, tree);
			ns = measure(f->is_request ? op_request : op_decode, &c, &sp);
			add_row(list[k]->name, f, f->is_request ? "request" : "decode", ns, sp);
			if (f->is_request) {
				ns = measure(op_decode, &c, &sp);
				add_row(list[k]->name, f, "decode", ns, sp);
			}
			if (!is_auto) {
				ns = measure(op_encode, &c, &sp);
				add_row(list[k]->name, f, "encode", ns, sp);
			}
			ctx_fini(&c);
		}
		arena_free(&ta);
	}
	if (python && !only)
		run_python(fx, NFX);
	fprintf(stderr, "\n");
	report(jf);
	if (jf)
		fclose(jf);
	for (int i = 0; i < NFX; i++) {
		buf_free(&fx[i].json);
		buf_free(&fx[i].mp);
	}
	return 0;
}
