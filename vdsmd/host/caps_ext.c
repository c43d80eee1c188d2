/* vdsmd/host/caps_ext.c - the parts of Host.getCapabilities the engine
 * needs beyond /proc and uname: emulated machines and usable CPU models
 * (libvirt domain capabilities, else QEMU + libvirt's CPU map), RNG
 * sources, HBA inventory, kdump/SELinux/FIPS/IOMMU state, package versions,
 * the cluster levels they allow, per-node huge pages, CPU topology and
 * kernel vulnerability state.  Gathered once at startup (the daemon is
 * restarted when packages change, as VDSM is). */
#include "host_int.h"

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include "../../common/log.h"

#define MAX_SMALL (64u << 10)

/* qemu-system-<arch> and the cpu_map file prefix for the machine. */
static void arch_names(const char *machine, char *qarch, size_t qlen, char *map, size_t mlen)
{
	const char *q = machine, *m = "";
	if (strcmp(machine, "x86_64") == 0 || strcmp(machine, "i686") == 0) {
		m = "x86";
	} else if (strncmp(machine, "ppc64", 5) == 0) {
		q = "ppc64";
		m = "ppc64";
	} else if (strcmp(machine, "aarch64") == 0) {
		m = "arm";
	} else if (strcmp(machine, "s390x") == 0) {
		m = "s390";
	}
	snprintf(qarch, qlen, "%.31s", q);
	snprintf(map, mlen, "%s", m);
}

/* QEMU's machine and CPU lists, models kept when libvirt's CPU map knows
 * them and the host CPU has all their features. */
static void qemu_models(struct host_caps *c, const char *root, const char *qarch,
			const char *mapname)
{
	struct vd_buf b = VD_BUF_INIT;
	if (host_run_qemu_help(root, qarch, "-machine", &b) == 0)
		host_parse_qemu_machines(b.data, b.len, &c->ext.machines);
	struct host_strv qcpus = { 0 };
	if (host_run_qemu_help(root, qarch, "-cpu", &b) == 0)
		host_parse_qemu_cpus(b.data, b.len, &qcpus);
	buf_free(&b);
	if (!c->ext.machines.n && !qcpus.n) {
		c->ext.source = "none";
		return;
	}
	c->ext.source = "qemu";
	struct host_cpu_map map;
	host_cpu_map_read(root, mapname, &map);
	struct host_strv nf = { 0 };
	host_norm_flags(c->cpu.flags, &nf);
	for (size_t i = 0; i < map.n; i++) {
		const struct host_cpu_model *m = &map.m[i];
		if (!host_strv_has(&qcpus, m->name) || !host_cpu_model_usable(m, &nf))
			continue;
		char name[160];
		snprintf(name, sizeof(name), "model_%s", m->name);
		host_strv_add(&c->ext.models, name, strlen(name));
	}
	host_strv_sort(&c->ext.models);
	host_strv_free(&nf);
	host_strv_free(&qcpus);
	host_cpu_map_free(&map);
}

/* "9.0.0" / "7.2+dfsg" → major, minor; false when not numeric. */
static bool major_minor(const char *v, int *maj, int *min)
{
	char *e;
	long a = strtol(v, &e, 10);
	if (e == v || *e != '.')
		return false;
	const char *p = e + 1;
	long b = strtol(p, &e, 10);
	if (e == p)
		return false;
	*maj = (int)a;
	*min = (int)b;
	return true;
}

static const struct host_pkg *pkg(const struct host_caps *c, const char *name)
{
	for (size_t i = 0; i < c->ext.npkgs; i++)
		if (strcmp(c->ext.pkgs[i].name, name) == 0)
			return &c->ext.pkgs[i];
	return NULL;
}

static bool at_least(int a, int b, int x, int y)
{
	return a > x || (a == x && b >= y);
}

/* README "Cluster levels": 4.2-4.6 always (the verbs and shapes vdsmd
 * implements); 4.7 needs libvirt >= 8.0; 4.8 needs libvirt >= 10.10 and
 * QEMU >= 9.1 (the hypervisor features the engine uses at those levels,
 * the same rule as VDSM). */
