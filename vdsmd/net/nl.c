/* vdsmd/net/nl.c - the kernel side over libnl-3 / libnl-route-3: read links,
 * addresses and default routes into a struct net_snap; create, change and
 * delete links, addresses and default routes.  Bond and bridge options go
 * through sysfs, as VDSM does (libnl 3.7 has no bond option setters).
 * The only file that includes libnl. */
#include "net_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/vlan.h>
#include <netlink/route/route.h>

struct nl_sock *net_nl_open(void)
{
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk)
		return NULL;
	if (nl_connect(sk, NETLINK_ROUTE) < 0) {
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

void net_nl_close(struct nl_sock *sk)
{
	if (sk)
		nl_socket_free(sk);
}

const char *net_nl_strerror(int err)
{
	return nl_geterror(err);
}

static void addr_str(struct nl_addr *a, char *out, size_t outlen, bool prefix)
{
	out[0] = '\0';
	if (!a)
		return;
	char b[NET_IP_STR];
	int fam = nl_addr_get_family(a);
	if (fam != AF_INET && fam != AF_INET6)
		return;
	if (!inet_ntop(fam, nl_addr_get_binary_addr(a), b, sizeof(b)))
		return;
	if (prefix)
		snprintf(out, outlen, "%s/%u", b, nl_addr_get_prefixlen(a));
	else
		snprintf(out, outlen, "%s", b);
}

static const char *operstate_name(uint8_t s)
{
	switch (s) {
	/* linux/if.h IF_OPER_* (that header clashes with net/if.h) */
	case 6: return "up";
	case 2: case 3: case 4: return "down";
	default: return "unknown";
	}
}

static void read_link(struct nl_object *o, void *arg)
{
	struct net_snap *s = arg;
	struct rtnl_link *l = (struct rtnl_link *)o;
	s->devs = xrealloc(s->devs, (s->n + 1) * sizeof(*s->devs));
	struct net_dev *d = &s->devs[s->n++];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", rtnl_link_get_name(l));
	d->ifindex = rtnl_link_get_ifindex(l);
	d->master = rtnl_link_get_master(l);
	d->mtu = rtnl_link_get_mtu(l);
	d->up = (rtnl_link_get_flags(l) & IFF_UP) != 0;
	snprintf(d->operstate, sizeof(d->operstate), "%s",
		 operstate_name(rtnl_link_get_operstate(l)));
	const char *kind = rtnl_link_get_type(l);
	snprintf(d->kind, sizeof(d->kind), "%s", kind ? kind : "");
	if (rtnl_link_get_arptype(l) == 772 /* ARPHRD_LOOPBACK */)
		snprintf(d->kind, sizeof(d->kind), "loopback");
	d->vlan_id = -1;
	if (kind && strcmp(kind, "vlan") == 0) {
		d->vlan_id = rtnl_link_vlan_get_id(l);
		d->link = rtnl_link_get_link(l);
	}
	struct nl_addr *hw = rtnl_link_get_addr(l);
	if (hw)
		nl_addr2str(hw, d->hwaddr, sizeof(d->hwaddr));
	d->rx_bytes = rtnl_link_get_stat(l, RTNL_LINK_RX_BYTES);
	d->tx_bytes = rtnl_link_get_stat(l, RTNL_LINK_TX_BYTES);
	d->rx_dropped = rtnl_link_get_stat(l, RTNL_LINK_RX_DROPPED);
	d->tx_dropped = rtnl_link_get_stat(l, RTNL_LINK_TX_DROPPED);
	d->rx_errors = rtnl_link_get_stat(l, RTNL_LINK_RX_ERRORS);
	d->tx_errors = rtnl_link_get_stat(l, RTNL_LINK_TX_ERRORS);
}

static void read_addr(struct nl_object *o, void *arg)
{
	struct net_snap *s = arg;
	struct rtnl_addr *a = (struct rtnl_addr *)o;
	struct net_dev *d = (struct net_dev *)net_snap_index(s, rtnl_addr_get_ifindex(a));
	if (!d || d->naddrs == NET_MAX_ADDRS)
		return;
	struct nl_addr *local = rtnl_addr_get_local(a);
	if (!local)
		return;
	struct net_addr *x = &d->addrs[d->naddrs];
	x->family = rtnl_addr_get_family(a);
	if (x->family != AF_INET && x->family != AF_INET6)
		return;
	addr_str(local, x->addr, sizeof(x->addr), false);
	x->prefix = (unsigned)rtnl_addr_get_prefixlen(a);
	x->link_local = rtnl_addr_get_scope(a) == RT_SCOPE_LINK;
	if (x->addr[0])
		d->naddrs++;
}

static void read_route(struct nl_object *o, void *arg)
{
	struct net_snap *s = arg;
	struct rtnl_route *r = (struct rtnl_route *)o;
	if (rtnl_route_get_table(r) != RT_TABLE_MAIN || rtnl_route_get_type(r) != RTN_UNICAST)
		return;
	struct nl_addr *dst = rtnl_route_get_dst(r);
	if (dst && nl_addr_get_prefixlen(dst) != 0)
		return;
	if (rtnl_route_get_nnexthops(r) < 1)
		return;
	struct rtnl_nexthop *nh = rtnl_route_nexthop_n(r, 0);
	struct nl_addr *gw = rtnl_route_nh_get_gateway(nh);
	if (!gw)
		return;
	if (rtnl_route_get_family(r) == AF_INET && !s->gw4[0]) {
		addr_str(gw, s->gw4, sizeof(s->gw4), false);
		s->gw4_ifindex = rtnl_route_nh_get_ifindex(nh);
	} else if (rtnl_route_get_family(r) == AF_INET6 && !s->gw6[0]) {
		addr_str(gw, s->gw6, sizeof(s->gw6), false);
		s->gw6_ifindex = rtnl_route_nh_get_ifindex(nh);
	}
}

int net_snap_read(struct net_snap *s)
{
	memset(s, 0, sizeof(*s));
	struct nl_sock *sk = net_nl_open();
	struct nl_cache *links = NULL, *addrs = NULL, *routes = NULL;
	int rc = VD_EIO;
	if (!sk)
		return VD_EIO;
	if (rtnl_link_alloc_cache(sk, AF_UNSPEC, &links) < 0 ||
	    rtnl_addr_alloc_cache(sk, &addrs) < 0 ||
	    rtnl_route_alloc_cache(sk, AF_UNSPEC, 0, &routes) < 0)
		goto out;
	nl_cache_foreach(links, read_link, s);
	nl_cache_foreach(addrs, read_addr, s);
	nl_cache_foreach(routes, read_route, s);
	s->time_ms = vd_now_ms();
	rc = 0;
out:
	if (routes)
		nl_cache_free(routes);
	if (addrs)
		nl_cache_free(addrs);
	if (links)
		nl_cache_free(links);
	net_nl_close(sk);
	return rc;
}

void net_snap_free(struct net_snap *s)
{
	free(s->devs);
	memset(s, 0, sizeof(*s));
}

const struct net_dev *net_snap_dev(const struct net_snap *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->devs[i].name, name) == 0)
			return &s->devs[i];
	return NULL;
}

