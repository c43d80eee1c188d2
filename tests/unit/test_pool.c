/* tests/unit/test_pool.c - the worker pool: jobs on workers, completions on
 * the loop thread through ev_async on a real libev loop, bounded queue
 * (VD_EBUSY), FIFO completions, clean shutdown with work queued. */
#include <check.h>
#include <ev.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../vdsmd/pool.h"
#include "check_main.h"

struct shared {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool release;
	int running;
	int jobs_run;
	int done_run;
	bool done_on_loop_thread;
	pthread_t loop_thread;
	int order[64];
	int norder;
};

struct item {
	struct shared *sh;
	int idx;
	bool block;
	pthread_t ran_on;
};

static void sh_init(struct shared *sh)
{
	memset(sh, 0, sizeof(*sh));
	pthread_mutex_init(&sh->mu, NULL);
	pthread_cond_init(&sh->cv, NULL);
	sh->done_on_loop_thread = true;
	sh->loop_thread = pthread_self();
}

static void sh_fini(struct shared *sh)
{
	pthread_mutex_destroy(&sh->mu);
	pthread_cond_destroy(&sh->cv);
}

static void job(void *arg)
{
	struct item *it = arg;
	struct shared *sh = it->sh;
	it->ran_on = pthread_self();
	pthread_mutex_lock(&sh->mu);
	sh->running++;
	pthread_cond_broadcast(&sh->cv);
	while (it->block && !sh->release)
		pthread_cond_wait(&sh->cv, &sh->mu);
	sh->running--;
	sh->jobs_run++;
	pthread_mutex_unlock(&sh->mu);
}

static void done(void *arg)
{
	struct item *it = arg;
	struct shared *sh = it->sh;
	if (!pthread_equal(pthread_self(), sh->loop_thread) ||
	    pthread_equal(it->ran_on, sh->loop_thread))
		sh->done_on_loop_thread = false;
	if (sh->norder < 64)
		sh->order[sh->norder++] = it->idx;
	sh->done_run++;
}

static void wait_running(struct shared *sh, int n)
{
	pthread_mutex_lock(&sh->mu);
	while (sh->running < n)
		pthread_cond_wait(&sh->cv, &sh->mu);
	pthread_mutex_unlock(&sh->mu);
}

static void release(struct shared *sh)
{
	pthread_mutex_lock(&sh->mu);
	sh->release = true;
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
}

START_TEST(completions_on_loop_thread)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct vd_pool *p = pool_new(loop, 4, 80);
	ck_assert_uint_eq(pool_threads(p), 4);
	struct shared sh;
	sh_init(&sh);
	struct item items[50];
	for (int i = 0; i < 50; i++) {
		items[i] = (struct item){ &sh, i, false, pthread_self() };
		ck_assert_int_eq(pool_submit(p, job, done, &items[i]), 0);
	}
	/* the pool keeps the loop alive while work is outstanding, and only
	 * then: ev_run returns once every completion ran */
	ev_run(loop, 0);
	ck_assert_int_eq(sh.jobs_run, 50);
	ck_assert_int_eq(sh.done_run, 50);
	ck_assert(sh.done_on_loop_thread);
	struct pool_stats st;
	pool_stats(p, &st);
	ck_assert_int_eq(st.submitted, 50);
	ck_assert_int_eq(st.completed, 50);
	ck_assert_int_eq(st.rejected, 0);
	ck_assert_int_eq(st.queued, 0);
	ck_assert_int_eq(st.busy, 0);
	/* idle again: ev_run returns at once */
	ev_run(loop, 0);
	pool_free(p);
	ev_loop_destroy(loop);
	sh_fini(&sh);
}
END_TEST

