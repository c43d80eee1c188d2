/* vdsmd/net/net.h - host networking over netlink (libnl-3 / libnl-route-3):
 * Host.setupNetworks, Host.setSafeNetworkConfig, Host.getNetworkCapabilities,
 * Host.getNetworkStatistics, and the meaning of Host.confirmConnectivity.
 *
 * What vdsmd manages is a conf of VDSM networks and bonds (net_int.h).  The
 * running conf and the last safe conf are files in cfg.net_state_dir
 * (running.json, safe.json), each written atomically (tmp, fsync, rename,
 * fsync dir).  At startup a running conf that differs from the safe one (a
 * change applied but never made safe) is rolled back to the safe one; after
 * a reboot (boot id changed) the safe conf is applied to the fresh links.
 *
 * setupNetworks runs on the worker pool, one at a time.  It applies the
 * change as one transaction: a failed step puts back everything changed
 * before it.  With options.connectivityCheck it then waits for a
 * Host.confirmConnectivity received after the change, up to
 * options.connectivityTimeout seconds (default 120), and rolls back without
 * one (VDSM's code 10).  options.commitOnSuccess makes the result safe.
 * It refuses to touch the device holding the address an engine is connected
 * through unless the connectivity check is armed.
 *
 * ipv6autoconf sets SLAAC (accept_ra, autoconf) on the network's device,
 * on or off as VDSM does; a nic a bridgeless network used gets its own
 * values back when released.
 *
 * Gaps (refused with code 21 naming the option, never silently ignored):
 * OVS switch, hostQos, dhcpv6 (true); bootproto=dhcp requests no
 * lease: the nic's own addresses and default route move onto the network
 * (what the engine's management network needs when the host already has
 * its address), and dhcpv4 is reported false. */
#ifndef VD_VDSMD_NET_H
#define VD_VDSMD_NET_H

#include "../vdsmd.h"
#include "../../rpc/rpc.h"

/* What the daemon hands net/ at startup (net/ includes no daemon header). */
struct net_deps {
	/* The port engines connect to (the bound one; 0: d->cfg.port): the
	 * management-network guard looks for connections to it. */
	unsigned engine_port;
};

/* Loads the persisted confs, restores/rolls back (see above), starts the
 * link monitor (|net|host_conn|no_id events); sets d->net.  deps may be
 * NULL (all defaults); it is copied.  The daemon plugs net_caps_write,
 * net_config_dirty and net_confirm into host/ (host_peers).  0 or vd_err. */
int net_init(struct vdsmd *d, const struct net_deps *deps);
void net_fini(struct vdsmd *d);
/* Daemon shutdown, before the worker pool stops: a setupNetworks waiting for
 * its confirmation rolls back and answers now. */
void net_stop(struct vdsmd *d);

/* Writes "networks", "bridges", "nics", "vlans", "bondings",
 * "nameservers" (the host's, /etc/resolv.conf), "supportsIPv6" and
 * "netConfigDirty" (keys and values) into
 * the object w is inside of:
 * Host.getCapabilities' network sections.  vdsmd is the struct vdsmd (the
 * signature of host_peers' write_net_caps).  One netlink dump
 * (~0.2 ms); thread-safe. */
void net_caps_write(void *vdsmd, struct vd_writer *w);
/* netConfigDirty (VDSM's semantics, net_priv.h): true from a
 * setupNetworks until it is made safe.  vdsmd is the struct vdsmd (the
 * signature of host_peers' net_config_dirty).  Thread-safe. */
bool net_config_dirty(void *vdsmd);
/* VDSM's supportsIPv6: an AF_INET6 socket can be made. */
bool net_ipv6_supported(void);
/* The bridge a VM NIC on VDSM network joins (the daemon hands it to virt/):
 * 0 with bridge[len] filled when net/ runs it as a bridged network (the
 * bridge has the network's name, as in VDSM), VD_EINVAL when the network
 * is bridgeless, VD_ENOENT when net/ has no such network.  Thread-safe. */
int net_network_bridge(struct vdsmd *d, const char *network, char *bridge, size_t len);
/* Host.confirmConnectivity: wakes a setupNetworks waiting for it. */
void net_confirm(struct vdsmd *d);

/* Handlers (app = the struct vdsmd); the verbs are declared in api/Host.yaml
 * (backend: net). */
extern const struct rpc_binding net_bindings[];

#endif
