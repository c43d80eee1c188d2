/* vdsmd/image/image.c - the image backend's start and stop: the ticket
 * table, the handler state and the image server (see image.h). */
#include "image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/buf.h"
#include "../../common/log.h"
#include "../../io/io.h"
#include "handler.h"
#include "server.h"
#include "ticket.h"

int image_init(struct vdsmd *d, const struct image_deps *deps, char *why, size_t whylen)
{
	struct ssl_ctx_st *tls = deps ? deps->tls : NULL;
	struct image_state *s = xcalloc(1, sizeof(*s));
	s->tickets = ticket_table_new(IMAGE_TICKETS_MAX, NULL, NULL);
	s->handler = xcalloc(1, sizeof(*s->handler));
	struct image_handler *h = s->handler;
	h->tickets = s->tickets;
	h->root = d->cfg.storage_root;
	/* as st_nbd.c: NBD.start_server's sockets are <run_dir>/nbd/<id>.sock */
	const char *run = d->cfg.run_dir && d->cfg.run_dir[0] ? d->cfg.run_dir : "/run/vdsmd";
	size_t nl = strlen(run) + sizeof("/nbd");
	s->nbd_dir = xmalloc(nl);
	snprintf(s->nbd_dir, nl, "%s/nbd", run);
	h->nbd_dir = s->nbd_dir;
	if (deps) {
		h->path_allowed = deps->path_allowed;
		h->path_ctx = deps->ctx;
	}
	h->timeout_ms = d->cfg.image_timeout * 1000u;
	h->mem = &d->mem;
	const char *sock = d->cfg.image_socket && d->cfg.image_socket[0] ? d->cfg.image_socket
									 : NULL;
	h->unix_socket = sock;
	d->image = s;
	if (d->cfg.image_port == 0)
		return 0;
	struct image_server_opts o = {
		.host = d->cfg.listen, .port = d->cfg.image_port, .unix_path = sock,
		.tls = tls, .lib = tls ? io_tls_lib_linked() : NULL,
		.max_conns = d->cfg.image_max_connections,
		.handshake_ms = d->cfg.handshake_timeout * 1000u,
		.serve = image_serve, .arg = h,
	};
	int rc = image_server_start(&o, &s->server, why, whylen);
	if (rc == VD_EIO && strcmp(d->cfg.listen, "::") == 0) {
		/* as the main port: no IPv6 on this host, take every IPv4 address */
		o.host = "0.0.0.0";
		rc = image_server_start(&o, &s->server, why, whylen);
	}
	if (rc) {
		s->server = NULL;
		return rc;
	}
	log_info("image server listening on %s port %u (%s)%s%s", o.host,
		 image_server_port(s->server), tls ? "tls" : "plain", sock ? " and " : "",
		 sock ? sock : "");
	return 0;
}

void image_fini(struct vdsmd *d)
{
	struct image_state *s = d->image;
	if (!s)
		return;
	/* connections end first: they hold ticket references */
	image_server_stop(s->server);
	ticket_table_free(s->tickets);
	free(s->handler);
	free(s->nbd_dir);
	free(s);
	d->image = NULL;
}

void image_metrics_write(const struct vdsmd *d, struct vd_buf *out)
{
	const struct image_state *s = d->image;
	if (!s)
		return;
	const struct image_counters *n = &s->handler->n;
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} rows[] = {
		{ "vdsmd_image_requests_total", "counter", "image server requests answered",
		  offsetof(struct image_counters, requests) },
		{ "vdsmd_image_errors_total", "counter", "image server requests answered 4xx or 5xx",
		  offsetof(struct image_counters, errors) },
		{ "vdsmd_image_read_bytes_total", "counter", "image bytes sent to clients (downloads)",
		  offsetof(struct image_counters, bytes_read) },
		{ "vdsmd_image_written_bytes_total", "counter",
		  "image bytes received from clients (uploads)",
		  offsetof(struct image_counters, bytes_written) },
		{ "vdsmd_image_transfers_active", "gauge", "image bodies streaming now",
		  offsetof(struct image_counters, transfers_active) },
		{ "vdsmd_image_connections_total", "counter", "image server connections accepted",
		  offsetof(struct image_counters, connections) },
		{ "vdsmd_image_buffered_bytes", "gauge",
		  "bytes image transfers buffer now (charged to memory_budget)",
		  offsetof(struct image_counters, buffered) },
		{ "vdsmd_image_budget_refused_total", "counter",
		  "image transfers answered 503: their buffer did not fit memory_budget",
		  offsetof(struct image_counters, budget_refused) },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const uint64_t *v = (const uint64_t *)((const char *)n + rows[i].off);
		buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", rows[i].name, rows[i].help,
			   rows[i].name, rows[i].type, rows[i].name,
			   (unsigned long long)__atomic_load_n(v, __ATOMIC_RELAXED));
	}
	buf_printf(out, "# HELP vdsmd_image_connections_open image server connections open\n"
			"# TYPE vdsmd_image_connections_open gauge\nvdsmd_image_connections_open %u\n",
		   s->server ? image_server_active(s->server) : 0u);
	buf_printf(out, "# HELP vdsmd_image_tickets image tickets in the table\n"
			"# TYPE vdsmd_image_tickets gauge\nvdsmd_image_tickets %zu\n",
		   ticket_table_count(s->tickets));
}
