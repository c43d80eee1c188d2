/* vdsmd/storage/st_image.c - Image.prepare / teardown: the chain of volumes
 * a disk is made of, as paths another backend (virt) can hand to QEMU.
 *
 * The chain is read from the index under the lock (memory only), then each
 * path is checked off the lock through the domain's directory descriptor
 * (st_safe.c): a regular file, no symlink anywhere below the domain.  Every
 * volume of the chain must be LEGAL and not busy with a create/delete. */
#include "st_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_chain_free(struct st_chain *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->paths[i]);
	free(c->paths);
	memset(c, 0, sizeof(*c));
}

int st_image_prepare(struct storage_state *s, const char *sd, const char *sp, const char *img,
		     const char *vol, struct st_chain *out, struct st_err *e)
{
	return st_image_prepare2(s, sd, sp, img, vol, false, out, e);
}

/* The checks of st_image_prepare2 that concern the image alone: the
 * domain, its pool and the image exist (Image.teardown without volumeID). */
int st_image_check(struct storage_state *s, const char *sd, const char *sp, const char *img,
		   struct st_err *e)
{
	if (!st_is_uuid(img))
		return st_fail(e, RPC_E_PARAMS, "imageID: not a UUID");
	bool any_pool = !sp || !*sp || strcmp(sp, ST_BLANK_UUID) == 0;
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, sd, e);
	if (!d)
		rc = -1;
	else if (!any_pool && strcmp(d->pool, sp) != 0)
		rc = st_fail(e, RPC_E_NO_POOL, "%s (domain %s is not attached to it)", sp, sd);
	else if (!map_get(&d->images, img))
		rc = st_fail(e, RPC_E_NO_IMAGE, "%s in domain %s", img, sd);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int st_image_prepare2(struct storage_state *s, const char *sd, const char *sp, const char *img,
		      const char *vol, bool allow_illegal, struct st_chain *out,
		      struct st_err *e)
{
	memset(out, 0, sizeof(*out));
	if (!st_is_uuid(img) || !st_is_uuid(vol))
		return st_fail(e, RPC_E_PARAMS, "%s: not a UUID", st_is_uuid(img) ? "volumeID" : "imageID");
	bool any_pool = !sp || !*sp || strcmp(sp, ST_BLANK_UUID) == 0;
	char (*ids)[2][37] = NULL;
	size_t n = 0;
	char *dir = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = st_domain_get(s, sd, e);
	if (!d)
		goto fail;
	if (!any_pool && strcmp(d->pool, sp) != 0) {
		st_fail(e, RPC_E_NO_POOL, "%s (domain %s is not attached to it)", sp, sd);
		goto fail;
	}
	if (!map_get(&d->images, img)) {
		st_fail(e, RPC_E_NO_IMAGE, "%s in domain %s", img, sd);
		goto fail;
	}
	struct st_volume *v = map_get(&d->volumes, vol);
	if (!v || strcmp(v->image, img) != 0) {
		st_fail(e, RPC_E_NO_VOLUME, "%s in image %s", vol, img);
		goto fail;
	}
	/* leaf first, up the backing chain (bounded: a corrupt loop stops) */
	while (v && n < 256) {
		if ((!v->legal && !allow_illegal) || v->busy) {
			st_fail(e, RPC_E_GENERAL, "volume %s of the chain is %s", v->uuid,
				v->busy ? "busy" : "ILLEGAL");
			goto fail;
		}
		ids = xrealloc(ids, (n + 1) * sizeof(*ids));
		snprintf(ids[n][0], 37, "%s", v->image);
		snprintf(ids[n][1], 37, "%s", v->uuid);
		n++;
		if (strcmp(v->parent, ST_BLANK_UUID) == 0)
			break;
		struct st_volume *p = map_get(&d->volumes, v->parent);
		if (!p) {
			st_fail(e, RPC_E_GENERAL, "parent %s of volume %s is missing", v->parent, v->uuid);
			goto fail;
		}
		v = p;
	}
	if (n == 256) {
		st_fail(e, RPC_E_GENERAL, "volume chain of %s is too long or loops", vol);
		goto fail;
	}
	d->busy++;   /* pinned while its files are checked */
	dir = xstrdup(d->dir);
	out->leases = st_dom_has_volume_leases(d);
	pthread_mutex_unlock(&s->lock);

