/* vdsmd/net/net_int.h - internals of the network backend.
 *
 * Model.  A `struct net_conf` is what vdsmd manages: VDSM's networks and
 * bondings (normalized from the setupNetworks dictionaries) plus, for every
 * NIC a network or bond took over, the NIC's state before (its baseline:
 * MTU, addresses, default gateway), so releasing the NIC puts it back.
 *
 * Changes are transitions between two confs: net_plan_build(old, new) gives
 * the ordered steps (pure, unit-tested); net_apply() runs them against the
 * kernel over netlink.  A rollback is the transition back, new -> old: every
 * teardown step tolerates what is already gone and every build step what is
 * already there, so a transition that stopped half-way is undone by the
 * reverse plan.
 *
 * The kernel side (nl.c) reads a `struct net_snap` (links, addresses,
 * default routes) and performs single changes; nothing else includes libnl.
 */
#ifndef VD_VDSMD_NET_INT_H
#define VD_VDSMD_NET_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "../../codecs/codec.h"
#include "../../rpc/rpc.h"

#define NET_IFNAME 16     /* IFNAMSIZ */
#define NET_IP_STR 64     /* an IPv6 address with "/prefix" */
#define NET_MAX_ADDRS 16  /* addresses kept per device */
#define NET_MAX_SLAVES 8
#define NET_MAX_NETS 64   /* networks (and bonds) in one conf */
#define NET_OPTS_MAX 256

/* Errors: a failure carries the rpc/ value the wire shows (RPC_E_NET_*,
 * VDSM's ERR_* codes of network/errors.py, or RPC_E_GENERAL), mapped to its
 * code in rpc/errors.c only. */
struct net_err {
	enum rpc_err code;
	char msg[240];
};

int net_fail(struct net_err *e, enum rpc_err code, const char *fmt, ...) VD_PRINTF(3, 4);

/* One VDSM network, normalized. */
struct net_net {
	char name[NET_IFNAME];
	char nic[NET_IFNAME];        /* "" when over a bond */
	char bonding[NET_IFNAME];    /* "" when over a nic */
	int vlan;                    /* -1: untagged */
	bool bridged;                /* default true, as VDSM */
	bool stp;
	unsigned mtu;                /* 1500 when not given */
	char bootproto[8];           /* "none" | "dhcp" (gap: see net.h) */
	char ipaddr[NET_IP_STR];     /* "" or dotted quad */
	unsigned prefix;             /* from netmask or prefix */
	char gateway[NET_IP_STR];
	bool defroute;
	char ipv6addr[NET_IP_STR];   /* "addr/prefix" or "" */
	char ipv6gateway[NET_IP_STR];
	bool ipv6autoconf;           /* SLAAC on the network's device (accept_ra, autoconf) */
};

struct net_bond {
	char name[NET_IFNAME];
	char nics[NET_MAX_SLAVES][NET_IFNAME];
	unsigned nnics;
	char options[NET_OPTS_MAX];  /* "mode=802.3ad miimon=100" as VDSM */
};

/* A NIC's state before vdsmd took it over. */
struct net_base {
	char nic[NET_IFNAME];
	unsigned mtu;
	char addrs[NET_MAX_ADDRS][NET_IP_STR];  /* "addr/prefix" */
	unsigned naddrs;
	char gw4[NET_IP_STR];                   /* default route through it, or "" */
	bool up;
	char accept_ra[4], autoconf[4];         /* its IPv6 sysctls, "" when unknown */
};

struct net_conf {
	struct net_net nets[NET_MAX_NETS];
	unsigned nnets;
	struct net_bond bonds[NET_MAX_NETS];
	unsigned nbonds;
	struct net_base base[NET_MAX_NETS];
	unsigned nbase;
};

/* ---- conf.c (pure) ---------------------------------------------------- */

