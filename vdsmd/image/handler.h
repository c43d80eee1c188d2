/* vdsmd/image/handler.h - one image-server connection: ovirt-imageio's HTTP
 * API over the ticket table and the backends (issue 28).
 *
 * image_serve() is the serve callback of server.h: it reads requests with
 * img_http_parse(), authorizes each against the ticket table
 * (ticket_authorize: 403 / 416 with imageio's messages), and answers
 *   OPTIONS /images/<id>|*         features, allowed methods, max readers/writers
 *   GET     /images/<id>           the image or a Range of it (200 / 206)
 *   PUT     /images/<id>           Content-Length bytes at Content-Range's first
 *                                  byte (0 without), ?flush=y (default) | n
 *   PATCH   /images/<id>           {"op": "zero", "offset", "size", "flush"}
 *                                  | {"op": "flush"}
 *   GET     /images/<id>/extents   ?context=zero (default) | dirty
 * with keep-alive between requests.  Bodies stream through one bounded
 * buffer (IMAGE_CHUNK) a GET or PUT takes when its body starts and gives
 * back when it ends, charged to the daemon's memory_budget meanwhile
 * (mem below; 503 with a JSON body when it does not fit); nothing holds a
 * whole body.
 *
 * Every operation runs between ticket_op_begin() and ticket_op_end(), so
 * Host.get_image_ticket sees it active and its bytes transferred, and
 * Host.remove_image_ticket waits for it; a ticket canceled meanwhile ends the
 * transfer at its next chunk (the connection is closed).  A connection that
 * holds a ticket is counted in its connections while it stays open, and is
 * closed when it idles past the ticket's inactivity_timeout or the ticket
 * is removed.
 *
 * Thread-safety: image_serve() runs on many connection threads at once; the
 * handler state is read-only after setup and the counters are atomic. */
#ifndef VD_IMAGE_HANDLER_H
#define VD_IMAGE_HANDLER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct io_conn;
struct ticket_table;
struct vd_mem_share;

/* Bytes one connection buffers for a body (1 MiB). */
#define IMAGE_CHUNK (1u << 20)

/* What /metrics and the log show of transfers (relaxed atomics). */
struct image_counters {
	uint64_t requests;          /* requests answered */
	uint64_t errors;            /* of them, answered 4xx / 5xx */
	uint64_t bytes_read;        /* image bytes sent to clients (downloads) */
	uint64_t bytes_written;     /* image bytes received from clients (uploads) */
	uint64_t transfers_active;  /* GET / PUT bodies streaming now */
	uint64_t connections;       /* connections served since start */
	uint64_t buffered;          /* bytes of transfer buffers held now */
	uint64_t budget_refused;    /* transfers refused 503: memory_budget full */
};

struct image_handler {
	struct ticket_table *tickets;
	const char *root;           /* file: urls must resolve beneath it, */
	bool (*path_allowed)(void *ctx, const char *real);  /* or be allowed here */
	void *path_ctx;
	const char *nbd_dir;        /* nbd:unix: sockets must be beneath it */
	const char *unix_socket;    /* what OPTIONS reports (NULL: none) */
	unsigned timeout_ms;        /* waiting for a request or its next bytes */
	/* the daemon's memory_budget (vdsmd.h): each GET / PUT body takes its
	 * IMAGE_CHUNK buffer only when budget - loop - image leaves room for
	 * it below 7/8 of the budget (the main port's 1100 regime), else it
	 * is answered 503; NULL: no limit */
	struct vd_mem_share *mem;
	uint64_t budget_log_ms;     /* when the last 503 was logged (atomic) */
	struct image_counters n;
};

/* The serve callback (server.h); arg is a struct image_handler. */
void image_serve(void *arg, struct io_conn *c, const char *peer, volatile sig_atomic_t *stop);

#endif
