/* vdsmd/virt/events.c - libvirt domain lifecycle events → VM_status events.
 *
 * The callback runs on the libvirt event thread (conn.c) for every state
 * change of every domain, whether one of our verbs caused it or not.  It
 * records the new status (and, for Down, VDSM's exitCode/exitReason/
 * exitMessage) in the tracker, publishes
 *     |virt|VM_status|<vmId>  {"<vmId>": {"status": ..., ...}, "notify_time": N}
 * through the event bus (never blocks), and asks the sampler for a fresh
 * snapshot so that the read verbs agree with the event.
 *
 * Also what the verbs tell the reporting (the end of this file): a change
 * they caused that libvirt will report (virt_expect_event), our own
 * shutdown in progress (virt_mark_admin), and for the verbs that publish a
 * status themselves (VM.shutdown, VM.migrate, VM.hibernate) waiting until
 * the events of earlier changes are out (virt_settle_events,
 * virt_transfer_begin). */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/log.h"
#include "../../rpc/event.h"

void virt_publish_status(struct virt_state *s, const char *uuid, enum virt_status st,
			 const struct virt_track *down)
{
	struct event_bus *bus = s->d->bus;
	if (!bus)
		return;
	/* The engine orders VM events by notify_time (ms): keep ours strictly
	 * increasing.  They come from the libvirt event thread and from verbs
	 * (VM.shutdown's "Powering down"): one at a time, each published in a
	 * later millisecond than the previous one was (at most ~1 ms wait). */
	pthread_mutex_lock(&s->pub_lock);
	for (int i = 0; i < 10 && vd_now_ms() <= s->last_event_ms; i++) {
		struct timespec ts = { 0, 200 * 1000 };
		nanosleep(&ts, NULL);
	}
	struct rpc_event ev;
	struct vd_writer *w = rpc_event_begin(&ev, bus, "|virt|VM_status|%s", uuid);
	vw_keyz(w, uuid);
	vw_begin_object(w);
	vw_kstr(w, "status", virt_status_name(st));
	vw_kstrf(w, "statusTime", "%llu", (unsigned long long)rpc_event_time_ms());
	if (st == VS_PAUSED)
		vw_kstr(w, "pauseCode", "NOERR");
	if (st == VS_DOWN && down) {
		vw_kint(w, "exitCode", down->exit_code);
		vw_kstr(w, "exitMessage", down->exit_message ? down->exit_message : "");
		vw_kint(w, "exitReason", down->exit_reason);
	}
	vw_end_object(w);
	rpc_event_publish(bus, &ev);
	s->last_event_ms = vd_now_ms();   /* >= the notify_time just sent */
	pthread_mutex_unlock(&s->pub_lock);
}

