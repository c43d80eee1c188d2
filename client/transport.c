/* client/transport.c - TCP (and TLS unless --insecure) connection to vdsmd
 * and the STOMP client session on it (stomp/ client API).
 *
 * One non-blocking socket of the connection layer (io/io.h), waited on
 * with poll() against a deadline; OpenSSL is loaded with dlopen() only for
 * TLS (io_tls_lib_load).  The STOMP preamble (CONNECT, SUBSCRIBE, SEND) is
 * written in one go: the broker accepts SUBSCRIBE and SEND ahead of
 * CONNECTED, which saves round trips.  Every failure prints one sentence
 * naming host and port. */
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../io/tls_lib.h"

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

static void timeout_msg(const struct client_conn *c, const char *what)
{
	const struct client_opts *o = c->o;
	fail_msg(c, "Timed out %s %s after %g seconds.", what, o->where,
		 o->timeout_ms / 1000.0);
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
		fd = io_connect_addr((struct sockaddr *)&in4, sizeof(in4), deadline_ms);
		if (fd < 0 && errno != ETIMEDOUT) {
			err = errno;
			fd = io_connect_addr((struct sockaddr *)&in6, sizeof(in6), deadline_ms);
			if (fd < 0 && errno == EAFNOSUPPORT)
				errno = err;
		}
		err = errno;
	} else {
		char port[8], why[300];
		snprintf(port, sizeof(port), "%u", o->port);
		fd = io_dial(o->host, port, AI_ADDRCONFIG, deadline_ms, why, sizeof(why));
		if (fd == VD_ENOENT) {
			fail_msg(c, "Cannot resolve the host of %s: %s.", o->where,
				 why + strlen(o->host) + 2);
			return CLIENT_FAIL;
		}
		err = errno;
	}
	if (fd >= 0) {
		io_plain_init(&c->io, fd);
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
	unsigned long e = c->lib->ERR_peek_last_error();
	const char *r = e ? c->lib->ERR_reason_error_string(e) : NULL;
	return r ? r : "unknown error";
}

/* The client's TLS context: TLS 1.2 at least, our certificate and key, the
 * server's checked against the CA. */