const struct net_net *net_conf_net(const struct net_conf *c, const char *name);
const struct net_bond *net_conf_bond(const struct net_conf *c, const char *name);
const struct net_base *net_conf_base(const struct net_conf *c, const char *nic);
bool net_net_equal(const struct net_net *a, const struct net_net *b);
bool net_bond_equal(const struct net_bond *a, const struct net_bond *b);
/* The device a network's addresses live on ("blue", "eth0.10", "bond0"). */
void net_net_top(const struct net_net *n, char out[NET_IFNAME]);
/* The device under it (nic or bond), and its VLAN device name when tagged. */
const char *net_net_base(const struct net_net *n);
void net_net_vlandev(const struct net_net *n, char out[NET_IFNAME]);
/* True when nic is used by a network or a bond of c. */
bool net_conf_uses_nic(const struct net_conf *c, const char *nic);

/* Attribute readers (VDSM's coercions): absent -> default / "", a wrong
 * type -> RPC_E_NET_BAD_PARAMS (the given code for ints) with *e naming the key. */
bool net_ifname_ok(const char *s, size_t n);
int net_attr_str(const struct vd_value *a, const char *key, char *out, size_t outlen,
		 struct net_err *e);
int net_attr_bool(const struct vd_value *a, const char *key, bool dflt, bool *out,
		  struct net_err *e);
/* VDSM's tobool() (vdsm.common.conv): null -> false, a JSON boolean, "true" /
 * "false" in any case, a decimal integer (JSON or a string; nonzero = true).
 * VDSM silently reads any other value as false and every JSON integer as
 * false; vdsmd refuses the first (VD_EINVAL) and reads integers by value
 * (fix).  *out is false on error. */
int net_value_bool(const struct vd_value *v, bool *out);
/* VDSM's stp_booleanize (netinfo/bridges.py): null -> false, a JSON boolean,
 * yes/no, on/off, true/false in any case; anything else VD_EINVAL. */
int net_value_stp(const struct vd_value *v, bool *out);
int net_attr_int(const struct vd_value *a, const char *key, long dflt, long lo, long hi,
		 enum rpc_err code, long *out, struct net_err *e);

/* Parse one network's attributes (a setupNetworks value) into *n. */
int net_parse_net(const char *name, size_t nlen, const struct vd_value *attrs,
		  struct net_net *n, struct net_err *e);
int net_parse_bond(const char *name, size_t nlen, const struct vd_value *attrs,
		   struct net_bond *b, struct net_err *e);
/* New conf = old with the request applied (removals, additions, edits), then
 * checked as a whole (nic_exists may be NULL in tests: then every nic
 * exists).  Baselines are copied from old for nics still in use. */
int net_conf_request(const struct net_conf *old, const struct vd_value *networks,
		     const struct vd_value *bondings,
		     bool (*nic_exists)(void *ctx, const char *nic), void *ctx,
		     struct net_conf *out, struct net_err *e);
/* persist.c.  Persistence format: one JSON object {"networks": {...}, "bondings": {...},
 * "baseline": {...}, "bootid": "..."} in VDSM's attribute names, so a stored
 * file reads back through the same parser.  bootid may be NULL. */
void net_conf_write(const struct net_conf *c, const char *bootid, struct vd_writer *w);
int net_conf_read(const struct vd_value *v, struct net_conf *out, char *bootid,
		  size_t bootidlen, struct net_err *e);

/* ---- plan.c (pure) ---------------------------------------------------- */

enum net_step_kind {
	NET_S_DEL_NET,     /* tear a network of `from` down */
	NET_S_DEL_BOND,    /* delete a bond of `from` */
	NET_S_RELEASE_NIC, /* give a nic back its baseline (from `from`) */
	NET_S_TAKE_NIC,    /* record a nic's baseline (when `to` lacks one) and clear it */
	NET_S_ADD_BOND,    /* create a bond of `to` */
	NET_S_ADD_NET,     /* build a network of `to` */
};

struct net_step {
	enum net_step_kind kind;
	char name[NET_IFNAME];
};

struct net_plan {
	struct net_step steps[NET_MAX_NETS * 6];
	unsigned n;
};

void net_plan_build(const struct net_conf *from, const struct net_conf *to,
		    struct net_plan *p);
const char *net_step_name(enum net_step_kind k);

/* ---- nl.c: the kernel over libnl ---------------------------------------- */

