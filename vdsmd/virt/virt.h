/* vdsmd/virt/virt.h - VM inventory, statistics and lifecycle through libvirt.
 * A sampler thread publishes immutable, reference-counted snapshots; libvirt
 * lifecycle events become |virt|VM_status|<vmId> events on the bus.
 *
 * virt_init() starts two threads and returns at once: the sampler (connects
 * to cfg.libvirt_uri, retrying with backoff 1..30 s, samples every
 * cfg.vm_sample_interval seconds or when a lifecycle change asks for it) and
 * the libvirt event loop (virEventRunDefaultImpl; registered once per
 * process, before the first connection).  Blocking libvirt calls run only on
 * those threads and on the worker pool (the RPC_F_BLOCKING lifecycle verbs);
 * the read verbs on the loop thread only read the current snapshot.
 *
 * Readiness: vdsmd_subsystem_ready(d, "virt") is called after the first
 * connection attempt, whether libvirt answered or not, so an agent on a host
 * whose libvirt is down still serves every other verb.  Until a first
 * snapshot exists the VM verbs answer code 99 themselves; later, if libvirt
 * goes away, the read verbs keep serving the last snapshot and lifecycle
 * verbs answer code 100 until the sampler has reconnected.
 *
 * virt_bindings expects the engine's app pointer to be the struct vdsmd.
 * Test builds only (-DVD_TEST_HOOKS, never the installed daemon): the
 * environment variable VDSMD_VIRT_NO_CACHE=1 disables the encoded-response
 * cache of Host.getAllVmStats (benchmarks compare it with the cached path). */
#ifndef VD_VDSMD_VIRT_H
#define VD_VDSMD_VIRT_H

#include "../vdsmd.h"
#include "../../rpc/rpc.h"

/* Start the backend; sets d->virt.  0, or VD_EIO when a thread cannot start. */
int virt_init(struct vdsmd *d);
/* Stop the threads, close the connection, free everything; d->virt = NULL. */
void virt_fini(struct vdsmd *d);
/* VM counts from the latest snapshot (0/0 before the first one); any thread.
 * active counts every VM that is not Down. */
void virt_vm_counts(struct vdsmd *d, unsigned *count, unsigned *active);
extern const struct rpc_binding virt_bindings[];

#endif
