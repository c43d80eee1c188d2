/* vdsmd/storage/st_task.c - the task engine: the registry of operations,
 * the table, the persisted records under <storage_root>/tasks/, the
 * executor threads, Task.stop / Task.clear and recovery after a restart.
 *
 * The engine knows no operation: what a task does, which fields of its
 * record are its own, what it claims from the startup scan and how an
 * unfinished one is decided all come from the descriptor (struct
 * st_task_op) its operation registered.  Nothing here calls up into them
 * but through a descriptor.
 *
 * Tasks run on the storage executor's own threads (not the shared worker
 * pool): a long preallocation must never starve the blocking verbs the pool
 * serves.  States and results are VDSM's: init -> running -> finished, or
 * aborting after Task.stop; results success, cleanSuccess (failed and rolled
 * back), cleanFailure (failed and the rollback failed too).
 *
 * Persistence: a record is written (atomically) before the task is queued and
 * again, finished, before its outcome becomes visible.  The record names every
 * volume the task may change (VOLUUID / VOLUMES): the startup scan removes an
 * ILLEGAL volume only when an unfinished record claims it, so a volume left
 * ILLEGAL by a failed rollback (a finished record explains it) is kept.  A
 * record found unfinished at startup belongs to a task that died with vdsmd;
 * its outcome is read from what the scan found (st_tasks_recover, through
 * the operation's recover): a create whose volume is complete succeeded,
 * else it was rolled back ("aborted by restart"); a delete whose volumes
 * were all marked ILLEGAL is completed.
 *
 * Shutdown: every unfinished task is aborted; the executors drain the queue,
 * so queued tasks run their rollback and finish "aborted" (code 411) before
 * the threads exit; a running qemu-img is killed and reaped.
 *
 * Locking: every task field that another thread may change (state, result,
 * code, message, progress, abort_why, child) is read and written under
 * s->lock; abort is also an atomic flag polled without it. */
#include "st_state.h"
#include "../../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *st_task_state_name(enum st_task_state s)
{
	switch (s) {
	case ST_TS_INIT: return "init";
	case ST_TS_RUNNING: return "running";
	case ST_TS_ABORTING: return "aborting";
	case ST_TS_FINISHED: return "finished";
	}
	return "unknown";
}

const char *st_task_result_name(enum st_task_result r)
{
	switch (r) {
	case ST_TR_NONE: return "";
	case ST_TR_SUCCESS: return "success";
	case ST_TR_CLEAN_SUCCESS: return "cleanSuccess";
	case ST_TR_CLEAN_FAILURE: return "cleanFailure";
	}
	return "";
}

static enum st_task_result result_parse(const char *s)
{
	if (!s)
		return ST_TR_NONE;
	if (strcmp(s, "success") == 0)
		return ST_TR_SUCCESS;
	if (strcmp(s, "cleanSuccess") == 0)
		return ST_TR_CLEAN_SUCCESS;
	if (strcmp(s, "cleanFailure") == 0)
		return ST_TR_CLEAN_FAILURE;
	return ST_TR_NONE;
}

void st_task_register(struct storage_state *s, const struct st_task_op *op)
{
	if (op->kind >= 0 && op->kind < ST_TASK_KINDS)
		s->task_ops[op->kind] = op;
}

const struct st_task_op *st_task_op_of(const struct storage_state *s, int kind)
{
	return kind >= 0 && kind < ST_TASK_KINDS ? s->task_ops[kind] : NULL;
}

char *st_task_path(const struct storage_state *s, const char *id)
{
	return st_pathf("%s/tasks/%s.task", s->root, id);
}

struct st_task *st_task_alloc(const struct st_task_op *op)
{
	struct st_task *t = xcalloc(1, sizeof(*t));
	vd_uuid_generate(t->id);
	t->op = op;
	t->kind = op->kind;
	t->verb = op->verb;
	t->state = ST_TS_INIT;
	snprintf(t->message, sizeof(t->message), "Task is initializing");
	t->ctime = (uint64_t)time(NULL);
	return t;
}

void st_task_free(struct st_task *t)
{
	if (t) {
		free(t->vols);
		free(t);
	}
}

void st_task_status_copy(const struct st_task *t, struct st_task_status *out)
{
	snprintf(out->id, sizeof(out->id), "%.36s", t->id);
	out->verb = t->verb;
	out->state = t->state;
	out->result = t->result;
	out->code = t->code;
	snprintf(out->message, sizeof(out->message), "%s", t->message);
	out->progress = t->progress;
}

