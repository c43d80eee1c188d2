/* vdsmd/storage/st_task.h - the task engine: the queue, the records under
 * <storage_root>/tasks/, states and results, Task.stop/clear, the executor
 * threads and recovery at startup (st_task.c).
 *
 * It knows no operation: each registers a struct st_task_op (run, recover,
 * its own record fields, what it claims from the startup scan) under its
 * kind, and the engine calls nothing above it but through those.  Built on
 * st_file.h. */
#ifndef VD_VDSMD_STORAGE_ST_TASK_H
#define VD_VDSMD_STORAGE_ST_TASK_H

#include <pthread.h>
#include "st_file.h"

#define ST_MAX_QUEUED_TASKS 4096

enum st_task_state { ST_TS_INIT, ST_TS_RUNNING, ST_TS_ABORTING, ST_TS_FINISHED };
enum st_task_result { ST_TR_NONE, ST_TR_SUCCESS, ST_TR_CLEAN_SUCCESS, ST_TR_CLEAN_FAILURE };
#define ST_TASK_KINDS 16   /* room in the registry */

struct st_task {
	char id[37];
	int kind;                  /* ST_TK_*: op->kind */
	const struct st_task_op *op;   /* what runs and recovers it */
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
	int synced;                /* syncData: layers written and recorded (-1: a record
	                            * from before SYNCED was kept) */
	bool recovering;           /* found unfinished by st_open */
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

/* An operation as the task engine sees it: one descriptor per kind, in the
 * file of the operation, registered at st_open (st_ops_register).  The
 * engine calls these and nothing else above it. */
struct storage_state;
struct st_kv;
struct st_task_op {
	int kind;                  /* ST_TK_* (KIND in the record) */
	const char *verb;          /* the task's verb until the operation names it */
	/* Executor thread: the work, then st_task_finish (always). */
	void (*run)(struct storage_state *s, struct st_task *t);
	/* A record found unfinished at startup, after the scan: decide the
	 * outcome from what is on disk (finishing or undoing the change) and
	 * set t->result, t->code and t->message; the engine persists it. */
	void (*recover)(struct storage_state *s, struct st_task *t);
	/* The domain whose volumes t->vols an unfinished record claims from
	 * the startup scan ("" none); NULL: t->sd. */
	const char *(*claims)(const struct st_task *t);
	/* The operation's own fields of the record (NULL: none). */
	void (*save)(const struct st_task *t, struct st_kv *kv);
	void (*load)(struct st_task *t, const struct st_kv *kv);
	/* Its steps in ST_CRASH_STEPS are "<crash_prefix>.*" (NULL: none). */
	const char *crash_prefix;
};
/* Descriptor pieces operations share (st_task.c): claims for an operation
 * that makes no volume (it claims nothing from the scan); save/load of a
 * record whose one field is SIZE (t->size). */
const char *st_task_claims_none(const struct st_task *t);
void st_task_save_size(const struct st_task *t, struct st_kv *kv);
void st_task_load_size(struct st_task *t, const struct st_kv *kv);
/* The registry (st_task.c): one descriptor per kind, 0 <= kind <
 * ST_TASK_KINDS; a record of a kind nobody registered is read as kind 0's. */
void st_task_register(struct storage_state *s, const struct st_task_op *op);
const struct st_task_op *st_task_op_of(const struct storage_state *s, int kind);

/* A task's st_io (st_task.c): x must outlive every use of x->io. */
struct st_task_io {
	struct st_io io;
	struct storage_state *s;
	struct st_task *t;
};
void st_task_io_init(struct st_task_io *x, struct storage_state *s, struct st_task *t);

const char *st_task_state_name(enum st_task_state s);
const char *st_task_result_name(enum st_task_result r);


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
/* A fresh task of op (id generated, state init), not yet known to anyone. */
struct st_task *st_task_alloc(const struct st_task_op *op);
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
/* Task.revert: 403 unless finished, 441 if rolled back, else 0. */
int st_task_revert(struct storage_state *s, const char *id, struct st_err *e);
/* Tests: wait until the task is finished (or timeout_ms passes). */
int st_task_wait(struct storage_state *s, const char *id, unsigned timeout_ms,
		 struct st_task_status *out);
void st_task_status_copy(const struct st_task *t, struct st_task_status *out);
/* "Task is aborted: <why>" (t->abort_why read under s->lock). */
void st_task_abort_msg(struct storage_state *s, struct st_task *t, char *err, size_t len);

int st_start_workers(struct storage_state *s, unsigned nthreads);
void st_stop_workers(struct storage_state *s);

#endif
