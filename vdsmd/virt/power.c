/* vdsmd/virt/power.c - VM.shutdown, VM.reset, VM.setDestroyOnReboot.
 *
 * VM.shutdown follows VDSM's power-down chain (vmpowerdown.py): the guest is
 * asked to power off (or reboot) and the verb answers at once; the VM is
 * reported "Powering down" until it is Down.  delay and message are what
 * VDSM hands the oVirt guest agent (a grace period with a note for the
 * guest's users); vdsmd reads no oVirt agent channel, so - as VDSM does for
 * a VM without that agent - the message is logged and the guest gets the
 * ACPI request (or QEMU guest agent's, libvirt's choice) at once.  A watcher
 * thread waits up to timeout seconds (default 120, VDSM's
 * sys_shutdown_timeout) for the domain to stop; with force, a guest that has
 * not stopped by then is destroyed (a reboot is reset).  virt_fini waits for
 * the watchers.
 *
 * VM.setDestroyOnReboot: a reboot the guest starts later ends the VM instead
 * (libvirt's reboot event, events.c). */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define DEFAULT_TIMEOUT_S 120
#define MAX_TIMEOUT_S 86400
#define POLL_MS 100

struct powerdown {
	struct virt_state *s;
	char id[37];
	bool reboot, force;
	unsigned timeout_s;
};

/* 1 active, 0 not (or gone), -1 libvirt unreachable. */
static int domain_active(struct virt_state *s, const char *id)
{
	virConnectPtr c;
	virDomainPtr d = virt_bg_domain(s, id, &c);
	if (!c)
		return -1;
	int a = d ? virDomainIsActive(d) : 0;
	virt_bg_release(c, d);
	return a == 1;
}

static void *powerdown_main(void *arg)
{
	struct powerdown *pd = arg;
	struct virt_state *s = pd->s;
	uint64_t deadline = vd_now_ms() + (uint64_t)pd->timeout_s * 1000;
	bool done = false;
	while (!virt_stopping(s) && vd_now_ms() < deadline) {
		if (domain_active(s, pd->id) == 0 && !pd->reboot) {
			done = true;
			break;
		}
		struct timespec ts = { 0, POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (!done && !virt_stopping(s) && !pd->reboot && domain_active(s, pd->id) == 1) {
		log_info("virt: %s has not shut down within %u s%s", pd->id, pd->timeout_s,
			 pd->force ? ": destroying it (force)" : "");
		if (pd->force) {
			virConnectPtr c;
			virDomainPtr d = virt_bg_domain(s, pd->id, &c);
			if (d && virDomainDestroy(d) < 0)
				log_warn("virt: forced shutdown of %s failed: %s", pd->id,
					 virt_last_error());
			virt_bg_release(c, d);
		}
	}
	virt_bg_done(s, pd);
	return NULL;
}

static void start_watcher(struct virt_state *s, const char *id, bool reboot, bool force,
			  unsigned timeout_s)
{
	struct powerdown *pd = xcalloc(1, sizeof *pd);
	pd->s = s;
	snprintf(pd->id, sizeof pd->id, "%s", id);
	pd->reboot = reboot;
	pd->force = force;
	pd->timeout_s = timeout_s;
	if (virt_bg_spawn(s, powerdown_main, pd) < 0) {
		log_warn("virt: cannot start the power-down watcher of %s", id);
		free(pd);
	}
}

/* Integer seconds from an int or numeric-string parameter (dflt when
 * absent); -1 when out of 0..MAX_TIMEOUT_S. */
static int64_t secs_arg(struct rpc_call *c, const char *name, int64_t dflt)
{
	const struct vd_value *v = rpc_arg(c, name);
	if (!v || v->type == VD_NULL)
		return dflt;
	int64_t x = rpc_arg_int(c, name, dflt);
	return x < 0 || x > MAX_TIMEOUT_S ? -1 : x;
}

int virt_verb_shutdown(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	bool reboot = rpc_arg_bool(c, "reboot", false);
	bool force = rpc_arg_bool(c, "force", false);
	const char *msg = rpc_arg_str(c, "message", NULL);
	int64_t delay = secs_arg(c, "delay", 0);
	int64_t timeout = secs_arg(c, "timeout", 0);
	if (delay < 0 || timeout < 0)
		return rpc_fail(c, RPC_E_PARAMS, "delay/timeout: seconds, 0..%d", MAX_TIMEOUT_S);
	if (timeout == 0)
		timeout = DEFAULT_TIMEOUT_S;   /* VDSM: "not timeout" takes the default */
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	virDomainPtr dom = virt_lookup(c, s, conn, id);
	if (!dom)
		goto out;
	log_info("virt: %s %s (delay %lld s, timeout %lld s%s)%s%s", reboot ? "reboot" : "shutdown",
		 id, (long long)delay, (long long)timeout, force ? ", force" : "",
		 msg && *msg ? ": " : "", msg ? msg : "");
	if (!reboot) {
		/* our "Powering down" must follow the events of earlier changes */
		virt_settle_events(s, dom, id);
		virt_mark_admin(s, id, virDomainGetName(dom), true);
		pthread_mutex_lock(&s->lock);
		struct virt_track *t = track_find(s, id);
		bool report = t && t->status != VS_POWERING_DOWN && t->status != VS_DOWN;
		if (t)
			t->powering_down = true;
		pthread_mutex_unlock(&s->lock);
		if (report)
			virt_publish_status(s, id, VS_POWERING_DOWN, NULL);
	}
	int r = reboot ? virDomainReboot(dom, 0) : virDomainShutdown(dom);
	if (r < 0 && force)
		r = reboot ? virDomainReset(dom, 0) : virDomainDestroy(dom);
	if (r < 0) {
		virt_mark_admin(s, id, NULL, false);
		pthread_mutex_lock(&s->lock);
		struct virt_track *t = track_find(s, id);
		if (t)
			t->powering_down = false;
		pthread_mutex_unlock(&s->lock);
		virt_fail_libvirt(c, reboot ? "reboot" : "shutdown", id);
		goto out;
	}
	if (!reboot)
		start_watcher(s, id, reboot, force, (unsigned)timeout);
	rc = 0;
	virt_refresh(s);
out:
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

static int act_reset(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
		     const char *id)
{
	if (virDomainReset(dom, 0) < 0)
		return virt_fail_libvirt(c, "reset", id);
	log_info("virt: reset %s", id);
	return 0;
}

int virt_verb_reset(struct rpc_call *c)
{
	return virt_on_domain(c, act_reset);
}

static int act_destroy_on_reboot(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
				 const char *id)
{
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_get(s, id, virDomainGetName(dom));
	t->destroy_on_reboot = true;
	pthread_mutex_unlock(&s->lock);
	log_info("virt: %s will be destroyed when its guest reboots", id);
	return 0;
}

int virt_verb_set_destroy_on_reboot(struct rpc_call *c)
{
	return virt_on_domain(c, act_destroy_on_reboot);
}
