/* vdsmd/virt/verbs.c - the read verbs (fast: they read the current snapshot
 * on the loop thread and never call libvirt) and virt_bindings.
 *
 * Before the first snapshot exists (libvirt not reached yet) every VM verb
 * answers code 99, even after the engine is ready (see conn.c). */
#include "virt_int.h"

#include <string.h>

/* The current snapshot, or NULL after failing the call with code 99. */
static struct virt_snapshot *snap_or_fail(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	struct virt_snapshot *snap = s ? virt_snapshot_get(s) : NULL;
	if (!snap)
		rpc_fail(c, RPC_E_RECOVERING, "no VM sample yet (libvirt not reached)");
	return snap;
}

static int verb_get_all_vm_stats(struct rpc_call *c)
{
	struct virt_snapshot *snap = snap_or_fail(c);
	if (!snap)
		return -1;
	virt_reply_all_stats(c, virt_state_of(c), snap);  /* puts snap */
	return 0;
}

/* True when vm is selected by the optional vmList array argument. */
static bool selected(const struct vd_value *list, const struct virt_vm *vm)
{
	if (!list || list->type != VD_ARRAY)
		return true;
	for (size_t i = 0; i < list->v.arr.n; i++)
		if (vd_str_eq(&list->v.arr.items[i], vm->uuid))
			return true;
	return false;
}

static int verb_get_vm_full_list(struct rpc_call *c)
{
	struct virt_snapshot *snap = snap_or_fail(c);
	if (!snap)
		return -1;
	const struct vd_value *list = rpc_arg(c, "vmList");
	vw_begin_array(c->w);
	for (unsigned i = 0; i < snap->nvms; i++)
		if (selected(list, &snap->vms[i]))
			virt_encode_vm_full(c->w, snap, &snap->vms[i]);
	vw_end_array(c->w);
	snapshot_put(snap);
	return 0;
}

static int verb_get_vm_list(struct rpc_call *c)
{
	struct virt_snapshot *snap = snap_or_fail(c);
	if (!snap)
		return -1;
	const struct vd_value *list = rpc_arg(c, "vmList");
	bool full = rpc_arg_bool(c, "fullStatus", false);
	vw_begin_array(c->w);
	for (unsigned i = 0; i < snap->nvms; i++) {
		const struct virt_vm *vm = &snap->vms[i];
		if (!selected(list, vm))
			continue;
		if (full) {
			virt_encode_vm_full(c->w, snap, vm);
			continue;
		}
		vw_begin_object(c->w);
		vw_kstr(c->w, "vmId", vm->uuid);
		vw_kstr(c->w, "status", virt_status_name(vm->status));
		vw_kstrf(c->w, "statusTime", "%llu", (unsigned long long)snap->status_time);
		vw_end_object(c->w);
	}
	vw_end_array(c->w);
	snapshot_put(snap);
	return 0;
}

static int verb_vm_get_stats(struct rpc_call *c)
{
	const char *id = rpc_arg_str(c, "vmID", NULL);
	struct virt_snapshot *snap = snap_or_fail(c);
	if (!snap)
		return -1;
	const struct virt_vm *vm = id ? snapshot_find(snap, id) : NULL;
	if (!vm) {
		snapshot_put(snap);
		return rpc_fail(c, RPC_E_NO_VM, "%s", id ? id : "");
	}
	vw_begin_array(c->w);
	virt_encode_vm_stats(c->w, snap, vm);
	vw_end_array(c->w);
	snapshot_put(snap);
	return 0;
}

/* VM.getInfo: the VM's definition as Host.getVMFullList gives it. */
static int verb_vm_get_info(struct rpc_call *c)
{
	const char *id = rpc_arg_str(c, "vmID", NULL);
	struct virt_snapshot *snap = snap_or_fail(c);
	if (!snap)
		return -1;
	const struct virt_vm *vm = id ? snapshot_find(snap, id) : NULL;
	if (!vm) {
		snapshot_put(snap);
		return rpc_fail(c, RPC_E_NO_VM, "%s", id ? id : "");
	}
	virt_encode_vm_full(c->w, snap, vm);
	snapshot_put(snap);
	return 0;
}

