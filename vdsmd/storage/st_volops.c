/* vdsmd/storage/st_volops.c - volume maintenance: Volume.setLegality,
 * Volume.refresh, Volume.getQemuImageInfo.  Metadata first, memory after;
 * qemu-img only ever gets a path checked through the domain's directory
 * descriptor (st_image_prepare2). */
#include "st.h"
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
		return st_fail(e, RPC_E_GENERAL, "writing volume metadata: %s", strerror(-rc));
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
		return st_fail(e, RPC_E_GENERAL, "volume %s: %s", vol, strerror(-rc));
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

/* qemu-img <argv> on the volume's checked path (argv's NULL slot at
 * path_at is filled), its JSON output in *b (the caller frees it after the
 * tree: strings point into it) parsed into *root (arena a). */
static int qemu_json(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     char **argv, int path_at, struct vd_arena *a, struct vd_buf *b,
		     struct vd_value **root, struct st_err *e)
{
	struct st_chain c;
	if (st_image_prepare2(s, sd, NULL, img, vol, true, &c, e) < 0)
		return -1;
	argv[path_at] = c.paths[0];
	char err[512];
	int rc = st_run_tool_out(s, NULL, "qemu-img", "qemu-utils", argv, -1, b, err, sizeof(err));
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
	int rc = qemu_json(s, sd, img, vol, argv, 6, &a, &b, &root, e);
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

int st_volume_qemu_info(struct storage_state *s, const char *sd, const char *img,
			const char *vol, struct st_qinfo *out, struct st_err *e)
{
	memset(out, 0, sizeof(*out));
	char *argv[] = { (char *)"qemu-img", (char *)"info", (char *)"--output=json", (char *)"-U",
			 NULL, NULL };
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_value *root = NULL;
	struct vd_buf b = VD_BUF_INIT;
	if (qemu_json(s, sd, img, vol, argv, 4, &a, &b, &root, e) < 0) {
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

int st_volume_extend(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     int64_t new_size, char task_id[37], struct st_err *e)
{
	if (new_size <= 0 || new_size % 512 != 0)
		return st_fail(e, RPC_E_PARAMS, "newSize: a positive multiple of 512");
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, sd, img, vol, &d, e);
	int rc = v ? st_spm_require(s, d, e) : -1;
	if (rc == 0 && v->busy)
		rc = st_fail(e, RPC_E_GENERAL, "volume %s is busy", vol);
	if (rc == 0 && !v->legal)
		rc = st_fail(e, RPC_E_GENERAL, "volume %s is ILLEGAL", vol);
	if (rc == 0 && new_size < v->capacity)
		rc = st_fail(e, RPC_E_PARAMS, "newSize: %lld is smaller than the volume (%lld); "
			     "volumes only grow", (long long)new_size, (long long)v->capacity);
	if (rc == 0 && !st_task_queue_has_room(s))
		rc = st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
	if (rc < 0) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	v->busy = true;
	d->busy++;
	pthread_mutex_unlock(&s->lock);
	struct st_task *t = st_task_alloc(ST_TK_EXTEND);
	snprintf(t->sd, sizeof(t->sd), "%.36s", sd);
	snprintf(t->img, sizeof(t->img), "%.36s", img);
	snprintf(t->vol, sizeof(t->vol), "%.36s", vol);
	t->vols = xcalloc(1, sizeof(*t->vols));
	snprintf(t->vols[0], 37, "%.36s", vol);
	t->nvols = 1;
	t->size = new_size;
	rc = st_task_persist(s, t);
	if (rc < 0) {
		pthread_mutex_lock(&s->lock);
		v->busy = false;
		d->busy--;
		pthread_mutex_unlock(&s->lock);
		st_task_free(t);
		return st_fail(e, RPC_E_GENERAL, "cannot record the task: %s", strerror(-rc));
	}
	snprintf(task_id, 37, "%.36s", t->id);
	st_task_submit(s, t);
	return 0;
}

/* Data first (RAW: ftruncate, preallocated: fallocate the new part; COW:
 * qemu-img resize), synced, then the metadata's CAP, then memory.  A failed
 * data step puts a RAW file back to its old size. */
bool st_volume_grown(const struct st_domain *d, const struct st_volume *v, int64_t size)
{
	int ifd = st_img_open(d, v->image, false);
	int fd = ifd < 0 ? -1 : openat(ifd, v->uuid, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (ifd >= 0)
		close(ifd);
	if (fd < 0)
		return false;
	struct stat st;
	int64_t have = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		if (v->format != ST_FMT_COW) {
			have = st.st_size;
		} else {   /* qcow2 header: magic, version, ..., size at 24 (BE) */
			unsigned char h[32];
			if (pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
			    memcmp(h, "QFI\xfb", 4) == 0) {
				uint64_t vs = 0;
				for (int i = 0; i < 8; i++)
					vs = vs << 8 | h[24 + i];
				have = vs > INT64_MAX ? -1 : (int64_t)vs;
			}
		}
	}
	close(fd);
	return have >= size;
}

void st_volume_run_extend(struct storage_state *s, struct st_task *t)
{
	char err[256] = "";
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, t->sd);
	struct st_volume copy = *(struct st_volume *)map_get(&d->volumes, t->vol);
	pthread_mutex_unlock(&s->lock);
	int rc = 0;
	int ifd = -1, fd = -1;
	if (__atomic_load_n(&t->abort, __ATOMIC_ACQUIRE)) {
		rc = -ECANCELED;
		st_task_abort_msg(s, t, err, sizeof(err));
		goto out;
	}
	ifd = st_img_open(d, t->img, false);
	fd = ifd < 0 ? -1 : openat(ifd, t->vol, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = fd < 0 ? (ifd < 0 ? ifd : -errno) : -EINVAL;
		snprintf(err, sizeof(err), "volume data file: %s", strerror(-rc));
		goto out;
	}
	if (copy.format == ST_FMT_COW) {
		char size[32];
		snprintf(size, sizeof(size), "%lld", (long long)t->size);
		/* backing null: the backing file is not opened (its relative
		 * name would be resolved against /proc/self/fd) nor needed */
		char *argv[] = { (char *)"qemu-img", (char *)"resize", (char *)"-q",
				 (char *)"json:{\"driver\":\"qcow2\",\"backing\":null,\"file\":"
				 "{\"driver\":\"file\",\"filename\":\"/proc/self/fd/3\"}}",
				 size, NULL };
		rc = st_run_qemu_img(s, t, argv, fd, err, sizeof(err));
	} else {
		off_t old = st.st_size;
		if (ftruncate(fd, t->size) < 0)
			rc = -errno;
		if (rc == 0 && copy.alloc == ST_PREALLOCATED && t->size > old &&
		    fallocate(fd, 0, old, t->size - old) < 0 && errno != EOPNOTSUPP)
			rc = -errno;
		if (rc < 0) {
			snprintf(err, sizeof(err), "growing to %lld bytes: %s", (long long)t->size,
				 strerror(-rc));
			if (ftruncate(fd, old) < 0)
				log_error("storage: volume %s: cannot shrink back: %s", t->vol,
					  strerror(errno));
		}
	}
	if (rc == 0 && fsync(fd) < 0) {
		rc = -errno;
		snprintf(err, sizeof(err), "syncing: %s", strerror(-rc));
	}
	if (rc == 0) {
		ST_CRASH("extend.grown");
		copy.capacity = t->size;
		copy.mtime = (int64_t)time(NULL);
		if ((rc = st_vol_write_meta(d, &copy)) < 0)
			snprintf(err, sizeof(err), "writing volume metadata: %s", strerror(-rc));
		else
			ST_CRASH("extend.meta");
	}
out:
	if (fd >= 0)
		close(fd);
	if (ifd >= 0)
		close(ifd);
	int64_t app = 0, tru = 0;
	bool sized = st_vol_stat(d, t->img, t->vol, &app, &tru) == 0;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, t->vol);
	if (rc == 0) {
		v->capacity = t->size;
		v->mtime = copy.mtime;
	}
	if (sized) {
		v->apparent = app;
		v->truesize = tru;
	}
	v->busy = false;
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
	else
		st_task_finish(s, t, ST_TR_CLEAN_SUCCESS,
			       rc == -ECANCELED ? rpc_err_code(RPC_E_TASK_ABORTED) : 100, err);
}
