/* vdsmd/storage/st_imgcopy.h - what the two files of the image copy task
 * share: st_imgcopy.c (the verb, the record, the st_task_op) calls into
 * st_imgcopy_run.c (the task), never the other way. */
#ifndef VD_VDSMD_STORAGE_ST_IMGCOPY_H
#define VD_VDSMD_STORAGE_ST_IMGCOPY_H

#include "st_ops.h"

/* The image's volumes base first (parents before children); NULL with e
 * filled when it is not a chain we can copy.  Caller holds the lock. */
struct st_volume **st_imgcopy_chain(struct st_domain *d, const char *img, size_t *np,
				    struct st_err *e);

/* The task's st_task_op run and recover. */
void st_imgcopy_run(struct storage_state *s, struct st_task *t);
void st_imgcopy_recover(struct storage_state *s, struct st_task *t);

#endif
