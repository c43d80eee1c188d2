/* vdsmd/tls.c - TLS with OpenSSL 3: server context with a required,
 * verified client certificate (TLS 1.2 minimum), the peer context of the
 * migration client, and for conn.c the connection's TLS through the
 * connection layer (io/io.h: non-blocking handshake, read, write; the
 * layer refuses plaintext on the TLS port by its first byte), with the
 * daemon's logging and counters.  The ground floor under conn.c: it calls
 * nothing of the connection's (conn.c arms EV_WRITE and closes on what it
 * returns). */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "../common/log.h"
#include "../io/io.h"

static int check_file(const char *key, const char *path, char *why, size_t whylen)
{
	if (!path || !*path) {
		snprintf(why, whylen, "tls is on but %s is not set", key);
		return VD_EINVAL;
	}
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(why, whylen, "tls: cannot read %s %s: %s", key, path, strerror(errno));
		return VD_EIO;
	}
	fclose(f);
	return 0;
}

static void ssl_reason(char *out, size_t n)
{
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, out, n);
	else
		snprintf(out, n, "%s", errno ? strerror(errno) : "unknown error");
	ERR_clear_error();
}

/* The server context: the host's certificate and key; with client_ca, a
 * client certificate chaining to ca_file is required (the main port), else
 * none is asked for (the image port: the ticket id is the credential). */
static int server_ctx_new(const struct vd_config *cfg, bool client_ca, struct ssl_ctx_st **out,
			  char *why, size_t whylen)
{
	int rc;
	if ((rc = check_file("key_file", cfg->key_file, why, whylen)) ||
	    (rc = check_file("cert_file", cfg->cert_file, why, whylen)) ||
	    (client_ca && (rc = check_file("ca_file", cfg->ca_file, why, whylen))))
		return rc;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	char r[256];
	if (!ctx) {
		ssl_reason(r, sizeof(r));
		snprintf(why, whylen, "tls: cannot create context: %s", r);
		return VD_EIO;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
			      SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	/* No TLS 1.3 session tickets: OpenSSL sends two after every handshake
	 * by default, which delays the first reply (the client's first frame
	 * waits behind ticket issuance: median 1.6 -> 0.6 ms) and our clients
	 * (the engine's long-lived connection, one-shot vdsm-client) do not
	 * resume sessions. */
	SSL_CTX_set_num_tickets(ctx, 0);
	static const unsigned char sid[] = "vdsmd";
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	const char *what = NULL, *file = NULL;
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1) {
		what = "cert_file"; file = cfg->cert_file;
	} else if (SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) != 1) {
		what = "key_file"; file = cfg->key_file;
	} else if (SSL_CTX_check_private_key(ctx) != 1) {
		what = "key_file (does not match cert_file)"; file = cfg->key_file;
	} else if (client_ca && SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) != 1) {
		what = "ca_file"; file = cfg->ca_file;
	}
	if (what) {
		ssl_reason(r, sizeof(r));
		snprintf(why, whylen, "tls: bad %s %s: %s", what, file, r);
		SSL_CTX_free(ctx);
		return VD_EINVAL;
	}
	if (client_ca) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->ca_file);
		if (names)
			SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	} else {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	}
	*out = ctx;
	return 0;
}

int tls_ctx_new(const struct vd_config *cfg, struct ssl_ctx_st **out, char *why, size_t whylen)
{
	int rc = server_ctx_new(cfg, true, out, why, whylen);
	/* The main port reads ahead: one read() takes a record's header and
	 * body (and whatever records follow) instead of two; conn.c looks at
	 * tls_pending before it waits for the socket again.  Not the image
	 * port, whose threads wait on the socket after each read. */
	if (!rc)
		SSL_CTX_set_read_ahead(*out, 1);
	return rc;
}

int tls_image_ctx_new(const struct vd_config *cfg, struct ssl_ctx_st **out, char *why,
		      size_t whylen)
{
	return server_ctx_new(cfg, false, out, why, whylen);
}