static int lifecycle_cb(virConnectPtr conn, virDomainPtr dom, int event, int detail,
			void *opaque)
{
	(void)conn;
	struct virt_state *s = opaque;
	char uuid[VIR_UUID_STRING_BUFLEN];
	if (virDomainGetUUIDString(dom, uuid) < 0)
		return 0;
	const char *name = virDomainGetName(dom);
	enum virt_status st;
	switch (event) {
	case VIR_DOMAIN_EVENT_STARTED:
	case VIR_DOMAIN_EVENT_RESUMED:
		st = VS_UP;
		break;
	case VIR_DOMAIN_EVENT_SUSPENDED:
	case VIR_DOMAIN_EVENT_PMSUSPENDED:
		st = VS_PAUSED;
		break;
	case VIR_DOMAIN_EVENT_SHUTDOWN:
		st = VS_POWERING_DOWN;
		break;
	case VIR_DOMAIN_EVENT_STOPPED:
	case VIR_DOMAIN_EVENT_CRASHED:
		st = VS_DOWN;
		break;
	default:
		return 0;   /* DEFINED, UNDEFINED: not a state change */
	}
	log_debug("virt: lifecycle event %d/%d for %s (%s) → %s", event, detail, uuid,
		  name ? name : "?", virt_status_name(st));

	pthread_mutex_lock(&s->lock);
	struct virt_track info;
	memset(&info, 0, sizeof info);
	if (tomb_has(s, uuid)) {
		/* VM.destroy removed it: report the change, track nothing */
		pthread_mutex_unlock(&s->lock);
		if (st == VS_DOWN) {
			info.exit_code = VIRT_EXIT_NORMAL;
			info.exit_reason = VIRT_REASON_ADMIN_SHUTDOWN;
			info.exit_message = (char *)"Admin shut down from the engine";
		}
		virt_publish_status(s, uuid, st, &info);
		return 0;
	}
	struct virt_track *t = track_get(s, uuid, name);
	t->event_seq = ++s->event_seq;
	if (t->expect_ev)
		t->expect_ev--;
	/* a VM.create we run: VDSM's launch sequence before Up */
	bool launch = (t->launching || t->restoring) && st == VS_UP;   /* STARTED, or RESUMED first (QEMU) */
	bool restored = launch && t->restoring;   /* VM.create from memory volumes */
	/* QEMU reports a start twice (RESUMED, STARTED): one Up after launch */
	bool repeat = !launch && t->just_launched && st == VS_UP;
	/* migration: the source stays "Migration Source" while libvirt pauses
	 * or resumes it; the destination is "Migration Destination" until
	 * libvirt resumes it here */
	if ((t->migrating || t->saving) && st != VS_DOWN)   /* VM.hibernate: Saving State */
		repeat = true;
	if (t->incoming && st != VS_DOWN) {
		if (event == VIR_DOMAIN_EVENT_RESUMED)
			t->incoming = false;
		else
			repeat = true;
	}
	/* the guest's own shutdown after our VM.shutdown said Powering down */
	if (event == VIR_DOMAIN_EVENT_SHUTDOWN && t->powering_down &&
	    t->status == VS_POWERING_DOWN)
		repeat = true;
	t->just_launched = launch;
	t->launching = false;
	t->restoring = false;
	if (st == VS_DOWN) {
		if (event == VIR_DOMAIN_EVENT_CRASHED)
			track_set_down(t, VIRT_EXIT_ERROR, VIRT_REASON_GENERIC_ERROR, "VM crashed");
		else
			track_stopped(t, detail);
		t->admin_shutdown = false;
		info.exit_code = t->exit_code;
		info.exit_reason = t->exit_reason;
		info.exit_message = xstrdup(t->exit_message ? t->exit_message : "");
	} else {
		if (t->status == VS_DOWN)
			t->have_prev = false;
		if (event == VIR_DOMAIN_EVENT_STARTED)
			t->powering_down = false;
		else if (t->powering_down && st == VS_UP)
			st = VS_POWERING_DOWN;   /* resumed while VM.shutdown runs */
		t->down_reported = false;
		if (!repeat)
			t->status = st;
	}
	if (!repeat)
		s->ev_inflight++;   /* virt_settle_events waits for our publishes */
	pthread_mutex_unlock(&s->lock);

	/* one libvirt event is one state change: always reported (the sampler
	 * may already have seen the new state, so no comparison here) */
	if (repeat) {
		virt_kick(s);
		return 0;
	}
	if (restored) {
		virt_publish_status(s, uuid, VS_RESTORING_STATE, NULL);
	} else if (launch) {
		virt_publish_status(s, uuid, VS_WAIT_FOR_LAUNCH, NULL);
		virt_publish_status(s, uuid, VS_POWERING_UP, NULL);
	}
	virt_publish_status(s, uuid, st, &info);
	pthread_mutex_lock(&s->lock);
	s->ev_inflight--;
	pthread_mutex_unlock(&s->lock);
	free(info.exit_message);
	virt_kick(s);
	return 0;
}

void virt_mark_xml_stale(struct virt_state *s, const char *uuid)
{
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, uuid);
	if (t)
		t->xml_stale = true;
	pthread_mutex_unlock(&s->lock);
}

/* A device was added or removed (hotplug, unplug): the XML facts and the
 * devices hash are re-read by the next sample, which is asked for now. */
static void device_cb(virConnectPtr conn, virDomainPtr dom, const char *alias, void *opaque)
{
	(void)conn;
	struct virt_state *s = opaque;
	char uuid[VIR_UUID_STRING_BUFLEN];
	if (virDomainGetUUIDString(dom, uuid) < 0)
		return;
	log_debug("virt: device %s changed on %s", alias ? alias : "?", uuid);
	virt_mark_xml_stale(s, uuid);
	virt_kick(s);
}

