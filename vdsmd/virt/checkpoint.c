/* vdsmd/virt/checkpoint.c - a running VM's backup checkpoints, as VDSM's
 * lib/vdsm/virt/backup.py keeps them: libvirt's checkpoint objects (each a
 * persistent bitmap named after it in the qcow2 of every disk it covers;
 * libvirt keeps their metadata, so a restart of vdsmd keeps them too).
 *
 *   VM.list_checkpoints {vmID}                 [ids], oldest first
 *   VM.dump_checkpoint {vmID, checkpoint_id}   {checkpoint: XML}      (1611)
 *   VM.delete_checkpoints {vmID, checkpoint_ids}
 *   VM.redefine_checkpoints {vmID, checkpoints: [{id, xml? | config?}]}
 *     -> {checkpoint_ids: [done...], error?: {code, message}}
 *
 * delete removes the checkpoint and its bitmaps (libvirt's full delete,
 * flags 0, as VDSM; a metadata-only delete would leave the bitmaps in the
 * images); one libvirt does not know counts as deleted.  redefine gives
 * libvirt back a checkpoint whose bitmaps are in the images (after the VM
 * was started again or migrated), from its XML or from the backup config
 * that made it (the XML start_backup would have made), with REDEFINE and
 * REDEFINE_VALIDATE (libvirt checks the bitmaps exist).  Both stop at the
 * first failure and answer, as VDSM, the ids done so far and libvirt's
 * error code and message in the result, not as a call error. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define VIRT_MAX_CHECKPOINTS 1024

static int act_list(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	virDomainCheckpointPtr *cps = NULL;
	int n = virDomainListAllCheckpoints(dom, &cps, VIR_DOMAIN_CHECKPOINT_LIST_TOPOLOGICAL);
	if (n < 0)
		return rpc_fail(c, RPC_E_CHECKPOINT, "Failed to fetch defined checkpoints list of VM "
				"%s: %s", id, virt_last_error());
	vw_begin_array(c->w);
	for (int i = 0; i < n; i++) {
		const char *name = virDomainCheckpointGetName(cps[i]);
		if (name)
			vw_strz(c->w, name);
		virDomainCheckpointFree(cps[i]);
	}
	vw_end_array(c->w);
	free(cps);
	return 0;
}

int virt_verb_list_checkpoints(struct rpc_call *c)
{
	return virt_on_domain(c, act_list);
}

static int act_dump(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	const char *cid = rpc_arg_str(c, "checkpoint_id", NULL);
	virDomainCheckpointPtr cp = virDomainCheckpointLookupByName(dom, cid, 0);
	char *x = cp ? virDomainCheckpointGetXMLDesc(cp, 0) : NULL;
	int rc = 0;
	if (x) {
		vw_begin_object(c->w);
		vw_kstr(c->w, "checkpoint", x);
		vw_end_object(c->w);
	} else if (virt_last_error_code() == VIR_ERR_NO_DOMAIN_CHECKPOINT) {
		rc = rpc_fail(c, RPC_E_NO_CHECKPOINT, "Failed to fetch checkpoint %s of VM %s: %s",
			      cid, id, virt_last_error());
	} else {
		rc = rpc_fail(c, RPC_E_CHECKPOINT, "checkpoint %s of VM %s: %s", cid, id,
			      virt_last_error());
	}
	free(x);
	if (cp)
		virDomainCheckpointFree(cp);
	return rc;
}

int virt_verb_dump_checkpoint(struct rpc_call *c)
{
	return virt_on_domain(c, act_dump);
}

/* {checkpoint_ids: ids[0..n), error?: libvirt's last error}. */
static void write_response(struct rpc_call *c, const struct vd_value *ids, size_t n, bool failed)
{
	vw_begin_object(c->w);
	vw_keyz(c->w, "checkpoint_ids");
	vw_begin_array(c->w);
	for (size_t i = 0; i < n; i++)
		vw_value(c->w, &ids->v.arr.items[i]);
	vw_end_array(c->w);
	if (failed) {
		vw_keyz(c->w, "error");
		vw_begin_object(c->w);
		vw_kint(c->w, "code", virt_last_error_code());
		vw_kstr(c->w, "message", virt_last_error());
		vw_end_object(c->w);
	}
	vw_end_object(c->w);
}

/* A checkpoint name from the wire: a bounded printable string. */
static bool name_of(const struct vd_value *v, char *out, size_t outlen)
{
	if (v->type != VD_STRING || v->v.s.len == 0 || v->v.s.len >= outlen)
		return false;
	for (size_t i = 0; i < v->v.s.len; i++)
		if ((unsigned char)v->v.s.ptr[i] < 0x20)
			return false;
	memcpy(out, v->v.s.ptr, v->v.s.len);
	out[v->v.s.len] = '\0';
	return true;
}

