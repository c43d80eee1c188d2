/* vdsmd/virt/devices.c - devices of a running VM, changed live:
 *
 *   VM.hotplugDisk / VM.hotplugNic {vmID, params: {vmId, xml}}   the
 *       engine's <hotplug><devices><disk|interface>..</devices><metadata>..
 *       XML: a disk's volume is prepared and a NIC's network mapped as in
 *       VM.create, then the device is attached to the live domain.
 *   VM.hotunplugDisk / VM.hotunplugNic {vmID, params: {vmId, xml}}   the
 *       device named by its alias (ua-...) in <hotunplug> XML is detached
 *       (QEMU finishes when the guest lets go of a PCI device).
 *   VM.changeCD / VM.changeFloppy {vmID, driveSpec: {path} or the path}:
 *       the medium of the cdrom / floppy drive ("" ejects).
 *   VM.updateDevice {vmID, params: {deviceType: interface, alias,
 *       linkActive} or {deviceType: interface, xml} (the engine's form:
 *       the changed NIC's hotplug XML) or {deviceType: graphics, graphicsType: vnc|spice,
 *       password, ttl, existingConnAction, disconnectAction}}.
 *   VM.setTicket {vmID, password, ttl, existingConnAction}: the console
 *       password, valid for ttl seconds.
 *   VM.setBalloonTarget {vmID, target KiB}, VM.setNumberOfCpus {vmID,
 *       numberOfCpus}, VM.setIoTune {vmID, tunables}, VM.getIoTune {vmID}.
 *
 * Each change marks the VM's XML stale (so the next sample re-reads the
 * devices and the hash changes) and waits for that sample. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <time.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define MAX_DEV_XML (64u << 10)

static char *live_element(struct rpc_call *c, virDomainPtr dom, const char *kind,
			  const char *key);

/* params.xml as a NUL-terminated arena copy, or NULL after failing. */
static char *params_xml(struct rpc_call *c)
{
	const struct vd_value *p = rpc_arg(c, "params");
	const struct vd_value *x = vd_obj_get(p, "xml");
	if (!x || x->type != VD_STRING || x->v.s.len == 0 || x->v.s.len > MAX_DEV_XML ||
	    memchr(x->v.s.ptr, 0, x->v.s.len)) {
		rpc_fail(c, RPC_E_PARAMS, "params.xml: the device XML (up to %u bytes)", MAX_DEV_XML);
		return NULL;
	}
	return arena_strndup(c->arena, x->v.s.ptr, x->v.s.len);
}

/* The first <name ...>...</name> (or <name .../>) element in xml, as an
 * arena copy; NULL when absent. */
static char *element(struct rpc_call *c, const char *xml, const char *name)
{
	char open[32];
	snprintf(open, sizeof open, "<%s", name);
	size_t ol = strlen(open);
	for (const char *p = strstr(xml, open); p; p = strstr(p + 1, open)) {
		if (p[ol] != ' ' && p[ol] != '>' && p[ol] != '/' && p[ol] != '\n')
			continue;
		const char *e = dx_elem_end(p, name);
		return e ? arena_strndup(c->arena, p, (size_t)(e - p)) : NULL;
	}
	return NULL;
}

/* The live domain's ovirt-vm metadata, edited: the <device> elements of
 * add (a hotplug XML) appended, or the device named drop removed.  VDSM
 * keeps each device's metadata in the domain, so it survives a restart.
 * libvirt hands the element out and takes it back without the namespace
 * prefix (<vm><device name=..>..</device></vm>).  A failure here is logged;
 * the device change stands. */
