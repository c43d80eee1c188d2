/* client/transport.c - TCP (and TLS unless --insecure) connection to vdsmd
 * and the STOMP client session on it (stomp/ client API).
 *
 * One non-blocking socket driven by poll() against a deadline.  The STOMP
 * preamble (CONNECT, SUBSCRIBE, SEND) is written in one go: the broker
 * accepts SUBSCRIBE and SEND ahead of CONNECTED, which saves round trips.
 * Every failure prints one sentence naming host and port. */
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include "ssl.h"

#define READ_CHUNK 65536

static void fail_msg(const struct client_conn *c, const char *fmt, ...) VD_PRINTF(2, 3);

static void fail_msg(const struct client_conn *c, const char *fmt, ...)
{
	va_list ap;
	fputs(CLIENT_PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	(void)c;
}

static int remaining_ms(uint64_t deadline_ms)
{
	if (!deadline_ms)
		return -1;
	uint64_t now = vd_now_ms();
	if (now >= deadline_ms)
		return 0;
	uint64_t left = deadline_ms - now;
	return left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Wait for events on fd; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, uint64_t deadline_ms, volatile sig_atomic_t *stop)
{
	struct pollfd p = { .fd = fd, .events = events };
	for (;;) {
		if (stop && *stop) {
			errno = EINTR;
			return -1;
		}
		int r = poll(&p, 1, remaining_ms(deadline_ms));
		if (r > 0)
			return 1;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

static void timeout_msg(const struct client_conn *c, const char *what)
{
	const struct client_opts *o = c->o;
	fail_msg(c, "Timed out %s %s after %g seconds.", what, o->where,
		 o->timeout_ms / 1000.0);
}

/* Try one address; returns fd, or -1 with errno (ETIMEDOUT for the deadline). */
static int try_connect(const struct sockaddr *sa, socklen_t salen, uint64_t deadline_ms)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, sa, salen) == 0)
		return fd;
	if (errno != EINPROGRESS)
		goto fail;
	int r = wait_fd(fd, POLLOUT, deadline_ms, NULL);
	if (r == 0) {
		errno = ETIMEDOUT;
		goto fail;
	}
	int err = 0;
	socklen_t len = sizeof(err);
	if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		goto fail;
	if (err) {
		errno = err;
		goto fail;
	}
	return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

static int tcp_connect(struct client_conn *c, uint64_t deadline_ms)
{
	const struct client_opts *o = c->o;
	int fd = -1, err = 0;
	/* localhost is loopback (RFC 6761): skip the resolver. */
	if (strcmp(o->host, "localhost") == 0) {
		struct sockaddr_in in4 = { .sin_family = AF_INET, .sin_port = htons(o->port),
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(o->port),
					    .sin6_addr = IN6ADDR_LOOPBACK_INIT };
		fd = try_connect((struct sockaddr *)&in4, sizeof(in4), deadline_ms);
		if (fd < 0 && errno != ETIMEDOUT) {
			err = errno;
			fd = try_connect((struct sockaddr *)&in6, sizeof(in6), deadline_ms);
			if (fd < 0 && errno == EAFNOSUPPORT)
				errno = err;
		}
		err = errno;
	} else {
		char port[8];
		snprintf(port, sizeof(port), "%u", o->port);
		struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
					  .ai_flags = AI_ADDRCONFIG }, *res = NULL;
		int g = getaddrinfo(o->host, port, &hints, &res);
		if (g != 0) {
			fail_msg(c, "Cannot resolve the host of %s: %s.", o->where,
				 gai_strerror(g));
			return CLIENT_FAIL;
		}
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			fd = try_connect(ai->ai_addr, ai->ai_addrlen, deadline_ms);
			if (fd >= 0)
				break;
			err = errno;
			if (err == ETIMEDOUT)
				break;
		}
		freeaddrinfo(res);
	}
	if (fd >= 0) {
		c->fd = fd;
		return CLIENT_OK;
	}
	if (err == ECONNREFUSED)
		fail_msg(c, "Connection to %s refused (is vdsmd running?).", o->where);
	else if (err == ETIMEDOUT)
		timeout_msg(c, "connecting to");
	else
		fail_msg(c, "Cannot connect to %s: %s.", o->where, strerror(err));
	return CLIENT_FAIL;
}

static const char *ssl_reason(const struct client_conn *c)
{
	unsigned long e = c->api->ERR_peek_last_error();
	const char *r = e ? c->api->ERR_reason_error_string(e) : NULL;
	return r ? r : "unknown error";
}