/* Persist t as it is (the state on disk is only "running" or "finished"). */
int st_task_persist(const struct storage_state *s, const struct st_task *t)
{
	struct st_kv kv;
	kv_init(&kv);
	kv_set(&kv, "ID", t->id);
	kv_set(&kv, "VERB", t->verb);
	kv_setf(&kv, "KIND", "%d", (int)t->kind);
	kv_set(&kv, "STATE", t->state == ST_TS_FINISHED ? "finished" : "running");
	kv_set(&kv, "RESULT", st_task_result_name(t->result));
	kv_setf(&kv, "CODE", "%d", t->code);
	kv_set(&kv, "MESSAGE", t->message);
	kv_set(&kv, "SDUUID", t->sd);
	kv_set(&kv, "IMGUUID", t->img);
	kv_set(&kv, "VOLUUID", t->vol);
	if (t->nvols) {
		struct vd_buf b = VD_BUF_INIT;
		for (size_t i = 0; i < t->nvols; i++)
			buf_printf(&b, "%s%s", i ? "," : "", t->vols[i]);
		kv_set(&kv, "VOLUMES", b.data);
		buf_free(&b);
	}
	if (t->op->save)
		t->op->save(t, &kv);
	if (t->postzero)
		kv_set(&kv, "POSTZERO", "1");
	if (t->discard)
		kv_set(&kv, "DISCARD", "1");
	kv_setf(&kv, "CTIME", "%llu", (unsigned long long)t->ctime);
	char *path = st_task_path(s, t->id);
	int rc = kv_write_file(&kv, path);
	free(path);
	kv_free(&kv);
	return rc;
}

void st_task_abort_msg(struct storage_state *s, struct st_task *t, char *err, size_t len)
{
	pthread_mutex_lock(&s->lock);
	snprintf(err, len, "Task is aborted: %s", t->abort_why);
	pthread_mutex_unlock(&s->lock);
}

/* ---- st_io of a task ---------------------------------------------------- */

static bool io_stopped(void *ctx, char *why, size_t len)
{
	struct st_task_io *x = ctx;
	if (!__atomic_load_n(&x->t->abort, __ATOMIC_ACQUIRE))
		return false;
	st_task_abort_msg(x->s, x->t, why, len);
	return true;
}

static void io_progress(void *ctx, int pct)
{
	struct st_task_io *x = ctx;
	pthread_mutex_lock(&x->s->lock);
	x->t->progress = pct;
	pthread_mutex_unlock(&x->s->lock);
}

/* Task.stop and shutdown kill t->child; one spawned after the stop is
 * killed here at once. */
static void io_child(void *ctx, pid_t pid)
{
	struct st_task_io *x = ctx;
	pthread_mutex_lock(&x->s->lock);
	x->t->child = pid;
	bool kill_now = pid > 0 && __atomic_load_n(&x->t->abort, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&x->s->lock);
	if (kill_now)
		kill(pid, SIGKILL);
}

void st_task_io_init(struct st_task_io *x, struct storage_state *s, struct st_task *t)
{
	memset(x, 0, sizeof(*x));
	x->s = s;
	x->t = t;
	x->io.ctx = x;
	x->io.stopped = io_stopped;
	x->io.progress = io_progress;
	x->io.child = io_child;
}

static void notify(struct storage_state *s, const struct st_task_status *st)
{
	if (s->notify)
		s->notify(s->notify_ctx, st);
}

bool st_task_queue_has_room(const struct storage_state *s)
{
	return s->queued < ST_MAX_QUEUED_TASKS;
}

void st_task_submit(struct storage_state *s, struct st_task *t)
{
	struct st_task_status st;
	pthread_mutex_lock(&s->lock);
	map_put(&s->tasks, t->id, t);
	t->qnext = NULL;
	if (s->qtail)
		s->qtail->qnext = t;
	else
		s->qhead = t;
	s->qtail = t;
	s->queued++;
	st_task_status_copy(t, &st);
	pthread_cond_broadcast(&s->task_cond);
	pthread_mutex_unlock(&s->lock);
	notify(s, &st);
}

