/* vdsmd/net/apply.c - runs a transition plan against the kernel.  Teardown
 * steps tolerate devices and addresses already gone; build steps reuse what
 * is already there (a bridge left by a half-done transition), so the reverse
 * transition always undoes a transition that stopped half-way. */
#include "net_int.h"

#include <stdio.h>
#include <string.h>

#include "../../common/log.h"

struct ctx {
	struct nl_sock *sk;
	const struct net_conf *from;
	struct net_conf *to;
	struct net_err *e;
};

static int nlfail(struct ctx *c, enum rpc_err code, int rc, const char *what, const char *dev)
{
	return net_fail(c->e, code, "%s %s: %s", what, dev, net_nl_strerror(rc));
}

static int del_net(struct ctx *c, const struct net_net *n)
{
	char top[NET_IFNAME], vdev[NET_IFNAME];
	net_net_top(n, top);
	net_net_vlandev(n, vdev);
	if (n->defroute && n->gateway[0])
		net_nl_defroute(c->sk, top, n->gateway, false);
	if (n->ipv6gateway[0])
		net_nl_defroute(c->sk, top, n->ipv6gateway, false);
	int rc = 0;
	if (n->bridged && (rc = net_nl_delete(c->sk, n->name, "bridge")) < 0)
		return nlfail(c, RPC_E_NET_BAD_BRIDGE, rc, "cannot delete bridge", n->name);
	if (vdev[0] && (rc = net_nl_delete(c->sk, vdev, "vlan")) < 0)
		return nlfail(c, RPC_E_NET_BAD_VLAN, rc, "cannot delete vlan", vdev);
	if (!n->bridged && !vdev[0])
		net_nl_flush_addrs(c->sk, net_net_base(n));
	return 0;
}

static int release_nic(struct ctx *c, const char *nic)
{
	const struct net_base *b = net_conf_base(c->from, nic);
	net_nl_set(c->sk, nic, 0, -1, "");
	net_nl_flush_addrs(c->sk, nic);
	int rc = net_nl_set(c->sk, nic, b ? b->mtu : 1500, b ? b->up : 1, NULL);
	if (rc < 0)
		return nlfail(c, RPC_E_NET_FAILED_IFUP, rc, "cannot restore nic", nic);
	for (unsigned i = 0; b && i < b->naddrs; i++)
		if ((rc = net_nl_addr(c->sk, nic, b->addrs[i], true)) < 0)
			return nlfail(c, RPC_E_NET_BAD_ADDR, rc, "cannot restore an address of", nic);
	if (b && b->gw4[0] && (rc = net_nl_defroute(c->sk, nic, b->gw4, true)) < 0)
		return nlfail(c, RPC_E_NET_BAD_ADDR, rc, "cannot restore the default route of", nic);
	/* a bridgeless network on the nic set its IPv6 autoconfiguration */
	if (b && b->accept_ra[0])
		net_ipv6_conf_write(nic, "accept_ra", b->accept_ra);
	if (b && b->autoconf[0])
		net_ipv6_conf_write(nic, "autoconf", b->autoconf);
	return 0;
}

/* ipv6autoconf on the device carrying a network: SLAAC on or off, as
 * VDSM's nmstate backend sets it (accept_ra 2 on a forwarding device).
 * Off on a device without IPv6 is nothing to do; on is refused there. */
static int set_autoconf(struct ctx *c, const struct net_net *n, const char *dev)
{
	char fwd[8] = "";
	const char *ra = "0", *ac = "0";
	if (n->ipv6autoconf) {
		net_ipv6_conf_read(dev, "forwarding", fwd, sizeof(fwd));
		ra = strcmp(fwd, "1") == 0 ? "2" : "1";
		ac = "1";
	}
	int rc = net_ipv6_conf_write(dev, "accept_ra", ra);
	if (rc == 0)
		rc = net_ipv6_conf_write(dev, "autoconf", ac);
	if (rc && n->ipv6autoconf)
		return net_fail(c->e, RPC_E_NET_BAD_PARAMS, "network %s: cannot turn IPv6 "
				"autoconfiguration on for %s (no IPv6 there?)", n->name, dev);
	return 0;
}

