/* vdsmd/daemon.c - wires the daemon together (see daemon.h for the order)
 * and tracks readiness of the subsystems. */
#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "../rpc/event.h"
#include "../rpc/rpc.h"
#include "broker.h"
#include "host/host.h"
#include "image/image.h"
#include "net/net.h"
#include "pool.h"
#include "server.h"
#include "storage/storage.h"
#include "virt/virt.h"

#define READY_HOST 1u
#define READY_VIRT 2u
#define EVENT_QUEUE_MAX 10000

void daemon_subsystem_ready(struct vdsmd *d, const char *which)
{
	unsigned bit = strcmp(which, "host") == 0 ? READY_HOST
		       : strcmp(which, "virt") == 0 ? READY_VIRT : 0;
	if (!bit)
		return;
	unsigned old = __atomic_fetch_or(&d->ready_mask, bit, __ATOMIC_ACQ_REL);
	if ((old | bit) == (READY_HOST | READY_VIRT) && old != (READY_HOST | READY_VIRT)) {
		if (d->rpc)
			rpc_engine_set_ready(d->rpc, true);
		if (d->bus)
			event_bus_set_enabled(d->bus, true);
		log_info("ready: host and VM samples taken (%llu ms after start)",
			 (unsigned long long)(vd_now_ms() - d->start_ms));
	}
}

static int select_codec(struct vdsmd *d, char *why, size_t whylen)
{
	d->codec = codec_find(d->cfg.codec);
	if (d->codec)
		return 0;
	if (codec_known(d->cfg.codec))
		snprintf(why, whylen, "codec \"%s\" is not built into this vdsmd "
			 "(rebuild with its library installed, e.g. libmsgpack-dev)", d->cfg.codec);
	else {
		char names[128];
		codec_names(names, sizeof(names));
		snprintf(why, whylen, "unknown codec \"%s\" (expected %s)", d->cfg.codec, names);
	}
	return VD_EUNSUPP;
}

/* host/'s view of the other backends (host_peers); ctx is the struct vdsmd,
 * and each backend answers empty while it is not running. */
static void peer_vm_counts(void *ctx, struct host_vm_counts *out)
{
	struct virt_counts k;
	virt_vm_counts(ctx, &k);
	*out = (struct host_vm_counts){ .count = k.count, .active = k.active,
		.migrating = k.migrating, .incoming = k.incoming, .outgoing = k.outgoing };
}

static void peer_domain_stats(void *ctx, struct vd_writer *w)
{
	storage_write_domain_stats(ctx, w);
}

static void peer_confirm(void *ctx)
{
	net_confirm(ctx);
}

static void peer_jobs(void *ctx, struct vd_writer *w, const char *job_type,
		      const struct vd_value *job_ids)
{
	/* one map: storage's jobs (SDM.copy_data, SDM.*_bitmap*) and virt's (VM.snapshot) */
	vw_begin_object(w);
	storage_write_job_members(ctx, w, job_type, job_ids);
	virt_write_job_members(ctx, w, job_type, job_ids);
	vw_end_object(w);
}

/* virt's disk interface (VM.create, on a worker): the leaf path of the
 * volume chain storage prepares. */
static int prepare_leaf(void *ctx, const char *pool, const char *domain, const char *image,
			const char *volume, bool allow_illegal, char *path, size_t pathlen,
			char *why, size_t whylen)
{
	struct storage_image im = { 0 };
	enum rpc_err err;
	if (storage_prepare_image2(ctx, domain, pool, image, volume, allow_illegal, &im, &err, why,
				   whylen) < 0)
		return VD_ENOENT;
	int rc = 0;
	size_t n = strlen(im.path);
	if (n < pathlen) {
		memcpy(path, im.path, n + 1);
	} else {
		snprintf(why, whylen, "volume path longer than %zu bytes", pathlen - 1);
		rc = VD_ETOOBIG;
	}
	storage_image_free(&im);
	return rc;
}

static int virt_prepare_image(void *ctx, const char *pool, const char *domain,
			      const char *image, const char *volume, char *path,
			      size_t pathlen, char *why, size_t whylen)
{
	return prepare_leaf(ctx, pool, domain, image, volume, false, path, pathlen, why, whylen);
}

/* VM.seal's (a virt job thread): an ILLEGAL leaf too. */
static int virt_prepare_image_illegal(void *ctx, const char *pool, const char *domain,
				      const char *image, const char *volume, char *path,
				      size_t pathlen, char *why, size_t whylen)
{
	return prepare_leaf(ctx, pool, domain, image, volume, true, path, pathlen, why, whylen);
}

/* virt's VM.diskSizeExtend interface (a worker): a volume's sizes, and the
 * capacity a running VM's disk was resized to. */
