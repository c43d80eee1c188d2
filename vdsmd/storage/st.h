/* vdsmd/storage/st.h - internal interface of the storage backend.
 *
 * Layers (each file owns one responsibility):
 *   st_meta.c     key=value metadata with checksum, atomic writes, paths
 *   st_index.c    the in-memory index (domains, images, volumes, tasks)
 *   st_domain.c   storage domains, the registry, the pool (create/connect)
 *   st_open.c     st_open / st_close
 *   st_pool_doms.c each domain's status in the pool (POOL_DOMAINS)
 *   st_pool_ops.c attach/detach, destroy, refresh, reconstructMaster
 *   st_spm.c      the SPM lease
 *   st_conn.c     connectStorageServer (mount(8) argv, mount points)
 *   st_volume.c   volume data files (raw sparse/preallocated, qcow2) + .meta
 *   st_ops.c      mutating operations: reserve in the index, queue a task
 *   st_task.c     task records, persistence, executor threads, stop/clear
 *   st_scan.c     startup reconciliation of what is on disk
 *   st_monitor.c  the domain monitor thread
 *   storage.c / st_verbs*.c   daemon glue and the JSON-RPC handlers
 *
 * The core (everything but storage.c and st_verbs*.c) depends on nothing of
 * rpc/ but the enum rpc_err values, so unit tests drive it directly.
 *
 * Concurrency: one mutex (s->lock) guards the index and the task table.  It
 * is held only for memory work, never across disk I/O, so read verbs served
 * from the index on the loop thread never wait for storage.  A volume being
 * created or deleted is marked busy in the index: a second operation on the
 * same id fails at once instead of racing. */
#ifndef VD_VDSMD_STORAGE_ST_H
#define VD_VDSMD_STORAGE_ST_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include "../../common/vd.h"
#include "../../rpc/rpc.h"
#include "st_crash.h"

#define ST_BLANK_UUID "00000000-0000-0000-0000-000000000000"
#define ST_DESC_MAX 210
#define ST_NAME_MAX 256
#define ST_MAX_QUEUED_TASKS 4096

enum st_domtype { ST_DT_NFS = 1, ST_DT_LOCALFS = 4, ST_DT_POSIXFS = 6 };
enum st_domclass { ST_DC_DATA = 1, ST_DC_ISO = 2, ST_DC_BACKUP = 3 };
enum st_volfmt { ST_FMT_COW = 4, ST_FMT_RAW = 5 };
enum st_alloc { ST_PREALLOCATED = 1, ST_SPARSE = 2 };

/* Failure description filled by core operations: an rpc_err value (mapped
 * to the wire by rpc/errors.c) and a detail message. */
struct st_err {
	enum rpc_err code;
	char msg[256];
};
int st_fail(struct st_err *e, enum rpc_err code, const char *fmt, ...) VD_PRINTF(3, 4);

/* ---- st_meta.c ---------------------------------------------------------- */

/* A parsed key=value file (keys and values owned by the struct). */
struct st_kv {
	size_t n, cap;
	char **keys, **vals;
};
void kv_init(struct st_kv *kv);
void kv_free(struct st_kv *kv);
void kv_set(struct st_kv *kv, const char *k, const char *v);
void kv_setf(struct st_kv *kv, const char *k, const char *fmt, ...) VD_PRINTF(3, 4);
const char *kv_get(const struct st_kv *kv, const char *k);
int64_t kv_get_int(const struct st_kv *kv, const char *k, int64_t dflt);
/* Serialize with a trailing _SHA_CKSUM line; value newlines become spaces. */
void kv_format(const struct st_kv *kv, struct vd_buf *out);
/* Parse and verify the checksum: 0, VD_EPROTO (bad/missing checksum or
 * syntax), VD_ENOENT, VD_EIO (errno kept). */
int kv_parse(struct st_kv *kv, const char *text, size_t len);
int kv_read_file(struct st_kv *kv, const char *path);
/* Reads (and closes) fd. */
int kv_read_fd(struct st_kv *kv, int fd);
/* Atomic replace: path.tmp, fsync, rename, fsync the directory.  Returns 0
 * or -errno. */
int st_write_atomic(const char *path, const void *data, size_t len);
int kv_write_file(const struct st_kv *kv, const char *path);
/* Write all of data to fd, fsync, close fd (always): 0 or -errno. */
int st_write_sync_close(int fd, const void *data, size_t len);
/* CLOCK_REALTIME now + ms, for pthread_cond_timedwait. */
void st_deadline(struct timespec *dl, unsigned ms);
int st_fsync_dir(const char *dir);
/* Remove a tree without following symlinks; 0 or -errno. */
int st_rmtree(const char *path);
/* "<a>/<b>" into a fresh string. */
char *st_path(const char *a, const char *b);
char *st_pathf(const char *fmt, ...) VD_PRINTF(1, 2);
bool st_is_uuid(const char *s);
/* Sanitized copy (no control characters, at most max bytes). */
char *st_clean_text(const char *s, size_t max);
int st_mkdir_p(const char *path, mode_t mode);

/* ---- st_safe.c: symlink-safe access below a domain directory ------------ */

/* openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) of rel under dfd (a symlink
 * anywhere fails, ELOOP/EXDEV); -1 with errno. */
