/* vdsmd/pool.h - fixed-size worker pool with a bounded queue for blocking
 * work (storage I/O, libvirt calls).  Completions run on the loop thread
 * through ev_async.  Matches rpc_submit_fn so the engine can use it. */
#ifndef VD_VDSMD_POOL_H
#define VD_VDSMD_POOL_H

#include <ev.h>
#include "../common/vd.h"

struct vd_pool;

struct vd_pool *pool_new(struct ev_loop *loop, unsigned threads, unsigned queue_max);
/* Stops accepting work, finishes queued jobs, joins the threads, runs the
 * remaining completions. */
void pool_free(struct vd_pool *p);
/* Queue job(arg) on a worker, then done(arg) on the loop thread (done may be
 * NULL).  Returns 0 or VD_EBUSY when the queue is full.  Call it on the loop
 * thread: while jobs are outstanding the pool holds a reference on the loop
 * (an idle pool does not keep ev_run() from returning). */
int pool_submit(void *pool, void (*job)(void *arg), void (*done)(void *arg), void *arg);

struct pool_stats { uint64_t submitted, rejected, completed; unsigned queued, busy; };
void pool_stats(const struct vd_pool *p, struct pool_stats *out);
/* Number of worker threads (additive). */
unsigned pool_threads(const struct vd_pool *p);

#endif
