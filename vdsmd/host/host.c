/* vdsmd/host/host.c - host backend init/fini (the rest: procfs.c parsers,
 * sample.c sampler thread and snapshots, caps.c capabilities, verbs.c
 * handlers).  Kept apart so tests can drive the backend without the daemon;
 * readiness goes through the hook the daemon hands down (d->report_ready). */
#include "host_int.h"

#include "../../common/log.h"

int host_init(struct vdsmd *d)
{
	struct host_opts o = {
		.root = NULL,
		.interval_ms = (d->cfg.host_sample_interval ? d->cfg.host_sample_interval : 15) * 1000u,
		.first_ms = 150,
		.start_thread = true,
	};
	d->host = host_state_new(d, &o);
	log_info("host: first sample taken; sampling every %u s", o.interval_ms / 1000);
	vdsmd_subsystem_ready(d, "host");
	return 0;
}

void host_fini(struct vdsmd *d)
{
	host_state_free(d->host);
	d->host = NULL;
}

void host_set_peers(struct vdsmd *d, const struct host_peers *p)
{
	if (!d || !d->host)
		return;
	atomic_store(&d->host->peers, p);
	if (d->host->caps)
		atomic_store(&d->host->caps->peers, p);
}
