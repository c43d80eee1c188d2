/* vdsmd/virt/lifecycle.c - VM.pause, VM.cont, VM.destroy (VM.create:
 * create.c; VM.shutdown: power.c; what they share: resolve.c).  Declared
 * RPC_F_BLOCKING: the engine runs them on the worker pool, never on the
 * loop thread.  Each one calls libvirt, then asks the
 * sampler for a fresh snapshot and waits for it (bounded), so a read verb
 * issued after the reply sees the new state.  The VM_status event comes
 * from libvirt's lifecycle callback (events.c), not from here, so a change
 * is reported once whoever caused it. */
#include "virt_int.h"

#include <libvirt/virterror.h>

/* pause / cont / shutdown: act on the domain, then wait for a fresh sample;
 * they differ only in the action. */
static int domain_verb(struct rpc_call *c, domain_action act, enum rpc_err down)
{
	if (virt_on_domain_as(c, act, down) < 0)
		return -1;
	struct virt_state *s = virt_state_of(c);
	virt_expect_event(s, rpc_arg_str(c, "vmID", NULL));
	virt_refresh(s);
	return 0;
}

static int act_pause(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	return virDomainSuspend(dom) < 0 ? virt_fail_libvirt(c, "pause", id) : 0;
}

/* VDSM refuses to resume a VM that is saving its state, migrating away
 * (unless paused on an I/O error: it cannot migrate then) or not running
 * (Down after hibernate or destroy) with 'unexpected' 16 (vm.py cont,
 * _can_resume). */
static int act_cont(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	pthread_mutex_lock(&s->lock);
	const struct virt_track *t = track_find(s, id);
	bool saving = t && t->saving, migrating = t && t->migrating;
	pthread_mutex_unlock(&s->lock);
	int state = 0, reason = 0;
	if (migrating && virDomainGetState(dom, &state, &reason, 0) == 0 &&
	    state == VIR_DOMAIN_PAUSED && reason == VIR_DOMAIN_PAUSED_IOERROR)
		migrating = false;
	if (saving || migrating)
		return rpc_fail(c, RPC_E_UNEXPECTED, "cannot cont %s while %s", id,
				virt_status_name(saving ? VS_SAVING_STATE : VS_MIGRATION_SOURCE));
	if (virDomainIsActive(dom) == 0)
		return rpc_fail(c, RPC_E_UNEXPECTED, "cannot cont %s while Down", id);
	return virDomainResume(dom) < 0 ? virt_fail_libvirt(c, "cont", id) : 0;
}

/* VM.pause and VM.cont answer {"vmList": {}} as VDSM does (the engine's
 * client casts the result to a map; api/VM.yaml VmRunningStateChange). */
static int state_change_result(struct rpc_call *c, int rc)
{
	if (rc < 0)
		return rc;
	vw_begin_object(c->w);
	vw_keyz(c->w, "vmList");
	vw_begin_object(c->w);
	vw_end_object(c->w);
	vw_end_object(c->w);
	return 0;
}

int virt_verb_pause(struct rpc_call *c)
{
	return state_change_result(c, domain_verb(c, act_pause, RPC_E_GENERAL));
}

int virt_verb_cont(struct rpc_call *c)
{
	/* a VM the tracker knows but libvirt no longer has (Down after
	 * hibernate or destroy, whether or not a sample has said so yet):
	 * VDSM's 'unexpected', as for an inactive domain */
	return state_change_result(c, domain_verb(c, act_cont, RPC_E_UNEXPECTED));
}

int virt_verb_destroy(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	virDomainPtr dom = virDomainLookupByUUIDString(conn, id);
	if (dom) {
		if (virDomainIsActive(dom) == 1) {
			virt_mark_admin(s, id, virDomainGetName(dom), true);
			if (virDomainDestroy(dom) < 0 && virDomainIsActive(dom) == 1) {
				virt_mark_admin(s, id, NULL, false);
				virt_fail_libvirt(c, "destroy", id);
				goto out;
			}
		}
		/* VDSM's VMs are transient; a persistent definition goes too */
		if (virDomainIsPersistent(dom) == 1 && virDomainUndefine(dom) < 0 &&
		    virt_last_error_code() != VIR_ERR_NO_DOMAIN) {
			virt_fail_libvirt(c, "undefine", id);
			goto out;
		}
	}
	pthread_mutex_lock(&s->lock);
	bool known = dom || (track_find(s, id) && !tomb_has(s, id));
	if (known) {
		track_remove(s, id);
		tomb_add(s, id);
	}
	pthread_mutex_unlock(&s->lock);
	if (!known) {
		rpc_fail(c, RPC_E_NO_VM, "%s", id);
		goto out;
	}
	rc = 0;
	virt_refresh(s);
out:
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}