static int act_delete(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	const struct vd_value *ids = rpc_arg(c, "checkpoint_ids");
	size_t n = ids->v.arr.n;
	char name[256];
	for (size_t i = 0; i < n; i++)
		if (!name_of(&ids->v.arr.items[i], name, sizeof name))
			return rpc_fail(c, RPC_E_PARAMS, "checkpoint_ids[%zu]: a checkpoint id "
					"expected", i);
	for (size_t i = 0; i < n; i++) {
		name_of(&ids->v.arr.items[i], name, sizeof name);
		log_info("virt: %s: delete checkpoint %s", id, name);
		virDomainCheckpointPtr cp = virDomainCheckpointLookupByName(dom, name, 0);
		int r = cp ? virDomainCheckpointDelete(cp, 0) : -1;
		if (cp)
			virDomainCheckpointFree(cp);
		if (r < 0 && virt_last_error_code() != VIR_ERR_NO_DOMAIN_CHECKPOINT) {
			log_warn("virt: %s: delete checkpoint %s: %s", id, name, virt_last_error());
			write_response(c, ids, i, true);
			return 0;
		}
	}
	write_response(c, ids, n, false);
	return 0;
}

int virt_verb_delete_checkpoints(struct rpc_call *c)
{
	return virt_on_domain(c, act_delete);
}

static int act_redefine(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			const char *id)
{
	(void)s;
	const struct vd_value *list = rpc_arg(c, "checkpoints");
	size_t n = list->v.arr.n;
	if (n > VIRT_MAX_CHECKPOINTS)
		return rpc_fail(c, RPC_E_PARAMS, "checkpoints: at most %d", VIRT_MAX_CHECKPOINTS);
	/* the ids answered, in the arena (a value array like the request's) */
	struct vd_value *ids = arena_alloc(c->arena, sizeof *ids);
	memset(ids, 0, sizeof *ids);
	ids->type = VD_ARRAY;
	ids->v.arr.items = n ? arena_alloc(c->arena, n * sizeof(struct vd_value)) : NULL;
	for (size_t i = 0; i < n; i++) {
		const struct vd_value *cv = &list->v.arr.items[i];
		char cid[37];
		if (cv->type != VD_OBJECT || !virt_uuid_member(cv, "id", cid))
			return rpc_fail(c, RPC_E_PARAMS, "checkpoints[%zu]: {id (UUID), xml? config?} "
					"expected", i);
		const struct vd_value *x = vd_obj_get(cv, "xml");
		const struct vd_value *cfgv = vd_obj_get(cv, "config");
		bool has_x = x && x->type == VD_STRING, has_cfg = cfgv && cfgv->type == VD_OBJECT;
		if (!has_x && !has_cfg)
			return rpc_fail(c, RPC_E_CHECKPOINT, "Cannot redefine checkpoint %s without "
					"checkpoint XML or backup config", cid);
	}
	for (size_t i = 0; i < n; i++) {
		const struct vd_value *cv = &list->v.arr.items[i];
		char cid[37];
		virt_uuid_member(cv, "id", cid);
		const struct vd_value *x = vd_obj_get(cv, "xml");
		const struct vd_value *cfgv = vd_obj_get(cv, "config");
		struct vd_buf b = VD_BUF_INIT;
		if (cfgv && cfgv->type == VD_OBJECT) {
			struct virt_bkconfig *cfg = xcalloc(1, sizeof *cfg);
			/* a config VDSM reads with the backup's own code
			 * (backup.py _get_backup_disks: BackupError) */
			int cr = virt_backup_config(c, dom, id, cfgv, RPC_E_BACKUP, cfg);
			if (cr == 0)
				snprintf(cfg->to_cp, sizeof cfg->to_cp, "%s", cid);
			if (cr == 0)
				virt_checkpoint_xml(&b, cfg);
			free(cfg);
			if (cr < 0) {
				buf_free(&b);
				return -1;
			}
		} else {
			buf_append(&b, x->v.s.ptr, x->v.s.len);
			buf_putc(&b, '\0');
		}
		log_info("virt: %s: redefine checkpoint %s", id, cid);
		virDomainCheckpointPtr cp = virDomainCheckpointCreateXML(
			dom, b.data, VIR_DOMAIN_CHECKPOINT_CREATE_REDEFINE |
			VIR_DOMAIN_CHECKPOINT_CREATE_REDEFINE_VALIDATE);
		buf_free(&b);
		if (!cp) {
			log_warn("virt: %s: redefine checkpoint %s: %s", id, cid, virt_last_error());
			write_response(c, ids, i, true);
			return 0;
		}
		virDomainCheckpointFree(cp);
		ids->v.arr.items[i] = (struct vd_value){ 0 };
		ids->v.arr.items[i].type = VD_STRING;
		char *keep = arena_alloc(c->arena, sizeof cid);
		memcpy(keep, cid, sizeof cid);
		ids->v.arr.items[i].v.s.ptr = keep;
		ids->v.arr.items[i].v.s.len = strlen(keep);
		ids->v.arr.n = i + 1;
	}
	write_response(c, ids, n, false);
	return 0;
}

int virt_verb_redefine_checkpoints(struct rpc_call *c)
{
	return virt_on_domain(c, act_redefine);
}
