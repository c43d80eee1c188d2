/* vdsmd/storage/st_op_spmstart.c - StoragePool.spmStart as a task (kind
 * ST_TK_SPM_START, no crash steps: it changes nothing but the lease, and
 * the SPM role does not survive a restart). */
#include "st_ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void run_start(struct storage_state *s, struct st_task *t)
{
	char err[256] = "";
	struct st_task_io tio;
	st_task_io_init(&tio, s, t);
	int rc = st_spm_acquire(s, &tio.io, err, sizeof(err));
	if (rc == 0)
		st_task_finish(s, t, ST_TR_SUCCESS, 0, "1 jobs completed successfully");
	else
		st_task_finish(s, t, ST_TR_CLEAN_SUCCESS,
			       rc == VD_ECANCELED ? rpc_err_code(RPC_E_TASK_ABORTED)
						: rpc_err_code(RPC_E_SPM_ACQUIRE), err);
}

int st_spm_start(struct storage_state *s, const char *sp, char task_id[37], struct st_err *e)
{
	pthread_mutex_lock(&s->lock);
	if (!(s->pool_uuid[0] && sp && strcmp(s->pool_uuid, sp) == 0 && s->pool_connected)) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_NO_POOL, "%s", sp ? sp : "");
	}
	if (!st_task_queue_has_room(s)) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_NO_RESOURCES, "too many storage tasks queued");
	}
	int host = s->pool_host_id;
	pthread_mutex_unlock(&s->lock);
	struct st_task *t = st_task_alloc(&st_op_spm_start);
	t->host_id = host;
	int rc = st_task_persist(s, t);
	if (rc < 0) {
		st_task_free(t);
		return st_fail_rc(e, RPC_E_GENERAL, rc, "cannot record the task");
	}
	snprintf(task_id, 37, "%.36s", t->id);
	st_task_submit(s, t);
	return 0;
}

/* The role does not survive a restart: the task is reported aborted. */
static void recover_start(struct storage_state *s, struct st_task *t)
{
	(void)s;
	st_op_recovered(t, false);
}

const struct st_task_op st_op_spm_start = {
	.kind = ST_TK_SPM_START,
	.verb = "spmStart",
	.run = run_start,
	.recover = recover_start,
};