	int rc = 0;
	out->paths = xcalloc(n, sizeof(*out->paths));
	for (size_t i = 0; i < n && rc == 0; i++) {
		int64_t app, tru;
		rc = st_vol_stat(d, ids[i][0], ids[i][1], &app, &tru);
		if (rc < 0)
			st_fail_rc(e, RPC_E_GENERAL, rc, "volume %s/%s: data file unusable", ids[i][0],
				   ids[i][1]);
		else
			out->paths[out->n++] = st_pathf("%s/images/%s/%s", dir, ids[i][0], ids[i][1]);
	}
	pthread_mutex_lock(&s->lock);
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	free(dir);
	free(ids);
	if (rc < 0) {
		st_chain_free(out);
		return -1;
	}
	return 0;
fail:
	pthread_mutex_unlock(&s->lock);
	free(ids);
	return -1;
}

/* ---- the chain for qemu-img, from our metadata ---------------------------- */

static void json_str(struct vd_buf *b, const char *s)
{
	buf_append(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			buf_printf(b, "\\%c", c);
		else if (c < 0x20)
			buf_printf(b, "\\u%04x", c);
		else
			buf_append(b, s, 1);
	}
	buf_append(b, "\"", 1);
}

static char *chain_json(struct storage_state *s, const struct st_domain *d, const char *vol,
		       bool top_only, char *err, size_t errlen)
{
	enum { MAXDEPTH = 256 };
	struct lvl {
		char img[37], vol[37];
		int fmt;
	} *lv = xcalloc(MAXDEPTH, sizeof(*lv));
	size_t n = 0;
	bool broken = false;
	pthread_mutex_lock(&s->lock);
	const struct st_volume *v = map_get(&d->volumes, vol);
	broken = !v;
	while (v && n < MAXDEPTH) {
		snprintf(lv[n].img, 37, "%s", v->image);
		snprintf(lv[n].vol, 37, "%s", v->uuid);
		lv[n++].fmt = v->format;
		if (top_only || v->format != ST_FMT_COW || strcmp(v->parent, ST_BLANK_UUID) == 0)
			break;
		v = map_get(&d->volumes, v->parent);
		broken = !v;
	}
	pthread_mutex_unlock(&s->lock);
	char *out = NULL;
	if (broken || n == MAXDEPTH) {
		snprintf(err, errlen, "volume %s: its chain is incomplete or too deep", vol);
		goto done;
	}
	struct vd_buf b = VD_BUF_INIT;
	buf_printf(&b, "json:");
	for (size_t i = 0; i < n; i++) {
		int64_t app, tru;
		int rc = st_vol_stat(d, lv[i].img, lv[i].vol, &app, &tru);
		if (rc < 0) {
			st_errf(err, errlen, rc, "volume %s/%s: data file unusable", lv[i].img,
				lv[i].vol);
			buf_free(&b);
			goto done;
		}
		char *p = st_pathf("%s/images/%s/%s", d->dir, lv[i].img, lv[i].vol);
		buf_printf(&b, "{\"driver\":\"%s\",\"file\":{\"driver\":\"file\",\"filename\":",
			   lv[i].fmt == ST_FMT_COW ? "qcow2" : "raw");
		json_str(&b, p);
		free(p);
		buf_printf(&b, "}");
		if (lv[i].fmt == ST_FMT_COW)
			buf_printf(&b, ",\"backing\":%s", i + 1 < n ? "" : "null");
	}
	for (size_t i = 0; i < n; i++)
		buf_printf(&b, "}");
	out = xstrndup(b.data, b.len);
	buf_free(&b);
done:
	free(lv);
	return out;
}

char *st_chain_json(struct storage_state *s, const struct st_domain *d, const char *vol,
		    char *err, size_t errlen)
{
	return chain_json(s, d, vol, false, err, errlen);
}

char *st_chain_json_top(struct storage_state *s, const struct st_domain *d, const char *vol,
			char *err, size_t errlen)
{
	return chain_json(s, d, vol, true, err, errlen);
}

char *st_fd3_json(struct storage_state *s, const struct st_domain *d, int fmt,
		  const char *parent, char *err, size_t errlen)
{
	static const char file3[] = "\"file\":{\"driver\":\"file\",\"filename\":\"/proc/self/fd/3\"}";
	if (fmt != ST_FMT_COW)
		return st_pathf("json:{\"driver\":\"raw\",%s}", file3);
	char *pspec = NULL;
	if (parent && strcmp(parent, ST_BLANK_UUID) != 0) {
		pspec = chain_json(s, d, parent, false, err, errlen);
		if (!pspec)
			return NULL;
	}
	char *out = st_pathf("json:{\"driver\":\"qcow2\",%s,\"backing\":%s}", file3,
			     pspec ? pspec + strlen("json:") : "null");
	free(pspec);
	return out;
}