/* The guest rebooted: a VM marked by VM.setDestroyOnReboot is destroyed
 * (VDSM's destroy-on-reboot trap; admin shutdown). */
static void reboot_cb(virConnectPtr conn, virDomainPtr dom, void *opaque)
{
	(void)conn;
	struct virt_state *s = opaque;
	char uuid[VIR_UUID_STRING_BUFLEN];
	if (virDomainGetUUIDString(dom, uuid) < 0)
		return;
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, uuid);
	bool destroy = t && t->destroy_on_reboot;
	if (destroy) {
		t->destroy_on_reboot = false;
		t->admin_shutdown = true;
		t->admin_seq = ++s->event_seq;
	}
	pthread_mutex_unlock(&s->lock);
	if (!destroy)
		return;
	log_info("virt: %s rebooted with destroy-on-reboot set: destroying it", uuid);
	if (virDomainDestroy(dom) < 0)
		log_warn("virt: destroy on reboot of %s failed: %s", uuid, virt_last_error());
}

int virt_events_register(struct virt_state *s, virConnectPtr c)
{
	int id = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
						  VIR_DOMAIN_EVENT_CALLBACK(lifecycle_cb), s, NULL);
	if (id < 0)
		return VD_EIO;
	/* optional: a driver without device events still works (our own
	 * device verbs mark the XML stale themselves) */
	int add = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_DEVICE_ADDED,
						   VIR_DOMAIN_EVENT_CALLBACK(device_cb), s, NULL);
	int rem = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
						   VIR_DOMAIN_EVENT_CALLBACK(device_cb), s, NULL);
	int rb = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_REBOOT,
						  VIR_DOMAIN_EVENT_CALLBACK(reboot_cb), s, NULL);
	pthread_mutex_lock(&s->lock);
	s->cb_id = id;
	s->dev_cb_id[0] = add;
	s->dev_cb_id[1] = rem;
	s->reboot_cb_id = rb;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void virt_events_unregister(struct virt_state *s, virConnectPtr c)
{
	pthread_mutex_lock(&s->lock);
	int ids[4] = { s->cb_id, s->dev_cb_id[0], s->dev_cb_id[1], s->reboot_cb_id };
	s->cb_id = -1;
	s->dev_cb_id[0] = s->dev_cb_id[1] = -1;
	s->reboot_cb_id = -1;
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < 4; i++)
		if (ids[i] >= 0)
			virConnectDomainEventDeregisterAny(c, ids[i]);
}

/* ---- the statuses the verbs cause or publish themselves --------------------- */

void virt_mark_admin(struct virt_state *s, const char *id, const char *name, bool on)
{
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = on ? track_get(s, id, name) : track_find(s, id);
	if (t) {
		t->admin_shutdown = on;
		/* a sample read before this mark must not clear it (merge) */
		t->admin_seq = ++s->event_seq;
	}
	pthread_mutex_unlock(&s->lock);
}

void virt_expect_event(struct virt_state *s, const char *id)
{
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	if (t)
		t->expect_ev++;
	pthread_mutex_unlock(&s->lock);
}

void virt_settle_events(struct virt_state *s, virDomainPtr dom, const char *id)
{
	int state, reason;
	if (virDomainGetState(dom, &state, &reason, 0) < 0)
		return;
	enum virt_status want = virt_status_from_libvirt(state, reason);
	for (int i = 0; i < 200; i++) {   /* at most ~1 s */
		pthread_mutex_lock(&s->lock);
		const struct virt_track *t = track_find(s, id);
		bool caught_up = s->ev_inflight == 0 &&
				 (!t || (t->status == want && !t->launching && !t->expect_ev));
		pthread_mutex_unlock(&s->lock);
		if (caught_up)
			return;
		struct timespec ts = { 0, 5 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

void virt_transfer_begin(struct virt_state *s, virDomainPtr dom, const char *id,
			 enum virt_status st, const char *msg)
{
	virt_settle_events(s, dom, id);
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_get(s, id, virDomainGetName(dom));
	if (st == VS_SAVING_STATE)
		t->saving = true;
	else
		t->migrating = true;
	t->mig_code = 0;
	t->mig_progress = 0;
	snprintf(t->mig_message, sizeof t->mig_message, "%s", msg);
	t->status = st;
	pthread_mutex_unlock(&s->lock);
	virt_publish_status(s, id, st, NULL);
}
