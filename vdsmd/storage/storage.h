/* vdsmd/storage/storage.h - file-based storage domains, images, volumes and
 * persistent asynchronous tasks under storage_root. */
#ifndef VD_VDSMD_STORAGE_H
#define VD_VDSMD_STORAGE_H

#include "../vdsmd.h"
#include "../../rpc/rpc.h"

int storage_init(struct vdsmd *d);
void storage_fini(struct vdsmd *d);
/* Writes the Host.getStats "storageDomains" object value (the domain
 * monitor's view: {sdUUID: {code, delay, lastCheck, valid, acquired, actual,
 * version}}); an empty object before storage exists.  Any thread. */
void storage_write_domain_stats(struct vdsmd *d, struct vd_writer *w);
extern const struct rpc_binding storage_bindings[];

#endif
