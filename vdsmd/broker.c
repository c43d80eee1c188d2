/* vdsmd/broker.c - broker mode, the connection: URI, non-blocking TCP
 * connect (TCP_NODELAY), TLS client handshake for stomps://, CONNECT and
 * heart-beats, write-first output, jittered exponential backoff.  What is
 * done with frames lives in broker_msg.c, above it: broker.c tells it what
 * happened through the struct brk_events it was handed (brk_open), and
 * calls nothing of broker_msg.c by name.  See broker.h. */
#include "broker_int.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "../common/log.h"

#define CONNECT_TIMEOUT 10.0   /* seconds for TCP + TLS + CONNECTED */
#define READ_CHUNK 65536

static void io_cb(struct ev_loop *loop, ev_io *w, int revents);

/* ---- URI and host id ------------------------------------------------------ */

int broker_parse_uri(const char *uri, char *host, size_t hostlen, unsigned *port,
		     bool *tls, char *why, size_t whylen)
{
	const char *p;
	if (strncmp(uri, "stomp://", 8) == 0) {
		*tls = false;
		p = uri + 8;
	} else if (strncmp(uri, "stomps://", 9) == 0) {
		*tls = true;
		p = uri + 9;
	} else {
		snprintf(why, whylen, "broker_uri \"%s\": expected stomp://HOST[:PORT] or "
			 "stomps://HOST[:PORT]", uri);
		return VD_EINVAL;
	}
	*port = *tls ? 61614 : 61613;
	const char *hs = p, *he, *rest;
	if (*p == '[') {
		he = strchr(p, ']');
		if (!he) {
			snprintf(why, whylen, "broker_uri \"%s\": unterminated [", uri);
			return VD_EINVAL;
		}
		hs = p + 1;
		rest = he + 1;
	} else {
		he = p + strcspn(p, ":/");
		rest = he;
	}
	size_t hl = (size_t)(he - hs);
	if (hl == 0 || hl >= hostlen) {
		snprintf(why, whylen, "broker_uri \"%s\": missing or too long host", uri);
		return VD_EINVAL;
	}
	memcpy(host, hs, hl);
	host[hl] = 0;
	if (*rest == ':') {
		char *end;
		errno = 0;
		unsigned long v = strtoul(rest + 1, &end, 10);
		if (errno || end == rest + 1 || v == 0 || v > 65535 || (*end && *end != '/')) {
			snprintf(why, whylen, "broker_uri \"%s\": bad port", uri);
			return VD_EINVAL;
		}
		*port = (unsigned)v;
		rest = end;
	}
	if (*rest && strcmp(rest, "/") != 0) {
		snprintf(why, whylen, "broker_uri \"%s\": unexpected \"%s\" (the vhost is "
			 "broker_vhost)", uri, rest);
		return VD_EINVAL;
	}
	return 0;
}

/* /etc/machine-id (or dbus's copy), else the host name. */
static void machine_id(char *out, size_t n)
{
	static const char *const files[] = { "/etc/machine-id", "/var/lib/dbus/machine-id" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(files); i++) {
		FILE *f = fopen(files[i], "r");
		if (!f)
			continue;
		char line[128] = "";
		char *ok = fgets(line, sizeof(line), f);
		fclose(f);
		line[strcspn(line, " \t\r\n")] = 0;
		if (ok && *line) {
			snprintf(out, n, "%s", line);
			return;
		}
	}
	if (gethostname(out, n) != 0 || !*out)
		snprintf(out, n, "localhost");
	out[n - 1] = 0;
}

/* ---- state ------------------------------------------------------------------- */

bool brk_online(const struct vd_broker *b)
{
	return b->state == BRK_ONLINE;
}

static unsigned brk_rand(struct vd_broker *b)
{
	b->rand_state = b->rand_state * 1103515245u + 12345u;
	return (b->rand_state >> 16) & 0x7fff;
}

