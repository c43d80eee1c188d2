/* vdsmd/storage/storage.c - daemon glue of the storage backend: init/fini,
 * the Host.getStats "storageDomains" writer, |jobs|status| events and the
 * handler table bound into the rpc engine.
 *
 * A storage_root that cannot be opened does not stop the daemon: the error is
 * logged and every storage verb answers code 100 naming the problem. */
#include "storage.h"
#include "st_verbs.h"
#include "../../common/log.h"
#include "../../rpc/event.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define TASK_THREADS 2

static void publish_task(void *ctx, const struct st_task_status *st)
{
	struct vdsmd *d = ctx;
	if (!d->bus || !event_bus_enabled(d->bus))
		return;
	struct rpc_event ev;
	struct vd_writer *w = rpc_event_begin(&ev, d->bus, "|jobs|status|%s", st->id);
	vw_keyz(w, st->id);
	vw_begin_object(w);
	vw_kstr(w, "id", st->id);
	vw_kstr(w, "taskID", st->id);
	vw_kstr(w, "verb", st->verb);
	vw_kstr(w, "status", st_task_state_name(st->state));
	vw_kstr(w, "taskState", st_task_state_name(st->state));
	vw_kstr(w, "taskResult", st_task_result_name(st->result));
	vw_kint(w, "code", st->code);
	vw_kstr(w, "message", st->message);
	vw_kint(w, "progress", st->progress);
	vw_end_object(w);
	rpc_event_publish(d->bus, &ev);
}

/* VDSM's job event: |jobs|status|<id> with the job's info as params. */
static void publish_job(void *ctx, const struct st_job_info *j)
{
	struct vdsmd *d = ctx;
	if (!d->bus || !event_bus_enabled(d->bus))
		return;
	struct rpc_event ev;
	struct vd_writer *w = rpc_event_begin(&ev, d->bus, "|jobs|status|%s", j->id);
	verb_write_job_fields(w, j);
	rpc_event_publish(d->bus, &ev);
}

int storage_init(struct vdsmd *d)
{
	const char *root = d->cfg.storage_root && *d->cfg.storage_root ? d->cfg.storage_root
									 : "/var/lib/vdsmd/storage";
	/* A write past RLIMIT_FSIZE must fail the task with EFBIG, not kill
	 * the daemon. */
	signal(SIGXFSZ, SIG_IGN);
	char why[512] = "";
	struct storage_state *s = st_open(root, why, sizeof(why));
	if (!s) {
		log_error("storage: %s; storage verbs are unavailable", why);
		return 0;
	}
	s->notify = publish_task;
	s->notify_job = publish_job;
	s->notify_ctx = d;
	if (st_start_workers(s, TASK_THREADS) < 0 || st_start_monitor(s, 10000) < 0) {
		st_close(s);
		return VD_EIO;
	}
	s->run_dir = xstrdup(d->cfg.run_dir && *d->cfg.run_dir ? d->cfg.run_dir : "/run/vdsmd");
	d->storage = s;
	log_info("storage: %zu domain(s), %zu task record(s) under %s%s", s->domains.n,
		 s->tasks.n, root, s->scan_removed || s->tasks_aborted ? " (leftovers reconciled)" : "");
	return 0;
}

void storage_fini(struct vdsmd *d)
{
	if (!d->storage)
		return;
	struct storage_state *s = d->storage;
	st_stop_monitor(s);
	st_stop_workers(s);   /* task events may still be published here */
	st_jobs_stop(s);      /* and job events */
	d->storage = NULL;
	st_close(s);
}

void storage_write_domain_stats(struct vdsmd *d, struct vd_writer *w)
{
	vw_begin_object(w);
	struct storage_state *s = d ? d->storage : NULL;
	if (s) {
		uint64_t now = vd_now_ms();
		pthread_mutex_lock(&s->lock);
		for (struct st_map_ent *e = map_first(&s->domains); e; e = map_next(&s->domains, e)) {
			const struct st_domain *dm = map_val(e);
			if (dm->formatting || dm->mon_last_ms == 0)
				continue;
			vw_keyz(w, dm->uuid);
			vw_begin_object(w);
			vw_kint(w, "code", dm->mon_code);
			vw_kstrf(w, "delay", "%.6f", dm->mon_delay);
			vw_kstrf(w, "lastCheck", "%.1f",
				 (double)(now >= dm->mon_last_ms ? now - dm->mon_last_ms : 0) / 1000.0);
			vw_kbool(w, "valid", dm->mon_valid);
			vw_kbool(w, "acquired", true);
			vw_kbool(w, "actual", true);
			vw_kint(w, "version", dm->version);
			vw_end_object(w);
		}
		pthread_mutex_unlock(&s->lock);
	}
	vw_end_object(w);
}

void storage_write_jobs(struct vdsmd *d, struct vd_writer *w, const char *job_type,
			const struct vd_value *job_ids)
{
	vw_begin_object(w);
	storage_write_job_members(d, w, job_type, job_ids);
	vw_end_object(w);
}

void storage_write_job_members(struct vdsmd *d, struct vd_writer *w, const char *job_type,
			       const struct vd_value *job_ids)
{
	if (d && d->storage)
		st_write_jobs(d->storage, w, job_type, job_ids);
}

static int no_storage(enum rpc_err *err, char *msg, size_t msglen)
{
	*err = RPC_E_GENERAL;
	snprintf(msg, msglen, "storage is not available (see the log for storage_root)");
	return -1;
}

int storage_prepare_image(struct vdsmd *d, const char *sd_uuid, const char *sp_uuid,
			  const char *img_uuid, const char *vol_uuid, struct storage_image *out,
			  enum rpc_err *err, char *msg, size_t msglen)
{
	return storage_prepare_image2(d, sd_uuid, sp_uuid, img_uuid, vol_uuid, false, out, err,
				      msg, msglen);
}

