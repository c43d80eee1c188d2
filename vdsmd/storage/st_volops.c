/* vdsmd/storage/st_volops.c - volume maintenance: Volume.setLegality,
 * Volume.refresh, Volume.getQemuImageInfo.  Metadata first, memory after;
 * qemu-img only ever gets a path checked through the domain's directory
 * descriptor (st_image_prepare2). */
#include "st_ops.h"
#include "../../codecs/codec.h"
#include "../../common/arena.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int st_volume_set_legality(struct storage_state *s, const char *sd, const char *img,
			   const char *vol, bool legal, struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, sd, img, vol, &d, e);
	if (!v) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	if (v->busy) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_GENERAL, "volume %s is busy with another operation", vol);
	}
	v->busy = true;
	d->busy++;
	struct st_volume copy = *v;
	pthread_mutex_unlock(&s->lock);
	st_amend_unmark(s, vol);
	copy.legal = legal;
	copy.mtime = (int64_t)time(NULL);
	int rc = st_vol_write_meta(d, &copy);
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		v->legal = legal;
		v->mtime = copy.mtime;
	}
	v->busy = false;
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "writing volume metadata");
	return 0;
}

int st_volume_refresh(struct storage_state *s, const char *sd, const char *img, const char *vol,
		      struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, sd, img, vol, &d, e);
	if (v)
		d->busy++;
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return -1;
	int64_t app = 0, tru = 0;
	int rc = st_vol_stat(d, img, vol, &app, &tru);
	pthread_mutex_lock(&s->lock);
	v = map_get(&d->volumes, vol);
	if (rc == 0 && v && !v->busy) {
		v->apparent = app;
		v->truesize = tru;
	}
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "volume %s", vol);
	return 0;
}

static void copy_str(const struct vd_value *v, char *out, size_t len)
{
	if (v && v->type == VD_STRING)
		snprintf(out, len, "%.*s", (int)VD_MIN(v->v.s.len, len - 1), v->v.s.ptr);
}

static int64_t get_int(const struct vd_value *v)
{
	return v && v->type == VD_INT ? v->v.i : 0;
}

/* qemu-img <argv> on the volume's checked path (or path, when given; argv's
 * NULL slot at path_at is filled), its JSON output in *b (the caller frees
 * it after the tree: strings point into it) parsed into *root (arena a). */
static int qemu_json(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     const char *path, char **argv, int path_at, struct vd_arena *a,
		     struct vd_buf *b, struct vd_value **root, struct st_err *e)
{
	struct st_chain c = { 0 };
	if (!path && st_image_prepare2(s, sd, NULL, img, vol, true, &c, e) < 0)
		return -1;
	argv[path_at] = path ? (char *)path : c.paths[0];
	char err[512];
	int rc = st_run_tool_out(NULL, "qemu-img", "qemu-utils", argv, -1, b, err, sizeof(err));
	st_chain_free(&c);
	if (rc < 0)
		return st_fail(e, RPC_E_GENERAL, "%s", err);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error cerr;
	const struct vd_codec *json = codec_find("fallback");
	*root = NULL;
	rc = json ? json->decode(a, b->data ? b->data : "", b->len, &lim, root, &cerr) : -1;
	if (rc != 0 || !*root || (*root)->type != VD_OBJECT)
		return st_fail(e, RPC_E_GENERAL, "qemu-img %s: unexpected output", argv[1]);
	return 0;
}

int st_volume_measure(struct storage_state *s, const char *sd, const char *img, const char *vol,
		      int dst_format, int64_t *required, struct st_err *e)
{
	char *argv[] = { (char *)"qemu-img", (char *)"measure", (char *)"--output=json",
			 (char *)"-U", (char *)"-O",
			 (char *)(dst_format == ST_FMT_COW ? "qcow2" : "raw"), NULL, NULL };
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_value *root = NULL;
	struct vd_buf b = VD_BUF_INIT;
	int rc = qemu_json(s, sd, img, vol, NULL, argv, 6, &a, &b, &root, e);
	if (rc == 0) {
		*required = get_int(vd_obj_get(root, "required"));
		if (*required <= 0)
			rc = st_fail(e, RPC_E_GENERAL, "qemu-img measure: no size");
	}
	arena_free(&a);
	buf_free(&b);
	return rc;
}

