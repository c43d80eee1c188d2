/* vdsmd/storage/st_verbs.h - the JSON-RPC handlers of the storage family
 * (bound by name in storage.c), one file per namespace, and what they
 * share (st_verbs_util.c).  c->app is the struct vdsmd. */
#ifndef VD_VDSMD_STORAGE_ST_VERBS_H
#define VD_VDSMD_STORAGE_ST_VERBS_H

#include "st_ops.h"

/* The storage state, or NULL after answering "storage is not available". */
struct storage_state *verb_state(struct rpc_call *c);
int verb_fail(struct rpc_call *c, const struct st_err *e);
/* verb_state() into *sp, then takes its lock and finds the domain named by the
 * "storagedomainID" argument.  Found: returns it with the lock held (the
 * caller unlocks (*sp)->lock).  Otherwise the call is answered (storage not
 * available, or the lookup's error, the lock released) and NULL returned. */
const struct st_domain *verb_lock_domain(struct rpc_call *c, struct storage_state **sp);
/* The whole of a verb that applies op to the string argument arg and answers
 * true (op's error otherwise): StorageDomain.format, Task.clear, ... */
int verb_by_id(struct rpc_call *c, const char *arg,
	       int (*op)(struct storage_state *s, const char *id, struct st_err *e));
/* Writes one volume's VolumeInfo (caller holds s->lock). */
void verb_write_volume_info(struct vd_writer *w, const struct storage_state *s,
			    const struct st_domain *d, const struct st_volume *v);

/* Absent, null or "": "no filter", as VDSM reads these params. */
bool verb_is_null(const struct vd_value *v);
/* A verb that queued a task: its id, or the failure. */
int verb_answer_task(struct rpc_call *c, int rc, const char *tid, const struct st_err *e);
/* postZero / discard / force of Volume.delete, Image.delete, deleteVolumes. */
struct st_delopts verb_del_opts(struct rpc_call *c);

/* st_verbs_domain.c: StorageDomain.* and Host.getStorageDomains */
int vh_host_get_storage_domains(struct rpc_call *c);
int vh_sd_create(struct rpc_call *c);
int vh_sd_get_info(struct rpc_call *c);
int vh_sd_get_stats(struct rpc_call *c);
int vh_sd_get_volumes(struct rpc_call *c);
int vh_sd_get_images(struct rpc_call *c);
int vh_sd_format(struct rpc_call *c);
int vh_sd_activate(struct rpc_call *c);
int vh_sd_deactivate(struct rpc_call *c);
int vh_sd_attach(struct rpc_call *c);
int vh_sd_detach(struct rpc_call *c);

/* st_verbs_pool.c: StoragePool.* (st_verbs_conn.c: the server connections) */
int vh_sp_create(struct rpc_call *c);
int vh_sp_connect(struct rpc_call *c);
int vh_sp_reconstruct_master(struct rpc_call *c);
int vh_sp_disconnect(struct rpc_call *c);
int vh_sp_destroy(struct rpc_call *c);
int vh_sp_refresh(struct rpc_call *c);
int vh_sp_get_info(struct rpc_call *c);
int vh_sp_get_spm_status(struct rpc_call *c);
int vh_sp_spm_start(struct rpc_call *c);
int vh_sp_spm_stop(struct rpc_call *c);

/* st_verbs_conn.c */
int vh_sp_connect_server(struct rpc_call *c);
int vh_sp_disconnect_server(struct rpc_call *c);

/* st_verbs_image.c: Image.* */
int vh_img_prepare(struct rpc_call *c);
int vh_img_teardown(struct rpc_call *c);
int vh_img_get_volumes(struct rpc_call *c);
int vh_img_delete(struct rpc_call *c);
int vh_img_delete_volumes(struct rpc_call *c);
int vh_img_clone_structure(struct rpc_call *c);
int vh_img_sync_data(struct rpc_call *c);
int vh_img_move(struct rpc_call *c);

/* st_verbs_volume.c: Volume.* */
int vh_vol_create(struct rpc_call *c);
int vh_vol_get_info(struct rpc_call *c);
int vh_vol_get_size(struct rpc_call *c);
int vh_vol_delete(struct rpc_call *c);
int vh_vol_set_description(struct rpc_call *c);
int vh_vol_set_legality(struct rpc_call *c);
int vh_vol_refresh(struct rpc_call *c);
int vh_vol_verify_untrusted(struct rpc_call *c);
int vh_vol_qemu_info(struct rpc_call *c);
int vh_vol_measure(struct rpc_call *c);
int vh_vol_extend_size(struct rpc_call *c);

/* st_verbs_task.c: Task.* and the Host task listings */
int vh_task_get_status(struct rpc_call *c);
int vh_task_get_info(struct rpc_call *c);
int vh_task_clear(struct rpc_call *c);
int vh_task_stop(struct rpc_call *c);
int vh_task_revert(struct rpc_call *c);
int vh_host_get_all_tasks_statuses(struct rpc_call *c);
int vh_host_get_all_tasks_info(struct rpc_call *c);

/* st_verbs_jobs.c: SDM.* */
int vh_sdm_copy_data(struct rpc_call *c);
int vh_sdm_add_bitmap(struct rpc_call *c);
int vh_sdm_remove_bitmap(struct rpc_call *c);
int vh_sdm_clear_bitmaps(struct rpc_call *c);
/* st_verbs_nbd.c: NBD.* */
int vh_nbd_start_server(struct rpc_call *c);
int vh_nbd_stop_server(struct rpc_call *c);
/* st_verbs_merge.c: cold merge */
int vh_sp_prepare_merge(struct rpc_call *c);
int vh_sp_finalize_merge(struct rpc_call *c);
int vh_sdm_merge(struct rpc_call *c);
/* st_verbs_jobs.c: SDM.amend_volume, SDM.update_volume */
int vh_sdm_amend_volume(struct rpc_call *c);
int vh_sdm_sparsify_volume(struct rpc_call *c);
int vh_sdm_update_volume(struct rpc_call *c);
/* The storage jobs as members of Host.getJobs' map (storage_write_job_members). */
void st_write_jobs(struct storage_state *s, struct vd_writer *w, const char *type,
		   const struct vd_value *ids);
void verb_write_job(struct vd_writer *w, const struct st_job_info *j);
/* The same members, into an object the caller opened (event params). */
void verb_write_job_fields(struct vd_writer *w, const struct st_job_info *j);

#endif
