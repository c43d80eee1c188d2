/* vdsmd/storage/st_crash.h - kill -9 at a named step (test builds only).
 *
 * Every multi-step storage change calls st_crash_point("<step>") between
 * its steps.  In a -DVD_TEST_HOOKS build (make asan-unit / tsan / memcheck,
 * never build/vdsmd) the call raises SIGKILL when the environment variable
 * VDSMD_TEST_CRASH_AT names that step: the process dies as under kill -9,
 * with no cleanup, and the next start must find the change completed or
 * rolled back (tests/unit/test_storage_crash.c, test_storage_crash_merge.c
 * and test_storage_crash_vol.c run every step).  In other builds the call
 * compiles to nothing.
 *
 * ST_CRASH_STEPS is the one list of step names: a name not in it aborts the
 * test build at the call (so the list and the call sites cannot drift), and
 * the test iterates it.  Each step carries the operations (ST_CO_*) the test
 * runs to reach it; a step shared by several code paths (queue_delete serves
 * Volume.delete, Image.delete and Image.deleteVolumes) lists them all. */
#ifndef VD_VDSMD_STORAGE_ST_CRASH_H
#define VD_VDSMD_STORAGE_ST_CRASH_H

#ifdef VD_TEST_HOOKS
#include <stddef.h>

/* The operations the crash test drives (bit mask). */
enum st_crash_op {
	ST_CO_CREATE_RAW = 1 << 0,   /* Volume.create RAW preallocated, new image */
	ST_CO_CREATE_SNAP = 1 << 1,  /* Volume.create COW snapshot of a RAW base */
	ST_CO_VOL_DELETE = 1 << 2,   /* Volume.delete of a leaf */
	ST_CO_IMG_DELETE = 1 << 3,   /* Image.delete of a two-volume chain */
	ST_CO_VOLS_DELETE = 1 << 4,  /* Image.deleteVolumes of a two-volume chain */
	ST_CO_COPY_DATA = 1 << 5,    /* SDM.copy_data into an existing volume */
	ST_CO_CLONE = 1 << 6,        /* Image.cloneStructure to another domain */
	ST_CO_SYNC = 1 << 7,         /* Image.syncData ALL into a cloned structure */
	ST_CO_COPY = 1 << 8,         /* Image.move op=copy */
	ST_CO_MOVE = 1 << 9,         /* Image.move op=move */
	ST_CO_POOL_CREATE = 1 << 10, /* StoragePool.create over two domains */
	ST_CO_EXTEND_RAW = 1 << 11,  /* Volume.extendSize of a RAW volume */
	ST_CO_EXTEND_COW = 1 << 12,  /* Volume.extendSize of a qcow2 leaf */
	ST_CO_PREP_MERGE_RAW = 1 << 13,  /* prepareMerge, RAW base smaller than top */
	ST_CO_PREP_MERGE_COW = 1 << 14,  /* prepareMerge, COW base smaller than top */
	ST_CO_MERGE_JOB = 1 << 15,       /* SDM.merge of an internal volume */
	ST_CO_FIN_MERGE_INT = 1 << 16,   /* finalizeMerge of an internal volume */
	ST_CO_FIN_MERGE_LEAF = 1 << 17,  /* finalizeMerge of the leaf */
	ST_CO_UPDATE_VOL = 1 << 18,  /* SDM.update_volume of a leaf's metadata */
	ST_CO_AMEND = 1 << 19,       /* SDM.amend_volume of a qcow2 leaf to compat 0.10 */
	ST_CO_AMEND_UNREPAIRED = 1 << 20, /* the same, qemu-img killed, its repair failing */
	ST_CO_SPARSIFY = 1 << 21,    /* SDM.sparsify_volume of a qcow2 leaf over a backing file */
};
#define ST_CO_LAST ST_CO_SPARSIFY
#define ST_CO_PREP_MERGE (ST_CO_PREP_MERGE_RAW | ST_CO_PREP_MERGE_COW)
#define ST_CO_FIN_MERGE (ST_CO_FIN_MERGE_INT | ST_CO_FIN_MERGE_LEAF)
#define ST_CO_CREATE (ST_CO_CREATE_RAW | ST_CO_CREATE_SNAP)
#define ST_CO_DELETE (ST_CO_VOL_DELETE | ST_CO_IMG_DELETE | ST_CO_VOLS_DELETE)
#define ST_CO_STRUCT (ST_CO_CLONE | ST_CO_COPY | ST_CO_MOVE)
#define ST_CO_DATA (ST_CO_SYNC | ST_CO_COPY | ST_CO_MOVE)
#define ST_CO_IMGCOPY (ST_CO_CLONE | ST_CO_SYNC | ST_CO_COPY | ST_CO_MOVE)