static int tls_context(struct client_conn *c)
{
	const struct client_opts *o = c->o;
	const struct io_tls_lib *l = c->lib;
	c->ctx = l->SSL_CTX_new(l->TLS_client_method());
	if (!c->ctx) {
		fail_msg(c, "Cannot set up TLS for %s: %s.", o->where, ssl_reason(c));
		return CLIENT_FAIL;
	}
	l->SSL_CTX_ctrl(c->ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
	const char *files[3] = { o->cert, o->key, o->cacert };
	for (int i = 0; i < 3; i++) {
		if (access(files[i], R_OK) != 0) {
			fail_msg(c, "Cannot connect to %s with TLS: cannot read %s: %s.",
				 o->where, files[i], strerror(errno));
			return CLIENT_FAIL;
		}
	}
	if (l->SSL_CTX_use_certificate_chain_file(c->ctx, o->cert) != 1) {
		fail_msg(c, "Cannot connect to %s with TLS: cannot load certificate %s (%s).",
			 o->where, o->cert, ssl_reason(c));
		return CLIENT_FAIL;
	}
	if (l->SSL_CTX_use_PrivateKey_file(c->ctx, o->key, SSL_FILETYPE_PEM) != 1 ||
	    l->SSL_CTX_check_private_key(c->ctx) != 1) {
		fail_msg(c, "Cannot connect to %s with TLS: cannot load key %s (%s).",
			 o->where, o->key, ssl_reason(c));
		return CLIENT_FAIL;
	}
	if (l->SSL_CTX_load_verify_locations(c->ctx, o->cacert, NULL) != 1) {
		fail_msg(c, "Cannot connect to %s with TLS: cannot load CA %s (%s).",
			 o->where, o->cacert, ssl_reason(c));
		return CLIENT_FAIL;
	}
	l->SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	return CLIENT_OK;
}

static int tls_connect(struct client_conn *c, uint64_t deadline_ms)
{
	const struct client_opts *o = c->o;
	char why[256];
	signal(SIGPIPE, SIG_IGN);   /* OpenSSL writes without MSG_NOSIGNAL */
	c->lib = xmalloc(sizeof(*c->lib));
	if (io_tls_lib_load(c->lib, why, sizeof(why)) != 0) {
		free(c->lib);
		c->lib = NULL;
		fail_msg(c, "Cannot connect to %s with TLS: %s.", o->where, why);
		return CLIENT_FAIL;
	}
	if (tls_context(c) != CLIENT_OK)
		return CLIENT_FAIL;
	int fd = c->io.fd;
	c->io.fd = -1;   /* the TLS connection takes the socket over */
	const char *sni = strcmp(o->host, "localhost") != 0 ? o->host : NULL;
	if (io_tls_client_init(&c->io, c->lib, c->ctx, fd, sni, NULL) != 0) {
		/* c->io.fd still holds the socket: client_conn_close() closes it */
		fail_msg(c, "Cannot set up TLS for %s: %s.", o->where, io_last_error(&c->io));
		return CLIENT_FAIL;
	}
	int r = io_handshake_wait(&c->io, deadline_ms, c->stop);
	if (r == 0)
		return CLIENT_OK;
	if (r == VD_ETIMEDOUT)
		timeout_msg(c, "during the TLS handshake with");
	else if (r == VD_AGAIN)   /* stopped by a signal */
		fail_msg(c, "TLS handshake with %s failed: %s.", o->where, strerror(EINTR));
	else if (c->io.verify_err)
		fail_msg(c, "TLS handshake with %s failed: server certificate "
			 "not trusted (%s).", o->where, c->io.verify_err);
	else if (c->io.closed_in_handshake)
		fail_msg(c, "TLS handshake with %s failed: connection closed "
			 "by the server (is it a TLS port, does it accept our "
			 "certificate?).", o->where);
	else
		fail_msg(c, "TLS handshake with %s failed: %s.", o->where,
			 c->io.reason[0] ? c->io.reason : io_last_error(&c->io));
	return CLIENT_FAIL;
}

/* Write all of c->out.  Returns CLIENT_OK, or CLIENT_FAIL (printed);
 * *timed_out set when the deadline passed. */
static int flush_out(struct client_conn *c, uint64_t deadline_ms, bool *timed_out)
{
	int r = io_write_all(&c->io, c->out.data, c->out.len, deadline_ms, c->stop);
	if (r == 0) {
		buf_reset(&c->out);
		return CLIENT_OK;
	}
	if (r == VD_ETIMEDOUT) {
		*timed_out = true;
		return CLIENT_FAIL;
	}
	fail_msg(c, "Connection to %s lost while sending.", c->o->where);
	return CLIENT_FAIL;
}

/* Read more bytes into c->in.  1 read, 0 closed by peer, -1 error (printed),
 * -2 timed out, -3 interrupted through c->stop. */
static int read_more(struct client_conn *c, uint64_t deadline_ms)
{
	buf_reserve(&c->in, READ_CHUNK);
	long n = io_read_wait(&c->io, c->in.data + c->in.len, READ_CHUNK, deadline_ms, c->stop);
	if (n > 0) {
		c->in.len += (size_t)n;
		return 1;
	}
	if (n == 0 || n == VD_ECLOSED)
		return 0;
	if (n == VD_ETIMEDOUT)
		return -2;
	if (n == VD_AGAIN)
		return -3;   /* interrupted by a signal (--watch-events) */
	return -1;
}

int client_conn_open(struct client_conn *c, const struct client_opts *o, uint64_t deadline_ms)
{
	memset(c, 0, sizeof(*c));
	c->io = (struct io_conn)IO_CONN_INIT;
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
				 io_is_tls(&c->io) ? c->io.reason : strerror(c->io.last_errno));
		return CLIENT_FAIL;
	}
}

void client_conn_close(struct client_conn *c)
{
	if (c->io.ops && c->stomp.out) {
		buf_reset(&c->out);
		stomp_client_disconnect(&c->stomp, NULL);
		/* best effort, without waiting */
		if (io_write(&c->io, c->out.data, c->out.len) < 0)
			(void)0;
		if (io_is_tls(&c->io))
			io_shutdown(&c->io);
	}
	io_close(&c->io);
	if (c->ctx)
		c->lib->SSL_CTX_free(c->ctx);
	free(c->lib);
	c->lib = NULL;
	buf_free(&c->in);
	buf_free(&c->out);
	c->ctx = NULL;
}