static void edit_device_metadata(virDomainPtr dom, const char *id, const char *add,
				 const char *drop)
{
	char ap[32] = "";
	if (add && !engxml_prefix(add, ap, sizeof ap))
		return;   /* nothing to keep */
	char *cur = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, VIRT_OVIRT_VM_NS,
					 VIR_DOMAIN_AFFECT_LIVE);
	const char *end = cur ? strstr(cur, "</vm>") : NULL;
	struct vd_buf b = VD_BUF_INIT;
	if (end)
		buf_append(&b, cur, (size_t)(end - cur));
	else
		buf_puts(&b, "<vm>");
	buf_putc(&b, '\0');
	b.len--;
	if (drop) {
		char n1[64], n2[64];
		snprintf(n1, sizeof n1, "name=\"%s\"", drop);
		snprintf(n2, sizeof n2, "name='%s'", drop);
		for (char *p = strstr(b.data, "<device"); p; p = strstr(p + 1, "<device")) {
			char *gt = strchr(p, '>');
			if (!gt || (!memmem(p, (size_t)(gt - p), n1, strlen(n1)) &&
				    !memmem(p, (size_t)(gt - p), n2, strlen(n2))))
				continue;
			char *e = gt[-1] == '/' ? gt + 1 : strstr(gt, "</device>");
			if (!e)
				break;
			if (gt[-1] != '/')
				e += strlen("</device>");
			memmove(p, e, (size_t)(b.data + b.len - e) + 1);
			b.len -= (size_t)(e - p);
			break;
		}
	}
	if (add) {
		char open[48], close[48], o1[40], o2[40];
		snprintf(open, sizeof open, "<%s:device", ap);
		snprintf(close, sizeof close, "</%s:device>", ap);
		snprintf(o1, sizeof o1, "<%s:", ap);
		snprintf(o2, sizeof o2, "</%s:", ap);
		for (const char *p = strstr(add, open); p; p = strstr(p + 1, open)) {
			const char *e = strstr(p, close);
			if (!e)
				break;
			e += strlen(close);
			for (const char *q = p; q < e;) {
				if (strncmp(q, o1, strlen(o1)) == 0) {
					buf_putc(&b, '<');
					q += strlen(o1);
				} else if (strncmp(q, o2, strlen(o2)) == 0) {
					buf_puts(&b, "</");
					q += strlen(o2);
				} else {
					buf_putc(&b, *q++);
				}
			}
		}
	}
	buf_puts(&b, "</vm>");
	buf_putc(&b, '\0');
	if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, b.data, "ovirt-vm",
				 VIRT_OVIRT_VM_NS, VIR_DOMAIN_AFFECT_LIVE) < 0)
		log_warn("virt: keeping the device metadata of %s failed: %s", id, virt_last_error());
	buf_free(&b);
	free(cur);
}

/* mac (24 bytes, may be NULL): the hot-plugged NIC's MAC address. */
static int hotplug(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id,
		   const char *kind, char *mac)
{
	char *xml = params_xml(c);
	if (!xml)
		return -1;
	struct virt_engxml *ex = arena_alloc(c->arena, sizeof *ex);
	memset(ex, 0, sizeof *ex);
	char why[256];
	if (engxml_parse_devices(xml, ex, why, sizeof why) < 0)
		return rpc_fail(c, RPC_E_PARAMS, "params.%s", why);
	if ((strcmp(kind, "disk") == 0 ? ex->ndisks : ex->nnics) != 1)
		return rpc_fail(c, RPC_E_PARAMS, "params.xml: one <%s> in <devices> expected", kind);
	bool nic = strcmp(kind, "interface") == 0;
	if (virt_resolve_disks(c, s, ex) < 0 ||
	    virt_resolve_nics(c, s, ex, nic ? RPC_E_HOTPLUG_NIC : RPC_E_CREATE_VM) < 0)
		return -1;
	struct vd_buf out = VD_BUF_INIT;
	engxml_rewrite(xml, ex, NULL, &out);
	char *dev = element(c, out.data, kind);
	buf_free(&out);
	if (!dev)
		return rpc_fail(c, RPC_E_PARAMS, "params.xml: no <%s> element", kind);
	if (virDomainAttachDeviceFlags(dom, dev, VIR_DOMAIN_AFFECT_LIVE) < 0) {
		/* VDSM: libvirt refusing is hotplugNic 49 / hotplugDisk 45 */
		if (virt_last_error_code() != VIR_ERR_NO_DOMAIN)
			return rpc_fail(c, nic ? RPC_E_HOTPLUG_NIC : RPC_E_HOTPLUG_DISK, "%s: %s", id,
					virt_last_error());
		return virt_fail_libvirt(c, "hotplug", id);
	}
	if (ex->has_metadata)
		edit_device_metadata(dom, id, xml, NULL);
	if (mac && nic)
		snprintf(mac, 24, "%s", ex->nics[0].mac);
	log_info("virt: %s hot-plugged into %s", kind, id);
	return 0;
}

/* The value of attr='...' (or "...") in the start tag of el, copied to out. */
static void attr_of(const char *el, const char *attr, char *out, size_t outlen)
{
	out[0] = '\0';
	const char *gt = strchr(el, '>');
	size_t al = strlen(attr);
	for (const char *p = strstr(el, attr); p && (!gt || p < gt); p = strstr(p + 1, attr)) {
		if (p == el || p[-1] != ' ' || p[al] != '=' || (p[al + 1] != '\'' && p[al + 1] != '"'))
			continue;
		const char *ve = strchr(p + al + 2, p[al + 1]);
		if (ve && (size_t)(ve - p - al - 2) < outlen)
			snprintf(out, outlen, "%.*s", (int)(ve - p - al - 2), p + al + 2);
		return;
	}
}

