/* io/io.h - the connection layer: one struct io_conn for every socket
 * vdsmd and vdsm-client talk over (the acceptor's connections, broker
 * mode, the migration client, vdsm-client), plain or TLS behind one small
 * ops struct.  redis's connection.h is the model: the users call the
 * inline io_* wrappers and never the implementation (nor OpenSSL's read,
 * write or handshake functions) directly.
 *
 * Dependencies: common/ only.  io/ sits beside stomp/ and codecs/: the
 * daemon (vdsmd/) and the client (client/) link it through libvdcore; rpc/,
 * stomp/ and codecs/ never include it (they know no sockets).
 *
 * Results (every implementation):
 *   read      > 0 bytes read; 0 the peer ended the stream (EOF, TLS
 *             close_notify, a TLS peer that just closed); VD_AGAIN: wait
 *             for c->want (IO_WANT_READ or IO_WANT_WRITE: a TLS read can
 *             need to write) and call again; VD_ECLOSED the peer reset the
 *             connection; another negative vd_err: failed, io_last_error()
 *             says why.
 *   write     > 0 bytes written (may be fewer than asked); VD_AGAIN as for
 *             read (TLS: call again with the same bytes); VD_ECLOSED the
 *             peer is gone; another negative vd_err: failed.  Never 0.
 *   handshake 0 done (plain: always); VD_AGAIN as for read; negative:
 *             failed (io_last_error(), io_verify_error()).
 *   flush     0 when every byte write() accepted has left this process
 *             (both implementations write straight to the socket: 0).
 *   shutdown  tell the peer no more data comes: plain shuts the socket's
 *             write side, TLS sends close_notify (one non-blocking try).
 *   peer_cert the subject of the peer's certificate into out (0), or
 *             VD_ENOENT (plain, or no certificate).
 *
 * Non-blocking users (libev) wait for c->want after VD_AGAIN.  Blocking
 * users call the *_wait helpers below with a deadline (vd_now_ms() based,
 * 0 = none); they poll() for c->want themselves.
 *
 * Ownership: io_conn owns its fd and its TLS state from io_plain_init() /
 * io_tls_*_init() until io_close().  EINTR is retried inside. */
#ifndef VD_IO_IO_H
#define VD_IO_IO_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "../common/vd.h"

enum io_want { IO_WANT_NONE = 0, IO_WANT_READ, IO_WANT_WRITE };

struct io_conn;
struct io_tls_lib;
struct ssl_ctx_st;

struct io_ops {
	const char *name;   /* "plain", "tls" */
	long (*read)(struct io_conn *c, void *buf, size_t len);
	long (*write)(struct io_conn *c, const void *buf, size_t len);
	int (*flush)(struct io_conn *c);
	int (*shutdown)(struct io_conn *c);
	int (*handshake)(struct io_conn *c);
	int (*peer_cert)(struct io_conn *c, char *out, size_t n);
	/* release the implementation's state (not the fd) */
	void (*release)(struct io_conn *c);
};

struct io_conn {
	const struct io_ops *ops;
	int fd;
	enum io_want want;         /* after VD_AGAIN: what to wait for */
	int last_errno;            /* errno of the last failure (0: none) */
	char err[256];             /* the last failure, one sentence */
	char reason[128];          /* TLS: OpenSSL's short reason of it ("" when
	                              OpenSSL queued none) */
	const char *verify_err;    /* TLS: why the peer's certificate was
	                              refused (static text), NULL if it was not */
	bool closed_in_handshake;  /* TLS: the peer closed during the handshake */
	bool server;               /* TLS: the accepting side */
	void *ssl;                 /* TLS: SSL * */
	const struct io_tls_lib *lib;
};

#define IO_CONN_INIT { .fd = -1 }

/* ---- the ops, through one indirect call each --------------------------- */

static inline long io_read(struct io_conn *c, void *buf, size_t len)
{
	return c->ops->read(c, buf, len);
}

static inline long io_write(struct io_conn *c, const void *buf, size_t len)
{
	return c->ops->write(c, buf, len);
}

static inline int io_flush(struct io_conn *c)
{
	return c->ops->flush(c);
}

static inline int io_shutdown(struct io_conn *c)
{
	return c->ops->shutdown(c);
}

