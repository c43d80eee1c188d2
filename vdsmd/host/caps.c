/* vdsmd/host/caps.c - Host.getCapabilities: gathered once at startup from
 * /proc/cpuinfo, /proc/meminfo, uname, the OS release files and the machine
 * id, then encoded once per codec (lazily, the first time a codec asks) and
 * served with vw_raw.  Field names, value types and string-ness follow
 * VDSM's VdsmCapabilities (vdsm-api.yml): counts and sizes are strings. */
#include "host_int.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define MAX_CPUINFO (16u << 20)
#define MAX_SMALL (64u << 10)
#define MAX_ONLINE_CPUS 8192

static bool exists_rel(const char *root, const char *rel)
{
	char path[HOST_ROOT_MAX + 128];
	snprintf(path, sizeof(path), "%s%s", root, rel);
	return access(path, F_OK) == 0;
}

/* First line of a file, trimmed, into out; false when unreadable/empty. */
static bool first_line(const char *root, const char *rel, struct vd_buf *b,
		       char *out, size_t outlen)
{
	if (host_read_rel(root, rel, MAX_SMALL, b) != 0 || b->len == 0)
		return false;
	size_t n = strcspn(b->data, "\r\n");
	while (n > 0 && (b->data[n - 1] == ' ' || b->data[n - 1] == '\t'))
		n--;
	if (n == 0)
		return false;
	n = VD_MIN(n, outlen - 1);
	memcpy(out, b->data, n);
	out[n] = '\0';
	return true;
}

/* "0-3,8,10-11" → {0,1,2,3,8,10,11} (bounded by MAX_ONLINE_CPUS); false
 * when unparsable or empty.  *out is heap (free it). */
static bool parse_cpu_list(const char *s, unsigned **out, size_t *n)
{
	unsigned *v = NULL;
	size_t cnt = 0, cap = 0;
	const char *p = s;
	while (*p && *p != '\n') {
		char *e;
		long a = strtol(p, &e, 10), b;
		if (e == p || a < 0)
			goto bad;
		p = e;
		b = a;
		if (*p == '-') {
			p++;
			b = strtol(p, &e, 10);
			if (e == p || b < a)
				goto bad;
			p = e;
		}
		for (long i = a; i <= b; i++) {
			if (cnt >= MAX_ONLINE_CPUS)
				goto bad;
			if (cnt == cap) {
				cap = cap ? cap * 2 : 16;
				v = xrealloc(v, cap * sizeof(*v));
			}
			v[cnt++] = (unsigned)i;
		}
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			goto bad;
	}
	if (!cnt)
		goto bad;
	*out = v;
	*n = cnt;
	return true;
bad:
	free(v);
	return false;
}