struct net_addr {
	int family;                  /* AF_INET / AF_INET6 */
	char addr[NET_IP_STR];       /* without prefix */
	unsigned prefix;
	bool link_local;
};

struct net_dev {
	char name[NET_IFNAME];
	int ifindex;
	int master;                  /* ifindex or 0 */
	int link;                    /* VLAN base ifindex or 0 */
	char kind[16];               /* "" physical, "bridge", "bond", "vlan", "veth", ... */
	unsigned mtu;
	bool up;                     /* IFF_UP */
	char operstate[12];          /* "up", "down", "unknown" */
	char hwaddr[24];
	int vlan_id;
	uint64_t rx_bytes, tx_bytes, rx_dropped, tx_dropped, rx_errors, tx_errors;
	struct net_addr addrs[NET_MAX_ADDRS];
	unsigned naddrs;
};

struct net_snap {
	struct net_dev *devs;
	size_t n;
	char gw4[NET_IP_STR];        /* default route, "" when none */
	int gw4_ifindex;
	char gw6[NET_IP_STR];
	int gw6_ifindex;
	uint64_t time_ms;
};

int net_snap_read(struct net_snap *s);   /* 0 or vd_err */
void net_snap_free(struct net_snap *s);
const struct net_dev *net_snap_dev(const struct net_snap *s, const char *name);
const struct net_dev *net_snap_index(const struct net_snap *s, int ifindex);

struct nl_sock;
struct nl_sock *net_nl_open(void);
void net_nl_close(struct nl_sock *sk);
/* Each returns 0, or a negative libnl error (nl_geterror()). */
int net_nl_create(struct nl_sock *sk, const char *name, const char *kind,
		  const char *base, int vlan);
/* Deletes name only when it is a link of that kind ("bridge", "vlan",
 * "bond"); absent or of another kind: 0, nothing done. */
int net_nl_delete(struct nl_sock *sk, const char *name, const char *kind);
int net_nl_set(struct nl_sock *sk, const char *name, unsigned mtu, int up,
	       const char *master);  /* mtu 0 / up -1 / master NULL: unchanged; "" = nomaster */
int net_nl_addr(struct nl_sock *sk, const char *dev, const char *addr_prefix, bool add);
int net_nl_flush_addrs(struct nl_sock *sk, const char *dev);
int net_nl_defroute(struct nl_sock *sk, const char *dev, const char *gw, bool add);
const char *net_nl_strerror(int err);
/* sysfs attribute of a device: /sys/class/net/<dev>/<rel>. */
int net_sysfs_write(const char *dev, const char *rel, const char *val);
int net_sysfs_read(const char *dev, const char *rel, char *out, size_t outlen);
/* /proc/sys/net/ipv6/conf/<dev>/<key> (accept_ra, autoconf, forwarding):
 * 0, or VD_ENOENT / VD_EIO (no IPv6 on the device or in the kernel). */
int net_ipv6_conf_write(const char *dev, const char *key, const char *val);
int net_ipv6_conf_read(const char *dev, const char *key, char *out, size_t outlen);

/* nl.c: rtnetlink notifications (links, addresses): a socket whose fd
 * becomes readable on a change; drain reads what is queued. */
int net_mon_open(struct nl_sock **out);
void net_mon_drain(struct nl_sock *sk);
void net_mon_close(struct nl_sock *sk);

/* ---- apply.c ------------------------------------------------------------ */

/* Run from -> to against the kernel.  On a failed step *e says why and the
 * function returns at once (the caller rolls back with net_apply(to, from)).
 * `to` may gain baselines (TAKE_NIC), so it is not const. */
int net_apply(const struct net_conf *from, struct net_conf *to, struct net_err *e);

/* ---- caps.c ------------------------------------------------------------- */

void net_caps_sections(const struct net_conf *c, const struct net_snap *s,
		       struct vd_writer *w);
void net_stats_write(const struct net_snap *s, struct vd_writer *w);
/* The "nameserver" addresses of a resolv.conf text (invalid ones skipped),
 * at most max: VDSM's nameservers (nmstate's running DNS servers). */
size_t net_parse_resolv(const char *text, size_t len, char out[][NET_IP_STR], size_t max);

#endif