static void cluster_levels(struct host_caps *c)
{
	static const char *const base[] = { "4.2", "4.3", "4.4", "4.5", "4.6" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(base); i++)
		host_strv_add(&c->ext.cluster_levels, base[i], 3);
	const struct host_pkg *lv = pkg(c, "libvirt"), *qe = pkg(c, "qemu-kvm");
	int lma, lmi, qma, qmi;
	bool lok = lv && major_minor(lv->version, &lma, &lmi);
	bool qok = qe && major_minor(qe->version, &qma, &qmi);
	if (lok && at_least(lma, lmi, 8, 0))
		host_strv_add(&c->ext.cluster_levels, "4.7", 3);
	if (lok && qok && at_least(lma, lmi, 10, 10) && at_least(qma, qmi, 9, 1))
		host_strv_add(&c->ext.cluster_levels, "4.8", 3);
}

static bool read_u(const char *root, const char *rel, struct vd_buf *b, unsigned *v)
{
	if (host_read_rel(root, rel, 64, b) != 0 || b->len == 0)
		return false;
	char *e;
	unsigned long x = strtoul(b->data, &e, 10);
	if (e == b->data)
		return false;
	*v = (unsigned)x;
	return true;
}

static void cpu_topology(struct host_caps *c, const char *root, const struct host_topo *topo)
{
	struct vd_buf b = VD_BUF_INIT;
	const char *p = c->online_cpus ? c->online_cpus : "";
	size_t cap = 0;
	while (*p) {
		char *e;
		unsigned long id = strtoul(p, &e, 10);
		if (e == p)
			break;
		p = *e == ',' ? e + 1 : e;
		struct host_caps_cpu cc = { .cpu = (unsigned)id };
		char rel[128];
		snprintf(rel, sizeof(rel), "/sys/devices/system/cpu/cpu%lu/topology/physical_package_id", id);
		if (!read_u(root, rel, &b, &cc.socket))
			continue;       /* no topology: the key stays an empty list */
		snprintf(rel, sizeof(rel), "/sys/devices/system/cpu/cpu%lu/topology/core_id", id);
		read_u(root, rel, &b, &cc.core);
		snprintf(rel, sizeof(rel), "/sys/devices/system/cpu/cpu%lu/topology/die_id", id);
		read_u(root, rel, &b, &cc.die);
		cc.node = topo && id < HOST_MAX_CPUS ? topo->cpu_node[id] : 0;
		if (c->ext.ncpu == cap) {
			cap = cap ? cap * 2 : 16;
			c->ext.cpus = xrealloc(c->ext.cpus, cap * sizeof(c->ext.cpus[0]));
		}
		c->ext.cpus[c->ext.ncpu++] = cc;
	}
	buf_free(&b);
}

