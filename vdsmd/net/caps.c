/* vdsmd/net/caps.c - the network sections of Host.getCapabilities /
 * Host.getNetworkCapabilities (networks, bridges, nics, vlans, bondings) and
 * Host.getNetworkStatistics, in VDSM's shapes (lib/vdsm/network/netinfo/),
 * from a kernel snapshot and the managed conf. */
#include "net_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void prefix_mask(unsigned p, char out[16])
{
	uint32_t m = p ? 0xffffffffu << (32 - p) : 0;
	struct in_addr a = { .s_addr = htonl(m) };
	inet_ntop(AF_INET, &a, out, 16);
}

static void addr_list(struct vd_writer *w, const char *key, const struct net_dev *d, int fam)
{
	vw_keyz(w, key);
	vw_begin_array(w);
	for (unsigned i = 0; d && i < d->naddrs; i++) {
		const struct net_addr *a = &d->addrs[i];
		if (a->family != fam || a->link_local)
			continue;
		char b[NET_IP_STR + 8];
		int n = snprintf(b, sizeof(b), "%s/%u", a->addr, a->prefix);
		vw_string(w, b, (size_t)n);
	}
	vw_end_array(w);
}

/* The link speed in Mb/s from sysfs; 0 when unknown (no link, or a
 * virtual device that reports -1). */
static long link_speed(const char *dev)
{
	char sp[24];
	long speed = 0;
	if (net_sysfs_read(dev, "speed", sp, sizeof(sp)) == 0)
		speed = strtol(sp, NULL, 10);
	return speed > 0 ? speed : 0;
}

/* Fields every device entry has (VDSM's common netinfo). */
static void common_fields(struct vd_writer *w, const struct net_snap *s,
			  const struct net_dev *d, bool dhcp)
{
	const struct net_addr *v4 = NULL;
	for (unsigned i = 0; d && i < d->naddrs && !v4; i++)
		if (d->addrs[i].family == AF_INET)
			v4 = &d->addrs[i];
	char mask[16] = "";
	if (v4)
		prefix_mask(v4->prefix, mask);
	bool gw4 = d && s->gw4[0] && s->gw4_ifindex == d->ifindex;
	bool gw6 = d && s->gw6[0] && s->gw6_ifindex == d->ifindex;
	vw_kstr(w, "addr", v4 ? v4->addr : "");
	vw_kstr(w, "netmask", mask);
	vw_kstr(w, "gateway", gw4 ? s->gw4 : "");
	addr_list(w, "ipv4addrs", d, AF_INET);
	addr_list(w, "ipv6addrs", d, AF_INET6);
	vw_kstr(w, "ipv6gateway", gw6 ? s->gw6 : "::");
	vw_kbool(w, "ipv4defaultroute", gw4);
	vw_kint(w, "mtu", d ? d->mtu : 1500);
	vw_kbool(w, "dhcpv4", dhcp);
	vw_kbool(w, "dhcpv6", false);
	/* SLAAC as the kernel has it for the device: autoconf and accept_ra on */
	char ra[8] = "", ac[8] = "";
	if (d) {
		net_ipv6_conf_read(d->name, "accept_ra", ra, sizeof(ra));
		net_ipv6_conf_read(d->name, "autoconf", ac, sizeof(ac));
	}
	vw_kbool(w, "ipv6autoconf", ra[0] && ac[0] && strcmp(ra, "0") && strcmp(ac, "0"));
}

static bool is_nic(const struct net_dev *d)
{
	return !d->kind[0] || strcmp(d->kind, "veth") == 0 || strcmp(d->kind, "dummy") == 0;
}

static void ports_of(struct vd_writer *w, const struct net_snap *s, const struct net_dev *br)
{
	vw_keyz(w, "ports");
	vw_begin_array(w);
	for (size_t i = 0; br && i < s->n; i++)
		if (s->devs[i].master == br->ifindex)
			vw_strz(w, s->devs[i].name);
	vw_end_array(w);
}

static void stp_of(struct vd_writer *w, const char *br)
{
	char v[8];
	net_sysfs_read(br, "bridge/stp_state", v, sizeof(v));
	vw_kstr(w, "stp", strcmp(v, "0") == 0 || !v[0] ? "off" : "on");
}