static int tls_connect(struct client_conn *c, uint64_t deadline_ms)
{
	const struct client_opts *o = c->o;
	char why[256];
	signal(SIGPIPE, SIG_IGN);   /* OpenSSL writes without MSG_NOSIGNAL */
	c->api = xmalloc(sizeof(*c->api));
	if (client_ssl_load(c->api, why, sizeof(why)) != 0) {
		free(c->api);
		c->api = NULL;
		fail_msg(c, "Cannot connect to %s with TLS: %s.", o->where, why);
		return CLIENT_FAIL;
	}
	c->ctx = c->api->SSL_CTX_new(c->api->TLS_client_method());
	if (!c->ctx) {
		fail_msg(c, "Cannot set up TLS for %s: %s.", o->where, ssl_reason(c));
		return CLIENT_FAIL;
	}
	c->api->SSL_CTX_ctrl(c->ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
	const char *files[3] = { o->cert, o->key, o->cacert };
	for (int i = 0; i < 3; i++) {
		if (access(files[i], R_OK) != 0) {
			fail_msg(c, "Cannot connect to %s with TLS: cannot read %s: %s.",
				 o->where, files[i], strerror(errno));
			return CLIENT_FAIL;
		}
	}
	if (c->api->SSL_CTX_use_certificate_chain_file(c->ctx, o->cert) != 1) {
		fail_msg(c, "Cannot connect to %s with TLS: cannot load certificate %s (%s).",
			 o->where, o->cert, ssl_reason(c));
		return CLIENT_FAIL;
	}
	if (c->api->SSL_CTX_use_PrivateKey_file(c->ctx, o->key, SSL_FILETYPE_PEM) != 1 ||
	    c->api->SSL_CTX_check_private_key(c->ctx) != 1) {
		fail_msg(c, "Cannot connect to %s with TLS: cannot load key %s (%s).",
			 o->where, o->key, ssl_reason(c));
		return CLIENT_FAIL;
	}
	if (c->api->SSL_CTX_load_verify_locations(c->ctx, o->cacert, NULL) != 1) {
		fail_msg(c, "Cannot connect to %s with TLS: cannot load CA %s (%s).",
			 o->where, o->cacert, ssl_reason(c));
		return CLIENT_FAIL;
	}
	c->api->SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	c->ssl = c->api->SSL_new(c->ctx);
	if (!c->ssl || c->api->SSL_set_fd(c->ssl, c->fd) != 1) {
		fail_msg(c, "Cannot set up TLS for %s: %s.", o->where, ssl_reason(c));
		return CLIENT_FAIL;
	}
	if (strcmp(o->host, "localhost") != 0)
		c->api->SSL_ctrl(c->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
				 (void *)(uintptr_t)o->host);  // NOLINT(performance-no-int-to-ptr): drops const for SSL_ctrl's void *parg
	for (;;) {
		c->api->ERR_clear_error();
		int r = c->api->SSL_connect(c->ssl);
		if (r == 1)
			return CLIENT_OK;
		int e = c->api->SSL_get_error(c->ssl, r);
		short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
		if (!ev) {
			long vr = c->api->SSL_get_verify_result(c->ssl);
			if (vr != X509_V_OK)
				fail_msg(c, "TLS handshake with %s failed: server certificate "
					 "not trusted (%s).", o->where,
					 c->api->X509_verify_cert_error_string(vr));
			else if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN)
				fail_msg(c, "TLS handshake with %s failed: connection closed "
					 "by the server (is it a TLS port, does it accept our "
					 "certificate?).", o->where);
			else
				fail_msg(c, "TLS handshake with %s failed: %s.", o->where,
					 ssl_reason(c));
			return CLIENT_FAIL;
		}
		int w = wait_fd(c->fd, ev, deadline_ms, c->stop);
		if (w == 0) {
			timeout_msg(c, "during the TLS handshake with");
			return CLIENT_FAIL;
		}
		if (w < 0) {
			fail_msg(c, "TLS handshake with %s failed: %s.", o->where,
				 strerror(errno));
			return CLIENT_FAIL;
		}
	}
}

/* Write all of c->out.  Returns CLIENT_OK, or CLIENT_FAIL (printed);
 * *timed_out set when the deadline passed. */