int st_open_beneath(int dfd, const char *rel, int flags, mode_t mode);
/* The domain directory itself, O_NOFOLLOW; -1 with errno. */
int st_dom_open(const char *dir);
/* dir (O_NOFOLLOW) then rel beneath it as a directory; -1 with errno. */
int st_dir_at(const char *dir, const char *rel);
struct st_domain;
/* images/<img> of a domain as a directory fd (made first when create);
 * -errno on failure. */
int st_img_open(const struct st_domain *d, const char *img, bool create);
/* Atomic replace of dirfd/name (name.tmp, fsync, renameat, fsync dir). */
int st_write_atomic_at(int dirfd, const char *name, const void *data, size_t len);
int kv_write_at(const struct st_kv *kv, int dirfd, const char *name);
int kv_read_at(struct st_kv *kv, int dirfd, const char *rel);

/* ---- st_index.c --------------------------------------------------------- */

/* Hash map from a 36-character UUID to a pointer. */
struct st_map_ent;
struct st_map {
	struct st_map_ent **b;
	size_t nb, n;
};
void map_init(struct st_map *m);
void map_free(struct st_map *m);      /* frees entries, not values */
void *map_get(const struct st_map *m, const char *key);
void map_put(struct st_map *m, const char *key, void *val);  /* replaces */
void *map_del(struct st_map *m, const char *key);
/* Iteration: for (it = map_first(m); it; it = map_next(m, it)) */
struct st_map_ent *map_first(const struct st_map *m);
struct st_map_ent *map_next(const struct st_map *m, struct st_map_ent *e);
const char *map_key(const struct st_map_ent *e);
void *map_val(const struct st_map_ent *e);

struct st_volume {
	char uuid[37], image[37], parent[37];
	int format;             /* ST_FMT_* */
	int alloc;              /* ST_PREALLOCATED / ST_SPARSE */
	char disktype[16];
	int64_t capacity;
	char *description;
	bool legal;
	bool busy;              /* create/delete in flight */
	unsigned nchildren;     /* volumes backed by this one (any image) */
	int64_t ctime, mtime;
	unsigned generation;
	int sequence;
	int64_t apparent, truesize;  /* from the last stat (disk usage) */
};

struct st_image {
	char uuid[37];
	bool deleting;             /* Image.delete in flight */
	size_t n, cap;
	struct st_volume **vols;   /* in creation order */
};

struct st_domain {
	char uuid[37];
	int type, dclass, version;
	char *name;
	char *remote;      /* typeArgs as given */
	char *base;        /* the mounted directory holding <sdUUID>/ */
	char *dir;         /* <base>/<sdUUID> */
	char pool[37];     /* attached pool or "" */
	bool master;
	/* the pool as the master domain keeps it (shared by every host) */
	int master_ver;
	char *pool_desc;
	char *pool_doms;   /* master: POOL_DOMAINS "sdUUID:Active,sdUUID:Attached" */
	unsigned lease_renew_ms, lease_time_ms, lease_io_ms, lease_retries;
	bool formatting;
	unsigned busy;     /* operations in flight on this domain */
	struct st_map images;   /* imgUUID -> st_image */
	struct st_map volumes;  /* volUUID -> st_volume */
	/* monitor results */
	int mon_code;
	double mon_delay;       /* seconds */
	uint64_t mon_last_ms;   /* vd_now_ms() of the last check, 0 = never */
	bool mon_valid;
	int64_t disktotal, diskfree;
};

struct st_domain *dom_new(const char *uuid);
void dom_free(struct st_domain *d);
struct st_volume *vol_new(void);
void vol_free(struct st_volume *v);
/* Index edits (caller holds s->lock). */
void index_add_volume(struct st_domain *d, struct st_volume *v);
void index_del_volume(struct st_domain *d, const char *vol);
bool index_has_children(const struct st_domain *d, const char *vol);
/* Recount every volume's children (after a scan added them in any order). */
void index_count_children(struct st_domain *d);

/* ---- tasks (st_task.c) --------------------------------------------------- */

enum st_task_state { ST_TS_INIT, ST_TS_RUNNING, ST_TS_ABORTING, ST_TS_FINISHED };
enum st_task_result { ST_TR_NONE, ST_TR_SUCCESS, ST_TR_CLEAN_SUCCESS, ST_TR_CLEAN_FAILURE };
enum st_task_kind { ST_TK_CREATE, ST_TK_DELETE, ST_TK_IMAGE_DELETE, ST_TK_SPM_START,
		    ST_TK_EXTEND, ST_TK_IMAGE_COPY };
#define ST_TK_LAST ST_TK_IMAGE_COPY
enum { ST_SPM_FREE, ST_SPM_CONTEND, ST_SPM_SPM };