const struct net_dev *net_snap_index(const struct net_snap *s, int ifindex)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->devs[i].ifindex == ifindex)
			return &s->devs[i];
	return NULL;
}

/* ---- changes ------------------------------------------------------------------ */

static int ifindex_of(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *l = NULL;
	if (rtnl_link_get_kernel(sk, 0, name, &l) < 0)
		return 0;
	int i = rtnl_link_get_ifindex(l);
	rtnl_link_put(l);
	return i;
}

int net_nl_create(struct nl_sock *sk, const char *name, const char *kind,
		  const char *base, int vlan)
{
	struct rtnl_link *l = strcmp(kind, "vlan") == 0 ? rtnl_link_vlan_alloc() : rtnl_link_alloc();
	if (!l)
		return -NLE_NOMEM;
	int rc;
	rtnl_link_set_name(l, name);
	if (strcmp(kind, "vlan") == 0) {
		int bi = ifindex_of(sk, base);
		if (!bi) {
			rc = -NLE_NODEV;
			goto out;
		}
		rtnl_link_set_link(l, bi);
		rtnl_link_vlan_set_id(l, (uint16_t)vlan);
	} else if ((rc = rtnl_link_set_type(l, kind)) < 0) {
		goto out;
	}
	rc = rtnl_link_add(sk, l, NLM_F_CREATE | NLM_F_EXCL);
out:
	rtnl_link_put(l);
	return rc;
}

