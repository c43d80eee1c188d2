/* vdsmd/net/net.c - the network backend's state: the running and safe confs,
 * their files, restore at startup, the transaction (apply, roll back, wait
 * for the connectivity confirmation) and the link monitor that publishes
 * |net|host_conn|no_id.  Verb handlers are in verbs.c. */
#include "net_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../rpc/event.h"

static void read_bootid(char *out, size_t outlen)
{
	out[0] = '\0';
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return;
	if (fgets(out, (int)outlen, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* ---- events ------------------------------------------------------------------- */

void net_notify_host_conn(struct net_state *ns)
{
	struct event_bus *bus = ns->d ? ns->d->bus : NULL;
	if (!bus || !event_bus_enabled(bus))
		return;
	struct rpc_event ev;
	rpc_event_begin(&ev, bus, "|net|host_conn|no_id");
	rpc_event_publish(bus, &ev);
}

/* What the engine watches of the managed networks: the state and addresses
 * of each network's device.  A change publishes |net|host_conn|no_id. */
static uint64_t fingerprint(struct net_state *ns)
{
	struct net_snap s;
	if (net_snap_read(&s))
		return 0;
	uint64_t h = 1469598103934665603ull;
	pthread_mutex_lock(&ns->lock);
	for (unsigned i = 0; i < ns->running->nnets; i++) {
		char top[NET_IFNAME];
		net_net_top(&ns->running->nets[i], top);
		const struct net_dev *d = net_snap_dev(&s, top);
		char line[64 + NET_MAX_ADDRS * NET_IP_STR];
		int n = snprintf(line, sizeof(line), "%s|%s|%d|", top, d ? d->operstate : "-",
				 d ? d->up : -1);
		for (unsigned j = 0; d && j < d->naddrs && n > 0 && (size_t)n < sizeof(line); j++)
			n += snprintf(line + n, sizeof(line) - (size_t)n, "%s/%u,", d->addrs[j].addr,
				      d->addrs[j].prefix);
		for (int j = 0; j < n && (size_t)j < sizeof(line); j++)
			h = (h ^ (unsigned char)line[j]) * 1099511628211ull;
	}
	pthread_mutex_unlock(&ns->lock);
	net_snap_free(&s);
	return h;
}

static void on_monitor(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)loop;
	(void)revents;
	struct net_state *ns = io->data;
	net_mon_drain(ns->mon);
	uint64_t f = fingerprint(ns);
	if (f != ns->fingerprint) {
		ns->fingerprint = f;
		log_info("net: management links changed, notifying");
		net_notify_host_conn(ns);
	}
}

/* ---- transaction ---------------------------------------------------------------- */

void net_confirm(struct vdsmd *d)
{
	struct net_state *ns = d ? d->net : NULL;
	if (!ns)
		return;
	pthread_mutex_lock(&ns->lock);
	ns->confirm_ms = vd_now_ms();
	pthread_cond_broadcast(&ns->cond);
	pthread_mutex_unlock(&ns->lock);
}

bool net_wait_confirm(struct net_state *ns, uint64_t since_ms, unsigned timeout_s)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_s;
	bool seen = false;
	pthread_mutex_lock(&ns->lock);
	while (!(seen = ns->confirm_ms > since_ms) && !ns->stopping)
		if (pthread_cond_timedwait(&ns->cond, &ns->lock, &until) == ETIMEDOUT) {
			seen = ns->confirm_ms > since_ms;
			break;
		}
	pthread_mutex_unlock(&ns->lock);
	return seen;
}

/* from -> to; on failure back to `from` (to's baselines make that exact). */
int net_transition(struct net_state *ns, const struct net_conf *from, struct net_conf *to,
		   struct net_err *e)
{
	(void)ns;
	if (net_apply(from, to, e) == 0)
		return 0;
	struct net_err e2 = { 0 };
	struct net_conf *back = xmalloc(sizeof(*back));
	*back = *from;
	if (net_apply(to, back, &e2))
		log_error("net: rollback incomplete: %s", e2.msg);
	else
		log_info("net: rolled back after: %s", e->msg);
	free(back);
	return VD_EIO;
}

/* ---- init ------------------------------------------------------------------------ */

static void restore(struct net_state *ns)
{
	struct net_conf *empty = xcalloc(1, sizeof(*empty));
	struct net_conf *run = xcalloc(1, sizeof(*run));
	char run_boot[64] = "";
	int rs = net_file_read(ns->dir, "safe.json", ns->safe, NULL, 0);
	int rr = net_file_read(ns->dir, "running.json", run, run_boot, sizeof(run_boot));
	if (rs && rs != VD_ENOENT) {
		/* never roll back to a configuration we cannot read: keep the
		 * links as they are */
		log_error("net: %s/safe.json unreadable: links left as they are until "
			  "setSafeNetworkConfig", ns->dir);
		memset(ns->safe, 0, sizeof(*ns->safe));
		if (rr == 0 && strcmp(run_boot, ns->bootid) == 0)
			*ns->running = *run;
		*ns->safe = *ns->running;
		free(run);
		free(empty);
		return;
	}
	const struct net_conf *from = run;
	if (rr || strcmp(run_boot, ns->bootid) != 0)
		from = empty;  /* fresh links (reboot) or nothing known: build the safe conf */
	if (rr == 0 && from == run && net_conf_same(run, ns->safe)) {
		*ns->running = *run;
	} else if (rr == VD_ENOENT && rs == VD_ENOENT) {
		memset(ns->running, 0, sizeof(*ns->running));
	} else {
		struct net_err e = { 0 };
		struct net_conf *to = xmalloc(sizeof(*to));
		*to = *ns->safe;
		log_info("net: %s: restoring the safe network configuration (%u networks, "
			 "%u bonds)", from == run ? "configuration applied but never made safe"
			 : "links not configured since boot", to->nnets, to->nbonds);
		if (net_transition(ns, from, to, &e) == 0) {
			*ns->running = *to;
			*ns->safe = *to;
		} else {
			log_error("net: cannot restore the safe configuration: %s", e.msg);
			*ns->running = *from;
		}
		free(to);
	}
	net_persist(ns, "running.json", ns->running);
	free(run);
	free(empty);
}

int net_init(struct vdsmd *d, const struct net_deps *deps)
{
	struct net_state *ns = xcalloc(1, sizeof(*ns));
	ns->d = d;
	ns->running = xcalloc(1, sizeof(*ns->running));
	ns->safe = xcalloc(1, sizeof(*ns->safe));
	pthread_mutex_init(&ns->lock, NULL);
	pthread_mutex_init(&ns->setup_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ns->cond, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(ns->dir, sizeof(ns->dir), "%s",
		 d->cfg.net_state_dir && d->cfg.net_state_dir[0] ? d->cfg.net_state_dir
								   : "/var/lib/vdsmd/netconf");
	read_bootid(ns->bootid, sizeof(ns->bootid));
	ns->engine_port = deps && deps->engine_port ? deps->engine_port : d->cfg.port;
	d->net = ns;
	struct stat st;
	if (stat(ns->dir, &st) == 0)
		restore(ns);
	int fd = net_mon_open(&ns->mon);
	if (fd >= 0 && d->loop) {
		ns->fingerprint = fingerprint(ns);
		ev_io_init(&ns->mon_io, on_monitor, fd, EV_READ);
		ns->mon_io.data = ns;
		ev_io_start(d->loop, &ns->mon_io);
	} else {
		log_warn("net: cannot watch links (no |net|host_conn| events)");
	}
	log_info("net: state in %s, %u networks, %u bonds managed", ns->dir,
		 ns->running->nnets, ns->running->nbonds);
	return 0;
}

void net_stop(struct vdsmd *d)
{
	struct net_state *ns = d->net;
	if (!ns)
		return;
	pthread_mutex_lock(&ns->lock);
	ns->stopping = true;
	pthread_cond_broadcast(&ns->cond);
	pthread_mutex_unlock(&ns->lock);
}

void net_fini(struct vdsmd *d)
{
	struct net_state *ns = d->net;
	if (!ns)
		return;
	if (ns->mon) {
		if (d->loop)
			ev_io_stop(d->loop, &ns->mon_io);
		net_mon_close(ns->mon);
	}
	pthread_cond_destroy(&ns->cond);
	pthread_mutex_destroy(&ns->lock);
	pthread_mutex_destroy(&ns->setup_lock);
	free(ns->running);
	free(ns->safe);
	free(ns);
	d->net = NULL;
}
