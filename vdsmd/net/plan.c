/* vdsmd/net/plan.c - the ordered steps of a transition between two confs
 * (pure).  Teardown first (networks, then bonds, then nics given back), build
 * after (nics taken, bonds, networks), so a device is always free before it
 * is reused.  A network sitting on a bond that changes is rebuilt with it. */
#include "net_int.h"

#include <stdio.h>
#include <string.h>

const char *net_step_name(enum net_step_kind k)
{
	switch (k) {
	case NET_S_DEL_NET: return "del-net";
	case NET_S_DEL_BOND: return "del-bond";
	case NET_S_RELEASE_NIC: return "release-nic";
	case NET_S_TAKE_NIC: return "take-nic";
	case NET_S_ADD_BOND: return "add-bond";
	case NET_S_ADD_NET: return "add-net";
	}
	return "?";
}

static void push(struct net_plan *p, enum net_step_kind k, const char *name)
{
	if (p->n >= sizeof(p->steps) / sizeof(p->steps[0]))
		return;  /* cannot happen: at most 6 steps per net/bond/nic */
	p->steps[p->n].kind = k;
	snprintf(p->steps[p->n].name, NET_IFNAME, "%.15s", name);
	p->n++;
}

/* A bond of `a` that is absent from `b` or differs there. */
static bool bond_changed(const struct net_conf *a, const struct net_conf *b, const char *name)
{
	const struct net_bond *x = net_conf_bond(a, name), *y = net_conf_bond(b, name);
	return !x || !y || !net_bond_equal(x, y);
}

static bool net_changed(const struct net_conf *a, const struct net_conf *b,
			const struct net_net *n)
{
	const struct net_net *o = net_conf_net(b, n->name);
	if (!o || !net_net_equal(n, o))
		return true;
	return n->bonding[0] && bond_changed(a, b, n->bonding);
}

/* Every nic `c` uses, each once, in a stable order. */
static unsigned nics_of(const struct net_conf *c, char out[][NET_IFNAME], unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < c->nbonds + c->nnets; i++) {
		const char *list[NET_MAX_SLAVES];
		unsigned cnt = 0;
		if (i < c->nbonds) {
			for (unsigned j = 0; j < c->bonds[i].nnics; j++)
				list[cnt++] = c->bonds[i].nics[j];
		} else if (c->nets[i - c->nbonds].nic[0]) {
			list[cnt++] = c->nets[i - c->nbonds].nic;
		}
		for (unsigned j = 0; j < cnt; j++) {
			bool seen = false;
			for (unsigned k = 0; k < n && !seen; k++)
				seen = strcmp(out[k], list[j]) == 0;
			if (!seen && n < max) {
				snprintf(out[n++], NET_IFNAME, "%.15s", list[j]);
			}
		}
	}
	return n;
}

void net_plan_build(const struct net_conf *from, const struct net_conf *to,
		    struct net_plan *p)
{
	char nics[NET_MAX_NETS * (NET_MAX_SLAVES + 1)][NET_IFNAME];
	unsigned nn;
	p->n = 0;
	for (unsigned i = 0; i < from->nnets; i++)
		if (net_changed(from, to, &from->nets[i]))
			push(p, NET_S_DEL_NET, from->nets[i].name);
	for (unsigned i = 0; i < from->nbonds; i++)
		if (bond_changed(from, to, from->bonds[i].name))
			push(p, NET_S_DEL_BOND, from->bonds[i].name);
	nn = nics_of(from, nics, VD_ARRAY_SIZE(nics));
	for (unsigned i = 0; i < nn; i++)
		if (!net_conf_uses_nic(to, nics[i]))
			push(p, NET_S_RELEASE_NIC, nics[i]);
	nn = nics_of(to, nics, VD_ARRAY_SIZE(nics));
	for (unsigned i = 0; i < nn; i++)
		if (!net_conf_uses_nic(from, nics[i]))
			push(p, NET_S_TAKE_NIC, nics[i]);
	for (unsigned i = 0; i < to->nbonds; i++)
		if (bond_changed(to, from, to->bonds[i].name))
			push(p, NET_S_ADD_BOND, to->bonds[i].name);
	for (unsigned i = 0; i < to->nnets; i++)
		if (net_changed(to, from, &to->nets[i]))
			push(p, NET_S_ADD_NET, to->nets[i].name);
}