static void vulnerabilities(struct host_caps *c, const char *root)
{
	char path[HOST_ROOT_MAX + 64];
	snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/vulnerabilities", root);
	DIR *dir = opendir(path);
	if (!dir)
		return;
	struct host_strv names = { 0 };
	struct dirent *de;
	while ((de = readdir(dir)) != NULL && names.n < 64)
		if (de->d_name[0] != '.' && strlen(de->d_name) < 64)
			host_strv_add(&names, de->d_name, strlen(de->d_name));
	closedir(dir);
	host_strv_sort(&names);
	struct vd_buf b = VD_BUF_INIT;
	for (size_t i = 0; i < names.n; i++) {
		char rel[128];
		snprintf(rel, sizeof(rel), "/sys/devices/system/cpu/vulnerabilities/%s", names.v[i]);
		if (host_read_rel(root, rel, 1024, &b) != 0)
			continue;
		size_t n = strcspn(b.data, "\n");
		char up[64], val[1100];
		size_t k = 0;
		for (; names.v[i][k] && k + 1 < sizeof(up); k++) {
			char ch = names.v[i][k];
			up[k] = (char)(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
		}
		up[k] = '\0';
		/* VDSM's form: the text in parentheses */
		snprintf(val, sizeof(val), "(%.*s)", (int)VD_MIN(n, (size_t)1024), b.data);
		host_strv_add(&c->ext.vuln_names, up, strlen(up));
		host_strv_add(&c->ext.vuln_values, val, strlen(val));
	}
	buf_free(&b);
	host_strv_free(&names);
}

/* libvirt's qemu.conf sets vnc_tls = 1 (uncommented). */
static bool vnc_tls(const char *root)
{
	struct vd_buf b = VD_BUF_INIT;
	bool on = false;
	if (host_read_rel(root, "/etc/libvirt/qemu.conf", 1u << 20, &b) == 0) {
		const char *p = b.data, *end = b.data + b.len;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			const char *le = nl ? nl : end;
			const char *q = p;
			while (q < le && (*q == ' ' || *q == '\t'))
				q++;
			if ((size_t)(le - q) >= 7 && memcmp(q, "vnc_tls", 7) == 0) {
				q += 7;
				while (q < le && (*q == ' ' || *q == '\t'))
					q++;
				if (q < le && *q == '=') {
					q++;
					while (q < le && (*q == ' ' || *q == '\t'))
						q++;
					on = q < le && *q == '1';
				}
			}
			p = nl ? nl + 1 : end;
		}
	}
	buf_free(&b);
	return on;
}

/* sys/kernel/iommu_groups holds at least one group (VDSM's
 * hostdev.is_supported). */
static bool iommu(const char *root)
{
	char path[HOST_ROOT_MAX + 48];
	snprintf(path, sizeof(path), "%s/sys/kernel/iommu_groups", root);
	DIR *dir = opendir(path);
	if (!dir)
		return false;
	bool any = false;
	struct dirent *de;
	while (!any && (de = readdir(dir)) != NULL)
		any = de->d_name[0] != '.';
	closedir(dir);
	return any;
}

void host_caps_spec_ctrl(struct host_caps *c)
{
	/* VDSM: a usable "-IBRS" model means the CPU has spec_ctrl, which the
	 * engine's IBRS CPU types require (cpuinfo may not list it) */
	bool ibrs = false;
	for (size_t i = 0; i < c->ext.models.n && !ibrs; i++) {
		size_t n = strlen(c->ext.models.v[i]);
		ibrs = n > 5 && strcmp(c->ext.models.v[i] + n - 5, "-IBRS") == 0;
	}
	if (!ibrs)
		return;
	const char *f = c->cpu_flags_csv ? c->cpu_flags_csv : "";
	for (const char *p = f; (p = strstr(p, "spec_ctrl")) != NULL; p += 9)
		if ((p == f || p[-1] == ',') && (p[9] == ',' || p[9] == '\0'))
			return;
	struct vd_buf b = VD_BUF_INIT;
	buf_printf(&b, "%s%sspec_ctrl", f, *f ? "," : "");
	buf_putc(&b, '\0');
	free(c->cpu_flags_csv);
	c->cpu_flags_csv = b.data;
}

