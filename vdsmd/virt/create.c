/* vdsmd/virt/create.c - VM.create, in both of VDSM's forms:
 *
 *   {vmID, vmParams: {vmId, xml}}   the engine's: a full libvirt domain XML
 *       with ovirt-vm metadata (engxml.c).  Each disk that names a volume
 *       is prepared through the storage interface (virt_deps) and its source
 *       becomes the volume's path; each NIC's network becomes its bridge;
 *       the metadata stays in the domain.
 *   {vmID, vmParams: {vmName, memSize, smp, devices...}}   the flat form of
 *       older clients, turned into a minimal domain.
 *
 * Both create a transient domain, answer VDSM's VM status object (status
 * WaitForLaunch) and, through events.c, publish VM_status WaitForLaunch ->
 * Powering up -> Up when libvirt reports the domain started.  A vmID that is
 * known (running, or Down and not yet destroyed) answers code 4. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define MAX_NAME 255
#define MAX_DEVICES 64
#define MAX_MEM_MIB (16u << 20)   /* 16 TiB */
#define MAX_SMP 4096
#define MAX_XML (4u << 20)

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
		virt_xml_escape(x, path);
		buf_printf(x, "'/><target dev='vd%c' bus='virtio'/>", 'a' + (int)(*ndisk)++);
		if (serial) {
			buf_puts(x, "<serial>");
			virt_xml_escape(x, serial);
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
		virt_xml_escape(x, net && *net ? net : "default");
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

/* The flat vmParams: validate, then write a minimal domain into x. */
static int build_flat(struct rpc_call *c, const struct vd_value *p, const char *id,
		      const char *dtype, struct vd_buf *x, const char **name_out,
		      uint64_t *mem_mib, unsigned *smp_out)
{
	const char *name = member_str(c, p, "vmName", MAX_NAME);
	if (!name || !*name || strchr(name, '/'))
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.vmName: required (or vmParams.xml), "
				"1..%d characters, no '/'", MAX_NAME);
	/* MiB and vCPUs: a JSON integer or a string of digits (VDSM's flat
	 * form has "smp": "2") */
	int64_t mem, smp;
	if (rpc_member_int(c, "vmParams", p, "memSize", 1, MAX_MEM_MIB, 1024, &mem) < 0 ||
	    rpc_member_int(c, "vmParams", p, "smp", 1, MAX_SMP, 1, &smp) < 0)
		return -1;
	buf_printf(x, "<domain type='%s'><name>", dtype);
	virt_xml_escape(x, name);
	buf_printf(x, "</name><uuid>%s</uuid><memory unit='MiB'>%lld</memory>"
		   "<currentMemory unit='MiB'>%lld</currentMemory><vcpu>%lld</vcpu>"
		   "<os><type arch='x86_64'>hvm</type><boot dev='hd'/></os>"
		   "<on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot>"
		   "<on_crash>destroy</on_crash><devices>",
		   id, (long long)mem, (long long)mem, (long long)smp);
	unsigned ndisk = 0, ndev = 0;
	if (add_device_list(c, x, vd_obj_get(p, "devices"), NULL, &ndisk, &ndev) < 0 ||
	    add_device_list(c, x, vd_obj_get(p, "disks"), "disk", &ndisk, &ndev) < 0 ||
	    add_device_list(c, x, vd_obj_get(p, "nics"), "interface", &ndisk, &ndev) < 0)
		return -1;
	buf_puts(x, "<graphics type='vnc' port='-1' autoport='yes' listen='127.0.0.1'/>"
		     "<memballoon model='virtio'/></devices></domain>");
	buf_putc(x, '\0');
	*name_out = name;
	*mem_mib = (uint64_t)mem;
	*smp_out = (unsigned)smp;
	return 0;
}

/* The engine's XML: parse, resolve, rewrite into x. */
static int build_engine(struct rpc_call *c, struct virt_state *s, const struct vd_value *xv,
			const char *id, const char *dtype, struct vd_buf *x,
			const char **name_out, uint64_t *mem_mib, unsigned *smp)
{
	if (xv->type != VD_STRING || xv->v.s.len == 0 || xv->v.s.len > MAX_XML ||
	    memchr(xv->v.s.ptr, 0, xv->v.s.len))
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.xml: a domain XML string up to %u bytes",
				MAX_XML);
	char *xml = arena_strndup(c->arena, xv->v.s.ptr, xv->v.s.len);
	struct virt_engxml *ex = arena_alloc(c->arena, sizeof *ex);
	char why[256];
	if (engxml_parse(xml, ex, why, sizeof why) < 0)
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.%s", why);
	if (strcasecmp(ex->uuid, id) != 0)
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.xml: <uuid> %s differs from vmID", ex->uuid);
	if (virt_resolve_disks(c, s, ex) < 0 || virt_resolve_nics(c, s, ex, RPC_E_CREATE_VM) < 0)
		return -1;
	engxml_rewrite(xml, ex, dtype, x);
	*name_out = arena_strndup(c->arena, ex->name, strlen(ex->name));
	*mem_mib = ex->mem_mib;
	*smp = ex->smp ? ex->smp : 1;
	return 0;
}