struct st_task {
	char id[37];
	enum st_task_kind kind;
	const char *verb;          /* "createVolume", "deleteVolume", "deleteImage" */
	enum st_task_state state;
	enum st_task_result result;
	int code;                  /* wire code (0 ok) */
	char message[256];
	int progress;              /* percent */
	bool abort;                /* Task.stop or shutdown requested */
	char abort_why[64];
	char sd[37], img[37], vol[37];
	/* create parameters */
	int format, alloc;
	int64_t size;
	char parent[37], parent_img[37];
	int parent_format;
	bool legal;                /* create: legality once complete */
	/* delete: the volumes it covers (children first) and scrubbing */
	char (*vols)[37];
	size_t nvols;
	bool postzero, discard;
	pid_t child;               /* qemu-img running for it (under s->lock) */
	int host_id;               /* spmStart: the contender */
	/* cloneStructure / syncData / move (st_imgcopy.c) */
	char dst_sd[37];
	int icop;                  /* ST_IC_* */
	int sync_type;             /* ST_SYNC_* */
	bool recovering;           /* found unfinished by st_open */
#ifdef VD_TEST_HOOKS
	const char *crash_step;    /* st_crash_point() once its tool is spawned */
#endif
	uint64_t ctime;
	struct st_task *qnext;     /* executor queue */
};

/* A copy of a task's externally visible status. */
struct st_task_status {
	char id[37];
	const char *verb;
	enum st_task_state state;
	enum st_task_result result;
	int code;
	char message[256];
	int progress;
};

const char *st_task_state_name(enum st_task_state s);
const char *st_task_result_name(enum st_task_result r);

struct st_job_info;

/* ---- the state ---------------------------------------------------------- */

struct storage_state {
	char *root;                /* storage_root */
	pthread_mutex_t lock;
	pthread_mutex_t reg_lock;  /* serializes registry/pool file writers;
				    * taken before lock, never inside it */
	pthread_cond_t task_cond;  /* executor queue / task finished */
	struct st_map domains;     /* sdUUID -> st_domain */
	struct st_map tasks;       /* taskID -> st_task */
	/* executor */
	struct st_task *qhead, *qtail;
	unsigned queued;
	pthread_t *threads;
	unsigned nthreads;
	bool quit;
	/* single-host pool */
	char pool_uuid[37];
	char *pool_name;
	char pool_master[37];
	int pool_master_ver;
	int pool_host_id;          /* hostID of the last StoragePool.connect */
	bool pool_connected;
	/* SPM lease timing of the connected pool (st_spm.c) */
	unsigned lease_renew_ms, lease_time_ms, lease_io_ms, lease_retries;
	/* SPM (st_spm.c), under lock */
	int spm_state;             /* ST_SPM_* */
	int spm_holder;            /* hostID holding the lease as last seen, -1 none */
	int64_t spm_lver;          /* lease version as last seen, -1 none */
	uint64_t spm_seq;          /* our renewal counter while SPM */
	uint64_t spm_ok_ms;        /* vd_now_ms() of the last write of our lease */
	/* the lease record as st_spm_inspect last read it, and the vd_now_ms()
	 * it was first read at (0: none yet): a holder whose record has not
	 * changed for lease_time_ms cannot hold the lease any more */
	int spm_seen_holder;
	int64_t spm_seen_lver;
	uint64_t spm_seen_seq, spm_seen_ms;
	pthread_t spm_thread;
	bool spm_thread_started, spm_quit;
	pthread_cond_t spm_cond;
	/* LOCALFS directories connected by connectStorageServer (searched for
	 * domains by StoragePool.connect), NUL-separated */
	struct vd_buf localfs;
	/* monitor */
	pthread_t monitor;
	bool monitor_started;
	pthread_cond_t monitor_cond;
	unsigned monitor_interval_ms;
	uint64_t monitor_rounds;
	struct st_map jobs;        /* job id -> st_job (SDM.copy_data) */
	void (*notify_job)(void *ctx, const struct st_job_info *info);
	/* task state change hook (events); called without s->lock held */
	void (*notify)(void *ctx, const struct st_task_status *st);
	void *notify_ctx;
#ifdef VD_TEST_HOOKS
	/* test builds only (make asan-unit / tsan) */
	unsigned prealloc_chunk_delay_us;
	bool prealloc_force_write;  /* skip fallocate, write zeros */
#endif
	/* reconciliation report of the last st_open() */
	unsigned scan_removed, tasks_aborted;
	unsigned tasks_recovering;  /* records found unfinished, until recovered */
};

/* ---- lifecycle (st_domain.c / st_scan.c / st_task.c) --------------------- */

/* Load the registry, scan every domain, recover task records.  Returns NULL
 * with a reason in why on failure.  No threads are started. */
struct storage_state *st_open(const char *root, char *why, size_t whylen);
/* Stops threads (running tasks are aborted), frees everything. */
void st_close(struct storage_state *s);
int st_start_workers(struct storage_state *s, unsigned nthreads);
void st_stop_workers(struct storage_state *s);
int st_start_monitor(struct storage_state *s, unsigned interval_ms);
void st_stop_monitor(struct storage_state *s);
/* One monitoring pass over every domain (the thread calls this). */
void st_monitor_once(struct storage_state *s);

/* st_scan.c: reconcile one domain's directory into its index (called by
 * st_open; also used after a crash by tests). */
int st_scan_domain(struct storage_state *s, struct st_domain *d);
/* The unfinished task (found at startup) that covers volume vol of domain
 * sd, or NULL.  The scan removes only what such a task claims. */
struct st_task *st_task_claim(struct storage_state *s, const char *sd, const char *vol);
/* After the scan: decide and persist the outcome of every task found
 * unfinished, from what is now on disk. */
