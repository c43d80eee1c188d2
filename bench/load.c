/* bench/load.c - end-to-end STOMP load generator for vdsmd (and for the raw
 * baseline in bench/raw_server.c).
 *
 *   load --port P [--host 127.0.0.1] [--conns 16] [--depth 8] [--duration 5]
 *        [--warmup 1] [--method Host.ping2] [--params '{}'] [--pid SERVER_PID]
 *        [--label NAME]
 *   load --port P --idle N [--pid SERVER_PID]     idle-connection RSS
 *   --tls DIR   connect with TLS, client.crt/client.key/ca.crt from DIR
 *               (examples/make-pki.sh); handshake before the clock starts
 *   --framing packed|engine   packed (the default) sends the CONNECT header
 *               vdsmd-framing:packed; engine leaves it out and gets the
 *               frames laid out for the engine's library (PROTOCOL.md 2)
 *
 * Load mode: each connection CONNECTs, SUBSCRIBEs to its own reply
 * destination and keeps `depth` requests in flight; every response's id is
 * checked against the requests outstanding on that connection, a response
 * carrying "error" counts as an error.  After the warm-up it prints req/s
 * (mean, with the min and max of the per-second rates), latency percentiles
 * and, with --pid, the server's CPU time per request (utime+stime from
 * /proc).  The last line is machine-readable:
 *   RESULT label=... rps=... p50_us=... p99_us=... errors=... cpu_us_per_req=...
 *
 * Idle mode: opens N connections, CONNECTs each, waits for every CONNECTED,
 * and reports the server's RSS growth per connection (VmRSS from /proc). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "io/io.h"

#define SLOTS 4096            /* outstanding-id window per connection */
#define HIST_FINE 20000       /* 1 us buckets up to 20 ms */
#define HIST_COARSE 10000     /* then 100 us buckets up to ~1 s */
#define MAX_SECONDS 3600
#define READ_CHUNK 65536      /* bytes asked of each read */
#define ERROR_WINDOW 256      /* head of a reply searched for "error" */

struct conn {
	int fd;
	struct io_conn io;    /* plain or TLS, over fd (io/io.h) */
	int idx;
	char *in;
	size_t inlen, incap;
	char *out;
	size_t outlen, outcap, outoff;
	uint64_t next_seq;
	unsigned inflight;
	uint64_t sent_ns[SLOTS];
	uint8_t pending[SLOTS];
	bool connected;
};

static struct {
	const char *host, *method, *params, *label, *tls, *framing;
	int port, conns, depth, idle, pid;
	double duration, warmup;
} opt = { "127.0.0.1", "Host.ping2", NULL, "vdsmd", NULL, "packed", 0, 16, 8, 0, 0, 5, 1 };

/* CONNECT: "vdsmd-framing:packed" unless --framing engine */
static const char *connect_frame(void)
{
	return strcmp(opt.framing, "engine") ?
	       "CONNECT\naccept-version:1.2\nhost:bench\nvdsmd-framing:packed\n\n" :
	       "CONNECT\naccept-version:1.2\nhost:bench\n\n";
}
static SSL_CTX *tls_ctx;

static uint64_t hist[HIST_FINE + HIST_COARSE + 1];
static uint64_t per_sec[MAX_SECONDS];
static uint64_t done_total, errors, bad_ids, max_lat_ns;
static bool measuring;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *m)
{
	perror(m);
	exit(1);
}

static void append(char **b, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (*len + n > *cap) {
		size_t c = *cap ? *cap : 4096;
		while (c < *len + n)
			c *= 2;
		*b = realloc(*b, c);
		if (!*b)
			die("realloc");
		*cap = c;
	}
	memcpy(*b + *len, p, n);
	*len += n;
}

static void out_str(struct conn *c, const char *s)
{
	append(&c->out, &c->outlen, &c->outcap, s, strlen(s));
}