void st_task_finish(struct storage_state *s, struct st_task *t, enum st_task_result r,
		    int code, const char *msg)
{
	pthread_mutex_lock(&s->lock);
	struct st_task copy = *t;
	pthread_mutex_unlock(&s->lock);
	copy.state = ST_TS_FINISHED;
	copy.result = r;
	copy.code = code;
	snprintf(copy.message, sizeof(copy.message), "%s", msg);
	int rc = st_task_persist(s, &copy);
	if (rc < 0)
		log_error("storage: task %s: cannot persist its result: %s", t->id, st_rc_text(rc));
	struct st_task_status st;
	pthread_mutex_lock(&s->lock);
	t->state = ST_TS_FINISHED;
	t->result = r;
	t->code = code;
	snprintf(t->message, sizeof(t->message), "%s", msg);
	if (r == ST_TR_SUCCESS)
		t->progress = 100;
	st_task_status_copy(t, &st);
	pthread_cond_broadcast(&s->task_cond);
	pthread_mutex_unlock(&s->lock);
	/* From here t may be cleared (freed) by Task.clear: only the copy. */
	if (r == ST_TR_SUCCESS)
		log_debug("storage: task %s (%s) finished", st.id, st.verb);
	else
		log_info("storage: task %s (%s) failed: %s", st.id, st.verb, st.message);
	notify(s, &st);
}

/* ---- executor ------------------------------------------------------------ */

static void *executor(void *arg)
{
	struct storage_state *s = arg;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->quit && !s->qhead)
			pthread_cond_wait(&s->task_cond, &s->lock);
		if (!s->qhead)
			break;   /* quit, and the queue is drained */
		struct st_task *t = s->qhead;
		s->qhead = t->qnext;
		if (!s->qhead)
			s->qtail = NULL;
		s->queued--;
		if (t->state == ST_TS_INIT) {
			t->state = ST_TS_RUNNING;
			snprintf(t->message, sizeof(t->message), "running job 1 of 1");
		}
		struct st_task_status st;
		st_task_status_copy(t, &st);
		pthread_mutex_unlock(&s->lock);
		notify(s, &st);
		t->op->run(s, t);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int st_start_workers(struct storage_state *s, unsigned nthreads)
{
	if (nthreads == 0)
		nthreads = 1;
	s->threads = xcalloc(nthreads, sizeof(*s->threads));
	s->quit = false;
	for (unsigned i = 0; i < nthreads; i++) {
		int rc = pthread_create(&s->threads[i], NULL, executor, s);
		if (rc != 0) {
			log_error("storage: cannot start task thread: %s", strerror(rc));
			break;
		}
		s->nthreads++;
	}
	return s->nthreads ? 0 : VD_EIO;
}

void st_stop_workers(struct storage_state *s)
{
	if (!s->threads)
		return;
	pthread_mutex_lock(&s->lock);
	s->quit = true;
	/* Every unfinished task rolls back: running ones at their next check
	 * (their qemu-img killed), queued ones when the draining executors
	 * reach them; all finish "aborted". */
	for (struct st_map_ent *e = map_first(&s->tasks); e; e = map_next(&s->tasks, e)) {
		struct st_task *t = map_val(e);
		if (t->state == ST_TS_FINISHED)
			continue;
		/* abort_why is written once, before abort is set: the task
		 * thread reads it without the lock after seeing abort */
		if (!__atomic_load_n(&t->abort, __ATOMIC_RELAXED)) {
			snprintf(t->abort_why, sizeof(t->abort_why), "vdsmd is shutting down");
			__atomic_store_n(&t->abort, true, __ATOMIC_RELEASE);
		}
		if (t->child > 0)
			kill(t->child, SIGKILL);
	}
	pthread_cond_broadcast(&s->task_cond);
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < s->nthreads; i++)
		pthread_join(s->threads[i], NULL);
	free(s->threads);
	s->threads = NULL;
	s->nthreads = 0;
}

/* ---- verbs' core --------------------------------------------------------- */

static struct st_task *find(struct storage_state *s, const char *id, struct st_err *e)
{
	struct st_task *t = st_is_uuid(id) ? map_get(&s->tasks, id) : NULL;
	if (!t)
		st_fail(e, RPC_E_NO_TASK, "%s", st_is_uuid(id) ? id : "invalid id");
	return t;
}

int st_task_get(struct storage_state *s, const char *id, struct st_task_status *out,
		struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_task *t = find(s, id, e);
	if (t)
		st_task_status_copy(t, out);
	pthread_mutex_unlock(&s->lock);
	return t ? 0 : -1;
}