void st_tasks_recover(struct storage_state *s);
/* st_task.c */
int st_tasks_load(struct storage_state *s);
char *st_task_path(const struct storage_state *s, const char *id);
int st_task_persist(const struct storage_state *s, const struct st_task *t);
/* A fresh task (id generated, state init), not yet known to anyone. */
struct st_task *st_task_alloc(enum st_task_kind kind);
void st_task_free(struct st_task *t);
/* Add a persisted task to the table and queue it for the executor. */
void st_task_submit(struct storage_state *s, struct st_task *t);
/* Record the outcome: persist the finished record, then publish it. */
void st_task_finish(struct storage_state *s, struct st_task *t, enum st_task_result r,
		    int code, const char *msg);
/* True while the executor queue has room (caller holds the lock). */
bool st_task_queue_has_room(const struct storage_state *s);
int st_task_get(struct storage_state *s, const char *id, struct st_task_status *out,
		struct st_err *e);
int st_task_stop(struct storage_state *s, const char *id, struct st_err *e);
int st_task_clear(struct storage_state *s, const char *id, struct st_err *e);
/* Tests: wait until the task is finished (or timeout_ms passes). */
int st_task_wait(struct storage_state *s, const char *id, unsigned timeout_ms,
		 struct st_task_status *out);
void st_task_status_copy(const struct st_task *t, struct st_task_status *out);
/* "Task is aborted: <why>" (t->abort_why read under s->lock). */
void st_task_abort_msg(struct storage_state *s, struct st_task *t, char *err, size_t len);
/* Executor body for one task (st_ops.c). */
void st_task_run(struct storage_state *s, struct st_task *t);

/* ---- domains (st_domain.c) ------------------------------------------------ */

int st_domain_create(struct storage_state *s, const char *sd, int type, const char *type_args,
		     const char *name, int dclass, int version, struct st_err *e);
int st_domain_format(struct storage_state *s, const char *sd, struct st_err *e);
/* Rewrite a domain's metadata from its index entry (caller must not hold
 * the lock; the entry must not go away meanwhile: format is refused while
 * d->busy). */
int st_domain_write_meta(struct storage_state *s, struct st_domain *d);
/* Snapshot the registry under the lock, write it outside (caller holds
 * neither lock). */
int st_registry_save(struct storage_state *s);
/* SPM lease timing of a pool (StoragePool.create's lockRenewalIntervalSec
 * / leaseTimeSec, kept in the master domain's metadata).  NULL: 5 s / 60 s. */
struct st_lease_cfg {
	unsigned renew_ms, lease_ms;
	unsigned io_timeout_ms;   /* a renewal slower than this counts as failed */
	unsigned retries;         /* failed renewals tolerated before the SPM steps down */
};
int st_pool_create(struct storage_state *s, const char *sp, const char *name, const char *master,
		   int master_ver, const char *const *doms, size_t ndoms,
		   const struct st_lease_cfg *lease, struct st_err *e);
/* The work of both: statuses (NULL: the master Active, the others
 * Attached; ST_DS_NONE: written as a member but left out of the map) make
 * POOL_DOMAINS; reconstruct_host > 0 is StoragePool.reconstructMaster
 * (refused while this host is connected to sp: RPC_E_POOL_CONNECTED; every
 * domain must be free or already in sp; the pool is left disconnected with
 * that hostID). */
int st_pool_setup(struct storage_state *s, const char *sp, const char *name, const char *master,
		  int master_ver, const char *const *doms, const int *statuses, size_t ndoms,
		  const struct st_lease_cfg *lease, int reconstruct_host, struct st_err *e);
/* st_pool_ops.c: StoragePool.reconstructMaster - master becomes the pool's
 * master domain at master_ver, the listed domains its members with their
 * statuses (POOL_DOMAINS), and any other domain recorded as the pool's
 * master is demoted.  Refused while the pool is connected here (325); the
 * new master's SPM lease is held for host_id during the rebuild (651 while
 * a live host holds it, or the old master's). */
int st_pool_reconstruct(struct storage_state *s, const char *sp, int host_id, const char *name,
			const char *master, int master_ver, const char *const *doms,
			const int *statuses, size_t ndoms, const struct st_lease_cfg *lease,
			struct st_err *e);
int st_dom_load(struct st_domain *d, const char *base);
/* st_poolrec.c: the intent record of a pool setup (see there); entries
 * with skip[i] (reconstructMaster's members not loaded here, NULL: none)
 * are left out: the setup does not write them. */
int st_pool_intent_write(struct storage_state *s, const char *sp, const char *const *doms,
			 const char (*old_pool)[37], const bool *old_master, const bool *skip,
			 size_t n);
void st_pool_intent_clear(struct storage_state *s);
void st_pool_intent_recover(struct storage_state *s);
/* Give d a pool ("" detaches it) and a role (master or a regular member):
 * metadata first, memory after.  Attach and detach make regular members;
 * the pool intent's recovery puts a domain's old role back.  Caller holds
 * neither lock and has pinned d. */
int st_domain_set_pool(struct storage_state *s, struct st_domain *d, const char *pool,
		       bool master);