void host_caps_ext_gather(struct host_caps *c, const char *root, const char *libvirt_uri)
{
	struct utsname u;
	char qarch[32] = "x86_64", mapname[16] = "x86";
	if (uname(&u) == 0) {
		arch_names(u.machine, qarch, sizeof(qarch), mapname, sizeof(mapname));
		/* VDSM: a PREEMPT_RT kernel says "RT" in its version string */
		c->ext.realtime = strstr(u.version, "RT") != NULL;
	}

	c->ext.source = "none";
	struct host_strv feats = { 0 };
	if (host_libvirt_caps(libvirt_uri, qarch, &c->ext.machines, &c->ext.models, &feats)) {
		c->ext.source = "libvirt";
		if (feats.n) {
			/* VDSM: cpuinfo flags plus the host-model's features */
			struct vd_buf f = VD_BUF_INIT;
			buf_puts(&f, c->cpu_flags_csv ? c->cpu_flags_csv : "");
			for (size_t i = 0; i < feats.n; i++) {
				char k[80];
				snprintf(k, sizeof(k), ",%s,", feats.v[i]);
				char *have = NULL;
				buf_putc(&f, '\0');
				f.len--;
				/* ",flags," lookup: cheap enough once at startup */
				struct vd_buf t = VD_BUF_INIT;
				buf_printf(&t, ",%s,", f.data);
				have = strstr(t.data, k);
				buf_free(&t);
				if (!have)
					buf_printf(&f, "%s%s", f.len ? "," : "", feats.v[i]);
			}
			buf_putc(&f, '\0');
			free(c->cpu_flags_csv);
			c->cpu_flags_csv = f.data;
		}
	} else {
		qemu_models(c, root, qarch, mapname);
	}
	host_strv_free(&feats);
	host_caps_spec_ctrl(c);
	log_info("host: %zu emulated machines and %zu usable CPU models (from %s)",
		 c->ext.machines.n, c->ext.models.n, c->ext.source);

	host_rng_sources(root, &c->ext.rng);
	host_hba_read(root, &c->ext.hba);
	c->ext.kdump = host_kdump_status(root);
	c->ext.selinux = host_selinux_mode(root);
	c->ext.fips = host_fips_enabled(root);
	c->ext.nested = host_nested_virt(root);
	c->ext.iommu = iommu(root);
	c->ext.vnc_tls = vnc_tls(root);
	c->ext.npkgs = host_pkgs_read(root, c->ext.pkgs, HOST_PKGS_MAX);
	cluster_levels(c);

	struct vd_buf b = VD_BUF_INIT;
	struct host_cpu_times ct;
	if (host_read_rel(root, "/proc/stat", 4u << 20, &b) == 0)
		host_parse_stat(b.data, b.len, &ct, &c->ext.boot_time);
	buf_free(&b);

	for (size_t i = 0; i < c->nnodes; i++) {
		char rel[96];
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%u/hugepages", c->nodes[i].id);
		c->nodes[i].nhuge = host_huge_read(root, rel, c->nodes[i].huge, HOST_HUGE_SIZES);
	}
	cpu_topology(c, root, NULL);
	vulnerabilities(c, root);

	cpu_set_t set;
	CPU_ZERO(&set);
	if (!*root && sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set)) {
				char n[16];
				snprintf(n, sizeof(n), "%d", i);
				host_strv_add(&c->ext.affinity, n, strlen(n));
			}
}

void host_caps_ext_free(struct host_caps *c)
{
	struct host_caps_ext *x = &c->ext;
	host_strv_free(&x->rng);
	host_strv_free(&x->machines);
	host_strv_free(&x->models);
	host_strv_free(&x->cluster_levels);
	host_strv_free(&x->affinity);
	host_strv_free(&x->vuln_names);
	host_strv_free(&x->vuln_values);
	free(x->cpus);
	x->cpus = NULL;
}

static void strv_array(struct vd_writer *w, const char *key, const struct host_strv *s)
{
	vw_keyz(w, key);
	vw_begin_array(w);
	for (size_t i = 0; i < s->n; i++)
		vw_strz(w, s->v[i]);
	vw_end_array(w);
}

static void empty_object(struct vd_writer *w, const char *key)
{
	vw_keyz(w, key);
	vw_begin_object(w);
	vw_end_object(w);
}