static int take_nic(struct ctx *c, const char *nic)
{
	if (!net_conf_base(c->to, nic)) {
		if (c->to->nbase == NET_MAX_NETS)
			return net_fail(c->e, RPC_E_NET_BAD_PARAMS, "too many nics");
		struct net_snap s;
		if (net_snap_read(&s))
			return net_fail(c->e, RPC_E_GENERAL, "cannot read links");
		const struct net_dev *d = net_snap_dev(&s, nic);
		if (!d) {
			net_snap_free(&s);
			return net_fail(c->e, RPC_E_NET_BAD_NIC, "nic %s does not exist", nic);
		}
		struct net_base *b = &c->to->base[c->to->nbase++];
		memset(b, 0, sizeof(*b));
		snprintf(b->nic, sizeof(b->nic), "%s", nic);
		b->mtu = d->mtu;
		b->up = d->up;
		for (unsigned i = 0; i < d->naddrs; i++)
			if (!d->addrs[i].link_local)
				snprintf(b->addrs[b->naddrs++], NET_IP_STR, "%s/%u", d->addrs[i].addr,
					 d->addrs[i].prefix);
		if (s.gw4[0] && s.gw4_ifindex == d->ifindex)
			snprintf(b->gw4, sizeof(b->gw4), "%s", s.gw4);
		net_ipv6_conf_read(nic, "accept_ra", b->accept_ra, sizeof(b->accept_ra));
		net_ipv6_conf_read(nic, "autoconf", b->autoconf, sizeof(b->autoconf));
		net_snap_free(&s);
	}
	const struct net_base *b = net_conf_base(c->to, nic);
	if (b->gw4[0])
		net_nl_defroute(c->sk, nic, b->gw4, false);
	int rc = net_nl_flush_addrs(c->sk, nic);
	if (rc < 0)
		return nlfail(c, RPC_E_NET_BAD_NIC, rc, "cannot clear the addresses of", nic);
	return 0;
}

