/* vdsmd/storage/st_optable.c - the table of storage operations: every long
 * operation's descriptor, registered with the task engine when the state is
 * opened (before the task records are read).  A new operation is a file
 * st_op_<name>.c defining its `const struct st_task_op`, a kind in enum
 * st_task_kind, and one line here. */
#include "st_ops.h"

void st_ops_register(struct storage_state *s)
{
	static const struct st_task_op *const table[] = {
		&st_op_create,       /* st_op_create.c */
		&st_op_delete,       /* st_op_delete.c */
		&st_op_image_delete, /* st_op_delete.c */
		&st_op_spm_start,    /* st_op_spmstart.c */
		&st_op_extend,       /* st_op_extend.c */
		&st_op_image_copy,   /* st_imgcopy.c */
		&st_op_prepare_merge,   /* st_op_merge.c */
		&st_op_finalize_merge,  /* st_op_merge.c */
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		st_task_register(s, table[i]);
}
