/* vdsmd/vdsmd.h - the daemon's one context, built by main() and passed down.
 * No other globals.  Each subsystem keeps its state behind an opaque pointer
 * and exposes init/fini plus the handler table it binds into the engine. */
#ifndef VD_VDSMD_VDSMD_H
#define VD_VDSMD_VDSMD_H

#include <ev.h>
#include "config.h"
#include "../codecs/codec.h"
#include "../common/log.h"

struct rpc_engine;
struct event_bus;
struct vd_pool;
struct vd_server;
struct host_state;
struct virt_state;
struct storage_state;
struct net_state;
struct host_peers;
struct vd_broker;

/* The memory budget the main port's connections (guard.c, loop thread) and
 * the image server's transfer buffers (vdsmd/image, its connection threads)
 * share.  Relaxed atomics: each side reads the other's figure and checks
 * its own growth against budget - the other's use. */
struct vd_mem_share {
	size_t budget;     /* bytes; guard_start sets it (0: not started, no limit) */
	size_t loop;       /* what the main port's connections are charged now */
	size_t image;      /* what image transfers buffer now */
};

struct vdsmd {
	struct vd_config cfg;
	struct vd_log log;             /* the process's log sink (log_open in main) */
	struct ev_loop *loop;
	const struct vd_codec *codec;  /* JSON codec chosen at startup */
	struct vd_limits limits;
	struct rpc_engine *rpc;
	struct event_bus *bus;
	struct vd_pool *pool;
	struct vd_server *srv;         /* listener, connections, STOMP broker, HTTP */
	struct host_state *host;       /* vdsmd/host */
	struct virt_state *virt;       /* vdsmd/virt */
	struct storage_state *storage; /* vdsmd/storage */
	uint64_t start_ms;             /* vd_now_ms() at startup */
	unsigned ready_mask;           /* subsystems that reported ready (atomic ops) */
	/* how a backend reports its first sample: handed down by daemon_init
	 * (daemon_subsystem_ready); NULL in a unit test that builds no daemon */
	void (*report_ready)(struct vdsmd *d, const char *which);
	struct vd_broker *broker;      /* broker mode (vdsmd/broker.h), NULL when off */
	struct net_state *net;         /* vdsmd/net */
	struct image_state *image;     /* vdsmd/image (tickets, image server) */
	struct vd_mem_share mem;       /* memory_budget across threads (above) */
	/* what host/ reports of (and hands to) net/, virt/ and storage/,
	 * given to it by the daemon (host_set_peers) */
	struct host_peers *host_peers;
};

/* Called by subsystems when their first sample exists: through the hook the
 * daemon handed down, so no backend calls up into daemon.c. */
static inline void vdsmd_subsystem_ready(struct vdsmd *d, const char *which)
{
	if (d->report_ready)
		d->report_ready(d, which);
}

/* The codec for a request's content-type (negotiate.c): none or JSON → the
 * startup codec (or a JSON one when the startup codec is not JSON), msgpack
 * → msgpack when built in; NULL when unsupported. */
const struct vd_codec *daemon_codec_for(const struct vdsmd *d, const char *ct, size_t ctlen);

#endif
