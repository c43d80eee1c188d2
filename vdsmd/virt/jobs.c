/* vdsmd/virt/jobs.c - the virt backend's host jobs (VDSM's vdsm.virt.jobs:
 * VM.snapshot runs as one), listed by Host.getJobs with job_type "virt" and
 * published as |jobs|status|<jobId> with the job's info as params on every
 * change of state, as VDSM does.  A job is kept after it ended for
 * VIRT_JOB_KEEP_MS (VDSM's autodelete) so the engine's poll finds its end;
 * at most VIRT_MAX_JOBS exist (the oldest ended one makes room).  Every
 * function takes s->lock itself. */
#include "virt_int.h"

#include <stdio.h>
#include <string.h>

#include "../../rpc/event.h"

#define VIRT_JOB_KEEP_MS (10 * 60 * 1000)

static const char *status_name(enum virt_job_status st)
{
	switch (st) {
	case VJ_PENDING: return "pending";
	case VJ_RUNNING: return "running";
	case VJ_DONE: return "done";
	case VJ_FAILED: return "failed";
	}
	return "failed";
}

static void write_fields(struct vd_writer *w, const struct virt_job *j)
{
	vw_kstr(w, "id", j->id);
	vw_kstr(w, "status", status_name(j->status));
	vw_kstr(w, "description", j->description);
	vw_kstr(w, "job_type", "virt");
	if (j->status == VJ_FAILED) {
		vw_keyz(w, "error");
		vw_begin_object(w);
		vw_kint(w, "code", j->err_code);
		vw_kstr(w, "message", j->err_msg);
		vw_end_object(w);
	}
}

static void publish(struct virt_state *s, const struct virt_job *j)
{
	struct event_bus *bus = s->d->bus;
	if (!bus || !event_bus_enabled(bus))
		return;
	struct rpc_event ev;
	struct vd_writer *w = rpc_event_begin(&ev, bus, "|jobs|status|%s", j->id);
	write_fields(w, j);
	rpc_event_publish(bus, &ev);
}

static void expire(struct virt_state *s, uint64_t now)
{
	unsigned k = 0;
	for (unsigned i = 0; i < s->njobs; i++) {
		const struct virt_job *j = &s->jobs[i];
		bool ended = j->status == VJ_DONE || j->status == VJ_FAILED;
		if (ended && now - j->ended_ms > VIRT_JOB_KEEP_MS)
			continue;
		s->jobs[k++] = *j;
	}
	s->njobs = k;
}

int virt_job_add(struct virt_state *s, const char *id, const char *vm, const char *desc)
{
	uint64_t now = vd_now_ms();
	pthread_mutex_lock(&s->lock);
	expire(s, now);
	for (unsigned i = 0; i < s->njobs; i++) {
		if (strcmp(s->jobs[i].id, id) == 0) {
			pthread_mutex_unlock(&s->lock);
			return VD_EEXIST;
		}
	}
	if (s->njobs == VIRT_MAX_JOBS) {
		/* the oldest ended job makes room; none ended: refused */
		unsigned old = VIRT_MAX_JOBS;
		for (unsigned i = 0; i < s->njobs; i++) {
			const struct virt_job *j = &s->jobs[i];
			if ((j->status == VJ_DONE || j->status == VJ_FAILED) &&
			    (old == VIRT_MAX_JOBS || j->ended_ms < s->jobs[old].ended_ms))
				old = i;
		}
		if (old == VIRT_MAX_JOBS) {
			pthread_mutex_unlock(&s->lock);
			return VD_EBUSY;
		}
		s->jobs[old] = s->jobs[--s->njobs];
	}
	struct virt_job *j = &s->jobs[s->njobs++];
	memset(j, 0, sizeof *j);
	snprintf(j->id, sizeof j->id, "%s", id);
	snprintf(j->vm, sizeof j->vm, "%s", vm);
	snprintf(j->description, sizeof j->description, "%s", desc);
	j->status = VJ_PENDING;
	struct virt_job copy = *j;
	pthread_mutex_unlock(&s->lock);
	publish(s, &copy);
	return 0;
}

void virt_job_set(struct virt_state *s, const char *id, enum virt_job_status st, int code,
		  const char *msg)
{
	pthread_mutex_lock(&s->lock);
	struct virt_job copy;
	bool found = false;
	for (unsigned i = 0; i < s->njobs; i++) {
		struct virt_job *j = &s->jobs[i];
		if (strcmp(j->id, id) != 0)
			continue;
		j->status = st;
		if (st == VJ_DONE || st == VJ_FAILED)
			j->ended_ms = vd_now_ms();
		if (st == VJ_FAILED) {
			j->err_code = code;
			snprintf(j->err_msg, sizeof j->err_msg, "%s", msg ? msg : "");
		}
		copy = *j;
		found = true;
		break;
	}
	pthread_mutex_unlock(&s->lock);
	if (found)
		publish(s, &copy);
}

void virt_write_job_members(struct vdsmd *d, struct vd_writer *w, const char *job_type,
			    const struct vd_value *ids)
{
	struct virt_state *s = d ? d->virt : NULL;
	if (!s || (job_type && *job_type && strcmp(job_type, "virt") != 0))
		return;
	pthread_mutex_lock(&s->lock);
	expire(s, vd_now_ms());
	for (unsigned i = 0; i < s->njobs; i++) {
		const struct virt_job *j = &s->jobs[i];
		bool want = !ids || ids->type != VD_ARRAY || ids->v.arr.n == 0;
		for (size_t k = 0; !want && k < ids->v.arr.n; k++)
			want = vd_str_eq(&ids->v.arr.items[k], j->id);
		if (!want)
			continue;
		vw_keyz(w, j->id);
		vw_begin_object(w);
		write_fields(w, j);
		vw_end_object(w);
	}
	pthread_mutex_unlock(&s->lock);
}