static int flush_out(struct client_conn *c, uint64_t deadline_ms, bool *timed_out)
{
	const struct client_opts *o = c->o;
	size_t off = 0;
	while (off < c->out.len) {
		ssize_t n;
		short ev = POLLOUT;
		if (c->ssl) {
			c->api->ERR_clear_error();
			int r = c->api->SSL_write(c->ssl, c->out.data + off, (int)VD_MIN(c->out.len - off, (size_t)INT32_MAX));
			if (r > 0) {
				off += (size_t)r;
				continue;
			}
			int e = c->api->SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_WANT_READ)
				ev = POLLIN;
			else if (e != SSL_ERROR_WANT_WRITE)
				goto broken;
		} else {
			n = send(c->fd, c->out.data + off, c->out.len - off, MSG_NOSIGNAL);
			if (n > 0) {
				off += (size_t)n;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (!(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
				goto broken;
		}
		int w = wait_fd(c->fd, ev, deadline_ms, c->stop);
		if (w == 0) {
			*timed_out = true;
			return CLIENT_FAIL;
		}
		if (w < 0)
			goto broken;
	}
	buf_reset(&c->out);
	return CLIENT_OK;
broken:
	fail_msg(c, "Connection to %s lost while sending.", o->where);
	return CLIENT_FAIL;
}

/* Read more bytes into c->in.  1 read, 0 closed by peer, -1 error (printed),
 * -2 timed out. */
static int read_more(struct client_conn *c, uint64_t deadline_ms)
{
	buf_reserve(&c->in, READ_CHUNK);
	for (;;) {
		short ev = POLLIN;
		if (c->ssl) {
			c->api->ERR_clear_error();
			int r = c->api->SSL_read(c->ssl, c->in.data + c->in.len, READ_CHUNK);
			if (r > 0) {
				c->in.len += (size_t)r;
				return 1;
			}
			int e = c->api->SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && c->api->ERR_peek_error() == 0))
				return 0;
			if (e == SSL_ERROR_WANT_WRITE)
				ev = POLLOUT;
			else if (e != SSL_ERROR_WANT_READ)
				return -1;
		} else {
			ssize_t n = recv(c->fd, c->in.data + c->in.len, READ_CHUNK, 0);
			if (n > 0) {
				c->in.len += (size_t)n;
				return 1;
			}
			if (n == 0)
				return 0;
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return errno == ECONNRESET ? 0 : -1;
		}
		int w = wait_fd(c->fd, ev, deadline_ms, c->stop);
		if (w == 0)
			return -2;
		if (w < 0 && errno != EINTR)
			return -1;
		if (w < 0)
			return -3;   /* interrupted by a signal (--watch-events) */
	}
}

int client_conn_open(struct client_conn *c, const struct client_opts *o, uint64_t deadline_ms)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->o = o;
	buf_init(&c->in);
	buf_init(&c->out);
	if (tcp_connect(c, deadline_ms) != CLIENT_OK)
		return CLIENT_FAIL;
	if (o->tls && tls_connect(c, deadline_ms) != CLIENT_OK)
		return CLIENT_FAIL;
	stomp_client_init(&c->stomp, &c->out);
	vd_uuid_generate(c->reply_dest);
	vd_uuid_generate(c->sub_id);
	if (o->broker) {
		/* RabbitMQ: replies come to a temp queue of this connection
		 * (no SUBSCRIBE); the CONNECT host is the vhost. */
		char id[37];
		memcpy(id, c->reply_dest, sizeof(id));
		snprintf(c->reply_dest, sizeof(c->reply_dest), "/temp-queue/vdsm-client-%s", id);
		stomp_client_connect(&c->stomp, o->broker_vhost,
				     *o->broker_login ? o->broker_login : NULL,
				     *o->broker_login ? o->broker_passcode : NULL, 0, 0);
		return CLIENT_OK;
	}
	stomp_client_connect(&c->stomp, o->host, NULL, NULL, 0, 0);
	return CLIENT_OK;
}

void client_conn_subscribe(struct client_conn *c, const char *dest, bool receipt)
{
	char topic[300];
	if (c->o->broker) {
		if (!dest)
			return;   /* the temp queue needs no subscription */
		if (strcmp(dest, CLIENT_EVENTS_DEST) == 0) {
			snprintf(topic, sizeof(topic), "/topic/vdsm.%s.events", c->o->host_id);
			dest = topic;
		}
	}
	if (!dest)
		dest = c->reply_dest;
	if (!receipt) {
		stomp_client_subscribe(&c->stomp, dest, c->sub_id, "auto");
		return;
	}
	/* the client API has no receipt on SUBSCRIBE: write the frame */
	struct stomp_header h[4] = {
		{ "destination", 11, dest, strlen(dest) },
		{ "id", 2, c->sub_id, strlen(c->sub_id) },
		{ "ack", 3, "auto", 4 },
		{ "receipt", 7, c->sub_id, strlen(c->sub_id) },
	};
	stomp_write_frame(&c->out, STOMP_SUBSCRIBE, h, 4, NULL, 0);
}

