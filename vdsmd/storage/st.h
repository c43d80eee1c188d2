/* vdsmd/storage/st.h - the whole storage core in one include, for the unit
 * tests and the benchmark (production files include the layer they need).
 *
 * Layers, lowest first (no file calls or includes one above it; make lint
 * checks, tests/lint-deps.py):
 *   st_file.h   file primitives: key=value files, atomic replace, safe opens
 *               beneath a domain, running qemu-img (st_meta.c, st_safe.c,
 *               st_volume.c's tools), struct st_err
 *   st_model.h  the on-disk model: the index, domains, volumes, the pool's
 *               domain map (st_index.c, st_domain.c, st_volume.c)
 *   st_task.h   the task engine (st_task.c): knows no operation
 *   st_state.h  struct storage_state and its lifecycle (st_open.c,
 *               st_scan.c, st_monitor.c)
 *   st_ops.h    the operations (st_op_*.c, st_imgcopy.c, st_pool*.c,
 *               st_spm.c, st_conn.c, st_adopt.c, st_jobs.c, st_image.c, ...)
 *   st_verbs.h  the JSON-RPC handlers (st_verbs_*.c), storage.c the glue
 *   st_crash.h  kill -9 at named steps (test builds)
 *
 * The core (everything but storage.c and st_verbs*.c) depends on nothing of
 * rpc/ but the enum rpc_err values, so unit tests drive it directly. */
#ifndef VD_VDSMD_STORAGE_ST_H
#define VD_VDSMD_STORAGE_ST_H

#include "st_crash.h"
#include "st_ops.h"

#endif
