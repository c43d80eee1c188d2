/* rpc/errors.c - the one mapping from internal error values to JSON-RPC wire
 * codes and messages (PROTOCOL.md section 3, error table). */
#include "rpc_int.h"

#include <stdio.h>
#include <string.h>

struct err_wire {
	int code;
	const char *message;
};

/* The only place wire codes and message texts live. */
static struct err_wire err_lookup(enum rpc_err e)
{
	switch (e) {
	case RPC_OK:             return (struct err_wire){ 0, "Done" };
	case RPC_E_PARSE:        return (struct err_wire){ -32700, "Invalid JSON was received by the server." };
	case RPC_E_INVALID_REQ:  return (struct err_wire){ -32600, "Invalid request" };
	case RPC_E_NO_METHOD:    return (struct err_wire){ -32601, "The method does not exist or is not available" };
	case RPC_E_PARAMS:       return (struct err_wire){ -32602, "Invalid params" };
	case RPC_E_INTERNAL:     return (struct err_wire){ -32603, "Internal JSON-RPC error" };
	case RPC_E_NO_VM:        return (struct err_wire){ 1, "Virtual machine does not exist" };
	case RPC_E_VM_EXISTS:    return (struct err_wire){ 4, "Virtual machine already exists" };
	case RPC_E_CREATE_VM:    return (struct err_wire){ 9, "Error creating the requested VM" };
	case RPC_E_NO_PEER:      return (struct err_wire){ 10, "Could not connect to peer host" };
	case RPC_E_MIGRATION:    return (struct err_wire){ 12, "Fatal error during migration" };
	case RPC_E_MIGRATE_LIMIT:
		return (struct err_wire){ 82, "Incoming migration limit exceeded" };
	case RPC_E_NO_IMAGE_FILE: return (struct err_wire){ 13, "Drive image file could not be found" };
	case RPC_E_SNAPSHOT:     return (struct err_wire){ 48, "Snapshot failed" };
	case RPC_E_MERGE:        return (struct err_wire){ 52, "Merge failed" };
	case RPC_E_REPLICA:      return (struct err_wire){ 55, "Drive replication error" };
	case RPC_E_UNAVAIL:      return (struct err_wire){ 40, "Resource unavailable" };
	case RPC_E_NO_REPLICATION: return (struct err_wire){ 88, "Replication not in progress." };
	case RPC_E_EXTERNAL_DATA: return (struct err_wire){ 89, "Failed to handle external VM data" };
	case RPC_E_RECOVERING:   return (struct err_wire){ 99, "Recovering from crash or Initializing" };
	case RPC_E_GENERAL:      return (struct err_wire){ 100, "General Exception" };
	case RPC_E_NO_VOLUME:    return (struct err_wire){ 201, "Volume does not exist" };
	case RPC_E_VOLUME_EXISTS: return (struct err_wire){ 212, "Volume already exists" };
	case RPC_E_NO_IMAGE:     return (struct err_wire){ 268, "Image does not exist in domain" };
	case RPC_E_NO_POOL:      return (struct err_wire){ 309, "Unknown pool id, pool not connected" };
	case RPC_E_WRONG_MASTER: return (struct err_wire){ 324, "Wrong Master domain or its version" };
	case RPC_E_POOL_CONNECTED: return (struct err_wire){ 325, "Cannot perform action while storage pool is connected" };
	case RPC_E_NOT_IN_POOL:  return (struct err_wire){ 353, "Storage domain not in pool" };
	case RPC_E_DOM_STATE:    return (struct err_wire){ 347, "Storage domain is in illegal state" };
	case RPC_E_NOT_MEMBER:   return (struct err_wire){ 375, "Domain is not member in pool" };
	case RPC_E_DOM_STATUS:   return (struct err_wire){ 376, "Unsupported Storage Domain status" };
	case RPC_E_DETACH_MASTER: return (struct err_wire){ 383, "Illegal action" };
	case RPC_E_DOM_VERSION:  return (struct err_wire){ 394, "Domain version is unsupported" };
	case RPC_E_VERSION_ADVANCED: return (struct err_wire){ 395, "Current domain version is too advanced" };
	case RPC_E_SPM_ACQUIRE:  return (struct err_wire){ 651, "Cannot obtain lock" };
	case RPC_E_SPM_TASKS:    return (struct err_wire){ 653, "Error stopping SPM, SPM has unfinished task(s)" };
	case RPC_E_NOT_SPM:      return (struct err_wire){ 654, "Not SPM" };
	case RPC_E_NO_DOMAIN:    return (struct err_wire){ 358, "Storage domain does not exist" };
	case RPC_E_DOMAIN_EXISTS: return (struct err_wire){ 365, "Storage domain already exists" };
	case RPC_E_NO_TASK:      return (struct err_wire){ 401, "Task id unknown" };
	case RPC_E_TASK_STATE:   return (struct err_wire){ 410, "Operation is not allowed in this task state" };
	case RPC_E_TASK_ABORTED: return (struct err_wire){ 411, "Task is aborted" };
	case RPC_E_TASK_NOT_DONE: return (struct err_wire){ 403, "Task not finished" };
	case RPC_E_TASK_MOVE:    return (struct err_wire){ 441, "cannot move task to requested state" };
	case RPC_E_NO_RESOURCES: return (struct err_wire){ 1100, "Not enough resources" };
	case RPC_E_VM_DOWN:      return (struct err_wire){ 6, "Virtual machine is down" };
	case RPC_E_AGENT_NONRESP: return (struct err_wire){ 19, "Guest agent non-responsive" };
	case RPC_E_MISSING_PARAM: return (struct err_wire){ 11, "Missing required parameter" };
	case RPC_E_NOT_IMPL:     return (struct err_wire){ 44, "Not implemented" };
	case RPC_E_RESIZE:       return (struct err_wire){ 58, "Wrong resize disk parameter" };
	case RPC_E_VM_POLICY:    return (struct err_wire){ 63, "Failed to update VM SLA policy" };
	case RPC_E_UNSUPPORTED:  return (struct err_wire){ 75, "Operation not supported" };
	case RPC_E_FREEZE:       return (struct err_wire){ 76, "Unable to freeze guest filesystems" };
	case RPC_E_THAW:         return (struct err_wire){ 77, "Unable to thaw guest filesystems" };
	case RPC_E_NET_LOST_CONN:   return (struct err_wire){ 10, "Connection to the engine lost" };
	case RPC_E_NET_BAD_PARAMS:  return (struct err_wire){ 21, "Bad network parameters" };
	case RPC_E_NET_BAD_ADDR:    return (struct err_wire){ 22, "Bad network address" };
	case RPC_E_NET_BAD_NIC:     return (struct err_wire){ 23, "Bad nic" };
	case RPC_E_NET_USED_NIC:    return (struct err_wire){ 24, "Nic already in use" };
	case RPC_E_NET_BAD_BONDING: return (struct err_wire){ 25, "Bad bonding" };
	case RPC_E_NET_BAD_VLAN:    return (struct err_wire){ 26, "Bad vlan" };
	case RPC_E_NET_BAD_BRIDGE:  return (struct err_wire){ 27, "Bad bridge" };
	case RPC_E_NET_FAILED_IFUP: return (struct err_wire){ 29, "Failed to bring interface up" };
	case RPC_E_NET_USED_BOND:   return (struct err_wire){ 31, "Bond already in use" };
	case RPC_E_TICKET:          return (struct err_wire){ 18, "Error while setting spice ticket" };
	case RPC_E_CHANGE_DISK:     return (struct err_wire){ 41, "Failed to change disk image" };
	case RPC_E_HOTPLUG_NIC:     return (struct err_wire){ 49, "Failed to hotplug NIC" };
	case RPC_E_UPDATE_DEVICE:   return (struct err_wire){ 56, "Failed to update device" };
	case RPC_E_HOTPLUG_MEM:     return (struct err_wire){ 70, "Failed to hotplug memory" };
	case RPC_E_HOTUNPLUG_MEM:   return (struct err_wire){ 85, "Failed to hotunplug memory" };
	case RPC_E_MASTER_ERR:      return (struct err_wire){ 355, "Error validating master storage domain" };
	case RPC_E_HOTPLUG_DISK:    return (struct err_wire){ 45, "Failed to hotplug disk" };
	case RPC_E_HOTUNPLUG_DISK:  return (struct err_wire){ 46, "Failed to hotunplug disk" };
	case RPC_E_MIG_CANCEL:      return (struct err_wire){ 47, "Migration not in progress" };
	case RPC_E_HOTUNPLUG_NIC:   return (struct err_wire){ 50, "Failed to hotunplug NIC" };
	case RPC_E_UNEXPECTED:      return (struct err_wire){ 16, "Unexpected exception" };
	case RPC_E_GEN_MISMATCH:
		return (struct err_wire){ 911, "The provided generation does not match the actual generation" };
	case RPC_E_NOT_IN_CHAIN:    return (struct err_wire){ 920, "Volume is not part of the chain." };
	case RPC_E_WRONG_PARENT:    return (struct err_wire){ 921, "Wrong parent volume." };
	case RPC_E_SHARED_RO:       return (struct err_wire){ 219, "Shared volume is read only" };
	case RPC_E_MERGE_BITMAP:    return (struct err_wire){ 1621, "Failed to merge bitmaps" };
	case RPC_E_ADD_BITMAP:      return (struct err_wire){ 1620, "Failed to add bitmap" };
	case RPC_E_REMOVE_BITMAP:   return (struct err_wire){ 1622, "Failed to remove bitmap" };
	case RPC_E_ST_UNSUPPORTED:  return (struct err_wire){ 2009, "Unsupported operation" };
	case RPC_E_IMAGE_TICKETS:   return (struct err_wire){ 481, "Cannot communicate with image daemon" };
	case RPC_E_IMAGE_DAEMON:    return (struct err_wire){ 482, "Image daemon request failed" };
	case RPC_E_IMAGE_UNSUPPORTED: return (struct err_wire){ 483, "Image daemon is unsupported" };
	case RPC_E_POOL_NOT_CONN:   return (struct err_wire){ 313, "Storage pool not connected" };
	case RPC_E_BITMAP_CHAIN:    return (struct err_wire){ 946, "Invalid bitmap chain" };
	case RPC_E_NO_BITMAP:       return (struct err_wire){ 947, "Bitmap does not exist" };
	case RPC_E_BACKUP:          return (struct err_wire){ 1600, "Backup Error" };
	case RPC_E_NO_BACKUP:       return (struct err_wire){ 1601, "No such backup Error" };
	case RPC_E_CHECKPOINT:      return (struct err_wire){ 1610, "Checkpoint Error" };
	case RPC_E_NO_CHECKPOINT:   return (struct err_wire){ 1611, "No such checkpoint Error" };
	case RPC_E_CHECKPOINT_BAD:  return (struct err_wire){ 1612, "Inconsistent checkpoint Error" };
	case RPC_E_VOL_UPDATE:      return (struct err_wire){ 235, "Cannot update volume attributes" };
	case RPC_E_IMAGE_VERIFY:    return (struct err_wire){ 484, "Image verification failed" };
	case RPC_E_STORAGE:          return (struct err_wire){ 200, "General Storage Exception" };
	case RPC_E_DOM_ACTION:       return (struct err_wire){ 350, "Error in storage domain action" };
	case RPC_E_CONN_ERROR:       return (struct err_wire){ 451, "Error storage server connection" };
	case RPC_E_DISCONN_ERROR:    return (struct err_wire){ 452, "Error storage server disconnection" };
	case RPC_E_CONN_ACCESS:
		return (struct err_wire){ 469,
			"Permission settings on the specified path do not allow access to the storage."
			" Verify permission settings on the specified storage path." };
	case RPC_E_MOUNT_TYPE:       return (struct err_wire){ 470, "Mount type error" };
	case RPC_E_MOUNT:            return (struct err_wire){ 477, "Problem while trying to mount target" };
	case RPC_E__COUNT:       break;
	}
	return (struct err_wire){ -32603, "Internal JSON-RPC error" };
}

