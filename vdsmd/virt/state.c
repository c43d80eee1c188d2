/* vdsmd/virt/state.c - the backend's shared bookkeeping of struct
 * virt_state, below every other file of the backend (it calls none of them):
 *
 *   libvirt's last error as text and code (thread-local in libvirt);
 *   the connection, referenced for one use (virt_conn_get);
 *   the sampler's wake-up: virt_kick asks for a sample now, virt_wait_kick
 *       waits until one that started after the kick is published,
 *       virt_refresh does both for a verb that changed a VM;
 *   the detached background threads of the verbs that answer before their
 *       work is done (VM.shutdown's watcher, VM.migrate, VM.hibernate,
 *       VM.snapshot, VM.merge, VM.seal): virt_bg_spawn counts each one in
 *       bg_jobs, virt_fini (conn.c) waits for them (virt_bg_wait).
 *
 * The threads that use it (sampler, libvirt events) and the connection's
 * life (connect, retry, drop) are conn.c's. */
#include "virt_int.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define REFRESH_WAIT_MS 5000

const char *virt_last_error(void)
{
	const char *m = virGetLastErrorMessage();
	return m ? m : "unknown libvirt error";
}

int virt_last_error_code(void)
{
	return virGetLastErrorCode();
}

virConnectPtr virt_conn_get(struct virt_state *s)
{
	pthread_mutex_lock(&s->lock);
	virConnectPtr c = s->conn;
	if (c)
		virConnectRef(c);
	pthread_mutex_unlock(&s->lock);
	return c;
}

/* ---- the sampler's wake-up ------------------------------------------------ */

uint64_t virt_kick(struct virt_state *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t ticket = ++s->kick_seq;
	s->kick = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return ticket;
}

void virt_deadline_after(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

bool virt_wait_kick(struct virt_state *s, uint64_t ticket, unsigned timeout_ms)
{
	struct timespec ts;
	virt_deadline_after(&ts, timeout_ms);
	pthread_mutex_lock(&s->lock);
	while (s->done_seq < ticket && !s->stop) {
		if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
			break;
	}
	bool done = s->done_seq >= ticket;
	pthread_mutex_unlock(&s->lock);
	return done;
}

void virt_refresh(struct virt_state *s)
{
	uint64_t ticket = virt_kick(s);
	if (!virt_wait_kick(s, ticket, REFRESH_WAIT_MS))
		log_warn("virt: no fresh sample within %u ms after a lifecycle verb",
			 REFRESH_WAIT_MS);
}

/* ---- background threads ------------------------------------------------ */

static void bg_uncount(struct virt_state *s)
{
	pthread_mutex_lock(&s->lock);
	s->bg_jobs--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

int virt_bg_spawn(struct virt_state *s, void *(*fn)(void *), void *arg)
{
	/* none after virt_fini's stop: virt_bg_wait may have returned (the
	 * sampler's merge recovery runs until virt_fini joins it) */
	pthread_mutex_lock(&s->lock);
	bool stop = s->stop;
	if (!stop)
		s->bg_jobs++;
	pthread_mutex_unlock(&s->lock);
	if (stop)
		return VD_EBUSY;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	int e = pthread_create(&th, &at, fn, arg);
	pthread_attr_destroy(&at);
	if (e == 0)
		return 0;
	bg_uncount(s);
	return VD_EBUSY;
}

void virt_bg_done(struct virt_state *s, void *job)
{
	free(job);
	bg_uncount(s);
}

virDomainPtr virt_bg_domain(struct virt_state *s, const char *id, virConnectPtr *c)
{
	*c = virt_conn_get(s);
	return *c ? virDomainLookupByUUIDString(*c, id) : NULL;
}

void virt_bg_release(virConnectPtr c, virDomainPtr d)
{
	if (d)
		virDomainFree(d);
	if (c)
		virConnectClose(c);
}

void virt_bg_wait(struct virt_state *s)
{
	pthread_mutex_lock(&s->lock);
	while (s->bg_jobs > 0)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
}

bool virt_stopping(struct virt_state *s)
{
	pthread_mutex_lock(&s->lock);
	bool stop = s->stop;
	pthread_mutex_unlock(&s->lock);
	return stop;
}
