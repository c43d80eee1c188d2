/* vdsmd/virt/virt_int.h - internals of the virt backend, shared by its files:
 *
 *   conn.c       virt_init/fini, the libvirt connection with retry/backoff,
 *                the libvirt event-loop thread, the sampler thread
 *   sample.c     one sample: bulk stats or per-domain calls, rates, merge
 *   events.c     libvirt lifecycle callback → |virt|VM_status|<vmId>; the
 *                statuses the verbs cause or publish themselves
 *   resolve.c    what a verb resolves first: backend, connection, domain,
 *                its disks' volumes and NICs' bridges
 *   state.c      shared bookkeeping of virt_state: connection reference,
 *                sampler kicks, background threads, libvirt's last error
 *   track.c      the per-VM tracker (hash by UUID) kept between samples,
 *                the tombstones of destroyed VMs
 *   snapshot.c   the immutable refcounted snapshot, lookups, VM counts
 *   encode.c     VM stats objects with VDSM field names, per-codec cache;
 *                the VM objects of the verbs' answers
 *   domxml.c     the few facts the stats need from a domain's XML
 *   engxml.c     the engine's domain XML (VM.create, hotplug)
 *   verbs.c      read verbs (loop thread) and the binding table
 *   lifecycle.c, create.c, power.c, hibernate.c, migrate.c, devices.c,
 *   memory.c, policy.c, ...   the verbs that change a VM (worker pool)
 *
 * Calls go down, never back up (make lint: tests/lint-deps.py): verbs.c
 * (the binding table) and conn.c (init, threads) on top; then the verb
 * files, which call no other verb file but the one they extend (create.c
 * → hibernate.c for a restore, livesnap.c → hibernate.c, checkpoint.c →
 * backup.c), and sample.c, which reads merge.c's block jobs; below them
 * resolve.c, then encode.c, events.c, track.c, state.c, snapshot.c and
 * the XML scanners.
 *
 * Locking: s->lock guards the connection pointer, the current snapshot
 * pointer, the tracker and the sampler's wake-up state.  Snapshots are
 * immutable once published; readers hold a reference (snapshot_get/put).
 * libvirt calls are made without s->lock held (the connection is
 * thread-safe and referenced with virConnectRef while in use). */
#ifndef VD_VDSMD_VIRT_INT_H
#define VD_VDSMD_VIRT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <libvirt/libvirt.h>

#include "virt.h"
#include "../../common/buf.h"

/* VDSM's VM status strings. */
enum virt_status {
	VS_UP,
	VS_PAUSED,
	VS_DOWN,
	VS_POWERING_UP,
	VS_POWERING_DOWN,
	VS_SAVING_STATE,
	VS_WAIT_FOR_LAUNCH,
	VS_MIGRATION_SOURCE,
	VS_MIGRATION_DESTINATION,
	VS_RESTORING_STATE,
	VS_UNKNOWN,
};
const char *virt_status_name(enum virt_status st);
enum virt_status virt_status_from_libvirt(int state, int reason);

/* VDSM exit codes / reasons for a VM that went Down. */
enum { VIRT_EXIT_NORMAL = 0, VIRT_EXIT_ERROR = 1 };
enum {
	VIRT_REASON_SUCCESS = 0,
	VIRT_REASON_GENERIC_ERROR = 1,
	VIRT_REASON_LOST_QEMU_CONNECTION = 2,
	VIRT_REASON_MIGRATION_SUCCEEDED = 4,
	VIRT_REASON_SAVE_STATE_SUCCEEDED = 5,
	VIRT_REASON_ADMIN_SHUTDOWN = 6,
	VIRT_REASON_USER_SHUTDOWN = 7,
	VIRT_REASON_DOMAIN_MISSING = 9,
};

/* Facts from a domain's XML (domxml.c); re-read when the hash changes. */
struct virt_xdisk {
	char dev[32];
	char *path;
	char image_id[64];
};
struct virt_xnic {
	char ifname[64];
	char mac[24];
	char network[64];
};
struct virt_xdisplay {
	char type[8];       /* vnc, spice */
	char port[8], tls_port[8];
	char listen[64];
};
struct virt_domxml {
	struct virt_xdisk *disks;
	unsigned ndisks;
	struct virt_xnic *nics;
	unsigned nnics;
	struct virt_xdisplay displays[2];
	unsigned ndisplays;
	uint64_t hash;       /* FNV-1a of the XML (VDSM's "hash" of the devices) */
};
int domxml_parse(const char *xml, struct virt_domxml *out);
void domxml_free(struct virt_domxml *x);
/* Deep copy of src into dst (dst is overwritten, not freed first). */
void domxml_copy(struct virt_domxml *dst, const struct virt_domxml *src);