int rpc_err_code(enum rpc_err e)
{
	return err_lookup(e).code;
}

const char *rpc_err_message(enum rpc_err e)
{
	return err_lookup(e).message;
}

enum rpc_err rpc_err_from_vd(int vd_err)
{
	switch (vd_err) {
	case VD_OK: return RPC_OK;
	case VD_EBUSY: return RPC_E_NO_RESOURCES;
	case VD_EINVAL: return RPC_E_PARAMS;
	default: return RPC_E_GENERAL;
	}
}

/* Length of s[0..n) without a trailing incomplete UTF-8 sequence (a detail
 * cut by snprintf must not end the message in the middle of a character). */
static size_t utf8_trim(const char *s, size_t n)
{
	size_t i = n, cont = 0;
	while (i > 0 && cont < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
		i--;
		cont++;
	}
	if (i == 0)
		return n;
	unsigned char lead = (unsigned char)s[i - 1];
	size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
	if (lead >= 0xC0 && cont < need)
		return i - 1;
	return n;
}

void rpc_write_error(struct vd_writer *w, enum rpc_err e, const char *detail)
{
	struct err_wire ew = err_lookup(e == RPC_OK ? RPC_E_INTERNAL : e);
	vw_begin_object(w);
	vw_keyz(w, "code");
	vw_int(w, ew.code);
	vw_keyz(w, "message");
	if (detail && *detail) {
		char msg[512];
		/* "Prefix: detail", or "Prefix. detail" after a full sentence */
		size_t ml = strlen(ew.message);
		const char *sep = ml && ew.message[ml - 1] == '.' ? " " : ": ";
		int n = snprintf(msg, sizeof(msg), "%s%s%s", ew.message, sep, detail);
		if (n < 0)
			n = 0;
		if ((size_t)n >= sizeof(msg))
			n = (int)sizeof(msg) - 1;
		vw_string(w, msg, utf8_trim(msg, (size_t)n));
	} else {
		vw_strz(w, ew.message);
	}
	vw_end_object(w);
}

void rpc_write_done(struct rpc_call *c)
{
	struct err_wire ew = err_lookup(RPC_OK);
	vw_begin_object(c->w);
	vw_keyz(c->w, "code");
	vw_int(c->w, ew.code);
	vw_keyz(c->w, "message");
	vw_strz(c->w, ew.message);
	vw_end_object(c->w);
}

int rpc_fail(struct rpc_call *c, enum rpc_err e, const char *fmt, ...)
{
	c->err = e == RPC_OK ? RPC_E_INTERNAL : e;
	c->err_detail[0] = '\0';
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->err_detail, sizeof(c->err_detail), fmt, ap);
		va_end(ap);
	}
	return -1;
}
