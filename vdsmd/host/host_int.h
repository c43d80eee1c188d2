/* vdsmd/host/host_int.h - internals of the host backend, shared by its files
 * (procfs.c parsers, sample.c sampler + snapshots, caps.c capabilities,
 * verbs.c handlers, host.c init/fini).  Not for use outside vdsmd/host/ and
 * its unit tests.
 *
 * Parsers take text (pointer + length, not necessarily NUL-terminated) so
 * tests can feed crafted input; they never read past len, never fail on
 * unknown lines, and leave fields they did not find at zero.  They return 0,
 * or VD_EPROTO when the one thing they exist for is missing.
 *
 * Snapshots are immutable once published and reference counted: the sampler
 * builds one, swaps the published pointer under a tiny mutex (which also
 * covers a reader's load + reference), and drops its own reference.  The last
 * host_snapshot_put() frees it.  Readers never wait for a sample. */
#ifndef VD_VDSMD_HOST_INT_H
#define VD_VDSMD_HOST_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include "host.h"
#include "host_read.h"

/* ---- bounded file reads ------------------------------------------------ */

/* Read at most max bytes of path into out (reset first; NUL-terminated past
 * len).  A longer file is truncated at max.  0 or VD_EIO / VD_ENOENT. */
int host_read_file(const char *path, size_t max, struct vd_buf *out);
/* host_read_file() of root followed by rel ("" or a test tree + "/proc/stat"). */
int host_read_rel(const char *root, const char *rel, size_t max, struct vd_buf *out);
/* First line (up to 511 bytes) of root followed by rel, blanks trimmed at both
 * ends, into out; false when unreadable or blank (sysfs values, DMI strings). */
bool host_read_line(const char *root, const char *rel, char *out, size_t outlen);

/* ---- /proc parsers ----------------------------------------------------- */

struct host_cpu_times {
	uint64_t user, nice, system, idle, iowait, irq, softirq, steal;
};

/* Sum of every field (jiffies). */
uint64_t host_cpu_total(const struct host_cpu_times *t);

/* /proc/stat: the aggregate "cpu " line and "btime" (0 when absent).
 * VD_EPROTO without a "cpu " line. */
int host_parse_stat(const char *text, size_t len, struct host_cpu_times *cpu,
		    uint64_t *btime);

/* /proc/stat: the per-CPU "cpuN" lines (up to max) into out/ids; returns
 * the count.  Lines with fewer than four counters are skipped. */
int host_parse_stat_cpus(const char *text, size_t len, struct host_cpu_times *out,
			 unsigned *ids, size_t max);

struct host_meminfo {
	uint64_t total_kb, free_kb, buffers_kb, cached_kb, sreclaimable_kb;
	uint64_t swap_total_kb, swap_free_kb, anon_huge_kb;
};

/* /proc/meminfo.  VD_EPROTO without a positive MemTotal. */
int host_parse_meminfo(const char *text, size_t len, struct host_meminfo *m);

/* /sys/devices/system/node/nodeN/meminfo: MemTotal and MemFree (kB).
 * VD_EPROTO without MemTotal. */
int host_parse_node_meminfo(const char *text, size_t len, uint64_t *total_kb, uint64_t *free_kb);

/* /proc/loadavg: the three averages.  VD_EPROTO unless all three parse. */
int host_parse_loadavg(const char *text, size_t len, double load[3]);

/* /proc/uptime: seconds since boot (first field).  VD_EPROTO if absent. */
int host_parse_uptime(const char *text, size_t len, double *uptime);

/* /proc/<pid>/stat: utime and stime (clock ticks).  Copes with any comm
 * (spaces, parentheses).  VD_EPROTO when the fields are missing. */
int host_parse_pid_stat(const char *text, size_t len, uint64_t *utime, uint64_t *stime);

#define HOST_IFNAME_MAX 32      /* IFNAMSIZ is 16; be generous, truncate beyond */
#define HOST_MAX_IFACES 1024

struct host_netdev {
	char name[HOST_IFNAME_MAX];
	uint64_t rx_bytes, rx_packets, rx_errs, rx_drop;
	uint64_t tx_bytes, tx_packets, tx_errs, tx_drop;
};

/* /proc/net/dev: up to max interfaces into out; returns the count (>= 0).
 * Lines without "name:" or with fewer than 16 counters are skipped. */
int host_parse_netdev(const char *text, size_t len, struct host_netdev *out, size_t max);

/* /proc/cpuinfo summary (x86 keys, with the aarch64/s390/ppc alternatives
 * VDSM knows). */
