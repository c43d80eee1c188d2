/* vdsmd/virt/lifecycle.c - VM.create, VM.pause, VM.cont, VM.shutdown,
 * VM.destroy.  Declared RPC_F_BLOCKING: the engine runs them on the worker
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
#define MAX_NAME 255
#define MAX_DEVICES 64
#define MAX_MEM_MIB (16u << 20)   /* 16 TiB */
#define MAX_SMP 4096

static struct virt_state *state_of(const struct rpc_call *c)
{
	const struct vdsmd *d = c->app;
	return d ? d->virt : NULL;
}

/* Checks common to every lifecycle verb; returns the connection (a
 * reference) or NULL after failing the call. */
static virConnectPtr begin(struct rpc_call *c, struct virt_state *s)
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

static void refresh(struct virt_state *s)
{
	uint64_t ticket = virt_kick(s);
	if (!virt_wait_kick(s, ticket, REFRESH_WAIT_MS))
		log_warn("virt: no fresh sample within %u ms after a lifecycle verb",
			 REFRESH_WAIT_MS);
}

/* libvirt's domain for vmID; NULL with the call failed (code 1 when neither
 * libvirt nor the tracker knows it, else 100: the VM is Down). */
static virDomainPtr lookup(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
			   const char *id)
{
	virDomainPtr dom = virDomainLookupByUUIDString(conn, id);
	if (dom)
		return dom;
	pthread_mutex_lock(&s->lock);
	bool known = track_find(s, id) != NULL && !tomb_has(s, id);
	pthread_mutex_unlock(&s->lock);
	if (known)
		rpc_fail(c, RPC_E_GENERAL, "VM %s is Down", id);
	else
		rpc_fail(c, RPC_E_NO_VM, "%s", id);
	return NULL;
}

static int fail_libvirt(struct rpc_call *c, const char *what, const char *id)
{
	int code = virt_last_error_code();
	if (code == VIR_ERR_NO_DOMAIN)
		return rpc_fail(c, RPC_E_NO_VM, "%s", id);
	return rpc_fail(c, RPC_E_GENERAL, "%s %s: %s", what, id, virt_last_error());
}

/* The body of a verb on one existing domain: 0, or -1 with the call failed. */
typedef int (*domain_action)(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			     const char *id);

/* pause / cont / shutdown: begin, look the VM up, act, then wait for a fresh
 * sample; they differ only in the action. */
