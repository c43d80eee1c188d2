/* vdsmd/storage/st_verbs_nbd.c - NBD.start_server and NBD.stop_server
 * (the work: st_nbd.c). */
#include "st_verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A config member that must be a UUID (bitmap: absent or null allowed). */
static int cfg_uuid(struct rpc_call *c, const struct vd_value *cfg, const char *key,
		    bool optional, char out[37], const char **p)
{
	const struct vd_value *v = vd_obj_get(cfg, key);
	*p = NULL;
	if (optional && (!v || v->type == VD_NULL))
		return 0;
	if (!v || v->type != VD_STRING || !vd_is_uuid(v->v.s.ptr, v->v.s.len))
		return rpc_fail(c, RPC_E_PARAMS, "config.%s: not a UUID", key);
	snprintf(out, 37, "%.36s", v->v.s.ptr);
	*p = out;
	return 0;
}

/* A config member read as VDSM's properties.Boolean: absent or null takes
 * the default; true/false (or the engine's "true"/"false" strings). */
static int cfg_bool(struct rpc_call *c, const struct vd_value *cfg, const char *key, bool dflt,
		    bool *out)
{
	const struct vd_value *v = vd_obj_get(cfg, key);
	*out = dflt;
	if (!v || v->type == VD_NULL)
		return 0;
	if (v->type == VD_BOOL)
		*out = v->v.b;
	else if (v->type == VD_STRING && (vd_str_eq(v, "true") || vd_str_eq(v, "false")))
		*out = vd_str_eq(v, "true");
	else
		return rpc_fail(c, RPC_E_PARAMS, "config.%s: not a boolean", key);
	return 0;
}

int vh_nbd_start_server(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const struct vd_value *cfg = rpc_arg(c, "config");
	if (!cfg || cfg->type != VD_OBJECT)
		return rpc_fail(c, RPC_E_PARAMS, "config: not an object");
	char sd[37], img[37], vol[37], bitmap[37];
	struct st_nbd_cfg nc = { 0 };
	if (cfg_uuid(c, cfg, "sd_id", false, sd, &nc.sd) < 0 ||
	    cfg_uuid(c, cfg, "img_id", false, img, &nc.img) < 0 ||
	    cfg_uuid(c, cfg, "vol_id", false, vol, &nc.vol) < 0 ||
	    cfg_uuid(c, cfg, "bitmap", true, bitmap, &nc.bitmap) < 0 ||
	    cfg_bool(c, cfg, "readonly", false, &nc.readonly) < 0 ||
	    cfg_bool(c, cfg, "discard", false, &nc.discard) < 0 ||
	    cfg_bool(c, cfg, "detect_zeroes", false, &nc.detect_zeroes) < 0 ||
	    cfg_bool(c, cfg, "backing_chain", true, &nc.backing_chain) < 0)
		return -1;
	char *url = NULL;
	struct st_err e = { 0 };
	if (st_nbd_start(s, rpc_arg_str(c, "server_id", NULL), &nc, &url, &e) < 0)
		return verb_fail(c, &e);
	vw_strz(c->w, url);
	free(url);
	return 0;
}

int vh_nbd_stop_server(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (st_nbd_stop(s, rpc_arg_str(c, "server_id", NULL), &e) < 0)
		return verb_fail(c, &e);
	vw_bool(c->w, true);
	return 0;
}
