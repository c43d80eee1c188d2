/* io/tls.c - the TLS implementation of the connection layer, over OpenSSL
 * through the table of tls_lib.h.  The only file that calls OpenSSL's
 * read, write and handshake functions.  Non-blocking: every WANT_READ /
 * WANT_WRITE becomes VD_AGAIN with c->want set.  See io.h. */
#include "io.h"
#include "tls_lib.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#define TLS_MAX_IO ((size_t)1 << 30)
#define TLS_HANDSHAKE_RECORD 0x16

/* Keep why the last call failed: OpenSSL's first queued error in full
 * (else errno's text, else "connection closed"), its last error's short
 * reason, and the certificate verification result. */
static void tls_fail(struct io_conn *c, const char *what)
{
	const struct io_tls_lib *l = c->lib;
	int saved = errno;
	unsigned long last = l->ERR_peek_last_error();
	unsigned long first = l->ERR_get_error();
	const char *r = last ? l->ERR_reason_error_string(last) : NULL;
	snprintf(c->reason, sizeof(c->reason), "%s", r ? r : "");
	char full[200];
	if (first)
		l->ERR_error_string_n(first, full, sizeof(full));
	else
		snprintf(full, sizeof(full), "%s", saved ? strerror(saved) : "unknown error");
	snprintf(c->err, sizeof(c->err), "%s%s%s", what ? what : "", what ? ": " : "", full);
	c->last_errno = saved;
	long vr = l->SSL_get_verify_result(c->ssl);
	c->verify_err = vr != X509_V_OK ? l->X509_verify_cert_error_string(vr) : NULL;
	l->ERR_clear_error();
}

/* The result of an SSL_read / SSL_write / SSL_do_handshake that returned r
 * (<= 0): VD_AGAIN with want (after a signal: again_want), 0 (the peer
 * ended the stream), or an error. */
static long tls_result(struct io_conn *c, int r, const char *what, enum io_want again_want)
{
	const struct io_tls_lib *l = c->lib;
	switch (l->SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		c->want = IO_WANT_READ;
		return VD_AGAIN;
	case SSL_ERROR_WANT_WRITE:
		c->want = IO_WANT_WRITE;
		return VD_AGAIN;
	case SSL_ERROR_ZERO_RETURN:
		snprintf(c->err, sizeof(c->err), "%s%sclosed by the peer", what ? what : "",
			 what ? ": " : "");
		return 0;
	case SSL_ERROR_SYSCALL:
		/* nothing queued: the peer closed the socket (or a signal) */
		if (errno == 0 || l->ERR_peek_error() == 0) {
			int e = errno;
			l->ERR_clear_error();
			if (e == EINTR) {
				c->want = again_want;
				return VD_AGAIN;
			}
			c->last_errno = e;
			snprintf(c->err, sizeof(c->err), "%s%s%s", what ? what : "", what ? ": " : "",
				 e ? strerror(e) : "connection closed");
			return 0;
		}
		/* fall through */
	default:
		tls_fail(c, what);
		return VD_EIO;
	}
}

static long tls_read(struct io_conn *c, void *buf, size_t len)
{
	const struct io_tls_lib *l = c->lib;
	l->ERR_clear_error();
	errno = 0;
	int r = l->SSL_read(c->ssl, buf, (int)VD_MIN(len, TLS_MAX_IO));
	return r > 0 ? r : tls_result(c, r, "TLS read", IO_WANT_READ);
}

static long tls_write(struct io_conn *c, const void *buf, size_t len)
{
	const struct io_tls_lib *l = c->lib;
	l->ERR_clear_error();
	errno = 0;
	int r = l->SSL_write(c->ssl, buf, (int)VD_MIN(len, TLS_MAX_IO));
	if (r > 0)
		return r;
	long v = tls_result(c, r, "TLS write", IO_WANT_WRITE);
	return v == 0 ? VD_ECLOSED : v;   /* 0 from SSL_write: the peer is gone */
}

static int tls_flush(struct io_conn *c)
{
	const struct io_tls_lib *l = c->lib;
	void *wbio = l->SSL_get_wbio(c->ssl);
	if (wbio)
		l->BIO_ctrl(wbio, BIO_CTRL_FLUSH, 0, NULL);
	return 0;
}

static int tls_shutdown(struct io_conn *c)
{
	const struct io_tls_lib *l = c->lib;
	l->ERR_clear_error();
	if (l->SSL_shutdown(c->ssl) < 0) {
		tls_fail(c, "TLS shutdown");
		return VD_EIO;
	}
	return 0;
}

/* Server side, before the first handshake step: a TLS connection starts
 * with a handshake record; anything else is plaintext on the TLS port. */