int st_task_stop(struct storage_state *s, const char *id, struct st_err *e)
{
	struct st_task_status st;
	pthread_mutex_lock(&s->lock);
	struct st_task *t = find(s, id, e);
	if (!t) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	if (t->state == ST_TS_FINISHED) {
		/* VDSM ignores a stop of a done task (task.py:1343-1347) */
		pthread_mutex_unlock(&s->lock);
		log_debug("storage: task %s already finished, stop ignored", id);
		return 0;
	}
	if (t->state != ST_TS_ABORTING) {
		/* abort_why: written once, before abort (see st_stop_workers) */
		if (!__atomic_load_n(&t->abort, __ATOMIC_RELAXED)) {
			snprintf(t->abort_why, sizeof(t->abort_why), "stopped by request");
			__atomic_store_n(&t->abort, true, __ATOMIC_RELEASE);
		}
		t->state = ST_TS_ABORTING;
		snprintf(t->message, sizeof(t->message), "Task is aborting");
		if (t->child > 0)
			kill(t->child, SIGKILL);
	}
	st_task_status_copy(t, &st);
	pthread_mutex_unlock(&s->lock);
	notify(s, &st);
	return 0;
}

/* VDSM's Task.rollback (task.py:1204-1211, with the "auto" recovery policy
 * every scheduled task has, taskManager.py:62): a task not done is refused
 * (TaskNotFinished); a done one moves finished -> racquiring, which only a
 * finished task may (task.py:_moveto), so a task already rolled back is
 * refused (TaskStateTransitionError).  vdsmd keeps no undo for a completed
 * task: a finished, successful task is answered 0 and left as it is. */
int st_task_revert(struct storage_state *s, const char *id, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_task *t = find(s, id, e);
	if (!t) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	enum st_task_state state = t->state;
	enum st_task_result result = t->result;
	pthread_mutex_unlock(&s->lock);
	if (state != ST_TS_FINISHED)
		return st_fail(e, RPC_E_TASK_NOT_DONE, "can't rollback task %s in state %s", id,
			       st_task_state_name(state));
	if (result != ST_TR_SUCCESS)
		return st_fail(e, RPC_E_TASK_MOVE, "task %s is already rolled back (%s)", id,
			       st_task_result_name(result));
	log_debug("storage: task %s finished, nothing to roll back", id);
	return 0;
}

int st_task_clear(struct storage_state *s, const char *id, struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	struct st_task *t = find(s, id, e);
	if (!t) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	if (t->state != ST_TS_FINISHED) {
		enum st_task_state state = t->state;  /* read under the lock */
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_TASK_STATE, "task %s is %s; only finished tasks can be cleared",
			       id, st_task_state_name(state));
	}
	map_del(&s->tasks, id);
	pthread_mutex_unlock(&s->lock);
	char *path = st_task_path(s, id);
	unlink(path);
	free(path);
	st_task_free(t);
	return 0;
}

