/* vdsmd/virt/lifecycle.c - VM.pause, VM.cont, VM.destroy (VM.create:
 * create.c; VM.shutdown: power.c).  Declared RPC_F_BLOCKING: the engine runs them on the worker
 * pool, never on the loop thread.  Each one calls libvirt, then asks the
 * sampler for a fresh snapshot and waits for it (bounded), so a read verb
 * issued after the reply sees the new state.  The VM_status event comes
 * from libvirt's lifecycle callback (events.c), not from here, so a change
 * is reported once whoever caused it. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define REFRESH_WAIT_MS 5000

/* Checks common to every lifecycle verb; returns the connection (a
 * reference) or NULL after failing the call. */
virConnectPtr virt_begin(struct rpc_call *c, struct virt_state *s)
{
	if (!s) {
		rpc_fail(c, RPC_E_RECOVERING, "virt backend not started");
		return NULL;
	}
	struct virt_snapshot *snap = virt_snapshot_get(s);
	if (!snap) {
		rpc_fail(c, RPC_E_RECOVERING, "no VM sample yet (libvirt not reached)");
		return NULL;
	}
	snapshot_put(snap);
	virConnectPtr conn = virt_conn_get(s);
	if (!conn)
		rpc_fail(c, RPC_E_GENERAL, "libvirt is not reachable");
	return conn;
}

void virt_refresh(struct virt_state *s)
{
	uint64_t ticket = virt_kick(s);
	if (!virt_wait_kick(s, ticket, REFRESH_WAIT_MS))
		log_warn("virt: no fresh sample within %u ms after a lifecycle verb",
			 REFRESH_WAIT_MS);
}

/* libvirt's domain for vmID; NULL with the call failed (code 1 when neither
 * libvirt nor the tracker knows it, else 100: the VM is Down). */
static virDomainPtr lookup_as(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
			      const char *id, enum rpc_err down)
{
	virDomainPtr dom = virDomainLookupByUUIDString(conn, id);
	if (dom)
		return dom;
	pthread_mutex_lock(&s->lock);
	bool known = track_find(s, id) != NULL && !tomb_has(s, id);
	pthread_mutex_unlock(&s->lock);
	if (known)
		rpc_fail(c, down, "VM %s is Down", id);
	else
		rpc_fail(c, RPC_E_NO_VM, "%s", id);
	return NULL;
}

virDomainPtr virt_lookup(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
			 const char *id)
{
	return lookup_as(c, s, conn, id, RPC_E_GENERAL);
}

virDomainPtr virt_lookup_active(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
				const char *id)
{
	virDomainPtr dom = virt_lookup(c, s, conn, id);
	if (dom && virDomainIsActive(dom) != 1) {
		rpc_fail(c, RPC_E_NO_VM, "%s is not running", id);
		virDomainFree(dom);
		return NULL;
	}
	return dom;
}

int virt_fail_libvirt(struct rpc_call *c, const char *what, const char *id)
{
	int code = virt_last_error_code();
	if (code == VIR_ERR_NO_DOMAIN)
		return rpc_fail(c, RPC_E_NO_VM, "%s", id);
	return rpc_fail(c, RPC_E_GENERAL, "%s %s: %s", what, id, virt_last_error());
}

/* virt_on_domain, with the code for a VM the tracker knows but libvirt
 * no longer has (Down after hibernate or destroy). */
static int on_domain_as(struct rpc_call *c, domain_action act, enum rpc_err down)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	virDomainPtr dom = lookup_as(c, s, conn, id, down);
	if (dom) {
		rc = act(c, s, dom, id);
		virDomainFree(dom);
	}
	virConnectClose(conn);
	return rc;
}

int virt_on_domain(struct rpc_call *c, domain_action act)
{
	return on_domain_as(c, act, RPC_E_GENERAL);
}

struct virt_engxml *virt_live_engxml(struct rpc_call *c, virDomainPtr dom, const char *id,
				     const char *what, enum rpc_err code)
{
	char *xml = virDomainGetXMLDesc(dom, 0);
	if (!xml) {
		virt_fail_libvirt(c, what, id);
		return NULL;
	}
	struct virt_engxml *ex = arena_alloc(c->arena, sizeof *ex);
	char why[256];
	int prc = engxml_parse(xml, ex, why, sizeof why);
	free(xml);
	if (prc < 0) {
		rpc_fail(c, code, "the VM's XML: %s", why);
		return NULL;
	}
	return ex;
}

/* pause / cont / shutdown: act on the domain, then wait for a fresh sample;
 * they differ only in the action. */
static int domain_verb(struct rpc_call *c, domain_action act, enum rpc_err down)
{
	if (on_domain_as(c, act, down) < 0)
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

/* VDSM refuses to resume a VM that is not running (Down after hibernate
 * or destroy) with 'unexpected' 16 (vm.py cont, _can_resume). */
static int act_cont(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
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
