/* vdsmd/net/conf.c - setupNetworks requests and the persisted conf: parsing
 * VDSM's network/bonding attributes, merging a request into the running
 * conf, checking the result, and the JSON persistence format.  Pure: no
 * kernel access (nic existence comes through a callback). */
#include "net_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int net_fail(struct net_err *e, enum rpc_err code, const char *fmt, ...)
{
	if (e) {
		e->code = code;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return VD_EINVAL;
}

const struct net_net *net_conf_net(const struct net_conf *c, const char *name)
{
	for (unsigned i = 0; i < c->nnets; i++)
		if (strcmp(c->nets[i].name, name) == 0)
			return &c->nets[i];
	return NULL;
}

const struct net_bond *net_conf_bond(const struct net_conf *c, const char *name)
{
	for (unsigned i = 0; i < c->nbonds; i++)
		if (strcmp(c->bonds[i].name, name) == 0)
			return &c->bonds[i];
	return NULL;
}

const struct net_base *net_conf_base(const struct net_conf *c, const char *nic)
{
	for (unsigned i = 0; i < c->nbase; i++)
		if (strcmp(c->base[i].nic, nic) == 0)
			return &c->base[i];
	return NULL;
}

bool net_net_equal(const struct net_net *a, const struct net_net *b)
{
	return strcmp(a->name, b->name) == 0 && strcmp(a->nic, b->nic) == 0 &&
	       strcmp(a->bonding, b->bonding) == 0 && a->vlan == b->vlan &&
	       a->bridged == b->bridged && a->stp == b->stp && a->mtu == b->mtu &&
	       strcmp(a->bootproto, b->bootproto) == 0 && strcmp(a->ipaddr, b->ipaddr) == 0 &&
	       a->prefix == b->prefix && strcmp(a->gateway, b->gateway) == 0 &&
	       a->defroute == b->defroute && strcmp(a->ipv6addr, b->ipv6addr) == 0 &&
	       strcmp(a->ipv6gateway, b->ipv6gateway) == 0 && a->ipv6autoconf == b->ipv6autoconf;
}

bool net_bond_equal(const struct net_bond *a, const struct net_bond *b)
{
	if (strcmp(a->name, b->name) || a->nnics != b->nnics || strcmp(a->options, b->options))
		return false;
	for (unsigned i = 0; i < a->nnics; i++)
		if (strcmp(a->nics[i], b->nics[i]))
			return false;
	return true;
}

const char *net_net_base(const struct net_net *n)
{
	return n->bonding[0] ? n->bonding : n->nic;
}

void net_net_vlandev(const struct net_net *n, char out[NET_IFNAME])
{
	out[0] = '\0';
	if (n->vlan >= 0 && n->vlan <= 4094)
		snprintf(out, NET_IFNAME, "%.10s.%u", net_net_base(n), (unsigned)n->vlan % 10000u);
}

void net_net_top(const struct net_net *n, char out[NET_IFNAME])
{
	if (n->bridged)
		snprintf(out, NET_IFNAME, "%s", n->name);
	else if (n->vlan >= 0)
		net_net_vlandev(n, out);
	else
		snprintf(out, NET_IFNAME, "%s", net_net_base(n));
}

bool net_conf_uses_nic(const struct net_conf *c, const char *nic)
{
	for (unsigned i = 0; i < c->nnets; i++)
		if (strcmp(c->nets[i].nic, nic) == 0)
			return true;
	for (unsigned i = 0; i < c->nbonds; i++)
		for (unsigned j = 0; j < c->bonds[i].nnics; j++)
			if (strcmp(c->bonds[i].nics[j], nic) == 0)
				return true;
	return false;
}

/* ---- attribute readers ----------------------------------------------------- */

/* A device name: 1..15 chars, no '/', ':', whitespace, not "." or "..". */
bool net_ifname_ok(const char *s, size_t n)
{
	if (n == 0 || n >= NET_IFNAME || (n == 1 && s[0] == '.') ||
	    (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || isspace((unsigned char)s[i]) ||
		    (unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

/* String attribute into out; absent → "" (0), wrong type → error. */
int net_attr_str(const struct vd_value *a, const char *key, char *out, size_t outlen,
		   struct net_err *e)
{
	const struct vd_value *v = vd_obj_get(a, key);
	out[0] = '\0';
	if (!v || v->type == VD_NULL)
		return 0;
	if (v->type == VD_INT) {
		snprintf(out, outlen, "%lld", (long long)v->v.i);
		return 0;
	}
	if (v->type != VD_STRING)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "%s must be a string, got %s", key,
				vd_type_name(v->type));
	if (v->v.s.len >= outlen || memchr(v->v.s.ptr, '\0', v->v.s.len))
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "%s is too long or holds NUL", key);
	memcpy(out, v->v.s.ptr, v->v.s.len);
	out[v->v.s.len] = '\0';
	return 0;
}

static bool ci_eq(const struct vd_value *v, const char *lit)
{
	size_t n = strlen(lit);
	return v->v.s.len == n && strncasecmp(v->v.s.ptr, lit, n) == 0;
}

/* A decimal integer as Python's int() reads a str: blanks around, an
 * optional sign, digits.  Sets *nonzero. */
static bool py_int_str(const char *s, size_t n, bool *nonzero)
{
	size_t i = 0;
	while (i < n && isspace((unsigned char)s[i]))
		i++;
	while (n > i && isspace((unsigned char)s[n - 1]))
		n--;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	if (i == n)
		return false;
	*nonzero = false;
	for (; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		*nonzero |= s[i] != '0';
	}
	return true;
}

int net_value_bool(const struct vd_value *v, bool *out)
{
	bool nz;
	*out = false;
	if (!v || v->type == VD_NULL)
		return 0;
	if (v->type == VD_BOOL) {
		*out = v->v.b;
		return 0;
	}
	if (v->type == VD_INT) {
		*out = v->v.i != 0;
		return 0;
	}
	if (v->type != VD_STRING)
		return VD_EINVAL;
	if (ci_eq(v, "true")) {
		*out = true;
		return 0;
	}
	if (ci_eq(v, "false"))
		return 0;
	if (py_int_str(v->v.s.ptr, v->v.s.len, &nz)) {
		*out = nz;
		return 0;
	}
	return VD_EINVAL;
}

int net_value_stp(const struct vd_value *v, bool *out)
{
	*out = false;
	if (!v || v->type == VD_NULL)
		return 0;
	if (v->type == VD_BOOL) {
		*out = v->v.b;
		return 0;
	}
	if (v->type != VD_STRING)
		return VD_EINVAL;
	if (ci_eq(v, "true") || ci_eq(v, "on") || ci_eq(v, "yes")) {
		*out = true;
		return 0;
	}
	if (ci_eq(v, "false") || ci_eq(v, "off") || ci_eq(v, "no"))
		return 0;
	return VD_EINVAL;
}

int net_attr_bool(const struct vd_value *a, const char *key, bool dflt, bool *out,
		  struct net_err *e)
{
	const struct vd_value *v = vd_obj_get(a, key);
	*out = dflt;
	if (!v)
		return 0;
	if (net_value_bool(v, out) == 0)
		return 0;
	if (v->type == VD_STRING)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "%s must be a boolean (true/false, any case, "
				"or a number), got \"%.*s\"", key, (int)VD_MIN(v->v.s.len, 32),
				v->v.s.ptr);
	return net_fail(e, RPC_E_NET_BAD_PARAMS, "%s must be a boolean, got %s", key,
			vd_type_name(v->type));
}

/* Integer (or decimal string) in [lo, hi]; absent → dflt. */
int net_attr_int(const struct vd_value *a, const char *key, long dflt, long lo, long hi,
		   enum rpc_err code, long *out, struct net_err *e)
{
	const struct vd_value *v = vd_obj_get(a, key);
	*out = dflt;
	if (!v || v->type == VD_NULL)
		return 0;
	long x;
	if (v->type == VD_INT) {
		if (v->v.i < lo || v->v.i > hi)
			goto bad;
		x = (long)v->v.i;
	} else if (v->type == VD_STRING && v->v.s.len > 0 && v->v.s.len < 12) {
		char b[16];
		memcpy(b, v->v.s.ptr, v->v.s.len);
		b[v->v.s.len] = '\0';
		char *end;
		x = strtol(b, &end, 10);
		if (*end || !isdigit((unsigned char)b[0]))
			goto bad;
	} else {
		goto bad;
	}
	if (x < lo || x > hi)
		goto bad;
	*out = x;
	return 0;
bad:
	return net_fail(e, code, "%s must be an integer in %ld..%ld", key, lo, hi);
}

static bool ip4_ok(const char *s)
{
	struct in_addr a;
	return inet_pton(AF_INET, s, &a) == 1;
}

static bool ip6_ok(const char *s)
{
	struct in6_addr a;
	return inet_pton(AF_INET6, s, &a) == 1;
}

/* netmask "255.255.255.0" → 24; -1 when not a contiguous mask */
static int mask_prefix(const char *s)
{
	struct in_addr a;
	if (inet_pton(AF_INET, s, &a) != 1)
		return -1;
	uint32_t m = ntohl(a.s_addr);
	int p = 0;
	while (p < 32 && (m & (0x80000000u >> p)))
		p++;
	if (p < 32 && (m << p) != 0)
		return -1;
	return p;
}

/* The attributes vdsmd implements; any other is refused (code 21) naming
 * it, never silently dropped.  "nameservers" and "custom" are accepted only
 * empty; hostQos, OVS and dhcpv6 are refused below. */
static const char *const known_net_attrs[] = {
	"nic", "bonding", "vlan", "bridged", "stp", "STP", "mtu", "bootproto", "ipaddr",
	"netmask", "prefix", "gateway", "defaultRoute", "ipv6addr", "ipv6gateway", "dhcpv6",
	"ipv6autoconf", "switch", "remove", "nameservers", "custom", "blockingdhcp", NULL
};

/* VDSM's link validator: ^bond\w+$ (and a device name: at most 15). */
static bool bond_name_ok(const char *name, size_t nlen)
{
	if (!net_ifname_ok(name, nlen) || nlen < 5 || strncmp(name, "bond", 4) != 0)
		return false;
	for (size_t i = 4; i < nlen; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '_')
			return false;
	return true;
}

static bool empty_or_absent(const struct vd_value *v)
{
	return !v || v->type == VD_NULL || (v->type == VD_ARRAY && v->v.arr.n == 0) ||
	       (v->type == VD_OBJECT && v->v.obj.n == 0) ||
	       (v->type == VD_STRING && v->v.s.len == 0);
}

static int check_keys(const struct vd_value *a, const char *const *known, const char *what,
		      const char *name, struct net_err *e)
{
	for (size_t i = 0; i < a->v.obj.n; i++) {
		const struct vd_member *m = &a->v.obj.members[i];
		bool ok = false;
		for (const char *const *k = known; *k && !ok; k++)
			ok = strlen(*k) == m->klen && memcmp(*k, m->key, m->klen) == 0;
		if (!ok)
			return net_fail(e, RPC_E_NET_BAD_PARAMS, "%s %s: attribute \"%.*s\" is not supported "
					"by vdsmd", what, name, (int)VD_MIN(m->klen, 40), m->key);
	}
	return 0;
}

/* ipaddr, netmask or prefix, gateway: VDSM's canonicalize and ip validator. */
static int parse_ipv4(const struct vd_value *a, struct net_net *n, struct net_err *e)
{
	char tmp[NET_IP_STR];
	long x;
	if (net_attr_str(a, "ipaddr", n->ipaddr, sizeof(n->ipaddr), e) ||
	    net_attr_str(a, "gateway", n->gateway, sizeof(n->gateway), e))
		return VD_EINVAL;
	if (n->ipaddr[0] && !ip4_ok(n->ipaddr))
		return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: bad ipaddr \"%s\"", n->name, n->ipaddr);
	if (n->gateway[0] && !ip4_ok(n->gateway))
		return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: bad gateway \"%s\"", n->name,
				n->gateway);
	if (n->ipaddr[0] && strcmp(n->bootproto, "dhcp") == 0)
		return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: ipaddr with bootproto dhcp",
				n->name);
	const struct vd_value *pv = vd_obj_get(a, "prefix");
	bool has_prefix = pv && !(pv->type == VD_NULL || (pv->type == VD_INT && pv->v.i == 0) ||
				  (pv->type == VD_STRING && pv->v.s.len == 0));
	if (has_prefix && vd_obj_get(a, "netmask"))
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: both prefix and netmask given",
				n->name);
	if (pv && pv->type == VD_STRING && pv->v.s.len == 0)
		pv = NULL;
	if (net_attr_str(a, "netmask", tmp, sizeof(tmp), e))
		return VD_EINVAL;
	if (tmp[0]) {
		int p = mask_prefix(tmp);
		if (p < 0)
			return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: bad netmask \"%s\"", n->name, tmp);
		n->prefix = (unsigned)p;
	}
	if (pv && net_attr_int(a, "prefix", n->prefix, 0, 32, RPC_E_NET_BAD_ADDR, &x, e))
		return VD_EINVAL;
	if (!pv)
		x = n->prefix;
	n->prefix = (unsigned)x;
	if (n->ipaddr[0] && n->prefix == 0)
		return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: ipaddr needs a netmask or prefix",
				n->name);
	/* VDSM's ip validator: a gateway or netmask without ipaddr is 22, with
	 * bootproto dhcp too */
	if (!n->ipaddr[0] && (n->prefix || n->gateway[0]))
		return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: netmask/gateway without ipaddr",
				n->name);
	return 0;
}

