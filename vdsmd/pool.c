/* vdsmd/pool.c - fixed-size worker pool with a bounded queue.
 *
 * Jobs wait in a FIFO (at most queue_max waiting; running jobs do not count)
 * guarded by one mutex.  A worker runs job(arg), appends the finished node to
 * the completion list and wakes the loop with ev_async_send(); the loop
 * thread runs done(arg) in completion order.
 *
 * pool_submit() is called on the loop thread.  While jobs are outstanding the
 * pool holds a reference on the loop (ev_ref), so ev_run() does not return
 * with work in flight; an idle pool does not keep the loop alive. */
#include "pool.h"
#include "../common/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct pool_node {
	struct pool_node *next;
	void (*job)(void *arg);
	void (*done)(void *arg);
	void *arg;
};

struct vd_pool {
	struct ev_loop *loop;
	ev_async async;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t *threads;
	unsigned nthreads;
	unsigned queue_max;
	/* waiting jobs */
	struct pool_node *head, *tail;
	unsigned queued;
	unsigned busy;
	/* finished jobs, waiting for the loop thread */
	struct pool_node *done_head, *done_tail;
	bool stopping;
	/* loop thread only */
	unsigned outstanding;   /* submitted, done not yet run */
	bool loop_ref;
	/* stats (under mu) */
	uint64_t submitted, rejected, completed;
};

static void *worker_main(void *arg)
{
	struct vd_pool *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->cv, &p->mu);
		if (!p->head)
			break;  /* stopping and nothing left */
		struct pool_node *n = p->head;
		p->head = n->next;
		if (!p->head)
			p->tail = NULL;
		p->queued--;
		p->busy++;
		pthread_mutex_unlock(&p->mu);

		n->job(n->arg);

		pthread_mutex_lock(&p->mu);
		p->busy--;
		n->next = NULL;
		if (p->done_tail)
			p->done_tail->next = n;
		else
			p->done_head = n;
		p->done_tail = n;
		pthread_mutex_unlock(&p->mu);
		ev_async_send(p->loop, &p->async);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Loop thread: run the done callbacks of every finished job. */
static void run_completions(struct vd_pool *p)
{
	pthread_mutex_lock(&p->mu);
	struct pool_node *n = p->done_head;
	p->done_head = p->done_tail = NULL;
	pthread_mutex_unlock(&p->mu);
	unsigned count = 0;
	while (n) {
		struct pool_node *next = n->next;
		if (n->done)
			n->done(n->arg);
		free(n);
		n = next;
		count++;
	}
	if (!count)
		return;
	pthread_mutex_lock(&p->mu);
	p->completed += count;
	pthread_mutex_unlock(&p->mu);
	p->outstanding -= count;
	if (p->outstanding == 0 && p->loop_ref) {
		ev_unref(p->loop);
		p->loop_ref = false;
	}
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	run_completions(w->data);
}

struct vd_pool *pool_new(struct ev_loop *loop, unsigned threads, unsigned queue_max)
{
	struct vd_pool *p = xcalloc(1, sizeof(*p));
	p->loop = loop;
	p->nthreads = threads ? threads : 4;
	p->queue_max = queue_max ? queue_max : 80;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	ev_async_init(&p->async, async_cb);
	p->async.data = p;
	ev_async_start(loop, &p->async);
	ev_unref(loop);  /* an idle pool does not keep the loop running */
	p->threads = xcalloc(p->nthreads, sizeof(*p->threads));
	for (unsigned i = 0; i < p->nthreads; i++) {
		int rc = pthread_create(&p->threads[i], NULL, worker_main, p);
		if (rc != 0) {
			log_error("pool: cannot start worker %u: %s", i, strerror(rc));
			abort();
		}
	}
	return p;
}

int pool_submit(void *pool, void (*job)(void *arg), void (*done)(void *arg), void *arg)
{
	struct vd_pool *p = pool;
	pthread_mutex_lock(&p->mu);
	if (p->stopping || p->queued >= p->queue_max) {
		p->rejected++;
		pthread_mutex_unlock(&p->mu);
		return VD_EBUSY;
	}
	struct pool_node *n = xmalloc(sizeof(*n));
	n->next = NULL;
	n->job = job;
	n->done = done;
	n->arg = arg;
	if (p->tail)
		p->tail->next = n;
	else
		p->head = n;
	p->tail = n;
	p->queued++;
	p->submitted++;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (p->outstanding++ == 0 && !p->loop_ref) {
		ev_ref(p->loop);
		p->loop_ref = true;
	}
	return 0;
}

void pool_free(struct vd_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	run_completions(p);
	if (p->loop_ref) {
		ev_unref(p->loop);
		p->loop_ref = false;
	}
	ev_ref(p->loop);  /* balance the ev_unref of pool_new before stopping */
	ev_async_stop(p->loop, &p->async);
	free(p->threads);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

void pool_stats(const struct vd_pool *p, struct pool_stats *out)
{
	struct vd_pool *mp = (struct vd_pool *)p;
	pthread_mutex_lock(&mp->mu);
	out->submitted = p->submitted;
	out->rejected = p->rejected;
	out->completed = p->completed;
	out->queued = p->queued;
	out->busy = p->busy;
	pthread_mutex_unlock(&mp->mu);
}

unsigned pool_threads(const struct vd_pool *p)
{
	return p->nthreads;
}