/* image/'s file: urls: volume files of the domains storage knows. */
static bool image_path_allowed(void *ctx, const char *real)
{
	return storage_path_is_volume(ctx, real);
}

static int virt_volume_size(void *ctx, const char *domain, const char *image,
			    const char *volume, struct virt_volsize *out, char *why, size_t whylen)
{
	struct storage_volsize vs;
	enum rpc_err err;
	if (storage_volume_size(ctx, domain, image, volume, &vs, &err, why, whylen) < 0)
		return err == RPC_E_GENERAL ? VD_EIO : VD_ENOENT;
	out->cow = vs.cow;
	out->capacity = vs.capacity;
	out->apparent = vs.apparent;
	return 0;
}

static int virt_set_capacity(void *ctx, const char *domain, const char *image,
			     const char *volume, int64_t capacity, char *why, size_t whylen)
{
	enum rpc_err err;
	if (storage_set_volume_capacity(ctx, domain, image, volume, capacity, &err, why,
					whylen) < 0)
		return err == RPC_E_GENERAL ? VD_EIO : VD_ENOENT;
	return 0;
}

static int virt_set_legal(void *ctx, const char *domain, const char *image,
			  const char *volume, char *why, size_t whylen)
{
	enum rpc_err err;
	if (storage_set_volume_legal(ctx, domain, image, volume, &err, why, whylen) < 0)
		return err == RPC_E_GENERAL ? VD_EIO : VD_ENOENT;
	return 0;
}

/* virt's network interface (VM.create, VM.hotplugNic, on a worker). */
static int virt_network_bridge(void *ctx, const char *network, char *bridge, size_t len)
{
	return net_network_bridge(ctx, network, bridge, len);
}

/* What the main port's connections do in each protocol detected (conn.c
 * calls through it): HTTP (http.c) and STOMP (server.c's glue to the
 * broker).  A new protocol: its detector in detect.c, its entry here. */
static const struct conn_proto conn_protos[PROTO__COUNT] = {
	[PROTO_HTTP] = { CS_HTTP, NULL, http_conn_feed },
	[PROTO_STOMP] = { CS_STOMP, stomp_conn_open, stomp_conn_feed },
};

static int build_engine(struct vdsmd *d, char *why, size_t whylen)
{
	d->rpc = rpc_engine_new(&d->limits);
	for (size_t i = 0; rpc_schema_families[i]; i++)
		if (rpc_engine_declare(d->rpc, rpc_schema_families[i]) < 0) {
			snprintf(why, whylen, "cannot declare verb family %zu", i);
			return VD_EINVAL;
		}
	if (rpc_engine_bind(d->rpc, host_bindings, d) < 0 ||
	    rpc_engine_bind(d->rpc, virt_bindings, d) < 0 ||
	    rpc_engine_bind(d->rpc, storage_bindings, d) < 0 ||
	    rpc_engine_bind(d->rpc, net_bindings, d) < 0 ||
	    rpc_engine_bind(d->rpc, image_bindings, d) < 0) {
		snprintf(why, whylen, "cannot bind verb handlers");
		return VD_EINVAL;
	}
	char r[256] = "";
	if (rpc_engine_seal(d->rpc, r, sizeof(r)) < 0) {
		snprintf(why, whylen, "verb table: %s", r);
		return VD_EINVAL;
	}
	return 0;
}

