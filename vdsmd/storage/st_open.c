/* vdsmd/storage/st_open.c - st_open / st_close: the storage backend's state
 * loaded from storage_root (the domain registry, each domain's metadata, the
 * pool, the task records), reconciled with what is on disk, and freed. */
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct storage_state *st_open(const char *root_cfg, char *why, size_t whylen)
{
	const char *sys = st_system_dir(root_cfg);
	if (sys) {
		snprintf(why, whylen, "storage_root %s is a system directory (%s): refused", root_cfg,
			 sys);
		return NULL;
	}
	int rc = st_mkdir_p(root_cfg, 0755);
	/* canonical from here on: mount points are compared with mountinfo's
	 * paths, which are (issue 27) */
	char *real = rc == 0 ? realpath(root_cfg, NULL) : NULL;
	const char *root = real ? real : root_cfg;
	char *tasks = st_path(root, "tasks");
	if (rc == 0)
		rc = st_mkdir_p(tasks, 0755);
	struct stat tsb;
	if (rc == 0 && (lstat(tasks, &tsb) < 0 || !S_ISDIR(tsb.st_mode)))
		rc = VD_ESYS(ENOTDIR);   /* a symlink: task records would be written elsewhere */
	free(tasks);
	if (rc < 0) {
		st_errf(why, whylen, rc, "storage_root %s", root);
		free(real);
		return NULL;
	}
	struct storage_state *s = xcalloc(1, sizeof(*s));
	s->root = xstrdup(root);
	free(real);
	root = s->root;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->reg_lock, NULL);
	pthread_cond_init(&s->task_cond, NULL);
	pthread_cond_init(&s->monitor_cond, NULL);
	pthread_cond_init(&s->spm_cond, NULL);
	s->spm_holder = -1;
	s->spm_lver = -1;
	map_init(&s->domains);
	map_init(&s->tasks);
	map_init(&s->jobs);
	map_init(&s->nbd);
	s->monitor_interval_ms = 10000;
	st_ops_register(s);

	struct st_kv reg;
	char *path = st_path(root, "domains.reg");
	rc = kv_read_file(&reg, path);
	free(path);
	if (rc == VD_ENOENT) {
		kv_init(&reg);
	} else if (rc) {
		snprintf(why, whylen, "storage_root %s: domain registry is unreadable or corrupt", root);
		st_close(s);
		return NULL;
	}
	for (size_t i = 0; i < reg.n; i++) {
		if (!st_is_uuid(reg.keys[i]) || reg.vals[i][0] != '/') {
			log_warn("storage: registry: ignoring bad entry %s", reg.keys[i]);
			continue;
		}
		struct st_domain *d = dom_new(reg.keys[i]);
		rc = st_dom_load(d, reg.vals[i]);
		if (rc) {
			log_error("storage: domain %s at %s: metadata %s; not served", d->uuid,
				  d->dir, rc == VD_ENOENT ? "missing" : "invalid");
			dom_free(d);
			continue;
		}
		map_put(&s->domains, d->uuid, d);
	}
	kv_free(&reg);
	st_pool_load(s);
	st_pool_intent_recover(s);
	st_pool_lease_from_master(s);
	/* Task records first: the scan removes only what an unfinished task
	 * claims, and the tasks' outcome is decided from what it found. */
	st_tasks_load(s);
	for (struct st_map_ent *e = map_first(&s->domains); e; e = map_next(&s->domains, e))
		st_scan_domain(s, map_val(e));
	st_tasks_recover(s);
	st_amend_recover(s);
	return s;
}

void st_close(struct storage_state *s)
{
	if (!s)
		return;
	st_stop_monitor(s);
	st_stop_workers(s);
	st_jobs_stop(s);
	st_nbd_stop_all(s);
	st_spm_release(s);
	for (struct st_map_ent *e = map_first(&s->domains); e; e = map_next(&s->domains, e))
		dom_free(map_val(e));
	map_free(&s->domains);
	for (struct st_map_ent *e = map_first(&s->tasks); e; e = map_next(&s->tasks, e))
		st_task_free(map_val(e));
	for (struct st_map_ent *e = map_first(&s->jobs); e; e = map_next(&s->jobs, e))
		free(map_val(e));
	map_free(&s->jobs);
	map_free(&s->tasks);
	map_free(&s->nbd);
	free(s->run_dir);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->reg_lock);
	pthread_cond_destroy(&s->task_cond);
	pthread_cond_destroy(&s->monitor_cond);
	pthread_cond_destroy(&s->spm_cond);
	buf_free(&s->localfs);
	free(s->pool_name);
	free(s->root);
	free(s);
}