int net_parse_net(const char *name, size_t nlen, const struct vd_value *a,
		  struct net_net *n, struct net_err *e)
{
	memset(n, 0, sizeof(*n));
	if (!net_ifname_ok(name, nlen))
		return net_fail(e, RPC_E_NET_BAD_BRIDGE, "network name \"%.*s\" is not a valid "
				"device name (1-15 characters, no '/', ':' or spaces)",
				(int)VD_MIN(nlen, 64), name);
	memcpy(n->name, name, nlen);
	if (!a || a->type != VD_OBJECT)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: attributes must be an object", n->name);
	if (check_keys(a, known_net_attrs, "network", n->name, e))
		return VD_EINVAL;
	if (!empty_or_absent(vd_obj_get(a, "nameservers")))
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: nameservers are not supported by "
				"vdsmd (it does not manage resolv.conf)", n->name);
	if (!empty_or_absent(vd_obj_get(a, "custom")))
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: custom properties are not supported "
				"by vdsmd (no hooks)", n->name);
	char sw[16];
	long x;
	bool b;
	if (net_attr_str(a, "switch", sw, sizeof(sw), e))
		return VD_EINVAL;
	if (sw[0] && strcmp(sw, "legacy") != 0)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: switch \"%s\" is not supported "
				"(only legacy)", n->name, sw);
	if (net_attr_str(a, "nic", n->nic, sizeof(n->nic), e) ||
	    net_attr_str(a, "bonding", n->bonding, sizeof(n->bonding), e))
		return VD_EINVAL;
	if (n->nic[0] && n->bonding[0])
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: both nic and bonding given", n->name);
	if (!n->nic[0] && !n->bonding[0] && vd_obj_get(a, "vlan"))
		return net_fail(e, RPC_E_NET_BAD_VLAN, "network %s: a vlan needs a nic or a bonding "
				"under it", n->name);  /* VDSM's link validator: 26 */
	if (!n->nic[0] && !n->bonding[0])
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: needs a nic or a bonding "
				"(nicless networks are not supported)", n->name);
	if (n->bonding[0] && !bond_name_ok(n->bonding, strlen(n->bonding)))
		return net_fail(e, RPC_E_NET_BAD_BONDING, "network %s: bad bond name \"%s\"", n->name,
				n->bonding);
	if (!net_ifname_ok(net_net_base(n), strlen(net_net_base(n))))
		return net_fail(e, RPC_E_NET_BAD_NIC, "network %s: bad device name \"%s\"", n->name,
				net_net_base(n));
	/* vlan "" (or null) is no vlan, as in VDSM */
	const struct vd_value *vl = vd_obj_get(a, "vlan");
	if (vl && vl->type == VD_STRING && vl->v.s.len == 0)
		x = -1;
	else if (net_attr_int(a, "vlan", -1, 0, 4094, RPC_E_NET_BAD_VLAN, &x, e))
		return VD_EINVAL;
	n->vlan = (int)x;
	if (net_attr_bool(a, "bridged", true, &n->bridged, e))
		return VD_EINVAL;
	/* VDSM reads "stp", else "STP", and only for a bridged network */
	const struct vd_value *stp = vd_obj_get(a, "stp");
	if (!stp)
		stp = vd_obj_get(a, "STP");
	if (n->bridged && net_value_stp(stp, &n->stp)) {
		if (stp->type == VD_STRING)
			return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: \"%.*s\" is not a valid "
					"bridge STP value (yes/no, on/off, true/false)", n->name,
					(int)VD_MIN(stp->v.s.len, 32), stp->v.s.ptr);
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: STP must be a boolean or "
				"yes/no, on/off, true/false, got %s", n->name,
				vd_type_name(stp->type));
	}
	if (net_attr_int(a, "mtu", 1500, 68, 65535, RPC_E_NET_BAD_PARAMS, &x, e))
		return VD_EINVAL;
	n->mtu = (unsigned)x;
	if (net_attr_str(a, "bootproto", n->bootproto, sizeof(n->bootproto), e))
		return VD_EINVAL;
	if (!n->bootproto[0])
		strcpy(n->bootproto, "none");
	if (strcmp(n->bootproto, "none") && strcmp(n->bootproto, "dhcp"))
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: bootproto \"%s\" (none or dhcp)",
				n->name, n->bootproto);
	if (net_attr_bool(a, "dhcpv6", false, &b, e))
		return VD_EINVAL;
	if (b)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "network %s: dhcpv6 is not supported by vdsmd",
				n->name);
	if (net_attr_bool(a, "ipv6autoconf", false, &n->ipv6autoconf, e))
		return VD_EINVAL;
	if (parse_ipv4(a, n, e))
		return VD_EINVAL;
	if (net_attr_bool(a, "defaultRoute", false, &n->defroute, e))
		return VD_EINVAL;
	if (net_attr_str(a, "ipv6addr", n->ipv6addr, sizeof(n->ipv6addr), e) ||
	    net_attr_str(a, "ipv6gateway", n->ipv6gateway, sizeof(n->ipv6gateway), e))
		return VD_EINVAL;
	if (n->ipv6addr[0]) {
		char *slash = strchr(n->ipv6addr, '/');
		char host[NET_IP_STR - 8];
		size_t hl = slash ? (size_t)(slash - n->ipv6addr) : strlen(n->ipv6addr);
		if (hl >= sizeof(host))
			return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: bad ipv6addr", n->name);
		snprintf(host, sizeof(host), "%.*s", (int)hl, n->ipv6addr);
		long p = slash ? strtol(slash + 1, NULL, 10) : 64;
		if (!ip6_ok(host) || p < 1 || p > 128)
			return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: bad ipv6addr \"%s\"", n->name,
					n->ipv6addr);
		snprintf(n->ipv6addr, sizeof(n->ipv6addr), "%s/%u", host, (unsigned)p % 1000u);
	}
	/* "::" is the engine's "no IPv6 gateway" (HostSetupNetworksVDSCommand
	 * sends it for every static IPv6 network not holding the default route) */
	if (strcmp(n->ipv6gateway, "::") == 0)
		n->ipv6gateway[0] = '\0';
	if (n->ipv6gateway[0] && (!ip6_ok(n->ipv6gateway) || !n->ipv6addr[0]))
		return net_fail(e, RPC_E_NET_BAD_ADDR, "network %s: bad ipv6gateway \"%s\"", n->name,
				n->ipv6gateway);
	if (n->vlan >= 0 && strlen(net_net_base(n)) > 10)
		return net_fail(e, RPC_E_NET_BAD_VLAN, "network %s: base device name too long for a "
				"VLAN device", n->name);
	return 0;
}