/* The domain type this connection can run: test on the test driver, kvm
 * where libvirt offers it (its capabilities list a kvm domain), else qemu
 * (TCG: no /dev/kvm, or one the daemon may not open). */
static const char *domain_type(virConnectPtr conn)
{
	const char *drv = virConnectGetType(conn);
	if (drv && strcasecmp(drv, "test") == 0)
		return "test";
	char *caps = virConnectGetCapabilities(conn);
	bool kvm = caps && (strstr(caps, "<domain type='kvm'") || strstr(caps, "<domain type=\"kvm\""));
	free(caps);
	return kvm ? "kvm" : "qemu";
}

int virt_verb_create(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	const struct vd_value *p = rpc_arg(c, "vmParams");
	struct vd_buf x = VD_BUF_INIT;
	virDomainPtr dom = NULL;
	int rc = -1;

	if (virt_is_restore(p))   /* from hibernation (hibernate.c) */
		return virt_create_restore(c);
	const struct vd_value *vid = vd_obj_get(p, "vmId");
	if (vid && !vd_str_eq(vid, id))
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.vmId differs from vmID");
	const struct vd_value *xv = vd_obj_get(p, "xml");
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	uint64_t t0 = vd_now_ns();
	const char *dtype = domain_type(conn);
	const char *name = NULL;
	/* a known id fails before any disk is prepared (checked again below,
	 * atomically with marking the launch) */
	if (virt_known_vm(s, conn, id)) {
		rpc_fail(c, RPC_E_VM_EXISTS, "%s", id);
		goto out;
	}
	uint64_t mem_mib = 0;
	unsigned smp = 1;
	if ((xv ? build_engine(c, s, xv, id, dtype, &x, &name, &mem_mib, &smp)
		: build_flat(c, p, id, dtype, &x, &name, &mem_mib, &smp)) < 0)
		goto out;

	/* duplicate vmId: known to libvirt, or a Down VM not yet destroyed */
	virDomainPtr old = virDomainLookupByUUIDString(conn, id);
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = old ? NULL : track_claim(s, id, name);
	bool dup = !t;
	if (!dup) {
		/* events.c reports WaitForLaunch -> Powering up -> Up at STARTED */
		t->launching = true;
		t->created = false;
		t->status = VS_WAIT_FOR_LAUNCH;
	}
	pthread_mutex_unlock(&s->lock);
	if (old)
		virDomainFree(old);
	if (dup) {
		rpc_fail(c, RPC_E_VM_EXISTS, "%s", id);
		goto out;
	}
	dom = virDomainCreateXML(conn, x.data, 0);
	if (!dom) {
		int code = virt_last_error_code();
		char msg[512];
		snprintf(msg, sizeof msg, "%s", virt_last_error());
		pthread_mutex_lock(&s->lock);
		t = track_find(s, id);
		if (t && t->launching)
			track_remove(s, id);
		pthread_mutex_unlock(&s->lock);
		if (code == VIR_ERR_OPERATION_INVALID || code == VIR_ERR_DOM_EXIST)
			rpc_fail(c, RPC_E_VM_EXISTS, "%s: %s", id, msg);
		else
			rpc_fail(c, xv ? RPC_E_CREATE_VM : RPC_E_GENERAL, "create %s: %s", id, msg);
		goto out;
	}
	pthread_mutex_lock(&s->lock);
	t = track_find(s, id);
	if (t)
		t->created = true;   /* from now on libvirt says where it is */
	pthread_mutex_unlock(&s->lock);
	log_info("virt: created VM %s (%s) from %s in %.1f ms", id, name,
		 xv ? "the engine's XML" : "flat parameters",
		 (double)(vd_now_ns() - t0) / 1e6);
	virt_refresh(s);
	virt_write_created(c, id, name ? name : id,  /* both builders set it */
			   VS_WAIT_FOR_LAUNCH, (int64_t)mem_mib, smp);
	rc = 0;
out:
	if (dom)
		virDomainFree(dom);
	buf_free(&x);
	virConnectClose(conn);
	return rc;
}