static void schedule_retry(struct vd_broker *b)
{
	struct ev_loop *loop = b->d->loop;
	/* Between 1x and 2x the current step (1 s, 2 s, 4 s, ... capped at
	 * 60 s): the jitter keeps a fleet that lost its broker together from
	 * reconnecting in lockstep, from the first retry on. */
	double delay = b->backoff * (1.0 + brk_rand(b) / 32768.0);
	if (delay > BRK_BACKOFF_MAX)
		delay = BRK_BACKOFF_MAX;
	b->backoff = VD_MIN(b->backoff * 2, BRK_BACKOFF_MAX / 2);
	ev_timer_stop(loop, &b->retry);
	ev_timer_set(&b->retry, delay, 0);
	ev_timer_start(loop, &b->retry);
	b->state = BRK_IDLE;
	log_info("broker %s: reconnecting in %.1f s", b->where, delay);
}

static void close_socket(struct vd_broker *b)
{
	struct ev_loop *loop = b->d->loop;
	ev_io_stop(loop, &b->io);
	ev_timer_stop(loop, &b->tick);
	io_close(&b->link);
	b->want_write = false;
	buf_free(&b->in);
	buf_free(&b->out);
	buf_init(&b->in);
	buf_init(&b->out);
}

void brk_disconnect(struct vd_broker *b, const char *why)
{
	if (b->state == BRK_STOPPED || b->state == BRK_IDLE)
		return;
	bool was_online = b->state == BRK_ONLINE;
	if (was_online)
		log_warn("broker %s: connection lost: %s", b->where, why);
	else
		log_warn("broker %s: cannot connect: %s", b->where, why);
	if (!was_online)
		b->st.connect_failures++;
	close_socket(b);
	b->st.connected = false;
	b->gen++;
	b->on->lost(b);
	schedule_retry(b);
}

/* ---- output ------------------------------------------------------------------ */

static void want_write(struct vd_broker *b, bool on)
{
	if (b->want_write == on)
		return;
	struct ev_loop *loop = b->d->loop;
	ev_io_stop(loop, &b->io);
	ev_io_set(&b->io, b->link.fd, EV_READ | (on ? EV_WRITE : 0));
	ev_io_start(loop, &b->io);
	b->want_write = on;
}

/* > 0 bytes, 0 would block, < 0 error (why set). */
static long raw_write(struct vd_broker *b, const char *p, size_t n, const char **why)
{
	long r = io_write(&b->link, p, n);
	if (r > 0)
		return r;
	if (r == VD_AGAIN)
		return 0;
	*why = io_is_tls(&b->link) ? "TLS write failed" : strerror(b->link.last_errno);
	return -1;
}

void brk_flush(struct vd_broker *b)
{
	if (b->link.fd < 0 || b->feeding || b->state == BRK_CONNECTING ||
	    b->state == BRK_HANDSHAKE)
		return;
	size_t off = 0;
	const char *why = NULL;
	while (off < b->out.len) {
		long r = raw_write(b, b->out.data + off, b->out.len - off, &why);
		if (r < 0) {
			buf_consume(&b->out, off);
			brk_disconnect(b, why);
			return;
		}
		if (r == 0)
			break;
		off += (size_t)r;
	}
	if (off)
		b->last_out = ev_now(b->d->loop);
	buf_consume(&b->out, off);
	if (b->out.len > b->d->cfg.max_output) {
		brk_disconnect(b, "output over max_output (broker not reading)");
		return;
	}
	want_write(b, b->out.len > 0);
}

/* ---- input ------------------------------------------------------------------- */