static inline int io_handshake(struct io_conn *c)
{
	return c->ops->handshake(c);
}

static inline int io_peer_cert(struct io_conn *c, char *out, size_t n)
{
	return c->ops->peer_cert(c, out, n);
}

static inline const char *io_last_error(const struct io_conn *c)
{
	return c->err[0] ? c->err : "unknown error";
}

static inline bool io_is_tls(const struct io_conn *c)
{
	return c->ssl != NULL;
}

/* ---- set up and tear down ---------------------------------------------- */

/* A plain connection over fd (a connected stream socket). */
void io_plain_init(struct io_conn *c, int fd);
/* Release the implementation's state and close the fd (c->fd = -1).  Safe
 * on a connection that was never set up (IO_CONN_INIT) or already closed. */
void io_close(struct io_conn *c);
/* Release the implementation's state and hand the fd back to the caller
 * (who closes it): returns it, c->fd = -1. */
int io_detach(struct io_conn *c);

/* TLS with a context the caller built (certificates, verification mode).
 * Client side: sni is sent as the server name (NULL: none); verify_name,
 * when set, must be what the server's certificate names (a DNS name, or an
 * IP address in its subjectAltName).  Server side: the handshake refuses a
 * first byte that is not a TLS handshake record (VD_EPROTO, "plaintext on
 * the TLS port") and returns VD_ECLOSED when the peer closes before its
 * first byte.  0, or VD_EIO (io_last_error(); c->fd still holds fd, io_close() closes it). */
int io_tls_client_init(struct io_conn *c, const struct io_tls_lib *lib, struct ssl_ctx_st *ctx,
		       int fd, const char *sni, const char *verify_name);
int io_tls_server_init(struct io_conn *c, const struct io_tls_lib *lib, struct ssl_ctx_st *ctx,
		       int fd);
/* The negotiated protocol ("TLSv1.3"), "plain" without TLS. */
const char *io_version(const struct io_conn *c);

/* ---- blocking use, against a deadline --------------------------------- */

/* Wait for c->want.  0 ready; VD_ETIMEDOUT past deadline_ms (0: none);
 * VD_AGAIN when *stop became non-zero (a signal asked to stop; stop may be
 * NULL); VD_EIO when poll() failed. */
int io_wait(struct io_conn *c, uint64_t deadline_ms, volatile sig_atomic_t *stop);
/* One read of at most len bytes, waiting as needed: > 0, 0 at the end of
 * the stream, or a negative vd_err (io_wait's, or read's). */
long io_read_wait(struct io_conn *c, void *buf, size_t len, uint64_t deadline_ms,
		  volatile sig_atomic_t *stop);
/* Write all len bytes: 0, or a negative vd_err. */
int io_write_all(struct io_conn *c, const void *buf, size_t len, uint64_t deadline_ms,
		 volatile sig_atomic_t *stop);
/* Run the handshake to its end: 0, or a negative vd_err. */
int io_handshake_wait(struct io_conn *c, uint64_t deadline_ms, volatile sig_atomic_t *stop);

/* A non-blocking TCP socket (TCP_NODELAY, close-on-exec) connected to sa
 * by the deadline: the fd, or VD_ETIMEDOUT / VD_EIO with errno saying why
 * (ETIMEDOUT for the deadline). */
int io_connect_addr(const struct sockaddr *sa, socklen_t salen, uint64_t deadline_ms);
/* Resolve host and port (getaddrinfo with ai_flags, e.g. AI_ADDRCONFIG)
 * and connect to the first address that answers: the fd, VD_ENOENT (host
 * unknown: why is "host: reason"), VD_ETIMEDOUT, or VD_EIO (errno of the
 * last address tried; why says so). */
int io_dial(const char *host, const char *port, int ai_flags, uint64_t deadline_ms, char *why,
	    size_t whylen);

/* ---- OpenSSL, resolved once (io/tls_lib.h has the table) --------------- */

/* The OpenSSL this binary is linked with (vdsmd). */
const struct io_tls_lib *io_tls_lib_linked(void);
/* Fill lib from libssl loaded with dlopen() (vdsm-client: --insecure never
 * maps it; the library stays loaded until exit).  0, or VD_EUNSUPP with a
 * reason in why. */
int io_tls_lib_load(struct io_tls_lib *lib, char *why, size_t whylen);

#endif
