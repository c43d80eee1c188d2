/* vdsmd/image/image.h - the image backend: the ticket table behind
 * Host.add_image_ticket, get_image_ticket, extend_image_ticket and
 * remove_image_ticket (ovirt-imageio's control API as VDSM forwards it), and
 * the image server (server.h, handler.h) that serves transfers against
 * those tickets on image_port and image_socket, as ovirt-imageio does on a
 * VDSM host.
 *
 * The daemon calls image_init() after the other backends and image_fini()
 * after the worker pool stopped; binds image_bindings (app = the struct
 * vdsmd).  Without d->image (init not run) every verb answers VDSM's 483
 * (ImageDaemonUnsupported), as VDSM does without ovirt-imageio. */
#ifndef VD_VDSMD_IMAGE_H
#define VD_VDSMD_IMAGE_H

#include "../vdsmd.h"
#include "../../rpc/rpc.h"

/* Tickets the table holds (imageio has no limit; the engine keeps one per
 * running transfer). */
#define IMAGE_TICKETS_MAX 1024

struct ticket_table;
struct image_server;
struct image_handler;
struct ssl_ctx_st;
struct vd_buf;

struct image_state {
	struct ticket_table *tickets;   /* thread-safe (ticket.h) */
	struct image_handler *handler;  /* what the server's threads read */
	struct image_server *server;    /* NULL: image_port 0 */
	char *nbd_dir;                  /* <run_dir>/nbd: where nbd: urls may point */
};

/* What the image backend needs of the rest of the daemon (daemon.c). */
struct image_deps {
	/* the image port's TLS context, asking no client certificate (NULL:
	 * plain HTTP); the daemon owns it */
	struct ssl_ctx_st *tls;
	/* may a ticket's file: url resolving to real be served?  (storage: a
	 * volume file of a known domain); NULL: only paths beneath
	 * storage_root */
	bool (*path_allowed)(void *ctx, const char *real);
	void *ctx;
};

/* Sets d->image and, unless d->cfg.image_port is 0, starts the image
 * server on d->cfg.listen:image_port and on image_socket when set.  deps
 * may be NULL (no TLS, storage_root only).  0, or a vd_err with one
 * sentence in why (the port in use, ...). */
int image_init(struct vdsmd *d, const struct image_deps *deps, char *why, size_t whylen);
/* The image server's counters in Prometheus text form (nothing when the
 * backend is not running). */
void image_metrics_write(const struct vdsmd *d, struct vd_buf *out);
/* Cancels and drops every ticket; d->image becomes NULL. */
void image_fini(struct vdsmd *d);

/* Handlers (app = the struct vdsmd); the verbs are declared in api/Host.yaml
 * (backend: image). */
extern const struct rpc_binding image_bindings[];

#endif
