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
/* Host.getJobs' result: {jobID: {id, status, description, job_type,
 * progress, error?}} for the storage jobs (SDM.copy_data) matching job_type
 * ("storage", or NULL/"" for any) and job_ids (NULL or empty: all); an
 * empty object without storage.  Memory only, any thread. */
void storage_write_jobs(struct vdsmd *d, struct vd_writer *w, const char *job_type,
			const struct vd_value *job_ids);
/* The same jobs as members of an object the caller writes (Host.getJobs
 * adds the virt backend's). */
void storage_write_job_members(struct vdsmd *d, struct vd_writer *w, const char *job_type,
			       const struct vd_value *job_ids);

/* Image.prepare for another backend (the virt helper gets these through the
 * interface the daemon hands it; backends do not include each other).
 *
 * storage_prepare_image: the volume chain of sdUUID/imgUUID ending at
 * volUUID as absolute paths, leaf first (*path = chain[0], the disk QEMU
 * opens; the rest are its backing files down to the base).  spUUID may be
 * NULL or blank; otherwise the domain must be attached to that pool.  Every
 * volume must be LEGAL and not being created/deleted; every path is checked
 * through the domain's directory descriptor (a regular file, no symlink
 * below the domain).  Returns 0, or -1 with *err (RPC_E_NO_DOMAIN,
 * RPC_E_NO_IMAGE, RPC_E_NO_VOLUME, RPC_E_NO_POOL, RPC_E_GENERAL; map with
 * rpc_fail) and a message.  Any thread; may block on storage I/O (call it
 * from a worker, not the loop thread).  Free with storage_image_free. */
struct storage_image {
	char *path;      /* == chain[0] */
	char **chain;
	size_t nchain;
};
int storage_prepare_image(struct vdsmd *d, const char *sd_uuid, const char *sp_uuid,
			  const char *img_uuid, const char *vol_uuid, struct storage_image *out,
			  enum rpc_err *err, char *msg, size_t msglen);
/* Image.teardown: nothing to undo on file domains (no activation); checks
 * the image exists.  Same errors as storage_prepare_image. */
int storage_teardown_image(struct vdsmd *d, const char *sd_uuid, const char *sp_uuid,
			   const char *img_uuid, const char *vol_uuid, enum rpc_err *err,
			   char *msg, size_t msglen);
void storage_image_free(struct storage_image *im);
/* storage_prepare_image; allow_illegal lets an ILLEGAL leaf through (as
 * Image.prepare's allowIllegal: VM.seal's template disks). */
int storage_prepare_image2(struct vdsmd *d, const char *sd_uuid, const char *sp_uuid,
			   const char *img_uuid, const char *vol_uuid, bool allow_illegal,
			   struct storage_image *out, enum rpc_err *err, char *msg, size_t msglen);

/* For virt's VM.diskSizeExtend (st_virtif.c; a worker thread, may block).
 * storage_volume_size: the volume's format and sizes in bytes, the data
 * file's re-read first.  storage_set_volume_capacity: record the virtual
 * size a running VM's disk now has (its metadata, then memory).  Both 0,
 * or -1 with *err (RPC_E_NO_DOMAIN, RPC_E_NO_IMAGE, RPC_E_NO_VOLUME,
 * RPC_E_GENERAL) and a message. */
struct storage_volsize {
	bool cow;                 /* qcow2 (else raw) */
	int64_t capacity;         /* virtual size (metadata) */
	int64_t apparent, truesize;
};
int storage_volume_size(struct vdsmd *d, const char *sd, const char *img, const char *vol,
			struct storage_volsize *out, enum rpc_err *err, char *msg, size_t msglen);
int storage_set_volume_capacity(struct vdsmd *d, const char *sd, const char *img,
				const char *vol, int64_t capacity, enum rpc_err *err, char *msg,
				size_t msglen);
/* A live storage migration pivoted onto this volume (the leaf written
 * by the VM's block copy; cloneStructure made it LEGAL, as VDSM's): LEGAL,
 * so the VM's next start prepares it.  0, or -1 with *err and a message. */
int storage_set_volume_legal(struct vdsmd *d, const char *sd, const char *img, const char *vol,
			     enum rpc_err *err, char *msg, size_t msglen);

/* For the image server's file: urls (any thread; reads the index, then
 * resolves paths without the lock): is real, a resolved absolute path, a
 * file of an image directory (<domain dir>/images/<image>/<file>) of a
 * domain this host knows? */
bool storage_path_is_volume(struct vdsmd *d, const char *real);

#endif
