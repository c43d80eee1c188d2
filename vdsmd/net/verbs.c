/* vdsmd/net/verbs.c - Host.setupNetworks, Host.setSafeNetworkConfig,
 * Host.getNetworkCapabilities, Host.getNetworkStatistics (see net.h for the
 * semantics).  setupNetworks and setSafeNetworkConfig run on the worker
 * pool; the reads take one netlink dump (well under a millisecond) and run
 * on the loop thread. */
#include "net_priv.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/log.h"

static struct net_state *state_of(struct rpc_call *c)
{
	struct vdsmd *d = c->app;
	return d ? d->net : NULL;
}

static bool nic_exists(void *ctx, const char *nic)
{
	const struct net_snap *s = ctx;
	const struct net_dev *d = net_snap_dev(s, nic);
	return d && (!d->kind[0] || strcmp(d->kind, "veth") == 0 || strcmp(d->kind, "dummy") == 0);
}

/* ---- management-network safety ------------------------------------------------- */

/* Local addresses of established TCP connections to our port, from
 * /proc/net/tcp{,6}: "A.B.C.D" / IPv6 text; at most max. */
static unsigned engine_addrs(unsigned port, char out[][NET_IP_STR], unsigned max)
{
	unsigned n = 0;
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	for (unsigned f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "re");
		if (!fp)
			continue;
		char line[512];
		if (!fgets(line, sizeof(line), fp)) {
			fclose(fp);
			continue;
		}
		while (n < max && fgets(line, sizeof(line), fp)) {
			char local[64];
			unsigned lport, st;
			if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", local, &lport,
				   &st) != 3 || lport != port || st != 1 /* ESTABLISHED */)
				continue;
			if (f == 0 && strlen(local) == 8) {
				struct in_addr a;
				a.s_addr = (uint32_t)strtoul(local, NULL, 16);
				inet_ntop(AF_INET, &a, out[n], NET_IP_STR);
			} else if (f == 1 && strlen(local) == 32) {
				struct in6_addr a;
				for (int i = 0; i < 4; i++) {
					char w[9];
					memcpy(w, local + 8 * i, 8);
					w[8] = '\0';
					uint32_t x = (uint32_t)strtoul(w, NULL, 16);
					memcpy(&a.s6_addr[4 * i], &x, 4);
				}
				if (IN6_IS_ADDR_V4MAPPED(&a)) {
					struct in_addr v4;
					memcpy(&v4, &a.s6_addr[12], 4);
					inet_ntop(AF_INET, &v4, out[n], NET_IP_STR);
				} else {
					inet_ntop(AF_INET6, &a, out[n], NET_IP_STR);
				}
			} else {
				continue;
			}
			if (strcmp(out[n], "127.0.0.1") && strcmp(out[n], "::1"))
				n++;
		}
		fclose(fp);
	}
	return n;
}

static bool step_touches(const struct net_step *st, const struct net_conf *from,
			 const char *dev)
{
	if (st->kind == NET_S_TAKE_NIC || st->kind == NET_S_RELEASE_NIC ||
	    st->kind == NET_S_DEL_BOND)
		return strcmp(st->name, dev) == 0;
	if (st->kind != NET_S_DEL_NET)
		return false;
	const struct net_net *n = net_conf_net(from, st->name);
	char top[NET_IFNAME], vdev[NET_IFNAME];
	net_net_top(n, top);
	net_net_vlandev(n, vdev);
	return strcmp(top, dev) == 0 || strcmp(vdev, dev) == 0 ||
	       (!n->bridged && strcmp(net_net_base(n), dev) == 0);
}

/* The device and address the engine talks through, when the plan removes it
 * from its device; else 0. */
static int mgmt_touched(const struct net_state *ns, const struct net_snap *s,
			const struct net_conf *from, const struct net_plan *p, char *addr,
			char *dev)
{
	char la[8][NET_IP_STR];
	unsigned n = engine_addrs(ns->engine_port, la, 8);
	for (unsigned i = 0; i < n; i++)
		for (size_t k = 0; k < s->n; k++)
			for (unsigned j = 0; j < s->devs[k].naddrs; j++) {
				if (strcmp(s->devs[k].addrs[j].addr, la[i]))
					continue;
				for (unsigned m = 0; m < p->n; m++)
					if (step_touches(&p->steps[m], from, s->devs[k].name)) {
						snprintf(addr, NET_IP_STR, "%.63s", la[i]);
						snprintf(dev, NET_IFNAME, "%.15s", s->devs[k].name);
						return 1;
					}
			}
	return 0;
}

/* ---- Host.setupNetworks --------------------------------------------------------- */

