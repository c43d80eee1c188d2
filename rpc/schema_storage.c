/* rpc/schema_storage.c - declarations of the storage verb family: storage
 * domains, images, volumes, tasks and the single-host storage pool.  Names,
 * order and descriptions follow VDSM's vdsm-api.yml; handlers live in
 * vdsmd/storage/st_verbs*.c.
 *
 * Mutating verbs that write metadata (fsync) are RPC_F_BLOCKING and run on
 * the worker pool; the data work of Volume.create/delete and Image.delete is
 * a task (a task id comes back at once).  Read verbs are served from the
 * in-memory index on the loop thread. */
#include "schema.h"

#define BLANK "\"00000000-0000-0000-0000-000000000000\""

#define P_SD { "storagedomainID", RPC_T_UUID, true, NULL, "The UUID of the Storage Domain" }
#define P_SP { "storagepoolID", RPC_T_UUID, true, NULL, "The UUID of the Storage Pool" }
#define P_SP_OPT { "storagepoolID", RPC_T_UUID, false, BLANK, "The UUID of the Storage Pool" }
#define P_IMG { "imageID", RPC_T_UUID, true, NULL, "The UUID of the Image" }
#define P_VOL { "volumeID", RPC_T_UUID, true, NULL, "The UUID of the Volume" }
#define P_TASK { "taskID", RPC_T_UUID, true, NULL, "The UUID of the Task" }

static const struct rpc_param p_get_domains[] = {
	{ "storagepoolID", RPC_T_ANY, false, NULL, "Limit to Domains belonging to this Storage Pool" },
	{ "domainClass", RPC_T_ANY, false, NULL, "Limit to Domains of this StorageDomainImageClass" },
	{ "storageType", RPC_T_ANY, false, NULL, "Limit to Domains of this StorageDomainType" },
	{ "remotePath", RPC_T_ANY, false, NULL, "Limit to Domains having this remotePath" },
};

static const struct rpc_param p_sd_create[] = {
	P_SD,
	{ "domainType", RPC_T_ANY, true, NULL,
	  "The type of backing storage (StorageDomainType: 1 NFS, 4 LOCALFS, 6 POSIXFS)" },
	{ "typeArgs", RPC_T_STRING, true, NULL,
	  "Type specific backing storage specifier: the mounted directory (empty: storage_root)" },
	{ "name", RPC_T_STRING, true, NULL, "A human-readable name" },
	{ "domainClass", RPC_T_ANY, true, NULL, "The Storage Domain Class (1 Data, 2 Iso, 3 Backup)" },
	{ "version", RPC_T_ANY, false, NULL, "The Storage Domain version that should be used" },
	{ "blockSize", RPC_T_INT, false, "512", "Underlying storage block size (512 or 0)" },
	{ "maxHosts", RPC_T_INT, false, "2000", "Maximum number of hosts (unused)" },
};

static const struct rpc_param p_sd_only[] = { P_SD };

static const struct rpc_param p_sd_get_volumes[] = {
	P_SD,
	P_SP_OPT,
	{ "imageID", RPC_T_UUID, false, BLANK,
	  "Limit results to Volumes associated with a single Image" },
};

static const struct rpc_param p_sd_format[] = {
	P_SD,
	{ "autoDetach", RPC_T_BOOL, false, "false", "Detach the Storage Domain before formatting" },
};

static const struct rpc_param p_img_get_volumes[] = { P_IMG, P_SP_OPT, P_SD };

static const struct rpc_param p_img_delete[] = {
	P_IMG, P_SP_OPT, P_SD,
	{ "postZero", RPC_T_BOOL, false, "false", "Overwrite Volume data with zeroes (unused)" },
	{ "force", RPC_T_BOOL, false, "false", "Force the operation" },
	{ "discard", RPC_T_BOOL, false, "false", "Discard before deletion (unused)" },
};

