/* vdsmd/host/sysinfo.c - small host facts read from files under a root
 * prefix: RNG sources, HBA inventory, kdump/SELinux/FIPS/KVM state, DMI,
 * KSM, huge page pools and free disk space (see host_read.h). */
#include "host_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MAX_SMALL (64u << 10)

/* ---- string lists ------------------------------------------------------ */

void host_strv_add(struct host_strv *s, const char *p, size_t len)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->v = xrealloc(s->v, s->cap * sizeof(s->v[0]));
	}
	s->v[s->n++] = xstrndup(p, len);
}

bool host_strv_has(const struct host_strv *s, const char *p)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], p) == 0)
			return true;
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void host_strv_sort(struct host_strv *s)
{
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(s->v[0]), cmp_str);
	/* drop duplicates */
	size_t o = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (o && strcmp(s->v[o - 1], s->v[i]) == 0) {
			free(s->v[i]);
			continue;
		}
		s->v[o++] = s->v[i];
	}
	s->n = o;
}

void host_strv_free(struct host_strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- helpers ------------------------------------------------------------ */

static bool exists(const char *root, const char *rel)
{
	char path[HOST_ROOT_MAX + 256];
	snprintf(path, sizeof(path), "%s%s", root, rel);
	return access(path, F_OK) == 0;
}

static bool u64_of(const char *root, const char *rel, uint64_t *v)
{
	char b[64], *e;
	if (!host_read_line(root, rel, b, sizeof(b)))
		return false;
	unsigned long long x = strtoull(b, &e, 10);
	if (e == b || *e)
		return false;
	*v = x;
	return true;
}

/* ---- capabilities facts ------------------------------------------------- */

void host_rng_sources(const char *root, struct host_strv *out)
{
	if (exists(root, "/dev/random"))
		host_strv_add(out, "random", 6);
	if (exists(root, "/dev/hwrng"))
		host_strv_add(out, "hwrng", 5);
}

/* "0x21000024ff3a2b1c" → "21000024ff3a2b1c" (VDSM strips the prefix). */
static void strip_0x(char *s)
{
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		memmove(s, s + 2, strlen(s + 2) + 1);
}

static int cmp_fc(const void *a, const void *b)
{
	const struct host_fc_hba *x = a, *y = b;
	size_t lx = strlen(x->host), ly = strlen(y->host);
	return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x->host, y->host);
}

void host_hba_read(const char *root, struct host_hba *h)
{
	memset(h, 0, sizeof(*h));
	struct vd_buf b = VD_BUF_INIT;
	if (host_read_rel(root, "/etc/iscsi/initiatorname.iscsi", MAX_SMALL, &b) == 0) {
		const char *p = b.data, *end = b.data + b.len;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			const char *le = nl ? nl : end;
			if ((size_t)(le - p) > 14 && strncmp(p, "InitiatorName=", 14) == 0) {
				const char *v = p + 14;
				while (le > v && (le[-1] == ' ' || le[-1] == '\r' || le[-1] == '\t'))
					le--;
				while (v < le && (*v == ' ' || *v == '\t'))
					v++;
				snprintf(h->iscsi_name, sizeof(h->iscsi_name), "%.*s", (int)(le - v), v);
				break;
			}
			p = nl ? nl + 1 : end;
		}
	}
	buf_free(&b);

	char path[HOST_ROOT_MAX + 64];
	snprintf(path, sizeof(path), "%s/sys/class/fc_host", root);
	DIR *dir = opendir(path);
	if (!dir)
		return;
	struct dirent *de;
	while ((de = readdir(dir)) != NULL && h->nfc < HOST_FC_MAX) {
		const char *n = de->d_name;
		if (strncmp(n, "host", 4) != 0 || !n[4] || strlen(n) >= sizeof(h->fc[0].host) ||
		    strspn(n + 4, "0123456789") != strlen(n + 4))
			continue;
		struct host_fc_hba *f = &h->fc[h->nfc];
		memset(f, 0, sizeof(*f));
		snprintf(f->host, sizeof(f->host), "%.31s", n);
		char rel[256];
		snprintf(rel, sizeof(rel), "/sys/class/fc_host/%.31s/port_name", n);
		if (!host_read_line(root, rel, f->wwpn, sizeof(f->wwpn)))
			continue;       /* VDSM needs the port name */
		strip_0x(f->wwpn);
		snprintf(rel, sizeof(rel), "/sys/class/fc_host/%.31s/node_name", n);
		if (host_read_line(root, rel, f->wwnn, sizeof(f->wwnn)))
			strip_0x(f->wwnn);
		/* model: the SCSI host's attributes, under the names the drivers
		 * use (VDSM's list); "Unknown" when none */
		static const char *const names[] = { "modelname", "model", "model_name" };
		static const char *const descs[] = { "modeldesc", "model_description", "model_desc" };
		snprintf(f->model, sizeof(f->model), "Unknown");
		snprintf(f->model_desc, sizeof(f->model_desc), "Unknown");
		for (size_t i = 0; i < VD_ARRAY_SIZE(names); i++) {
			char m[128], dsc[256];
			snprintf(rel, sizeof(rel), "/sys/class/fc_host/%.31s/device/scsi_host/%.31s/%s",
				 n, n, names[i]);
			if (!host_read_line(root, rel, m, sizeof(m)))
				continue;
			snprintf(rel, sizeof(rel), "/sys/class/fc_host/%.31s/device/scsi_host/%.31s/%s",
				 n, n, descs[i]);
			if (!host_read_line(root, rel, dsc, sizeof(dsc)))
				dsc[0] = '\0';
			snprintf(f->model, sizeof(f->model), "%s", m);
			if (dsc[0])
				snprintf(f->model_desc, sizeof(f->model_desc), "%s", dsc);
			break;
		}
		h->nfc++;
	}
	closedir(dir);
	qsort(h->fc, h->nfc, sizeof(h->fc[0]), cmp_fc);
}