/* Read <storage_root>/pool.meta into s (st_open). */
void st_pool_load(struct storage_state *s);
/* Forget the pool (pool.meta emptied first, then memory). */
int st_pool_forget(struct storage_state *s);
/* st_pool_ops.c: StorageDomain.attach/detach, StoragePool.destroy/refresh. */
int st_domain_attach(struct storage_state *s, const char *sd, const char *sp, bool attach,
		     struct st_err *e);
/* StorageDomain.detach force=true, as VDSM: sp blank clears the domain's
 * own pool (metadata, under the domain's lease: 651 while a live host
 * holds it); a connected pool (SPM) drops the domain from its map only.
 * Never the connected pool's master (383). */
int st_domain_force_detach(struct storage_state *s, const char *sd, const char *sp,
			   struct st_err *e);
int st_pool_destroy(struct storage_state *s, const char *sp, struct st_err *e);
int st_pool_refresh(struct storage_state *s, const char *sp, const char *master,
		    int master_ver, struct st_err *e);
/* connect: hostID 1..2000 is kept (getSpmStatus); a master other than
 * blank must be the pool's (and masterVersion, when > 0, its version):
 * RPC_E_WRONG_MASTER otherwise.  Unknown pool: RPC_E_NO_POOL. */
int st_pool_connect(struct storage_state *s, const char *sp, bool connect, int host_id,
		    const char *master, int master_ver, struct st_err *e);
/* Caller holds the lock. */
struct st_domain *st_domain_get(struct storage_state *s, const char *sd, struct st_err *e);
const char *st_domtype_name(int type);
const char *st_domclass_name(int dclass);
int st_domclass_parse(const char *s);

/* ---- volumes (st_volume.c) ------------------------------------------------ */

/* Every path is taken relative to the domain's directory descriptor
 * (st_safe.c); none of these follows a symlink. */
int st_vol_write_meta(const struct st_domain *d, const struct st_volume *v);
/* Parse <ifd>/<name> (a .meta file) into v (v->image set by the caller). */
int st_vol_read_meta_at(int ifd, const char *name, struct st_volume *v);
/* Size of the data file (no lock held; may block on storage). */
int st_vol_stat(const struct st_domain *d, const char *img, const char *vol, int64_t *apparent,
		int64_t *truesize);
/* Remove the data file (meta false) or <vol>.meta; ENOENT is success. */
int st_vol_unlink(const struct st_domain *d, const char *img, const char *vol, bool meta);
/* postZero: overwrite the data with zeros; discard: punch it out. */
int st_vol_scrub(const struct st_domain *d, const char *img, const char *vol, bool zero,
		 bool discard);
/* Run qemu-img (posix_spawn); datafd, when >= 0, becomes the child's fd 3.
 * The pid is kept in t->child while it runs (Task.stop kills it). */
int st_run_qemu_img(struct storage_state *s, struct st_task *t, char *const argv[], int datafd,
		    char *err, size_t errlen);
/* The same, keeping up to 1 MiB of its stdout+stderr in *output. */
int st_run_tool_out(struct storage_state *s, struct st_task *t, const char *tool, const char *pkg,
		    char *const argv[], int datafd, struct vd_buf *output, char *err,
		    size_t errlen);
/* The same, calling cb with every chunk of output as it comes (progress). */
int st_run_tool_cb(struct storage_state *s, struct st_task *t, const char *tool, const char *pkg,
		   char *const argv[], int datafd, struct vd_buf *output,
		   void (*cb)(void *ctx, const char *data, size_t n), void *ctx, char *err,
		   size_t errlen);
/* The same for any tool found in PATH (mount, umount); t may be NULL. */
int st_run_tool(struct storage_state *s, struct st_task *t, const char *tool, const char *pkg,
		char *const argv[], int datafd, char *err, size_t errlen);
/* Allocate the data file; progress(ctx, pct) and aborted(ctx) are polled. */
struct st_alloc_ctl {
	struct storage_state *s;
	struct st_task *t;
};
int st_vol_create_data(struct storage_state *s, struct st_task *t, const struct st_domain *d,
		       char *err, size_t errlen);
const char *st_volfmt_name(int f);
const char *st_alloc_name(int a);

/* ---- mutating operations (st_ops.c) -------------------------------------- */

struct st_volreq {
	const char *sd, *img, *vol;
	int64_t size;
	int format, alloc;
	const char *disktype;   /* NULL = "DATA" */
	const char *desc;
	const char *src_img, *src_vol;  /* NULL or blank = no parent */
	bool illegal;           /* legal=false: stays ILLEGAL once created */
	bool initial_given;     /* initialSize sent */
	int64_t initial_size;
	int sequence;
};
struct st_delopts {
	bool postzero, discard, force;
};
int st_volume_create(struct storage_state *s, const struct st_volreq *r, char task_id[37],
		     struct st_err *e);
int st_volume_delete(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     const struct st_delopts *o, char task_id[37], struct st_err *e);
int st_image_delete(struct storage_state *s, const char *sd, const char *img,
		    const struct st_delopts *o, char task_id[37], struct st_err *e);
/* Image.deleteVolumes: several volumes of one image as one task (children
 * first; a volume whose children are not all listed is refused). */
int st_volumes_delete(struct storage_state *s, const char *sd, const char *img,
		      const char *const *ids, size_t n, const struct st_delopts *o,
		      char task_id[37], struct st_err *e);