/* The scanner's helpers (domxml.c), shared with engxml.c. */
const char *dx_elem_end(const char *p, const char *name);
const char *dx_find_child(const char *p, const char *end, const char *child);
bool dx_child_text(const char *p, const char *end, const char *child,
		   char *out, size_t outlen);
/* Attribute name of the start tag at p into out[outlen]; false if absent. */
bool dx_tag_attr(const char *p, const char *name, char *out, size_t outlen);

/* ---- the engine's domain XML (engxml.c) ------------------------------- */

#define VIRT_ENG_MAX_DEV 64
struct virt_engdisk {
	char dev[32];               /* target dev */
	char device[16];            /* disk, cdrom, floppy, lun */
	char path[1024];            /* the source in the XML */
	size_t src_off, src_len;    /* source file/dev attribute value in the XML */
	bool has_src;
	bool has_volume;            /* metadata names domain/image/volume */
	char pool[37], domain[37], image[37], volume[37];
	char resolved[1024];        /* the path the volume resolved to */
};
struct virt_engnic {
	char mac[24];
	char network[64];           /* metadata network, else the source bridge */
	size_t src_off, src_len;    /* source bridge attribute value */
	bool has_src;
	char bridge[64];            /* the network's bridge */
};
struct virt_engxml {
	char uuid[37];
	char name[256];
	size_t type_off, type_len;  /* <domain type=...> value */
	bool has_metadata;          /* an ovirt-vm namespace is bound */
	uint64_t mem_mib;           /* <memory>, 0 when absent */
	unsigned smp;               /* <vcpu current=..> or <vcpu>, 0 when absent */
	struct virt_engdisk disks[VIRT_ENG_MAX_DEV];
	unsigned ndisks;
	struct virt_engnic nics[VIRT_ENG_MAX_DEV];
	unsigned nnics;
};
/* Parse xml (NUL-terminated); 0, or VD_EINVAL/VD_ETOOBIG with why set. */
int engxml_parse(const char *xml, struct virt_engxml *x, char *why, size_t whylen);
/* xml with the resolved disk paths, NIC bridges and (when dom_type) the
 * domain type put in; NUL-terminated into out. */
void engxml_rewrite(const char *xml, const struct virt_engxml *x, const char *dom_type,
		    struct vd_buf *out);
/* The <devices> and ovirt-vm metadata part of engxml_parse, for the
 * hotplug XML (<hotplug><devices>..</devices><metadata>..</metadata>);
 * x must be zeroed by the caller. */
int engxml_parse_devices(const char *xml, struct virt_engxml *x, char *why, size_t whylen);
bool virt_netname_ok(const char *s);
/* s escaped for XML text or an attribute value in either quotes (engxml.c). */
void virt_xml_escape(struct vd_buf *b, const char *s);
/* In the ovirt-vm metadata md as libvirt hands it out (<vm><device
 * name=dev>...), disk dev's volumeID from becomes to (UUIDs: replaced in
 * place); false when dev has no such volume. */
bool engxml_swap_volume(char *md, const char *dev, const char *from, const char *to);
/* The prefix xml binds to http://ovirt.org/vm/1.0 ("ovirt-vm"); false if none. */
bool engxml_prefix(const char *xml, char *out, size_t outlen);
#define VIRT_OVIRT_VM_NS "http://ovirt.org/vm/1.0"
/* VM.create's resolution steps, shared with the hotplug verbs (resolve.c):
 * disks with volume metadata through the storage interface, NIC networks
 * to bridges (a network that cannot take the NIC fails with code); 0, or
 * -1 with the call failed. */
int virt_resolve_disks(struct rpc_call *c, struct virt_state *s, struct virt_engxml *ex);
int virt_resolve_nics(struct rpc_call *c, struct virt_state *s, struct virt_engxml *ex,
		      enum rpc_err code);
/* Write VM id's VmDefinition (Host.getVMFullList entry) from the latest
 * snapshot, {vmId} alone when it is not in it (encode.c). */
void virt_write_definition(struct rpc_call *c, struct virt_state *s, const char *id);