static const struct rpc_param p_vol_create[] = {
	P_VOL, P_SP_OPT, P_SD, P_IMG,
	{ "size", RPC_T_INTSTR, true, NULL, "The Volume size in bytes (as string), a multiple of 512" },
	{ "volFormat", RPC_T_INT, true, NULL, "VolumeFormat: 4 COW (qcow2), 5 RAW" },
	{ "preallocate", RPC_T_INT, true, NULL, "VolumeAllocation: 1 PREALLOCATED, 2 SPARSE" },
	{ "diskType", RPC_T_ANY, false, "\"DATA\"", "An advisory disk usage type (DiskContentType)" },
	{ "desc", RPC_T_STRING, false, "\"\"", "The Volume description (up to 210 bytes)" },
	{ "srcImgUUID", RPC_T_UUID, false, BLANK, "If specified, create a snapshot from this Image" },
	{ "srcVolUUID", RPC_T_UUID, false, BLANK, "If specified, create a snapshot from this Volume" },
	{ "initialSize", RPC_T_ANY, false, NULL, "Initial size in bytes (ignored on file domains)" },
	{ "addBitmaps", RPC_T_BOOL, false, "false", "Add bitmaps of the source (unsupported)" },
	{ "legal", RPC_T_BOOL, false, "true", "Create a legal volume" },
	{ "sequence", RPC_T_INT, false, "0", "The sequence number of the volume" },
	{ "bitmap", RPC_T_ANY, false, NULL, "Create an empty bitmap (unsupported)" },
};

static const struct rpc_param p_vol_id[] = { P_VOL, P_SP_OPT, P_SD, P_IMG };

static const struct rpc_param p_vol_delete[] = {
	P_VOL, P_SP_OPT, P_SD, P_IMG,
	{ "postZero", RPC_T_BOOL, false, "false", "Zero Volume data before deletion (unused)" },
	{ "force", RPC_T_BOOL, false, "false", "Remove even if SHARED or INTERNAL" },
	{ "discard", RPC_T_BOOL, false, "false", "Discard the volume before deletion (unused)" },
};

static const struct rpc_param p_vol_set_desc[] = {
	P_VOL, P_SP_OPT, P_SD, P_IMG,
	{ "description", RPC_T_STRING, true, NULL, "A human-readable Volume description (210 bytes)" },
};

static const struct rpc_param p_task[] = { P_TASK };

static const struct rpc_param p_sp_create[] = {
	P_SP,
	{ "name", RPC_T_STRING, true, NULL, "A human-readable name for the Storage Pool" },
	{ "masterSdUUID", RPC_T_UUID, true, NULL, "The UUID of the master Storage Domain" },
	{ "masterVersion", RPC_T_INT, true, NULL, "The Storage Domain version of the master domain" },
	{ "domainList", RPC_T_ARRAY, true, NULL, "Storage Domain UUIDs to attach to the pool" },
	{ "lockRenewalIntervalSec", RPC_T_INT, false, "0", "Lease renewal interval (unused)" },
	{ "leaseTimeSec", RPC_T_INT, false, "0", "Lease time (unused)" },
	{ "ioOpTimeoutSec", RPC_T_INT, false, "0", "I/O operation timeout (unused)" },
	{ "leaseRetries", RPC_T_INT, false, "0", "Lease renewal attempts (unused)" },
};

static const struct rpc_param p_sp_connect[] = {
	P_SP,
	{ "hostID", RPC_T_INT, false, "1", "A host ID number unique across the cluster" },
	{ "scsiKey", RPC_T_ANY, false, NULL, "Deprecated" },
	{ "masterSdUUID", RPC_T_UUID, false, BLANK, "The UUID of the master Storage Domain" },
	{ "masterVersion", RPC_T_INT, false, "0", "The Storage Domain version of the master domain" },
	{ "domainDict", RPC_T_ANY, false, NULL, "The Storage Domain statuses (ignored)" },
};

static const struct rpc_param p_sp_disconnect[] = {
	P_SP,
	{ "hostID", RPC_T_INT, false, "1", "A host ID number unique across the cluster" },
	{ "scsiKey", RPC_T_ANY, false, NULL, "Deprecated" },
	{ "remove", RPC_T_BOOL, false, "false", "Remove the pool after disconnecting (unused)" },
};

static const struct rpc_param p_sp_only[] = { P_SP };

#define N(a) (unsigned)(sizeof(a) / sizeof((a)[0]))