static int dial(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", opt.port);
	if (getaddrinfo(opt.host, ps, &hints, &ai))
		die("getaddrinfo");
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("connect");
	freeaddrinfo(ai);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void tls_init(void)
{
	char ca[1024], crt[1024], key[1024];
	snprintf(ca, sizeof(ca), "%s/ca.crt", opt.tls);
	snprintf(crt, sizeof(crt), "%s/client.crt", opt.tls);
	snprintf(key, sizeof(key), "%s/client.key", opt.tls);
	tls_ctx = SSL_CTX_new(TLS_client_method());
	if (!tls_ctx || SSL_CTX_load_verify_locations(tls_ctx, ca, NULL) != 1 ||
	    SSL_CTX_use_certificate_file(tls_ctx, crt, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(tls_ctx, key, SSL_FILETYPE_PEM) != 1) {
		ERR_print_errors_fp(stderr);
		exit(1);
	}
	SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

/* Connect (TLS handshake done blocking), then switch to non-blocking. */
static void open_conn(struct conn *c)
{
	c->fd = dial();
	if (!tls_ctx) {
		io_plain_init(&c->io, c->fd);
	} else if (io_tls_client_init(&c->io, io_tls_lib_linked(), tls_ctx, c->fd, NULL, NULL) != 0 ||
		   io_handshake_wait(&c->io, 0, NULL) != 0) {
		fprintf(stderr, "load: TLS: %s\n", io_last_error(&c->io));
		exit(1);
	}
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
}

/* write(2)/read(2) results: bytes, 0 at the end (read), or -1 with errno
 * EAGAIN (wait) or EIO. */
static ssize_t conn_write(struct conn *c, const char *p, size_t n)
{
	long r = io_write(&c->io, p, n);
	if (r > 0)
		return r;
	errno = r == VD_AGAIN ? EAGAIN : EIO;
	return -1;
}

static ssize_t conn_read(struct conn *c, char *p, size_t n)
{
	long r = io_read(&c->io, p, n);
	if (r >= 0)
		return r;
	errno = r == VD_AGAIN ? EAGAIN : EIO;
	return -1;
}

static void close_conn(struct conn *c)
{
	io_close(&c->io);
	c->fd = -1;
}

static void flush(struct conn *c)
{
	while (c->outoff < c->outlen) {
		ssize_t n = conn_write(c, c->out + c->outoff, c->outlen - c->outoff);
		if (n < 0) {
			if (errno == EAGAIN)
				return;
			die("write");
		}
		c->outoff += (size_t)n;
	}
	c->outlen = c->outoff = 0;
}

static void send_request(struct conn *c)
{
	uint64_t seq = c->next_seq++;
	unsigned slot = (unsigned)(seq % SLOTS);
	if (c->pending[slot]) {
		fprintf(stderr, "load: more than %d requests outstanding on one connection\n", SLOTS);
		exit(1);
	}
	char body[4096];
	int bl = opt.params
		 ? snprintf(body, sizeof(body),
			    "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":%s,\"id\":%" PRIu64 "}",
			    opt.method, opt.params, seq)
		 : snprintf(body, sizeof(body),
			    "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"id\":%" PRIu64 "}", opt.method, seq);
	char hdr[512];
	int hl = snprintf(hdr, sizeof(hdr),
			  "SEND\ndestination:jms.topic.vdsm_requests\ncontent-type:application/json\n"
			  "reply-to:jms.topic.bench.%d\ncontent-length:%d\n\n", c->idx, bl);
	append(&c->out, &c->outlen, &c->outcap, hdr, (size_t)hl);
	append(&c->out, &c->outlen, &c->outcap, body, (size_t)bl);
	append(&c->out, &c->outlen, &c->outcap, "", 1);
	c->pending[slot] = 1;
	c->sent_ns[slot] = now_ns();
	c->inflight++;
}

static void record(uint64_t lat_ns, uint64_t t, uint64_t t_start)
{
	uint64_t us = lat_ns / 1000;
	size_t b = us < HIST_FINE ? us
		   : us < HIST_FINE + (uint64_t)HIST_COARSE * 100 ? HIST_FINE + (us - HIST_FINE) / 100
		   : HIST_FINE + HIST_COARSE;
	hist[b]++;
	if (lat_ns > max_lat_ns)
		max_lat_ns = lat_ns;
	size_t sec = (size_t)((t - t_start) / 1000000000u);
	if (sec < MAX_SECONDS)
		per_sec[sec]++;
	done_total++;
}

static uint64_t bucket_us(size_t b)
{
	return b < HIST_FINE ? b : HIST_FINE + (uint64_t)(b - HIST_FINE) * 100;
}

static uint64_t percentile(double p)
{
	uint64_t want = (uint64_t)(p * (double)done_total);
	if (want >= done_total)
		want = done_total ? done_total - 1 : 0;
	uint64_t acc = 0;
	for (size_t b = 0; b < sizeof(hist) / sizeof(hist[0]); b++) {
		acc += hist[b];
		if (acc > want)
			return bucket_us(b);
	}
	return 0;
}

/* Parse complete frames in c->in; returns responses handled. */
static void handle_input(struct conn *c, uint64_t t_start)
{
	size_t off = 0;
	for (;;) {
		while (off < c->inlen && (c->in[off] == '\n' || c->in[off] == '\r'))
			off++;
		char *p = c->in + off;
		size_t left = c->inlen - off;
		char *hend = memmem(p, left, "\n\n", 2);
		if (!hend)
			break;
		size_t hlen = (size_t)(hend - p) + 2;
		char *cl = memmem(p, hlen, "\ncontent-length:", 16);
		size_t blen;
		if (cl) {
			blen = strtoul(cl + 16, NULL, 10);
			if (left < hlen + blen + 1)
				break;
		} else {
			char *nul = memchr(p + hlen, 0, left - hlen);
			if (!nul)
				break;
			blen = (size_t)(nul - (p + hlen));
		}
		char *body = p + hlen;
		if (left >= 9 && memcmp(p, "CONNECTED", 9) == 0) {
			c->connected = true;
		} else if (left >= 7 && memcmp(p, "MESSAGE", 7) == 0) {
			uint64_t t = now_ns();
			char *idp = memmem(body, blen, "\"id\":", 5);
			uint64_t id = idp ? strtoull(idp + 5, NULL, 10) : UINT64_MAX;
			unsigned slot = (unsigned)(id % SLOTS);
			if (!idp || id >= c->next_seq || !c->pending[slot]) {
				bad_ids++;
			} else {
				c->pending[slot] = 0;
				c->inflight--;
				/* vdsmd writes "jsonrpc" and "id" first, then "error" or
				 * "result": look only there, not through a 1.7 MB result */
				if (memmem(body, blen < ERROR_WINDOW ? blen : ERROR_WINDOW, "\"error\"", 7))
					errors++;
				if (measuring)
					record(t - c->sent_ns[slot], t, t_start);
			}
		} else if (left >= 5 && memcmp(p, "ERROR", 5) == 0) {
			fprintf(stderr, "load: ERROR frame: %.*s\n", (int)(hlen + blen < 300 ? hlen + blen : 300), p);
			errors++;
		}
		off += hlen + blen + 1;
	}
	if (off) {
		memmove(c->in, c->in + off, c->inlen - off);
		c->inlen -= off;
	}
}

static bool read_conn(struct conn *c, uint64_t t_start)
{
	/* read straight into the input buffer: a 1.7 MB reply copied once more
	 * in 64 KiB pieces cost the client as much as the server's whole reply */
	for (;;) {
		if (c->incap - c->inlen < READ_CHUNK) {
			size_t cap = c->incap ? c->incap : READ_CHUNK;
			while (cap - c->inlen < READ_CHUNK)
				cap *= 2;
			c->in = realloc(c->in, cap);
			if (!c->in)
				die("realloc");
			c->incap = cap;
		}
		ssize_t n = conn_read(c, c->in + c->inlen, READ_CHUNK);
		if (n < 0) {
			if (errno == EAGAIN)
				break;
			die("read");
		}
		if (n == 0) {
			fprintf(stderr, "load: server closed connection %d\n", c->idx);
			return false;
		}
		c->inlen += (size_t)n;
		if (!io_is_tls(&c->io) && (size_t)n < READ_CHUNK)
			break;
	}
	handle_input(c, t_start);
	return true;
}

static long proc_field_kb(int pid, const char *key)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long v = -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, strlen(key)) == 0)
			v = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return v;
}

