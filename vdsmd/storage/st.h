/* vdsmd/storage/st.h - internal interface of the storage backend.
 *
 * Layers (each file owns one responsibility):
 *   st_meta.c     key=value metadata with checksum, atomic writes, paths
 *   st_index.c    the in-memory index (domains, images, volumes, tasks)
 *   st_domain.c   storage domains, the registry, the single-host pool
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
/* Atomic replace: path.tmp, fsync, rename, fsync the directory.  Returns 0
 * or -errno. */
int st_write_atomic(const char *path, const void *data, size_t len);
int kv_write_file(const struct st_kv *kv, const char *path);
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
enum st_task_kind { ST_TK_CREATE, ST_TK_DELETE, ST_TK_IMAGE_DELETE };

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
	bool pool_connected;
	/* monitor */
	pthread_t monitor;
	bool monitor_started;
	pthread_cond_t monitor_cond;
	unsigned monitor_interval_ms;
	uint64_t monitor_rounds;
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
/* st_task.c */
int st_tasks_load(struct storage_state *s);
char *st_task_path(const struct storage_state *s, const char *id);
int st_task_persist(const struct storage_state *s, const struct st_task *t);
/* A fresh task (id generated, state init), not yet known to anyone. */
struct st_task *st_task_alloc(enum st_task_kind kind);
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
int st_pool_create(struct storage_state *s, const char *sp, const char *name, const char *master,
		   int master_ver, const char *const *doms, size_t ndoms, struct st_err *e);
int st_pool_connect(struct storage_state *s, const char *sp, bool connect, struct st_err *e);
/* Caller holds the lock. */
struct st_domain *st_domain_get(struct storage_state *s, const char *sd, struct st_err *e);
const char *st_domtype_name(int type);
const char *st_domclass_name(int dclass);
int st_domclass_parse(const char *s);

/* ---- volumes (st_volume.c) ------------------------------------------------ */

char *st_vol_data_path(const struct st_domain *d, const char *img, const char *vol);
char *st_vol_meta_path(const struct st_domain *d, const char *img, const char *vol);
char *st_img_dir(const struct st_domain *d, const char *img);
int st_vol_write_meta(const struct st_domain *d, const struct st_volume *v);
/* Parse a .meta file into v (uuid/image taken from the arguments). */
int st_vol_read_meta(const char *path, struct st_volume *v);
/* Allocate the data file; progress(ctx, pct) and aborted(ctx) are polled. */
struct st_alloc_ctl {
	struct storage_state *s;
	struct st_task *t;
};
int st_vol_create_data(struct storage_state *s, struct st_task *t, const struct st_domain *d,
		       char *err, size_t errlen);
void st_vol_stat(const struct st_domain *d, struct st_volume *v);
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
};
int st_volume_create(struct storage_state *s, const struct st_volreq *r, char task_id[37],
		     struct st_err *e);
int st_volume_delete(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     char task_id[37], struct st_err *e);
int st_image_delete(struct storage_state *s, const char *sd, const char *img, char task_id[37],
		    struct st_err *e);
int st_volume_set_description(struct storage_state *s, const char *sd, const char *img,
			      const char *vol, const char *desc, struct st_err *e);
/* Copy one volume's index entry (description duplicated into out, caller
 * frees it with free()). */
int st_volume_info(struct storage_state *s, const char *sd, const char *img, const char *vol,
		   struct st_volume *out, struct st_err *e);

#endif