const struct rpc_verb_decl rpc_schema_storage[] = {
	{ .name = "Host.getStorageDomains", .params = p_get_domains, .nparams = N(p_get_domains),
	  .desc = "Get a list of known Storage Domains.", .result = "A list of Storage Domain UUIDs" },
	{ .name = "StorageDomain.create", .params = p_sd_create, .nparams = N(p_sd_create),
	  .flags = RPC_F_BLOCKING, .desc = "Create a new Storage Domain.", .result = "true" },
	{ .name = "StorageDomain.getInfo", .params = p_sd_only, .nparams = N(p_sd_only),
	  .desc = "Get information about a Storage Domain.",
	  .result = "StorageDomainInfo: uuid, type, class, name, role, remotePath, version, pool, ..." },
	{ .name = "StorageDomain.getStats", .params = p_sd_only, .nparams = N(p_sd_only),
	  .desc = "Get Storage Domain statistics.",
	  .result = "StorageDomainStats: disktotal, diskfree, mdavalid, mdathreshold, alerts, ..." },
	{ .name = "StorageDomain.getVolumes", .params = p_sd_get_volumes,
	  .nparams = N(p_sd_get_volumes),
	  .desc = "Get a list of Volumes contained within a Storage Domain.",
	  .result = "A list of Volume UUIDs" },
	{ .name = "StorageDomain.getImages", .params = p_sd_only, .nparams = N(p_sd_only),
	  .desc = "Get a list of Images associated with this Storage Domain.",
	  .result = "A list of Image UUIDs" },
	{ .name = "StorageDomain.format", .params = p_sd_format, .nparams = N(p_sd_format),
	  .flags = RPC_F_BLOCKING, .desc = "Format a storage domain and erase all of its data.",
	  .result = "true" },
	{ .name = "Image.getVolumes", .params = p_img_get_volumes, .nparams = N(p_img_get_volumes),
	  .desc = "Get a list of Volumes associated with this Image.",
	  .result = "A list of Volume UUIDs" },
	{ .name = "Image.delete", .params = p_img_delete, .nparams = N(p_img_delete),
	  .flags = RPC_F_BLOCKING, .desc = "Delete the Image and all of its Volumes.",
	  .result = "A task UUID" },
	{ .name = "Volume.create", .params = p_vol_create, .nparams = N(p_vol_create),
	  .flags = RPC_F_BLOCKING, .desc = "Create a new Volume.", .result = "A task UUID" },
	{ .name = "Volume.getInfo", .params = p_vol_id, .nparams = N(p_vol_id),
	  .desc = "Get information about a Volume.",
	  .result = "VolumeInfo: uuid, type, format, disktype, voltype, capacity, parent, "
		    "description, legality, apparentsize, truesize, status, ..." },
	{ .name = "Volume.getSize", .params = p_vol_id, .nparams = N(p_vol_id),
	  .desc = "Get Volume size information.", .result = "{apparentsize, truesize} (strings)" },
	{ .name = "Volume.delete", .params = p_vol_delete, .nparams = N(p_vol_delete),
	  .flags = RPC_F_BLOCKING, .desc = "Delete a Volume.", .result = "A task UUID" },
	{ .name = "Volume.setDescription", .params = p_vol_set_desc, .nparams = N(p_vol_set_desc),
	  .flags = RPC_F_BLOCKING, .desc = "Set the Volume description field.", .result = "true" },
	{ .name = "Task.getStatus", .params = p_task, .nparams = N(p_task),
	  .desc = "Get Task status information.",
	  .result = "TaskStatus: taskID, taskState, taskResult, code, message" },
	{ .name = "Task.clear", .params = p_task, .nparams = N(p_task), .flags = RPC_F_BLOCKING,
	  .desc = "Discard information about a finished Task.", .result = "true" },
	{ .name = "Task.stop", .params = p_task, .nparams = N(p_task),
	  .desc = "Stop a currently running Task.", .result = "true" },
	{ .name = "Host.getAllTasksStatuses", .desc = "Get status information for all tasks.",
	  .result = "A mapping of Task statuses by task id" },
	{ .name = "Host.getAllTasksInfo", .desc = "Get extra information about all tasks.",
	  .result = "A mapping of Task information (verb, id) by task id" },
	{ .name = "StoragePool.create", .params = p_sp_create, .nparams = N(p_sp_create),
	  .flags = RPC_F_BLOCKING, .desc = "Create a new Storage Pool.", .result = "true" },
	{ .name = "StoragePool.connect", .params = p_sp_connect, .nparams = N(p_sp_connect),
	  .flags = RPC_F_BLOCKING, .desc = "Connect to an existing Storage Pool.", .result = "true" },
	{ .name = "StoragePool.disconnect", .params = p_sp_disconnect, .nparams = N(p_sp_disconnect),
	  .flags = RPC_F_BLOCKING, .desc = "Disconnect a Storage Pool.", .result = "true" },
	{ .name = "StoragePool.getInfo", .params = p_sp_only, .nparams = N(p_sp_only),
	  .desc = "Get information about a Storage Pool and its Active Storage Domains.",
	  .result = "{info: StoragePoolInfo, dominfo: {sdUUID: StorageDomainStatus}}" },
	{ .name = "StoragePool.getSpmStatus", .params = p_sp_only, .nparams = N(p_sp_only),
	  .desc = "Get the status of the Storage Pool Manager role (always SPM here).",
	  .result = "SpmStatus: spmStatus, spmLver, spmId" },
	{ .name = NULL },
};