static int add_bond(struct ctx *c, const struct net_bond *b)
{
	int rc;
	net_nl_delete(c->sk, b->name, "bond");
	if ((rc = net_nl_create(c->sk, b->name, "bond", NULL, 0)) < 0)
		return nlfail(c, RPC_E_NET_BAD_BONDING, rc, "cannot create bond", b->name);
	char opts[NET_OPTS_MAX];
	snprintf(opts, sizeof(opts), "%s", b->options);
	for (char *save = NULL, *t = strtok_r(opts, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(t, '=');
		char rel[64];
		*eq = '\0';
		snprintf(rel, sizeof(rel), "bonding/%s", t);
		if (net_sysfs_write(b->name, rel, eq + 1))
			return net_fail(c->e, RPC_E_NET_BAD_BONDING, "bond %s: the kernel refused %s=%s",
					b->name, t, eq + 1);
	}
	for (unsigned i = 0; i < b->nnics; i++) {
		net_nl_set(c->sk, b->nics[i], 0, 0, NULL);
		if ((rc = net_nl_set(c->sk, b->nics[i], 0, -1, b->name)) < 0)
			return nlfail(c, RPC_E_NET_BAD_BONDING, rc, "cannot enslave nic", b->nics[i]);
	}
	if ((rc = net_nl_set(c->sk, b->name, 0, 1, NULL)) < 0)
		return nlfail(c, RPC_E_NET_FAILED_IFUP, rc, "cannot bring up", b->name);
	return 0;
}

/* Largest MTU of the networks of `to` on the same base device. */
static unsigned base_mtu(const struct net_conf *to, const char *base)
{
	unsigned m = 0;
	for (unsigned i = 0; i < to->nnets; i++)
		if (strcmp(net_net_base(&to->nets[i]), base) == 0)
			m = VD_MAX(m, to->nets[i].mtu);
	return m ? m : 1500;
}

static int add_addrs(struct ctx *c, const struct net_net *n, const char *top)
{
	int rc;
	char a[NET_IP_STR + 8];
	if (strcmp(n->bootproto, "dhcp") == 0 && n->nic[0]) {
		/* DHCP gap: no lease is requested; the nic's own addresses and
		 * default route (its baseline) move to the network's device. */
		const struct net_base *b = net_conf_base(c->to, n->nic);
		for (unsigned i = 0; b && i < b->naddrs; i++)
			if ((rc = net_nl_addr(c->sk, top, b->addrs[i], true)) < 0)
				return nlfail(c, RPC_E_NET_BAD_ADDR, rc, "cannot add an address to", top);
		if (b && b->gw4[0] && (rc = net_nl_defroute(c->sk, top, b->gw4, true)) < 0)
			return nlfail(c, RPC_E_NET_BAD_ADDR, rc, "cannot add the default route to", top);
	}
	if (n->ipaddr[0]) {
		snprintf(a, sizeof(a), "%s/%u", n->ipaddr, n->prefix);
		if ((rc = net_nl_addr(c->sk, top, a, true)) < 0)
			return nlfail(c, RPC_E_NET_BAD_ADDR, rc, "cannot add the address to", top);
	}
	if (n->ipv6addr[0] && (rc = net_nl_addr(c->sk, top, n->ipv6addr, true)) < 0)
		return nlfail(c, RPC_E_NET_BAD_ADDR, rc, "cannot add the IPv6 address to", top);
	if (n->defroute && n->gateway[0] && (rc = net_nl_defroute(c->sk, top, n->gateway, true)) < 0)
		return nlfail(c, RPC_E_NET_BAD_ADDR, rc, "cannot add the default route to", top);
	if (n->ipv6gateway[0] && (rc = net_nl_defroute(c->sk, top, n->ipv6gateway, true)) < 0)
		return nlfail(c, RPC_E_NET_BAD_ADDR, rc, "cannot add the IPv6 default route to", top);
	return 0;
}

static int add_net(struct ctx *c, const struct net_net *n)
{
	int rc;
	const char *base = net_net_base(n);
	char cur[NET_IFNAME], vdev[NET_IFNAME];
	if ((rc = net_nl_set(c->sk, base, base_mtu(c->to, base), 1, NULL)) < 0)
		return nlfail(c, RPC_E_NET_FAILED_IFUP, rc, "cannot set up", base);
	snprintf(cur, sizeof(cur), "%s", base);
	net_net_vlandev(n, vdev);
	if (vdev[0]) {
		net_nl_delete(c->sk, vdev, "vlan");
		if ((rc = net_nl_create(c->sk, vdev, "vlan", base, n->vlan)) < 0)
			return nlfail(c, RPC_E_NET_BAD_VLAN, rc, "cannot create vlan", vdev);
		if ((rc = net_nl_set(c->sk, vdev, n->mtu, 1, NULL)) < 0)
			return nlfail(c, RPC_E_NET_FAILED_IFUP, rc, "cannot set up", vdev);
		snprintf(cur, sizeof(cur), "%s", vdev);
	}
	if (n->bridged) {
		char kind[32];
		bool exists = net_sysfs_read(n->name, "ifindex", kind, sizeof(kind)) == 0;
		if (exists && net_sysfs_read(n->name, "bridge/stp_state", kind, sizeof(kind)) != 0)
			return net_fail(c->e, RPC_E_NET_BAD_BRIDGE, "network %s: a device of that name "
					"exists and is not a bridge", n->name);
		if (!exists && (rc = net_nl_create(c->sk, n->name, "bridge", NULL, 0)) < 0)
			return nlfail(c, RPC_E_NET_BAD_BRIDGE, rc, "cannot create bridge", n->name);
		net_sysfs_write(n->name, "bridge/stp_state", n->stp ? "1" : "0");
		if ((rc = net_nl_set(c->sk, cur, 0, 1, n->name)) < 0)
			return nlfail(c, RPC_E_NET_BAD_BRIDGE, rc, "cannot add a port to bridge", n->name);
		if ((rc = net_nl_set(c->sk, n->name, n->mtu, 1, NULL)) < 0)
			return nlfail(c, RPC_E_NET_FAILED_IFUP, rc, "cannot set up", n->name);
		snprintf(cur, sizeof(cur), "%s", n->name);
	}
	if ((rc = set_autoconf(c, n, cur)))
		return rc;
	return add_addrs(c, n, cur);
}

int net_apply(const struct net_conf *from, struct net_conf *to, struct net_err *e)
{
	struct net_plan plan;
	struct ctx c = { .from = from, .to = to, .e = e };
	net_plan_build(from, to, &plan);
	c.sk = net_nl_open();
	if (!c.sk)
		return net_fail(e, RPC_E_GENERAL, "cannot open a netlink socket");
	int rc = 0;
	for (unsigned i = 0; i < plan.n && rc == 0; i++) {
		const struct net_step *s = &plan.steps[i];
		log_debug("net: %s %s", net_step_name(s->kind), s->name);
		switch (s->kind) {
		case NET_S_DEL_NET:
			rc = del_net(&c, net_conf_net(from, s->name));
			break;
		case NET_S_DEL_BOND:
			if ((rc = net_nl_delete(c.sk, s->name, "bond")) < 0)
				rc = nlfail(&c, RPC_E_NET_BAD_BONDING, rc, "cannot delete bond", s->name);
			break;
		case NET_S_RELEASE_NIC:
			rc = release_nic(&c, s->name);
			break;
		case NET_S_TAKE_NIC:
			rc = take_nic(&c, s->name);
			break;
		case NET_S_ADD_BOND:
			rc = add_bond(&c, net_conf_bond(to, s->name));
			break;
		case NET_S_ADD_NET:
			rc = add_net(&c, net_conf_net(to, s->name));
			break;
		}
		if (rc)
			log_warn("net: step %s %s failed: %s", net_step_name(s->kind), s->name,
				 e->msg);
	}
	net_nl_close(c.sk);
	return rc ? VD_EIO : 0;
}
