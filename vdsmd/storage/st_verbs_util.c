/* vdsmd/storage/st_verbs_util.c - what the storage verbs share: the state
 * or "storage is not available", failures, lookups under the lock, one
 * volume's VolumeInfo, a task id answer, the delete options. */
#include "st_verbs.h"
#include "../vdsmd.h"

#include <string.h>

struct storage_state *verb_state(struct rpc_call *c)
{
	struct vdsmd *d = c->app;
	if (!d || !d->storage) {
		rpc_fail(c, RPC_E_GENERAL, "storage is not available (see the log for storage_root)");
		return NULL;
	}
	return d->storage;
}

int verb_fail(struct rpc_call *c, const struct st_err *e)
{
	return rpc_fail(c, e->code ? e->code : RPC_E_GENERAL, "%s", e->msg);
}

int verb_by_id(struct rpc_call *c, const char *arg,
	       int (*op)(struct storage_state *s, const char *id, struct st_err *e))
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (op(s, rpc_arg_str(c, arg, NULL), &e) < 0)
		return verb_fail(c, &e);
	return 0;
}

const struct st_domain *verb_lock_domain(struct rpc_call *c, struct storage_state **sp)
{
	struct storage_state *s = *sp = verb_state(c);
	if (!s)
		return NULL;
	struct st_err e = { 0 };
	pthread_mutex_lock(&s->lock);
	const struct st_domain *d = st_domain_get(s, rpc_arg_str(c, "storagedomainID", NULL), &e);
	if (!d) {
		pthread_mutex_unlock(&s->lock);
		verb_fail(c, &e);
	}
	return d;
}

/* Absent, null or "" : "no filter", as VDSM reads these params. */
bool verb_is_null(const struct vd_value *v)
{
	return !v || v->type == VD_NULL || (v->type == VD_STRING && v->v.s.len == 0);
}

static const char *pool_of(const struct storage_state *s, const struct st_domain *d)
{
	(void)s;
	return d->pool[0] ? d->pool : ST_BLANK_UUID;
}

void verb_write_volume_info(struct vd_writer *w, const struct storage_state *s,
			    const struct st_domain *d, const struct st_volume *v)
{
	const struct st_image *im = map_get(&d->images, v->image);
	vw_begin_object(w);
	vw_kstr(w, "uuid", v->uuid);
	vw_kstr(w, "type", st_alloc_name(v->alloc));
	vw_kstr(w, "allocType", st_alloc_name(v->alloc));
	vw_kstr(w, "format", st_volfmt_name(v->format));
	vw_kstr(w, "disktype", v->disktype);
	vw_kstr(w, "voltype", v->shared ? "SHARED" : v->nchildren ? "INTERNAL" : "LEAF");
	vw_kstrf(w, "capacity", "%lld", (long long)v->capacity);
	vw_kstr(w, "parent", v->parent);
	vw_kstr(w, "description", v->description ? v->description : "");
	vw_kstr(w, "pool", pool_of(s, d));
	vw_kstr(w, "domain", d->uuid);
	vw_kstr(w, "image", v->image);
	vw_kstrf(w, "ctime", "%lld", (long long)v->ctime);
	vw_kstrf(w, "mtime", "%lld", (long long)v->mtime);
	vw_kstr(w, "legality", v->legal ? "LEGAL" : "ILLEGAL");
	vw_kstrf(w, "apparentsize", "%lld", (long long)v->apparent);
	vw_kstrf(w, "truesize", "%lld", (long long)v->truesize);
	vw_kstr(w, "status", v->legal ? "OK" : "ILLEGAL");
	/* VDSM sends "lease" only for a domain with volume leases (volume.py
	 * getInfo, fileSD.py getVolumeLease): the path of <volume>.lease
	 * beside the data (made with the volume), offset 0.  No host holds a
	 * volume lease here: no owners, version null, as VDSM reports a free
	 * lease. */
	if (st_dom_has_volume_leases(d)) {
		vw_keyz(w, "lease");
		vw_begin_object(w);
		vw_kstrf(w, "path", "%s/images/%s/%s" ST_LEASE_EXT, d->dir, v->image, v->uuid);
		vw_kint(w, "offset", 0);
		vw_keyz(w, "owners");
		vw_begin_array(w);
		vw_end_array(w);
		vw_keyz(w, "version");
		vw_null(w);
		vw_end_object(w);
	}
	vw_keyz(w, "children");
	vw_begin_array(w);
	for (size_t i = 0; v->nchildren && im && i < im->n; i++)
		if (strcmp(im->vols[i]->parent, v->uuid) == 0)
			vw_strz(w, im->vols[i]->uuid);
	vw_end_array(w);
	vw_kint(w, "generation", v->generation);
	vw_kint(w, "sequence", v->sequence);
	vw_end_object(w);
}

int verb_answer_task(struct rpc_call *c, int rc, const char *tid, const struct st_err *e)
{
	if (rc < 0)
		return verb_fail(c, e);
	vw_strz(c->w, tid);
	return 0;
}

/* postZero / discard are honoured (zeros written / blocks punched before
 * the removal); force is refused by the core (-32602). */
struct st_delopts verb_del_opts(struct rpc_call *c)
{
	struct st_delopts o = {
		.postzero = rpc_arg_bool(c, "postZero", false),
		.discard = rpc_arg_bool(c, "discard", false),
		.force = rpc_arg_bool(c, "force", false),
	};
	return o;
}
