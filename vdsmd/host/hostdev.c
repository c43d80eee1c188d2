/* vdsmd/host/hostdev.c - Host.hostdevListByCaps: the host's devices from
 * libvirt's node-device API, in VDSM's shape ({name: {"params": {...}}},
 * hostdev.py): capability, parent (every device but "computer"),
 * is_assignable, vendor/product/interface with their ids, and for PCI the
 * address, IOMMU group, NUMA node and physical function; for SCSI the
 * address; the bound driver when libvirt names one. */
#include "host_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

/* Text of the first <tag>...</tag> in [p, end), trimmed; false if none or
 * when it holds markup. */
static bool text_of(const char *p, const char *end, const char *tag, const char **v, size_t *vn)
{
	char open[48], close[48];
	snprintf(open, sizeof(open), "<%s", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	size_t ol = strlen(open);
	while (p < end) {
		const char *s = memmem(p, (size_t)(end - p), open, ol);
		if (!s)
			return false;
		const char *gt = memchr(s, '>', (size_t)(end - s));
		if (!gt)
			return false;
		p = gt + 1;
		if (s[ol] != '>' && s[ol] != ' ')
			continue;
		if (gt[-1] == '/')
			return false;
		const char *c = memmem(p, (size_t)(end - p), close, strlen(close));
		if (!c)
			return false;
		const char *a = p, *b = c;
		while (a < b && (*a == ' ' || *a == '\n' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\n' || b[-1] == '\t'))
			b--;
		if (memchr(a, '<', (size_t)(b - a)))
			return false;
		*v = a;
		*vn = (size_t)(b - a);
		return true;
	}
	return false;
}

/* Attribute name='value' inside the start tag at s (up to its '>'). */
static bool attr_of(const char *s, const char *end, const char *name, const char **v, size_t *vn)
{
	const char *gt = memchr(s, '>', (size_t)(end - s));
	if (!gt)
		return false;
	size_t nl = strlen(name);
	for (const char *q = s + 1; q + nl + 2 < gt; q++) {
		if (q[-1] != ' ' || memcmp(q, name, nl) != 0 || q[nl] != '=')
			continue;
		char quote = q[nl + 1];
		if (quote != '\'' && quote != '"')
			continue;
		const char *a = q + nl + 2, *b = memchr(a, quote, (size_t)(gt - a));
		if (!b)
			return false;
		*v = a;
		*vn = (size_t)(b - a);
		return true;
	}
	return false;
}

static void kstrn(struct vd_writer *w, const char *k, const char *v, size_t n)
{
	vw_keyz(w, k);
	vw_string(w, v, n);
}

static void address(struct vd_writer *w, const char *cb, const char *ce,
		    const char *const *fields, size_t nf)
{
	vw_keyz(w, "address");
	vw_begin_object(w);
	for (size_t i = 0; i < nf; i++) {
		const char *v;
		size_t vn;
		if (text_of(cb, ce, fields[i], &v, &vn))
			kstrn(w, fields[i], v, vn);
	}
	vw_end_object(w);
}

bool host_hostdev_capability(const char *xml, size_t len, char *out, size_t outlen)
{
	const char *end = xml + len;
	const char *cap = memmem(xml, len, "<capability", 11);
	const char *v;
	size_t vn;
	if (!cap || !attr_of(cap, end, "type", &v, &vn) || vn >= outlen)
		return false;
	snprintf(out, outlen, "%.*s", (int)vn, v);
	return true;
}

void host_hostdev_write(const char *name, const char *xml, size_t len, struct vd_writer *w)
{
	const char *end = xml + len, *v;
	size_t vn;
	char capname[32] = "";
	host_hostdev_capability(xml, len, capname, sizeof(capname));
	const char *cb = memmem(xml, len, "<capability", 11);
	const char *ce = end;
	if (cb) {
		const char *last = NULL;
		for (const char *q = cb; (q = memmem(q, (size_t)(end - q), "</capability>", 13)); q += 13)
			last = q;
		ce = last ? last : end;
	} else {
		cb = end;
	}
	vw_keyz(w, name);
	vw_begin_object(w);
	vw_keyz(w, "params");
	vw_begin_object(w);
	vw_kstr(w, "capability", capname);
	vw_kstr(w, "is_assignable", "true");
	if (strcmp(name, "computer") != 0 && text_of(xml, cb, "parent", &v, &vn))
		kstrn(w, "parent", v, vn);
	static const char *const info[] = { "vendor", "product", "interface" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(info); i++) {
		char open[24];
		snprintf(open, sizeof(open), "<%s", info[i]);
		const char *s = memmem(cb, (size_t)(ce - cb), open, strlen(open));
		if (!s)
			continue;
		char k[32];
		if (attr_of(s, ce, "id", &v, &vn)) {
			snprintf(k, sizeof(k), "%s_id", info[i]);
			kstrn(w, k, v, vn);
		}
		if (text_of(s, ce, info[i], &v, &vn) && vn)
			kstrn(w, info[i], v, vn);
	}
	const char *drv = memmem(xml, (size_t)(cb - xml), "<driver>", 8);
	if (drv && text_of(drv, cb, "name", &v, &vn))
		kstrn(w, "driver", v, vn);
	if (strcmp(capname, "pci") == 0) {
		static const char *const f[] = { "domain", "bus", "slot", "function" };
		address(w, cb, ce, f, VD_ARRAY_SIZE(f));
		const char *g = memmem(cb, (size_t)(ce - cb), "<iommuGroup", 11);
		if (g && attr_of(g, ce, "number", &v, &vn))
			kstrn(w, "iommu_group", v, vn);
		const char *nu = memmem(cb, (size_t)(ce - cb), "<numa", 5);
		if (nu && attr_of(nu, ce, "node", &v, &vn))
			kstrn(w, "numa_node", v, vn);
	} else if (strcmp(capname, "scsi") == 0) {
		static const char *const f[] = { "host", "bus", "target", "lun" };
		address(w, cb, ce, f, VD_ARRAY_SIZE(f));
	}
	vw_end_object(w);
	vw_end_object(w);
}

int host_hostdev_list(const char *uri, const struct host_strv *caps, struct vd_writer *w,
		      char *why, size_t whylen)
{
	virConnectPtr conn = virConnectOpenReadOnly(uri && *uri ? uri : NULL);
	if (!conn) {
		const char *m = virGetLastErrorMessage();
		snprintf(why, whylen, "libvirt %s: %s", uri ? uri : "", m ? m : "cannot connect");
		return VD_EIO;
	}
	virNodeDevicePtr *devs = NULL;
	int n = virConnectListAllNodeDevices(conn, &devs, 0);
	if (n < 0) {
		const char *m = virGetLastErrorMessage();
		snprintf(why, whylen, "node devices: %s", m ? m : "cannot list");
		virConnectClose(conn);
		return VD_EIO;
	}
	vw_begin_object(w);
	for (int i = 0; i < n; i++) {
		const char *name = virNodeDeviceGetName(devs[i]);
		char *xml = virNodeDeviceGetXMLDesc(devs[i], 0);
		char capname[32];
		if (name && xml && host_hostdev_capability(xml, strlen(xml), capname, sizeof(capname)) &&
		    (!caps || !caps->n || host_strv_has(caps, capname)))
			host_hostdev_write(name, xml, strlen(xml), w);
		free(xml);
		virNodeDeviceFree(devs[i]);
	}
	free(devs);
	vw_end_object(w);
	virConnectClose(conn);
	return 0;
}