/* ---- snapshot ------------------------------------------------------- */

struct virt_disk_stats {
	char dev[32];
	const char *path;          /* points into the owning vm's strings */
	char image_id[64];
	uint64_t rd_bytes, wr_bytes, rd_reqs, wr_reqs;
	uint64_t rd_lat_ns, wr_lat_ns, fl_lat_ns;  /* average per op, last interval */
	double rd_rate, wr_rate;   /* bytes/s over the last interval */
	uint64_t capacity, allocation, physical;
};

struct virt_nic_stats {
	char ifname[64];
	char mac[24];
	uint64_t rx_bytes, tx_bytes, rx_errs, tx_errs, rx_drop, tx_drop;
	double rx_rate, tx_rate;   /* percent of speed (VDSM) */
	double sample_time;        /* monotonic seconds */
};

struct virt_vm {
	char uuid[37];
	char *name;
	enum virt_status status;
	int lv_state, lv_reason;
	bool active;
	int domid;
	uint64_t elapsed_s;
	int64_t pid;
	unsigned vcpus;
	uint64_t cpu_time_ns;            /* cumulative (cpuUsage) */
	double cpu_user, cpu_sys;        /* percent over the last interval */
	bool have_rates;                 /* rates come from two samples */
	uint64_t mem_kib, max_mem_kib;   /* current / max (balloon) */
	uint64_t balloon_cur_kib;
	uint64_t balloon_target_kib;     /* VM.setBalloonTarget, else the current size */
	uint64_t balloon_min_kib;        /* memGuaranteedSize of VM.hot(un)plugMemory */
	unsigned mem_usage;              /* percent */
	bool have_memstats;
	uint64_t ms_swap_in, ms_swap_out, ms_majflt, ms_minflt, ms_unused,
		 ms_available, ms_usable, ms_caches;
	struct virt_disk_stats *disks;
	unsigned ndisks;
	struct virt_nic_stats *nics;
	unsigned nnics;
	struct virt_xdisplay displays[2];
	unsigned ndisplays;
	uint64_t hash;
	/* Down only */
	int exit_code, exit_reason;
	char *exit_message;
	struct virt_blockjob *bjobs;     /* VM.merge jobs (vmJobs) */
	unsigned nbjobs;
};

/* Per-codec encoded Host.getAllVmStats result (the list value only). */
#define VIRT_MAX_CODECS 4
struct virt_enc_cache {
	const struct vd_writer_ops *ops;  /* identifies the codec */
	char *bytes;
	size_t len;
};

struct virt_snapshot {
	atomic_uint ref;
	uint64_t gen;          /* 1, 2, ... */
	uint64_t taken_ms;     /* vd_now_ms() at sample time */
	uint64_t status_time;  /* statusTime: monotonic ms, the clock of notify_time */
	bool connected;        /* false: libvirt unreachable, VMs are the last known */
	struct virt_vm *vms;   /* sorted by uuid */
	unsigned nvms;
	struct virt_counts counts;   /* virt.h; set by snapshot_sort */
	double sample_ms;      /* how long the sample took */
	pthread_mutex_t cache_lock;
	struct virt_enc_cache cache[VIRT_MAX_CODECS];
};

struct virt_snapshot *snapshot_new(void);
void snapshot_put(struct virt_snapshot *s);
const struct virt_vm *snapshot_find(const struct virt_snapshot *s, const char *uuid);
void snapshot_sort(struct virt_snapshot *s);

/* ---- tracker: what persists between samples, per VM ------------------- */