void client_conn_send_request(struct client_conn *c, const char *body, size_t len)
{
	struct stomp_header extra[1];
	unsigned nextra = 0;
	if (c->o->flow_id) {
		extra[0].name = "ovirtCorrelationId";
		extra[0].nlen = strlen(extra[0].name);
		extra[0].value = c->o->flow_id;
		extra[0].vlen = strlen(c->o->flow_id);
		nextra = 1;
	}
	char queue[300];
	const char *dest = CLIENT_REQUEST_DEST;
	if (c->o->broker) {
		snprintf(queue, sizeof(queue), "/queue/vdsm.%s.requests", c->o->host_id);
		dest = queue;
	}
	stomp_client_send(&c->stomp, dest, c->reply_dest,
			  c->o->codec->content_type, extra, nextra, body, len);
}

int client_conn_next(struct client_conn *c, uint64_t deadline_ms, bool *timed_out)
{
	const struct client_opts *o = c->o;
	*timed_out = false;
	if (c->out.len && flush_out(c, deadline_ms, timed_out) != CLIENT_OK)
		return CLIENT_FAIL;
	if (c->frame_len) {
		buf_consume(&c->in, c->frame_len);
		c->frame_len = 0;
	}
	for (;;) {
		if (c->in.len) {
			const char *why = NULL;
			memset(&c->frame, 0, sizeof(c->frame));
			long r = stomp_client_feed(&c->stomp, c->in.data, c->in.len, &c->frame, &why);
			if (r > 0) {
				if (c->frame.cmd == STOMP_MESSAGE) {
					c->frame_len = (size_t)r;
					return CLIENT_OK;
				}
				if (c->frame.cmd == STOMP_ERROR) {
					size_t ml = 0;
					const char *m = stomp_frame_get(&c->frame, "message", &ml);
					fail_msg(c, "Server %s sent a STOMP error: %.*s%s%.*s.",
						 o->where, (int)ml, m ? m : "",
						 c->frame.body_len ? ": " : "",
						 (int)VD_MIN(c->frame.body_len, 500),
						 c->frame.body ? c->frame.body : "");
					return CLIENT_FAIL;
				}
				if (c->frame.cmd == STOMP_RECEIPT)
					c->receipts++;
				buf_consume(&c->in, (size_t)r);   /* CONNECTED, RECEIPT, heart-beats */
				if (c->frame.cmd == STOMP_RECEIPT && c->on_receipt)
					c->on_receipt(c);
				continue;
			}
			if (r != VD_AGAIN) {
				fail_msg(c, "Bad STOMP frame from %s: %s.", o->where,
					 why ? why : vd_strerror((int)r));
				return CLIENT_FAIL;
			}
		}
		int rr = read_more(c, deadline_ms);
		if (rr == 1)
			continue;
		if (rr == -2) {
			*timed_out = true;
			return CLIENT_FAIL;
		}
		if (rr == -3)
			return CLIENT_FAIL;
		if (rr == 0)
			fail_msg(c, "Connection to %s closed by the server.", o->where);
		else
			fail_msg(c, "Connection to %s failed: %s.", o->where,
				 c->ssl ? ssl_reason(c) : strerror(errno));
		return CLIENT_FAIL;
	}
}

void client_conn_close(struct client_conn *c)
{
	if (c->fd >= 0 && c->stomp.out) {
		buf_reset(&c->out);
		stomp_client_disconnect(&c->stomp, NULL);
		/* best effort, without waiting */
		if (c->ssl) {
			c->api->SSL_write(c->ssl, c->out.data, (int)c->out.len);
			c->api->SSL_shutdown(c->ssl);
		} else {
			if (send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				(void)0;
		}
	}
	if (c->ssl)
		c->api->SSL_free(c->ssl);
	if (c->ctx)
		c->api->SSL_CTX_free(c->ctx);
	free(c->api);
	c->api = NULL;
	if (c->fd >= 0)
		close(c->fd);
	buf_free(&c->in);
	buf_free(&c->out);
	c->fd = -1;
	c->ssl = NULL;
	c->ctx = NULL;
}
