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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What VM.create needs from the other backends, handed over by the daemon
 * (virt never includes storage or net).  Each function runs on a worker
 * thread and must be thread-safe; ctx is the providing backend's.
 *
 * prepare_image: make the volume (pool may be ""), the top of its image's
 *   chain, ready for use and write its path into path[pathlen]: 0, or a
 *   negative vd_err (VD_ENOENT: no such domain, image or volume); why gets a
 *   human reason.
 * network_bridge: the bridge a VM NIC on network joins: 0 with bridge[]
 *   filled, VD_EINVAL when the network exists but is bridgeless, VD_ENOENT
 *   when the provider has no such network.
 * Unset functions: the disk path the XML names is used as it is when it
 * exists (code 13 otherwise).  A network the provider does not know (or any
 * network without a provider) is the bridge of the same name when
 * /sys/class/net/<name>/bridge exists: VDSM hands the engine's bridge name
 * to libvirt unchanged, so a bridge made outside VDSM works there too. */
struct virt_volsize {
	bool cow;               /* qcow2, else raw */
	int64_t capacity;       /* virtual size in the volume's metadata */
	int64_t apparent;       /* size of the data file */
};
struct ssl_ctx_st;
struct virt_deps {
	int (*prepare_image)(void *ctx, const char *pool, const char *domain, const char *image,
			     const char *volume, char *path, size_t pathlen,
			     char *why, size_t whylen);
	void *prepare_ctx;
	/* the same, an ILLEGAL leaf allowed (VM.seal: Image.prepare's
	 * allowIllegal), ctx = prepare_ctx */
	int (*prepare_image_illegal)(void *ctx, const char *pool, const char *domain,
				     const char *image, const char *volume, char *path,
				     size_t pathlen, char *why, size_t whylen);
	int (*network_bridge)(void *ctx, const char *network, char *bridge, size_t len);
	void *network_ctx;
	/* TLS client context (an SSL_CTX: this host's certificate, key and CA)
	 * for the calls to a migration's destination vdsmd; NULL: plain HTTP.
	 * The daemon keeps it until after virt_fini. */
	struct ssl_ctx_st *peer_tls;
	/* VM.diskSizeExtend (blockops.c), ctx = prepare_ctx.  volume_size: the
	 * volume's format and sizes (its file re-read first); set_capacity:
	 * record the virtual size a running VM's disk was resized to.  0, or a
	 * negative vd_err (VD_ENOENT: no such domain, image or volume) with why. */
	int (*volume_size)(void *ctx, const char *domain, const char *image, const char *volume,
			   struct virt_volsize *out, char *why, size_t whylen);
	int (*set_capacity)(void *ctx, const char *domain, const char *image, const char *volume,
			    int64_t capacity, char *why, size_t whylen);
	/* VM.diskReplicateFinish's pivot (replicate.c), ctx = prepare_ctx: the
	 * destination leaf the block copy wrote becomes LEGAL.  0 or a negative
	 * vd_err with why. */
	int (*set_legal)(void *ctx, const char *domain, const char *image, const char *volume,
			 char *why, size_t whylen);
};

/* Install the interfaces (after virt_init, before requests are served). */
void virt_set_deps(struct vdsmd *d, const struct virt_deps *deps);

/* Start the backend; sets d->virt.  0, or VD_EIO when a thread cannot start. */
int virt_init(struct vdsmd *d);
/* Stop the threads, close the connection, free everything; d->virt = NULL. */
void virt_fini(struct vdsmd *d);
/* Host.getStats' VM counts, from the latest snapshot (all 0 before the first
 * one); any thread.  As VDSM counts them: active is the VMs that are Up,
 * incoming those in Migration Destination, outgoing those in Migration
 * Source, migrating both. */
struct virt_counts {
	unsigned count, active, migrating, incoming, outgoing;
};
void virt_vm_counts(struct vdsmd *d, struct virt_counts *out);
/* Host.getJobs: the virt jobs (VM.snapshot) as members "<jobId>": {id,
 * status, description, job_type: "virt", error?} of the object the caller
 * writes; none unless job_type is NULL, "" or "virt".  Any thread. */
void virt_write_job_members(struct vdsmd *d, struct vd_writer *w, const char *job_type,
			    const struct vd_value *job_ids);
extern const struct rpc_binding virt_bindings[];

#endif
