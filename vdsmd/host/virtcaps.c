/* vdsmd/host/virtcaps.c - what libvirt says the hypervisor can emulate
 * (as VDSM's machinetype.py reads it): emulated machines from the
 * capabilities' guest/arch/domain[type=kvm] (else the arch's own list), CPU
 * models usable in custom mode and the host-model's required features from
 * the domain capabilities.  Drivers without domain capabilities (the test
 * driver) make host_libvirt_caps() return false; the caller then asks QEMU
 * itself (cpumodel.c). */
#include "host_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include "../../common/log.h"

/* [*b, *e) of the first "<tag ...>" ... "</tag>" element in [p, end) whose
 * start tag contains needle (NULL: any); false when none. */
static bool element(const char *p, const char *end, const char *tag, const char *needle,
		    const char **b, const char **e)
{
	char open[40], close[40];
	snprintf(open, sizeof(open), "<%s", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	size_t ol = strlen(open), cl = strlen(close);
	while (p < end) {
		const char *s = memmem(p, (size_t)(end - p), open, ol);
		if (!s)
			return false;
		const char *gt = memchr(s, '>', (size_t)(end - s));
		if (!gt)
			return false;
		p = gt + 1;
		if (s[ol] != ' ' && s[ol] != '>' && s[ol] != '/')
			continue;
		if (needle && !memmem(s, (size_t)(gt - s), needle, strlen(needle)))
			continue;
		const char *c = memmem(p, (size_t)(end - p), close, cl);
		if (!c)
			return false;
		*b = gt + 1;
		*e = c;
		return true;
	}
	return false;
}

static void add_text(struct host_strv *out, const char *s, size_t n)
{
	while (n && (*s == ' ' || *s == '\n' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t'))
		n--;
	if (n && n < 128 && !memchr(s, '<', n) && !memchr(s, '&', n))
		host_strv_add(out, s, n);
}

/* Every <machine ...>name</machine> in [p, end), and its canonical=''. */
static void machines_in(const char *p, const char *end, struct host_strv *out)
{
	while (p < end) {
		const char *s = memmem(p, (size_t)(end - p), "<machine", 8);
		if (!s)
			break;
		const char *gt = memchr(s, '>', (size_t)(end - s));
		const char *c = gt ? memmem(gt, (size_t)(end - gt), "</machine>", 10) : NULL;
		if (!gt || !c)
			break;
		add_text(out, gt + 1, (size_t)(c - gt - 1));
		const char *ca = memmem(s, (size_t)(gt - s), "canonical=", 10);
		if (ca && ca + 11 < gt) {
			char q = ca[10];
			const char *v = ca + 11, *ve = memchr(v, q, (size_t)(gt - v));
			if (ve)
				add_text(out, v, (size_t)(ve - v));
		}
		p = c + 10;
	}
}

void host_parse_libvirt_machines(const char *xml, size_t len, const char *arch,
				 struct host_strv *out)
{
	const char *end = xml + len, *b, *e;
	char needle[64];
	snprintf(needle, sizeof(needle), "name='%s'", arch);
	if (!element(xml, end, "arch", needle, &b, &e)) {
		snprintf(needle, sizeof(needle), "name=\"%s\"", arch);
		if (!element(xml, end, "arch", needle, &b, &e))
			return;
	}
	const char *db, *de;
	if (element(b, e, "domain", "'kvm'", &db, &de) || element(b, e, "domain", "\"kvm\"", &db, &de))
		machines_in(db, de, out);
	if (!out->n) {
		/* the arch's own machines: before its first <domain> */
		const char *d = memmem(b, (size_t)(e - b), "<domain", 7);
		machines_in(b, d ? d : e, out);
	}
	host_strv_sort(out);
}

void host_parse_domcaps(const char *xml, size_t len, struct host_strv *models,
			struct host_strv *features)
{
	const char *end = xml + len, *cb, *ce, *b, *e;
	if (!element(xml, end, "cpu", NULL, &cb, &ce))
		return;
	if (element(cb, ce, "mode", "name='custom'", &b, &e) &&
	    memmem(cb, (size_t)(ce - cb), "supported='yes'", 15)) {
		const char *p = b;
		while (p < e) {
			const char *s = memmem(p, (size_t)(e - p), "<model", 6);
			if (!s)
				break;
			const char *gt = memchr(s, '>', (size_t)(e - s));
			const char *c = gt ? memmem(gt, (size_t)(e - gt), "</model>", 8) : NULL;
			if (!gt || !c)
				break;
			if (memmem(s, (size_t)(gt - s), "usable='yes'", 12)) {
				char name[140];
				size_t n = (size_t)(c - gt - 1);
				if (n < 120) {
					snprintf(name, sizeof(name), "model_%.*s", (int)n, gt + 1);
					add_text(models, name, strlen(name));
				}
			}
			p = c + 8;
		}
	}
	if (element(cb, ce, "mode", "name='host-model'", &b, &e)) {
		const char *p = b;
		while (p < e) {
			const char *s = memmem(p, (size_t)(e - p), "<feature ", 9);
			if (!s)
				break;
			const char *gt = memchr(s, '>', (size_t)(e - s));
			if (!gt)
				break;
			const char *nm = memmem(s, (size_t)(gt - s), "name='", 6);
			if (memmem(s, (size_t)(gt - s), "policy='require'", 16) && nm) {
				const char *v = nm + 6, *ve = memchr(v, '\'', (size_t)(gt - v));
				if (ve)
					add_text(features, v, (size_t)(ve - v));
			}
			p = gt + 1;
		}
	}
	host_strv_sort(models);
	host_strv_sort(features);
}

static void quiet(void *ud, virErrorPtr err)
{
	(void)ud;
	(void)err;
}

bool host_libvirt_caps(const char *uri, const char *arch, struct host_strv *machines,
		       struct host_strv *models, struct host_strv *features)
{
	if (!uri || !*uri)
		return false;
	virSetErrorFunc(NULL, quiet);
	/* domain capabilities need a read-write connection (libvirt's ACL
	 * connect:write); VDSM holds one too */
	virConnectPtr conn = virConnectOpen(uri);
	if (!conn)
		conn = virConnectOpenReadOnly(uri);
	if (!conn) {
		log_info("host: libvirt %s not reachable for domain capabilities", uri);
		return false;
	}
	bool ok = false;
	/* KVM's view first (VDSM's); a libvirt that cannot use KVM runs
	 * guests under TCG, whose view is then what this host can run */
	const char *virt = "kvm";
	char *dc = virConnectGetDomainCapabilities(conn, NULL, arch, NULL, virt, 0);
	if (!dc) {
		virt = "qemu";
		dc = virConnectGetDomainCapabilities(conn, NULL, arch, NULL, virt, 0);
	}
	if (dc) {
		log_info("host: CPU models and machines from libvirt %s (%s domains)", uri, virt);
		host_parse_domcaps(dc, strlen(dc), models, features);
		free(dc);
		char *caps = virConnectGetCapabilities(conn);
		if (caps) {
			host_parse_libvirt_machines(caps, strlen(caps), arch, machines);
			free(caps);
		}
		ok = true;
	} else {
		log_info("host: libvirt %s has no domain capabilities; asking QEMU", uri);
	}
	virConnectClose(conn);
	return ok;
}
