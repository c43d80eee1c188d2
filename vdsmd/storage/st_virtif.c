/* vdsmd/storage/st_virtif.c - what virt needs of a volume (storage.h): for
 * VM.diskSizeExtend its sizes after a refresh and recording the capacity a
 * running VM's disk was resized to (VDSM's setVolumeSize); for a live
 * storage migration's pivot, marking the destination leaf LEGAL.  Metadata
 * first, memory after, as the volume verbs do. */
#include "st_ops.h"
#include "storage.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail_out(const struct st_err *e, enum rpc_err *err, char *msg, size_t msglen)
{
	*err = e->code ? e->code : RPC_E_GENERAL;
	snprintf(msg, msglen, "%s", e->msg);
	return -1;
}

int storage_volume_size(struct vdsmd *d, const char *sd, const char *img, const char *vol,
			struct storage_volsize *out, enum rpc_err *err, char *msg, size_t msglen)
{
	memset(out, 0, sizeof(*out));
	struct st_err e = { 0 };
	if (!d || !d->storage) {
		st_fail(&e, RPC_E_GENERAL, "storage is not available");
		return fail_out(&e, err, msg, msglen);
	}
	struct storage_state *s = d->storage;
	if (st_volume_refresh(s, sd, img, vol, &e) < 0)
		return fail_out(&e, err, msg, msglen);
	struct st_domain *dom = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, sd, img, vol, &dom, &e);
	if (v) {
		out->cow = v->format == ST_FMT_COW;
		out->capacity = v->capacity;
		out->apparent = v->apparent;
		out->truesize = v->truesize;
	}
	pthread_mutex_unlock(&s->lock);
	return v ? 0 : fail_out(&e, err, msg, msglen);
}

int storage_set_volume_capacity(struct vdsmd *d, const char *sd, const char *img,
				const char *vol, int64_t capacity, enum rpc_err *err, char *msg,
				size_t msglen)
{
	struct st_err e = { 0 };
	if (!d || !d->storage) {
		st_fail(&e, RPC_E_GENERAL, "storage is not available");
		return fail_out(&e, err, msg, msglen);
	}
	struct storage_state *s = d->storage;
	struct st_domain *dom = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, sd, img, vol, &dom, &e);
	if (v && v->busy)
		v = NULL, st_fail(&e, RPC_E_GENERAL, "volume %s is busy with another operation", vol);
	if (!v) {
		pthread_mutex_unlock(&s->lock);
		return fail_out(&e, err, msg, msglen);
	}
	v->busy = true;
	dom->busy++;
	struct st_volume copy = *v;
	pthread_mutex_unlock(&s->lock);
	copy.capacity = capacity;
	copy.mtime = (int64_t)time(NULL);
	int rc = st_vol_write_meta(dom, &copy);
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		v->capacity = capacity;
		v->mtime = copy.mtime;
	}
	v->busy = false;
	dom->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0) {
		st_fail_rc(&e, RPC_E_GENERAL, rc, "writing volume metadata");
		return fail_out(&e, err, msg, msglen);
	}
	return 0;
}

bool storage_path_is_volume(struct vdsmd *d, const char *real)
{
	if (!d || !d->storage || !real || real[0] != '/')
		return false;
	struct storage_state *s = d->storage;
	pthread_mutex_lock(&s->lock);
	size_t n = 0;
	char **dirs = xcalloc(s->domains.n + 1, sizeof(*dirs));
	for (struct st_map_ent *e = map_first(&s->domains); e; e = map_next(&s->domains, e)) {
		const struct st_domain *dom = map_val(e);
		if (dom->dir && !dom->formatting)
			dirs[n++] = xstrdup(dom->dir);
	}
	pthread_mutex_unlock(&s->lock);
	bool ok = false;
	for (size_t i = 0; i < n; i++) {
		char rd[PATH_MAX + 16];
		if (!ok && realpath(dirs[i], rd)) {
			strcat(rd, "/images/");
			size_t l = strlen(rd);
			/* exactly <image>/<file> below images/ */
			const char *rest = real + l, *slash;
			ok = strncmp(real, rd, l) == 0 && (slash = strchr(rest, '/')) &&
			     slash > rest && slash[1] && !strchr(slash + 1, '/');
		}
		free(dirs[i]);
	}
	free(dirs);
	return ok;
}

int storage_set_volume_legal(struct vdsmd *d, const char *sd, const char *img, const char *vol,
			     enum rpc_err *err, char *msg, size_t msglen)
{
	struct st_err e = { 0 };
	if (!d || !d->storage) {
		st_fail(&e, RPC_E_GENERAL, "storage is not available");
		return fail_out(&e, err, msg, msglen);
	}
	if (st_volume_set_legality(d->storage, sd, img, vol, true, &e) < 0)
		return fail_out(&e, err, msg, msglen);
	return 0;
}