/* "0-3,8" → "0,1,2,3,8"; NULL when unparsable. */
static char *expand_cpu_list(const char *s)
{
	unsigned *v;
	size_t n;
	if (!parse_cpu_list(s, &v, &n))
		return NULL;
	struct vd_buf out = VD_BUF_INIT;
	for (size_t i = 0; i < n; i++)
		buf_printf(&out, "%s%u", i ? "," : "", v[i]);
	buf_putc(&out, '\0');
	free(v);
	return out.data;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* NUMA cells (VDSM numaNodes / numaNodeDistance), huge page sizes and the
 * automatic NUMA balancing state. */
static void numa_info(struct host_caps *c, const char *root, const struct host_topo *topo,
		      struct vd_buf *b)
{
	unsigned nn = topo ? topo->nnodes : 0;
	c->nodes = xcalloc(nn ? nn : 1, sizeof(c->nodes[0]));
	for (unsigned i = 0; i < nn; i++) {
		struct host_caps_node *cn = &c->nodes[c->nnodes++];
		char rel[96];
		cn->id = topo->nodes[i];
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%u/cpulist", cn->id);
		if (host_read_rel(root, rel, MAX_SMALL, b) == 0)
			parse_cpu_list(b->data, &cn->cpus, &cn->ncpus);
		uint64_t tot, fr;
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%u/meminfo", cn->id);
		if (host_read_rel(root, rel, MAX_SMALL, b) == 0 &&
		    host_parse_node_meminfo(b->data, b->len, &tot, &fr) == 0)
			cn->total_mib = tot / 1024;
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%u/distance", cn->id);
		if (host_read_rel(root, rel, MAX_SMALL, b) == 0) {
			const char *p = b->data;
			cn->dist = xcalloc(HOST_MAX_NODES, sizeof(cn->dist[0]));
			while (cn->ndist < HOST_MAX_NODES) {
				char *e;
				unsigned long d = strtoul(p, &e, 10);
				if (e == p || d > 100000)
					break;
				cn->dist[cn->ndist++] = (unsigned)d;
				p = e;
			}
		}
	}
	if (!c->nnodes) {
		/* no node directories: one cell with every online CPU */
		struct host_caps_node *cn = &c->nodes[c->nnodes++];
		parse_cpu_list(c->online_cpus, &cn->cpus, &cn->ncpus);
		cn->total_mib = c->mem_size_mib;
		cn->dist = xcalloc(1, sizeof(cn->dist[0]));
		cn->dist[0] = 10;
		cn->ndist = 1;
	}

	char path[HOST_ROOT_MAX + 64];
	snprintf(path, sizeof(path), "%s/sys/kernel/mm/hugepages", root);
	DIR *dir = opendir(path);
	if (dir) {
		struct dirent *de;
		while ((de = readdir(dir)) != NULL && c->nhuge < VD_ARRAY_SIZE(c->huge_kb)) {
			unsigned long long kb;
			char tail[8];
			if (sscanf(de->d_name, "hugepages-%llu%7s", &kb, tail) == 2 &&
			    strcmp(tail, "kB") == 0 && kb > 0)
				c->huge_kb[c->nhuge++] = kb;
		}
		closedir(dir);
		qsort(c->huge_kb, c->nhuge, sizeof(c->huge_kb[0]), cmp_u64);
	}

	char v[16];
	c->auto_numa = 2;   /* VDSM: cannot get the status */
	if (first_line(root, "/proc/sys/kernel/numa_balancing", b, v, sizeof(v)))
		c->auto_numa = strcmp(v, "0") == 0 ? 0 : 1;
}

/* VDSM's osinfo.version(): name from which release file exists; Debian's
 * version is /etc/debian_version, others use os-release's VERSION_ID. */
static void os_info(struct host_caps *c, const char *root, struct vd_buf *b)
{
	char osr_name[64] = "", osr_ver[64] = "";
	if (host_read_rel(root, "/etc/os-release", MAX_SMALL, b) == 0 ||
	    host_read_rel(root, "/usr/lib/os-release", MAX_SMALL, b) == 0) {
		host_parse_keyval(b->data, b->len, "PRETTY_NAME", c->os_pretty, sizeof(c->os_pretty));
		host_parse_keyval(b->data, b->len, "NAME", osr_name, sizeof(osr_name));
		host_parse_keyval(b->data, b->len, "VERSION_ID", osr_ver, sizeof(osr_ver));
	}
	if (exists_rel(root, "/etc/fedora-release")) {
		snprintf(c->os_name, sizeof(c->os_name), "Fedora");
		snprintf(c->os_version, sizeof(c->os_version), "%s", osr_ver);
	} else if (exists_rel(root, "/etc/redhat-release")) {
		snprintf(c->os_name, sizeof(c->os_name), "RHEL");
		snprintf(c->os_version, sizeof(c->os_version), "%s", osr_ver);
	} else if (exists_rel(root, "/etc/debian_version")) {
		snprintf(c->os_name, sizeof(c->os_name), "Debian");
		if (!first_line(root, "/etc/debian_version", b, c->os_version, sizeof(c->os_version)))
			snprintf(c->os_version, sizeof(c->os_version), "%s", osr_ver);
	} else {
		snprintf(c->os_name, sizeof(c->os_name), "%s", osr_name[0] ? osr_name : "unknown");
		snprintf(c->os_version, sizeof(c->os_version), "%s", osr_ver);
	}
	c->os_release[0] = '\0';   /* Debian has only a version (as VDSM) */
}

/* The host UUID: the DMI product UUID when readable, else /etc/machine-id
 * written as a UUID. */
static void host_uuid(struct host_caps *c, const char *root, struct vd_buf *b)
{
	char v[128];
	if (first_line(root, "/sys/class/dmi/id/product_uuid", b, v, sizeof(v)) &&
	    vd_is_uuid(v, strlen(v))) {
		for (char *p = v; *p; p++)
			if (*p >= 'A' && *p <= 'F')
				*p = (char)(*p - 'A' + 'a');
		snprintf(c->uuid, sizeof(c->uuid), "%.36s", v);
		return;
	}
	if (first_line(root, "/etc/machine-id", b, v, sizeof(v)) && strlen(v) == 32 &&
	    strspn(v, "0123456789abcdefABCDEF") == 32) {
		snprintf(c->uuid, sizeof(c->uuid), "%.8s-%.4s-%.4s-%.4s-%.12s",
			 v, v + 8, v + 12, v + 16, v + 20);
		return;
	}
	c->uuid[0] = '\0';
}

struct host_caps *host_caps_new(const char *root, const struct host_topo *topo,
				const char *libvirt_uri)
{
	struct host_caps *c = xcalloc(1, sizeof(*c));
	struct vd_buf b = VD_BUF_INIT;
	pthread_mutex_init(&c->enc_lock, NULL);
	atomic_init(&c->nenc, 0);

	if (host_read_rel(root, "/proc/cpuinfo", MAX_CPUINFO, &b) == 0)
		host_parse_cpuinfo(b.data, b.len, &c->cpu);
	else
		host_parse_cpuinfo("", 0, &c->cpu);
	/* cpuFlags: comma-joined (VDSM), no empty items */
	struct vd_buf f = VD_BUF_INIT;
	if (c->cpu.flags) {
		const char *p = c->cpu.flags;
		while (*p) {
			size_t n = strcspn(p, " \t");
			if (n) {
				if (f.len)
					buf_putc(&f, ',');
				buf_append(&f, p, n);
			}
			p += n;
			p += strspn(p, " \t");
		}
	}
	buf_putc(&f, '\0');
	c->cpu_flags_csv = f.data;

	char online[4096];
	if (first_line(root, "/sys/devices/system/cpu/online", &b, online, sizeof(online)))
		c->online_cpus = expand_cpu_list(online);
	if (!c->online_cpus) {
		struct vd_buf o = VD_BUF_INIT;
		for (unsigned i = 0; i < c->cpu.threads && i < MAX_ONLINE_CPUS; i++)
			buf_printf(&o, "%s%u", i ? "," : "", i);
		buf_putc(&o, '\0');
		c->online_cpus = o.data;
	}

	struct host_meminfo m;
	if (host_read_rel(root, "/proc/meminfo", MAX_SMALL, &b) == 0 &&
	    host_parse_meminfo(b.data, b.len, &m) == 0)
		c->mem_size_mib = m.total_kb / 1024;

	c->kvm = host_kvm_usable(root);
	os_info(c, root, &b);
	host_uuid(c, root, &b);

	struct utsname u;
	if (uname(&u) == 0) {
		snprintf(c->hostname, sizeof(c->hostname), "%s", u.nodename);
		/* "6.1.0-18-amd64" → version "6.1.0", release "18-amd64" */
		const char *dash = strchr(u.release, '-');
		if (dash) {
			snprintf(c->kernel_version, sizeof(c->kernel_version), "%.*s",
				 (int)(dash - u.release), u.release);
			snprintf(c->kernel_release, sizeof(c->kernel_release), "%s", dash + 1);
		} else {
			snprintf(c->kernel_version, sizeof(c->kernel_version), "%s", u.release);
			snprintf(c->kernel_release, sizeof(c->kernel_release), "0");
		}
	}
	first_line(root, "/proc/cmdline", &b, c->kernel_args, sizeof(c->kernel_args));
	numa_info(c, root, topo, &b);
	buf_free(&b);
	host_caps_ext_gather(c, root, libvirt_uri);
	host_caps_keys_gather(c, root);
	return c;
}

void host_caps_free(struct host_caps *c)
{
	if (!c)
		return;
	unsigned n = atomic_load(&c->nenc);
	for (unsigned i = 0; i < n; i++)
		free(c->enc[i].bytes);
	for (size_t i = 0; i < c->nnodes; i++) {
		free(c->nodes[i].cpus);
		free(c->nodes[i].dist);
	}
	free(c->nodes);
	host_caps_ext_free(c);
	host_cpuinfo_free(&c->cpu);
	free(c->cpu_flags_csv);
	free(c->online_cpus);
	pthread_mutex_destroy(&c->enc_lock);
	free(c);
}

/* Engine versions whose API vdsmd serves (VDSM 4.50's list). */
static const char *const supported_engines[] = { "4.2", "4.3", "4.4", "4.5" };

static void str_array(struct vd_writer *w, const char *const *v, size_t n)
{
	vw_begin_array(w);
	for (size_t i = 0; i < n; i++)
		vw_strz(w, v[i]);
	vw_end_array(w);
}

static void int_array(struct vd_writer *w, const unsigned *v, size_t n)
{
	vw_begin_array(w);
	for (size_t i = 0; i < n; i++)
		vw_int(w, v[i]);
	vw_end_array(w);
}

void host_caps_encode(const struct host_caps *c, struct vd_writer *w, const char *local_addr)
{
	vw_begin_object(w);
	vw_kstr(w, "cpuModel", c->cpu.model);
	vw_kstrf(w, "cpuCores", "%u", c->cpu.cores);
	vw_kstrf(w, "cpuSockets", "%u", c->cpu.sockets);
	vw_kstrf(w, "cpuThreads", "%u", c->cpu.threads);
	vw_kstr(w, "cpuSpeed", c->cpu.speed);
	/* cpuinfo flags, then the usable CPU models as model_<name> */
	vw_keyz(w, "cpuFlags");
	{
		struct vd_buf f = VD_BUF_INIT;
		buf_puts(&f, c->cpu_flags_csv ? c->cpu_flags_csv : "");
		for (size_t i = 0; i < c->ext.models.n; i++)
			buf_printf(&f, "%s%s", f.len ? "," : "", c->ext.models.v[i]);
		vw_string(w, f.data ? f.data : "", f.len);
		buf_free(&f);
	}
	vw_kstr(w, "onlineCpus", c->online_cpus);
	vw_kstr_u64(w, "memSize", c->mem_size_mib);
	vw_kstr(w, "kvmEnabled", c->kvm ? "true" : "false");
	vw_keyz(w, "operatingSystem");
	vw_begin_object(w);
	vw_kstr(w, "release", c->os_release);
	vw_kstr(w, "version", c->os_version);
	vw_kstr(w, "name", c->os_name);
	vw_kstr(w, "pretty_name", c->os_pretty);
	vw_end_object(w);
	vw_kstr(w, "software_version", VDSMD_VERSION);
	vw_kstr(w, "software_revision", "0");
	vw_kstr(w, "version_name", "vdsmd");
	vw_keyz(w, "supportedENGINEs");
	str_array(w, supported_engines, VD_ARRAY_SIZE(supported_engines));
	vw_keyz(w, "clusterLevels");
	str_array(w, (const char *const *)c->ext.cluster_levels.v, c->ext.cluster_levels.n);
	vw_kstr(w, "uuid", c->uuid);
	vw_kstr(w, "hostname", c->hostname);
	vw_keyz(w, "vmTypes");
	static const char *const kvm[] = { "kvm" };
	str_array(w, kvm, 1);
	vw_keyz(w, "packages2");
	vw_begin_object(w);
	vw_keyz(w, "kernel");
	vw_begin_object(w);
	vw_kstr(w, "version", c->kernel_version);
	vw_kstr(w, "release", c->kernel_release);
	vw_end_object(w);
	/* vdsmd itself, as the package the engine knows (README "Versions") */
	vw_keyz(w, "vdsm");
	vw_begin_object(w);
	vw_kstr(w, "version", HOST_VDSM_API_VERSION);
	vw_kstr(w, "release", HOST_VDSM_RELEASE);
	vw_end_object(w);
	for (size_t i = 0; i < c->ext.npkgs; i++) {
		vw_keyz(w, c->ext.pkgs[i].name);
		vw_begin_object(w);
		vw_kstr(w, "version", c->ext.pkgs[i].version);
		vw_kstr(w, "release", c->ext.pkgs[i].release);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_kstr(w, "kernelArgs", c->kernel_args);
	vw_kstr(w, "liveSnapshot", "true");
	vw_kstr(w, "liveMerge", "true");
	vw_keyz(w, "numaNodes");
	vw_begin_object(w);
	for (size_t i = 0; i < c->nnodes; i++) {
		const struct host_caps_node *cn = &c->nodes[i];
		host_key_u(w, cn->id);
		vw_begin_object(w);
		vw_kstr_u64(w, "totalMemory", cn->total_mib);
		vw_keyz(w, "cpus");
		int_array(w, cn->cpus, cn->ncpus);
		vw_keyz(w, "hugepages");
		vw_begin_object(w);
		for (size_t k = 0; k < cn->nhuge; k++) {
			char sz[24];
			snprintf(sz, sizeof(sz), "%llu", (unsigned long long)cn->huge[k].size_kb);
			vw_keyz(w, sz);
			vw_begin_object(w);
			vw_kstr_u64(w, "totalPages", cn->huge[k].nr);
			vw_end_object(w);
		}
		vw_end_object(w);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "numaNodeDistance");
	vw_begin_object(w);
	for (size_t i = 0; i < c->nnodes; i++) {
		const struct host_caps_node *cn = &c->nodes[i];
		host_key_u(w, cn->id);
		int_array(w, cn->dist, cn->ndist);
	}
	vw_end_object(w);
	vw_kint(w, "autoNumaBalancing", c->auto_numa);
	vw_keyz(w, "hugepages");
	vw_begin_array(w);
	for (size_t i = 0; i < c->nhuge; i++)
		vw_uint(w, c->huge_kb[i]);
	vw_end_array(w);
	host_caps_ext_encode(c, w);
	const struct host_peers *np = atomic_load(&c->peers);
	if (np && np->write_net_caps) {
		np->write_net_caps(np->ctx, w);
	} else {
		/* no network provider: the keys exist, empty (README) */
		static const char *const net_keys[] = { "networks", "nics", "bridges",
							"vlans", "bondings" };
		for (size_t i = 0; i < VD_ARRAY_SIZE(net_keys); i++) {
			vw_keyz(w, net_keys[i]);
			vw_begin_object(w);
			vw_end_object(w);
		}
		vw_keyz(w, "nameservers");
		vw_begin_array(w);
		vw_end_array(w);
		vw_kbool(w, "supportsIPv6", host_ipv6_supported());
		vw_kstr(w, "netConfigDirty", "False");
	}
	host_caps_keys_encode(c, w);
	/* VDSM's Bridge adds it to every getCapabilities answer */
	char iface[64];
	host_device_by_ip(local_addr, iface, sizeof(iface));
	vw_kstr(w, "lastClientIface", iface);
	vw_end_object(w);
}