START_TEST(bounded_queue)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct vd_pool *p = pool_new(loop, 1, 2);
	struct shared sh;
	sh_init(&sh);
	struct item items[4];
	for (int i = 0; i < 4; i++)
		items[i] = (struct item){ &sh, i, true, pthread_self() };
	ck_assert_int_eq(pool_submit(p, job, done, &items[0]), 0);
	wait_running(&sh, 1);  /* the worker holds job 0; the queue is empty */
	ck_assert_int_eq(pool_submit(p, job, done, &items[1]), 0);
	ck_assert_int_eq(pool_submit(p, job, done, &items[2]), 0);
	ck_assert_int_eq(pool_submit(p, job, done, &items[3]), VD_EBUSY);
	struct pool_stats st;
	pool_stats(p, &st);
	ck_assert_int_eq(st.queued, 2);
	ck_assert_int_eq(st.busy, 1);
	ck_assert_int_eq(st.rejected, 1);
	release(&sh);
	ev_run(loop, 0);
	ck_assert_int_eq(sh.done_run, 3);
	/* FIFO with one worker */
	ck_assert_int_eq(sh.order[0], 0);
	ck_assert_int_eq(sh.order[1], 1);
	ck_assert_int_eq(sh.order[2], 2);
	/* room again */
	ck_assert_int_eq(pool_submit(p, job, NULL, &items[3]), 0);
	ev_run(loop, 0);
	ck_assert_int_eq(sh.jobs_run, 4);
	pool_stats(p, &st);
	ck_assert_int_eq(st.completed, 4);
	pool_free(p);
	ev_loop_destroy(loop);
	sh_fini(&sh);
}
END_TEST

START_TEST(parallel_workers)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct vd_pool *p = pool_new(loop, 3, 10);
	struct shared sh;
	sh_init(&sh);
	struct item items[3];
	for (int i = 0; i < 3; i++) {
		items[i] = (struct item){ &sh, i, true, pthread_self() };
		ck_assert_int_eq(pool_submit(p, job, done, &items[i]), 0);
	}
	wait_running(&sh, 3);  /* all three run at the same time */
	struct pool_stats st;
	pool_stats(p, &st);
	ck_assert_int_eq(st.busy, 3);
	release(&sh);
	ev_run(loop, 0);
	ck_assert_int_eq(sh.done_run, 3);
	pool_free(p);
	ev_loop_destroy(loop);
	sh_fini(&sh);
}
END_TEST

struct chain {
	struct vd_pool *p;
	int left;
	int done;
};

static void chain_job(void *arg)
{
	(void)arg;
}

static void chain_done(void *arg)
{
	struct chain *c = arg;
	c->done++;
	if (--c->left > 0)
		ck_assert_int_eq(pool_submit(c->p, chain_job, chain_done, c), 0);
}

START_TEST(submit_from_done)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct vd_pool *p = pool_new(loop, 2, 4);
	struct chain c = { p, 10, 0 };
	ck_assert_int_eq(pool_submit(p, chain_job, chain_done, &c), 0);
	ev_run(loop, 0);
	ck_assert_int_eq(c.done, 10);
	pool_free(p);
	ev_loop_destroy(loop);
}
END_TEST

static void slow_job(void *arg)
{
	struct timespec ts = { 0, 2 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	job(arg);
}

START_TEST(free_finishes_queued_work)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct vd_pool *p = pool_new(loop, 2, 20);
	struct shared sh;
	sh_init(&sh);
	struct item items[20];
	for (int i = 0; i < 20; i++) {
		items[i] = (struct item){ &sh, i, false, pthread_self() };
		ck_assert_int_eq(pool_submit(p, slow_job, done, &items[i]), 0);
	}
	/* no ev_run: pool_free runs the jobs and their completions */
	pool_free(p);
	ck_assert_int_eq(sh.jobs_run, 20);
	ck_assert_int_eq(sh.done_run, 20);
	ck_assert(sh.done_on_loop_thread);
	/* the loop is usable and has nothing left */
	ev_run(loop, 0);
	ev_loop_destroy(loop);
	sh_fini(&sh);
}
END_TEST

START_TEST(defaults)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct vd_pool *p = pool_new(loop, 0, 0);
	ck_assert_uint_eq(pool_threads(p), 4);
	pool_free(p);
	ev_loop_destroy(loop);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");
	tcase_add_test(tc, completions_on_loop_thread);
	tcase_add_test(tc, bounded_queue);
	tcase_add_test(tc, parallel_workers);
	tcase_add_test(tc, submit_from_done);
	tcase_add_test(tc, free_finishes_queued_work);
	tcase_add_test(tc, defaults);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
