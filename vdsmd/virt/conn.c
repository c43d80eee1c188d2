/* vdsmd/virt/conn.c - virt_init/virt_fini, the libvirt connection and the
 * two threads of the backend (the top of the backend: nothing in it calls
 * back here):
 *
 *   sampler  connects to cfg.libvirt_uri (retrying with backoff 1..30 s when
 *            libvirt is unreachable or the connection drops), takes a sample
 *            (sample.c) every vm_sample_interval seconds or at once when
 *            kicked, and publishes the snapshot.
 *   events   runs libvirt's default event loop (virEventRunDefaultImpl) so
 *            that domain lifecycle callbacks (events.c) are delivered.
 *
 * What the other files share of that (the connection reference, the kicks,
 * the background threads of the verbs) is state.c's; virt_fini waits for
 * those threads (virt_bg_wait) before it frees the state.
 *
 * Readiness: the sampler reports "virt" ready (vdsmd_subsystem_ready) after
 * its first attempt, whether or not libvirt answered, so a host without
 * libvirt still serves every other verb.  Until a first snapshot exists the
 * VM verbs answer code 99 themselves (verbs.c, resolve.c). */
#include "virt_int.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define BACKOFF_MAX_S 30

static pthread_once_t libvirt_once = PTHREAD_ONCE_INIT;

static void quiet_errors(void *ud, virErrorPtr e)
{
	(void)ud;
	log_debug("libvirt: %s", e && e->message ? e->message : "?");
}

static void libvirt_global_init(void)
{
	/* libvirt's default event loop implementation is process-wide and must
	 * be registered before the first connection is opened. */
	if (virEventRegisterDefaultImpl() < 0)
		log_error("virt: virEventRegisterDefaultImpl failed");
	virSetErrorFunc(NULL, quiet_errors);
}

/* ---- connection ---------------------------------------------------------- */

/* libvirt closed the connection (libvirtd restarted, keepalive timeout):
 * runs on the event thread; the sampler notices at once and reconnects. */
static void close_cb(virConnectPtr c, int reason, void *opaque)
{
	(void)c;
	struct virt_state *s = opaque;
	log_warn("virt: libvirt closed the connection (reason %d)", reason);
	virt_kick(s);
}

static void conn_release(struct virt_state *s, virConnectPtr c)
{
	virt_events_unregister(s, c);
	virConnectUnregisterCloseCallback(c, close_cb);
	virConnectClose(c);
}

void virt_conn_lost(struct virt_state *s, virConnectPtr c)
{
	pthread_mutex_lock(&s->lock);
	bool mine = s->conn == c;
	if (mine)
		s->conn = NULL;
	pthread_mutex_unlock(&s->lock);
	if (!mine)
		return;
	log_warn("virt: lost the libvirt connection to %s; reconnecting", s->d->cfg.libvirt_uri);
	conn_release(s, c);
}

static virConnectPtr try_connect(struct virt_state *s)
{
	const char *uri = s->d->cfg.libvirt_uri ? s->d->cfg.libvirt_uri : "qemu:///system";
	virConnectPtr c = virConnectOpen(uri);
	if (!c) {
		/* written by this thread only; atomic: tests read it */
		unsigned b = s->backoff_s ? VD_MIN(s->backoff_s * 2, BACKOFF_MAX_S) : 1;
		__atomic_store_n(&s->backoff_s, b, __ATOMIC_RELAXED);
		log_warn("virt: cannot connect to libvirt at %s: %s (retry in %u s)", uri,
			 virt_last_error(), s->backoff_s);
		return NULL;
	}
	if (!s->ever_connected)
		log_info("virt: connected to %s", uri);
	else
		log_info("virt: reconnected to %s", uri);
	s->ever_connected = true;
	s->bulk_unsupported = false;
	s->bulk_no_nowait = false;
	/* keepalive (remote drivers) lets a dead libvirtd be noticed without a
	 * hung call; the close callback reports it. Both may be unsupported. */
	if (virConnectSetKeepAlive(c, 5, 3) < 0)
		log_debug("virt: no keepalive on %s", uri);
	if (virConnectRegisterCloseCallback(c, close_cb, s, NULL) < 0)
		log_debug("virt: no close callback on %s", uri);
	if (virt_events_register(s, c) < 0)
		log_warn("virt: lifecycle events unavailable on %s: %s", uri, virt_last_error());
	pthread_mutex_lock(&s->lock);
	s->conn = c;
	pthread_mutex_unlock(&s->lock);
	virt_merge_recover(s, c);   /* merges a previous vdsmd started (merge.c) */
	return c;
}

/* ---- sampler thread ---------------------------------------------------- */

