/* vdsmd/storage/st_verbs_task.c - Task.* and the Host task listings
 * (Host.getAllTasksStatuses / getAllTasksInfo): memory only. */
#include "st_verbs.h"

#include <string.h>

#define ARG(n) rpc_arg_str(c, n, NULL)

static void write_status(struct vd_writer *w, const struct st_task_status *st)
{
	vw_begin_object(w);
	vw_kstr(w, "taskID", st->id);
	vw_kstr(w, "taskState", st_task_state_name(st->state));
	vw_kstr(w, "taskResult", st_task_result_name(st->result));
	vw_kint(w, "code", st->code);
	vw_kstr(w, "message", st->message);
	vw_kint(w, "progress", st->progress);
	vw_end_object(w);
}

int vh_task_get_status(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	struct st_task_status st;
	if (st_task_get(s, rpc_arg_str(c, "taskID", NULL), &st, &e) < 0)
		return verb_fail(c, &e);
	write_status(c->w, &st);
	return 0;
}

int vh_task_clear(struct rpc_call *c)
{
	return verb_by_id(c, "taskID", st_task_clear);
}

int vh_task_stop(struct rpc_call *c)
{
	return verb_by_id(c, "taskID", st_task_stop);
}

int vh_host_get_all_tasks_statuses(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	vw_begin_object(c->w);
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->tasks); it; it = map_next(&s->tasks, it)) {
		struct st_task_status st;
		st_task_status_copy(map_val(it), &st);
		vw_keyz(c->w, st.id);
		write_status(c->w, &st);
	}
	pthread_mutex_unlock(&s->lock);
	vw_end_object(c->w);
	return 0;
}

int vh_host_get_all_tasks_info(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	vw_begin_object(c->w);
	pthread_mutex_lock(&s->lock);
	for (struct st_map_ent *it = map_first(&s->tasks); it; it = map_next(&s->tasks, it)) {
		const struct st_task *t = map_val(it);
		vw_keyz(c->w, t->id);
		vw_begin_object(c->w);
		vw_kstr(c->w, "verb", t->verb);
		vw_kstr(c->w, "id", t->id);
		vw_end_object(c->w);
	}
	pthread_mutex_unlock(&s->lock);
	vw_end_object(c->w);
	return 0;
}

int vh_task_get_info(struct rpc_call *c)
{
	struct storage_state *s = verb_state(c);
	if (!s)
		return -1;
	struct st_err e = { 0 };
	struct st_task_status st;
	if (st_task_get(s, ARG("taskID"), &st, &e) < 0)
		return verb_fail(c, &e);
	vw_begin_object(c->w);
	vw_kstr(c->w, "id", st.id);
	vw_kstr(c->w, "verb", st.verb);
	vw_end_object(c->w);
	return 0;
}

/* VDSM's revertTask (taskManager.py:143-148 -> task.py:1204-1211). */
int vh_task_revert(struct rpc_call *c)
{
	return verb_by_id(c, "taskID", st_task_revert);
}