int st_volume_set_description(struct storage_state *s, const char *sd, const char *img,
			      const char *vol, const char *desc, struct st_err *e);
/* Copy one volume's index entry (description duplicated into out, caller
 * frees it with free()). */
int st_volume_info(struct storage_state *s, const char *sd, const char *img, const char *vol,
		   struct st_volume *out, struct st_err *e);

/* ---- storage server connections (st_conn.c) ------------------------------ */

/* One entry of connectStorageServer's connectionParams. */
struct st_conn_req {
	const char *id;           /* connection UUID */
	const char *connection;   /* LOCALFS: a directory; NFS: server:/export;
				   * POSIXFS: the mount(8) spec */
	const char *vfs_type;     /* POSIXFS: -t */
	const char *mnt_options;  /* extra -o options */
	const char *protocol_version;  /* NFS: "auto", "3", "4", "4.1", "4.2" */
	int timeo, retrans;       /* NFS, 0 = VDSM's defaults (100, 3) */
};
/* VDSM's fileUtils.normalize_path of a connection: "host:/a//b/" is
 * "host:/a/b", "[v6]:/x" keeps its brackets, "host:port:/p" keeps the port,
 * a local path is normpath'ed.  NULL when a host:tail has an empty part. */
char *st_conn_normalize(const char *spec);
/* <root>/mnt/<normalized spec, '_' doubled, '/' as '_'> (VDSM's
 * transformPath under its mount root), fresh string. */
char *st_conn_mountpoint_at(const char *root, const char *spec);
char *st_conn_mountpoint(const struct storage_state *s, const char *spec);
/* The mount(8) command for an NFS or POSIXFS connection, as VDSM runs it:
 *   mount -t nfs -o soft,nosharecache,timeo=T,retrans=R[,nfsvers=N
 *         [,minorversion=M]][,<mnt_options>][,nolock] <spec> <mount point>
 * (T/R default 100/3; protocol_version absent is "3", "auto" adds no
 * nfsvers; nolock for v3/auto unless mnt_options says lock or nolock);
 *   mount -t <vfs_type> [-o <mnt_options>] <spec> <mount point>.
 * A pure function (nothing is run or created); 0 or a status as
 * st_conn_connect's.  argv points into m (st_mount_cmd_free). */
struct st_mount_cmd {
	char *argv[10];
	char *spec, *mountpoint, *opts;
};
int st_conn_mount_cmd(const char *root, int domtype, const struct st_conn_req *r,
		      struct st_mount_cmd *m, char *msg, size_t msglen);
void st_mount_cmd_free(struct st_mount_cmd *m);
/* The per-connection status VDSM reports: 0 connected (already mounted is
 * success), 477 mount failed, 469 LOCALFS directory unusable, 451 bad
 * connection, 470 unknown type; msg says why. */
int st_conn_connect(struct storage_state *s, int domtype, const struct st_conn_req *r,
		    char *msg, size_t msglen);
/* Unmounts (NFS/POSIXFS: umount -f -l, as VDSM) and removes the mount
 * point: 0 or 452. */
int st_conn_disconnect(struct storage_state *s, int domtype, const struct st_conn_req *r,
		       char *msg, size_t msglen);
/* Remember a connected LOCALFS directory (searched by st_conn_find_domain). */
void st_conn_note_localfs(struct storage_state *s, const char *dir);
/* Look for domain sd on connected storage (LOCALFS directories, mounts
 * under <storage_root>/mnt); a loaded, unregistered domain or NULL. */
struct st_domain *st_conn_find_domain(struct storage_state *s, const char *sd);
/* Load every domain found on connected storage (LOCALFS directories,
 * mounts under <storage_root>/mnt) that this host does not know yet, as
 * VDSM's sdCache finds them (Host.getStorageDomains; blocking I/O). */
void st_conn_discover(struct storage_state *s);
/* Whether dir is a mount point (from /proc/self/mountinfo). */
bool st_is_mounted(const char *dir);

/* ---- the pool's domain map (st_pool_doms.c) ------------------------------
 *
 * As VDSM keeps it: POOL_DOMAINS in the master domain's metadata lists
 * every member with its status.  StoragePool.create makes the master
 * Active and the other domains Attached; StorageDomain.attach adds a domain
 * as Attached, activate makes it Active, deactivate Attached again, detach
 * removes it.  The master's metadata is written first, memory (the master's
 * pool_doms) follows; hosts that are not SPM re-read it on connect, refresh
 * and every monitor pass. */
enum { ST_DS_NONE = 0, ST_DS_UNKNOWN, ST_DS_ATTACHED, ST_DS_UNATTACHED, ST_DS_ACTIVE };
const char *st_dom_status_name(int st);
/* VDSM's validateSDStatus: case-insensitive, the deprecated "Inactive" is
 * Attached; 0 for anything else. */
int st_dom_status_parse(const char *s);
/* The status of sd in an encoded map, or ST_DS_NONE. */
int st_dommap_get(const char *map, const char *sd);
/* A new encoded map with sd set to status (ST_DS_NONE removes it). */
char *st_dommap_put(const char *map, const char *sd, int status);
/* Caller holds the lock: sd's status in the connected pool (ST_DS_NONE
 * when not a member or no pool is connected). */