struct host_cpuinfo {
	char model[256];        /* "model name" (or CPU part / cpu) */
	char speed[32];         /* "cpu MHz" as written, "unavailable" if none */
	char *flags;            /* heap, space-separated as in the file; may be NULL */
	unsigned threads;       /* processor entries */
	unsigned cores;         /* distinct (physical id, core id); threads if unknown */
	unsigned sockets;       /* distinct physical id; 1 if unknown */
};

int host_parse_cpuinfo(const char *text, size_t len, struct host_cpuinfo *ci);
void host_cpuinfo_free(struct host_cpuinfo *ci);

/* KEY=value / KEY="value" file (os-release): copies the value of key into out
 * (quotes stripped).  0, or VD_ENOENT when absent. */
int host_parse_keyval(const char *text, size_t len, const char *key, char *out, size_t outlen);

/* ---- raw samples and snapshots ---------------------------------------- */

/* Where the sampler reads from ("" = the real root; tests use a directory
 * holding proc/ and sys/ trees). */
#define HOST_ROOT_MAX 256

#define HOST_MAX_CPUS 4096
#define HOST_MAX_NODES 64

/* NUMA layout, read once at startup from sys/devices/system/node (no node
 * directories: one node 0 holding every CPU). */
struct host_topo {
	unsigned nnodes;
	unsigned nodes[HOST_MAX_NODES];     /* node ids, ascending */
	uint16_t cpu_node[HOST_MAX_CPUS];   /* cpu id → node id */
};

void host_topo_read(const char *root, struct host_topo *t);

struct host_node_raw {
	unsigned id;
	uint64_t total_kb, free_kb;
	size_t nhuge;
	struct host_huge huge[HOST_HUGE_SIZES];
};

struct host_raw {
	uint64_t mono_ns;
	double wall;                    /* seconds since the epoch */
	bool cpu_ok, mem_ok, load_ok, self_ok;
	struct host_cpu_times cpu;
	uint64_t btime;
	double uptime;
	struct host_meminfo mem;
	double load[3];
	uint64_t self_utime, self_stime;
	size_t nif;
	struct host_netdev *ifs;        /* heap, HOST_MAX_IFACES entries */
	size_t ncpu;
	struct host_cpu_times *cpus;    /* heap, HOST_MAX_CPUS entries */
	unsigned *cpu_ids;              /* heap, HOST_MAX_CPUS entries */
	size_t nnode;
	struct host_node_raw nodes[HOST_MAX_NODES];
	struct host_ksm ksm;
	bool ksmd_ok;                   /* ksmd found and its stat read */
	uint64_t ksmd_ticks;            /* utime + stime of ksmd */
	size_t nhuge;                   /* system-wide huge page pools */
	struct host_huge huge[HOST_HUGE_SIZES];
	int64_t disk_free_mib[HOST_DISK_PATHS];
};

/* Allocate / free the heap arrays of a raw sample. */
void host_raw_alloc(struct host_raw *r);
void host_raw_release(struct host_raw *r);

struct host_iface {
	char name[HOST_IFNAME_MAX];
	char state[8];                  /* "up", "down", "unknown" */
	unsigned speed;                 /* Mb/s; 1000 when unknown (as VDSM) */
	uint64_t rx, tx, rx_dropped, tx_dropped, rx_errors, tx_errors;
};

struct host_cpu_stat {
	unsigned id, node;
	double user, sys, idle;                    /* % of that CPU */
};

struct host_node_mem {
	unsigned id;
	uint64_t free_mib;
	int percent;                               /* used % (100 when empty) */
	size_t nhuge;
	struct host_huge huge[HOST_HUGE_SIZES];    /* this node's pools */
};

struct host_snapshot {
	atomic_uint refs;
	double cpu_user, cpu_sys, cpu_idle;        /* % of all CPUs */
	double cpu_user_vdsmd, cpu_sys_vdsmd;      /* % of one CPU */
	double cpu_load;                           /* 5 minute load average */
	int mem_used;                              /* % */
	uint64_t mem_free_mib, swap_total_mib, swap_free_mib, anon_huge_mib;
	uint64_t boot_time;                        /* seconds since the epoch */
	double sample_time;                        /* wall clock of the sample */
	uint64_t rx_dropped, tx_dropped;           /* sums over interfaces */
	char thp_state[16];
	struct host_ksm ksm;
	int ksm_cpu;                               /* ksmd's % of one CPU */
	size_t nhuge;
	struct host_huge huge[HOST_HUGE_SIZES];    /* system-wide pools */
	int64_t disk_free_mib[HOST_DISK_PATHS];    /* host_disk_paths order */
	size_t ncpu;
	struct host_cpu_stat *cpus;                /* inside the same block */
	size_t nnode;
	struct host_node_mem *nodes;               /* inside the same block */
	size_t nif;
	struct host_iface ifs[];
};

