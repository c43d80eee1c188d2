/* vdsmd/host/host.c - placeholder until the host backend lands. */
#include "host.h"

int host_init(struct vdsmd *d)
{
	(void)d;
	return 0;
}

void host_fini(struct vdsmd *d)
{
	(void)d;
}

const struct rpc_binding host_bindings[] = {
	{ NULL, NULL },
};
