/* vdsmd/image/image.h - the image backend: the ticket table behind
 * Host.add_image_ticket, get_image_ticket, extend_image_ticket and
 * remove_image_ticket (ovirt-imageio's control API as VDSM forwards it), and
 * later the image server that serves transfers against those tickets.
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

struct image_state {
	struct ticket_table *tickets;   /* thread-safe (ticket.h) */
};

/* Sets d->image.  0 or vd_err. */
int image_init(struct vdsmd *d);
/* Cancels and drops every ticket; d->image becomes NULL. */
void image_fini(struct vdsmd *d);

/* Handlers (app = the struct vdsmd); the verbs are declared in api/Host.yaml
 * (backend: image). */
extern const struct rpc_binding image_bindings[];

#endif
