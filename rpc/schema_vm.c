/* rpc/schema_vm.c - declarations of the VM verb family (Host.getAllVmStats,
 * Host.getVMList, Host.getVMFullList, VM.*), with parameter names, order and
 * types as in VDSM's vdsm-api.yml.  Handlers: vdsmd/virt (virt_bindings).
 * Lifecycle verbs call libvirt and are RPC_F_BLOCKING (worker pool). */
#include "schema.h"

#define N(a) (unsigned)(sizeof(a) / sizeof((a)[0]))

static const struct rpc_param p_vmid[] = {
	{ "vmID", RPC_T_UUID, true, NULL, "the UUID of the VM" },
};

static const struct rpc_param p_vm_list[] = {
	{ "fullStatus", RPC_T_BOOL, false, "false",
	  "deprecated: return the full status of each VM (as Host.getVMFullList)" },
	{ "vmList", RPC_T_ARRAY, false, NULL, "only these VM UUIDs (default: all)" },
};

static const struct rpc_param p_vm_full_list[] = {
	{ "vmList", RPC_T_ARRAY, false, NULL, "only these VM UUIDs (default: all)" },
};

static const struct rpc_param p_create[] = {
	{ "vmID", RPC_T_UUID, true, NULL, "the UUID of the new VM" },
	{ "vmParams", RPC_T_OBJECT, true, NULL,
	  "VM parameters: vmName (string), memSize (MiB, int or string), smp "
	  "(vCPUs, int or string), devices (list of {type: disk, path, format?, "
	  "imageID?} and {type: interface, macAddr?, network?}); disks and nics "
	  "lists are accepted as shorthands" },
};

static const struct rpc_param p_shutdown[] = {
	{ "vmID", RPC_T_UUID, true, NULL, "the UUID of the VM" },
	{ "delay", RPC_T_INTSTR, false, NULL, "seconds before the shutdown (informational)" },
	{ "message", RPC_T_STRING, false, NULL, "a message for the guest's users (logged)" },
	{ "reboot", RPC_T_BOOL, false, "false", "reboot instead of powering off" },
	{ "timeout", RPC_T_INTSTR, false, NULL, "seconds to wait for the guest (informational)" },
	{ "force", RPC_T_BOOL, false, "false", "destroy the VM when the guest does not shut down" },
};

static const struct rpc_param p_destroy[] = {
	{ "vmID", RPC_T_UUID, true, NULL, "the UUID of the VM" },
	{ "gracefulAttempts", RPC_T_INT, false, NULL, "accepted for compatibility" },
};

const struct rpc_verb_decl rpc_schema_vm[] = {
	{ .name = "Host.getAllVmStats", .params = NULL, .nparams = 0,
	  .result = "list of VM stats objects (from the latest sample)",
	  .desc = "Statistics of every VM on the host." },
	{ .name = "Host.getVMList", .params = p_vm_list, .nparams = N(p_vm_list),
	  .result = "list of {vmId, status, statusTime}",
	  .desc = "The VMs on the host and their status." },
	{ .name = "Host.getVMFullList", .params = p_vm_full_list, .nparams = N(p_vm_full_list),
	  .result = "list of VM definitions (vmId, vmName, status, memSize, smp, ...)",
	  .desc = "The VMs on the host with their parameters." },
	{ .name = "VM.getStats", .params = p_vmid, .nparams = N(p_vmid),
	  .result = "one-element list with the VM stats object",
	  .desc = "Statistics of one VM (code 1 when it does not exist)." },
	{ .name = "VM.create", .params = p_create, .nparams = N(p_create), .flags = RPC_F_BLOCKING,
	  .result = "the new VM's parameters with status WaitForLaunch",
	  .desc = "Start a transient VM (code 4 when vmID exists)." },
	{ .name = "VM.pause", .params = p_vmid, .nparams = N(p_vmid), .flags = RPC_F_BLOCKING,
	  .result = "true", .desc = "Pause a running VM." },
	{ .name = "VM.cont", .params = p_vmid, .nparams = N(p_vmid), .flags = RPC_F_BLOCKING,
	  .result = "true", .desc = "Continue a paused VM." },
	{ .name = "VM.shutdown", .params = p_shutdown, .nparams = N(p_shutdown),
	  .flags = RPC_F_BLOCKING, .result = "true",
	  .desc = "Ask the guest to shut down (or reboot)." },
	{ .name = "VM.destroy", .params = p_destroy, .nparams = N(p_destroy),
	  .flags = RPC_F_BLOCKING, .result = "true",
	  .desc = "Stop the VM at once and forget it (also a VM already Down)." },
	{ .name = NULL },
};