static void write_networks(const struct net_conf *c, const struct net_snap *s,
			   struct vd_writer *w)
{
	vw_keyz(w, "networks");
	vw_begin_object(w);
	for (unsigned i = 0; i < c->nnets; i++) {
		const struct net_net *n = &c->nets[i];
		char top[NET_IFNAME], vdev[NET_IFNAME];
		net_net_top(n, top);
		net_net_vlandev(n, vdev);
		const struct net_dev *d = net_snap_dev(s, top);
		vw_keyz(w, n->name);
		vw_begin_object(w);
		vw_kstr(w, "iface", top);
		vw_kbool(w, "bridged", n->bridged);
		vw_kstr(w, "switch", "legacy");
		vw_kstr(w, "southbound", vdev[0] ? vdev : net_net_base(n));
		vw_kstr(w, "bootproto4", n->bootproto);
		if (n->vlan >= 0)
			vw_kint(w, "vlanid", n->vlan);
		if (n->bonding[0])
			vw_kstr(w, "bond", n->bonding);
		else
			vw_kstr(w, "nics", n->nic);
		/* dhcpv4: no lease is ever requested (the DHCP gap, net.h) */
		common_fields(w, s, d, false);
		if (n->bridged) {
			ports_of(w, s, d);
			stp_of(w, n->name);
		}
		vw_keyz(w, "nameservers");
		vw_begin_array(w);
		vw_end_array(w);
		vw_end_object(w);
	}
	vw_end_object(w);
}

static void write_bond(struct vd_writer *w, const struct net_conf *c, const struct net_snap *s,
		       const struct net_dev *d)
{
	vw_keyz(w, d->name);
	vw_begin_object(w);
	vw_kstr(w, "hwaddr", d->hwaddr);
	vw_keyz(w, "slaves");
	vw_begin_array(w);
	for (size_t i = 0; i < s->n; i++)
		if (s->devs[i].master == d->ifindex)
			vw_strz(w, s->devs[i].name);
	vw_end_array(w);
	char v[64];
	vw_keyz(w, "opts");
	vw_begin_object(w);
	net_sysfs_read(d->name, "bonding/mode", v, sizeof(v));
	/* "802.3ad 4" → VDSM reports the number */
	const char *sp = strrchr(v, ' ');
	vw_kstr(w, "mode", sp ? sp + 1 : v);
	const struct net_bond *b = net_conf_bond(c, d->name);
	char opts[NET_OPTS_MAX];
	snprintf(opts, sizeof(opts), "%s", b ? b->options : "miimon=0");
	for (char *save = NULL, *t = strtok_r(opts, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(t, '=');
		if (!eq)
			continue;
		*eq = '\0';
		if (strcmp(t, "mode") == 0)
			continue;
		char rel[64];
		snprintf(rel, sizeof(rel), "bonding/%s", t);
		if (net_sysfs_read(d->name, rel, v, sizeof(v)) == 0) {
			char *sp2 = strchr(v, ' ');  /* "layer2 0" → "layer2" */
			if (sp2)
				*sp2 = '\0';
			vw_kstr(w, t, v);
		}
	}
	vw_end_object(w);
	if (net_sysfs_read(d->name, "bonding/active_slave", v, sizeof(v)) == 0)
		vw_kstr(w, "active_slave", v);
	vw_kstr(w, "switch", "legacy");
	common_fields(w, s, d, false);
	vw_end_object(w);
}

void net_caps_sections(const struct net_conf *c, const struct net_snap *s,
		       struct vd_writer *w)
{
	write_networks(c, s, w);
	vw_keyz(w, "bridges");
	vw_begin_object(w);
	for (size_t i = 0; i < s->n; i++) {
		const struct net_dev *d = &s->devs[i];
		if (strcmp(d->kind, "bridge") != 0)
			continue;
		vw_keyz(w, d->name);
		vw_begin_object(w);
		ports_of(w, s, d);
		stp_of(w, d->name);
		common_fields(w, s, d, false);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "nics");
	vw_begin_object(w);
	for (size_t i = 0; i < s->n; i++) {
		const struct net_dev *d = &s->devs[i];
		if (!is_nic(d))
			continue;
		vw_keyz(w, d->name);
		vw_begin_object(w);
		vw_kstr(w, "hwaddr", d->hwaddr);
		const struct net_base *b = net_conf_base(c, d->name);
		if (b)
			vw_kstr(w, "permhwaddr", d->hwaddr);
		vw_kint(w, "speed", link_speed(d->name));
		common_fields(w, s, d, false);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "vlans");
	vw_begin_object(w);
	for (size_t i = 0; i < s->n; i++) {
		const struct net_dev *d = &s->devs[i];
		if (strcmp(d->kind, "vlan") != 0)
			continue;
		const struct net_dev *base = net_snap_index(s, d->link);
		vw_keyz(w, d->name);
		vw_begin_object(w);
		vw_kint(w, "vlanid", d->vlan_id);
		vw_kstr(w, "iface", base ? base->name : "");
		common_fields(w, s, d, false);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "bondings");
	vw_begin_object(w);
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->devs[i].kind, "bond") == 0)
			write_bond(w, c, s, &s->devs[i]);
	vw_end_object(w);
}

