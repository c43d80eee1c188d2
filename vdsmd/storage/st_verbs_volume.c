/* vdsmd/storage/st_verbs_volume.c - Image.*, Volume.*, Task.* and the
 * Host task listings.  Volume.getInfo / getSize / Image.getVolumes and the
 * task reads are answered from the index (no disk I/O). */
#include "st_verbs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	vw_kstr(w, "voltype", v->nchildren ? "INTERNAL" : "LEAF");
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
	 * getInfo: sanlock, i.e. NFS / POSIXFS domains of version 3 and up;
	 * LOCALFS domains use LocalLock, versions 0-2 SafeLease, neither has
	 * them).  No host holds a volume lease here: no owners, version null,
	 * as VDSM reports a free lease.  Its path / offset are left out:
	 * vdsmd keeps no <volume>.lease file to point at. */
	if (d->type != ST_DT_LOCALFS && d->version >= 3) {
		vw_keyz(w, "lease");
		vw_begin_object(w);
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

/* Finds a volume under the lock (held on success; released on failure). */
static const struct st_volume *lookup(struct rpc_call *c, struct storage_state **sp,
				      const struct st_domain **dp)
{
	struct st_err e = { 0 };
	const char *img = rpc_arg_str(c, "imageID", NULL), *vol = rpc_arg_str(c, "volumeID", NULL);
	const struct st_domain *d = verb_lock_domain(c, sp);
	const struct st_volume *v = NULL;
	if (!d)
		return NULL;
	if (!map_get(&d->images, img))
		st_fail(&e, RPC_E_NO_IMAGE, "%s in domain %s", img, d->uuid);
	else if (!(v = map_get(&d->volumes, vol)) || strcmp(v->image, img) != 0) {
		v = NULL;
		st_fail(&e, RPC_E_NO_VOLUME, "%s in image %s", vol, img);
	}
	if (!v) {
		pthread_mutex_unlock(&(*sp)->lock);
		verb_fail(c, &e);
		return NULL;
	}
	*dp = d;
	return v;
}

int vh_vol_get_info(struct rpc_call *c)
{
	struct storage_state *s;
	const struct st_domain *d;
	const struct st_volume *v = lookup(c, &s, &d);
	if (!v)
		return -1;
	verb_write_volume_info(c->w, s, d, v);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_vol_get_size(struct rpc_call *c)
{
	struct storage_state *s;
	const struct st_domain *d;
	const struct st_volume *v = lookup(c, &s, &d);
	if (!v)
		return -1;
	vw_begin_object(c->w);
	vw_kstrf(c->w, "apparentsize", "%lld", (long long)v->apparent);
	vw_kstrf(c->w, "truesize", "%lld", (long long)v->truesize);
	vw_end_object(c->w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int vh_img_get_volumes(struct rpc_call *c)
{
	struct storage_state *s;
	const struct st_domain *d = verb_lock_domain(c, &s);
	if (!d)
		return -1;
	const char *img = rpc_arg_str(c, "imageID", NULL);
	const struct st_image *im = map_get(&d->images, img);
	if (!im) {
		pthread_mutex_unlock(&s->lock);
		return rpc_fail(c, RPC_E_NO_IMAGE, "%s", img);
	}
	vw_begin_array(c->w);
	for (size_t i = 0; i < im->n; i++)
		vw_strz(c->w, im->vols[i]->uuid);
	vw_end_array(c->w);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int answer_task(struct rpc_call *c, int rc, const char *tid, const struct st_err *e)
{
	if (rc < 0)
		return verb_fail(c, e);
	vw_strz(c->w, tid);
	return 0;
}

/* postZero / discard are honoured (zeros written / blocks punched before
 * the removal); force is refused by the core (-32602). */
static struct st_delopts del_opts(struct rpc_call *c)
{
	struct st_delopts o = {
		.postzero = rpc_arg_bool(c, "postZero", false),
		.discard = rpc_arg_bool(c, "discard", false),
		.force = rpc_arg_bool(c, "force", false),
	};
	return o;
}

/* An integer from an int or a string of digits; -1 when absent, -2 when
 * malformed. */
static int64_t int_or_str(const struct vd_value *v)
{
	if (!v || v->type == VD_NULL)
		return -1;
	int64_t x;
	return rpc_value_int(v, &x) && x >= 0 ? x : -2;
}

int vh_img_delete(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	char tid[37];
	struct st_delopts o = del_opts(c);
	int rc = st_image_delete(s, rpc_arg_str(c, "storagedomainID", NULL),
				 rpc_arg_str(c, "imageID", NULL), &o, tid, &e);
	return answer_task(c, rc, tid, &e);
}

int vh_vol_create(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const struct vd_value *dt = rpc_arg(c, "diskType");
	char disktype[16] = "DATA";
	if (dt && dt->type == VD_STRING && dt->v.s.len > 0 && dt->v.s.len < sizeof(disktype)) {
		memcpy(disktype, dt->v.s.ptr, dt->v.s.len);
		disktype[dt->v.s.len] = '\0';
	} else if (dt && dt->type == VD_INT && dt->v.i >= 0 && dt->v.i < 100) {
		snprintf(disktype, sizeof(disktype), "%d", (int)dt->v.i);   /* old engines: 2 */
	} else if (dt && dt->type != VD_NULL) {
		return rpc_fail(c, RPC_E_PARAMS, "diskType: expected a DiskContentType");
	}
	int64_t fmt = rpc_arg_int(c, "volFormat", 0), alloc = rpc_arg_int(c, "preallocate", 0);
	int64_t initial = int_or_str(rpc_arg(c, "initialSize"));
	if (initial == -2)
		return rpc_fail(c, RPC_E_PARAMS, "initialSize: expected a non-negative integer");
	if (rpc_arg_bool(c, "addBitmaps", false))
		return rpc_fail(c, RPC_E_PARAMS, "addBitmaps: not supported");
	const struct vd_value *bm = rpc_arg(c, "bitmap");
	if (bm && bm->type != VD_NULL)
		return rpc_fail(c, RPC_E_PARAMS, "bitmap: not supported");
	int64_t seq = rpc_arg_int(c, "sequence", 0);
	if (seq < 0 || seq > INT32_MAX)
		return rpc_fail(c, RPC_E_PARAMS, "sequence: out of range");
	struct st_volreq r = {
		.sd = rpc_arg_str(c, "storagedomainID", NULL),
		.img = rpc_arg_str(c, "imageID", NULL),
		.vol = rpc_arg_str(c, "volumeID", NULL),
		.size = rpc_arg_int(c, "size", 0),
		.format = fmt == ST_FMT_COW || fmt == ST_FMT_RAW ? (int)fmt : 0,
		.alloc = alloc == ST_PREALLOCATED || alloc == ST_SPARSE ? (int)alloc : 0,
		.disktype = disktype,
		.desc = rpc_arg_str(c, "desc", NULL),
		.src_img = rpc_arg_str(c, "srcImgUUID", NULL),
		.src_vol = rpc_arg_str(c, "srcVolUUID", NULL),
		.illegal = !rpc_arg_bool(c, "legal", true),
		.initial_given = initial >= 0,
		.initial_size = initial,
		.sequence = (int)seq,
	};
	struct st_err e = { 0 };
	char tid[37];
	int rc = st_volume_create(s, &r, tid, &e);
	return answer_task(c, rc, tid, &e);
}

int vh_vol_delete(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	char tid[37];
	struct st_delopts o = del_opts(c);
	int rc = st_volume_delete(s, rpc_arg_str(c, "storagedomainID", NULL),
				  rpc_arg_str(c, "imageID", NULL), rpc_arg_str(c, "volumeID", NULL),
				  &o, tid, &e);
	return answer_task(c, rc, tid, &e);
}

int vh_vol_set_description(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	if (st_volume_set_description(s, rpc_arg_str(c, "storagedomainID", NULL),
				      rpc_arg_str(c, "imageID", NULL),
				      rpc_arg_str(c, "volumeID", NULL),
				      rpc_arg_str(c, "description", NULL), &e) < 0)
		return verb_fail(c, &e);
	return 0;
}

/* ---- tasks --------------------------------------------------------------- */

static void write_status(struct vd_writer *w, const struct st_task_status *st)
{
	vw_begin_object(w);
	vw_kstr(w, "taskID", st->id);
	vw_kstr(w, "taskState", st_task_state_name(st->state));
	vw_kstr(w, "taskResult", st_task_result_name(st->result));
	vw_kint(w, "code", st->code);
	vw_kstr(w, "message", st->message);
	vw_kint(w, "progress", st->progress);
	vw_end_object(w);
}

int vh_task_get_status(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	struct st_task_status st;
	if (st_task_get(s, rpc_arg_str(c, "taskID", NULL), &st, &e) < 0)
		return verb_fail(c, &e);
	write_status(c->w, &st);
	return 0;
}

int vh_task_clear(struct rpc_call *c)
{
	return verb_by_id(c, "taskID", st_task_clear);
}

int vh_task_stop(struct rpc_call *c)
{
	return verb_by_id(c, "taskID", st_task_stop);
}

int vh_host_get_all_tasks_statuses(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	vw_begin_object(c->w);
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->tasks); it; it = map_next(&s->tasks, it)) {
		struct st_task_status st;
		st_task_status_copy(map_val(it), &st);
		vw_keyz(c->w, st.id);
		write_status(c->w, &st);
	}
	pthread_mutex_unlock(&s->lock);
	vw_end_object(c->w);
	return 0;
}

int vh_host_get_all_tasks_info(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	vw_begin_object(c->w);
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->tasks); it; it = map_next(&s->tasks, it)) {
		const struct st_task *t = map_val(it);
		vw_keyz(c->w, t->id);
		vw_begin_object(c->w);
		vw_kstr(c->w, "verb", t->verb);
		vw_kstr(c->w, "id", t->id);
		vw_end_object(c->w);
	}
	pthread_mutex_unlock(&s->lock);
	vw_end_object(c->w);
	return 0;
}

int vh_img_delete_volumes(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	const struct vd_value *list = rpc_arg(c, "volumeList");
	size_t n = list->v.arr.n;
	if (n == 0 || n > 1024)
		return rpc_fail(c, RPC_E_PARAMS, "volumeList: 1 to 1024 volume UUIDs expected");
	const char **ids = arena_alloc(c->arena, n * sizeof(*ids));
	for (size_t i = 0; i < n; i++) {
		const struct vd_value *it = &list->v.arr.items[i];
		ids[i] = arena_strndup(c->arena, it->v.s.ptr, it->v.s.len);
	}
	struct st_delopts o = del_opts(c);
	struct st_err e = { 0 };
	char tid[37];
	int rc = st_volumes_delete(s, rpc_arg_str(c, "storagedomainID", NULL),
				   rpc_arg_str(c, "imageID", NULL), ids, n, &o, tid, &e);
	return answer_task(c, rc, tid, &e);
}