/* VM.hotplugNic's result as VDSM answers it (vm.py hotplugNic):
 * {devices: [{macAddr, alias}], xml: the live domain XML}.  The engine's
 * ActivateDeactivateVmNicCommand casts devices to an array (absent: a
 * NullPointerException after a successful plug) and takes the alias of
 * the entry with its MAC address. */
static void write_nic_plugged(struct rpc_call *c, virDomainPtr dom, const char *mac)
{
	char *x = virDomainGetXMLDesc(dom, 0);
	char alias[128] = "", want[40], got[40];
	snprintf(want, sizeof want, "%s", mac);
	for (char *p = want; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (const char *p = x ? strstr(x, "<interface ") : NULL; p; p = strstr(p + 1, "<interface ")) {
		const char *e = dx_elem_end(p, "interface");
		if (!e)
			break;
		const char *m = dx_find_child(p, e, "mac");
		if (!m)
			continue;
		attr_of(m, "address", got, sizeof got);
		for (char *q = got; *q; q++)
			*q = (char)tolower((unsigned char)*q);
		if (strcmp(got, want) != 0)
			continue;
		const char *a = dx_find_child(p, e, "alias");
		if (a)
			attr_of(a, "name", alias, sizeof alias);
		break;
	}
	vw_begin_object(c->w);
	vw_keyz(c->w, "devices");
	vw_begin_array(c->w);
	vw_begin_object(c->w);
	vw_kstr(c->w, "macAddr", mac);
	vw_kstr(c->w, "alias", alias);
	vw_end_object(c->w);
	vw_end_array(c->w);
	vw_kstr(c->w, "xml", x ? x : "");
	vw_end_object(c->w);
	free(x);
}

static int hotunplug(struct rpc_call *c, const char *id, virDomainPtr dom, const char *kind)
{
	char *xml = params_xml(c);
	if (!xml)
		return -1;
	char *dev = element(c, xml, kind);
	if (!dev)
		return rpc_fail(c, RPC_E_PARAMS, "params.xml: no <%s> element", kind);
	char alias[128] = "";
	const char *a = dx_find_child(dev, dev + strlen(dev), "alias");
	const char *vs = a ? strstr(a, "name=") : NULL;
	if (vs && (vs[5] == '"' || vs[5] == '\'')) {
		const char *ve = strchr(vs + 6, vs[5]);
		if (ve && (size_t)(ve - vs - 6) < sizeof alias)
			snprintf(alias, sizeof alias, "%.*s", (int)(ve - vs - 6), vs + 6);
	}
	/* the disk's target names its metadata (VDSM: <device name="sdb">) */
	char target[32] = "";
	if (alias[0] && strcmp(kind, "disk") == 0) {
		char key[160];
		snprintf(key, sizeof key, "<alias name='%s'/>", alias);
		char *live = live_element(c, dom, "disk", key);
		const char *t = live ? dx_find_child(live, live + strlen(live), "target") : NULL;
		const char *dv = t ? strstr(t, "dev='") : NULL;
		if (dv && strchr(dv + 5, '\'') && (size_t)(strchr(dv + 5, '\'') - dv - 5) < sizeof target)
			snprintf(target, sizeof target, "%.*s", (int)(strchr(dv + 5, '\'') - dv - 5), dv + 5);
	}
	int r = alias[0] ? virDomainDetachDeviceAlias(dom, alias, VIR_DOMAIN_AFFECT_LIVE)
			 : virDomainDetachDeviceFlags(dom, dev, VIR_DOMAIN_AFFECT_LIVE);
	if (r < 0) {
		/* VDSM: hotunplugDisk 46 / hotunplugNic 50 (vm.py hotunplugDisk,
		 * hotunplugNic) */
		if (virt_last_error_code() != VIR_ERR_NO_DOMAIN)
			return rpc_fail(c, strcmp(kind, "disk") == 0 ? RPC_E_HOTUNPLUG_DISK :
					RPC_E_HOTUNPLUG_NIC, "%s: %s", id, virt_last_error());
		return virt_fail_libvirt(c, "hotunplug", id);
	}
	if (target[0])
		edit_device_metadata(dom, id, NULL, target);
	log_info("virt: %s %s unplug requested from %s", kind, alias[0] ? alias : "", id);
	return 0;
}

static int act_hotplug_disk(struct rpc_call *c, struct virt_state *s, virDomainPtr d, const char *id)
{
	return hotplug(c, s, d, id, "disk", NULL);
}

static int act_hotplug_nic(struct rpc_call *c, struct virt_state *s, virDomainPtr d, const char *id)
{
	char mac[24] = "";
	if (hotplug(c, s, d, id, "interface", mac) < 0)
		return -1;
	write_nic_plugged(c, d, mac);
	return 0;
}

static int act_unplug_disk(struct rpc_call *c, struct virt_state *s, virDomainPtr d, const char *id)
{
	(void)s;
	return hotunplug(c, id, d, "disk");
}

static int act_unplug_nic(struct rpc_call *c, struct virt_state *s, virDomainPtr d, const char *id)
{
	(void)s;
	return hotunplug(c, id, d, "interface");
}

int virt_verb_hotplug_disk(struct rpc_call *c) { return virt_on_devices(c, act_hotplug_disk, true); }
int virt_verb_hotplug_nic(struct rpc_call *c) { return virt_on_devices(c, act_hotplug_nic, false); }
int virt_verb_hotunplug_disk(struct rpc_call *c) { return virt_on_devices(c, act_unplug_disk, true); }
int virt_verb_hotunplug_nic(struct rpc_call *c) { return virt_on_devices(c, act_unplug_nic, true); }

/* The live element (an arena copy) of kind whose child/attribute text
 * contains key (an alias, a target); NULL when none. */
static char *live_element(struct rpc_call *c, virDomainPtr dom, const char *kind, const char *key)
{
	char *x = virDomainGetXMLDesc(dom, 0);
	if (!x)
		return NULL;
	char *found = NULL;
	char open[32];
	snprintf(open, sizeof open, "<%s ", kind);
	for (const char *p = strstr(x, open); p; p = strstr(p + 1, open)) {
		const char *e = dx_elem_end(p, kind);
		if (!e)
			break;
		char *el = arena_strndup(c->arena, p, (size_t)(e - p));
		if (!key || strstr(el, key)) {
			found = el;
			break;
		}
	}
	free(x);
	return found;
}

/* el with attribute name (in its start tag) set to value: replaced when
 * present, added otherwise.  value must need no escaping. */
static char *set_attr(struct rpc_call *c, const char *el, const char *name, const char *value)
{
	const char *gt = strchr(el, '>');
	size_t nl = strlen(name);
	struct vd_buf b = VD_BUF_INIT;
	const char *p = el;
	for (; p && p < gt; p++)
		if (p[-1] == ' ' && strncmp(p, name, nl) == 0 && p[nl] == '=' &&
		    (p[nl + 1] == '\'' || p[nl + 1] == '"'))
			break;
	if (p && p < gt) {
		const char *ve = strchr(p + nl + 2, p[nl + 1]);
		buf_append(&b, el, (size_t)(p - el));
		buf_printf(&b, "%s='%s'", name, value);
		buf_puts(&b, ve + 1);
	} else {
		const char *ins = gt[-1] == '/' ? gt - 1 : gt;
		buf_append(&b, el, (size_t)(ins - el));
		buf_printf(&b, " %s='%s'", name, value);
		buf_puts(&b, ins);
	}
	buf_putc(&b, '\0');
	char *r = arena_strndup(c->arena, b.data, strlen(b.data));
	buf_free(&b);
	return r;
}

static bool plain_value(const char *v)
{
	return v && !strpbrk(v, "<>&'\"");
}

/* The console password of the graphics device of type gtype (NULL: the
 * first one), valid ttl seconds (0: no expiry; libvirt's passwdValidTo, in
 * UTC, after which QEMU refuses the password); existing connections kept,
 * disconnected or refused (spice's connected=; libvirt's VNC keeps them).
 * missing: the error when the VM has no such console. */
static int set_ticket(struct rpc_call *c, virDomainPtr dom, const char *id, const char *pw,
		      int64_t ttl, const char *conn_action, const char *gtype,
		      enum rpc_err missing)
{
	if (!plain_value(pw) || strlen(pw) > 255)
		return rpc_fail(c, RPC_E_PARAMS, "password: up to 255 characters, no XML specials");
	if (ttl < 0 || ttl > 10 * 365 * 86400L)
		return rpc_fail(c, RPC_E_PARAMS, "ttl: seconds, 0..10 years");
	if (gtype && strcmp(gtype, "vnc") && strcmp(gtype, "spice"))
		return rpc_fail(c, RPC_E_PARAMS, "graphicsType: vnc or spice");
	char key[32];
	snprintf(key, sizeof key, "type='%s'", gtype ? gtype : "");
	char *g = live_element(c, dom, "graphics", gtype ? key : NULL);
	if (!g)
		return rpc_fail(c, missing, "VM %s has no %s console", id, gtype ? gtype : "graphics");
	g = set_attr(c, g, "passwd", pw);
	if (ttl > 0) {
		time_t until = time(NULL) + (time_t)ttl;
		struct tm tm;
		gmtime_r(&until, &tm);
		char ts[32];
		strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
		g = set_attr(c, g, "passwdValidTo", ts);
	}
	if (conn_action && *conn_action) {
		if (strcmp(conn_action, "disconnect") && strcmp(conn_action, "keep") &&
		    strcmp(conn_action, "fail"))
			return rpc_fail(c, RPC_E_PARAMS, "existingConnAction: disconnect, keep or fail");
		if (strstr(g, "type='spice'"))
			g = set_attr(c, g, "connected", conn_action);
	}
	if (virDomainUpdateDeviceFlags(dom, g, VIR_DOMAIN_AFFECT_LIVE) < 0)
		return virt_fail_libvirt(c, "setTicket", id);
	log_info("virt: console ticket of %s set, valid %lld s", id, (long long)ttl);
	return 0;
}

static int act_set_ticket(struct rpc_call *c, struct virt_state *s, virDomainPtr d, const char *id)
{
	(void)s;
	return set_ticket(c, d, id, rpc_arg_str(c, "password", NULL), rpc_arg_int(c, "ttl", 0),
			  rpc_arg_str(c, "existingConnAction", NULL), NULL, RPC_E_TICKET);
}

int virt_verb_set_ticket(struct rpc_call *c) { return virt_on_devices(c, act_set_ticket, false); }

/* A string member of obj as an arena copy (NULL when absent / not a string). */
static const char *mstr(struct rpc_call *c, const struct vd_value *obj, const char *key)
{
	const struct vd_value *v = vd_obj_get(obj, key);
	if (!v || v->type != VD_STRING || v->v.s.len > 4096 || memchr(v->v.s.ptr, 0, v->v.s.len))
		return NULL;
	return arena_strndup(c->arena, v->v.s.ptr, v->v.s.len);
}

static bool mbool(const struct vd_value *obj, const char *key, bool dflt)
{
	const struct vd_value *v = vd_obj_get(obj, key);
	if (v && v->type == VD_BOOL)
		return v->v.b;
	if (v && v->type == VD_STRING)
		return v->v.s.len == 4 && strncmp(v->v.s.ptr, "true", 4) == 0;
	return dflt;
}

/* el (an <interface> element) with its child element name replaced by
 * repl (appended when el has none; repl NULL keeps el as it is). */
static char *with_child(struct rpc_call *c, const char *el, const char *name, const char *repl)
{
	const char *end = el + strlen(el);
	const char *ch = repl ? dx_find_child(el, end, name) : NULL;
	const char *che = ch ? dx_elem_end(ch, name) : NULL;
	if (!repl || (ch && !che))
		return arena_strndup(c->arena, el, strlen(el));
	const char *close = strstr(el, "</interface>");
	const char *cut = ch ? ch : close ? close : end;
	struct vd_buf b = VD_BUF_INIT;
	buf_append(&b, el, (size_t)(cut - el));
	buf_puts(&b, repl);
	buf_puts(&b, ch ? che : cut);
	buf_putc(&b, '\0');
	char *out = arena_strndup(c->arena, b.data, strlen(b.data));
	buf_free(&b);
	return out;
}

/* The live NIC replaced by nic; libvirt refusing is VDSM's
 * UpdateDeviceFailed 56 (vm.py _updateInterfaceDevice). */
static int update_nic(struct rpc_call *c, virDomainPtr dom, const char *id, const char *nic,
		      const char *name, const char *state)
{
	if (virDomainUpdateDeviceFlags(dom, nic, VIR_DOMAIN_AFFECT_LIVE) < 0) {
		if (virt_last_error_code() == VIR_ERR_NO_DOMAIN)
			return rpc_fail(c, RPC_E_NO_VM, "%s", id);
		return rpc_fail(c, RPC_E_UPDATE_DEVICE, "NIC %s of %s: %s", name, id,
				virt_last_error());
	}
	log_info("virt: NIC %s of %s updated, link %s", name, id, state);
	return 0;
}

/* The engine's form (UpdateVmInterfaceVDSCommand): params.xml is the
 * hotplug XML of the changed NIC.  As VDSM (vm.py updateDevice), the NIC
 * is read from it and found among the live ones by its alias, else its
 * MAC; its network is mapped as in VM.hotplugNic, and its link state
 * (absent: up) and source (the network) replace the live NIC's. */
static int update_nic_xml(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			  const char *id)
{
	char *xml = params_xml(c);
	if (!xml)
		return -1;
	struct virt_engxml *ex = arena_alloc(c->arena, sizeof *ex);
	memset(ex, 0, sizeof *ex);
	char why[256];
	if (engxml_parse_devices(xml, ex, why, sizeof why) < 0)
		return rpc_fail(c, RPC_E_PARAMS, "params.%s", why);
	if (ex->nnics != 1)
		return rpc_fail(c, RPC_E_PARAMS, "params.xml: one <interface> in <devices> expected");
	if (virt_resolve_nics(c, s, ex, RPC_E_UPDATE_DEVICE) < 0)
		return -1;
	struct vd_buf out = VD_BUF_INIT;
	engxml_rewrite(xml, ex, NULL, &out);
	char *want = element(c, out.data, "interface");
	buf_free(&out);
	if (!want)
		return rpc_fail(c, RPC_E_PARAMS, "params.xml: no <interface> element");
	const char *wend = want + strlen(want);
	char alias[128] = "", mac[40], state[16] = "up", key[200];
	const char *a = dx_find_child(want, wend, "alias");
	if (a)
		attr_of(a, "name", alias, sizeof alias);
	snprintf(mac, sizeof mac, "%s", ex->nics[0].mac);
	for (char *q = mac; *q; q++)
		*q = (char)tolower((unsigned char)*q);
	char *live = NULL;
	if (alias[0] && plain_value(alias)) {
		snprintf(key, sizeof key, "<alias name='%s'/>", alias);
		live = live_element(c, dom, "interface", key);
	}
	if (!live && mac[0] && plain_value(mac)) {
		snprintf(key, sizeof key, "<mac address='%s'/>", mac);
		live = live_element(c, dom, "interface", key);
	}
	if (!live)
		return rpc_fail(c, RPC_E_UPDATE_DEVICE, "VM %s has no NIC %s (%s)", id,
				alias[0] ? alias : "-", mac[0] ? mac : "-");
	const char *l = dx_find_child(want, wend, "link");
	if (l)
		attr_of(l, "state", state, sizeof state);
	if (strcmp(state, "up") && strcmp(state, "down"))
		return rpc_fail(c, RPC_E_PARAMS, "params.xml: <link state> up or down");
	char link[32];
	snprintf(link, sizeof link, "<link state='%s'/>", state);
	const char *src = dx_find_child(want, wend, "source");
	const char *srce = src ? dx_elem_end(src, "source") : NULL;
	char *nic = with_child(c, live, "link", link);
	if (srce)
		nic = with_child(c, nic, "source", arena_strndup(c->arena, src, (size_t)(srce - src)));
	return update_nic(c, dom, id, nic, alias[0] ? alias : mac, state);
}

static int act_update_device(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			     const char *id)
{
	const struct vd_value *p = rpc_arg(c, "params");
	const char *type = mstr(c, p, "deviceType");
	if (!type)
		return rpc_fail(c, RPC_E_PARAMS, "params.deviceType: interface or graphics");
	if (strcmp(type, "graphics") == 0) {
		/* VDSM: graphicsType picks the console; disconnectAction is what
		 * the guest agent does when the client leaves (accepted, no agent
		 * acts on it here) */
		const struct vd_value *ttl = vd_obj_get(p, "ttl");
		const char *da = mstr(c, p, "disconnectAction");
		if (da && strcmp(da, "LOCK_SCREEN") && strcmp(da, "LOGOUT") && strcmp(da, "REBOOT") &&
		    strcmp(da, "SHUTDOWN") && strcmp(da, "NONE"))
			return rpc_fail(c, RPC_E_PARAMS, "params.disconnectAction: LOCK_SCREEN, LOGOUT, "
					"REBOOT, SHUTDOWN or NONE");
		return set_ticket(c, dom, id, mstr(c, p, "password"),
				  ttl && ttl->type == VD_INT ? ttl->v.i : 0,
				  mstr(c, p, "existingConnAction"), mstr(c, p, "graphicsType"),
				  RPC_E_UPDATE_DEVICE);
	}
	if (strcmp(type, "interface") != 0)
		return rpc_fail(c, RPC_E_PARAMS, "params.deviceType: %s is not supported", type);
	if (vd_obj_get(p, "xml"))
		return update_nic_xml(c, s, dom, id);
	const char *alias = mstr(c, p, "alias");
	if (!plain_value(alias) || !*alias)
		return rpc_fail(c, RPC_E_PARAMS, "params.alias: the NIC's alias (or params.xml)");
	char key[160];
	snprintf(key, sizeof key, "<alias name='%s'/>", alias);
	char *nic = live_element(c, dom, "interface", key);
	if (!nic)
		return rpc_fail(c, RPC_E_UPDATE_DEVICE, "VM %s has no NIC %s", id, alias);
	const char *state = mbool(p, "linkActive", true) ? "up" : "down";
	char link[32];
	snprintf(link, sizeof link, "<link state='%s'/>", state);
	return update_nic(c, dom, id, with_child(c, nic, "link", link), alias, state);
}

int virt_verb_update_device(struct rpc_call *c) { return virt_on_devices(c, act_update_device, true); }

/* The medium of the VM's first drive of kind (device='cdrom' or 'floppy'):
 * driveSpec is {path} or the path itself; "" ejects (VDSM: the floppy is
 * always fda). */
static int change_media(struct rpc_call *c, virDomainPtr dom, const char *id, const char *kind)
{
	const struct vd_value *spec = rpc_arg(c, "driveSpec");
	const char *path = spec && spec->type == VD_STRING ?
		arena_strndup(c->arena, spec->v.s.ptr, spec->v.s.len) : mstr(c, spec, "path");
	if (!path || (*path && (!plain_value(path) || *path != '/')))
		return rpc_fail(c, RPC_E_PARAMS, "driveSpec.path: an absolute path, or \"\" to eject");
	char key[32];
	snprintf(key, sizeof key, "device='%s'", kind);
	char *cd = live_element(c, dom, "disk", key);
	if (!cd)
		return rpc_fail(c, RPC_E_CHANGE_DISK, "VM %s has no %s drive", id, kind);
	/* the drive without its medium, then the new one (if any) */
	struct vd_buf b = VD_BUF_INIT;
	const char *src = strstr(cd, "<source ");
	const char *body = strchr(cd, '>') + 1;
	buf_append(&b, cd, (size_t)(body - cd));
	if (*path) {
		buf_puts(&b, "<source file='");
		buf_puts(&b, path);
		buf_puts(&b, "'/>");
	}
	if (src) {
		const char *se = dx_elem_end(src, "source");
		buf_append(&b, body, (size_t)(src - body));
		buf_puts(&b, se);
	} else {
		buf_puts(&b, body);
	}
	buf_putc(&b, '\0');
	int r = virDomainUpdateDeviceFlags(dom, b.data, VIR_DOMAIN_AFFECT_LIVE |
					   VIR_DOMAIN_DEVICE_MODIFY_FORCE);
	buf_free(&b);
	if (r < 0) {
		if (virt_last_error_code() == VIR_ERR_NO_DOMAIN)
			return rpc_fail(c, RPC_E_NO_VM, "%s", id);
		return rpc_fail(c, RPC_E_CHANGE_DISK, "%s of %s: %s", kind, id, virt_last_error());
	}
	log_info("virt: %s of %s is now %s", kind, id, *path ? path : "(ejected)");
	return 0;
}

static int act_change_cd(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	return change_media(c, dom, id, "cdrom");
}

static int act_change_floppy(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			     const char *id)
{
	(void)s;
	return change_media(c, dom, id, "floppy");
}

int virt_verb_change_floppy(struct rpc_call *c) { return virt_on_devices(c, act_change_floppy, true); }

int virt_verb_change_cd(struct rpc_call *c) { return virt_on_devices(c, act_change_cd, true); }

static int act_balloon(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	int64_t target = rpc_arg_int(c, "target", -1);
	if (target <= 0)
		return rpc_fail(c, RPC_E_PARAMS, "target: KiB, > 0");
	if (virDomainSetMemoryFlags(dom, (unsigned long)target, VIR_DOMAIN_AFFECT_LIVE) < 0)
		return virt_fail_libvirt(c, "setBalloonTarget", id);
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	if (t)
		t->balloon_target_kib = (uint64_t)target;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* VDSM answers {code, message} (Bridge.py 'VM_setBalloonTarget': 'status'). */
int virt_verb_set_balloon_target(struct rpc_call *c)
{
	if (virt_on_devices(c, act_balloon, false) < 0)
		return -1;
	rpc_write_done(c);
	return 0;
}

static int act_cpus(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	int64_t n = rpc_arg_int(c, "numberOfCpus", -1);
	if (n < 1 || n > 4096)
		return rpc_fail(c, RPC_E_PARAMS, "numberOfCpus: 1..4096");
	if (virDomainSetVcpusFlags(dom, (unsigned)n, VIR_DOMAIN_AFFECT_LIVE) < 0)
		return virt_fail_libvirt(c, "setNumberOfCpus", id);
	log_info("virt: %s has %lld vCPUs", id, (long long)n);
	return 0;
}

int virt_verb_set_number_of_cpus(struct rpc_call *c) { return virt_on_devices(c, act_cpus, true); }

/* VDSM's ioTune keys, libvirt's typed parameter names. */
static const char *const iotune_keys[][2] = {
	{ "total_bytes_sec", VIR_DOMAIN_BLOCK_IOTUNE_TOTAL_BYTES_SEC },
	{ "read_bytes_sec", VIR_DOMAIN_BLOCK_IOTUNE_READ_BYTES_SEC },
	{ "write_bytes_sec", VIR_DOMAIN_BLOCK_IOTUNE_WRITE_BYTES_SEC },
	{ "total_iops_sec", VIR_DOMAIN_BLOCK_IOTUNE_TOTAL_IOPS_SEC },
	{ "read_iops_sec", VIR_DOMAIN_BLOCK_IOTUNE_READ_IOPS_SEC },
	{ "write_iops_sec", VIR_DOMAIN_BLOCK_IOTUNE_WRITE_IOPS_SEC },
};
#define N_IOTUNE (sizeof iotune_keys / sizeof iotune_keys[0])

static int act_set_iotune(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			  const char *id)
{
	(void)s;
	const struct vd_value *list = rpc_arg(c, "tunables");
	if (!list || list->type != VD_ARRAY || list->v.arr.n > 64)
		return rpc_fail(c, RPC_E_PARAMS, "tunables: a list (up to 64)");
	for (size_t i = 0; i < list->v.arr.n; i++) {
		const struct vd_value *t = &list->v.arr.items[i];
		const char *name = mstr(c, t, "name");
		const struct vd_value *io = vd_obj_get(t, "ioTune");
		if (!name || !*name || !io || io->type != VD_OBJECT)
			return rpc_fail(c, RPC_E_PARAMS, "tunables[%zu]: {name, ioTune} expected", i);
		virTypedParameter tp[N_IOTUNE];
		int n = 0;
		for (size_t k = 0; k < N_IOTUNE; k++) {
			const struct vd_value *v = vd_obj_get(io, iotune_keys[k][0]);
			if (!v)
				continue;
			if (v->type != VD_INT || v->v.i < 0)
				return rpc_fail(c, RPC_E_PARAMS, "tunables[%zu].ioTune.%s: an integer >= 0",
						i, iotune_keys[k][0]);
			memset(&tp[n], 0, sizeof tp[n]);
			snprintf(tp[n].field, sizeof tp[n].field, "%s", iotune_keys[k][1]);
			tp[n].type = VIR_TYPED_PARAM_ULLONG;
			tp[n].value.ul = (unsigned long long)v->v.i;
			n++;
		}
		if (virDomainSetBlockIoTune(dom, name, tp, n, VIR_DOMAIN_AFFECT_LIVE) < 0)
			return virt_fail_libvirt(c, "setIoTune", id);
	}
	return 0;
}

/* VDSM answers {code, message} (Bridge.py 'VM_setIoTune': 'status';
 * vm.py setIoTune returns response.success()). */
int virt_verb_set_iotune(struct rpc_call *c)
{
	if (virt_on_devices(c, act_set_iotune, false) < 0)
		return -1;
	rpc_write_done(c);
	return 0;
}

/* [{name, path, ioTune: {...}}] for every disk with a target. */
static int act_get_iotune(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			  const char *id)
{
	(void)s;
	char *x = virDomainGetXMLDesc(dom, 0);
	if (!x)
		return virt_fail_libvirt(c, "getIoTune", id);
	struct virt_domxml dx;
	int prc = domxml_parse(x, &dx);
	free(x);
	if (prc < 0)
		return rpc_fail(c, RPC_E_GENERAL, "VM %s: unreadable domain XML", id);
	vw_begin_array(c->w);
	for (unsigned i = 0; i < dx.ndisks; i++) {
		virTypedParameterPtr tp = NULL;
		int n = 0;
		if (virDomainGetBlockIoTune(dom, dx.disks[i].dev, NULL, &n, 0) < 0 || n <= 0)
			continue;
		tp = xcalloc((size_t)n, sizeof *tp);
		if (virDomainGetBlockIoTune(dom, dx.disks[i].dev, tp, &n, 0) < 0) {
			free(tp);
			continue;
		}
		vw_begin_object(c->w);
		vw_kstr(c->w, "name", dx.disks[i].dev);
		vw_kstr(c->w, "path", dx.disks[i].path ? dx.disks[i].path : "");
		vw_keyz(c->w, "ioTune");
		vw_begin_object(c->w);
		for (size_t k = 0; k < N_IOTUNE; k++)
			for (int j = 0; j < n; j++)
				if (strcmp(tp[j].field, iotune_keys[k][1]) == 0)
					vw_kint(c->w, iotune_keys[k][0], (int64_t)tp[j].value.ul);
		vw_end_object(c->w);
		vw_end_object(c->w);
		virTypedParamsClear(tp, n);
		free(tp);
	}
	vw_end_array(c->w);
	domxml_free(&dx);
	return 0;
}

int virt_verb_get_iotune(struct rpc_call *c) { return virt_on_devices(c, act_get_iotune, false); }
