/* bench/fleet.c - engine-side driver of the fleet benchmark (bench/fleet.py,
 * `make bench-fleet`): one "engine" polling N hosts either through a STOMP
 * broker (RabbitMQ, broker mode) or directly (one connection per vdsmd).
 *
 *   fleet --broker PORT --hosts h1,h2,...  [--login guest --passcode guest]
 *         [--conns K]   (engine connections to the broker, hosts spread
 *                        round-robin; default 1)
 *   fleet --direct P1,P2,...
 *         [--duration 10] [--warmup 2] [--period 1000] [--ping-depth 1]
 *
 * Per host, on a fixed period (ms): Host.getAllVmStats and Host.getStats
 * (the engine's monitoring poll); plus ping2 at full speed: ping-depth
 * ping2 requests always in flight per host (closed loop).  Broker mode uses
 * ONE connection to the broker, as an engine would, with replies on a
 * /temp-queue; direct mode one plaintext STOMP connection per host.
 *
 * Round trips are kept per host and kind; the output gives, per kind, the
 * median over hosts of the per-host p50 and p99 and the worst host's p99,
 * then the rates.  Last line, machine-readable:
 *   RESULT mode=broker hosts=N rps=... ping_rps=... ping_p50_us=...
 *          ping_p99_us=... ping_p99_worst_us=... poll_p50_us=... poll_p99_us=...
 *          poll_p99_worst_us=... errors=... lost=...
 * Replies are matched by the JSON-RPC id (the response starts with
 * {"jsonrpc":"2.0","id":..., PROTOCOL.md 3), which encodes host, kind and a
 * slot. */
#include <errno.h>
#include <fcntl.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/vd.h"
#include "../stomp/stomp.h"

#define MAX_HOSTS 1024
#define SLOTS 256          /* outstanding requests per host and kind */

enum kind { K_PING, K_POLL, K__N };

struct lat {
	uint32_t *us;
	size_t n, cap;
};

struct host {
	int idx;
	char id[128];
	struct peer *peer;        /* its connection (the broker's, or its own) */
	uint64_t sent_ns[K__N][SLOTS];
	bool busy[K__N][SLOTS];
	unsigned next[K__N];
	unsigned inflight[K__N];
	struct lat lat[K__N];
	uint64_t done[K__N];
};

struct peer {
	int fd;
	struct vd_buf in, out;
	struct stomp_client sc;
	ev_io io;
	bool want_write;
	char reply_to[80];
};

static struct {
	bool broker;
	int broker_port;
	const char *login, *passcode;
	double duration, warmup, period_ms;
	unsigned ping_depth;
	int engine_conns;
	int nhosts;
	struct host hosts[MAX_HOSTS];
	struct peer *peers[MAX_HOSTS];
	int npeers;
	struct ev_loop *loop;
	bool measuring, stopping;
	uint64_t errors, sent, lost;
	uint64_t poll_bytes, poll_n;
	ev_tstamp t_measure;
} G = { .login = "guest", .passcode = "guest", .duration = 10, .warmup = 2,
	.period_ms = 1000, .ping_depth = 1, .engine_conns = 1 };

static void lat_add(struct lat *l, uint32_t us)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1024;
		l->us = xrealloc(l->us, l->cap * sizeof(*l->us));
	}
	l->us[l->n++] = us;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static uint32_t pct(struct lat *l, double p)
{
	if (!l->n)
		return 0;
	size_t i = (size_t)(p * (double)(l->n - 1) + 0.5);
	return l->us[i];
}

/* ---- I/O ------------------------------------------------------------------ */

