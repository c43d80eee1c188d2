/* vdsmd/virt/engxml.c - the oVirt engine's domain XML for VM.create
 * ({vmID, vmParams: {vmId, xml}}): read the ovirt-vm metadata (per disk:
 * poolID, domainID, imageID, volumeID; per NIC: network), then write the XML
 * libvirt gets, where each disk's source is the path its volume resolved to,
 * each NIC's source bridge is its network's bridge and the domain type fits
 * the hypervisor.  Everything else, the metadata included, passes through
 * unchanged: libvirt keeps <metadata> in the domain, so it survives a vdsmd
 * restart (recovery reads it back with engxml_parse on the live XML).
 *
 * The metadata namespace prefix is whatever the document binds to
 * http://ovirt.org/vm/1.0 (the engine writes "ovirt-vm"; libvirt keeps it). */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define OVIRT_VM_NS "http://ovirt.org/vm/1.0"

/* [start, end) of the value of attribute name in the start tag at p, or
 * false when the tag has no such attribute. */
static bool attr_span(const char *p, const char *name, const char **vs, const char **ve)
{
	const char *gt = strchr(p, '>');
	if (!gt)
		return false;
	size_t nl = strlen(name);
	for (const char *q = p + 1; q + nl + 1 < gt; q++) {
		if ((q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\n' || q[-1] == '\r') &&
		    strncmp(q, name, nl) == 0 && q[nl] == '=' &&
		    (q[nl + 1] == '\'' || q[nl + 1] == '"')) {
			char quote = q[nl + 1];
			const char *v = q + nl + 2;
			const char *e = memchr(v, quote, (size_t)(gt - v));
			if (!e)
				return false;
			*vs = v;
			*ve = e;
			return true;
		}
	}
	return false;
}

/* The namespace prefix bound to the ovirt-vm URI ("ovirt-vm"), or false. */
bool engxml_prefix(const char *xml, char *out, size_t outlen)
{
	const char *u = strstr(xml, "=\"" OVIRT_VM_NS "\"");
	if (!u)
		u = strstr(xml, "='" OVIRT_VM_NS "'");
	if (!u)
		return false;
	const char *p = u;
	while (p > xml && p[-1] != ':' && p[-1] != ' ' && p[-1] != '<')
		p--;
	if (p <= xml || p[-1] != ':' || p - xml < 6 || strncmp(p - 6, "xmlns:", 6) != 0)
		return false;
	size_t n = (size_t)(u - p);
	if (n == 0 || n >= outlen)
		return false;
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

static bool copy_span(char *out, size_t outlen, const char *s, const char *e)
{
	size_t n = (size_t)(e - s);
	if (n >= outlen)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return true;
}

/* Text of <pfx:name>..</pfx:name> in [p, end) into out (false if absent). */
static bool md_text(const char *p, const char *end, const char *pfx, const char *name,
		    char *out, size_t outlen)
{
	char tag[96];
	snprintf(tag, sizeof tag, "%s:%s", pfx, name);
	return dx_child_text(p, end, tag, out, outlen);
}

static bool uuid_ok(const char *s)
{
	return vd_is_uuid(s, strlen(s));
}

/* A network or bridge name: what a Linux interface name may hold. */
bool virt_netname_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 15)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* The metadata <pfx:device> elements: fill disks (by name) and NICs (by
 * mac_address) found in the devices section. */
static int parse_md_devices(const char *xml, const char *pfx, struct virt_engxml *x,
			    char *why, size_t whylen)
{
	char open[64];
	snprintf(open, sizeof open, "<%s:device", pfx);
	char close[64];
	snprintf(close, sizeof close, "</%s:device>", pfx);
	size_t ol = strlen(open);
	for (const char *p = strstr(xml, open); p; p = strstr(p + 1, open)) {
		if (p[ol] != ' ' && p[ol] != '>' && p[ol] != '\t' && p[ol] != '\n')
			continue;
		const char *gt = strchr(p, '>');
		if (!gt)
			break;
		const char *end = gt[-1] == '/' ? gt + 1 : strstr(gt, close);
		if (!end)
			break;
		const char *vs, *ve;
		char name[32] = "", mac[24] = "";
		if (attr_span(p, "name", &vs, &ve))
			copy_span(name, sizeof name, vs, ve);
		if (attr_span(p, "mac_address", &vs, &ve))
			copy_span(mac, sizeof mac, vs, ve);
		if (name[0]) {
			for (unsigned i = 0; i < x->ndisks; i++) {
				struct virt_engdisk *d = &x->disks[i];
				if (strcmp(d->dev, name) != 0)
					continue;
				bool any = false;
				any |= md_text(p, end, pfx, "poolID", d->pool, sizeof d->pool);
				any |= md_text(p, end, pfx, "domainID", d->domain, sizeof d->domain);
				any |= md_text(p, end, pfx, "imageID", d->image, sizeof d->image);
				any |= md_text(p, end, pfx, "volumeID", d->volume, sizeof d->volume);
				if (!any)
					break;
				if (!uuid_ok(d->domain) || !uuid_ok(d->image) || !uuid_ok(d->volume) ||
				    (d->pool[0] && !uuid_ok(d->pool))) {
					snprintf(why, whylen, "metadata of disk %s: domainID, imageID "
						 "and volumeID must be UUIDs", name);
					return VD_EINVAL;
				}
				d->has_volume = true;
			}
		} else if (mac[0]) {
			for (unsigned i = 0; i < x->nnics; i++) {
				struct virt_engnic *n = &x->nics[i];
				if (strcasecmp(n->mac, mac) != 0)
					continue;
				char net[64] = "";
				if (md_text(p, end, pfx, "network", net, sizeof net) && net[0])
					snprintf(n->network, sizeof n->network, "%s", net);
			}
		}
	}
	return 0;
}

static int parse_disk(const char *xml, const char *p, const char *end, struct virt_engxml *x)
{
	if (x->ndisks >= VIRT_ENG_MAX_DEV)
		return VD_ETOOBIG;
	struct virt_engdisk *d = &x->disks[x->ndisks];
	memset(d, 0, sizeof *d);
	const char *vs, *ve;
	if (attr_span(p, "device", &vs, &ve))
		copy_span(d->device, sizeof d->device, vs, ve);
	else
		strcpy(d->device, "disk");
	const char *t = dx_find_child(p, end, "target");
	if (!t || !attr_span(t, "dev", &vs, &ve) || !copy_span(d->dev, sizeof d->dev, vs, ve))
		return 0;   /* no target: nothing to resolve */
	const char *src = dx_find_child(p, end, "source");
	if (src && (attr_span(src, "file", &vs, &ve) || attr_span(src, "dev", &vs, &ve))) {
		d->src_off = (size_t)(vs - xml);
		d->src_len = (size_t)(ve - vs);
		d->has_src = true;
		copy_span(d->path, sizeof d->path, vs, ve);
	}
	x->ndisks++;
	return 0;
}

static int parse_nic(const char *xml, const char *p, const char *end, struct virt_engxml *x)
{
	if (x->nnics >= VIRT_ENG_MAX_DEV)
		return VD_ETOOBIG;
	struct virt_engnic *n = &x->nics[x->nnics];
	memset(n, 0, sizeof *n);
	const char *vs, *ve;
	const char *m = dx_find_child(p, end, "mac");
	if (m && attr_span(m, "address", &vs, &ve))
		copy_span(n->mac, sizeof n->mac, vs, ve);
	const char *src = dx_find_child(p, end, "source");
	if (src && attr_span(src, "bridge", &vs, &ve)) {
		n->src_off = (size_t)(vs - xml);
		n->src_len = (size_t)(ve - vs);
		n->has_src = true;
		copy_span(n->network, sizeof n->network, vs, ve);
	}
	x->nnics++;
	return 0;
}

int engxml_parse(const char *xml, struct virt_engxml *x, char *why, size_t whylen)
{
	memset(x, 0, sizeof *x);
	const char *dom = strstr(xml, "<domain");
	if (!dom || (dom[7] != ' ' && dom[7] != '>')) {
		snprintf(why, whylen, "xml: no <domain> element");
		return VD_EINVAL;
	}
	const char *vs, *ve;
	if (attr_span(dom, "type", &vs, &ve)) {
		x->type_off = (size_t)(vs - xml);
		x->type_len = (size_t)(ve - vs);
	}
	const char *dend = strstr(dom, "</domain>");
	if (!dend)
		dend = dom + strlen(dom);
	if (!dx_child_text(dom, dend, "uuid", x->uuid, sizeof x->uuid) || !uuid_ok(x->uuid)) {
		snprintf(why, whylen, "xml: <uuid> missing or not a UUID");
		return VD_EINVAL;
	}
	if (!dx_child_text(dom, dend, "name", x->name, sizeof x->name) || !x->name[0]) {
		snprintf(why, whylen, "xml: <name> missing");
		return VD_EINVAL;
	}
	char num[32];
	const char *m = dx_find_child(dom, dend, "memory");
	if (m && dx_child_text(dom, dend, "memory", num, sizeof num)) {
		char unit[16] = "KiB";
		if (attr_span(m, "unit", &vs, &ve))
			copy_span(unit, sizeof unit, vs, ve);
		unsigned long long v = strtoull(num, NULL, 10);
		int sh = unit[0] == 'G' || unit[0] == 'g' ? 30 : unit[0] == 'M' || unit[0] == 'm' ? 20 :
			 unit[0] == 'b' ? 0 : 10;
		x->mem_mib = sh >= 20 ? v << (sh - 20) : v >> (20 - sh);
	}
	const char *vc = dx_find_child(dom, dend, "vcpu");
	if (vc) {
		/* the online count (current=), else the element's text */
		if ((attr_span(vc, "current", &vs, &ve) && copy_span(num, sizeof num, vs, ve)) ||
		    dx_child_text(dom, dend, "vcpu", num, sizeof num))
			x->smp = (unsigned)strtoul(num, NULL, 10);
	}
	return engxml_parse_devices(xml, x, why, whylen);
}

int engxml_parse_devices(const char *xml, struct virt_engxml *x, char *why, size_t whylen)
{
	const char *dev = strstr(xml, "<devices>");
	const char *devend = dev ? strstr(dev, "</devices>") : NULL;
	for (const char *p = dev; p && devend && p < devend;) {
		const char *lt = strchr(p + 1, '<');
		if (!lt || lt >= devend)
			break;
		p = lt;
		int rc = 0;
		if (strncmp(lt, "<disk ", 6) == 0 || strncmp(lt, "<disk>", 6) == 0) {
			const char *e = dx_elem_end(lt, "disk");
			if (!e)
				break;
			rc = parse_disk(xml, lt, e, x);
			p = e - 1;
		} else if (strncmp(lt, "<interface ", 11) == 0) {
			const char *e = dx_elem_end(lt, "interface");
			if (!e)
				break;
			rc = parse_nic(xml, lt, e, x);
			p = e - 1;
		}
		if (rc < 0) {
			snprintf(why, whylen, "xml: more than %d disks or NICs", VIRT_ENG_MAX_DEV);
			return rc;
		}
	}
	char pfx[32];
	x->has_metadata = engxml_prefix(xml, pfx, sizeof pfx);
	if (x->has_metadata && parse_md_devices(xml, pfx, x, why, whylen) < 0)
		return VD_EINVAL;
	for (unsigned i = 0; i < x->nnics; i++)
		if (x->nics[i].network[0] && !virt_netname_ok(x->nics[i].network)) {
			snprintf(why, whylen, "xml: network name '%.64s' is not valid",
				 x->nics[i].network);
			return VD_EINVAL;
		}
	return 0;
}

bool engxml_swap_volume(char *md, const char *dev, const char *from, const char *to)
{
	char n1[64], n2[64], old[64];
	snprintf(n1, sizeof n1, "name=\"%s\"", dev);
	snprintf(n2, sizeof n2, "name='%s'", dev);
	snprintf(old, sizeof old, "<volumeID>%s</volumeID>", from);
	for (char *p = strstr(md, "<device"); p; p = strstr(p + 1, "<device")) {
		char *gt = strchr(p, '>');
		if (!gt || (!memmem(p, (size_t)(gt - p), n1, strlen(n1)) &&
			    !memmem(p, (size_t)(gt - p), n2, strlen(n2))))
			continue;
		char *end = strstr(gt, "</device>");
		char *v = strstr(gt, old);
		if (!v || !end || v >= end)
			return false;
		memcpy(v + strlen("<volumeID>"), to, 36);   /* same length: in place */
		return true;
	}
	return false;
}

struct edit {
	size_t off, len;
	const char *text;
};

static int edit_cmp(const void *a, const void *b)
{
	const struct edit *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

void virt_xml_escape(struct vd_buf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': buf_puts(b, "&amp;"); break;
		case '<': buf_puts(b, "&lt;"); break;
		case '>': buf_puts(b, "&gt;"); break;
		case '\'': buf_puts(b, "&apos;"); break;
		case '"': buf_puts(b, "&quot;"); break;
		default: buf_putc(b, *s); break;
		}
	}
}

void engxml_rewrite(const char *xml, const struct virt_engxml *x, const char *dom_type,
		    struct vd_buf *out)
{
	struct edit ed[2 * VIRT_ENG_MAX_DEV + 1];
	unsigned n = 0;
	if (dom_type && x->type_len)
		ed[n++] = (struct edit){ x->type_off, x->type_len, dom_type };
	for (unsigned i = 0; i < x->ndisks; i++)
		if (x->disks[i].has_src && x->disks[i].resolved[0])
			ed[n++] = (struct edit){ x->disks[i].src_off, x->disks[i].src_len,
						 x->disks[i].resolved };
	for (unsigned i = 0; i < x->nnics; i++)
		if (x->nics[i].has_src && x->nics[i].bridge[0])
			ed[n++] = (struct edit){ x->nics[i].src_off, x->nics[i].src_len,
						 x->nics[i].bridge };
	qsort(ed, n, sizeof ed[0], edit_cmp);
	size_t pos = 0;
	for (unsigned i = 0; i < n; i++) {
		buf_append(out, xml + pos, ed[i].off - pos);
		virt_xml_escape(out, ed[i].text);
		pos = ed[i].off + ed[i].len;
	}
	buf_puts(out, xml + pos);
	buf_putc(out, '\0');
}
