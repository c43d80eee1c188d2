/* vdsmd/storage/st_index.c - the in-memory index: a UUID hash map and the
 * domain / image / volume records it holds.  Every function here is memory
 * only; callers hold storage_state.lock. */
#include "st_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_map_ent {
	char key[37];
	void *val;
	size_t bucket;
	struct st_map_ent *next;
};

static size_t hash_key(const char *k)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < 36 && k[i]; i++) {
		h ^= (unsigned char)k[i];
		h *= 1099511628211ull;
	}
	return (size_t)h;
}

void map_init(struct st_map *m)
{
	m->nb = 16;
	m->n = 0;
	m->b = xcalloc(m->nb, sizeof(*m->b));
}

void map_free(struct st_map *m)
{
	for (size_t i = 0; i < m->nb; i++) {
		struct st_map_ent *e = m->b[i];
		while (e) {
			struct st_map_ent *n = e->next;
			free(e);
			e = n;
		}
	}
	free(m->b);
	memset(m, 0, sizeof(*m));
}

static struct st_map_ent *find(const struct st_map *m, const char *key)
{
	if (!m->nb)
		return NULL;
	for (struct st_map_ent *e = m->b[hash_key(key) % m->nb]; e; e = e->next)
		if (strncmp(e->key, key, 37) == 0)
			return e;
	return NULL;
}

void *map_get(const struct st_map *m, const char *key)
{
	struct st_map_ent *e = find(m, key);
	return e ? e->val : NULL;
}

static void grow(struct st_map *m)
{
	size_t nb = m->nb * 2;
	struct st_map_ent **b = xcalloc(nb, sizeof(*b));
	for (size_t i = 0; i < m->nb; i++) {
		struct st_map_ent *e = m->b[i];
		while (e) {
			struct st_map_ent *n = e->next;
			e->bucket = hash_key(e->key) % nb;
			e->next = b[e->bucket];
			b[e->bucket] = e;
			e = n;
		}
	}
	free(m->b);
	m->b = b;
	m->nb = nb;
}

void map_put(struct st_map *m, const char *key, void *val)
{
	struct st_map_ent *e = find(m, key);
	if (e) {
		e->val = val;
		return;
	}
	if (m->n >= m->nb)
		grow(m);
	e = xcalloc(1, sizeof(*e));
	snprintf(e->key, sizeof(e->key), "%.36s", key);
	e->val = val;
	/* m->nb >= 16 from map_init() on */
	e->bucket = hash_key(e->key) % m->nb;  // NOLINT(clang-analyzer-core.UndefinedBinaryOperatorResult)
	e->next = m->b[e->bucket];
	m->b[e->bucket] = e;
	m->n++;
}

void *map_del(struct st_map *m, const char *key)
{
	if (!m->nb)
		return NULL;
	struct st_map_ent **pp = &m->b[hash_key(key) % m->nb];
	for (; *pp; pp = &(*pp)->next)
		if (strncmp((*pp)->key, key, 37) == 0) {
			struct st_map_ent *e = *pp;
			void *v = e->val;
			*pp = e->next;
			free(e);
			m->n--;
			return v;
		}
	return NULL;
}

struct st_map_ent *map_first(const struct st_map *m)
{
	for (size_t i = 0; i < m->nb; i++)
		if (m->b[i])
			return m->b[i];
	return NULL;
}

struct st_map_ent *map_next(const struct st_map *m, struct st_map_ent *e)
{
	if (e->next)
		return e->next;
	for (size_t i = e->bucket + 1; i < m->nb; i++)
		if (m->b[i])
			return m->b[i];
	return NULL;
}

const char *map_key(const struct st_map_ent *e)
{
	return e->key;
}

void *map_val(const struct st_map_ent *e)
{
	return e->val;
}

/* ---- records ------------------------------------------------------------- */

struct st_domain *dom_new(const char *uuid)
{
	struct st_domain *d = xcalloc(1, sizeof(*d));
	snprintf(d->uuid, sizeof(d->uuid), "%.36s", uuid);
	map_init(&d->images);
	map_init(&d->volumes);
	d->version = 5;
	return d;
}

void dom_free(struct st_domain *d)
{
	if (!d)
		return;
	for (struct st_map_ent *e = map_first(&d->volumes); e; e = map_next(&d->volumes, e))
		vol_free(map_val(e));
	for (struct st_map_ent *e = map_first(&d->images); e; e = map_next(&d->images, e)) {
		struct st_image *im = map_val(e);
		free(im->vols);
		free(im);
	}
	map_free(&d->images);
	map_free(&d->volumes);
	free(d->name);
	free(d->pool_desc);
	free(d->pool_doms);
	free(d->remote);
	free(d->base);
	free(d->dir);
	free(d);
}

struct st_volume *vol_new(void)
{
	struct st_volume *v = xcalloc(1, sizeof(*v));
	snprintf(v->parent, sizeof(v->parent), "%.36s", ST_BLANK_UUID);
	snprintf(v->disktype, sizeof(v->disktype), "DATA");
	v->format = ST_FMT_RAW;
	v->alloc = ST_SPARSE;
	return v;
}

void vol_free(struct st_volume *v)
{
	if (!v)
		return;
	free(v->description);
	free(v);
}

void index_add_volume(struct st_domain *d, struct st_volume *v)
{
	struct st_image *im = map_get(&d->images, v->image);
	if (!im) {
		im = xcalloc(1, sizeof(*im));
		snprintf(im->uuid, sizeof(im->uuid), "%.36s", v->image);
		map_put(&d->images, im->uuid, im);
	}
	if (im->n == im->cap) {
		im->cap = im->cap ? im->cap * 2 : 4;
		im->vols = xrealloc(im->vols, im->cap * sizeof(*im->vols));
	}
	im->vols[im->n++] = v;
	map_put(&d->volumes, v->uuid, v);
	struct st_volume *p = strcmp(v->parent, ST_BLANK_UUID) ? map_get(&d->volumes, v->parent) : NULL;
	if (p)
		p->nchildren++;
}

/* Removes (and frees) the volume; drops its image when it was the last. */
void index_del_volume(struct st_domain *d, const char *vol)
{
	struct st_volume *v = map_del(&d->volumes, vol);
	if (!v)
		return;
	struct st_volume *p = strcmp(v->parent, ST_BLANK_UUID) ? map_get(&d->volumes, v->parent) : NULL;
	if (p && p->nchildren)
		p->nchildren--;
	struct st_image *im = map_get(&d->images, v->image);
	if (im) {
		for (size_t i = 0; i < im->n; i++)
			if (im->vols[i] == v) {
				memmove(&im->vols[i], &im->vols[i + 1], (im->n - i - 1) * sizeof(*im->vols));
				im->n--;
				break;
			}
		if (im->n == 0) {
			map_del(&d->images, im->uuid);
			free(im->vols);
			free(im);
		}
	}
	vol_free(v);
}

bool index_has_children(const struct st_domain *d, const char *vol)
{
	const struct st_volume *v = map_get(&d->volumes, vol);
	return v && v->nchildren > 0;
}

void index_count_children(struct st_domain *d)
{
	for (struct st_map_ent *e = map_first(&d->volumes); e; e = map_next(&d->volumes, e))
		((struct st_volume *)map_val(e))->nchildren = 0;
	for (struct st_map_ent *e = map_first(&d->volumes); e; e = map_next(&d->volumes, e)) {
		const struct st_volume *v = map_val(e);
		struct st_volume *p = strcmp(v->parent, ST_BLANK_UUID)
			? map_get(&d->volumes, v->parent) : NULL;
		if (p)
			p->nchildren++;
	}
}
