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
/* Handlers for Host.ping2, Host.confirmConnectivity, Host.getStats and
 * Host.getCapabilities; bind with app = the struct vdsmd.  They never block. */
extern const struct rpc_binding host_bindings[];

#endif
