/* vdsmd/storage/st_pool_doms.c - the status of each domain in the pool
 * (POOL_DOMAINS in the master domain's metadata, as VDSM keeps it) and
 * StorageDomain.activate / deactivate, which change it.
 *
 * The encoded map is VDSM's: "sdUUID:Status,sdUUID:Status" with the
 * statuses Active, Attached (and, from reconstructMaster's domDict,
 * Unknown / Unattached).  Writers hold s->reg_lock, write the master's
 * metadata and only then change memory; st_pool_reload takes reg_lock too,
 * so a reload never puts back an older map over a newer one. */
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const status_names[] = {
	[ST_DS_UNKNOWN] = "Unknown", [ST_DS_ATTACHED] = "Attached",
	[ST_DS_UNATTACHED] = "Unattached", [ST_DS_ACTIVE] = "Active",
};

const char *st_dom_status_name(int st)
{
	return st > ST_DS_NONE && st <= ST_DS_ACTIVE ? status_names[st] : "Unknown";
}

int st_dom_status_parse(const char *s)
{
	if (!s)
		return ST_DS_NONE;
	for (int i = ST_DS_UNKNOWN; i <= ST_DS_ACTIVE; i++)
		if (strcasecmp(s, status_names[i]) == 0)
			return i;
	if (strcasecmp(s, "Inactive") == 0)   /* VDSM's DEPRECATED_STATUSES */
		return ST_DS_ATTACHED;
	return ST_DS_NONE;
}

/* Calls fn for each "uuid:status" entry; stops when fn returns true. */
static bool each_entry(const char *map, bool (*fn)(void *ctx, const char *uuid, size_t ulen,
						 const char *st, size_t slen), void *ctx)
{
	for (const char *p = map; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *colon = memchr(p, ':', len);
		if (colon && fn(ctx, p, (size_t)(colon - p), colon + 1, len - (size_t)(colon - p) - 1))
			return true;
		p = end ? end + 1 : p + len;
	}
	return false;
}

struct find_ctx {
	const char *sd;
	int status;
};

static bool find_one(void *ctx, const char *uuid, size_t ulen, const char *st, size_t slen)
{
	struct find_ctx *f = ctx;
	if (ulen != strlen(f->sd) || memcmp(uuid, f->sd, ulen) != 0)
		return false;
	char tmp[16];
	snprintf(tmp, sizeof(tmp), "%.*s", (int)(slen < 15 ? slen : 15), st);
	f->status = st_dom_status_parse(tmp);
	if (f->status == ST_DS_NONE)
		f->status = ST_DS_UNKNOWN;
	return true;
}

int st_dommap_get(const char *map, const char *sd)
{
	struct find_ctx f = { sd, ST_DS_NONE };
	each_entry(map, find_one, &f);
	return f.status;
}

struct put_ctx {
	const char *sd;
	struct vd_buf out;
};

static bool copy_other(void *ctx, const char *uuid, size_t ulen, const char *st, size_t slen)
{
	struct put_ctx *p = ctx;
	if (ulen == strlen(p->sd) && memcmp(uuid, p->sd, ulen) == 0)
		return false;
	buf_printf(&p->out, "%s%.*s:%.*s", p->out.len ? "," : "", (int)ulen, uuid, (int)slen, st);
	return false;
}

char *st_dommap_put(const char *map, const char *sd, int status)
{
	struct put_ctx p = { sd, VD_BUF_INIT };
	each_entry(map, copy_other, &p);
	if (status != ST_DS_NONE)
		buf_printf(&p.out, "%s%s:%s", p.out.len ? "," : "", sd, st_dom_status_name(status));
	char *out = xstrndup(p.out.data ? p.out.data : "", p.out.len);
	buf_free(&p.out);
	return out;
}

/* Caller holds the lock. */
static struct st_domain *pool_master(struct storage_state *s)
{
	if (!s->pool_connected || !s->pool_master[0])
		return NULL;
	struct st_domain *m = map_get(&s->domains, s->pool_master);
	return m && !m->formatting && m->master ? m : NULL;
}

/* A master written before POOL_DOMAINS was kept: every domain known here
 * that names the pool counts as Active (how they were served then).
 * Caller holds the lock; fresh string. */
static char *legacy_map(struct storage_state *s)
{
	char *map = xstrdup("");
	for (struct st_map_ent *it = map_first(&s->domains); it; it = map_next(&s->domains, it)) {
		const struct st_domain *d = map_val(it);
		if (d->formatting || strcmp(d->pool, s->pool_uuid) != 0)
			continue;
		char *m2 = st_dommap_put(map, d->uuid, ST_DS_ACTIVE);
		free(map);
		map = m2;
	}
	return map;
}

const char *st_pool_dommap(struct storage_state *s)
{
	struct st_domain *m = pool_master(s);
	if (m && !m->pool_doms)
		m->pool_doms = legacy_map(s);
	return m && m->pool_doms ? m->pool_doms : "";
}

int st_pool_dom_status(struct storage_state *s, const char *sd)
{
	return st_dommap_get(st_pool_dommap(s), sd);
}

int st_pool_set_dom_status(struct storage_state *s, const char *sd, int status)
{
	pthread_mutex_lock(&s->reg_lock);
	pthread_mutex_lock(&s->lock);
	struct st_domain *m = pool_master(s);
	char *map = m ? st_dommap_put(st_pool_dommap(s), sd, status) : NULL;
	if (m)
		m->busy++;
	pthread_mutex_unlock(&s->lock);
	int rc = m ? st_master_write_map(s, m, map) : VD_ENOENT;
	if (m) {
		pthread_mutex_lock(&s->lock);
		m->busy--;
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&s->reg_lock);
	if (rc == 0)
		log_info("storage: pool %s: domain %s %s", s->pool_uuid, sd,
			 status ? st_dom_status_name(status) : "removed");
	free(map);
	return rc;
}

void st_pool_reload(struct storage_state *s)
{
	pthread_mutex_lock(&s->reg_lock);
	pthread_mutex_lock(&s->lock);
	struct st_domain *m = pool_master(s);
	char *dir = m ? xstrdup(m->dir) : NULL;
	char pool[37];
	snprintf(pool, sizeof(pool), "%s", s->pool_uuid);
	pthread_mutex_unlock(&s->lock);
	struct st_kv kv;
	int dfd = dir ? st_dom_open(dir) : -1;
	int rc = dfd < 0 ? -1 : kv_read_at(&kv, dfd, "dom_md/metadata");
	if (dfd >= 0)
		close(dfd);
	if (rc == 0) {
		const char *p = kv_get(&kv, "POOL_UUID"), *role = kv_get(&kv, "ROLE");
		const char *map = kv_get(&kv, "POOL_DOMAINS");
		int ver = (int)kv_get_int(&kv, "MASTER_VERSION", -1);
		pthread_mutex_lock(&s->lock);
		/* still the same master of the same pool (memory may have moved on) */
		if (m == pool_master(s) && p && strcmp(p, pool) == 0 && role &&
		    strcmp(role, "Master") == 0 && map) {
			if (!m->pool_doms || strcmp(m->pool_doms, map) != 0) {
				free(m->pool_doms);
				m->pool_doms = xstrdup(map);
			}
			if (ver >= 0)
				m->master_ver = ver;
		}
		pthread_mutex_unlock(&s->lock);
		kv_free(&kv);
	}
	pthread_mutex_unlock(&s->reg_lock);
	free(dir);
}