static void peer_flush(struct peer *p)
{
	size_t off = 0;
	while (off < p->out.len) {
		ssize_t n = send(p->fd, p->out.data + off, p->out.len - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		fprintf(stderr, "fleet: send: %s\n", strerror(errno));
		exit(1);
	}
	buf_consume(&p->out, off);
	bool ww = p->out.len > 0;
	if (ww != p->want_write) {
		ev_io_stop(G.loop, &p->io);
		ev_io_set(&p->io, p->fd, EV_READ | (ww ? EV_WRITE : 0));
		ev_io_start(G.loop, &p->io);
		p->want_write = ww;
	}
}

static const char *const methods[] = { "Host.ping2", "Host.getAllVmStats", "Host.getStats" };

static void send_req(struct host *h, enum kind k, int method)
{
	if (h->inflight[k] >= SLOTS)
		return;
	unsigned s = h->next[k];
	while (h->busy[k][s])
		s = (s + 1) % SLOTS;
	h->next[k] = (s + 1) % SLOTS;
	h->busy[k][s] = true;
	h->inflight[k]++;
	h->sent_ns[k][s] = vd_now_ns();
	char body[200];
	int n = snprintf(body, sizeof(body),
			 "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":{},\"id\":\"%d.%d.%u\"}",
			 methods[method], h->idx, (int)k, s);
	char dest[200];
	if (G.broker)
		snprintf(dest, sizeof(dest), "/queue/vdsm.%s.requests", h->id);
	else
		snprintf(dest, sizeof(dest), "jms.topic.vdsm_requests");
	struct peer *p = h->peer;
	stomp_client_send(&p->sc, dest, p->reply_to, "application/json", NULL, 0, body,
			  (size_t)n);
	G.sent++;
}

static void on_reply(const char *body, size_t len)
{
	const char *q = memmem(body, VD_MIN(len, (size_t)80), "\"id\":\"", 6);
	int hi, k;
	unsigned s;
	if (!q || sscanf(q + 6, "%d.%d.%u", &hi, &k, &s) != 3 || hi < 0 || hi >= G.nhosts ||
	    k < 0 || k >= K__N || s >= SLOTS) {
		G.errors++;
		return;
	}
	struct host *h = &G.hosts[hi];
	if (!h->busy[k][s]) {
		G.errors++;   /* duplicate or unknown */
		return;
	}
	h->busy[k][s] = false;
	h->inflight[k]--;
	if (memmem(body, VD_MIN(len, (size_t)200), "\"error\":", 8))
		G.errors++;
	if (G.measuring) {
		uint64_t us = (vd_now_ns() - h->sent_ns[k][s]) / 1000;
		lat_add(&h->lat[k], (uint32_t)VD_MIN(us, (uint64_t)UINT32_MAX));
		h->done[k]++;
		if (k == K_POLL) {
			G.poll_bytes += len;
			G.poll_n++;
		}
	}
	if (k == K_PING && !G.stopping)
		send_req(h, K_PING, 0);
}

static void peer_io(struct ev_loop *loop, ev_io *w, int revents)
{
	struct peer *p = w->data;
	if (revents & EV_READ) {
		buf_reserve(&p->in, 65536);
		ssize_t n = recv(p->fd, p->in.data + p->in.len, 65536, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			fprintf(stderr, "fleet: connection closed: %s\n", n ? strerror(errno) : "EOF");
			exit(1);
		}
		if (n > 0)
			p->in.len += (size_t)n;
		size_t off = 0;
		for (;;) {
			struct stomp_frame f;
			memset(&f, 0, sizeof(f));
			const char *why = NULL;
			long r = stomp_client_feed(&p->sc, p->in.data + off, p->in.len - off, &f, &why);
			if (r == VD_AGAIN)
				break;
			if (r < 0) {
				fprintf(stderr, "fleet: bad frame: %s\n", why ? why : "?");
				exit(1);
			}
			off += (size_t)r;
			if (f.cmd == STOMP_MESSAGE)
				on_reply(f.body, f.body_len);
			else if (f.cmd == STOMP_ERROR) {
				const char *m = stomp_frame_get(&f, "message", NULL);
				fprintf(stderr, "fleet: STOMP ERROR: %s %.*s\n", m ? m : "",
					(int)VD_MIN(f.body_len, 300), f.body ? f.body : "");
				exit(1);
			}
		}
		buf_consume(&p->in, off);
	}
	peer_flush(p);
}

static struct peer *peer_open(int port, const char *vhost)
{
	struct peer *p = xcalloc(1, sizeof(*p));
	buf_init(&p->in);
	buf_init(&p->out);
	p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (connect(p->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "fleet: connect to port %d: %s\n", port, strerror(errno));
		exit(1);
	}
	int one = 1;
	setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
	stomp_client_init(&p->sc, &p->out);
	if (G.broker) {
		stomp_client_connect(&p->sc, vhost, G.login, G.passcode, 0, 0);
		char u[37];
		vd_uuid_generate(u);
		snprintf(p->reply_to, sizeof(p->reply_to), "/temp-queue/fleet-%s", u);
	} else {
		stomp_client_connect(&p->sc, "localhost", NULL, NULL, 0, 0);
		char u[37];
		vd_uuid_generate(u);
		snprintf(p->reply_to, sizeof(p->reply_to), "fleet-%s", u);
		stomp_client_subscribe(&p->sc, p->reply_to, "r", "auto");
	}
	ev_io_init(&p->io, peer_io, p->fd, EV_READ | EV_WRITE);
	p->io.data = p;
	p->want_write = true;
	ev_io_start(G.loop, &p->io);
	G.peers[G.npeers++] = p;
	return p;
}

/* ---- schedule ------------------------------------------------------------- */

static ev_timer poll_timer, phase_timer;
static int phase;

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	for (int i = 0; i < G.nhosts; i++) {
		send_req(&G.hosts[i], K_POLL, 1);
		send_req(&G.hosts[i], K_POLL, 2);
	}
	for (int i = 0; i < G.npeers; i++)
		peer_flush(G.peers[i]);
}