static double proc_cpu_s(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	unsigned long ut = 0, st = 0;
	/* fields after ")": state(3) ... utime(14) stime(15) */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int run_idle(void)
{
	long before = opt.pid ? proc_field_kb(opt.pid, "VmRSS:") : -1;
	struct conn *cs = calloc((size_t)opt.idle, sizeof(*cs));
	int ep = epoll_create1(0);
	int connected = 0;
	for (int i = 0; i < opt.idle; i++) {
		open_conn(&cs[i]);
		cs[i].idx = i;
		out_str(&cs[i], connect_frame());
		append(&cs[i].out, &cs[i].outlen, &cs[i].outcap, "", 1);
		flush(&cs[i]);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cs[i] };
		epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
	}
	uint64_t deadline = now_ns() + 60ull * 1000000000u;
	struct epoll_event evs[256];
	while (connected < opt.idle && now_ns() < deadline) {
		int n = epoll_wait(ep, evs, 256, 1000);
		for (int k = 0; k < n; k++) {
			struct conn *c = evs[k].data.ptr;
			bool was = c->connected;
			if (!read_conn(c, 0))
				return 1;
			if (!was && c->connected) {
				connected++;
				free(c->in);
				c->in = NULL;
				c->inlen = c->incap = 0;
			}
		}
	}
	usleep(300000);
	long after = opt.pid ? proc_field_kb(opt.pid, "VmRSS:") : -1;
	printf("idle connections: %d connected of %d\n", connected, opt.idle);
	if (before >= 0 && after >= 0) {
		printf("server RSS: %ld KiB before, %ld KiB with %d idle connections: %.2f KiB per connection\n",
		       before, after, connected, (double)(after - before) / (connected ? connected : 1));
		printf("RESULT idle=%d rss_before_kb=%ld rss_after_kb=%ld per_conn_kb=%.2f\n", connected,
		       before, after, (double)(after - before) / (connected ? connected : 1));
	}
	for (int i = 0; i < opt.idle; i++) {
		close_conn(&cs[i]);
		free(cs[i].out);
	}
	free(cs);
	close(ep);
	return connected == opt.idle ? 0 : 1;
}