/* Compute a snapshot from two raw samples (prev may equal cur: zero CPU
 * interval gives 0/0/100).  Interface state/speed come from root's
 * sys/class/net; topo (may be NULL) maps CPUs to NUMA nodes.  Returns a
 * snapshot with one reference. */
struct host_snapshot *host_snapshot_build(const struct host_raw *prev,
					  const struct host_raw *cur,
					  const char *root, long clk_tck,
					  const struct host_topo *topo);
void host_snapshot_put(struct host_snapshot *s);

/* ---- capabilities ------------------------------------------------------ */

#define HOST_CAPS_CODECS 8

struct host_caps_enc {
	const struct vd_writer_ops *ops;   /* identifies the codec */
	char *bytes;
	size_t len;
};

struct host_caps_node {
	unsigned id;
	uint64_t total_mib;
	unsigned *cpus;                    /* heap */
	size_t ncpus;
	unsigned *dist;                    /* heap: distances to each node */
	size_t ndist;
	size_t nhuge;                      /* this node's huge page pools */
	struct host_huge huge[HOST_HUGE_SIZES];
};

/* One logical CPU of cpuTopology (sys/devices/system/cpu/cpuN/topology). */
struct host_caps_cpu {
	unsigned cpu, socket, die, core, node;
};

/* What getCapabilities reports beyond /proc and uname (caps_ext.c). */
struct host_caps_ext {
	struct host_strv rng, machines, models, cluster_levels, affinity;
	struct host_strv vuln_names, vuln_values;   /* kernelFeatures */
	const char *source;                /* "libvirt", "qemu" or "none" */
	struct host_hba hba;
	int kdump, selinux;
	bool fips, nested, iommu, vnc_tls, realtime;
	uint64_t boot_time;
	size_t npkgs;
	struct host_pkg pkgs[HOST_PKGS_MAX];
	size_t ncpu;
	struct host_caps_cpu *cpus;        /* heap */
};

struct host_caps {
	struct host_cpuinfo cpu;
	char *cpu_flags_csv;               /* comma-joined */
	char *online_cpus;                 /* "0,1,2,3" */
	uint64_t mem_size_mib;
	bool kvm;
	char os_name[64], os_version[64], os_release[64], os_pretty[128];
	char kernel_version[80], kernel_release[80];
	char uuid[64];
	char hostname[256];
	char kernel_args[1024];
	size_t nnodes;
	struct host_caps_node *nodes;      /* heap, >= 1 */
	int auto_numa;                     /* 0 off, 1 on, 2 unknown (VDSM) */
	size_t nhuge;
	uint64_t huge_kb[16];              /* huge page sizes, ascending */
	struct host_caps_ext ext;
	char boot_uuid[64];                /* caps_keys.c */
	bool has_boot_uuid;
	/* network sections come from peers->write_net_caps (host.h); set at
	 * startup, read by the loop */
	const struct host_peers *_Atomic peers;
	/* encodings, published by an atomic count; writers hold enc_lock */
	pthread_mutex_t enc_lock;
	atomic_uint nenc;
	struct host_caps_enc enc[HOST_CAPS_CODECS];
};

/* Gather capabilities from root ("" = /) with the NUMA layout topo (may be
 * NULL); libvirt_uri (may be NULL) is asked for domain capabilities first.
 * Never fails: missing sources give empty/zero fields. */
struct host_caps *host_caps_new(const char *root, const struct host_topo *topo,
				const char *libvirt_uri);
/* (caps_ext.c) Fill c->ext and the per-node huge pages; free c->ext. */
void host_caps_ext_gather(struct host_caps *c, const char *root, const char *libvirt_uri);
void host_caps_ext_free(struct host_caps *c);
/* Add spec_ctrl to the CPU flags when a usable model ends in -IBRS (VDSM). */
void host_caps_spec_ctrl(struct host_caps *c);
/* (caps_ext.c) Write the keys of c->ext into the open capabilities object. */
void host_caps_ext_encode(const struct host_caps *c, struct vd_writer *w);
/* (caps_keys.c) boot_uuid, read at startup; then writes domain_versions,
 * supported_block_size and boot_uuid (VDSM's forms) into the open object. */
void host_caps_keys_gather(struct host_caps *c, const char *root);
void host_caps_keys_encode(const struct host_caps *c, struct vd_writer *w);
/* VDSM's getDeviceByIP: the device (the IPv4 label) holding the numeric
 * address ip; "" when none does or ip is NULL/"". */