int host_kdump_status(const char *root)
{
	uint64_t loaded;
	if (!u64_of(root, "/sys/kernel/kexec_crash_loaded", &loaded))
		return -1;
	if (loaded != 1)
		return 0;
	/* a crash kernel is loaded: enabled only with fence_kdump configured */
	struct vd_buf b = VD_BUF_INIT;
	int st = -1;
	if (host_read_rel(root, "/etc/kdump.conf", MAX_SMALL, &b) == 0) {
		st = 0;
		const char *p = b.data, *end = b.data + b.len;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			if ((size_t)(end - p) >= 17 && strncmp(p, "fence_kdump_nodes", 17) == 0) {
				st = 1;
				break;
			}
			p = nl ? nl + 1 : end;
		}
	}
	buf_free(&b);
	return st;
}

int host_selinux_mode(const char *root)
{
	uint64_t v;
	if (!u64_of(root, "/sys/fs/selinux/enforce", &v))
		return -1;
	return v ? 1 : 0;
}

bool host_fips_enabled(const char *root)
{
	uint64_t v;
	return u64_of(root, "/proc/sys/crypto/fips_enabled", &v) && v == 1;
}

bool host_kvm_usable(const char *root)
{
	char path[HOST_ROOT_MAX + 16];
	snprintf(path, sizeof(path), "%s/dev/kvm", root);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	int v = ioctl(fd, KVM_GET_API_VERSION, 0);
	close(fd);
	return v == KVM_API_VERSION;
}

bool host_nested_virt(const char *root)
{
	static const char *const p[] = {
		"/sys/module/kvm_intel/parameters/nested",
		"/sys/module/kvm_amd/parameters/nested",
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(p); i++) {
		char v[8];
		if (host_read_line(root, p[i], v, sizeof(v)) && (strcmp(v, "Y") == 0 || strcmp(v, "1") == 0))
			return true;
	}
	return false;
}

void host_dmi_read(const char *root, struct host_dmi *d)
{
	memset(d, 0, sizeof(*d));
	host_read_line(root, "/sys/class/dmi/id/sys_vendor", d->manufacturer, sizeof(d->manufacturer));
	host_read_line(root, "/sys/class/dmi/id/product_name", d->product, sizeof(d->product));
	host_read_line(root, "/sys/class/dmi/id/product_version", d->version, sizeof(d->version));
	host_read_line(root, "/sys/class/dmi/id/product_serial", d->serial, sizeof(d->serial));
	host_read_line(root, "/sys/class/dmi/id/product_uuid", d->uuid, sizeof(d->uuid));
	host_read_line(root, "/sys/class/dmi/id/product_family", d->family, sizeof(d->family));
}

