/* vdsmd/image/server.h - the image server's listeners and connection
 * threads (issue 28).
 *
 * The image data path does not run on the daemon's libev loop: a transfer
 * blocks on disk and socket I/O for as long as the client streams, so each
 * connection gets a thread of its own, and the main port's clients never
 * wait behind an upload.  This file knows sockets and threads only; what a
 * connection speaks (HTTP, imageio's API) is the serve callback's business.
 *
 * One accept thread poll()s the listeners (TCP, optionally a unix socket)
 * and a wake pipe.  Each accepted connection takes one of max_conns slots
 * and a thread that runs the TLS handshake (TCP with a context; the unix
 * socket is always plain, as imageio's), then serve().  A connection over
 * the limit is closed at once (logged).  image_server_stop() closes the
 * listeners, shuts every open connection's socket down (its blocking reads
 * and writes end; serve() sees *stop set) and joins every thread.
 *
 * Thread-safety: start and stop from one thread; serve() runs on the
 * connection threads, concurrently with each other. */
#ifndef VD_IMAGE_SERVER_H
#define VD_IMAGE_SERVER_H

#include <signal.h>
#include <stddef.h>

struct io_conn;
struct io_tls_lib;
struct ssl_ctx_st;
struct image_server;

/* Serve one connection until it ends; c is open (and past its TLS
 * handshake); peer names it for the log ("127.0.0.1:40112", "unix").
 * stop becomes non-zero when the server stops: pass it to the io_*_wait
 * helpers.  The server closes c after serve() returns. */
typedef void (*image_serve_fn)(void *arg, struct io_conn *c, const char *peer,
			       volatile sig_atomic_t *stop);

struct image_server_opts {
	const char *host;            /* address to bind, e.g. "127.0.0.1", "::" */
	unsigned port;               /* 0: an ephemeral port (image_server_port) */
	const char *unix_path;       /* NULL: no unix socket; else created (an
	                                existing socket file is replaced) */
	struct ssl_ctx_st *tls;      /* NULL: plain TCP */
	const struct io_tls_lib *lib; /* with tls */
	unsigned max_conns;          /* open connections at once (>= 1) */
	unsigned handshake_ms;       /* TLS handshake deadline (0: 10000) */
	image_serve_fn serve;
	void *arg;
};

/* Bind, listen and start the accept thread.  0, or a negative vd_err with
 * one sentence in why (the address in use, a bad unix path, ...). */
int image_server_start(const struct image_server_opts *o, struct image_server **out, char *why,
		       size_t whylen);
/* The bound TCP port. */
unsigned image_server_port(const struct image_server *s);
/* Connections open now. */
unsigned image_server_active(struct image_server *s);
/* Stop as described above and free s (NULL is a no-op); the unix socket
 * file is removed. */
void image_server_stop(struct image_server *s);

#endif