struct virt_track {
	char uuid[37];
	char *name;
	bool seen;                   /* in the current sample */
	bool gone;                   /* no longer defined in libvirt */
	bool down_reported;          /* status is Down with exit info */
	enum virt_status status;
	uint64_t start_ms;           /* when it was last seen starting */
	int exit_code, exit_reason;
	char *exit_message;
	bool admin_shutdown;         /* our VM.shutdown/destroy is in progress */
	uint64_t event_seq;          /* state's event_seq at its last lifecycle event */
	uint64_t admin_seq;          /* state's event_seq when admin_shutdown was last set */
	/* previous counters for rates */
	bool have_prev;
	uint64_t prev_ms;
	uint64_t prev_cpu_user, prev_cpu_sys;
	struct virt_disk_stats *prev_disks;
	unsigned prev_ndisks;
	struct virt_nic_stats *prev_nics;
	unsigned prev_nnics;
	double last_cpu_user, last_cpu_sys;
	/* XML facts, keyed by the domain id they were read for */
	int xml_domid;
	bool have_xml;
	bool xml_stale;              /* devices changed: re-read the XML */
	bool launching;              /* VM.create: WaitForLaunch until STARTED */
	bool just_launched;          /* the last event was the launch's Up */
	bool created;                /* VM.create's libvirt call has returned */
	unsigned expect_ev;          /* lifecycle events our verbs caused, not yet seen */
	bool powering_down;          /* VM.shutdown: "Powering down" until Down */
	bool destroy_on_reboot;      /* VM.setDestroyOnReboot */
	uint64_t balloon_target_kib; /* VM.setBalloonTarget (0: none set) */
	uint64_t balloon_min_kib;    /* memGuaranteedSize (VM.hot(un)plugMemory) */
	bool migrating;              /* VM.migrate in progress (source) */
	bool incoming;               /* VM.migrationCreate: expected here */
	uint64_t incoming_ms;        /* ... since (vd_now_ms) */
	bool saving;                 /* VM.hibernate: saving its state (hibernate.c) */
	bool restoring;              /* VM.create from memory volumes, until it is Up */
	int mig_code, mig_progress;  /* VM.getMigrationStatus */
	char mig_message[256];
	struct virt_domxml xml;
	struct virt_track *next;     /* hash chain */
};

#define VIRT_TRACK_BUCKETS 4096

/* A VM.merge block commit (merge.c), reported in its VM's vmJobs. */
struct virt_state;
struct virt_blockjob {
	struct virt_state *s;
	char id[37], vm[37], dev[32], image[37], base[37], top[37];
	char domain[37], pool[37];  /* of the volumes (recovery prepares them again) */
	char base_path[1024], top_path[1024];
	bool active;                 /* top is the active layer: pivot at the end */
	unsigned long bandwidth;     /* MiB/s, 0: no limit */
	uint64_t cur, end;           /* libvirt's progress */
};
#define VIRT_MAX_BJOBS 32

/* A host job of the virt backend (jobs.c). */
enum virt_job_status { VJ_PENDING, VJ_RUNNING, VJ_DONE, VJ_FAILED };
struct virt_job {
	char id[37];
	char vm[37];
	char description[24];
	enum virt_job_status status;
	int err_code;
	char err_msg[256];
	uint64_t ended_ms;
};
#define VIRT_MAX_JOBS 64

struct virt_state {
	struct vdsmd *d;
	pthread_mutex_t lock;
	pthread_cond_t cond;         /* sampler wake-up / new snapshot */
	bool stop;
	bool kick;                   /* sample now */
	uint64_t kick_seq;           /* bumped by every virt_kick() */
	uint64_t done_seq;           /* kick_seq seen at the start of the last finished sample */
	uint64_t event_seq;          /* bumped by every lifecycle event and admin mark (under lock) */
#ifdef VD_TEST_HOOKS
	/* test builds only (make asan-unit / tsan): called by virt_sample() on
	 * the sampler thread after the domain states are read and before they
	 * are merged (NULL normally) */
	void (*sample_read_hook)(struct virt_state *s, void *arg);
	void *sample_read_hook_arg;
#endif
	/* VMs removed by VM.destroy: samples and events in flight must not
	 * bring them back (expire after VIRT_TOMB_MS) */
	struct { char uuid[37]; uint64_t ms; } tombs[64];
	unsigned ntombs;
	struct virt_deps deps;       /* what other backends provide (virt_set_deps) */
	virConnectPtr conn;
	int cb_id;                   /* lifecycle callback id or -1 */
	int dev_cb_id[2];            /* device added/removed callback ids or -1 */
	bool ever_connected;
	bool reported_ready;
	bool bulk_unsupported;       /* virConnectGetAllDomainStats not available */
	bool bulk_no_nowait;         /* ... without VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT */
	unsigned backoff_s;
	struct virt_snapshot *snap;  /* current, NULL before the first sample */
	uint64_t next_gen;
	struct virt_track *tracks[VIRT_TRACK_BUCKETS];   /* by uuid hash */
	unsigned sample_interval_s;
	bool no_cache;               /* always re-encode: VDSMD_VIRT_NO_CACHE=1 in a
				      * VD_TEST_HOOKS build (bench), false otherwise */
	pthread_t sampler;
	bool sampler_started;
	pthread_t evthread;
	bool ev_started;
	atomic_bool ev_stop;
	int ev_timer;
	pthread_mutex_t pub_lock;    /* one VM_status publisher at a time */
	uint64_t last_event_ms;      /* time of the last VM_status (pub_lock) */
	unsigned ev_inflight;        /* lifecycle events being published now */
	unsigned bg_jobs;            /* background threads running (virt_bg_spawn) */
	int reboot_cb_id;            /* reboot callback id or -1 */
	struct virt_job jobs[VIRT_MAX_JOBS];   /* jobs.c */
	unsigned njobs;
	struct virt_blockjob bjobs[VIRT_MAX_BJOBS];   /* merge.c */
	unsigned nbjobs;
	/* counters */
	uint64_t samples, sample_failures;
};

