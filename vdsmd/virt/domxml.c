/* vdsmd/virt/domxml.c - the few facts the VM stats need from a domain's XML:
 * disks (target dev, source path, serial = VDSM image id), interfaces
 * (target dev, MAC, network) and displays (graphics type, ports, listen).
 *
 * libvirt writes this XML itself (virDomainGetXMLDesc), in a stable shape:
 * elements and attributes with single quotes.  A small scanner is enough and
 * avoids a libxml2 dependency; anything it cannot read is left empty. */
#include "virt_int.h"

#include <stdlib.h>
#include <string.h>

/* End of the element that starts at p (the matching "</name>"), or NULL. */
const char *dx_elem_end(const char *p, const char *name)
{
	char close[32];
	snprintf(close, sizeof close, "</%s>", name);
	const char *gt = strchr(p, '>');
	if (!gt)
		return NULL;
	if (gt[-1] == '/')
		return gt + 1;      /* <name .../> */
	const char *e = strstr(gt, close);
	return e ? e + strlen(close) : NULL;
}

/* Value of attribute name in the start tag at p (up to its '>'), copied into
 * out[outlen].  Returns true when found. */
bool dx_tag_attr(const char *p, const char *name, char *out, size_t outlen)
{
	const char *gt = strchr(p, '>');
	if (!gt)
		return false;
	size_t nl = strlen(name);
	for (const char *q = p + 1; q < gt; q++) {
		if ((q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\n') &&
		    strncmp(q, name, nl) == 0 && q[nl] == '=' &&
		    (q[nl + 1] == '\'' || q[nl + 1] == '"')) {
			char quote = q[nl + 1];
			const char *v = q + nl + 2;
			const char *ve = strchr(v, quote);
			if (!ve || ve > gt)
				return false;
			size_t n = (size_t)(ve - v);
			if (n >= outlen)
				n = outlen - 1;
			memcpy(out, v, n);
			out[n] = '\0';
			return true;
		}
	}
	return false;
}

/* First child element <child ...> of [p, end), or NULL. */
const char *dx_find_child(const char *p, const char *end, const char *child)
{
	char open[40];
	int n = snprintf(open, sizeof open, "<%s", child);
	for (const char *q = p; q && q < end; q++) {
		q = strstr(q, open);
		if (!q || q >= end)
			return NULL;
		char c = q[n];
		if (c == ' ' || c == '>' || c == '/' || c == '\n' || c == '\t')
			return q;
	}
	return NULL;
}

/* Text content of <child>text</child> in [p, end). */
bool dx_child_text(const char *p, const char *end, const char *child,
		   char *out, size_t outlen)
{
	const char *c = dx_find_child(p, end, child);
	if (!c)
		return false;
	const char *gt = strchr(c, '>');
	if (!gt || gt[-1] == '/')
		return false;
	const char *lt = strchr(gt + 1, '<');
	if (!lt || lt > end)
		return false;
	size_t n = (size_t)(lt - gt - 1);
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, gt + 1, n);
	out[n] = '\0';
	return true;
}

