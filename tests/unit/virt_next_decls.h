/* tests/unit/virt_next_decls.h - declarations (VDSM's names, params and
 * types from vdsm-api.yml) of the verbs whose handlers are in
 * virt_bindings_next, for the unit tests until the daemon declares them in
 * api/ (issue 12).  Header only. */
#ifndef VD_TESTS_VIRT_NEXT_DECLS_H
#define VD_TESTS_VIRT_NEXT_DECLS_H

#include "../../rpc/rpc.h"

static const struct rpc_param vnd_vmid[] = {
	{ "vmID", RPC_T_UUID, true, NULL, "the UUID of the VM" },
};
static const struct rpc_param vnd_dumpxmls[] = {
	{ "vmList", RPC_T_ARRAY, false, "[]", "VM UUIDs" },
};
static const struct rpc_param vnd_extdata[] = {
	{ "vmID", RPC_T_UUID, true, NULL, "the UUID of the VM" },
	{ "kind", RPC_T_STRING, true, NULL, "tpm or nvram" },
	{ "lastHash", RPC_T_STRING, false, NULL, "hash of the data the caller has" },
	{ "forceUpdate", RPC_T_BOOL, false, "true", "refresh the data first" },
};
static const struct rpc_verb_decl virt_next_decls[] = {
	{ .name = "Host.dumpxmls", .params = vnd_dumpxmls, .nparams = 1,
	  .flags = RPC_F_BLOCKING, .result = "{vmId: domain XML}", .desc = "" },
	{ .name = "VM.getInfo", .params = vnd_vmid, .nparams = 1, .result = "VmDefinition",
	  .desc = "" },
	{ .name = "VM.getExternalData", .params = vnd_extdata, .nparams = 4,
	  .flags = RPC_F_BLOCKING, .result = "VmDataMap", .desc = "" },
	{ .name = "VM.reset", .params = vnd_vmid, .nparams = 1, .flags = RPC_F_BLOCKING,
	  .result = "true", .desc = "" },
	{ .name = "VM.setDestroyOnReboot", .params = vnd_vmid, .nparams = 1,
	  .flags = RPC_F_BLOCKING, .result = "true", .desc = "" },
	{ .name = NULL },
};

#endif