int daemon_init(struct vdsmd *d, char *why, size_t whylen)
{
	int rc;
	d->start_ms = vd_now_ms();
	d->report_ready = daemon_subsystem_ready;
	/* Not ev_default_loop: the default loop installs a SIGCHLD handler
	 * that reaps every child with waitpid(-1), which steals the exit
	 * status of children the daemon runs itself (storage's qemu-img).
	 * Nothing here needs ev_child; ev_signal works in any loop. */
	if (!d->loop)
		d->loop = ev_loop_new(EVFLAG_AUTO);
	if (!d->loop)
		abort();
	d->limits.max_depth = d->cfg.max_depth;
	d->limits.max_size = d->cfg.max_frame_size;
	d->limits.max_elements = d->cfg.max_elements;
	if ((rc = select_codec(d, why, whylen)))
		return rc;
	if ((rc = daemon_check_plaintext(&d->cfg, why, whylen)))
		return rc;
	if ((rc = server_listen(d, why, whylen)))
		return rc;
	/* Broker mode reads its TLS files (and the machine id) while still
	 * root; it starts connecting at the end. */
	if ((rc = broker_start(d, why, whylen)))
		return rc;
	/* Port bound, log and TLS files open: root is no longer needed. */
	if ((rc = daemon_drop_privileges(d->cfg.user, why, whylen)))
		return rc;
	if ((rc = build_engine(d, why, whylen)))
		return rc;
	d->bus = event_bus_new(d->codec, EVENT_QUEUE_MAX);
	d->pool = pool_new(d->loop, d->cfg.workers, d->cfg.worker_queue);
	rpc_engine_set_submit(d->rpc, pool_submit, d->pool);
	/* The broker and the event wake-up exist before subsystems start, so
	 * an early event is queued, not lost. */
	server_start(d, conn_protos);
	if ((rc = host_init(d))) {
		snprintf(why, whylen, "host: %s", vd_strerror(rc));
		return rc;
	}
	if ((rc = virt_init(d))) {
		snprintf(why, whylen, "virt: %s", vd_strerror(rc));
		return rc;
	}
	if ((rc = storage_init(d))) {
		snprintf(why, whylen, "storage: %s", vd_strerror(rc));
		return rc;
	}
	const struct net_deps nd = { .engine_port = d->srv ? d->srv->bound_port : d->cfg.port };
	if ((rc = net_init(d, &nd))) {
		snprintf(why, whylen, "net: %s", vd_strerror(rc));
		return rc;
	}
	const struct image_deps ideps = { .tls = d->srv ? d->srv->image_tls : NULL,
					  .path_allowed = image_path_allowed, .ctx = d };
	if ((rc = image_init(d, &ideps, why, whylen)))
		return rc;
	const struct virt_deps deps = { .prepare_image = virt_prepare_image, .prepare_ctx = d,
					.prepare_image_illegal = virt_prepare_image_illegal,
					.volume_size = virt_volume_size,
					.set_capacity = virt_set_capacity,
					.set_legal = virt_set_legal,
					.network_bridge = virt_network_bridge, .network_ctx = d,
					.peer_tls = d->srv ? d->srv->peer_tls : NULL };
	virt_set_deps(d, &deps);
	d->host_peers = xcalloc(1, sizeof(*d->host_peers));
	*d->host_peers = (struct host_peers){
		.ctx = d,
		.write_net_caps = net_caps_write,
		.net_config_dirty = net_config_dirty,
		.vm_counts = peer_vm_counts,
		.write_domain_stats = peer_domain_stats,
		.write_jobs = peer_jobs,
		.confirm_connectivity = peer_confirm,
	};
	host_set_peers(d, d->host_peers);
	if (d->broker)
		broker_connect(d->broker);
	return 0;
}

void daemon_fini(struct vdsmd *d)
{
	if (d->srv)
		server_stop(d->srv);
	if (d->broker)
		broker_stop(d->broker);
	/* a setupNetworks waiting for its confirmation rolls back now */
	if (d->net)
		net_stop(d);
	/* Workers finish; their completions answer into closed sessions. */
	if (d->pool) {
		pool_free(d->pool);
		d->pool = NULL;
	}
	broker_free(d->broker);
	/* Only what started (init may have stopped early). */
	if (d->host_peers) {
		host_set_peers(d, NULL);
		free(d->host_peers);
		d->host_peers = NULL;
	}
	/* virt first: init hands it storage's and net's interfaces last
	 * (virt_set_deps, after image_init), and its background threads (live
	 * merge, hibernation, snapshots; the sampler's merge recovery) call
	 * storage through them until virt_fini has joined them.  Then the rest
	 * in the reverse of init. */
	if (d->virt)
		virt_fini(d);
	if (d->image)
		image_fini(d);
	if (d->net)
		net_fini(d);
	if (d->storage)
		storage_fini(d);
	if (d->host)
		host_fini(d);
	server_free(d->srv);
	if (d->bus) {
		event_bus_free(d->bus);
		d->bus = NULL;
	}
	if (d->rpc) {
		rpc_engine_free(d->rpc);
		d->rpc = NULL;
	}
	config_free(&d->cfg);
}

int daemon_main(int argc, char **argv)
{
	struct vdsmd d;
	memset(&d, 0, sizeof(d));
	char why[512] = "";
	if (config_load(&d.cfg, argc, argv, why, sizeof(why)) < 0) {
		fprintf(stderr, "vdsmd: %s\n", why);
		config_free(&d.cfg);
		return 2;
	}
	enum vd_log_level level = VD_LOG_INFO;
	log_level_parse(d.cfg.log_level, &level);
	if (log_open(&d.log, d.cfg.log_file, level) < 0) {
		fprintf(stderr, "vdsmd: cannot open log file %s: %s\n", d.cfg.log_file,
			strerror(errno));
		config_free(&d.cfg);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	int status = 0;
	if (daemon_init(&d, why, sizeof(why)) < 0) {
		log_error("cannot start: %s", why);
		status = 1;
	} else {
		ev_run(d.loop, 0);
		log_info("stopped");
	}
	daemon_fini(&d);
	/* daemon_init made this loop (ev_loop_new): it is ours to destroy */
	if (d.loop)
		ev_loop_destroy(d.loop);
	log_close(&d.log);
	return status;
}