static void phase_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	if (phase == 0) {             /* warm-up over */
		G.measuring = true;
		G.t_measure = ev_now(loop);
		phase = 1;
		ev_timer_set(w, G.duration, 0);
		ev_timer_start(loop, w);
	} else if (phase == 1) {      /* measurement over: drain for up to 5 s */
		G.measuring = false;
		G.stopping = true;
		ev_timer_stop(loop, &poll_timer);
		phase = 2;
		ev_timer_set(w, 5.0, 0);
		ev_timer_start(loop, w);
	} else {
		ev_break(loop, EVBREAK_ALL);
	}
}

static void check_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	if (phase != 2)
		return;
	for (int i = 0; i < G.nhosts; i++)
		for (int k = 0; k < K__N; k++)
			if (G.hosts[i].inflight[k])
				return;
	ev_break(loop, EVBREAK_ALL);
}

/* ---- report ---------------------------------------------------------------- */

static void report(void)
{
	static const char *const names[] = { "ping", "poll" };
	uint32_t *p50s = xmalloc(sizeof(uint32_t) * (size_t)G.nhosts);
	uint32_t *p99s = xmalloc(sizeof(uint32_t) * (size_t)G.nhosts);
	uint64_t total = 0;
	char result[1024];
	int rl = snprintf(result, sizeof(result), "RESULT mode=%s hosts=%d conns=%d",
			  G.broker ? "broker" : "direct", G.nhosts, G.npeers);
	for (int i = 0; i < G.nhosts; i++)
		for (int k = 0; k < K__N; k++)
			G.lost += G.hosts[i].inflight[k];
	for (int k = 0; k < K__N; k++) {
		uint64_t n = 0;
		uint32_t worst = 0;
		for (int i = 0; i < G.nhosts; i++) {
			struct lat *l = &G.hosts[i].lat[k];
			qsort(l->us, l->n, sizeof(*l->us), cmp_u32);
			p50s[i] = pct(l, 0.50);
			p99s[i] = pct(l, 0.99);
			worst = VD_MAX(worst, p99s[i]);
			n += l->n;
		}
		qsort(p50s, (size_t)G.nhosts, sizeof(*p50s), cmp_u32);
		qsort(p99s, (size_t)G.nhosts, sizeof(*p99s), cmp_u32);
		uint32_t m50 = p50s[G.nhosts / 2], m99 = p99s[G.nhosts / 2];
		double rps = (double)n / G.duration;
		total += n;
		printf("%-6s %-4s hosts %4d  %9.0f req/s  per-host p50 %7.2f ms  p99 %7.2f ms  "
		       "(worst host p99 %7.2f ms)\n", G.broker ? "broker" : "direct", names[k],
		       G.nhosts, rps, m50 / 1000.0, m99 / 1000.0, worst / 1000.0);
		rl += snprintf(result + rl, sizeof(result) - (size_t)rl,
			       " %s_rps=%.0f %s_p50_us=%u %s_p99_us=%u %s_p99_worst_us=%u",
			       names[k], rps, names[k], m50, names[k], m99, names[k], worst);
	}
	printf("%s rps=%.0f poll_reply_bytes=%.0f errors=%llu lost=%llu\n", result,
	       (double)total / G.duration,
	       G.poll_n ? (double)G.poll_bytes / (double)G.poll_n : 0.0,
	       (unsigned long long)G.errors, (unsigned long long)G.lost);
	free(p50s);
	free(p99s);
}

