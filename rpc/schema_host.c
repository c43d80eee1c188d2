/* rpc/schema_host.c - declarations of the host verbs the host backend
 * (vdsmd/host/) implements.  Descriptions follow VDSM's vdsm-api.yml.  Other
 * Host.* verbs (VM lists, storage domains, tasks) are declared by their
 * families' files. */
#include "schema.h"

const struct rpc_verb_decl rpc_schema_host[] = {
	{
		.name = "Host.ping2",
		.flags = RPC_F_ALWAYS,
		.desc = "Test connectivity to vdsm.",
		.result = "true",
	},
	{
		.name = "Host.confirmConnectivity",
		.desc = "Confirm remaining external connectivity to vdsm host.",
		.result = "true",
	},
	{
		.name = "Host.getStats",
		.desc = "Get host statistics.",
		.result = "The host statistics (HostStats: cpuUser, cpuSys, cpuIdle, "
			  "cpuLoad, memFree, memUsed, swapTotal, swapFree, vmCount, "
			  "vmActive, elapsedTime, bootTime, dateTime, network, "
			  "storageDomains, ...)",
	},
	{
		.name = "Host.getCapabilities",
		.desc = "Get host capabilities.",
		.result = "Host capabilities information (VdsmCapabilities: cpuModel, "
			  "cpuCores, cpuSockets, cpuThreads, cpuSpeed, cpuFlags, memSize, "
			  "kvmEnabled, operatingSystem, software_version, uuid, ...)",
	},
	{ .name = NULL },
};
