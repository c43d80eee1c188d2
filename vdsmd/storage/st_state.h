/* vdsmd/storage/st_state.h - struct storage_state, the one state of the
 * storage backend (built by st_open, passed to every layer), and its
 * lifecycle: open, close, the monitor thread, the startup scan.
 *
 * Concurrency: one mutex (s->lock) guards the index and the task table.  It
 * is held only for memory work, never across disk I/O, so read verbs served
 * from the index on the loop thread never wait for storage.  A volume being
 * created or deleted is marked busy in the index: a second operation on the
 * same id fails at once instead of racing. */
#ifndef VD_VDSMD_STORAGE_ST_STATE_H
#define VD_VDSMD_STORAGE_ST_STATE_H

#include "st_model.h"
#include "st_task.h"

enum { ST_SPM_FREE, ST_SPM_CONTEND, ST_SPM_SPM };
struct st_job_info;
struct st_nbd;

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
	struct st_map jobs;        /* job id -> st_job (SDM.copy_data, SDM bitmap jobs) */
	void (*notify_job)(void *ctx, const struct st_job_info *info);
	/* NBD servers (st_nbd.c), under lock */
	char *run_dir;             /* sockets in <run_dir>/nbd/; NULL: /run/vdsmd */
	struct st_map nbd;         /* server_id -> st_nbd */
	struct st_nbd *nbd_dead;   /* exited on their own, not joined yet */
	/* task state change hook (events); called without s->lock held */
	void (*notify)(void *ctx, const struct st_task_status *st);
	void *notify_ctx;
#ifdef VD_TEST_HOOKS
	/* test builds only (make asan-unit / tsan) */
	unsigned prealloc_chunk_delay_us;
	bool prealloc_force_write;  /* skip fallocate, write zeros */
#endif
	const struct st_task_op *task_ops[ST_TASK_KINDS];   /* the registry */
	/* reconciliation report of the last st_open() */
	unsigned scan_removed, tasks_aborted;
	unsigned tasks_recovering;  /* records found unfinished, until recovered */
};


/* Load the registry, scan every domain, recover task records.  Returns NULL
 * with a reason in why on failure.  No threads are started. */
struct storage_state *st_open(const char *root, char *why, size_t whylen);
/* Stops threads (running tasks are aborted), frees everything. */
void st_close(struct storage_state *s);
int st_start_monitor(struct storage_state *s, unsigned interval_ms);
void st_stop_monitor(struct storage_state *s);
/* One monitoring pass over every domain (the thread calls this). */
void st_monitor_once(struct storage_state *s);

/* st_scan.c: reconcile one domain's directory into its index (called by
 * st_open; also used after a crash by tests). */
int st_scan_domain(struct storage_state *s, struct st_domain *d);

#endif