/* The virt backend of the daemon a verb runs in (NULL when not started). */
static inline struct virt_state *virt_state_of(const struct rpc_call *c)
{
	const struct vdsmd *d = c->app;
	return d ? d->virt : NULL;
}

/* Current snapshot with a reference (NULL before the first sample). */
struct virt_snapshot *virt_snapshot_get(struct virt_state *s);
/* Publish a new snapshot (takes ownership) and wake waiters. */
void virt_snapshot_publish(struct virt_state *s, struct virt_snapshot *snap);

/* ---- state.c -------------------------------------------------------- */

/* Ask the sampler for a sample now; returns a ticket for virt_wait_kick. */
uint64_t virt_kick(struct virt_state *s);
/* Wait (up to timeout_ms) until a sample that started after the kick has
 * been published.  Returns true when it has. */
bool virt_wait_kick(struct virt_state *s, uint64_t ticket, unsigned timeout_ms);
/* Ask for a fresh sample and wait for it (bounded). */
void virt_refresh(struct virt_state *s);
/* *ts = CLOCK_MONOTONIC now + ms (s->cond's clock). */
void virt_deadline_after(struct timespec *ts, uint64_t ms);

/* Tombstones (track.c; callers hold s->lock). */
#define VIRT_TOMB_MS 30000
void tomb_add(struct virt_state *s, const char *uuid);
bool tomb_has(struct virt_state *s, const char *uuid);
void tomb_del(struct virt_state *s, const char *uuid);

/* The connection with a reference (virConnectClose when done), or NULL
 * (state.c). */
virConnectPtr virt_conn_get(struct virt_state *s);
/* The connection failed: drop it so the sampler reconnects (conn.c). */
void virt_conn_lost(struct virt_state *s, virConnectPtr c);

/* Take one sample on c and build a snapshot (sample.c). */
struct virt_snapshot *virt_sample(struct virt_state *s, virConnectPtr c);

/* Tracker (track.c); callers hold s->lock. */
struct virt_track *track_find(struct virt_state *s, const char *uuid);
struct virt_track *track_get(struct virt_state *s, const char *uuid, const char *name);
void track_remove(struct virt_state *s, const char *uuid);
/* The tracker of a VM a verb brings here (VM.create, VM.migrationCreate):
 * NULL when uuid is known (tracked and not destroyed), else its tracker,
 * its tombstone dropped. */
struct virt_track *track_claim(struct virt_state *s, const char *uuid, const char *name);
void track_free_all(struct virt_state *s);
#define TRACK_FOREACH(s, t) \
	for (unsigned b_ = 0; b_ < VIRT_TRACK_BUCKETS; b_++) \
		for (struct virt_track *t = (s)->tracks[b_]; t; t = t->next) /* NOLINT(bugprone-macro-parentheses): t is a declared name */
void track_set_down(struct virt_track *t, int code, int reason, const char *msg);
/* Down with VDSM's exit info for a VIR_DOMAIN_EVENT_STOPPED_* detail (the
 * sampler passes VIR_DOMAIN_SHUTOFF_* reason - 1: the same order). */
void track_stopped(struct virt_track *t, int detail);

/* Events (events.c). */
int virt_events_register(struct virt_state *s, virConnectPtr c);
/* The next sample re-reads uuid's XML (its devices changed). */
void virt_mark_xml_stale(struct virt_state *s, const char *uuid);
void virt_events_unregister(struct virt_state *s, virConnectPtr c);
/* Publish |virt|VM_status|<uuid> (any thread). */
void virt_publish_status(struct virt_state *s, const char *uuid, enum virt_status st,
			 const struct virt_track *down_info);