/* Mode names VDSM accepts (numbers are mapped to them). */
static const char *const bond_modes[] = {
	"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad",
	"balance-tlb", "balance-alb", NULL
};

int net_parse_bond(const char *name, size_t nlen, const struct vd_value *a,
		   struct net_bond *b, struct net_err *e)
{
	memset(b, 0, sizeof(*b));
	if (!bond_name_ok(name, nlen))
		return net_fail(e, RPC_E_NET_BAD_BONDING, "bond name \"%.*s\" must be bond followed by "
				"up to 11 characters", (int)VD_MIN(nlen, 64), name);
	memcpy(b->name, name, nlen);
	if (!a || a->type != VD_OBJECT)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "bond %s: attributes must be an object", b->name);
	static const char *const known[] = { "nics", "options", "switch", "remove", NULL };
	if (check_keys(a, known, "bond", b->name, e))
		return VD_EINVAL;
	char sw[16];
	if (net_attr_str(a, "switch", sw, sizeof(sw), e))
		return VD_EINVAL;
	if (sw[0] && strcmp(sw, "legacy") != 0)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "bond %s: switch \"%s\" is not supported (only "
				"legacy)", b->name, sw);
	const struct vd_value *nics = vd_obj_get(a, "nics");
	if (!nics || nics->type != VD_ARRAY || nics->v.arr.n == 0)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "bond %s: nics must be a non-empty list",
				b->name);  /* VDSM's link validator: 21 */
	if (nics->v.arr.n > NET_MAX_SLAVES)
		return net_fail(e, RPC_E_NET_BAD_BONDING, "bond %s: at most %d nics", b->name,
				NET_MAX_SLAVES);
	for (size_t i = 0; i < nics->v.arr.n; i++) {
		const struct vd_value *s = &nics->v.arr.items[i];
		if (s->type != VD_STRING || !net_ifname_ok(s->v.s.ptr, s->v.s.len))
			return net_fail(e, RPC_E_NET_BAD_NIC, "bond %s: bad nic name", b->name);
		for (unsigned j = 0; j < b->nnics; j++)
			if (strlen(b->nics[j]) == s->v.s.len &&
			    memcmp(b->nics[j], s->v.s.ptr, s->v.s.len) == 0)
				return net_fail(e, RPC_E_NET_BAD_BONDING, "bond %s: nic listed twice", b->name);
		memcpy(b->nics[b->nnics++], s->v.s.ptr, s->v.s.len);
	}
	/* keep nics sorted: the same bond compares equal whatever the order */
	for (unsigned i = 1; i < b->nnics; i++)
		for (unsigned j = i; j > 0 && strcmp(b->nics[j - 1], b->nics[j]) > 0; j--) {
			char t[NET_IFNAME];
			memcpy(t, b->nics[j], NET_IFNAME);
			memcpy(b->nics[j], b->nics[j - 1], NET_IFNAME);
			memcpy(b->nics[j - 1], t, NET_IFNAME);
		}
	char opts[NET_OPTS_MAX];
	if (net_attr_str(a, "options", opts, sizeof(opts), e))
		return VD_EINVAL;
	/* normalize: mode first as a name, then the rest in their order */
	char mode[24] = "balance-rr", rest[NET_OPTS_MAX] = "";
	size_t rl = 0;
	for (char *save = NULL, *t = strtok_r(opts, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(t, '=');
		if (!eq || eq == t || !eq[1])
			return net_fail(e, RPC_E_NET_BAD_BONDING, "bond %s: option \"%s\" is not key=value",
					b->name, t);
		*eq = '\0';
		for (const char *p = t; *p; p++)
			if (!isalnum((unsigned char)*p) && *p != '_')
				return net_fail(e, RPC_E_NET_BAD_BONDING, "bond %s: bad option name", b->name);
		for (const char *p = eq + 1; *p; p++)
			if (*p == '/' || (unsigned char)*p < 0x21)
				return net_fail(e, RPC_E_NET_BAD_BONDING, "bond %s: bad option value", b->name);
		if (strcmp(t, "mode") == 0) {
			const char *v = eq + 1;
			int found = -1;
			for (int i = 0; bond_modes[i]; i++)
				if (strcmp(v, bond_modes[i]) == 0 || (isdigit((unsigned char)v[0]) &&
								     !v[1] && v[0] - '0' == i))
					found = i;
			if (found < 0)
				return net_fail(e, RPC_E_NET_BAD_BONDING, "bond %s: unknown mode \"%s\"",
						b->name, v);
			snprintf(mode, sizeof(mode), "%s", bond_modes[found]);
			continue;
		}
		int n = snprintf(rest + rl, sizeof(rest) - rl, " %s=%s", t, eq + 1);
		if (n < 0 || (size_t)n >= sizeof(rest) - rl)
			return net_fail(e, RPC_E_NET_BAD_BONDING, "bond %s: options too long", b->name);
		rl += (size_t)n;
	}
	size_t ml = strlen(mode);
	if (5 + ml + rl >= sizeof(b->options))
		return net_fail(e, RPC_E_NET_BAD_BONDING, "bond %s: options too long", b->name);
	memcpy(b->options, "mode=", 5);
	memcpy(b->options + 5, mode, ml);
	memcpy(b->options + 5 + ml, rest, rl + 1);
	return 0;
}