/* ---- statistics facts ---------------------------------------------------- */

void host_ksm_read(const char *root, struct host_ksm *k)
{
	memset(k, 0, sizeof(*k));
	uint64_t v;
	if (!u64_of(root, "/sys/kernel/mm/ksm/run", &v))
		return;
	k->present = true;
	k->run = v == 1;
	if (u64_of(root, "/sys/kernel/mm/ksm/merge_across_nodes", &v))
		k->merge_across_nodes = v != 0;
	u64_of(root, "/sys/kernel/mm/ksm/pages_to_scan", &k->pages_to_scan);
	u64_of(root, "/sys/kernel/mm/ksm/pages_sharing", &k->pages_sharing);
	u64_of(root, "/sys/kernel/mm/ksm/pages_shared", &k->pages_shared);
}

static bool is_ksmd(const char *root, const char *pid)
{
	char rel[64], comm[32];
	snprintf(rel, sizeof(rel), "/proc/%s/comm", pid);
	return host_read_line(root, rel, comm, sizeof(comm)) && strcmp(comm, "ksmd") == 0;
}

int host_ksmd_pid(const char *root, int cached)
{
	char b[16];
	if (cached > 0) {
		snprintf(b, sizeof(b), "%d", cached);
		if (is_ksmd(root, b))
			return cached;
	}
	char path[HOST_ROOT_MAX + 8];
	snprintf(path, sizeof(path), "%s/proc", root);
	DIR *dir = opendir(path);
	if (!dir)
		return 0;
	int pid = 0;
	struct dirent *de;
	/* kernel threads have small pids: ksmd is found early in the scan */
	while ((de = readdir(dir)) != NULL) {
		const char *n = de->d_name;
		if (!n[0] || strlen(n) > 9 || strspn(n, "0123456789") != strlen(n))
			continue;
		if (is_ksmd(root, n)) {
			pid = atoi(n);
			break;
		}
	}
	closedir(dir);
	return pid;
}

static int cmp_huge(const void *a, const void *b)
{
	const struct host_huge *x = a, *y = b;
	return x->size_kb < y->size_kb ? -1 : x->size_kb > y->size_kb;
}

size_t host_huge_read(const char *root, const char *dir_rel, struct host_huge *out, size_t max)
{
	char path[HOST_ROOT_MAX + 128];
	snprintf(path, sizeof(path), "%s%s", root, dir_rel);
	DIR *dir = opendir(path);
	if (!dir)
		return 0;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(dir)) != NULL && n < max) {
		unsigned long long kb;
		char tail[8];
		if (sscanf(de->d_name, "hugepages-%llu%7s", &kb, tail) != 2 ||
		    strcmp(tail, "kB") != 0 || kb == 0)
			continue;
		struct host_huge *h = &out[n];
		memset(h, 0, sizeof(*h));
		h->size_kb = kb;
		char rel[HOST_ROOT_MAX + 320];
		if (strlen(dir_rel) > 128 || strlen(de->d_name) > 64)
			continue;
		snprintf(rel, sizeof(rel), "%s/%s/nr_hugepages", dir_rel, de->d_name);
		u64_of(root, rel, &h->nr);
		snprintf(rel, sizeof(rel), "%s/%s/free_hugepages", dir_rel, de->d_name);
		u64_of(root, rel, &h->free);
		snprintf(rel, sizeof(rel), "%s/%s/resv_hugepages", dir_rel, de->d_name);
		u64_of(root, rel, &h->resv);
		snprintf(rel, sizeof(rel), "%s/%s/surplus_hugepages", dir_rel, de->d_name);
		u64_of(root, rel, &h->surplus);
		n++;
	}
	closedir(dir);
	qsort(out, n, sizeof(out[0]), cmp_huge);
	return n;
}

const char *const host_disk_paths[HOST_DISK_PATHS] = { "/tmp", "/var/log", "/var/run/vdsm/" };

int64_t host_disk_free_mib(const char *root, const char *path)
{
	char full[HOST_ROOT_MAX + 64];
	snprintf(full, sizeof(full), "%s%s", root, path);
	struct statvfs st;
	if (statvfs(full, &st) != 0)
		return -1;
	return (int64_t)((uint64_t)st.f_bavail * st.f_frsize / (1024u * 1024u));
}
