/* vdsmd/host/host_read.h - readers of host facts for Host.getCapabilities,
 * Host.getStats and Host.getHardwareInfo (sysinfo.c, cpumodel.c, pkgver.c).
 * Internal to vdsmd/host/ and its unit tests (included by host_int.h).
 *
 * Every reader takes root: "" for the real machine, or a directory holding a
 * fake tree (proc/, sys/, etc/, dev/, usr/, var/) so unit tests run the same
 * code on fixtures.  Readers never fail: what cannot be read is reported
 * empty / absent (a flag says which), never invented. */
#ifndef VD_VDSMD_HOST_READ_H
#define VD_VDSMD_HOST_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- a growable list of heap strings ----------------------------------- */

struct host_strv {
	char **v;
	size_t n, cap;
};

void host_strv_add(struct host_strv *s, const char *p, size_t len);
bool host_strv_has(const struct host_strv *s, const char *p);
void host_strv_sort(struct host_strv *s);
void host_strv_free(struct host_strv *s);

/* ---- capabilities facts (sysinfo.c) ------------------------------------ */

/* rngSources as VDSM lists them: "random" when dev/random exists, "hwrng"
 * when dev/hwrng exists (urandom is never listed, as VDSM). */
void host_rng_sources(const char *root, struct host_strv *out);

#define HOST_FC_MAX 64

struct host_fc_hba {
	char host[32];          /* "host3" */
	char wwpn[40], wwnn[40];
	char model[128], model_desc[256];
};

struct host_hba {
	char iscsi_name[256];   /* "" when etc/iscsi/initiatorname.iscsi has none */
	size_t nfc;
	struct host_fc_hba fc[HOST_FC_MAX];
};

/* HBAInventory: the iSCSI initiator name and sys/class/fc_host/host*. */
void host_hba_read(const char *root, struct host_hba *h);

/* kdumpStatus as VDSM: -1 unknown, 0 disabled, 1 enabled (crash kernel
 * loaded and fence_kdump_nodes configured in etc/kdump.conf). */
int host_kdump_status(const char *root);
/* selinux mode: 1 enforcing, 0 permissive, -1 disabled / not present. */
int host_selinux_mode(const char *root);
/* proc/sys/crypto/fips_enabled is "1". */
bool host_fips_enabled(const char *root);
/* dev/kvm opens read-write and answers KVM_GET_API_VERSION with 12. */
bool host_kvm_usable(const char *root);
/* /sys/module/kvm_{intel,amd}/parameters/nested is Y or 1. */
bool host_nested_virt(const char *root);

struct host_dmi {
	char manufacturer[128], product[128], version[128], serial[128];
	char uuid[64], family[128];
};

/* sys/class/dmi/id: sys_vendor, product_name, product_version,
 * product_serial, product_uuid, product_family ("" when unreadable). */
void host_dmi_read(const char *root, struct host_dmi *d);

/* ---- statistics facts (sysinfo.c) -------------------------------------- */

struct host_ksm {
	bool present;                  /* sys/kernel/mm/ksm exists */
	bool run;                      /* run == 1 */
	bool merge_across_nodes;
	uint64_t pages_to_scan, pages_sharing, pages_shared;
};

void host_ksm_read(const char *root, struct host_ksm *k);
/* The pid of the kernel thread "ksmd" (proc/<pid>/comm), 0 when none; a
 * cached pid is checked first. */
int host_ksmd_pid(const char *root, int cached);

#define HOST_HUGE_SIZES 8

struct host_huge {
	uint64_t size_kb;
	uint64_t nr, free, resv, surplus;   /* pages */
};

/* Huge page pools under dir ("/sys/kernel/mm/hugepages" or
 * "/sys/devices/system/node/nodeN/hugepages"): sizes ascending; returns the
 * count (0 when the directory is absent). */
size_t host_huge_read(const char *root, const char *dir, struct host_huge *out, size_t max);

/* The paths VDSM reports in diskStats. */
#define HOST_DISK_PATHS 3
extern const char *const host_disk_paths[HOST_DISK_PATHS];
/* Free MiB of root+path for unprivileged users (statvfs f_bavail), or -1
 * when the path cannot be examined (VDSM's value then). */
int64_t host_disk_free_mib(const char *root, const char *path);

