/* vdsmd/image/verbs.c - Host.add_image_ticket, get_image_ticket,
 * extend_image_ticket, remove_image_ticket over the ticket table
 * (ticket.h).
 *
 * VDSM forwards these to ovirt-imageio's control socket (PUT, GET, PATCH
 * {"timeout"}, DELETE /tickets/<uuid>) and answers any status >= 300 with
 * ImageDaemonError (482) carrying "status=, reason=, error=".  Here the table
 * is in the daemon, so the same refusals get the same code and text:
 * an invalid ticket or timeout is status 400, an unknown ticket 404 (remove
 * of one succeeds), a remove whose transfers do not end in time 409.  A full
 * table, which imageio cannot have, is 503. */
#include "image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/arena.h"
#include "../../common/log.h"
#include "ticket.h"

static struct ticket_table *table_of(struct rpc_call *c)
{
	struct vdsmd *d = c->app;
	return d && d->image ? d->image->tickets : NULL;
}

static int unsupported(struct rpc_call *c)
{
	return rpc_fail(c, RPC_E_IMAGE_UNSUPPORTED, "the image backend is not running");
}

static int daemon_error(struct rpc_call *c, int status, const char *reason, const char *error)
{
	return rpc_fail(c, RPC_E_IMAGE_DAEMON, "status=%d, reason=%s, error=%s", status, reason,
			error);
}

static int image_add_ticket(struct rpc_call *c)
{
	struct ticket_table *t = table_of(c);
	if (!t)
		return unsupported(c);
	struct ticket_spec s;
	char why[256];
	if (ticket_parse(rpc_arg(c, "ticket"), &s, why, sizeof(why)) < 0) {
		char e[300];
		snprintf(e, sizeof(e), "Invalid ticket: %s", why);
		return daemon_error(c, 400, "Bad Request", e);
	}
	char xfer[TICKET_STR_MAX + 24];
	snprintf(xfer, sizeof(xfer), "%s", s.transfer_id);
	unsigned ops = s.ops;
	uint64_t size = s.size;
	if (ticket_add(t, &s) < 0) {
		char e[96];
		snprintf(e, sizeof(e), "the ticket table is full (%d tickets)", IMAGE_TICKETS_MAX);
		return daemon_error(c, 503, "Service Unavailable", e);
	}
	/* the ticket id is the credential: logged by its transfer id only, as imageio */
	log_info("image: ADD transfer=%s ops=%s%s size=%llu", xfer,
		 ops & TICKET_OP_READ ? "r" : "", ops & TICKET_OP_WRITE ? "w" : "",
		 (unsigned long long)size);
	return 0;
}

static void write_ops(struct vd_writer *w, const struct ticket_info *in)
{
	vw_keyz(w, "ops");
	vw_begin_array(w);
	for (unsigned i = 0; i < in->nops; i++)
		vw_strz(w, in->oplist[i] == TICKET_OP_WRITE ? "write" : "read");
	vw_end_array(w);
}

static int image_get_ticket(struct rpc_call *c)
{
	struct ticket_table *t = table_of(c);
	if (!t)
		return unsupported(c);
	const char *uuid = rpc_arg_str(c, "uuid", NULL);
	struct ticket_info *in = arena_alloc(c->arena, sizeof(*in));
	if (ticket_get(t, uuid, in) < 0) {
		char e[80];
		snprintf(e, sizeof(e), "No such ticket '%s'", uuid);
		return daemon_error(c, 404, "Not Found", e);
	}
	struct vd_writer *w = c->w;
	vw_begin_object(w);
	vw_kbool(w, "active", in->active);
	vw_kbool(w, "canceled", in->canceled);
	vw_kint(w, "connections", in->connections);
	vw_kint(w, "expires", in->expires);
	vw_kint(w, "idle_time", in->idle_time);
	vw_kint(w, "inactivity_timeout", in->inactivity_timeout);
	write_ops(w, in);
	vw_keyz(w, "size");
	vw_uint(w, in->size);
	vw_kbool(w, "sparse", in->sparse);
	vw_kbool(w, "dirty", in->dirty);
	vw_kint(w, "timeout", in->timeout);
	vw_kstr(w, "url", in->url);
	vw_kstr(w, "uuid", in->uuid);
	vw_kstr(w, "transfer_id", in->transfer_id);
	if (in->filename[0])
		vw_kstr(w, "filename", in->filename);
	if (in->has_transferred) {
		vw_keyz(w, "transferred");
		vw_uint(w, in->transferred);
	}
	vw_end_object(w);
	return 0;
}

/* The transfer id of a ticket for the log ("(deleted)" when unknown). */
static const char *transfer_of(struct rpc_call *c, struct ticket_table *t, const char *uuid)
{
	struct ticket_info *in = arena_alloc(c->arena, sizeof(*in));
	return ticket_get(t, uuid, in) == 0 ? in->transfer_id : "(deleted)";
}

static int image_extend_ticket(struct rpc_call *c)
{
	struct ticket_table *t = table_of(c);
	if (!t)
		return unsupported(c);
	const char *uuid = rpc_arg_str(c, "uuid", NULL);
	int64_t timeout = rpc_arg_int(c, "timeout", -1);
	char e[96];
	if (timeout < 0 || timeout > TICKET_TIMEOUT_MAX) {
		snprintf(e, sizeof(e), "Invalid value for 'timeout': %lld: expecting 0..%lld",
			 (long long)timeout, (long long)TICKET_TIMEOUT_MAX);
		return daemon_error(c, 400, "Bad Request", e);
	}
	if (ticket_extend(t, uuid, timeout) < 0) {
		snprintf(e, sizeof(e), "No such ticket: %s", uuid);
		return daemon_error(c, 404, "Not Found", e);
	}
	log_info("image: EXTEND timeout=%lld transfer=%s", (long long)timeout,
		 transfer_of(c, t, uuid));
	return 0;
}

static int image_remove_ticket(struct rpc_call *c)
{
	struct ticket_table *t = table_of(c);
	if (!t)
		return unsupported(c);
	const char *uuid = rpc_arg_str(c, "uuid", NULL);
	const char *xfer = transfer_of(c, t, uuid);
	log_info("image: REMOVE transfer=%s", xfer);
	if (ticket_remove(t, uuid, TICKET_REMOVE_WAIT_MS) < 0) {
		char e[TICKET_STR_MAX + 64];
		snprintf(e, sizeof(e), "Timeout cancelling transfer %s", xfer);
		return daemon_error(c, 409, "Conflict", e);
	}
	return 0;
}

const struct rpc_binding image_bindings[] = {
	{ "Host.add_image_ticket", image_add_ticket },
	{ "Host.get_image_ticket", image_get_ticket },
	{ "Host.extend_image_ticket", image_extend_ticket },
	{ "Host.remove_image_ticket", image_remove_ticket },
	{ NULL, NULL },
};