static int domain_verb(struct rpc_call *c, domain_action act)
{
	struct virt_state *s = state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	virConnectPtr conn = begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	virDomainPtr dom = lookup(c, s, conn, id);
	if (!dom)
		goto out;
	if (act(c, s, dom, id) < 0)
		goto out;
	rc = 0;
	refresh(s);
out:
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

static int act_pause(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	return virDomainSuspend(dom) < 0 ? fail_libvirt(c, "pause", id) : 0;
}

static int act_cont(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	return virDomainResume(dom) < 0 ? fail_libvirt(c, "cont", id) : 0;
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
	return state_change_result(c, domain_verb(c, act_pause));
}

int virt_verb_cont(struct rpc_call *c)
{
	return state_change_result(c, domain_verb(c, act_cont));
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

static int act_shutdown(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			const char *id)
{
	bool reboot = rpc_arg_bool(c, "reboot", false);
	bool force = rpc_arg_bool(c, "force", false);
	const char *msg = rpc_arg_str(c, "message", NULL);
	log_info("virt: %s %s%s%s", reboot ? "reboot" : "shutdown", id,
		 msg && *msg ? ": " : "", msg ? msg : "");
	if (!reboot)
		virt_mark_admin(s, id, virDomainGetName(dom), true);
	int r = reboot ? virDomainReboot(dom, 0) : virDomainShutdown(dom);
	if (r < 0 && force && !reboot)
		r = virDomainDestroy(dom);
	if (r < 0) {
		virt_mark_admin(s, id, NULL, false);
		return fail_libvirt(c, reboot ? "reboot" : "shutdown", id);
	}
	return 0;
}

int virt_verb_shutdown(struct rpc_call *c)
{
	return domain_verb(c, act_shutdown);
}

int virt_verb_destroy(struct rpc_call *c)
{
	struct virt_state *s = state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	virConnectPtr conn = begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	virDomainPtr dom = virDomainLookupByUUIDString(conn, id);
	if (dom) {
		if (virDomainIsActive(dom) == 1) {
			virt_mark_admin(s, id, virDomainGetName(dom), true);
			if (virDomainDestroy(dom) < 0 && virDomainIsActive(dom) == 1) {
				virt_mark_admin(s, id, NULL, false);
				fail_libvirt(c, "destroy", id);
				goto out;
			}
		}
		/* VDSM's VMs are transient; a persistent definition goes too */
		if (virDomainIsPersistent(dom) == 1 && virDomainUndefine(dom) < 0 &&
		    virt_last_error_code() != VIR_ERR_NO_DOMAIN) {
			fail_libvirt(c, "undefine", id);
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
	refresh(s);
out:
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

/* ---- VM.create ----------------------------------------------------------- */

static void xml_esc(struct vd_buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		switch (s[i]) {
		case '&': buf_puts(b, "&amp;"); break;
		case '<': buf_puts(b, "&lt;"); break;
		case '>': buf_puts(b, "&gt;"); break;
		case '\'': buf_puts(b, "&apos;"); break;
		case '"': buf_puts(b, "&quot;"); break;
		default: buf_putc(b, s[i]); break;
		}
	}
}

static void xml_escz(struct vd_buf *b, const char *s)
{
	xml_esc(b, s, strlen(s));
}

/* Integer from an int or a decimal string value; -1 when neither. */
static int64_t int_or_str(const struct vd_value *v, int64_t dflt)
{
	if (!v)
		return dflt;
	if (v->type == VD_INT)
		return v->v.i;
	if (v->type == VD_STRING && v->v.s.len > 0 && v->v.s.len < 19) {
		int64_t x = 0;
		for (size_t i = 0; i < v->v.s.len; i++) {
			char ch = v->v.s.ptr[i];
			if (ch < '0' || ch > '9')
				return -1;
			x = x * 10 + (ch - '0');
		}
		return x;
	}
	return -1;
}

/* A string member as a NUL-terminated copy in the arena (NULL when absent or
 * not a string or too long). */
static const char *member_str(struct rpc_call *c, const struct vd_value *obj,
			      const char *key, size_t maxlen)
{
	const struct vd_value *v = vd_obj_get(obj, key);
	if (!v || v->type != VD_STRING || v->v.s.len > maxlen || memchr(v->v.s.ptr, 0, v->v.s.len))
		return NULL;
	return arena_strndup(c->arena, v->v.s.ptr, v->v.s.len);
}

static bool is_mac(const char *m)
{
	if (strlen(m) != 17)
		return false;
	for (int i = 0; i < 17; i++) {
		char ch = m[i];
		if (i % 3 == 2 ? ch != ':' : !((ch >= '0' && ch <= '9') ||
					      (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
			return false;
	}
	return true;
}

/* Appends <disk>/<interface> for one device description; returns 0 or fails
 * the call.  Accepts VDSM's devices entries ({"type": "disk", "path": ...},
 * {"type": "interface", "macAddr": ..., "network": ...}). */
static int add_device(struct rpc_call *c, struct vd_buf *x, const struct vd_value *dev,
		      const char *kind, unsigned *ndisk)
{
	if (dev->type != VD_OBJECT)
		return rpc_fail(c, RPC_E_PARAMS, "vmParams: a device is not an object");
	const char *type = kind ? kind : member_str(c, dev, "type", 32);
	if (!type)
		return rpc_fail(c, RPC_E_PARAMS, "vmParams: device without a type");
	if (strcmp(type, "disk") == 0) {
		const char *path = member_str(c, dev, "path", 4096);
		if (!path || !*path)
			return rpc_fail(c, RPC_E_PARAMS, "vmParams: disk without a path");
		if (*ndisk >= 26)
			return rpc_fail(c, RPC_E_PARAMS, "vmParams: too many disks");
		const char *format = member_str(c, dev, "format", 16);
		const char *serial = member_str(c, dev, "imageID", 64);
		if (!serial)
			serial = member_str(c, dev, "serial", 64);
		bool cow = format && strcmp(format, "cow") == 0;
		bool block = strncmp(path, "/dev/", 5) == 0;
		buf_printf(x, "<disk type='%s' device='disk'><driver name='qemu' type='%s'/>",
			   block ? "block" : "file", cow ? "qcow2" : "raw");
		buf_printf(x, "<source %s='", block ? "dev" : "file");
		xml_escz(x, path);
		buf_printf(x, "'/><target dev='vd%c' bus='virtio'/>", 'a' + (int)(*ndisk)++);
		if (serial) {
			buf_puts(x, "<serial>");
			xml_escz(x, serial);
			buf_puts(x, "</serial>");
		}
		buf_puts(x, "</disk>");
		return 0;
	}
	if (strcmp(type, "interface") == 0 || strcmp(type, "bridge") == 0) {
		const char *mac = member_str(c, dev, "macAddr", 32);
		const char *net = member_str(c, dev, "network", 255);
		if (mac && !is_mac(mac))
			return rpc_fail(c, RPC_E_PARAMS, "vmParams: bad macAddr");
		buf_puts(x, "<interface type='network'>");
		if (mac)
			buf_printf(x, "<mac address='%s'/>", mac);
		buf_puts(x, "<source network='");
		xml_escz(x, net && *net ? net : "default");
		buf_puts(x, "'/><model type='virtio'/></interface>");
		return 0;
	}
	/* other VDSM device types (video, balloon, ...) are not modelled */
	return 0;
}

static int add_device_list(struct rpc_call *c, struct vd_buf *x, const struct vd_value *list,
			   const char *kind, unsigned *ndisk, unsigned *ndev)
{
	if (!list)
		return 0;
	if (list->type != VD_ARRAY)
		return rpc_fail(c, RPC_E_PARAMS, "vmParams: devices must be a list");
	for (size_t i = 0; i < list->v.arr.n; i++) {
		if (++*ndev > MAX_DEVICES)
			return rpc_fail(c, RPC_E_PARAMS, "vmParams: more than %d devices", MAX_DEVICES);
		if (add_device(c, x, &list->v.arr.items[i], kind, ndisk) < 0)
			return -1;
	}
	return 0;
}

int virt_verb_create(struct rpc_call *c)
{
	struct virt_state *s = state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	const struct vd_value *p = rpc_arg(c, "vmParams");
	struct vd_buf x = VD_BUF_INIT;
	virDomainPtr dom = NULL;
	int rc = -1;

	/* validate everything before touching libvirt */
	const char *name = member_str(c, p, "vmName", MAX_NAME);
	if (!name || !*name || strchr(name, '/'))
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.vmName: required, 1..%d characters, no '/'",
				MAX_NAME);
	int64_t mem = int_or_str(vd_obj_get(p, "memSize"), 1024);
	if (mem < 1 || mem > MAX_MEM_MIB)
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.memSize: MiB, 1..%u", MAX_MEM_MIB);
	int64_t smp = int_or_str(vd_obj_get(p, "smp"), 1);
	if (smp < 1 || smp > MAX_SMP)
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.smp: 1..%d", MAX_SMP);
	const struct vd_value *vid = vd_obj_get(p, "vmId");
	if (vid && !vd_str_eq(vid, id))
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.vmId differs from vmID");

	virConnectPtr conn = begin(c, s);
	if (!conn)
		return -1;
	const char *drv = virConnectGetType(conn);
	const char *dtype = drv && strcasecmp(drv, "test") == 0 ? "test" : "kvm";
	buf_printf(&x, "<domain type='%s'><name>", dtype);
	xml_escz(&x, name);
	buf_printf(&x, "</name><uuid>%s</uuid><memory unit='MiB'>%lld</memory>"
		   "<currentMemory unit='MiB'>%lld</currentMemory><vcpu>%lld</vcpu>"
		   "<os><type arch='x86_64'>hvm</type><boot dev='hd'/></os>"
		   "<on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot>"
		   "<on_crash>destroy</on_crash><devices>",
		   id, (long long)mem, (long long)mem, (long long)smp);
	unsigned ndisk = 0, ndev = 0;
	if (add_device_list(c, &x, vd_obj_get(p, "devices"), NULL, &ndisk, &ndev) < 0 ||
	    add_device_list(c, &x, vd_obj_get(p, "disks"), "disk", &ndisk, &ndev) < 0 ||
	    add_device_list(c, &x, vd_obj_get(p, "nics"), "interface", &ndisk, &ndev) < 0)
		goto out;
	buf_puts(&x, "<graphics type='vnc' port='-1' autoport='yes' listen='127.0.0.1'/>"
		     "<memballoon model='virtio'/></devices></domain>");
	buf_putc(&x, '\0');

	/* duplicate vmId: known to libvirt, or a Down VM not yet destroyed */
	virDomainPtr old = virDomainLookupByUUIDString(conn, id);
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	bool dup = old || (t && !tomb_has(s, id));
	if (!dup)
		tomb_del(s, id);
	pthread_mutex_unlock(&s->lock);
	if (old)
		virDomainFree(old);
	if (dup) {
		rpc_fail(c, RPC_E_VM_EXISTS, "%s", id);
		goto out;
	}
	dom = virDomainCreateXML(conn, x.data, 0);
	if (!dom) {
		if (virt_last_error_code() == VIR_ERR_OPERATION_INVALID ||
		    virt_last_error_code() == VIR_ERR_DOM_EXIST)
			rpc_fail(c, RPC_E_VM_EXISTS, "%s: %s", id, virt_last_error());
		else
			rpc_fail(c, RPC_E_GENERAL, "create %s: %s", id, virt_last_error());
		goto out;
	}
	log_info("virt: created VM %s (%s), %lld MiB, %lld vCPUs", id, name,
		 (long long)mem, (long long)smp);
	refresh(s);
	vw_begin_object(c->w);
	vw_kstr(c->w, "vmId", id);
	vw_kstr(c->w, "vmName", name);
	vw_kstr(c->w, "status", virt_status_name(VS_WAIT_FOR_LAUNCH));
	vw_kstrf(c->w, "statusTime", "%llu", (unsigned long long)vd_now_ms());
	vw_kint(c->w, "memSize", mem);
	vw_kstrf(c->w, "smp", "%lld", (long long)smp);
	vw_kstr(c->w, "vmType", "kvm");
	vw_end_object(c->w);
	rc = 0;
out:
	if (dom)
		virDomainFree(dom);
	buf_free(&x);
	virConnectClose(conn);
	return rc;
}