static int check_first_byte(struct io_conn *c)
{
	unsigned char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		c->want = IO_WANT_READ;
		return VD_AGAIN;
	}
	if (n <= 0) {
		c->closed_in_handshake = true;
		c->last_errno = n < 0 ? errno : 0;
		snprintf(c->err, sizeof(c->err), "closed during the handshake");
		return VD_ECLOSED;
	}
	if (b != TLS_HANDSHAKE_RECORD) {
		snprintf(c->err, sizeof(c->err), "plaintext on the TLS port");
		return VD_EPROTO;
	}
	return 0;
}

static int tls_handshake(struct io_conn *c)
{
	const struct io_tls_lib *l = c->lib;
	c->verify_err = NULL;
	c->closed_in_handshake = false;
	c->reason[0] = 0;
	if (c->server && l->SSL_in_before(c->ssl)) {
		int r = check_first_byte(c);
		if (r)
			return r;
	}
	l->ERR_clear_error();
	errno = 0;
	int r = l->SSL_do_handshake(c->ssl);
	if (r == 1) {
		c->want = IO_WANT_NONE;
		return 0;
	}
	long v = tls_result(c, r, NULL, IO_WANT_READ);
	if (v == VD_AGAIN)
		return VD_AGAIN;
	if (v == 0) {
		/* the peer closed mid-handshake: still say why if it refused
		 * our certificate or we refused its */
		c->closed_in_handshake = true;
		long vr = l->SSL_get_verify_result(c->ssl);
		c->verify_err = vr != X509_V_OK ? l->X509_verify_cert_error_string(vr) : NULL;
	}
	return VD_EIO;
}

static int tls_peer_cert(struct io_conn *c, char *out, size_t n)
{
	const struct io_tls_lib *l = c->lib;
	X509 *peer = l->SSL_get1_peer_certificate(c->ssl);
	if (!peer) {
		if (n)
			out[0] = 0;
		return VD_ENOENT;
	}
	l->X509_NAME_oneline(l->X509_get_subject_name(peer), out, (int)VD_MIN(n, (size_t)INT32_MAX));
	l->X509_free(peer);
	return 0;
}

static void tls_release(struct io_conn *c)
{
	if (c->ssl)
		c->lib->SSL_free(c->ssl);
	c->ssl = NULL;
}

static const struct io_ops tls_ops = {
	.name = "tls",
	.read = tls_read,
	.write = tls_write,
	.flush = tls_flush,
	.shutdown = tls_shutdown,
	.handshake = tls_handshake,
	.peer_cert = tls_peer_cert,
	.release = tls_release,
};

static int tls_init(struct io_conn *c, const struct io_tls_lib *lib, struct ssl_ctx_st *ctx,
		    int fd)
{
	*c = (struct io_conn)IO_CONN_INIT;
	c->fd = fd;
	c->lib = lib;
	lib->ERR_clear_error();
	SSL *ssl = lib->SSL_new(ctx);
	if (!ssl || lib->SSL_set_fd(ssl, fd) != 1) {
		if (ssl)
			lib->SSL_free(ssl);
		unsigned long e = lib->ERR_get_error();
		snprintf(c->err, sizeof(c->err), "cannot set up TLS: %s",
			 e ? lib->ERR_reason_error_string(e) : "out of memory");
		c->ops = NULL;
		return VD_EIO;
	}
	c->ssl = ssl;
	c->ops = &tls_ops;
	return 0;
}

static bool is_ip(const char *host)
{
	unsigned char a[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

int io_tls_client_init(struct io_conn *c, const struct io_tls_lib *lib, struct ssl_ctx_st *ctx,
		       int fd, const char *sni, const char *verify_name)
{
	int rc = tls_init(c, lib, ctx, fd);
	if (rc)
		return rc;
	lib->SSL_set_connect_state(c->ssl);
	if (sni)
		lib->SSL_ctrl(c->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
			      (void *)(uintptr_t)sni);  // NOLINT(performance-no-int-to-ptr): drops const for SSL_ctrl's void *parg
	if (verify_name) {
		int ok = is_ip(verify_name)
			? lib->X509_VERIFY_PARAM_set1_ip_asc(lib->SSL_get0_param(c->ssl), verify_name)
			: lib->SSL_set1_host(c->ssl, verify_name);
		if (ok != 1) {
			snprintf(c->err, sizeof(c->err), "cannot check the name %s", verify_name);
			tls_release(c);   /* the fd stays the caller's */
			c->ops = NULL;
			return VD_EIO;
		}
	}
	return 0;
}

int io_tls_server_init(struct io_conn *c, const struct io_tls_lib *lib, struct ssl_ctx_st *ctx,
		       int fd)
{
	int rc = tls_init(c, lib, ctx, fd);
	if (rc)
		return rc;
	c->server = true;
	lib->SSL_set_accept_state(c->ssl);
	return 0;
}

const char *io_version(const struct io_conn *c)
{
	return c->ssl ? c->lib->SSL_get_version(c->ssl) : "plain";
}