int storage_prepare_image2(struct vdsmd *d, const char *sd_uuid, const char *sp_uuid,
			   const char *img_uuid, const char *vol_uuid, bool allow_illegal,
			   struct storage_image *out, enum rpc_err *err, char *msg, size_t msglen)
{
	memset(out, 0, sizeof(*out));
	if (!d || !d->storage)
		return no_storage(err, msg, msglen);
	struct st_err e = { 0 };
	struct st_chain c;
	if (st_image_prepare2(d->storage, sd_uuid, sp_uuid, img_uuid, vol_uuid, allow_illegal, &c,
			      &e) < 0) {
		*err = e.code ? e.code : RPC_E_GENERAL;
		snprintf(msg, msglen, "%s", e.msg);
		return -1;
	}
	out->chain = c.paths;
	out->nchain = c.n;
	out->path = c.n ? c.paths[0] : NULL;
	return 0;
}

int storage_teardown_image(struct vdsmd *d, const char *sd_uuid, const char *sp_uuid,
			   const char *img_uuid, const char *vol_uuid, enum rpc_err *err,
			   char *msg, size_t msglen)
{
	struct storage_image im;
	int rc = storage_prepare_image(d, sd_uuid, sp_uuid, img_uuid, vol_uuid, &im, err, msg,
				       msglen);
	storage_image_free(&im);
	return rc;
}

void storage_image_free(struct storage_image *im)
{
	struct st_chain c = { im->chain, im->nchain, false };
	st_chain_free(&c);
	memset(im, 0, sizeof(*im));
}

const struct rpc_binding storage_bindings[] = {
	{ "Host.getStorageDomains", vh_host_get_storage_domains },
	{ "StorageDomain.create", vh_sd_create },
	{ "StorageDomain.getInfo", vh_sd_get_info },
	{ "StorageDomain.getStats", vh_sd_get_stats },
	{ "StorageDomain.getVolumes", vh_sd_get_volumes },
	{ "StorageDomain.getImages", vh_sd_get_images },
	{ "StorageDomain.format", vh_sd_format },
	{ "StorageDomain.activate", vh_sd_activate },
	{ "StorageDomain.attach", vh_sd_attach },
	{ "StorageDomain.detach", vh_sd_detach },
	{ "StoragePool.destroy", vh_sp_destroy },
	{ "StoragePool.refresh", vh_sp_refresh },
	{ "StorageDomain.deactivate", vh_sd_deactivate },
	{ "Image.getVolumes", vh_img_get_volumes },
	{ "Image.delete", vh_img_delete },
	{ "Image.deleteVolumes", vh_img_delete_volumes },
	{ "Volume.create", vh_vol_create },
	{ "Volume.getInfo", vh_vol_get_info },
	{ "Volume.getSize", vh_vol_get_size },
	{ "Volume.delete", vh_vol_delete },
	{ "Volume.setDescription", vh_vol_set_description },
	{ "Task.getStatus", vh_task_get_status },
	{ "Task.clear", vh_task_clear },
	{ "Task.stop", vh_task_stop },
	{ "Task.getInfo", vh_task_get_info },
	{ "SDM.copy_data", vh_sdm_copy_data },
	{ "SDM.add_bitmap", vh_sdm_add_bitmap },
	{ "SDM.remove_bitmap", vh_sdm_remove_bitmap },
	{ "SDM.clear_bitmaps", vh_sdm_clear_bitmaps },
	{ "NBD.start_server", vh_nbd_start_server },
	{ "NBD.stop_server", vh_nbd_stop_server },
	{ "SDM.amend_volume", vh_sdm_amend_volume },
	{ "SDM.sparsify_volume", vh_sdm_sparsify_volume },
	{ "SDM.update_volume", vh_sdm_update_volume },
	{ "Volume.verify_untrusted", vh_vol_verify_untrusted },
	{ "Task.revert", vh_task_revert },
	{ "Image.prepare", vh_img_prepare },
	{ "Image.teardown", vh_img_teardown },
	{ "Image.cloneStructure", vh_img_clone_structure },
	{ "Image.syncData", vh_img_sync_data },
	{ "Image.move", vh_img_move },
	{ "Volume.setLegality", vh_vol_set_legality },
	{ "Volume.refresh", vh_vol_refresh },
	{ "Volume.getQemuImageInfo", vh_vol_qemu_info },
	{ "Volume.measure", vh_vol_measure },
	{ "Volume.extendSize", vh_vol_extend_size },
	{ "Host.getAllTasksStatuses", vh_host_get_all_tasks_statuses },
	{ "Host.getAllTasksInfo", vh_host_get_all_tasks_info },
	{ "StoragePool.create", vh_sp_create },
	{ "StoragePool.connect", vh_sp_connect },
	{ "StoragePool.reconstructMaster", vh_sp_reconstruct_master },
	{ "StoragePool.disconnect", vh_sp_disconnect },
	{ "StoragePool.getInfo", vh_sp_get_info },
	{ "StoragePool.getSpmStatus", vh_sp_get_spm_status },
	{ "StoragePool.connectStorageServer", vh_sp_connect_server },
	{ "StoragePool.spmStart", vh_sp_spm_start },
	{ "StoragePool.spmStop", vh_sp_spm_stop },
	{ "StoragePool.disconnectStorageServer", vh_sp_disconnect_server },
	{ "StoragePool.prepareMerge", vh_sp_prepare_merge },
	{ "StoragePool.finalizeMerge", vh_sp_finalize_merge },
	{ "SDM.merge", vh_sdm_merge },
	{ NULL, NULL },
};