static int setup(struct rpc_call *c, struct net_state *ns, struct net_conf *old,
		 struct net_conf *new, struct net_err *e)
{
	const struct vd_value *opts = rpc_arg(c, "options");
	bool check = false, commit = false;
	long timeout = 120;
	if (opts && opts->type == VD_OBJECT) {
		/* the engine's forms (HostSetupNetworksVDSCommand.generateOptions):
		 * connectivityCheck "true"/"false", commitOnSuccess a boolean,
		 * connectivityTimeout an int; read as VDSM reads them (tobool, int(),
		 * the timeout only when the check is armed) */
		if (net_attr_bool(opts, "connectivityCheck", false, &check, e) ||
		    net_attr_bool(opts, "commitOnSuccess", false, &commit, e) ||
		    (check && net_attr_int(opts, "connectivityTimeout", 120, 0, 3600,
					   RPC_E_NET_BAD_PARAMS, &timeout, e)))
			return VD_EINVAL;
	} else if (opts && opts->type != VD_NULL) {
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "options must be an object");
	}
	struct net_snap s;
	if (net_snap_read(&s))
		return net_fail(e, RPC_E_GENERAL, "cannot read links over netlink");
	pthread_mutex_lock(&ns->lock);
	*old = *ns->running;
	pthread_mutex_unlock(&ns->lock);
	int rc = net_conf_request(old, rpc_arg(c, "networks"), rpc_arg(c, "bondings"), nic_exists,
				  &s, new, e);
	struct net_plan *p = xmalloc(sizeof(*p));
	if (rc == 0) {
		net_plan_build(old, new, p);
		char addr[NET_IP_STR], dev[NET_IFNAME];
		if (!check && mgmt_touched(ns, &s, old, p, addr, dev))
			rc = net_fail(e, RPC_E_NET_BAD_PARAMS, "refused: the change would remove %s from %s, "
				      "the address the engine is connected through; set "
				      "options.connectivityCheck to make it revertible", addr, dev);
	}
	net_snap_free(&s);
	unsigned nsteps = p->n;
	free(p);
	if (rc)
		return rc;
	if (nsteps == 0)
		goto done;
	vd_log_flow(VD_LOG_INFO, c->flow_id, "net: setupNetworks: %u steps, %u networks, "
		    "%u bonds%s", nsteps, new->nnets, new->nbonds,
		    check ? ", connectivity check armed" : "");
	/* a crash from here on is undone at restart (running != safe) */
	net_persist(ns, "running.json", new);
	if (net_transition(ns, old, new, e)) {
		net_persist(ns, "running.json", old);
		net_notify_host_conn(ns);
		return VD_EIO;
	}
	/* reported while the engine's confirmation is awaited */
	pthread_mutex_lock(&ns->lock);
	*ns->running = *new;
	pthread_mutex_unlock(&ns->lock);
	if (check) {
		uint64_t t0 = vd_now_ms();
		if (!net_wait_confirm(ns, t0, (unsigned)timeout)) {
			struct net_err e2 = { 0 };
			vd_log_flow(VD_LOG_WARN, c->flow_id, "net: no confirmConnectivity within %ld s: "
				    "rolling back", timeout);
			struct net_conf *back = xmalloc(sizeof(*back));
			*back = *old;
			if (net_apply(new, back, &e2))
				log_error("net: rollback incomplete: %s", e2.msg);
			free(back);
			pthread_mutex_lock(&ns->lock);
			*ns->running = *old;
			pthread_mutex_unlock(&ns->lock);
			net_persist(ns, "running.json", old);
			net_notify_host_conn(ns);
			return net_fail(e, RPC_E_NET_LOST_CONN, "connectivity check failed");
		}
	}
	net_notify_host_conn(ns);
done:
	if (commit) {
		pthread_mutex_lock(&ns->lock);
		*ns->safe = *new;
		pthread_mutex_unlock(&ns->lock);
		if (net_persist(ns, "safe.json", new))
			return net_fail(e, RPC_E_GENERAL, "cannot persist the configuration");
		pthread_mutex_lock(&ns->lock);
		ns->dirty = false;
		pthread_mutex_unlock(&ns->lock);
	}
	net_persist(ns, "running.json", new);
	return 0;
}

static int net_setup_networks(struct rpc_call *c)
{
	struct net_state *ns = state_of(c);
	if (!ns)
		return rpc_fail(c, RPC_E_GENERAL, "networking is not initialized");
	struct net_err e = { 0 };
	struct net_conf *old = xmalloc(sizeof(*old)), *new = xmalloc(sizeof(*new));
	pthread_mutex_lock(&ns->setup_lock);
	pthread_mutex_lock(&ns->lock);
	ns->dirty = true;  /* as VDSM's API.setupNetworks, before anything is tried */
	pthread_mutex_unlock(&ns->lock);
	int rc = setup(c, ns, old, new, &e);
	pthread_mutex_unlock(&ns->setup_lock);
	free(old);
	free(new);
	if (rc) {
		vd_log_flow(VD_LOG_WARN, c->flow_id, "net: setupNetworks failed: %s", e.msg);
		return rpc_fail(c, e.code, "%s", e.msg);
	}
	rpc_write_done(c);  /* VDSM's Bridge: 'ret': 'status' */
	return 0;
}

/* ---- the other verbs ---------------------------------------------------------- */