static void sample_once(struct virt_state *s)
{
	virConnectPtr c = virt_conn_get(s);
	if (!c) {
		c = try_connect(s);
		if (!c)
			return;
		virConnectRef(c);
	}
	__atomic_store_n(&s->backoff_s, 0, __ATOMIC_RELAXED);
	struct virt_snapshot *snap = virt_sample(s, c);
	if (snap) {
		s->samples++;
		log_debug("virt: sample %llu: %u VMs in %.1f ms",
			  (unsigned long long)s->samples, snap->nvms, snap->sample_ms);
		virt_snapshot_publish(s, snap);
	} else {
		s->sample_failures++;
		if (virConnectIsAlive(c) != 1) {
			virt_conn_lost(s, c);
			__atomic_store_n(&s->backoff_s, 1, __ATOMIC_RELAXED);
		}
	}
	virConnectClose(c);
}

static void *sampler_main(void *arg)
{
	struct virt_state *s = arg;
	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		s->kick = false;
		uint64_t seq = s->kick_seq;
		pthread_mutex_unlock(&s->lock);
		sample_once(s);
		pthread_mutex_lock(&s->lock);
		s->done_seq = seq;
		bool first = !s->reported_ready;
		s->reported_ready = true;   /* under the lock: tests read it */
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		if (first)  /* after the first attempt, connected or not (see above) */
			vdsmd_subsystem_ready(s->d, "virt");
		pthread_mutex_lock(&s->lock);
		uint64_t wait_ms = s->conn ? (uint64_t)s->sample_interval_s * 1000
					   : (uint64_t)(s->backoff_s ? s->backoff_s : 1) * 1000;
		struct timespec ts;
		virt_deadline_after(&ts, wait_ms);
		while (!s->stop && !s->kick) {
			if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
				break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- libvirt event loop thread ------------------------------------------ */

static void wake_cb(int timer, void *opaque)
{
	(void)timer;
	(void)opaque;
}

static void *events_main(void *arg)
{
	struct virt_state *s = arg;
	while (!atomic_load(&s->ev_stop)) {
		if (virEventRunDefaultImpl() < 0) {
			log_error("virt: libvirt event loop failed: %s", virt_last_error());
			break;
		}
	}
	return NULL;
}

/* ---- init / fini --------------------------------------------------------- */

void virt_set_deps(struct vdsmd *d, const struct virt_deps *deps)
{
	struct virt_state *s = d->virt;
	if (!s || !deps)
		return;
	pthread_mutex_lock(&s->lock);
	s->deps = *deps;
	pthread_mutex_unlock(&s->lock);
}

int virt_init(struct vdsmd *d)
{
	pthread_once(&libvirt_once, libvirt_global_init);
	struct virt_state *s = xcalloc(1, sizeof *s);
	s->d = d;
	s->cb_id = -1;
	s->dev_cb_id[0] = s->dev_cb_id[1] = -1;
	s->reboot_cb_id = -1;
	s->ev_timer = -1;
	s->sample_interval_s = d->cfg.vm_sample_interval ? d->cfg.vm_sample_interval : 15;
#ifdef VD_TEST_HOOKS
	const char *nc = getenv("VDSMD_VIRT_NO_CACHE");
	s->no_cache = nc && strcmp(nc, "1") == 0;
#endif
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->pub_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&s->ev_stop, false);
	d->virt = s;

	if (pthread_create(&s->evthread, NULL, events_main, s) != 0) {
		log_error("virt: cannot start the libvirt event thread");
		goto fail;
	}
	s->ev_started = true;
	if (pthread_create(&s->sampler, NULL, sampler_main, s) != 0) {
		log_error("virt: cannot start the sampler thread");
		goto fail;
	}
	s->sampler_started = true;
	return 0;
fail:
	virt_fini(d);
	return VD_EIO;
}

void virt_fini(struct vdsmd *d)
{
	struct virt_state *s = d ? d->virt : NULL;
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	virt_bg_wait(s);
	if (s->sampler_started)
		pthread_join(s->sampler, NULL);
	virConnectPtr c = s->conn;
	s->conn = NULL;
	if (c)
		conn_release(s, c);
	if (s->ev_started) {
		atomic_store(&s->ev_stop, true);
		/* a zero timeout makes virEventRunDefaultImpl return */
		int t = virEventAddTimeout(0, wake_cb, NULL, NULL);
		pthread_join(s->evthread, NULL);
		if (t >= 0)
			virEventRemoveTimeout(t);
	}
	snapshot_put(s->snap);
	s->snap = NULL;
	track_free_all(s);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->pub_lock);
	free(s);
	d->virt = NULL;
}