size_t net_parse_resolv(const char *text, size_t len, char out[][NET_IP_STR], size_t max)
{
	size_t n = 0;
	const char *p = text, *end = text + len;
	while (p < end && n < max) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		while (p < le && (*p == ' ' || *p == '\t'))
			p++;
		static const char kw[] = "nameserver";
		if ((size_t)(le - p) > sizeof(kw) && memcmp(p, kw, sizeof(kw) - 1) == 0 &&
		    (p[sizeof(kw) - 1] == ' ' || p[sizeof(kw) - 1] == '\t')) {
			const char *a = p + sizeof(kw) - 1;
			while (a < le && (*a == ' ' || *a == '\t'))
				a++;
			const char *ae = a;
			while (ae < le && *ae != ' ' && *ae != '\t' && *ae != '\r' && *ae != '#' &&
			       *ae != ';')
				ae++;
			char buf[NET_IP_STR];
			struct in6_addr a6;
			size_t al = (size_t)(ae - a);
			/* an address, IPv6 possibly with %scope (VDSM reports it as is) */
			if (al > 0 && al < sizeof(buf)) {
				memcpy(buf, a, al);
				buf[al] = '\0';
				char host[NET_IP_STR];
				snprintf(host, sizeof(host), "%.*s", (int)strcspn(buf, "%"), buf);
				if (inet_pton(AF_INET, host, &a6) == 1 || inet_pton(AF_INET6, host, &a6) == 1)
					memcpy(out[n++], buf, al + 1);
			}
		}
		p = nl ? nl + 1 : end;
	}
	return n;
}

void net_stats_write(const struct net_snap *s, struct vd_writer *w)
{
	uint64_t rxd = 0, txd = 0;
	vw_begin_object(w);
	vw_keyz(w, "network");
	vw_begin_object(w);
	for (size_t i = 0; i < s->n; i++) {
		const struct net_dev *d = &s->devs[i];
		if (strcmp(d->kind, "loopback") == 0)
			continue;
		rxd += d->rx_dropped;
		txd += d->tx_dropped;
		vw_keyz(w, d->name);
		vw_begin_object(w);
		vw_kstr(w, "name", d->name);
		vw_kstr_u64(w, "rx", d->rx_bytes);
		vw_kstr_u64(w, "tx", d->tx_bytes);
		vw_kstr_u64(w, "rxDropped", d->rx_dropped);
		vw_kstr_u64(w, "txDropped", d->tx_dropped);
		vw_kstr_u64(w, "rxErrors", d->rx_errors);
		vw_kstr_u64(w, "txErrors", d->tx_errors);
		vw_kstr(w, "state", d->up && strcmp(d->operstate, "down") != 0 ? "up" : "down");
		/* VDSM reports 1000 when the speed is unknown */
		long speed = link_speed(d->name);
		vw_kstr_u64(w, "speed", speed ? (uint64_t)speed : 1000);
		vw_kstr(w, "duplex", "unknown");
		vw_keyz(w, "sampleTime");
		vw_double(w, (double)s->time_ms / 1000.0);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_kstr_u64(w, "rxDropped", rxd);
	vw_kstr_u64(w, "txDropped", txd);
	vw_end_object(w);
}