/* A verb changed id's state: libvirt will report it with one event. */
void virt_expect_event(struct virt_state *s, const char *id);
/* Mark (on) or unmark VM id as being shut down by us (VM.shutdown/destroy):
 * its STOPPED event then reports admin shutdown. Takes s->lock. */
void virt_mark_admin(struct virt_state *s, const char *id, const char *name, bool on);
/* Wait (up to ~1 s) until the libvirt events of dom's current state have
 * been handled, so that a status a verb publishes comes after them. */
void virt_settle_events(struct virt_state *s, virDomainPtr dom, const char *id);
/* VM id starts to move its state away (VM.migrate: st VS_MIGRATION_SOURCE,
 * VM.hibernate: VS_SAVING_STATE): after the events of earlier changes
 * (virt_settle_events) it is marked migrating (or saving), reports st, its
 * VM.getMigrationStatus says msg (code 0, progress 0), and st is published. */
void virt_transfer_begin(struct virt_state *s, virDomainPtr dom, const char *id,
			 enum virt_status st, const char *msg);

/* Encoding (encode.c). */
void virt_encode_vm_stats(struct vd_writer *w, const struct virt_snapshot *snap,
			  const struct virt_vm *vm);
void virt_encode_all_stats(struct vd_writer *w, const struct virt_snapshot *snap);
/* Write the getAllVmStats list through w, from the per-codec cache when
 * allowed (filled on first use). */
void virt_write_all_stats_cached(struct virt_state *s, struct vd_writer *w,
				 struct virt_snapshot *snap);
/* Host.getAllVmStats' result for c from the cache, borrowed by the reply
 * (rpc_result_borrow) rather than copied; takes over the caller's
 * reference to snap. */
void virt_reply_all_stats(struct rpc_call *c, struct virt_state *s, struct virt_snapshot *snap);
/* vm as VDSM's VmDefinition (Host.getVMFullList, VM.getInfo). */
void virt_encode_vm_full(struct vd_writer *w, const struct virt_snapshot *snap,
			 const struct virt_vm *vm);
/* VM.create's answer, VDSM's VM status object (the restore's too). */
void virt_write_created(struct rpc_call *c, const char *id, const char *name,
			enum virt_status st, int64_t mem_mib, int64_t smp);

/* ---- resolve.c: what a verb resolves first ---------------------------- */

/* Checks common to every libvirt-calling verb: the connection (a reference)
 * or NULL with the call failed. */
virConnectPtr virt_begin(struct rpc_call *c, struct virt_state *s);
/* libvirt's domain for vmID; NULL with the call failed (code 1 when neither
 * libvirt nor the tracker knows it, else 100: the VM is Down). */
virDomainPtr virt_lookup(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
			 const char *id);
/* virt_lookup, for a verb that needs the domain running: NULL with the call
 * failed also when it is not (code 1, VDSM's noVM). */
virDomainPtr virt_lookup_active(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
				const char *id);
/* The body of a verb on one existing domain: 0, or -1 with the call failed. */
typedef int (*domain_action)(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			     const char *id);
/* Every verb on one existing VM (param vmID): begin, look the domain up, run
 * act on it, release domain and connection.  0, or -1 with the call failed. */
int virt_on_domain(struct rpc_call *c, domain_action act);
/* virt_on_domain with code down for a VM the tracker knows but libvirt no
 * longer has (Down after hibernate or destroy). */
int virt_on_domain_as(struct rpc_call *c, domain_action act, enum rpc_err down);
/* virt_on_domain, then the next sample re-reads the VM's devices (and
 * balloon); the result is the action's, or the VmDefinition when want_def. */
int virt_on_devices(struct rpc_call *c, domain_action act, bool want_def);
/* Fail the call from libvirt's last error (code 1 for "no domain"). */
int virt_fail_libvirt(struct rpc_call *c, const char *what, const char *id);
/* dom's live XML read as the engine's (engxml_parse), in c's arena; NULL
 * with the call failed: libvirt's error (virt_fail_libvirt with what), or
 * code when the XML cannot be read. */
struct virt_engxml *virt_live_engxml(struct rpc_call *c, virDomainPtr dom, const char *id,
				     const char *what, enum rpc_err code);
/* The disk of ex on volume sd/img/vol (its metadata volume, or the volume
 * its source file is: the leaf after a snapshot); NULL if none. */