static void on_frame(struct vd_broker *b, struct stomp_frame *f)
{
	switch (f->cmd) {
	case STOMP_CONNECTED: {
		b->state = BRK_ONLINE;
		b->st.connected = true;
		b->st.connects++;
		b->backoff = BRK_BACKOFF_MIN;
		b->attempts = 0;
		b->ever_connected = true;
		const char *server = stomp_frame_get(f, "server", NULL);
		log_info("broker %s: connected (%s, heart-beat %u/%u ms, host_id %s)",
			 b->where, server ? server : "unknown server", b->sc.hb_send_ms,
			 b->sc.hb_recv_ms, b->d->cfg.host_id);
		b->on->connected(b);
		break;
	}
	case STOMP_MESSAGE:
		if (b->state == BRK_ONLINE)
			b->on->message(b, f);
		break;
	case STOMP_ERROR: {
		size_t ml = 0;
		const char *m = stomp_frame_get(f, "message", &ml);
		char why[600];
		if (b->state == BRK_LOGIN)
			snprintf(why, sizeof(why), "login as \"%s\" (vhost \"%s\") refused: %.*s%s%.*s "
				 "(check broker_login, broker_passcode, broker_vhost)",
				 b->d->cfg.broker_login, b->d->cfg.broker_vhost, (int)ml, m ? m : "",
				 f->body_len ? ": " : "", (int)VD_MIN(f->body_len, 200),
				 f->body ? f->body : "");
		else
			snprintf(why, sizeof(why), "broker ERROR: %.*s%s%.*s", (int)ml, m ? m : "",
				 f->body_len ? ": " : "", (int)VD_MIN(f->body_len, 200),
				 f->body ? f->body : "");
		/* one log line: the body's newlines become spaces, runs collapse */
		char *w = why;
		for (const char *c = why; *c; c++) {
			char ch = (*c == '\n' || *c == '\r') ? ' ' : *c;
			if (ch == ' ' && w > why && w[-1] == ' ')
				continue;
			*w++ = ch;
		}
		*w = 0;
		brk_disconnect(b, why);
		break;
	}
	default:
		break;
	}
}

static void process_input(struct vd_broker *b)
{
	unsigned gen = b->gen;
	size_t off = 0;
	b->feeding = true;
	while (off < b->in.len && b->gen == gen && b->link.fd >= 0) {
		struct stomp_frame f;
		memset(&f, 0, sizeof(f));
		const char *why = NULL;
		long r = stomp_client_feed(&b->sc, b->in.data + off, b->in.len - off, &f, &why);
		if (r == VD_AGAIN)
			break;
		if (r < 0) {
			char m[256];
			snprintf(m, sizeof(m), "bad frame from the broker: %s",
				 why ? why : vd_strerror((int)r));
			b->feeding = false;
			brk_disconnect(b, m);
			return;
		}
		off += (size_t)r;
		if (f.cmd != STOMP_NONE)
			on_frame(b, &f);
	}
	b->feeding = false;
	if (b->gen == gen && b->link.fd >= 0) {
		buf_consume(&b->in, off);
		brk_flush(b);
	}
}

static void do_read(struct vd_broker *b)
{
	unsigned gen = b->gen;
	/* Plain TCP: a few reads per wake-up (level-triggered, the loop comes
	 * back).  TLS: until WANT_READ, since bytes OpenSSL already buffered
	 * would not wake the loop again. */
	for (int i = 0; (io_is_tls(&b->link) || i < 16) && b->gen == gen; i++) {
		if (b->in.len > b->d->cfg.max_frame_size + 65536) {
			brk_disconnect(b, "frame over max_frame_size");
			return;
		}
		buf_reserve(&b->in, READ_CHUNK);
		long n = io_read(&b->link, b->in.data + b->in.len, READ_CHUNK);
		if (n == VD_AGAIN)
			return;
		if (n <= 0) {
			brk_disconnect(b, n == 0 ? "closed by the broker"
				       : io_is_tls(&b->link) ? "TLS read failed"
				       : strerror(b->link.last_errno));
			return;
		}
		b->in.len += (size_t)n;
		b->last_in = ev_now(b->d->loop);
		process_input(b);
		if (n < READ_CHUNK && !io_is_tls(&b->link))
			return;
	}
}

/* ---- connecting ------------------------------------------------------------ */

static void send_connect(struct vd_broker *b)
{
	struct vd_config *cfg = &b->d->cfg;
	b->state = BRK_LOGIN;
	stomp_client_init(&b->sc, &b->out);
	stomp_client_connect(&b->sc, cfg->broker_vhost, cfg->broker_login,
			     cfg->broker_passcode, BRK_HEARTBEAT_MS, BRK_HEARTBEAT_MS);
	brk_flush(b);
}

static void tls_step(struct vd_broker *b)
{
	int r = io_handshake(&b->link);
	if (r == 0) {
		log_debug("broker %s: TLS %s", b->where, io_version(&b->link));
		send_connect(b);
		return;
	}
	if (r == VD_AGAIN) {
		want_write(b, b->link.want == IO_WANT_WRITE);
		return;
	}
	char why[300];
	if (b->link.verify_err)
		snprintf(why, sizeof(why), "TLS: broker certificate not trusted (%s)",
			 b->link.verify_err);
	else if (b->link.reason[0] && !b->link.closed_in_handshake)
		snprintf(why, sizeof(why), "TLS handshake: %s", b->link.reason);
	else
		snprintf(why, sizeof(why), "TLS handshake: connection closed");
	brk_disconnect(b, why);
}