int st_pool_dom_status(struct storage_state *s, const char *sd);
/* Caller holds the lock: the connected pool's encoded map ("" none). */
const char *st_pool_dommap(struct storage_state *s);
/* Set sd's status in the master's metadata, then in memory; caller holds
 * neither lock.  0 or -errno (-ENOENT: no master here). */
int st_pool_set_dom_status(struct storage_state *s, const char *sd, int status);
/* Re-read the master's POOL_DOMAINS and MASTER_VERSION (another host may
 * have changed them); caller holds neither lock. */
void st_pool_reload(struct storage_state *s);
/* Write master m's metadata with map as its POOL_DOMAINS, then set it in
 * memory (st_domain.c); caller holds neither lock, m pinned. */
int st_master_write_map(struct storage_state *s, struct st_domain *m, const char *map);
/* A domain another host made, found on connected storage (LOCALFS
 * directories, mounts): scanned and registered here; 0 when already known,
 * -1 with e (RPC_E_NO_DOMAIN when not found).  Caller holds neither lock. */
int st_domain_adopt(struct storage_state *s, const char *sd, struct st_err *e);
/* Adopt every member of the connected pool's map not loaded here yet (so a
 * host that is not SPM serves the domains the SPM attached). */
void st_pool_adopt_members(struct storage_state *s);
/* StorageDomain.activate / deactivate (st_pool_doms.c). */
int st_domain_activate(struct storage_state *s, const char *sd, const char *sp, bool activate,
		       const char *new_master, struct st_err *e);

/* ---- SPM (st_spm.c) -------------------------------------------------------- */

/* Lease timing of the connected pool from its master domain (st_open). */
void st_pool_lease_from_master(struct storage_state *s);
/* Contend for the pool's SPM lease (may wait up to the lease time); 0,
 * -EBUSY held by a live host, -ECANCELED task stopped, -errno. */
int st_spm_acquire(struct storage_state *s, struct st_task *t, char *err, size_t errlen);
/* StoragePool.reconstructMaster: hold the lease in dirs[0] (a domain
 * directory) for host me, by the spmStart protocol, while no live host
 * holds dirs[1..n-1] (n <= 4) either; 0 (*lver the version taken), -EBUSY
 * (err names the holder), -errno.  Blocks up to ltime + renew ms. */
int st_lease_hold(struct storage_state *s, const char *const *dirs, size_t n, int me,
		  unsigned renew, unsigned ltime, int64_t *lver, char *err, size_t errlen);
/* Free it again if it is still ours (holder me, version lver). */
int st_lease_drop(const char *dir, int me, int64_t lver);
/* Give the role up and free the lease (clean stop). */
int st_spm_release(struct storage_state *s);
/* Non-SPM hosts: refresh the holder / version seen in the lease (monitor). */
void st_spm_observe(struct storage_state *s);
/* StoragePool.getSpmStatus on a host that does not hold the role: read the
 * master domain's lease now, as VDSM inspects its cluster lock.  *holder is
 * the hostID holding it (-1: free, or a holder that has not renewed for the
 * lease time, as sanlock reports a dead host's lease), *lver its version
 * (-1: never taken);
 * a host that is not contending keeps them as the last seen.  0, -ENOENT
 * without a pool or master domain, or the read's negative errno.  Caller
 * holds no lock. */
int st_spm_inspect(struct storage_state *s, int *holder, int64_t *lver);
/* Caller holds the lock: this host holds the SPM lease and its last
 * renewal began less than lease time - renewal interval / 2 ago (a renewer
 * stuck in storage I/O stops counting as SPM before a contender may take
 * over). */
bool st_spm_valid(const struct storage_state *s);
/* Caller holds the lock: a domain attached to a pool is changed only by
 * its SPM (RPC_E_NOT_SPM otherwise), and only while it is a member of the
 * connected pool, Active or Attached (RPC_E_NOT_MEMBER otherwise). */
int st_spm_require(struct storage_state *s, const struct st_domain *d, struct st_err *e);
/* spmStart's task body. */
void st_spm_run_start(struct storage_state *s, struct st_task *t);
/* StoragePool.spmStart: queue the task. */
int st_spm_start(struct storage_state *s, const char *sp, char task_id[37], struct st_err *e);
int st_spm_stop(struct storage_state *s, const char *sp, struct st_err *e);

/* ---- host jobs: SDM.copy_data (st_jobs.c) ------------------------------- */

enum st_job_status { ST_JOB_PENDING, ST_JOB_RUNNING, ST_JOB_DONE, ST_JOB_FAILED, ST_JOB_ABORTED };
#define ST_MAX_JOBS 16

struct st_job_info {
	char id[37];
	enum st_job_status status;
	int progress;              /* 0..100 */
	int err_code;              /* failed/aborted */
	char err_msg[256];
	char desc[160];
};

struct st_job {
	struct st_job_info info;   /* under s->lock */
	char src[3][37], dst[3][37];   /* sd, img, vol */
	struct st_task ctl;        /* the child pid and abort flag of st_run_tool */
	struct storage_state *s;
	pthread_t thread;
	bool joined;
};

const char *st_job_status_name(enum st_job_status st);
/* Validate and start a copy of volume src into the existing volume dst
 * (qemu-img convert -n, on a thread); the job is visible at once. */
