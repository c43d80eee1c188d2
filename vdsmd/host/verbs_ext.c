/* vdsmd/host/verbs_ext.c - the Host verbs of the engine's connect flow
 * beyond stats and capabilities: Host.ping, Host.getHardwareInfo,
 * Host.setMOMPolicyParameters (stored, reported back in Host.getStats as
 * "momPolicy"), Host.getJobs and Host.hostdevListByCaps. */
#include "host_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct host_state *state_of(struct rpc_call *c)
{
	struct vdsmd *d = c->app;
	return d ? d->host : NULL;
}

/* Host.ping (deprecated twin of ping2): nothing written → true. */
int host_ping(struct rpc_call *c)
{
	(void)c;
	return 0;
}

/* DMI strings as VDSM's dmidecodeUtil reports them: a key only when the
 * value is known ("Not Specified" and unreadable ones are left out). */
static void kdmi(struct vd_writer *w, const char *k, const char *v)
{
	if (v[0] && strcmp(v, "Not Specified") != 0)
		vw_kstr(w, k, v);
}

int host_get_hardware_info(struct rpc_call *c)
{
	struct host_state *h = state_of(c);
	struct host_dmi d;
	host_dmi_read(h ? h->root : "", &d);
	struct vd_writer *w = c->w;
	vw_begin_object(w);
	kdmi(w, "systemManufacturer", d.manufacturer);
	kdmi(w, "systemProductName", d.product);
	kdmi(w, "systemVersion", d.version);
	kdmi(w, "systemSerialNumber", d.serial);
	kdmi(w, "systemUUID", d.uuid);
	kdmi(w, "systemFamily", d.family);
	vw_end_object(w);
	return 0;
}

/* ---- MOM policy parameters ---------------------------------------------- */

int host_mom_set(struct host_state *h, const struct vd_value *kv, char *why, size_t whylen)
{
	if (!kv || kv->type != VD_OBJECT) {
		snprintf(why, whylen, "key_value_store: expected an object");
		return VD_EINVAL;
	}
	/* validate everything first: a bad entry changes nothing */
	for (size_t i = 0; i < kv->v.obj.n; i++) {
		const struct vd_member *m = &kv->v.obj.members[i];
		if (m->klen == 0 || m->klen >= sizeof(h->mom.e[0].key)) {
			snprintf(why, whylen, "key_value_store: key length %zu out of 1..%zu", m->klen,
				 sizeof(h->mom.e[0].key) - 1);
			return VD_EINVAL;
		}
		enum vd_type t = m->val.type;
		if (t == VD_ARRAY || t == VD_OBJECT || t == VD_NULL) {
			snprintf(why, whylen, "key_value_store: %.*s: expected a scalar",
				 (int)VD_MIN(m->klen, (size_t)64), m->key);
			return VD_EINVAL;
		}
		if (t == VD_STRING && m->val.v.s.len >= sizeof(h->mom.e[0].str)) {
			snprintf(why, whylen, "key_value_store: %.*s: string longer than %zu",
				 (int)VD_MIN(m->klen, (size_t)64), m->key, sizeof(h->mom.e[0].str) - 1);
			return VD_EINVAL;
		}
	}
	pthread_mutex_lock(&h->mom.lock);
	int rc = 0;
	for (size_t i = 0; i < kv->v.obj.n; i++) {
		const struct vd_member *m = &kv->v.obj.members[i];
		size_t j;
		for (j = 0; j < h->mom.n; j++)
			if (strlen(h->mom.e[j].key) == m->klen &&
			    memcmp(h->mom.e[j].key, m->key, m->klen) == 0)
				break;
		if (j == h->mom.n) {
			if (h->mom.n >= HOST_MOM_MAX) {
				snprintf(why, whylen, "key_value_store: more than %d keys", HOST_MOM_MAX);
				rc = VD_ETOOBIG;
				break;
			}
			h->mom.n++;
		}
		struct host_mom_entry *e = &h->mom.e[j];
		memset(e, 0, sizeof(*e));
		memcpy(e->key, m->key, m->klen);
		e->val = m->val;
		if (m->val.type == VD_STRING) {
			memcpy(e->str, m->val.v.s.ptr, m->val.v.s.len);
			e->val.v.s.ptr = NULL;   /* e->str holds it */
		}
	}
	pthread_mutex_unlock(&h->mom.lock);
	return rc;
}