/* X(name, ops) - in the order the steps happen. */
#define ST_CRASH_STEPS(X) \
	/* Volume.create (st_op_create.c, st_volume.c) */ \
	X("create.record", ST_CO_CREATE)            /* task record written */ \
	X("create.image-dir", ST_CO_CREATE)         /* images/<img> exists */ \
	X("create.meta-illegal", ST_CO_CREATE)      /* ILLEGAL .meta written, task not queued */ \
	X("create.data-file", ST_CO_CREATE)         /* empty data file created */ \
	X("create.prealloc-chunk", ST_CO_CREATE_RAW) /* first chunk allocated */ \
	X("create.cow-written", ST_CO_CREATE_SNAP)  /* qemu-img create done */ \
	X("create.data-synced", ST_CO_CREATE)       /* data complete and fsynced */ \
	X("create.lease", ST_CO_CREATE)             /* <vol>.lease made (SD1 has volume leases) */ \
	X("create.meta-legal", ST_CO_CREATE)        /* LEGAL .meta written, task not finished */ \
	/* Volume.delete / Image.delete / Image.deleteVolumes (st_op_delete.c) */ \
	X("delete.record", ST_CO_DELETE)            /* task record written */ \
	X("delete.marked-one", ST_CO_DELETE)        /* first volume ILLEGAL on disk */ \
	X("delete.marked-all", ST_CO_DELETE)        /* all ILLEGAL, task not queued */ \
	X("delete.data-unlinked", ST_CO_DELETE)     /* first volume's data file removed */ \
	X("delete.removed-one", ST_CO_DELETE)       /* first volume's .meta removed */ \
	X("delete.removed-all", ST_CO_DELETE)       /* all removed, task not finished */ \
	/* SDM.copy_data (st_jobs.c) */ \
	X("copy_data.dst-illegal", ST_CO_COPY_DATA) /* destination ILLEGAL on disk */ \
	X("copy_data.converting", ST_CO_COPY_DATA)  /* qemu-img convert running */ \
	X("copy_data.converted", ST_CO_COPY_DATA)   /* converted + fsynced, still ILLEGAL */ \
	/* Image.cloneStructure / syncData / move (st_imgcopy.c) */ \
	X("imgcopy.record", ST_CO_IMGCOPY)          /* task record written */ \
	X("imgcopy.image-dir", ST_CO_STRUCT)        /* images/<img> made on the destination */ \
	X("imgcopy.clone-data", ST_CO_STRUCT)       /* first destination data file, no .meta */ \
	X("imgcopy.clone-meta", ST_CO_STRUCT)       /* first destination volume complete */ \
	X("imgcopy.cloned", ST_CO_STRUCT)           /* whole structure on the destination */ \
	X("imgcopy.sync-illegal", ST_CO_COPY | ST_CO_MOVE) /* destination layer ILLEGAL for writing */ \
	X("imgcopy.converting", ST_CO_DATA)         /* qemu-img convert running */ \
	X("imgcopy.converted", ST_CO_DATA)          /* layer written + fsynced, not recorded */ \
	X("imgcopy.synced-one", ST_CO_DATA)         /* first layer LEGAL (syncData: SYNCED=1) */ \
	X("imgcopy.verified", ST_CO_MOVE)           /* qemu-img compare equal, source intact */ \
	X("imgcopy.src-illegal", ST_CO_MOVE)        /* first source volume ILLEGAL */ \
	X("imgcopy.src-data-unlinked", ST_CO_MOVE)  /* its data file removed */ \
	X("imgcopy.src-removed-one", ST_CO_MOVE)    /* first source volume gone */ \
	X("imgcopy.done", ST_CO_IMGCOPY)            /* all done, task not finished */ \
	/* StoragePool.create (st_pool.c, st_poolrec.c) */ \
	X("pool.intent", ST_CO_POOL_CREATE)         /* intent record written */ \
	X("pool.domain-one", ST_CO_POOL_CREATE)     /* first domain's metadata names the pool */ \
	X("pool.domains", ST_CO_POOL_CREATE)        /* every domain's metadata written */ \
	X("pool.meta", ST_CO_POOL_CREATE)           /* pool.meta written, intent not cleared */ \
	/* Volume.extendSize (st_op_extend.c) */ \
	X("extend.grown", ST_CO_EXTEND_RAW | ST_CO_EXTEND_COW) /* data grown + synced */ \
	X("extend.meta", ST_CO_EXTEND_RAW | ST_CO_EXTEND_COW)  /* new capacity written */ \
	/* cold merge (st_op_merge.c, st_jobs_merge.c) */ \
	X("prepare_merge.record", ST_CO_PREP_MERGE)      /* task record written */ \
	X("prepare_merge.base-grown", ST_CO_PREP_MERGE_RAW) /* RAW base grown + synced */ \
	X("prepare_merge.base-capacity", ST_CO_PREP_MERGE) /* base capacity written */ \
	X("merge.committing", ST_CO_MERGE_JOB)           /* qemu-img commit running */ \
	X("merge.committed", ST_CO_MERGE_JOB)            /* committed + synced, same generation */ \
	X("finalize_merge.record", ST_CO_FIN_MERGE)      /* task record written */ \
	X("finalize_merge.top-illegal", ST_CO_FIN_MERGE) /* top ILLEGAL on disk */ \
	X("finalize_merge.child-rebased", ST_CO_FIN_MERGE_INT) /* child's qcow2 backing is base */ \
	X("finalize_merge.child-parent", ST_CO_FIN_MERGE_INT)  /* child's metadata names base */ \
	/* SDM.update_volume (st_jobs_update.c), SDM.amend_volume (st_jobs_amend.c) */ \
	X("update_volume.checked", ST_CO_UPDATE_VOL) /* attributes checked, nothing written */ \
	X("update_volume.written", ST_CO_UPDATE_VOL) /* new .meta on disk, job not ended */ \
	X("amend.amending", ST_CO_AMEND)            /* qemu-img amend running */ \
	X("amend.amended", ST_CO_AMEND)             /* amended, generation not bumped */ \
	X("amend.meta", ST_CO_AMEND)                /* generation bumped on disk */ \
	X("amend.marked", ST_CO_AMEND_UNREPAIRED)   /* repair failed, MARKED=1, still LEGAL */ \
	/* SDM.sparsify_volume (st_jobs_sparsify.c) */ \
	X("sparsify.serving", ST_CO_SPARSIFY)       /* qemu-nbd started, nothing zeroed */ \
	X("sparsify.zeroed", ST_CO_SPARSIFY)        /* a first zero run unmapped, not flushed */ \
	X("sparsify.synced", ST_CO_SPARSIFY)        /* all zeroed and synced, generation old */ \
	X("sparsify.meta", ST_CO_SPARSIFY)          /* generation bumped on disk */

struct st_crash_step {
	const char *name;
	unsigned ops;   /* ST_CO_* */
};
extern const struct st_crash_step st_crash_steps[];
extern const size_t st_crash_nsteps;

/* SIGKILL this process when $VDSMD_TEST_CRASH_AT is step; abort() when
 * step is not in ST_CRASH_STEPS. */
void st_crash_point(const char *step);
#define ST_CRASH(step) st_crash_point(step)
#else
#define ST_CRASH(step) ((void)0)
#endif

#endif
