/* vdsmd/net/net_priv.h - the backend's state shared by net.c (state,
 * files, restore, monitor) and verbs.c (handlers). */
#ifndef VD_VDSMD_NET_PRIV_H
#define VD_VDSMD_NET_PRIV_H

#include <limits.h>
#include <pthread.h>
#include "net.h"
#include "net_int.h"

struct net_state {
	struct vdsmd *d;
	pthread_mutex_t setup_lock;   /* one setupNetworks / setSafe at a time */
	pthread_mutex_t lock;         /* running, safe, confirm_ms, stopping */
	pthread_cond_t cond;          /* confirm_ms or stopping changed */
	struct net_conf *running;     /* what the kernel has (heap: ~130 KiB) */
	struct net_conf *safe;        /* the last setSafeNetworkConfig */
	uint64_t confirm_ms;          /* last Host.confirmConnectivity (vd_now_ms) */
	bool stopping;
	/* netConfigDirty, as VDSM's clientIF._netConfigDirty: false at startup,
	 * true from the start of every setupNetworks (also one that fails or is
	 * rolled back) until a setSafeNetworkConfig or a commitOnSuccess one */
	bool dirty;
	char dir[PATH_MAX];
	char bootid[64];
	struct nl_sock *mon;          /* link/address notifications */
	ev_io mon_io;
	uint64_t fingerprint;
	unsigned engine_port;         /* struct net_deps, or cfg.port */
};

int net_file_write(const char *dir, const char *name, const struct vd_buf *b);
int net_file_read(const char *dir, const char *name, struct net_conf *c, char *bootid,
		  size_t bootidlen);
void net_conf_encode(const struct net_conf *c, const char *bootid, struct vd_buf *out);
int net_persist(struct net_state *ns, const char *name, const struct net_conf *c);
bool net_conf_same(const struct net_conf *a, const struct net_conf *b);
void net_notify_host_conn(struct net_state *ns);
/* True when a confirmation newer than since_ms arrives within timeout_s. */
bool net_wait_confirm(struct net_state *ns, uint64_t since_ms, unsigned timeout_s);
/* Apply from -> to; on failure roll back to from and return VD_EIO (*e says why). */
int net_transition(struct net_state *ns, const struct net_conf *from, struct net_conf *to,
		   struct net_err *e);

#endif