const struct virt_engdisk *virt_find_vol_drive(const struct virt_engxml *ex, const char *sd,
					       const char *img, const char *vol);
/* One volume as VDSM names it (pool may be blank). */
struct virt_pdiv {
	char pool[37], domain[37], image[37], volume[37];
};
/* s[0..n) as a UUID string into out; false when it is not one. */
bool virt_uuid_put(char out[37], const char *s, size_t n);
/* Member key of object o as a UUID string into out; false when o has no
 * such member or it is not a UUID. */
bool virt_uuid_member(const struct vd_value *o, const char *key, char out[37]);
/* v's path through the storage interface: 0, or -1 with the call failed
 * with code (what names the volume in the message). */
int virt_prepare_volume(struct rpc_call *c, struct virt_state *s, const struct virt_pdiv *v,
			const char *what, enum rpc_err code, char *path, size_t pathlen);
/* vmId known: to libvirt, or a Down VM not yet destroyed. */
bool virt_known_vm(struct virt_state *s, virConnectPtr conn, const char *id);

/* Background threads (state.c).  virt_bg_spawn runs fn(arg) on a detached
 * thread counted in s->bg_jobs: 0, or VD_EBUSY when no thread started (arg
 * is still the caller's; always once s->stop is set).  The thread ends with virt_bg_done(s, arg), which
 * frees arg: its last use of s.  virt_bg_wait waits until every such thread
 * has ended (s->stop set first); a thread sees that through virt_stopping.
 * virt_bg_domain: the connection in *c (NULL when libvirt is unreachable)
 * and domain id on it (NULL when gone); virt_bg_release drops both (either
 * may be NULL). */
int virt_bg_spawn(struct virt_state *s, void *(*fn)(void *), void *arg);
void virt_bg_done(struct virt_state *s, void *job);
void virt_bg_wait(struct virt_state *s);
bool virt_stopping(struct virt_state *s);
virDomainPtr virt_bg_domain(struct virt_state *s, const char *id, virConnectPtr *c);
void virt_bg_release(virConnectPtr c, virDomainPtr d);

/* ---- the verbs --------------------------------------------------------- */
int virt_verb_reset(struct rpc_call *c);
int virt_verb_dumpxmls(struct rpc_call *c);
int virt_verb_hotplug_disk(struct rpc_call *c);
int virt_verb_hotplug_nic(struct rpc_call *c);
int virt_verb_hotunplug_disk(struct rpc_call *c);
int virt_verb_hotunplug_nic(struct rpc_call *c);
int virt_verb_set_ticket(struct rpc_call *c);
int virt_verb_update_device(struct rpc_call *c);
int virt_verb_change_cd(struct rpc_call *c);
int virt_verb_change_floppy(struct rpc_call *c);
int virt_verb_hotplug_memory(struct rpc_call *c);
int virt_verb_hotunplug_memory(struct rpc_call *c);
int virt_verb_set_balloon_target(struct rpc_call *c);
int virt_verb_set_number_of_cpus(struct rpc_call *c);
int virt_verb_set_iotune(struct rpc_call *c);
int virt_verb_get_iotune(struct rpc_call *c);
int virt_verb_migrate(struct rpc_call *c);
int virt_verb_migrate_cancel(struct rpc_call *c);
int virt_verb_get_migration_status(struct rpc_call *c);
int virt_verb_migration_create(struct rpc_call *c);
int virt_verb_get_external_data(struct rpc_call *c);
int virt_verb_set_destroy_on_reboot(struct rpc_call *c);
/* guest.c, blockops.c, policy.c */
int virt_verb_freeze(struct rpc_call *c);
int virt_verb_thaw(struct rpc_call *c);
int virt_verb_screenshot(struct rpc_call *c);
int virt_verb_desktop(struct rpc_call *c);
int virt_verb_seal(struct rpc_call *c);
int virt_verb_disk_size_extend(struct rpc_call *c);
int virt_verb_update_vm_policy(struct rpc_call *c);
int virt_verb_get_iotune_policy(struct rpc_call *c);
/* MOM's CPU limit (policy.c): vcpu_quota and vcpu_period for a VM of vcpus
 * vCPUs limited to limit percent of a host of host_cpus CPUs (quota -1: no
 * limit, from 100 % up). */
void virt_cpu_quota(double limit, unsigned host_cpus, unsigned vcpus, long long *quota,
		    unsigned long long *period);