/* ---- CPU models and machines (cpumodel.c) ------------------------------ */

/* `qemu-system-ARCH -machine help`: machine names (aliases and their
 * targets; "none" skipped), sorted, no duplicates. */
void host_parse_qemu_machines(const char *text, size_t len, struct host_strv *out);
/* `qemu-system-ARCH -cpu help`: model names ("host", "max", "base" skipped). */
void host_parse_qemu_cpus(const char *text, size_t len, struct host_strv *out);

/* One model of libvirt's CPU map with its features expanded through its
 * base models ("removed" features dropped). */
struct host_cpu_model {
	char *name;
	char *vendor;                  /* may be NULL */
	struct host_strv features;
};

struct host_cpu_map {
	size_t n;
	struct host_cpu_model *m;
};

/* Read root/usr/share/libvirt/cpu_map/<prefix>_*.xml (prefix "x86",
 * "ppc64", ...), expanding base models.  Empty when absent. */
void host_cpu_map_read(const char *root, const char *prefix, struct host_cpu_map *map);
/* Parse one file's text into map (models appended; bases expanded later by
 * host_cpu_map_read, or here when expand is true). */
void host_cpu_map_parse(const char *text, size_t len, struct host_cpu_map *map);
void host_cpu_map_expand(struct host_cpu_map *map);
void host_cpu_map_free(struct host_cpu_map *map);
/* True when every feature of m is in the host's flags (/proc/cpuinfo
 * names; libvirt's names are matched without '-', '_', '.' and through a
 * few known renames). */
bool host_cpu_model_usable(const struct host_cpu_model *m, const struct host_strv *norm_flags);
/* Normalized host flags for host_cpu_model_usable() from a space-separated
 * /proc/cpuinfo flags line. */
void host_norm_flags(const char *flags, struct host_strv *out);

/* Run root/usr/bin/qemu-system-<arch> with one argument ("-machine" "help")
 * and capture at most max bytes of its stdout (10 s limit).  0 or vd_err. */
int host_run_qemu_help(const char *root, const char *arch, const char *what,
		       struct vd_buf *out);

/* ---- libvirt's view (virtcaps.c) --------------------------------------- */

/* Machines of guest/arch[name=arch]/domain[type=kvm] in a capabilities XML
 * (the arch's own list when the kvm domain has none), canonical names too. */
void host_parse_libvirt_machines(const char *xml, size_t len, const char *arch,
				 struct host_strv *out);
/* From a domain capabilities XML: "model_<name>" for every usable custom
 * model, and the host-model's required features. */
void host_parse_domcaps(const char *xml, size_t len, struct host_strv *models,
			struct host_strv *features);
/* Ask libvirt at uri (read-only); false when it has no domain capabilities
 * (lists untouched then). */
bool host_libvirt_caps(const char *uri, const char *arch, struct host_strv *machines,
		       struct host_strv *models, struct host_strv *features);

/* ---- host devices (hostdev.c) ------------------------------------------ */

/* The type of a node device XML's first <capability>. */
bool host_hostdev_capability(const char *xml, size_t len, char *out, size_t outlen);
/* Write "name": {"params": {...}} for one node device XML (VDSM's keys). */
void host_hostdev_write(const char *name, const char *xml, size_t len, struct vd_writer *w);
/* Write the object of every node device of libvirt at uri whose capability
 * is in caps (NULL or empty: all).  0, or VD_EIO with why set. */
int host_hostdev_list(const char *uri, const struct host_strv *caps, struct vd_writer *w,
		      char *why, size_t whylen);

/* ---- installed packages (pkgver.c) ------------------------------------- */

struct host_pkg {
	char name[32];                 /* the key VDSM reports ("qemu-kvm") */
	char version[96], release[96];
};

#define HOST_PKGS_MAX 16

/* From dpkg's database (root/var/lib/dpkg/status), the packages the engine
 * reads under VDSM's names, Debian version split as upstream version and
 * Debian revision (epoch dropped).  Returns the count. */
size_t host_pkgs_read(const char *root, struct host_pkg *out, size_t max);
/* The same from the status file's text. */
size_t host_pkgs_parse(const char *text, size_t len, struct host_pkg *out, size_t max);

#endif