/* ---- request merge and checks ------------------------------------------------ */

static int check_conf(const struct net_conf *c, bool (*nic_exists)(void *, const char *),
		      void *ctx, struct net_err *e)
{
	for (unsigned i = 0; i < c->nbonds; i++) {
		const struct net_bond *b = &c->bonds[i];
		for (unsigned j = 0; j < b->nnics; j++) {
			if (nic_exists && !nic_exists(ctx, b->nics[j]))
				return net_fail(e, RPC_E_NET_BAD_NIC, "bond %s: nic %s does not exist",
						b->name, b->nics[j]);
			for (unsigned k = 0; k < c->nbonds; k++)
				for (unsigned m = 0; k != i && m < c->bonds[k].nnics; m++)
					if (strcmp(c->bonds[k].nics[m], b->nics[j]) == 0)
						return net_fail(e, RPC_E_NET_USED_NIC, "nic %s is in bonds %s "
								"and %s", b->nics[j], b->name,
								c->bonds[k].name);
		}
	}
	for (unsigned i = 0; i < c->nnets; i++) {
		const struct net_net *n = &c->nets[i];
		if (n->bonding[0] && !net_conf_bond(c, n->bonding))
			return net_fail(e, RPC_E_NET_BAD_BONDING, "network %s: bond %s does not exist",
					n->name, n->bonding);
		if (n->nic[0]) {
			if (nic_exists && !nic_exists(ctx, n->nic))
				return net_fail(e, RPC_E_NET_BAD_NIC, "network %s: nic %s does not exist",
						n->name, n->nic);
			for (unsigned k = 0; k < c->nbonds; k++)
				for (unsigned m = 0; m < c->bonds[k].nnics; m++)
					if (strcmp(c->bonds[k].nics[m], n->nic) == 0)
						return net_fail(e, RPC_E_NET_USED_NIC, "network %s: nic %s is "
								"a slave of bond %s", n->name, n->nic,
								c->bonds[k].name);
		}
		if (net_conf_bond(c, n->name) || (n->bridged && net_conf_uses_nic(c, n->name)))
			return net_fail(e, RPC_E_NET_BAD_BRIDGE, "network %s: name taken by a nic or bond",
					n->name);
		for (unsigned k = 0; k < i; k++) {
			const struct net_net *o = &c->nets[k];
			if (strcmp(net_net_base(o), net_net_base(n)) || o->vlan != n->vlan)
				continue;
			if (n->vlan >= 0)
				return net_fail(e, RPC_E_NET_BAD_VLAN, "networks %s and %s share vlan %d on %s",
						o->name, n->name, n->vlan, net_net_base(n));
			return net_fail(e, RPC_E_NET_BAD_PARAMS, "networks %s and %s are both untagged on %s",
					o->name, n->name, net_net_base(n));
		}
		if (n->defroute)
			for (unsigned k = 0; k < i; k++)
				if (c->nets[k].defroute)
					return net_fail(e, RPC_E_NET_BAD_PARAMS, "networks %s and %s both ask "
							"for the default route", c->nets[k].name,
							n->name);
	}
	return 0;
}

