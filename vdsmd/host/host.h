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
/* What the Host verbs report of the other backends, which host/ does not
 * include (DESIGN.md): the daemon plugs these in.  Every function is called
 * on the loop thread and must not block; any of them may be NULL, and then
 * its keys are written empty (README).
 *
 * write_net_caps (vdsmd/net, which reads links over netlink) writes, into the
 * open capabilities object, the keys "networks", "nics", "bridges", "vlans",
 * "bondings" (objects, VDSM's shapes: engine-flows.json "connect" step 4),
 * "nameservers" (array), "supportsIPv6" and "netConfigDirty"; it runs for
 * every Host.getCapabilities.  net_config_dirty gives netConfigDirty for
 * Host.getStats (NULL: "False").
 * vm_counts (vdsmd/virt) gives Host.getStats' vmCount, vmActive,
 * vmMigrating, incomingVmMigrations and outgoingVmMigrations.
 * write_domain_stats (vdsmd/storage) writes the value of getStats'
 * "storageDomains" (an object).
 * write_jobs (vdsmd/storage) writes Host.getJobs' result (an object), with
 * the verb's job_type filter (NULL: all) and job_ids array (NULL: all).
 * confirm_connectivity (vdsmd/net) is what Host.confirmConnectivity means:
 * it wakes a setupNetworks waiting for the engine (NULL: nothing to do). */
struct host_vm_counts {
	unsigned count, active, migrating, incoming, outgoing;
};
struct host_peers {
	void *ctx;
	void (*write_net_caps)(void *ctx, struct vd_writer *w);
	bool (*net_config_dirty)(void *ctx);  /* Host.getStats' netConfigDirty */
	void (*vm_counts)(void *ctx, struct host_vm_counts *out);
	void (*write_domain_stats)(void *ctx, struct vd_writer *w);
	void (*write_jobs)(void *ctx, struct vd_writer *w, const char *job_type,
			   const struct vd_value *job_ids);
	void (*confirm_connectivity)(void *ctx);  /* Host.confirmConnectivity */
};

/* Plug the peers in (the daemon, after host_init(); p must stay valid until
 * host_fini()).  NULL removes them. */
void host_set_peers(struct vdsmd *d, const struct host_peers *p);

/* Handlers for Host.ping2, Host.confirmConnectivity, Host.getStats and
 * Host.getCapabilities; bind with app = the struct vdsmd.  They never block. */
extern const struct rpc_binding host_bindings[];

#endif