int st_task_wait(struct storage_state *s, const char *id, unsigned timeout_ms,
		 struct st_task_status *out)
{
	struct timespec dl;
	st_deadline(&dl, timeout_ms);
	int rc = VD_ENOENT;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct st_task *t = map_get(&s->tasks, id);
		if (!t)
			break;
		if (t->state == ST_TS_FINISHED) {
			if (out)
				st_task_status_copy(t, out);
			rc = 0;
			break;
		}
		if (pthread_cond_timedwait(&s->task_cond, &s->lock, &dl) == ETIMEDOUT) {
			rc = VD_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- recovery ------------------------------------------------------------ */

static void parse_vols(struct st_task *t, const char *list)
{
	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		if (n == 36 && vd_is_uuid(p, 36)) {
			t->vols = xrealloc(t->vols, (t->nvols + 1) * sizeof(*t->vols));
			snprintf(t->vols[t->nvols++], 37, "%.36s", p);
		}
		p += n + (c ? 1 : 0);
	}
}

static void load_one(struct storage_state *s, const char *dir, const char *name)
{
	char *path = st_path(dir, name);
	struct st_kv kv;
	int rc = kv_read_file(&kv, path);
	const char *id = rc == 0 ? kv_get(&kv, "ID") : NULL;
	if (rc || !st_is_uuid(id) || strlen(name) != 36 + 5 || strncmp(name, id, 36) != 0) {
		/* Kept aside, not removed: it may be the only record of
		 * volumes left ILLEGAL. */
		char *bad = st_pathf("%s.bad", path);
		log_error("storage: unreadable task record %s renamed to %s", path, bad);
		rename(path, bad);
		free(bad);
		if (rc == 0)
			kv_free(&kv);
		free(path);
		return;
	}
	const struct st_task_op *op = st_task_op_of(s, (int)kv_get_int(&kv, "KIND", 0));
	if (!op)
		op = s->task_ops[0];   /* an unknown kind is read as kind 0's */
	struct st_task *t = st_task_alloc(op);
	snprintf(t->id, sizeof(t->id), "%.36s", id);
	snprintf(t->sd, sizeof(t->sd), "%.36s", kv_get(&kv, "SDUUID") ? kv_get(&kv, "SDUUID") : "");
	snprintf(t->img, sizeof(t->img), "%.36s", kv_get(&kv, "IMGUUID") ? kv_get(&kv, "IMGUUID") : "");
	snprintf(t->vol, sizeof(t->vol), "%.36s", kv_get(&kv, "VOLUUID") ? kv_get(&kv, "VOLUUID") : "");
	parse_vols(t, kv_get(&kv, "VOLUMES"));
	if (!t->nvols && st_is_uuid(t->vol))
		parse_vols(t, t->vol);
	t->postzero = kv_get_int(&kv, "POSTZERO", 0) == 1;
	t->discard = kv_get_int(&kv, "DISCARD", 0) == 1;
	if (op->load)
		op->load(t, &kv);
	t->ctime = (uint64_t)kv_get_int(&kv, "CTIME", 0);
	const char *state = kv_get(&kv, "STATE");
	if (state && strcmp(state, "finished") == 0) {
		t->state = ST_TS_FINISHED;
		t->result = result_parse(kv_get(&kv, "RESULT"));
		t->code = (int)kv_get_int(&kv, "CODE", rpc_err_code(RPC_E_GENERAL));
		snprintf(t->message, sizeof(t->message), "%s",
			 kv_get(&kv, "MESSAGE") ? kv_get(&kv, "MESSAGE") : "");
		t->progress = t->result == ST_TR_SUCCESS ? 100 : 0;
	} else {
		t->recovering = true;   /* decided by st_tasks_recover */
		s->tasks_recovering++;
	}
	map_put(&s->tasks, t->id, t);
	kv_free(&kv);
	free(path);
}

struct st_task *st_task_claim(struct storage_state *s, const char *sd, const char *vol)
{
	if (!s->tasks_recovering)
		return NULL;   /* after startup: nothing is claimed */
	for (struct st_map_ent *e = map_first(&s->tasks); e; e = map_next(&s->tasks, e)) {
		struct st_task *t = map_val(e);
		const char *on = t->op->claims ? t->op->claims(t) : t->sd;
		if (!t->recovering || strcmp(on, sd) != 0)
			continue;
		for (size_t i = 0; i < t->nvols; i++)
			if (strcmp(t->vols[i], vol) == 0)
				return t;
	}
	return NULL;
}

void st_tasks_recover(struct storage_state *s)
{
	for (struct st_map_ent *e = map_first(&s->tasks); e; e = map_next(&s->tasks, e)) {
		struct st_task *t = map_val(e);
		if (!t->recovering)
			continue;
		t->recovering = false;
		t->state = ST_TS_FINISHED;
		t->op->recover(s, t);
		t->progress = t->result == ST_TR_SUCCESS ? 100 : 0;
		s->tasks_aborted++;
		s->tasks_recovering--;
		int rc = st_task_persist(s, t);
		log_warn("storage: task %s (%s) was unfinished when vdsmd stopped: %s%s", t->id,
			 t->verb, t->message, rc < 0 ? " (record not updated)" : "");
	}
}

int st_tasks_load(struct storage_state *s)
{
	char *dir = st_path(s->root, "tasks");
	DIR *dh = opendir(dir);
	if (!dh) {
		free(dir);
		return VD_EIO;
	}
	struct dirent *de;
	while ((de = readdir(dh))) {
		size_t n = strlen(de->d_name);
		if (n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0) {
			char *p = st_path(dir, de->d_name);
			unlink(p);
			free(p);
		} else if (n > 5 && strcmp(de->d_name + n - 5, ".task") == 0) {
			load_one(s, dir, de->d_name);
		}
	}
	closedir(dh);
	free(dir);
	return 0;
}

const char *st_task_claims_none(const struct st_task *t)
{
	(void)t;
	return "";
}

void st_task_save_size(const struct st_task *t, struct st_kv *kv)
{
	kv_setf(kv, "SIZE", "%lld", (long long)t->size);
}

void st_task_load_size(struct st_task *t, const struct st_kv *kv)
{
	t->size = kv_get_int(kv, "SIZE", 0);
}