int net_nl_delete(struct nl_sock *sk, const char *name, const char *kind)
{
	struct rtnl_link *l = NULL;
	int rc = rtnl_link_get_kernel(sk, 0, name, &l);
	if (rc < 0)
		return rc == -NLE_NODEV || rc == -NLE_OBJ_NOTFOUND ? 0 : rc;
	const char *k = rtnl_link_get_type(l);
	if (!k || strcmp(k, kind) != 0) {
		/* not ours to delete (a nic or another device of that name) */
		rtnl_link_put(l);
		return 0;
	}
	rc = rtnl_link_delete(sk, l);
	rtnl_link_put(l);
	return rc == -NLE_NODEV || rc == -NLE_OBJ_NOTFOUND ? 0 : rc;
}

int net_nl_set(struct nl_sock *sk, const char *name, unsigned mtu, int up, const char *master)
{
	struct rtnl_link *cur = NULL, *chg = rtnl_link_alloc();
	int rc = rtnl_link_get_kernel(sk, 0, name, &cur);
	if (rc < 0 || !chg)
		goto out;
	if (mtu)
		rtnl_link_set_mtu(chg, mtu);
	if (up == 1)
		rtnl_link_set_flags(chg, IFF_UP);
	else if (up == 0)
		rtnl_link_unset_flags(chg, IFF_UP);
	if (master) {
		int mi = master[0] ? ifindex_of(sk, master) : 0;
		if (master[0] && !mi) {
			rc = -NLE_NODEV;
			goto out;
		}
		rtnl_link_set_master(chg, mi);
	}
	rc = rtnl_link_change(sk, cur, chg, 0);
out:
	if (chg)
		rtnl_link_put(chg);
	if (cur)
		rtnl_link_put(cur);
	return rc;
}

static int parse_addr(const char *s, struct nl_addr **out)
{
	int fam = strchr(s, ':') ? AF_INET6 : AF_INET;
	return nl_addr_parse(s, fam, out);
}

int net_nl_addr(struct nl_sock *sk, const char *dev, const char *addr_prefix, bool add)
{
	int idx = ifindex_of(sk, dev);
	if (!idx)
		return add ? -NLE_NODEV : 0;
	struct nl_addr *local = NULL;
	struct rtnl_addr *a = rtnl_addr_alloc();
	int rc = parse_addr(addr_prefix, &local);
	if (rc < 0 || !a)
		goto out;
	rtnl_addr_set_ifindex(a, idx);
	rtnl_addr_set_family(a, nl_addr_get_family(local));
	if ((rc = rtnl_addr_set_local(a, local)) < 0)
		goto out;
	rtnl_addr_set_prefixlen(a, (int)nl_addr_get_prefixlen(local));
	if (add) {
		rc = rtnl_addr_add(sk, a, NLM_F_REPLACE);
		if (rc == -NLE_EXIST)
			rc = 0;
	} else {
		rc = rtnl_addr_delete(sk, a, 0);
		if (rc == -NLE_NOADDR || rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV)
			rc = 0;
	}
out:
	if (a)
		rtnl_addr_put(a);
	if (local)
		nl_addr_put(local);
	return rc;
}

int net_nl_flush_addrs(struct nl_sock *sk, const char *dev)
{
	struct net_snap s;
	int rc = net_snap_read(&s);
	if (rc)
		return -NLE_FAILURE;
	const struct net_dev *d = net_snap_dev(&s, dev);
	for (unsigned i = 0; d && i < d->naddrs && rc == 0; i++) {
		if (d->addrs[i].link_local)
			continue;
		char b[NET_IP_STR + 8];
		snprintf(b, sizeof(b), "%s/%u", d->addrs[i].addr, d->addrs[i].prefix);
		rc = net_nl_addr(sk, dev, b, false);
	}
	net_snap_free(&s);
	return rc;
}