void st_qinfo_free(struct st_qinfo *q)
{
	for (size_t i = 0; i < q->nbitmaps; i++)
		free(q->bitmaps[i].name);
	free(q->bitmaps);
	q->bitmaps = NULL;
	q->nbitmaps = 0;
}

/* format-specific.data.bitmaps: [{name, granularity, flags: [...]}, ...]
 * (present only when the qcow2 image has bitmaps). */
static void read_bitmaps(const struct vd_value *list, struct st_qinfo *out)
{
	if (!list || list->type != VD_ARRAY)
		return;
	out->has_bitmaps = true;
	out->bitmaps = list->v.arr.n ? xcalloc(list->v.arr.n, sizeof(*out->bitmaps)) : NULL;
	for (size_t i = 0; i < list->v.arr.n; i++) {
		const struct vd_value *b = &list->v.arr.items[i];
		const struct vd_value *name = vd_obj_get(b, "name");
		const struct vd_value *flags = vd_obj_get(b, "flags");
		if (!name || name->type != VD_STRING)
			continue;
		struct st_qbitmap *q = &out->bitmaps[out->nbitmaps++];
		q->name = xstrndup(name->v.s.ptr, name->v.s.len);
		q->granularity = get_int(vd_obj_get(b, "granularity"));
		for (size_t k = 0; flags && flags->type == VD_ARRAY && k < flags->v.arr.n; k++) {
			if (vd_str_eq(&flags->v.arr.items[k], "in-use"))
				q->flags |= ST_QBM_IN_USE;
			else if (vd_str_eq(&flags->v.arr.items[k], "auto"))
				q->flags |= ST_QBM_AUTO;
		}
	}
}

static int qinfo(struct storage_state *s, const char *sd, const char *img, const char *vol,
		 const char *path, struct st_qinfo *out, struct st_err *e)
{
	memset(out, 0, sizeof(*out));
	char *argv[] = { (char *)"qemu-img", (char *)"info", (char *)"--output=json", (char *)"-U",
			 NULL, NULL };
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_value *root = NULL;
	struct vd_buf b = VD_BUF_INIT;
	if (qemu_json(s, sd, img, vol, path, argv, 4, &a, &b, &root, e) < 0) {
		arena_free(&a);
		buf_free(&b);
		return -1;
	}
	copy_str(vd_obj_get(root, "format"), out->format, sizeof(out->format));
	out->virtual_size = get_int(vd_obj_get(root, "virtual-size"));
	const struct vd_value *cs = vd_obj_get(root, "cluster-size");
	out->has_cluster = cs && cs->type == VD_INT;
	out->cluster_size = get_int(cs);
	copy_str(vd_obj_get(root, "backing-filename"), out->backing, sizeof(out->backing));
	const struct vd_value *fs = vd_obj_get(root, "format-specific");
	const struct vd_value *data = fs ? vd_obj_get(fs, "data") : NULL;
	copy_str(data ? vd_obj_get(data, "compat") : NULL, out->compat, sizeof(out->compat));
	read_bitmaps(data ? vd_obj_get(data, "bitmaps") : NULL, out);
	arena_free(&a);
	buf_free(&b);
	return 0;
}

int st_volume_qemu_info(struct storage_state *s, const char *sd, const char *img,
			const char *vol, struct st_qinfo *out, struct st_err *e)
{
	return qinfo(s, sd, img, vol, NULL, out, e);
}

int st_qemu_info_path(const char *path, struct st_qinfo *out, struct st_err *e)
{
	return qinfo(NULL, NULL, NULL, NULL, path, out, e);
}