void host_mom_write(struct host_state *h, struct vd_writer *w)
{
	vw_keyz(w, "momPolicy");
	vw_begin_object(w);
	pthread_mutex_lock(&h->mom.lock);
	for (size_t i = 0; i < h->mom.n; i++) {
		const struct host_mom_entry *e = &h->mom.e[i];
		vw_keyz(w, e->key);
		switch (e->val.type) {
		case VD_BOOL:
			vw_bool(w, e->val.v.b);
			break;
		case VD_INT:
			vw_int(w, e->val.v.i);
			break;
		case VD_UINT:
			vw_uint(w, e->val.v.u);
			break;
		case VD_DOUBLE:
			vw_double(w, e->val.v.d);
			break;
		default:
			vw_strz(w, e->str);
			break;
		}
	}
	pthread_mutex_unlock(&h->mom.lock);
	vw_end_object(w);
}

int host_set_mom_policy_parameters(struct rpc_call *c)
{
	struct host_state *h = state_of(c);
	if (!h)
		return rpc_fail(c, RPC_E_RECOVERING, "host backend not started");
	char why[160];
	if (host_mom_set(h, rpc_arg(c, "key_value_store"), why, sizeof(why)) < 0)
		return rpc_fail(c, RPC_E_PARAMS, "%s", why);
	return 0;
}

/* Host.getJobs: the storage backend's jobs (SDM.copy_data), through the
 * peer the daemon plugged in (memory only); none: no jobs. */
int host_get_jobs(struct rpc_call *c)
{
	struct host_state *h = state_of(c);
	const struct host_peers *peers = h ? atomic_load(&h->peers) : NULL;
	if (peers && peers->write_jobs) {
		peers->write_jobs(peers->ctx, c->w, rpc_arg_str(c, "job_type", NULL),
				  rpc_arg(c, "job_ids"));
	} else {
		vw_begin_object(c->w);
		vw_end_object(c->w);
	}
	return 0;
}

int host_hostdev_list_by_caps(struct rpc_call *c)
{
	struct host_state *h = state_of(c);
	struct host_strv caps = { 0 };
	const struct vd_value *a = rpc_arg(c, "caps");
	if (a && a->type == VD_ARRAY)
		for (size_t i = 0; i < a->v.arr.n && i < 32; i++)
			if (a->v.arr.items[i].type == VD_STRING)
				host_strv_add(&caps, a->v.arr.items[i].v.s.ptr,
					      a->v.arr.items[i].v.s.len);
	const char *uri = h && h->d ? h->d->cfg.libvirt_uri : NULL;
	char why[256] = "";
	/* written into a scratch buffer first: a failure half-way must not
	 * leave a partial result in the response */
	struct vd_buf tmp = VD_BUF_INIT;
	struct vd_writer tw;
	const struct vd_codec *codec = NULL;
	for (const struct vd_codec *const *cl = codec_list(); *cl && !codec; cl++) {
		struct vd_buf tb = VD_BUF_INIT;
		(*cl)->writer_init(&tw, &tb);
		if (tw.ops == c->w->ops)
			codec = *cl;
		buf_free(&tb);
	}
	int rc;
	if (codec) {
		codec->writer_init(&tw, &tmp);
		rc = host_hostdev_list(uri, &caps, &tw, why, sizeof(why));
		if (rc == 0)
			vw_raw(c->w, tmp.data, tmp.len);
	} else {
		rc = host_hostdev_list(uri, &caps, c->w, why, sizeof(why));
	}
	buf_free(&tmp);
	host_strv_free(&caps);
	if (rc < 0)
		return rpc_fail(c, RPC_E_GENERAL, "%s", why);
	return 0;
}