int net_nl_defroute(struct nl_sock *sk, const char *dev, const char *gw, bool add)
{
	int idx = ifindex_of(sk, dev);
	if (!idx)
		return add ? -NLE_NODEV : 0;
	int fam = strchr(gw, ':') ? AF_INET6 : AF_INET;
	struct nl_addr *g = NULL, *dst = NULL;
	struct rtnl_route *r = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	int rc = nl_addr_parse(gw, fam, &g);
	if (rc < 0 || !r || !nh)
		goto out;
	if ((rc = nl_addr_parse(fam == AF_INET ? "0.0.0.0/0" : "::/0", fam, &dst)) < 0)
		goto out;
	rtnl_route_set_family(r, (uint8_t)fam);
	rtnl_route_set_table(r, RT_TABLE_MAIN);
	rtnl_route_set_protocol(r, RTPROT_STATIC);
	rtnl_route_set_scope(r, RT_SCOPE_UNIVERSE);
	rtnl_route_set_type(r, RTN_UNICAST);
	rtnl_route_set_dst(r, dst);
	rtnl_route_nh_set_ifindex(nh, idx);
	rtnl_route_nh_set_gateway(nh, g);
	rtnl_route_add_nexthop(r, nh);
	nh = NULL;  /* owned by the route now */
	if (add) {
		rc = rtnl_route_add(sk, r, NLM_F_REPLACE | NLM_F_CREATE);
	} else {
		rc = rtnl_route_delete(sk, r, 0);
		if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NOADDR || rc == -NLE_NODEV)
			rc = 0;
	}
out:
	if (nh)
		rtnl_route_nh_free(nh);
	if (r)
		rtnl_route_put(r);
	if (g)
		nl_addr_put(g);
	if (dst)
		nl_addr_put(dst);
	return rc;
}

/* ---- sysfs ---------------------------------------------------------------------- */

static bool rel_ok(const char *dev, const char *rel)
{
	return dev[0] && !strchr(dev, '/') && strcmp(dev, ".") && strcmp(dev, "..") &&
	       !strstr(rel, "..");
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return VD_EIO;
	size_t n = strlen(val);
	ssize_t w = write(fd, val, n);
	close(fd);
	return w == (ssize_t)n ? 0 : VD_EIO;
}

static int read_file(const char *path, char *out, size_t outlen)
{
	out[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return VD_ENOENT;
	ssize_t n = read(fd, out, outlen - 1);
	close(fd);
	if (n < 0)
		return VD_EIO;
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
		n--;
	out[n] = '\0';
	return 0;
}

int net_ipv6_conf_write(const char *dev, const char *key, const char *val)
{
	char path[128];
	if (!rel_ok(dev, key) || strchr(key, '/'))
		return VD_EINVAL;
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/%s", dev, key);
	return write_file(path, val);
}

int net_ipv6_conf_read(const char *dev, const char *key, char *out, size_t outlen)
{
	char path[128];
	out[0] = '\0';
	if (!rel_ok(dev, key) || strchr(key, '/'))
		return VD_EINVAL;
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/%s", dev, key);
	return read_file(path, out, outlen);
}

int net_sysfs_write(const char *dev, const char *rel, const char *val)
{
	char path[128];
	if (!rel_ok(dev, rel))
		return VD_EINVAL;
	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", dev, rel);
	return write_file(path, val);
}

int net_sysfs_read(const char *dev, const char *rel, char *out, size_t outlen)
{
	char path[128];
	out[0] = '\0';
	if (!rel_ok(dev, rel))
		return VD_EINVAL;
	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", dev, rel);
	return read_file(path, out, outlen);
}

/* ---- notifications ------------------------------------------------------------- */

static int mon_ignore(struct nl_msg *msg, void *arg)
{
	(void)msg;
	(void)arg;
	return NL_OK;
}

int net_mon_open(struct nl_sock **out)
{
	*out = NULL;
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk)
		return -1;
	nl_socket_disable_seq_check(sk);
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, mon_ignore, NULL);
	if (nl_connect(sk, NETLINK_ROUTE) < 0 ||
	    nl_socket_add_memberships(sk, RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR,
				      RTNLGRP_IPV6_IFADDR, 0) < 0 ||
	    nl_socket_set_nonblocking(sk) < 0) {
		nl_socket_free(sk);
		return -1;
	}
	*out = sk;
	return nl_socket_get_fd(sk);
}

void net_mon_drain(struct nl_sock *sk)
{
	/* non-blocking: returns once the queue is empty (-NLE_AGAIN) */
	for (int i = 0; i < 64 && nl_recvmsgs_default(sk) >= 0; i++)
		;
}

void net_mon_close(struct nl_sock *sk)
{
	nl_socket_free(sk);
}