/* hibernate.c: VM.hibernate, and VM.create with memory volumes (restore) */
/* "domainID,poolID,dumpImageID,dumpVolumeID,confImageID,confVolumeID". */
bool virt_parse_hiber_handle(const char *h, struct virt_pdiv *dump, struct virt_pdiv *conf);
/* The memory conf volume's record of VM id (written in place). */
int virt_write_hiber_conf(const char *path, const char *id, char *why, size_t whylen);
int virt_verb_hibernate(struct rpc_call *c);
bool virt_is_restore(const struct vd_value *vmparams);
int virt_create_restore(struct rpc_call *c);

/* Lifecycle verb handlers (lifecycle.c, create.c, power.c). */
int virt_verb_create(struct rpc_call *c);
int virt_verb_pause(struct rpc_call *c);
int virt_verb_cont(struct rpc_call *c);
int virt_verb_shutdown(struct rpc_call *c);
int virt_verb_destroy(struct rpc_call *c);

/* ---- host jobs (jobs.c): VM.snapshot; Host.getJobs job_type "virt" ---- */
/* A new pending job (published): 0, VD_EEXIST, or VD_EBUSY (no room). */
int virt_job_add(struct virt_state *s, const char *id, const char *vm, const char *desc);
/* Its new state (published); code/msg for VJ_FAILED. */
void virt_job_set(struct virt_state *s, const char *id, enum virt_job_status st, int code,
		  const char *msg);
/* The request's jobUUID, else a new UUID, into out (jobs.c). */
void virt_job_uuid(struct rpc_call *c, char out[37]);
int virt_verb_snapshot(struct rpc_call *c);
/* merge.c: VM.merge; the sampler copies a VM's block jobs into its stats
 * (s->lock held), encode.c writes them as vmJobs. */
int virt_verb_merge(struct rpc_call *c);
void virt_blockjobs_copy(struct virt_state *s, struct virt_vm *vm);
/* After (re)connecting: follow again the merges a previous vdsmd started
 * (kept in each domain's metadata). */
void virt_merge_recover(struct virt_state *s, virConnectPtr c);
/* replicate.c: live storage migration (VM.diskReplicateStart/Finish). */
int virt_verb_disk_replicate_start(struct rpc_call *c);
int virt_verb_disk_replicate_finish(struct rpc_call *c);

/* backup.c: VM.start_backup/stop_backup/backup_info; checkpoint.c: the
 * checkpoint verbs.  A backup config as VDSM reads it (backup.py
 * BackupConfig): disks matched to the VM's drives by their volume. */
struct virt_bkdisk {
	char dev[32];               /* the drive's target */
	char image[37];
	bool checkpoint;            /* in the new checkpoint */
	char mode[16];              /* "", full or incremental */
	char scratch[1024];         /* "" when vdsmd makes it */
	char stype[8];              /* file or block */
};
struct virt_bkconfig {
	char backup_id[37];
	char from_cp[37], to_cp[37];     /* "" when not given */
	bool require_consistency;
	int64_t creation_time;           /* 0 when not given */
	struct virt_bkdisk disks[VIRT_ENG_MAX_DEV];
	unsigned ndisks;
};
/* Read cfg (an object) and match its disks on dom: 0, or -1 with the call
 * failed with code (RPC_E_BACKUP for start_backup, RPC_E_CHECKPOINT for a
 * redefinition). */
int virt_backup_config(struct rpc_call *c, virDomainPtr dom, const char *id,
		       const struct vd_value *cfg, enum rpc_err code, struct virt_bkconfig *out);
/* The <domaincheckpoint> VDSM makes of a config with to_checkpoint_id
 * (NUL-terminated in b). */
void virt_checkpoint_xml(struct vd_buf *b, const struct virt_bkconfig *cfg);
int virt_verb_start_backup(struct rpc_call *c);
int virt_verb_stop_backup(struct rpc_call *c);
int virt_verb_backup_info(struct rpc_call *c);
int virt_verb_list_checkpoints(struct rpc_call *c);
int virt_verb_dump_checkpoint(struct rpc_call *c);
int virt_verb_delete_checkpoints(struct rpc_call *c);
int virt_verb_redefine_checkpoints(struct rpc_call *c);

/* Human text of the last libvirt error (thread-local in libvirt; state.c). */
const char *virt_last_error(void);
int virt_last_error_code(void);

#endif