static void usage(void)
{
	fprintf(stderr, "usage: fleet (--broker PORT --hosts H1,H2,... | --direct P1,P2,...)\n"
		"       [--login L] [--passcode P] [--duration S] [--warmup S] [--period MS]\n"
		"       [--ping-depth N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *hosts = NULL, *direct = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		if (!strcmp(a, "--broker")) G.broker = true, G.broker_port = atoi(v);
		else if (!strcmp(a, "--hosts")) hosts = v;
		else if (!strcmp(a, "--direct")) direct = v;
		else if (!strcmp(a, "--login")) G.login = v;
		else if (!strcmp(a, "--passcode")) G.passcode = v;
		else if (!strcmp(a, "--duration")) G.duration = atof(v);
		else if (!strcmp(a, "--warmup")) G.warmup = atof(v);
		else if (!strcmp(a, "--period")) G.period_ms = atof(v);
		else if (!strcmp(a, "--ping-depth")) G.ping_depth = (unsigned)atoi(v);
		else if (!strcmp(a, "--conns")) G.engine_conns = atoi(v);
		else usage();
		i++;
	}
	if ((G.broker && !hosts) || (!G.broker && !direct) || G.duration <= 0 ||
	    G.ping_depth < 1 || G.ping_depth > SLOTS / 2 || G.engine_conns < 1 ||
	    G.engine_conns > 64)
		usage();
	signal(SIGPIPE, SIG_IGN);
	G.loop = ev_default_loop(0);
	char *list = xstrdup(G.broker ? hosts : direct);
	struct peer *bp[64];
	for (int i = 0; G.broker && i < G.engine_conns; i++)
		bp[i] = peer_open(G.broker_port, "/");
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		if (G.nhosts == MAX_HOSTS)
			usage();
		struct host *h = &G.hosts[G.nhosts];
		h->idx = G.nhosts++;
		if (G.broker) {
			snprintf(h->id, sizeof(h->id), "%s", tok);
			h->peer = bp[h->idx % G.engine_conns];
		} else {
			snprintf(h->id, sizeof(h->id), "port%s", tok);
			h->peer = peer_open(atoi(tok), NULL);
		}
	}
	free(list);
	for (int i = 0; i < G.nhosts; i++)
		for (unsigned j = 0; j < G.ping_depth; j++)
			send_req(&G.hosts[i], K_PING, 0);
	for (int i = 0; i < G.npeers; i++)
		peer_flush(G.peers[i]);
	ev_timer_init(&poll_timer, poll_cb, 0.0, G.period_ms / 1000.0);
	ev_timer_start(G.loop, &poll_timer);
	ev_timer_init(&phase_timer, phase_cb, G.warmup, 0);
	ev_timer_start(G.loop, &phase_timer);
	ev_prepare check;
	ev_prepare_init(&check, check_cb);
	ev_prepare_start(G.loop, &check);
	ev_run(G.loop, 0);
	report();
	return 0;
}