static uint64_t fnv1a(const char *s, const char *end)
{
	uint64_t h = 1469598103934665603ull;
	for (; s < end && *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

static void parse_disk(const char *p, const char *end, struct virt_domxml *x)
{
	char device[16] = "disk";
	dx_tag_attr(p, "device", device, sizeof device);
	if (strcmp(device, "disk") != 0)
		return;   /* cdrom, floppy, lun: not in VDSM's disk stats */
	struct virt_xdisk dk;
	memset(&dk, 0, sizeof dk);
	const char *t = dx_find_child(p, end, "target");
	if (!t || !dx_tag_attr(t, "dev", dk.dev, sizeof dk.dev) || !dk.dev[0])
		return;
	const char *src = dx_find_child(p, end, "source");
	char path[1024] = "";
	if (src && !dx_tag_attr(src, "file", path, sizeof path) &&
	    !dx_tag_attr(src, "dev", path, sizeof path))
		dx_tag_attr(src, "name", path, sizeof path);
	dk.path = xstrdup(path);
	dx_child_text(p, end, "serial", dk.image_id, sizeof dk.image_id);
	x->disks = xrealloc(x->disks, (x->ndisks + 1) * sizeof *x->disks);
	x->disks[x->ndisks++] = dk;
}

static void parse_nic(const char *p, const char *end, struct virt_domxml *x)
{
	struct virt_xnic n;
	memset(&n, 0, sizeof n);
	const char *t = dx_find_child(p, end, "target");
	if (t)
		dx_tag_attr(t, "dev", n.ifname, sizeof n.ifname);
	const char *m = dx_find_child(p, end, "mac");
	if (m)
		dx_tag_attr(m, "address", n.mac, sizeof n.mac);
	const char *s = dx_find_child(p, end, "source");
	if (s && !dx_tag_attr(s, "network", n.network, sizeof n.network))
		dx_tag_attr(s, "bridge", n.network, sizeof n.network);
	if (!n.ifname[0])
		return;   /* not started: no host-side device to read stats from */
	x->nics = xrealloc(x->nics, (x->nnics + 1) * sizeof *x->nics);
	x->nics[x->nnics++] = n;
}

static void parse_graphics(const char *p, struct virt_domxml *x)
{
	if (x->ndisplays >= VD_ARRAY_SIZE(x->displays))
		return;
	struct virt_xdisplay *g = &x->displays[x->ndisplays];
	memset(g, 0, sizeof *g);
	if (!dx_tag_attr(p, "type", g->type, sizeof g->type))
		return;
	if (strcmp(g->type, "vnc") != 0 && strcmp(g->type, "spice") != 0)
		return;
	dx_tag_attr(p, "port", g->port, sizeof g->port);
	dx_tag_attr(p, "tlsPort", g->tls_port, sizeof g->tls_port);
	if (!dx_tag_attr(p, "listen", g->listen, sizeof g->listen))
		strcpy(g->listen, "0");
	x->ndisplays++;
}

int domxml_parse(const char *xml, struct virt_domxml *x)
{
	memset(x, 0, sizeof *x);
	if (!xml)
		return VD_EINVAL;
	const char *dev = strstr(xml, "<devices>");
	/* VDSM's hash covers the devices: it changes when a device is added,
	 * removed or changed (the engine then asks Host.dumpxmls) */
	if (!dev) {
		x->hash = fnv1a(xml, xml + strlen(xml));
		return 0;
	}
	const char *dend = strstr(dev, "</devices>");
	if (!dend)
		return VD_EPROTO;
	x->hash = fnv1a(dev, dend);
	for (const char *p = dev; p && p < dend;) {
		const char *lt = strchr(p + 1, '<');
		if (!lt || lt >= dend)
			break;
		p = lt;
		if (lt[1] == '/')
			continue;
		if (strncmp(lt, "<disk ", 6) == 0) {
			const char *e = dx_elem_end(lt, "disk");
			if (!e)
				break;
			parse_disk(lt, e, x);
			p = e - 1;
		} else if (strncmp(lt, "<interface ", 11) == 0) {
			const char *e = dx_elem_end(lt, "interface");
			if (!e)
				break;
			parse_nic(lt, e, x);
			p = e - 1;
		} else if (strncmp(lt, "<graphics ", 10) == 0) {
			parse_graphics(lt, x);
		}
	}
	return 0;
}

void domxml_free(struct virt_domxml *x)
{
	for (unsigned i = 0; i < x->ndisks; i++)
		free(x->disks[i].path);
	free(x->disks);
	free(x->nics);
	memset(x, 0, sizeof *x);
}

void domxml_copy(struct virt_domxml *dst, const struct virt_domxml *src)
{
	*dst = *src;
	dst->disks = NULL;
	dst->nics = NULL;
	if (src->ndisks) {
		dst->disks = xmalloc(src->ndisks * sizeof *dst->disks);
		for (unsigned i = 0; i < src->ndisks; i++) {
			dst->disks[i] = src->disks[i];
			dst->disks[i].path = xstrdup(src->disks[i].path ? src->disks[i].path : "");
		}
	}
	if (src->nnics) {
		dst->nics = xmalloc(src->nnics * sizeof *dst->nics);
		memcpy(dst->nics, src->nics, src->nnics * sizeof *dst->nics);
	}
}