static int net_set_safe(struct rpc_call *c)
{
	struct net_state *ns = state_of(c);
	if (!ns)
		return rpc_fail(c, RPC_E_GENERAL, "networking is not initialized");
	struct net_conf *cur = xmalloc(sizeof(*cur));
	pthread_mutex_lock(&ns->setup_lock);
	pthread_mutex_lock(&ns->lock);
	*cur = *ns->running;
	*ns->safe = *cur;
	pthread_mutex_unlock(&ns->lock);
	int rc = net_persist(ns, "safe.json", cur);
	if (rc == 0)
		rc = net_persist(ns, "running.json", cur);
	if (rc == 0) {
		pthread_mutex_lock(&ns->lock);
		ns->dirty = false;
		pthread_mutex_unlock(&ns->lock);
	}
	pthread_mutex_unlock(&ns->setup_lock);
	free(cur);
	if (rc)
		return rpc_fail(c, RPC_E_GENERAL, "cannot persist the network configuration in %s",
				ns->dir);
	vd_log_flow(VD_LOG_INFO, c->flow_id, "net: configuration made safe");
	return 0;
}

int net_network_bridge(struct vdsmd *d, const char *network, char *bridge, size_t len)
{
	struct net_state *ns = d ? d->net : NULL;
	if (!ns || !network)
		return VD_ENOENT;
	int rc = VD_ENOENT;
	pthread_mutex_lock(&ns->lock);
	const struct net_net *n = net_conf_net(ns->running, network);
	if (n && !n->bridged) {
		rc = VD_EINVAL;
	} else if (n) {
		char top[NET_IFNAME];
		net_net_top(n, top);
		rc = strlen(top) < len ? 0 : VD_ETOOBIG;
		if (rc == 0)
			memcpy(bridge, top, strlen(top) + 1);
	}
	pthread_mutex_unlock(&ns->lock);
	return rc;
}

void net_caps_write(void *vdsmd, struct vd_writer *w)
{
	struct vdsmd *d = vdsmd;
	struct net_state *ns = d ? d->net : NULL;
	struct net_snap s;
	struct net_conf *cur = xcalloc(1, sizeof(*cur));
	if (ns) {
		pthread_mutex_lock(&ns->lock);
		*cur = *ns->running;
		pthread_mutex_unlock(&ns->lock);
	}
	if (net_snap_read(&s) == 0) {
		net_caps_sections(cur, &s, w);
		net_snap_free(&s);
	} else {
		static const char *const keys[] = { "networks", "bridges", "nics", "vlans",
						    "bondings" };
		for (size_t i = 0; i < VD_ARRAY_SIZE(keys); i++) {
			vw_keyz(w, keys[i]);
			vw_begin_object(w);
			vw_end_object(w);
		}
	}
	/* the host's DNS servers, as VDSM reports them (vdsmd does not manage
	 * resolv.conf: setupNetworks refuses nameservers) */
	vw_keyz(w, "nameservers");
	vw_begin_array(w);
	char text[4096], ns_addr[8][NET_IP_STR];
	FILE *f = fopen("/etc/resolv.conf", "re");
	size_t tl = f ? fread(text, 1, sizeof(text), f) : 0;
	if (f)
		fclose(f);
	size_t nns = net_parse_resolv(text, tl, ns_addr, VD_ARRAY_SIZE(ns_addr));
	for (size_t i = 0; i < nns; i++)
		vw_strz(w, ns_addr[i]);
	vw_end_array(w);
	vw_kbool(w, "supportsIPv6", net_ipv6_supported());
	vw_kstr(w, "netConfigDirty", net_config_dirty(d) ? "True" : "False");
	free(cur);
}

bool net_config_dirty(void *vdsmd)
{
	struct vdsmd *d = vdsmd;
	struct net_state *ns = d ? d->net : NULL;
	if (!ns)
		return false;
	pthread_mutex_lock(&ns->lock);
	bool dirty = ns->dirty;
	pthread_mutex_unlock(&ns->lock);
	return dirty;
}

bool net_ipv6_supported(void)
{
	/* VDSM's ipv6_supported(): can an AF_INET6 datagram socket be made
	 * (IPv6 not disabled on the kernel command line nor compiled out) */
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static int net_get_caps(struct rpc_call *c)
{
	vw_begin_object(c->w);
	net_caps_write(c->app, c->w);
	vw_end_object(c->w);
	return 0;
}

static int net_get_stats(struct rpc_call *c)
{
	struct net_snap s;
	if (net_snap_read(&s))
		return rpc_fail(c, RPC_E_GENERAL, "cannot read links over netlink");
	net_stats_write(&s, c->w);
	net_snap_free(&s);
	return 0;
}

const struct rpc_binding net_bindings[] = {
	{ "Host.setupNetworks", net_setup_networks },
	{ "Host.setSafeNetworkConfig", net_set_safe },
	{ "Host.getNetworkCapabilities", net_get_caps },
	{ "Host.getNetworkStatistics", net_get_stats },
	{ NULL, NULL },
};
