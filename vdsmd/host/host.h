/* vdsmd/host/host.h - host statistics and capabilities (Host.getStats,
 * Host.getCapabilities, Host.ping2, Host.confirmConnectivity).
 * A sampler thread publishes immutable snapshots; verbs never block. */
#ifndef VD_VDSMD_HOST_H
#define VD_VDSMD_HOST_H

#include "../vdsmd.h"
#include "../../rpc/rpc.h"

/* Start the host sampler (first sample taken synchronously).  0 or vd_err. */
int host_init(struct vdsmd *d);
void host_fini(struct vdsmd *d);
extern const struct rpc_binding host_bindings[];

#endif
