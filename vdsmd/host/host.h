/* vdsmd/host/host.h - host statistics and capabilities (Host.getStats,
 * Host.getCapabilities, Host.ping2, Host.confirmConnectivity).
 * A sampler thread publishes immutable snapshots; verbs never block. */
#ifndef VD_VDSMD_HOST_H
#define VD_VDSMD_HOST_H

#include "../vdsmd.h"
#include "../../rpc/rpc.h"

/* Start the host sampler (first sample taken synchronously, ~150 ms, then
 * vdsmd_subsystem_ready(d, "host")); sets d->host.  0 or vd_err.  Uses
 * d->cfg.host_sample_interval and d->start_ms (elapsedTime). */
int host_init(struct vdsmd *d);
/* Stops and joins the sampler, frees d->host. */
void host_fini(struct vdsmd *d);
/* The network sections of Host.getCapabilities come from vdsmd/net (which
 * reads links over netlink); the host backend does not read networks.
 * write_caps writes, into the open capabilities object, the keys
 * "networks", "nics", "bridges", "vlans", "bondings" (objects, VDSM's
 * shapes: engine-flows.json "connect" step 4) and "nameservers" (array).
 * It is called on the loop thread for every Host.getCapabilities (the rest
 * of the capabilities is encoded once), so it must not block.  Without a
 * provider those keys are written empty. */
struct host_net_provider {
	void *ctx;
	void (*write_caps)(void *ctx, struct vd_writer *w);
};

/* Plug the network provider in (the daemon, after host_init(); p must stay
 * valid until host_fini()).  NULL removes it. */
void host_set_net_provider(struct vdsmd *d, const struct host_net_provider *p);

/* Handlers for Host.ping2, Host.confirmConnectivity, Host.getStats and
 * Host.getCapabilities; bind with app = the struct vdsmd.  They never block. */
extern const struct rpc_binding host_bindings[];

#endif