static void connected_tcp(struct vd_broker *b)
{
	if (!b->tls) {
		send_connect(b);
		return;
	}
	b->state = BRK_HANDSHAKE;
	/* The broker's certificate must chain to ca_file and name the host
	 * of broker_uri (DNS name or IP address in its subjectAltName); the
	 * server name goes out for a DNS name only. */
	bool ip = inet_pton(AF_INET, b->host, &(struct in_addr){0}) == 1 ||
		  inet_pton(AF_INET6, b->host, &(struct in6_addr){{{0}}}) == 1;
	if (io_tls_client_init(&b->link, io_tls_lib_linked(), b->ssl_ctx, b->link.fd,
			       ip ? NULL : b->host, b->host) != 0) {
		brk_disconnect(b, io_last_error(&b->link));
		return;
	}
	tls_step(b);
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vd_broker *b = w->data;
	ev_tstamp now = ev_now(loop);
	if (b->state == BRK_CONNECTING || b->state == BRK_HANDSHAKE || b->state == BRK_LOGIN) {
		if (now - b->phase_start > CONNECT_TIMEOUT)
			brk_disconnect(b, b->state == BRK_LOGIN ? "no CONNECTED within 10 s"
				       : "connect timed out after 10 s");
		return;
	}
	if (b->state != BRK_ONLINE)
		return;
	if (b->sc.hb_recv_ms && now - b->last_in > 2.0 * b->sc.hb_recv_ms / 1000.0) {
		brk_disconnect(b, "no heart-beat from the broker");
		return;
	}
	if (b->sc.hb_send_ms && now - b->last_out >= b->sc.hb_send_ms / 1000.0 * 0.9 &&
	    b->out.len == 0) {
		buf_putc(&b->out, '\n');
		brk_flush(b);
	}
}

static void start_connect(struct vd_broker *b)
{
	struct ev_loop *loop = b->d->loop;
	if (b->ever_connected || b->attempts)
		b->st.reconnects++;
	b->attempts++;
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", b->port);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV },
			*ai = NULL;
	int g = getaddrinfo(b->host, ps, &hints, &ai);
	b->state = BRK_CONNECTING;
	b->phase_start = ev_now(loop);
	if (g) {
		char m[300];
		snprintf(m, sizeof(m), "cannot resolve %s: %s", b->host, gai_strerror(g));
		brk_disconnect(b, m);
		return;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		brk_disconnect(b, strerror(errno));
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
	int err = errno;
	freeaddrinfo(ai);
	io_plain_init(&b->link, fd);
	b->last_in = b->last_out = ev_now(loop);
	ev_io_init(&b->io, io_cb, fd, EV_READ | EV_WRITE);
	b->io.data = b;
	b->want_write = true;
	ev_io_start(loop, &b->io);
	ev_timer_set(&b->tick, 1.0, 1.0);
	ev_timer_start(loop, &b->tick);
	if (r < 0 && err != EINPROGRESS)
		brk_disconnect(b, strerror(err));
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vd_broker *b = w->data;
	if (b->state == BRK_IDLE)
		start_connect(b);
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct vd_broker *b = w->data;
	if (b->state == BRK_CONNECTING) {
		if (!(revents & EV_WRITE))
			return;
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(b->link.fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			brk_disconnect(b, strerror(err));
			return;
		}
		want_write(b, false);
		connected_tcp(b);
		return;
	}
	if (b->state == BRK_HANDSHAKE) {
		tls_step(b);
		return;
	}
	unsigned gen = b->gen;
	if (revents & EV_READ)
		do_read(b);
	if (b->gen == gen && b->link.fd >= 0 && (revents & EV_WRITE || io_is_tls(&b->link)))
		brk_flush(b);
}

/* ---- lifecycle ------------------------------------------------------------- */

static int tls_setup(struct vd_broker *b, char *why, size_t whylen)
{
	const struct vd_config *cfg = &b->d->cfg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		snprintf(why, whylen, "broker: cannot create a TLS context");
		return VD_EIO;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	const char *what = NULL, *file = NULL;
	if (access(cfg->cert_file, R_OK) == 0 &&
	    SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1) {
		what = "cert_file"; file = cfg->cert_file;
	} else if (access(cfg->key_file, R_OK) == 0 &&
		   SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) != 1) {
		what = "key_file"; file = cfg->key_file;
	} else if (SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) != 1) {
		what = "ca_file"; file = cfg->ca_file;
	}
	if (what) {
		unsigned long e = ERR_get_error();
		snprintf(why, whylen, "broker (stomps): bad %s %s: %s", what, file,
			 e ? ERR_reason_error_string(e) : "cannot read");
		ERR_clear_error();
		SSL_CTX_free(ctx);
		return VD_EINVAL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	b->ssl_ctx = ctx;
	return 0;
}

