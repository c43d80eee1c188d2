/* vdsmd/storage/st_monitor.c - the domain monitor thread.
 *
 * Every interval (10 s) each domain is checked off the lock: its metadata is
 * read and verified (the delay of that read is the domain's "delay"), and
 * statvfs gives disktotal/diskfree; every volume's apparentsize/truesize is
 * refreshed by fstatat (a volume written by a VM or a copy grows).  All of
 * it runs on this thread with no lock held; results land in the index, where
 * Host.getStats, StorageDomain.getStats and Volume.getInfo/getSize read them
 * without any I/O. */
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct probe {
	char uuid[37];
	char *dir;
	int code;
	double delay;
	int64_t total, avail;
};

static void refresh_sizes(struct storage_state *s);

void st_monitor_once(struct storage_state *s)
{
	pthread_mutex_lock(&s->lock);
	size_t n = 0, cap = s->domains.n;
	struct probe *pr = xcalloc(cap ? cap : 1, sizeof(*pr));
	for (struct st_map_ent *e = map_first(&s->domains); e; e = map_next(&s->domains, e)) {
		struct st_domain *d = map_val(e);
		if (d->formatting || n == cap)
			continue;
		snprintf(pr[n].uuid, sizeof(pr[n].uuid), "%.36s", d->uuid);
		pr[n].dir = xstrdup(d->dir);
		n++;
	}
	pthread_mutex_unlock(&s->lock);

	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = vd_now_ns();
		struct st_kv kv;
		int dfd = st_dom_open(pr[i].dir);
		int rc = dfd < 0 ? (dfd == VD_ESYS(ENOENT) ? VD_ENOENT : VD_EPROTO)
				 : kv_read_at(&kv, dfd, "dom_md/metadata");
		if (dfd >= 0)
			close(dfd);
		if (rc == 0) {
			const char *u = kv_get(&kv, "SDUUID");
			if (!u || strcmp(u, pr[i].uuid) != 0)
				rc = VD_EPROTO;
			kv_free(&kv);
		}
		pr[i].delay = (double)(vd_now_ns() - t0) / 1e9;
		/* VDSM's codes: domain missing, metadata invalid, any
		 * other storage failure */
		pr[i].code = rc == 0 ? 0 : rc == VD_ENOENT ? rpc_err_code(RPC_E_NO_DOMAIN)
				       : rc == VD_EPROTO ? rpc_err_code(RPC_E_DOM_ACTION)
				       : rpc_err_code(RPC_E_STORAGE);
		struct statvfs vfs;
		if (statvfs(pr[i].dir, &vfs) == 0) {
			pr[i].total = (int64_t)vfs.f_blocks * (int64_t)vfs.f_frsize;
			pr[i].avail = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
		} else {
			pr[i].total = pr[i].avail = -1;
		}
	}

	uint64_t now = vd_now_ms();
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct st_domain *d = map_get(&s->domains, pr[i].uuid);
		if (d) {
			if (d->mon_code == 0 && pr[i].code != 0)
				log_warn("storage: monitor: domain %s became invalid (code %d)",
					 d->uuid, pr[i].code);
			d->mon_code = pr[i].code;
			d->mon_valid = pr[i].code == 0;
			d->mon_delay = pr[i].delay;
			d->mon_last_ms = now ? now : 1;
			if (pr[i].total >= 0) {
				d->disktotal = pr[i].total;
				d->diskfree = pr[i].avail;
			}
		}
		free(pr[i].dir);
	}
	pthread_mutex_unlock(&s->lock);
	free(pr);
	refresh_sizes(s);
	st_pool_reload(s);   /* domain statuses another host (the SPM) wrote */
	st_spm_observe(s);
	pthread_mutex_lock(&s->lock);
	s->monitor_rounds++;
	pthread_mutex_unlock(&s->lock);
}

struct volsize {
	char sd[37], img[37], vol[37];
	int64_t app, tru;
	bool ok;
};

/* Volume sizes, stat'ed off the lock, applied to volumes not busy. */
static void refresh_sizes(struct storage_state *s)
{
	pthread_mutex_lock(&s->lock);
	size_t n = 0, cap = 0;
	struct volsize *vs = NULL;
	struct st_domain **doms = xcalloc(s->domains.n ? s->domains.n : 1, sizeof(*doms));
	size_t nd = 0;
	for (struct st_map_ent *e = map_first(&s->domains); e; e = map_next(&s->domains, e)) {
		struct st_domain *d = map_val(e);
		if (d->formatting)
			continue;
		d->busy++;   /* pinned while its files are stat'ed */
		doms[nd++] = d;
		for (struct st_map_ent *v = map_first(&d->volumes); v; v = map_next(&d->volumes, v)) {
			const struct st_volume *vol = map_val(v);
			if (vol->busy)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				vs = xrealloc(vs, cap * sizeof(*vs));
			}
			snprintf(vs[n].sd, 37, "%s", d->uuid);
			snprintf(vs[n].img, 37, "%s", vol->image);
			snprintf(vs[n].vol, 37, "%s", vol->uuid);
			vs[n].ok = false;
			n++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct st_domain *d = NULL;
		for (size_t j = 0; j < nd; j++)
			if (strcmp(doms[j]->uuid, vs[i].sd) == 0)
				d = doms[j];
		vs[i].ok = d && st_vol_stat(d, vs[i].img, vs[i].vol, &vs[i].app, &vs[i].tru) == 0;
	}
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct st_domain *d = map_get(&s->domains, vs[i].sd);
		struct st_volume *v = d ? map_get(&d->volumes, vs[i].vol) : NULL;
		if (vs[i].ok && v && !v->busy && strcmp(v->image, vs[i].img) == 0) {
			v->apparent = vs[i].app;
			v->truesize = vs[i].tru;
		}
	}
	for (size_t j = 0; j < nd; j++)
		doms[j]->busy--;
	pthread_mutex_unlock(&s->lock);
	free(vs);
	free(doms);
}

static void *monitor_main(void *arg)
{
	struct storage_state *s = arg;
	for (;;) {
		st_monitor_once(s);
		pthread_mutex_lock(&s->lock);
		if (s->monitor_started) {
			struct timespec dl;
			st_deadline(&dl, s->monitor_interval_ms);
			pthread_cond_timedwait(&s->monitor_cond, &s->lock, &dl);
		}
		bool stop = !s->monitor_started;
		pthread_mutex_unlock(&s->lock);
		if (stop)
			break;
	}
	return NULL;
}

int st_start_monitor(struct storage_state *s, unsigned interval_ms)
{
	s->monitor_interval_ms = interval_ms ? interval_ms : 10000;
	s->monitor_started = true;
	int rc = pthread_create(&s->monitor, NULL, monitor_main, s);
	if (rc != 0) {
		s->monitor_started = false;
		log_error("storage: cannot start the domain monitor: %s", strerror(rc));
		return VD_EIO;
	}
	return 0;
}

void st_stop_monitor(struct storage_state *s)
{
	pthread_mutex_lock(&s->lock);
	bool running = s->monitor_started;
	s->monitor_started = false;
	pthread_cond_broadcast(&s->monitor_cond);
	pthread_mutex_unlock(&s->lock);
	if (running)
		pthread_join(s->monitor, NULL);
}