int tls_peer_ctx_new(const struct vd_config *cfg, struct ssl_ctx_st **out, char *why,
		     size_t whylen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	char r[256];
	if (!ctx) {
		ssl_reason(r, sizeof(r));
		snprintf(why, whylen, "tls: cannot create the peer context: %s", r);
		return VD_EIO;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) != 1) {
		ssl_reason(r, sizeof(r));
		snprintf(why, whylen, "tls: peer context from %s, %s, %s: %s", cfg->cert_file,
			 cfg->key_file, cfg->ca_file, r);
		SSL_CTX_free(ctx);
		return VD_EINVAL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* a peer that closes after its HTTP reply without close_notify: the
	 * caller checks the reply's Content-Length instead */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	*out = ctx;
	return 0;
}

void tls_ctx_free(struct ssl_ctx_st *ctx)
{
	SSL_CTX_free(ctx);
}

void tls_conn_start(struct vd_conn *c)
{
	struct io_conn *t = xmalloc(sizeof(*t));
	if (io_tls_server_init(t, io_tls_lib_linked(), c->srv->tls, c->fd) != 0)
		abort();   /* SSL_new: out of memory */
	c->ssl = t;
}

void tls_conn_free(struct vd_conn *c, bool notify)
{
	/* A graceful close (DISCONNECT, HTTP Connection: close, shutdown)
	 * sends close_notify so the client sees a clean end of stream; one
	 * non-blocking attempt, the socket is closed right after (conn.c
	 * keeps the fd). */
	if (notify)
		io_shutdown(c->ssl);
	io_detach(c->ssl);
	free(c->ssl);
	c->ssl = NULL;
}

int tls_handshake(struct vd_conn *c, const char **why)
{
	struct io_conn *t = c->ssl;
	struct vd_server *s = c->srv;
	int r = io_handshake(t);
	if (r == 0) {
		if (log_get_level() >= VD_LOG_DEBUG) {
			char subj[256] = "?";
			if (io_peer_cert(t, subj, sizeof(subj)) != 0)
				snprintf(subj, sizeof(subj), "?");
			log_debug("connection %s: %s handshake done, client %s", c->peer,
				  io_version(t), subj);
		}
		return 1;
	}
	if (r == VD_AGAIN)
		return 0;
	if (r == VD_ECLOSED) {   /* before its first byte */
		*why = "closed during handshake";
		return -1;
	}
	s->n.tls_failures++;
	if (r == VD_EPROTO) {
		log_limited(&s->ll_tls, VD_LOG_WARN,
			    "plaintext connection from %s on the TLS port refused", c->peer);
		*why = "plaintext on TLS port";
		return -1;
	}
	/* Say why a client certificate was refused (expired, unknown CA...). */
	if (t->verify_err)
		log_limited(&s->ll_tls, VD_LOG_WARN,
			    "TLS handshake with %s failed: %s (client certificate: %s)", c->peer,
			    io_last_error(t), t->verify_err);
	else
		log_limited(&s->ll_tls, VD_LOG_WARN, "TLS handshake with %s failed: %s", c->peer,
			    io_last_error(t));
	*why = "handshake failed";
	return -1;
}

bool tls_want_write(const struct vd_conn *c)
{
	const struct io_conn *t = c->ssl;
	return t && t->want == IO_WANT_WRITE;
}

/* The layer's result for conn.c: bytes, 0 (read: the end of the stream;
 * write: the peer is gone), VD_AGAIN (tls_want_write says whether TLS must
 * write before it goes on), or VD_EIO (logged). */
static long io_result(struct vd_conn *c, long r)
{
	if (r > 0)
		return r;
	const struct io_conn *t = c->ssl;
	if (r == VD_AGAIN)
		return VD_AGAIN;
	if (r == 0 || r == VD_ECLOSED)
		return 0;
	log_info("connection %s: %s", c->peer, io_last_error(t));
	return VD_EIO;
}

bool tls_pending(const struct vd_conn *c)
{
	const struct io_conn *t = c->ssl;
	return t && t->ssl && SSL_has_pending(t->ssl);
}

long tls_read(struct vd_conn *c, char *buf, size_t len)
{
	return io_result(c, io_read(c->ssl, buf, len));
}

long tls_write(struct vd_conn *c, const char *buf, size_t len)
{
	return io_result(c, io_write(c->ssl, buf, len));
}