int brk_open(struct vdsmd *d, const struct brk_events *on, char *why, size_t whylen)
{
	struct vd_config *cfg = &d->cfg;
	if (!cfg->broker_uri || !*cfg->broker_uri)
		return 0;
	struct vd_broker *b = xcalloc(1, sizeof(*b));
	b->d = d;
	b->on = on;
	b->link = (struct io_conn)IO_CONN_INIT;
	int rc = broker_parse_uri(cfg->broker_uri, b->host, sizeof(b->host), &b->port, &b->tls,
				  why, whylen);
	if (rc) {
		free(b);
		return rc;
	}
	if (!cfg->host_id || !*cfg->host_id) {
		char id[128];
		machine_id(id, sizeof(id));
		free(cfg->host_id);
		cfg->host_id = xstrdup(id);
	}
	if (strpbrk(cfg->host_id, "/.#*: \t\n")) {
		snprintf(why, whylen, "host_id \"%s\": must not contain '/', '.', '#', '*', ':' "
			 "or spaces (it is part of queue and topic names)", cfg->host_id);
		free(b);
		return VD_EINVAL;
	}
	snprintf(b->where, sizeof(b->where), strchr(b->host, ':') ? "[%s]:%u" : "%s:%u",
		 b->host, b->port);
	snprintf(b->requests_dest, sizeof(b->requests_dest), "/queue/vdsm.%s.requests",
		 cfg->host_id);
	snprintf(b->events_dest, sizeof(b->events_dest), "/topic/vdsm.%s.events", cfg->host_id);
	if (b->tls && (rc = tls_setup(b, why, whylen))) {
		free(b);
		return rc;
	}
	buf_init(&b->in);
	buf_init(&b->out);
	b->backoff = BRK_BACKOFF_MIN;
	b->rand_state = (unsigned)(vd_now_ns() ^ (uint64_t)getpid() * 2654435761u);
	ev_init(&b->retry, retry_cb);
	b->retry.data = b;
	ev_init(&b->tick, tick_cb);
	b->tick.data = b;
	ev_init(&b->ready_poll, NULL);
	b->state = BRK_IDLE;
	d->broker = b;
	log_info("broker mode: %s://%s as \"%s\" (vhost \"%s\", host_id %s, prefetch %u)",
		 b->tls ? "stomps" : "stomp", b->where, cfg->broker_login, cfg->broker_vhost,
		 cfg->host_id, cfg->broker_prefetch);
	return 0;
}

void broker_connect(struct vd_broker *b)
{
	if (b->state == BRK_IDLE && !ev_is_active(&b->retry) && b->link.fd < 0)
		start_connect(b);
}

void broker_stop(struct vd_broker *b)
{
	if (!b || b->state == BRK_STOPPED)
		return;
	if (b->state == BRK_ONLINE && b->link.fd >= 0) {
		/* Best effort: requests not ACKed go back to the queue. */
		stomp_client_disconnect(&b->sc, NULL);
		brk_flush(b);
	}
	close_socket(b);
	ev_timer_stop(b->d->loop, &b->retry);
	b->state = BRK_STOPPED;
	b->st.connected = false;
	b->gen++;
	b->on->lost(b);
}

void brk_link_free(struct vd_broker *b)
{
	if (b->ssl_ctx)
		SSL_CTX_free(b->ssl_ctx);
	buf_free(&b->in);
	buf_free(&b->out);
	free(b);
}
