/* vdsmd/storage/st_verbs_conn.c - StoragePool.connectStorageServer /
 * disconnectStorageServer (blocking verbs: mount(8) may take a while).
 * Each connection gets its own status, as VDSM answers: the call succeeds
 * and a failed connection says so in its status. */
#include "st_verbs.h"
#include "../../common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A member as a NUL-terminated arena string (strings and integers), or
 * NULL. */
static const char *member_str(struct rpc_call *c, const struct vd_value *obj, const char *key)
{
	const struct vd_value *v = vd_obj_get(obj, key);
	if (!v)
		return NULL;
	if (v->type == VD_STRING)
		return arena_strndup(c->arena, v->v.s.ptr, v->v.s.len);
	if (v->type == VD_INT) {
		char tmp[32];
		snprintf(tmp, sizeof(tmp), "%lld", (long long)v->v.i);
		return arena_strndup(c->arena, tmp, strlen(tmp));
	}
	return NULL;
}

static int connections(struct rpc_call *c, bool connect)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	int64_t type = rpc_arg_int(c, "domainType", 0);
	const struct vd_value *list = rpc_arg(c, "connectionParams");
	if (list->v.arr.n > 64)
		return rpc_fail(c, RPC_E_PARAMS, "connectionParams: at most 64 connections");
	/* NFS timeo/retrans: a JSON integer or a string of digits (the engine
	 * sends strings), read by rpc/ before anything connects */
	int64_t nfs[64][2];
	for (size_t i = 0; i < list->v.arr.n; i++) {
		const struct vd_value *it = &list->v.arr.items[i];
		char pname[40];
		snprintf(pname, sizeof(pname), "connectionParams[%zu]", i);
		if (rpc_member_int(c, pname, it, "timeout", 0, 100000, 0, &nfs[i][0]) < 0 ||
		    rpc_member_int(c, pname, it, "retrans", 0, 100000, 0, &nfs[i][1]) < 0)
			return -1;
	}
	vw_begin_array(c->w);
	for (size_t i = 0; i < list->v.arr.n; i++) {
		const struct vd_value *it = &list->v.arr.items[i];
		struct st_conn_req r = {
			.id = member_str(c, it, "id"),
			.connection = member_str(c, it, "connection"),
			.vfs_type = member_str(c, it, "vfs_type"),
			.mnt_options = member_str(c, it, "mnt_options"),
			.protocol_version = member_str(c, it, "protocol_version"),
			.timeo = (int)nfs[i][0],
			.retrans = (int)nfs[i][1],
		};
		char msg[512];
		int st = type < 0 || type > 100 ? 470
			 : connect ? st_conn_connect(s, (int)type, &r, msg, sizeof(msg))
				   : st_conn_disconnect(s, (int)type, &r, msg, sizeof(msg));
		if (st)
			log_warn("storage: %s %s: status %d: %s", connect ? "connect" : "disconnect",
				 r.connection ? r.connection : "?", st, msg);
		vw_begin_object(c->w);
		vw_kstr(c->w, "id", r.id ? r.id : "");
		vw_kint(c->w, "status", st);
		vw_end_object(c->w);
	}
	vw_end_array(c->w);
	return 0;
}

int vh_sp_connect_server(struct rpc_call *c)
{
	return connections(c, true);
}

int vh_sp_disconnect_server(struct rpc_call *c)
{
	return connections(c, false);
}
