/* vdsmd/host/pkgver.c - versions of the installed packages the engine reads
 * in packages2, from dpkg's database (var/lib/dpkg/status, the file
 * dpkg-query reads; parsing it needs no child process and works on a
 * fixture tree).  Keys are VDSM's names; each maps to the Debian packages
 * that provide it, first installed one wins.  A Debian version
 * "[epoch:]upstream[-revision]" is reported as version = upstream and
 * release = revision ("" for native packages), as an RPM's version and
 * release are. */
#include "host_int.h"

#include <stdio.h>
#include <string.h>

#define MAX_STATUS (64u << 20)

static const struct {
	const char *key;
	const char *debs[4];
} pkg_map[] = {
	{ "qemu-kvm", { "qemu-system-x86", "qemu-kvm", "qemu-system-arm", "qemu-system-ppc" } },
	{ "qemu-img", { "qemu-utils", NULL } },
	{ "libvirt", { "libvirt-daemon", "libvirt0", NULL } },
	{ "librbd1", { "librbd1", NULL } },
	{ "spice-server", { "libspice-server1", NULL } },
	{ "glusterfs-cli", { "glusterfs-cli", NULL } },
	{ "glusterfs", { "glusterfs-client", "glusterfs-common", NULL } },
	{ "openvswitch", { "openvswitch-switch", NULL } },
	{ "nmstate", { "nmstate", NULL } },
	{ "lvm2", { "lvm2", NULL } },
	{ "mom", { "mom", NULL } },
};

struct para {
	const char *pkg, *status, *version;
	size_t pkg_len, status_len, version_len;
};

static void field(const char *ls, const char *le, const char *name, const char **v, size_t *vl)
{
	size_t n = strlen(name);
	if ((size_t)(le - ls) <= n || memcmp(ls, name, n) != 0 || ls[n] != ':')
		return;
	const char *p = ls + n + 1;
	while (p < le && (*p == ' ' || *p == '\t'))
		p++;
	const char *e = le;
	while (e > p && (e[-1] == ' ' || e[-1] == '\r' || e[-1] == '\t'))
		e--;
	*v = p;
	*vl = (size_t)(e - p);
}

static bool installed(const struct para *pa)
{
	static const char want[] = "install ok installed";
	return pa->status_len == sizeof(want) - 1 && memcmp(pa->status, want, sizeof(want) - 1) == 0;
}

static void take(const struct para *pa, struct host_pkg *out, size_t max, size_t *n,
		 int *rank)
{
	if (!pa->pkg || !pa->version || !installed(pa))
		return;
	for (size_t k = 0; k < VD_ARRAY_SIZE(pkg_map); k++) {
		for (int r = 0; r < 4 && pkg_map[k].debs[r]; r++) {
			const char *d = pkg_map[k].debs[r];
			if (strlen(d) != pa->pkg_len || memcmp(d, pa->pkg, pa->pkg_len) != 0)
				continue;
			/* slot of this key (existing or new); a better-ranked
			 * Debian package replaces a worse one */
			size_t s;
			for (s = 0; s < *n; s++)
				if (strcmp(out[s].name, pkg_map[k].key) == 0)
					break;
			if (s == *n) {
				if (*n >= max)
					return;
				(*n)++;
				rank[s] = 99;
			}
			if (r >= rank[s])
				return;
			rank[s] = r;
			struct host_pkg *o = &out[s];
			snprintf(o->name, sizeof(o->name), "%s", pkg_map[k].key);
			const char *v = pa->version, *ve = pa->version + pa->version_len;
			const char *colon = memchr(v, ':', (size_t)(ve - v));
			if (colon)
				v = colon + 1;
			const char *dash = NULL;
			for (const char *q = v; q < ve; q++)
				if (*q == '-')
					dash = q;
			if (dash) {
				snprintf(o->version, sizeof(o->version), "%.*s", (int)(dash - v), v);
				snprintf(o->release, sizeof(o->release), "%.*s", (int)(ve - dash - 1),
					 dash + 1);
			} else {
				snprintf(o->version, sizeof(o->version), "%.*s", (int)(ve - v), v);
				o->release[0] = '\0';
			}
			return;
		}
	}
}

size_t host_pkgs_parse(const char *text, size_t len, struct host_pkg *out, size_t max)
{
	int rank[HOST_PKGS_MAX + 1];
	if (max > HOST_PKGS_MAX)
		max = HOST_PKGS_MAX;
	size_t n = 0;
	struct para pa = { 0 };
	const char *p = text, *end = text + len;
	while (p <= end) {
		const char *nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
		const char *le = nl ? nl : end;
		if (le == p || (le - p == 1 && *p == '\r') || p == end) {
			take(&pa, out, max, &n, rank);
			memset(&pa, 0, sizeof(pa));
		} else if (*p != ' ' && *p != '\t') {
			field(p, le, "Package", &pa.pkg, &pa.pkg_len);
			field(p, le, "Status", &pa.status, &pa.status_len);
			field(p, le, "Version", &pa.version, &pa.version_len);
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	take(&pa, out, max, &n, rank);
	return n;
}

size_t host_pkgs_read(const char *root, struct host_pkg *out, size_t max)
{
	struct vd_buf b = VD_BUF_INIT;
	size_t n = 0;
	if (host_read_rel(root, "/var/lib/dpkg/status", MAX_STATUS, &b) == 0)
		n = host_pkgs_parse(b.data, b.len, out, max);
	buf_free(&b);
	return n;
}
