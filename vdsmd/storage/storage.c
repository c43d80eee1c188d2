/* vdsmd/storage/storage.c - placeholder until the storage backend lands. */
#include "storage.h"

int storage_init(struct vdsmd *d)
{
	(void)d;
	return 0;
}

void storage_fini(struct vdsmd *d)
{
	(void)d;
}

const struct rpc_binding storage_bindings[] = {
	{ NULL, NULL },
};

void storage_write_domain_stats(struct vdsmd *d, struct vd_writer *w)
{
	(void)d;
	vw_begin_object(w);
	vw_end_object(w);
}
