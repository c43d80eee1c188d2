/* vdsmd/storage/st_poolrec.c - StoragePool.create / reconstructMaster
 * across a kill -9.
 *
 * Setting a pool up writes several files: the metadata of every member
 * domain (pool UUID, role), then this host's pool.meta.  Before the first of
 * them, <storage_root>/pool.intent records the pool and every domain's
 * previous pool and role; it is removed once pool.meta is written (or the
 * failed setup put every domain back).  At startup an intent left behind
 * means the setup died half-way: when pool.meta names the pool it was
 * complete and the intent just goes; otherwise every listed domain whose
 * metadata was changed gets its previous pool and role back, and then the
 * intent goes.  A domain that cannot be restored keeps the intent for the
 * next start (logged). */
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INTENT "pool.intent"

int st_pool_intent_write(struct storage_state *s, const char *sp, const char *const *doms,
			 const char (*old_pool)[37], const bool *old_master, const bool *skip,
			 size_t n)
{
	struct st_kv kv;
	kv_init(&kv);
	kv_set(&kv, "POOL_UUID", sp);
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (skip && skip[i])
			continue;
		char k[32];
		snprintf(k, sizeof(k), "SD%zu", j);
		kv_set(&kv, k, doms[i]);
		snprintf(k, sizeof(k), "POOL%zu", j);
		kv_set(&kv, k, old_pool[i]);
		snprintf(k, sizeof(k), "MASTER%zu", j);
		kv_set(&kv, k, old_master[i] ? "1" : "0");
		j++;
	}
	kv_setf(&kv, "DOMAINS", "%zu", j);
	char *path = st_path(s->root, INTENT);
	int rc = kv_write_file(&kv, path);
	free(path);
	kv_free(&kv);
	return rc;
}

void st_pool_intent_clear(struct storage_state *s)
{
	char *path = st_path(s->root, INTENT);
	st_remove_record(path, s->root);
	free(path);
}

void st_pool_intent_recover(struct storage_state *s)
{
	char *path = st_path(s->root, INTENT);
	struct st_kv kv;
	int rc = kv_read_file(&kv, path);
	if (rc == VD_ENOENT) {
		free(path);
		return;
	}
	if (rc) {
		log_error("storage: %s is unreadable or corrupt; left alone", path);
		free(path);
		return;
	}
	const char *sp = kv_get(&kv, "POOL_UUID");
	bool done = st_is_uuid(sp) && strcmp(s->pool_uuid, sp) == 0;
	size_t failed = 0, restored = 0;
	int64_t n = done ? 0 : kv_get_int(&kv, "DOMAINS", 0);
	for (int64_t i = 0; i < n && i < 4096; i++) {
		char k[32];
		snprintf(k, sizeof(k), "SD%lld", (long long)i);
		const char *sd = kv_get(&kv, k);
		snprintf(k, sizeof(k), "POOL%lld", (long long)i);
		const char *op = kv_get(&kv, k);
		snprintf(k, sizeof(k), "MASTER%lld", (long long)i);
		bool om = kv_get_int(&kv, k, 0) == 1;
		struct st_domain *d = st_is_uuid(sd) ? map_get(&s->domains, sd) : NULL;
		if (!d || (op && *op && !st_is_uuid(op)))
			continue;   /* not registered here: nothing of ours to undo */
		if (strcmp(d->pool, op ? op : "") == 0 && d->master == om)
			continue;   /* never written */
		if (st_domain_set_pool(s, d, op ? op : "", om) < 0) {
			log_error("storage: domain %s: cannot restore its pool after an interrupted "
				  "StoragePool.create of %s", d->uuid, sp ? sp : "?");
			failed++;
		} else {
			restored++;
		}
	}
	if (done)
		log_info("storage: StoragePool.create of %s had completed before vdsmd stopped", sp);
	else
		log_warn("storage: StoragePool.create of %s was interrupted by a restart; %zu "
			 "domain(s) put back in their previous pool", sp ? sp : "?", restored);
	kv_free(&kv);
	free(path);
	if (!failed)
		st_pool_intent_clear(s);
}