static int run_load(void)
{
	struct conn *cs = calloc((size_t)opt.conns, sizeof(*cs));
	int ep = epoll_create1(0);
	for (int i = 0; i < opt.conns; i++) {
		struct conn *c = &cs[i];
		open_conn(c);
		c->idx = i;
		char sub[256];
		out_str(c, connect_frame());
		append(&c->out, &c->outlen, &c->outcap, "", 1);
		snprintf(sub, sizeof(sub),
			 "SUBSCRIBE\ndestination:jms.topic.bench.%d\nid:sub-%d\nack:auto\n\n", i, i);
		out_str(c, sub);
		append(&c->out, &c->outlen, &c->outcap, "", 1);
		for (int d = 0; d < opt.depth; d++)
			send_request(c);
		flush(c);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	}
	uint64_t t0 = now_ns();
	uint64_t t_meas = t0 + (uint64_t)(opt.warmup * 1e9);
	uint64_t t_end = t_meas + (uint64_t)(opt.duration * 1e9);
	double cpu0 = -1;
	struct epoll_event evs[256];
	for (;;) {
		uint64_t t = now_ns();
		if (!measuring && t >= t_meas) {
			measuring = true;
			if (opt.pid)
				cpu0 = proc_cpu_s(opt.pid);
		}
		if (t >= t_end)
			break;
		int n = epoll_wait(ep, evs, 256, 100);
		for (int k = 0; k < n; k++) {
			struct conn *c = evs[k].data.ptr;
			if (!read_conn(c, t_meas))
				return 1;  // NOLINT(clang-analyzer-unix.Malloc): the program exits on this error
			while (c->inflight < (unsigned)opt.depth)
				send_request(c);
			flush(c);
		}
	}
	double cpu1 = opt.pid ? proc_cpu_s(opt.pid) : -1;
	double secs = opt.duration;
	double rps = (double)done_total / secs;
	uint64_t mn = UINT64_MAX, mx = 0;
	int whole = (int)opt.duration;
	for (int s = 0; s < whole && s < MAX_SECONDS; s++) {
		if (per_sec[s] < mn)
			mn = per_sec[s];
		if (per_sec[s] > mx)
			mx = per_sec[s];
	}
	if (whole == 0)
		mn = mx = (uint64_t)rps;
	double cpu_us = (cpu0 >= 0 && cpu1 >= 0 && done_total)
			? (cpu1 - cpu0) * 1e6 / (double)done_total : -1;
	printf("%-8s %2d conns x depth %-2d %s: %.0f req/s (per second min %" PRIu64 " max %" PRIu64
	       "), latency us p50 %" PRIu64 " p90 %" PRIu64 " p99 %" PRIu64 " p99.9 %" PRIu64
	       " max %" PRIu64 ", errors %" PRIu64 ", bad ids %" PRIu64,
	       opt.label, opt.conns, opt.depth, opt.method, rps, mn, mx, percentile(0.5),
	       percentile(0.9), percentile(0.99), percentile(0.999), max_lat_ns / 1000, errors,
	       bad_ids);
	if (cpu_us >= 0)
		printf(", server CPU %.2f us/req", cpu_us);
	printf("\n");
	printf("RESULT label=%s conns=%d depth=%d rps=%.0f min=%" PRIu64 " max=%" PRIu64
	       " p50_us=%" PRIu64 " p99_us=%" PRIu64 " p999_us=%" PRIu64 " errors=%" PRIu64
	       " bad_ids=%" PRIu64 " cpu_us_per_req=%.2f\n",
	       opt.label, opt.conns, opt.depth, rps, mn, mx, percentile(0.5), percentile(0.99),
	       percentile(0.999), errors, bad_ids, cpu_us);
	for (int i = 0; i < opt.conns; i++) {
		close_conn(&cs[i]);
		free(cs[i].in);
		free(cs[i].out);
	}
	free(cs);
	close(ep);
	return errors || bad_ids ? 2 : 0;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "load: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--host")) opt.host = v;
		else if (!strcmp(a, "--port")) opt.port = atoi(v);
		else if (!strcmp(a, "--conns")) opt.conns = atoi(v);
		else if (!strcmp(a, "--depth")) opt.depth = atoi(v);
		else if (!strcmp(a, "--duration")) opt.duration = atof(v);
		else if (!strcmp(a, "--warmup")) opt.warmup = atof(v);
		else if (!strcmp(a, "--method")) opt.method = v;
		else if (!strcmp(a, "--params")) opt.params = v;
		else if (!strcmp(a, "--pid")) opt.pid = atoi(v);
		else if (!strcmp(a, "--label")) opt.label = v;
		else if (!strcmp(a, "--idle")) opt.idle = atoi(v);
		else if (!strcmp(a, "--tls")) opt.tls = v;
		else if (!strcmp(a, "--framing")) opt.framing = v;
		else {
			fprintf(stderr, "load: unknown option %s\n", a);
			return 2;
		}
	}
	if (strcmp(opt.framing, "packed") && strcmp(opt.framing, "engine")) {
		fprintf(stderr, "load: --framing is packed or engine, not %s\n", opt.framing);
		return 2;
	}
	if (!opt.port || opt.conns < 1 || opt.depth < 1 || opt.depth > SLOTS / 2 ||
	    opt.duration <= 0) {
		fprintf(stderr, "usage: load --port P [--conns N] [--depth D] [--duration S] "
				"[--warmup S] [--method M] [--params JSON] [--pid PID] [--label L] [--tls DIR] [--framing packed|engine] | --idle N\n");
		return 2;
	}
	if (opt.tls)
		tls_init();
	return opt.idle ? run_idle() : run_load();
}