static void write_hba(struct vd_writer *w, const struct host_hba *h)
{
	vw_keyz(w, "HBAInventory");
	vw_begin_object(w);
	vw_keyz(w, "iSCSI");
	vw_begin_array(w);
	if (h->iscsi_name[0]) {
		vw_begin_object(w);
		vw_kstr(w, "InitiatorName", h->iscsi_name);
		vw_end_object(w);
	}
	vw_end_array(w);
	vw_keyz(w, "FC");
	vw_begin_array(w);
	for (size_t i = 0; i < h->nfc; i++) {
		const struct host_fc_hba *f = &h->fc[i];
		vw_begin_object(w);
		vw_kstr(w, "wwpn", f->wwpn);
		vw_kstr(w, "wwnn", f->wwnn);
		vw_kstr(w, "model", f->model[0] ? f->model : "Unknown");
		vw_kstr(w, "host", f->host);
		vw_end_object(w);
	}
	vw_end_array(w);
	vw_end_object(w);
}

void host_caps_ext_encode(const struct host_caps *c, struct vd_writer *w)
{
	const struct host_caps_ext *x = &c->ext;
	strv_array(w, "emulatedMachines", &x->machines);
	strv_array(w, "rngSources", &x->rng);
	write_hba(w, &x->hba);
	vw_kstr(w, "ISCSIInitiatorName", x->hba.iscsi_name);
	vw_kint(w, "kdumpStatus", x->kdump);
	vw_keyz(w, "selinux");
	vw_begin_object(w);
	vw_kstrf(w, "mode", "%d", x->selinux);
	vw_end_object(w);
	vw_kbool(w, "fipsEnabled", x->fips);
	vw_kbool(w, "nestedVirtualization", x->nested);
	vw_kstr(w, "hostdevPassthrough", x->iommu ? "true" : "false");
	vw_kbool(w, "vncEncrypted", x->vnc_tls);
	if (x->boot_time)
		vw_kstr_u64(w, "bootTime", x->boot_time);

	vw_keyz(w, "cpuTopology");
	vw_begin_array(w);
	for (size_t i = 0; i < x->ncpu; i++) {
		vw_begin_object(w);
		vw_kint(w, "cpu_id", x->cpus[i].cpu);
		vw_kint(w, "numa_cell_id", x->cpus[i].node);
		vw_kint(w, "socket_id", x->cpus[i].socket);
		vw_kint(w, "die_id", x->cpus[i].die);
		vw_kint(w, "core_id", x->cpus[i].core);
		vw_end_object(w);
	}
	vw_end_array(w);
	vw_keyz(w, "vdsmToCpusAffinity");
	vw_begin_array(w);
	for (size_t i = 0; i < x->affinity.n; i++)
		vw_int(w, atoi(x->affinity.v[i]));
	vw_end_array(w);
	vw_keyz(w, "kernelFeatures");
	vw_begin_object(w);
	for (size_t i = 0; i < x->vuln_names.n; i++)
		vw_kstr(w, x->vuln_names.v[i], x->vuln_values.v[i]);
	vw_end_object(w);

	/* policy values (VDSM's defaults: host_mem_reserve 256 +
	 * extra_mem_reserve 65, guest_ram_overhead 65) */
	vw_kstr(w, "reservedMem", "321");
	vw_kstr(w, "guestOverhead", "65");
	/* features vdsmd does not implement are reported off, not assumed;
	 * cold backup is SDM.add_bitmap + NBD.start_server with a bitmap
	 * (tests/integration/test_nbd.py) */
	vw_kbool(w, "hostedEngineDeployed", false);
	vw_keyz(w, "additionalFeatures");
	vw_begin_array(w);
	vw_end_array(w);
	vw_kbool(w, "backupEnabled", true);      /* VM.start_backup etc. (virt/backup.c) */
	vw_kbool(w, "coldBackupEnabled", true);  /* SDM.add_bitmap + NBD.start_server bitmap */
	vw_kbool(w, "clearBitmapsEnabled", true);   /* SDM.clear_bitmaps (st_jobs_bitmap.c) */
	vw_kbool(w, "cd_change_pdiv", false);
	vw_kbool(w, "ovnConfigured", false);
	vw_kbool(w, "realtimeKernel", x->realtime);
	vw_kstr(w, "tscFrequency", "");
	vw_kbool(w, "tscScaling", false);
	empty_object(w, "hooks");
	empty_object(w, "openstack_binding_host_ids");
}