static int by_name_net(const void *a, const void *b)
{
	return strcmp(((const struct net_net *)a)->name, ((const struct net_net *)b)->name);
}

static int by_name_bond(const void *a, const void *b)
{
	return strcmp(((const struct net_bond *)a)->name, ((const struct net_bond *)b)->name);
}

static bool is_removal(const struct vd_value *attrs, struct net_err *e, int *rc)
{
	bool rm = false;
	*rc = attrs && attrs->type == VD_OBJECT ? net_attr_bool(attrs, "remove", false, &rm, e) : 0;
	return rm;
}

int net_conf_request(const struct net_conf *old, const struct vd_value *networks,
		     const struct vd_value *bondings,
		     bool (*nic_exists)(void *ctx, const char *nic), void *ctx,
		     struct net_conf *out, struct net_err *e)
{
	int rc;
	*out = *old;
	if (networks && networks->type != VD_OBJECT && networks->type != VD_NULL)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "networks must be an object");
	if (bondings && bondings->type != VD_OBJECT && bondings->type != VD_NULL)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "bondings must be an object");
	size_t nn = networks && networks->type == VD_OBJECT ? networks->v.obj.n : 0;
	size_t nb = bondings && bondings->type == VD_OBJECT ? bondings->v.obj.n : 0;
	for (size_t i = 0; i < nb; i++) {
		const struct vd_member *m = &bondings->v.obj.members[i];
		char name[NET_IFNAME];
		snprintf(name, sizeof(name), "%.*s", (int)VD_MIN(m->klen, NET_IFNAME - 1), m->key);
		unsigned at = out->nbonds;
		for (unsigned j = 0; j < out->nbonds; j++)
			if (strlen(out->bonds[j].name) == m->klen &&
			    strncmp(out->bonds[j].name, m->key, m->klen) == 0)
				at = j;
		bool rm = is_removal(&m->val, e, &rc);
		if (rc)
			return rc;
		if (rm) {
			if (at == out->nbonds)
				return net_fail(e, RPC_E_NET_BAD_BONDING, "cannot remove bond %s: it does not "
						"exist", name);
			out->bonds[at] = out->bonds[--out->nbonds];
			continue;
		}
		if (at == NET_MAX_NETS)
			return net_fail(e, RPC_E_NET_BAD_PARAMS, "too many bonds (at most %d)", NET_MAX_NETS);
		if ((rc = net_parse_bond(m->key, m->klen, &m->val, &out->bonds[at], e)))
			return rc;
		if (at == out->nbonds)
			out->nbonds++;
	}
	for (size_t i = 0; i < nn; i++) {
		const struct vd_member *m = &networks->v.obj.members[i];
		unsigned at = out->nnets;
		for (unsigned j = 0; j < out->nnets; j++)
			if (strlen(out->nets[j].name) == m->klen &&
			    strncmp(out->nets[j].name, m->key, m->klen) == 0)
				at = j;
		bool rm = is_removal(&m->val, e, &rc);
		if (rc)
			return rc;
		if (rm) {
			if (at == out->nnets)
				return net_fail(e, RPC_E_NET_BAD_BRIDGE, "cannot remove network %.*s: it does "
						"not exist", (int)VD_MIN(m->klen, 64), m->key);
			out->nets[at] = out->nets[--out->nnets];
			continue;
		}
		if (at == NET_MAX_NETS)
			return net_fail(e, RPC_E_NET_BAD_PARAMS, "too many networks (at most %d)",
					NET_MAX_NETS);
		if ((rc = net_parse_net(m->key, m->klen, &m->val, &out->nets[at], e)))
			return rc;
		if (at == out->nnets)
			out->nnets++;
	}
	/* a bond removed while a remaining network still sits on it */
	for (unsigned i = 0; i < out->nnets; i++)
		if (out->nets[i].bonding[0] && !net_conf_bond(out, out->nets[i].bonding) &&
		    net_conf_bond(old, out->nets[i].bonding))
			return net_fail(e, RPC_E_NET_USED_BOND, "bond %s is used by network %s",
					out->nets[i].bonding, out->nets[i].name);
	qsort(out->nets, out->nnets, sizeof(out->nets[0]), by_name_net);
	qsort(out->bonds, out->nbonds, sizeof(out->bonds[0]), by_name_bond);
	if ((rc = check_conf(out, nic_exists, ctx, e)))
		return rc;
	/* baselines only for nics still taken over */
	unsigned k = 0;
	for (unsigned i = 0; i < out->nbase; i++)
		if (net_conf_uses_nic(out, out->base[i].nic))
			out->base[k++] = out->base[i];
	out->nbase = k;
	return 0;
}