void host_device_by_ip(const char *ip, char *out, size_t outlen);
/* VDSM's ipv6_supported(): an AF_INET6 socket can be made. */
bool host_ipv6_supported(void);
/* The vdsm package version/release vdsmd reports (README: "Versions"). */
#define HOST_VDSM_API_VERSION "4.50.0"
#define HOST_VDSM_RELEASE "1.vdsmd" VDSMD_VERSION
void host_caps_free(struct host_caps *c);
/* (verbs.c) Write the capabilities object through w for a request that came
 * on a connection whose local address is local_addr (NULL: none known;
 * lastClientIface is then "").  Without peers and local_addr the object is
 * encoded once per codec, then copied with vw_raw.  Thread-safe. */
void host_caps_write(struct host_caps *c, struct vd_writer *w, const char *local_addr);
/* Write the object field by field (also used to build the cached encoding). */
void host_caps_encode(const struct host_caps *c, struct vd_writer *w, const char *local_addr);
/* An object key that is the decimal text of v ("0", "17"); here, not in a
 * .c, because caps.c and verbs.c both write such keys and neither may call
 * the other's helpers (verbs.c calls into caps.c). */
static inline void host_key_u(struct vd_writer *w, unsigned v)
{
	char b[16];
	int n = snprintf(b, sizeof(b), "%u", v);
	vw_key(w, b, (size_t)n);
}

/* ---- MOM policy parameters (verbs_ext.c) ------------------------------- */

#define HOST_MOM_MAX 64

struct host_mom_entry {
	char key[64];
	struct vd_value val;       /* scalar; a string's text is in str */
	char str[256];
};

struct host_mom {
	pthread_mutex_t lock;
	size_t n;
	struct host_mom_entry e[HOST_MOM_MAX];
};

/* ---- the backend's state ----------------------------------------------- */

struct host_state {
	struct vdsmd *d;
	char root[HOST_ROOT_MAX];
	unsigned interval_ms;
	long clk_tck;
	/* published snapshot */
	pthread_mutex_t snap_lock;
	struct host_snapshot *snap;
	/* sampler thread */
	struct host_raw prev;                 /* sampler-owned */
	struct vd_buf scratch;                /* sampler-owned file buffer */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	bool stop;
	atomic_ulong samples;                 /* count, for tests */
	struct host_topo topo;
	struct host_caps *caps;
	uint64_t start_ms;                    /* vd_now_ms() at creation */
	struct host_mom mom;                  /* Host.setMOMPolicyParameters */
	const struct host_peers *_Atomic peers; /* host.h; NULL until plugged */
};

struct host_opts {
	const char *root;          /* NULL or "" = real / */
	unsigned interval_ms;      /* between samples */
	unsigned first_ms;         /* first CPU interval (~150 ms) */
	bool start_thread;         /* false: only the first sample (tests) */
	const char *libvirt_uri;   /* when d is NULL (tests); NULL: none */
};

/* Create the state and take the first sample (blocks first_ms).  Never
 * returns NULL. */
struct host_state *host_state_new(struct vdsmd *d, const struct host_opts *o);
void host_state_free(struct host_state *h);
/* Take one sample now and publish it (the sampler thread's step). */
void host_sample_now(struct host_state *h);
/* Latest snapshot with a reference (never NULL after host_state_new). */
struct host_snapshot *host_snapshot_get(struct host_state *h);

/* (verbs_ext.c) Merge the scalar entries of the object kv into the stored
 * MOM policy (as VDSM's MomClient keeps them).  Nothing changes on a bad
 * entry.  0, or VD_EINVAL / VD_ETOOBIG with why set. */
int host_mom_set(struct host_state *h, const struct vd_value *kv, char *why, size_t whylen);
/* Write "momPolicy": {stored entries} into the open getStats object. */
void host_mom_write(struct host_state *h, struct vd_writer *w);
/* (verbs_ext.c) Handlers bound in host_bindings (verbs.c). */
int host_ping(struct rpc_call *c);
int host_get_hardware_info(struct rpc_call *c);
int host_set_mom_policy_parameters(struct rpc_call *c);
int host_get_jobs(struct rpc_call *c);
int host_hostdev_list_by_caps(struct rpc_call *c);

/* Read the raw counters from root into r (allocated with host_raw_alloc);
 * topo (may be NULL) names the NUMA nodes whose meminfo is read. */
void host_raw_read(const char *root, struct vd_buf *scratch, struct host_raw *r,
		   const struct host_topo *topo);

#endif
