/* vdsmd/virt/virt.h - VM inventory, statistics and lifecycle through libvirt.
 * A sampler thread publishes immutable, reference-counted snapshots; libvirt
 * lifecycle events become |virt|VM_status|<vmId> events on the bus. */
#ifndef VD_VDSMD_VIRT_H
#define VD_VDSMD_VIRT_H

#include "../vdsmd.h"
#include "../../rpc/rpc.h"

int virt_init(struct vdsmd *d);
void virt_fini(struct vdsmd *d);
/* VM counts from the latest snapshot (0/0 before the first one); any thread. */
void virt_vm_counts(struct vdsmd *d, unsigned *count, unsigned *active);
extern const struct rpc_binding virt_bindings[];

#endif