const struct rpc_binding virt_bindings[] = {
	{ "Host.getAllVmStats", verb_get_all_vm_stats },
	{ "Host.getVMList", verb_get_vm_list },
	{ "Host.getVMFullList", verb_get_vm_full_list },
	{ "VM.getStats", verb_vm_get_stats },
	{ "VM.create", virt_verb_create },
	{ "VM.pause", virt_verb_pause },
	{ "VM.cont", virt_verb_cont },
	{ "VM.shutdown", virt_verb_shutdown },
	{ "VM.destroy", virt_verb_destroy },
	{ "Host.dumpxmls", virt_verb_dumpxmls },
	{ "VM.getInfo", verb_vm_get_info },
	{ "VM.getExternalData", virt_verb_get_external_data },
	{ "VM.reset", virt_verb_reset },
	{ "VM.setDestroyOnReboot", virt_verb_set_destroy_on_reboot },
	{ "VM.hotplugDisk", virt_verb_hotplug_disk },
	{ "VM.hotunplugDisk", virt_verb_hotunplug_disk },
	{ "VM.hotplugNic", virt_verb_hotplug_nic },
	{ "VM.hotunplugNic", virt_verb_hotunplug_nic },
	{ "VM.setTicket", virt_verb_set_ticket },
	{ "VM.updateDevice", virt_verb_update_device },
	{ "VM.changeCD", virt_verb_change_cd },
	{ "VM.changeFloppy", virt_verb_change_floppy },
	{ "VM.hotplugMemory", virt_verb_hotplug_memory },
	{ "VM.hotunplugMemory", virt_verb_hotunplug_memory },
	{ "VM.setBalloonTarget", virt_verb_set_balloon_target },
	{ "VM.setNumberOfCpus", virt_verb_set_number_of_cpus },
	{ "VM.setIoTune", virt_verb_set_iotune },
	{ "VM.getIoTune", virt_verb_get_iotune },
	{ "VM.migrate", virt_verb_migrate },
	{ "VM.migrateCancel", virt_verb_migrate_cancel },
	{ "VM.getMigrationStatus", virt_verb_get_migration_status },
	{ "VM.migrationCreate", virt_verb_migration_create },
	{ "VM.freeze", virt_verb_freeze },
	{ "VM.thaw", virt_verb_thaw },
	{ "VM.screenshot", virt_verb_screenshot },
	{ "VM.diskSizeExtend", virt_verb_disk_size_extend },
	{ "VM.updateVmPolicy", virt_verb_update_vm_policy },
	{ "VM.getIoTunePolicy", virt_verb_get_iotune_policy },
	{ "VM.desktopLock", virt_verb_desktop },
	{ "VM.desktopLogin", virt_verb_desktop },
	{ "VM.desktopLogoff", virt_verb_desktop },
	{ "VM.seal", virt_verb_seal },
	{ "VM.hibernate", virt_verb_hibernate },
	{ "VM.snapshot", virt_verb_snapshot },
	{ "VM.merge", virt_verb_merge },
	{ "VM.diskReplicateStart", virt_verb_disk_replicate_start },
	{ "VM.diskReplicateFinish", virt_verb_disk_replicate_finish },
	{ "VM.start_backup", virt_verb_start_backup },
	{ "VM.stop_backup", virt_verb_stop_backup },
	{ "VM.backup_info", virt_verb_backup_info },
	{ "VM.list_checkpoints", virt_verb_list_checkpoints },
	{ "VM.dump_checkpoint", virt_verb_dump_checkpoint },
	{ "VM.delete_checkpoints", virt_verb_delete_checkpoints },
	{ "VM.redefine_checkpoints", virt_verb_redefine_checkpoints },
	{ NULL, NULL },
};