int st_copy_data(struct storage_state *s, const char *job_id, const char *const src[3],
		 const char *const dst[3], struct st_err *e);
/* Abort a running job (its qemu-img is killed). */
int st_job_abort(struct storage_state *s, const char *id, struct st_err *e);
/* Shutdown: abort every job and join its thread. */
void st_jobs_stop(struct storage_state *s);

/* ---- images (st_image.c) -------------------------------------------------- */

/* A disk's volume chain: paths[0] is the leaf (the volume asked for), then
 * its parent, ... down to the base. */
struct st_chain {
	char **paths;
	size_t n;
};
void st_chain_free(struct st_chain *c);
/* sp blank/NULL: any pool; otherwise the domain must be attached to it. */
int st_image_prepare(struct storage_state *s, const char *sd, const char *sp, const char *img,
		     const char *vol, struct st_chain *out, struct st_err *e);
/* The same; allow_illegal lets an ILLEGAL leaf through (Image.prepare's
 * allowIllegal). */
int st_image_prepare2(struct storage_state *s, const char *sd, const char *sp, const char *img,
		      const char *vol, bool allow_illegal, struct st_chain *out,
		      struct st_err *e);

/* qemu-img's view of vol and its chain taken from our metadata, not from
 * the qcow2 headers (whoever can write a volume can point its backing file
 * anywhere): "json:{driver, file, backing: {...} | null}", every path
 * checked (st_vol_stat).  NULL with err filled.  Caller holds no lock. */
char *st_chain_json(struct storage_state *s, const struct st_domain *d, const char *vol,
		    char *err, size_t errlen);

/* ---- image copy between domains (st_imgcopy.c) -------------------------- */

enum { ST_IC_CLONE = 1, ST_IC_SYNC, ST_IC_COPY, ST_IC_MOVE };
enum { ST_SYNC_ALL = 0, ST_SYNC_INTERNAL, ST_SYNC_LEAF };
struct st_imgcopy_req {
	const char *sp, *sd, *img, *dst_sd;
	int op;            /* ST_IC_* */
	int sync_type;     /* ST_SYNC_* (syncData) */
	bool postzero, discard, force;   /* move: how the source is removed */
};
/* "ALL" / "INTERNAL" / "LEAF" -> ST_SYNC_*, -1 otherwise. */
int st_sync_type_parse(const char *s);
/* Image.cloneStructure / syncData / move: validate, pin, queue the task. */
int st_image_copy(struct storage_state *s, const struct st_imgcopy_req *r, char task_id[37],
		  struct st_err *e);
void st_image_run_copy(struct storage_state *s, struct st_task *t);
void st_image_copy_release(struct storage_state *s, struct st_task *t);
/* st_tasks_recover: decide (and finish on disk) an image copy found
 * unfinished at startup; sets t's result, code and message. */
void st_image_copy_recover(struct storage_state *s, struct st_task *t);

/* ---- volume maintenance (st_volops.c) ------------------------------------ */

/* Caller holds the lock: the volume or NULL with e filled. */
struct st_volume *st_find_volume(struct storage_state *s, const char *sd, const char *img,
				 const char *vol, struct st_domain **dp, struct st_err *e);
int st_volume_set_legality(struct storage_state *s, const char *sd, const char *img,
			   const char *vol, bool legal, struct st_err *e);
/* Re-read the size of the data file (a blocking verb). */
int st_volume_refresh(struct storage_state *s, const char *sd, const char *img, const char *vol,
		      struct st_err *e);
/* One persistent bitmap of a qcow2 volume (qemu-img info's format-specific
 * data): flags ST_QBM_IN_USE / ST_QBM_AUTO. */
enum { ST_QBM_IN_USE = 1, ST_QBM_AUTO = 2 };
struct st_qbitmap {
	char *name;
	int64_t granularity;
	unsigned flags;
};
/* What qemu-img info reported; has_* say whether it reported the key at
 * all (a raw volume has no cluster size, no compat, no bitmaps list).
 * bitmaps is owned: st_qinfo_free. */
struct st_qinfo {
	char format[16];
	int64_t virtual_size, cluster_size;
	char backing[256];
	char compat[8];
	bool has_cluster, has_bitmaps;
	struct st_qbitmap *bitmaps;
	size_t nbitmaps;
};
void st_qinfo_free(struct st_qinfo *q);
/* Volume.extendSize: grow a volume to new_size bytes, as a task (SPM). */
int st_volume_extend(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     int64_t new_size, char task_id[37], struct st_err *e);
void st_volume_run_extend(struct storage_state *s, struct st_task *t);
/* Whether v's data already holds size bytes (RAW: file size; COW: the
 * qcow2 header's virtual size): an extend killed before its metadata. */
bool st_volume_grown(const struct st_domain *d, const struct st_volume *v, int64_t size);
/* qemu-img measure -O (RAW/COW) of the volume with its backing chain. */
int st_volume_measure(struct storage_state *s, const char *sd, const char *img, const char *vol,
		      int dst_format, int64_t *required, struct st_err *e);
/* qemu-img info on the volume's checked path. */
int st_volume_qemu_info(struct storage_state *s, const char *sd, const char *img,
			const char *vol, struct st_qinfo *out, struct st_err *e);

#endif
