"""Host networking (vdsmd/net/) against the real kernel, in network namespaces.

Every test makes two namespaces of its own: "host", where vdsmd runs (started
with `ip netns exec`), and "engine", where this test process sits while it
talks to vdsmd, like the oVirt engine.  veth pairs are the host's NICs:
eth0 (management, 192.0.2.1/26) is wired to the engine's eng0 (192.0.2.2/26);
eth1 and eth2 are free NICs.  Addresses come from 192.0.2.0/24 and
2001:db8::/32 and exist only inside the namespaces, which are deleted after
each test.  Without root (no namespaces) every test is skipped, not passed.
Nothing stays behind: each namespace's bind mount under /run/netns goes with
it (netns_del), and the bind mount of /run/netns on itself that the first
`ip netns add` makes (iproute2 never removes it) is undone when the process
exits, once no namespace is left in it, if it was not there before.
"""

import atexit
import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
import unittest
import uuid

import vdsmtest as vt

CLONE_NEWNET = 0x40000000
IP = shutil.which("ip") or "/usr/sbin/ip"
_libc = ctypes.CDLL(None, use_errno=True)
NETNS_DIR = "/run/netns"
MNT_DETACH = 2
# what Host.setupNetworks answers, as VDSM's Bridge (Host_setupNetworks: 'ret': 'status')
DONE = {"code": 0, "message": "Done"}


def _netns_dir_mounts():
    """How many mounts sit on /run/netns in this mount namespace."""
    try:
        with open("/proc/self/mountinfo") as f:
            return sum(1 for line in f if line.split()[4] == NETNS_DIR)
    except (OSError, IndexError):
        return 0


_NETNS_DIR_MOUNTS = _netns_dir_mounts()     # before any ip netns add of ours


def netns_del(name):
    """ip netns del name; its bind mount and file go even if ip failed."""
    subprocess.run([IP, "netns", "del", name], capture_output=True)
    path = os.path.join(NETNS_DIR, name)
    if os.path.lexists(path):
        _libc.umount2(path.encode(), MNT_DETACH)
        try:
            os.unlink(path)
        except OSError:
            pass


@atexit.register
def _undo_netns_dir_mount():
    """The first `ip netns add` bind-mounts /run/netns on itself (to make it
    shared) and nothing removes that: undo it if this process made it and
    no namespace is left (a plain umount, which fails while another
    process's namespace is mounted beneath)."""
    for _ in range(3):
        try:
            if _netns_dir_mounts() <= _NETNS_DIR_MOUNTS or os.listdir(NETNS_DIR):
                return
        except OSError:
            return
        if _libc.umount2(NETNS_DIR.encode(), 0) != 0:
            return


def _netns_problem():
    """None when this process can create network namespaces and run ip in
    them, else why not (the tests are then skipped with that reason)."""
    if os.geteuid() != 0 or not os.path.exists(IP):
        return "network namespaces need root and ip(8)"
    name = "vdtprobe%d" % os.getpid()
    r = subprocess.run([IP, "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return "ip netns add failed: " + r.stderr.strip()
    try:
        # entering one needs a mount namespace of its own, which fails in a
        # chroot whose / is no mount point
        r = subprocess.run([IP, "-n", name, "link", "set", "lo", "up"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return "ip -n cannot enter a namespace here: " + r.stderr.strip()
    finally:
        netns_del(name)
    return None


NETNS_PROBLEM = _netns_problem()
CAN_NETNS = NETNS_PROBLEM is None


def _kernel_has(kind):
    """Whether this kernel creates links of kind (bond, vlan): probed in a
    throw-away namespace (a kernel built without CONFIG_BONDING or
    CONFIG_VLAN_8021Q cannot run those tests: they are skipped)."""
    if not CAN_NETNS:
        return False
    name = "vdtk%d" % os.getpid()
    subprocess.run([IP, "netns", "add", name], capture_output=True)
    try:
        if kind == "vlan":
            subprocess.run([IP, "-n", name, "link", "add", "p0", "type", "veth", "peer",
                            "name", "p1"], capture_output=True)
            args = ["link", "add", "link", "p0", "name", "p0.5", "type", "vlan", "id", "5"]
        else:
            args = ["link", "add", "k0", "type", kind]
        return subprocess.run([IP, "-n", name] + args, capture_output=True).returncode == 0
    finally:
        netns_del(name)


HAS_BOND = _kernel_has("bond")
HAS_VLAN = _kernel_has("vlan")


def ip(*args, ns=None, check=True):
    cmd = [IP] + (["-n", ns] if ns else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("%s: %s" % (" ".join(cmd), r.stderr))
    return r.stdout


def _api():
    path = os.path.join(vt.VDSMD_BUILD, "gen", "api.json")
    with open(path) as f:
        return json.load(f)


def conforms(value, texpr, api, where="result"):
    """Check value against a type expression of build/gen/api.json (the
    api/ schema); raises AssertionError naming the path."""
    t = texpr["t"]
    if t == "list":
        assert isinstance(value, list), "%s: not a list" % where
        for i, v in enumerate(value):
            conforms(v, texpr["of"], api, "%s[%d]" % (where, i))
        return
    if t == "map":
        assert isinstance(value, dict), "%s: not an object" % where
        for k, v in value.items():
            conforms(v, texpr["of"], api, "%s.%s" % (where, k))
        return
    if t == "union":
        errs = []
        for alt in texpr["of"]:
            try:
                return conforms(value, alt, api, where)
            except AssertionError as e:
                errs.append(str(e))
        raise AssertionError("; ".join(errs))
    name = texpr["name"]
    simple = {"string": str, "boolean": bool, "object": dict, "array": list}
    if name in simple:
        assert isinstance(value, simple[name]), "%s: not %s: %r" % (where, name, value)
    elif name in ("int", "uint"):
        assert isinstance(value, int) and not isinstance(value, bool), "%s: not int" % where
    elif name == "numstring":
        assert isinstance(value, str) and value.isdigit(), "%s: not numstring" % where
    elif name in api["types"]:
        ty = api["types"][name]
        if ty["kind"] == "object":
            assert isinstance(value, dict), "%s: not an object" % where
            for fname, f in ty.get("fields", {}).items():
                if fname in value:
                    conforms(value[fname], f["type"], api, where + "." + fname)
                else:
                    assert not f["required"], "%s: %s missing" % (where, fname)
            if not ty.get("open"):
                extra = set(value) - set(ty.get("fields", {}))
                assert not extra, "%s: unexpected keys %s" % (where, sorted(extra))
        elif ty["kind"] == "map":
            conforms(value, {"t": "map", "of": ty["of"]}, api, where)


def setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns " + path)
    finally:
        os.close(fd)


class NsDaemon(vt.Daemon):
    """vdsmd inside the host namespace, listening on every address of it."""

    def __init__(self, ns, state_dir):
        self.ns = ns
        self.state_dir = state_dir
        super().__init__("--allow-plaintext", "yes", "--net-state-dir", state_dir,
                         host="192.0.2.1", start=False)
        self.start()

    def command(self):
        cmd = super().command()
        i = cmd.index("--listen")
        cmd[i + 1] = "0.0.0.0"
        return [IP, "netns", "exec", self.ns] + cmd


@unittest.skipUnless(CAN_NETNS, NETNS_PROBLEM or "")
class HostNet(unittest.TestCase):
    def setUp(self):
        tag = uuid.uuid4().hex[:6]
        self.hns, self.ens = "vdh" + tag, "vde" + tag
        self.orig = os.open("/proc/self/ns/net", os.O_RDONLY)
        ip("netns", "add", self.hns)
        self.addCleanup(netns_del, self.hns)
        ip("netns", "add", self.ens)
        self.addCleanup(netns_del, self.ens)
        for ns in (self.hns, self.ens):
            ip("link", "set", "lo", "up", ns=ns)
        for i, peer in ((0, "eng0"), (1, "peer1"), (2, "peer2")):
            ip("link", "add", "eth%d" % i, "type", "veth", "peer", "name", peer, ns=self.hns)
            ip("link", "set", peer, "netns", self.ens, ns=self.hns)
            ip("link", "set", "eth%d" % i, "up", ns=self.hns)
            ip("link", "set", peer, "up", ns=self.ens)
        ip("addr", "add", "192.0.2.1/26", "dev", "eth0", ns=self.hns)
        ip("addr", "add", "192.0.2.2/26", "dev", "eng0", ns=self.ens)
        # this process talks from the engine side
        setns("/var/run/netns/" + self.ens)
        self.addCleanup(self._leave)
        self.state = os.path.join(vt.tempfile.mkdtemp(prefix="vdsmnet-"), "netconf")
        self.addCleanup(shutil.rmtree, os.path.dirname(self.state), True)
        self.d = NsDaemon(self.hns, self.state)
        self.addCleanup(self._stop)
        self.assertTrue(self.d.wait_ready(20), self.d.log_lines()[-20:])
        self.c = self.client()

    def _leave(self):
        setns("/proc/self/fd/%d" % self.orig)
        os.close(self.orig)

    def _stop(self):
        if self.d.proc:
            self.d.stop()
        shutil.rmtree(self.d.tmp, ignore_errors=True)

    def client(self):
        c = self.d.stomp()
        self.addCleanup(c.close)
        c.connect()
        c.subscribe(vt.RESPONSES, "r")
        return c

    def call(self, method, params=None, timeout=30, c=None):
        return (c or self.c).call(method, params or {}, timeout=timeout)

    def ok(self, method, params=None, timeout=30):
        r = self.call(method, params, timeout)
        self.assertIn("result", r, r)
        return r["result"]

    def setup_networks(self, networks, bondings=None, options=None, timeout=30):
        return self.call("Host.setupNetworks", {"networks": networks,
                                                "bondings": bondings or {},
                                                "options": options or {}}, timeout)

    def netcaps(self):
        r = self.ok("Host.getNetworkCapabilities")
        api = _api()
        conforms(r, api["verbs"]["Host.getNetworkCapabilities"]["result"], api)
        return r

    def link(self, name):
        out = ip("-j", "-d", "link", "show", name, ns=self.hns, check=False)
        return json.loads(out)[0] if out.strip() else None

    def addrs(self, name):
        out = ip("-j", "addr", "show", "dev", name, ns=self.hns, check=False)
        if not out.strip():
            return []
        return ["%s/%d" % (a["local"], a["prefixlen"]) for a in json.loads(out)[0]["addr_info"]
                if a.get("scope") != "link"]

    def assert_pristine(self):
        """The host namespace as setUp left it."""
        for dev in ("blue", "red", "bond0", "ovirtmgmt"):
            self.assertIsNone(self.link(dev), dev)
        for nic in ("eth1", "eth2"):
            link = self.link(nic)
            self.assertNotIn("master", link, nic)
            self.assertEqual(link["mtu"], 1500)
            self.assertEqual(self.addrs(nic), [])
        self.assertEqual(self.addrs("eth0"), ["192.0.2.1/26"])

    BLUE = {"nic": "eth1", "bridged": True, "ipaddr": "192.0.2.65",
            "netmask": "255.255.255.224", "ipv6addr": "2001:db8:1::1/64", "switch": "legacy"}

    def wait_host_conn(self, ev, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            f = ev.read_frame(max(0.1, deadline - time.monotonic()))
            if f.cmd == "MESSAGE" and f.json().get("method") == "|net|host_conn|no_id":
                self.assertIsInstance(f.json()["params"]["notify_time"], int)
                return
        self.fail("no |net|host_conn|no_id event")

    # ---- tests ------------------------------------------------------------

    def test_bridge_over_nic_static_address_and_event(self):
        ev = self.client()
        ev.subscribe(vt.EVENTS, "ev")
        self.assertEqual(self.ok("Host.setupNetworks", {"networks": {"blue": self.BLUE},
                                                        "bondings": {}, "options": {}}), DONE)
        br = self.link("blue")
        self.assertEqual(br["linkinfo"]["info_kind"], "bridge")
        self.assertEqual(self.link("eth1")["master"], "blue")
        self.assertIn("192.0.2.65/27", self.addrs("blue"))
        self.assertIn("2001:db8:1::1/64", self.addrs("blue"))
        caps = self.netcaps()
        net = caps["networks"]["blue"]
        self.assertEqual(net["iface"], "blue")
        self.assertIs(net["bridged"], True)
        self.assertEqual(net["switch"], "legacy")
        self.assertEqual(net["addr"], "192.0.2.65")
        self.assertEqual(net["netmask"], "255.255.255.224")
        self.assertIn("2001:db8:1::1/64", net["ipv6addrs"])
        self.assertEqual(caps["bridges"]["blue"]["ports"], ["eth1"])
        self.assertEqual(caps["bridges"]["blue"]["stp"], "off")
        self.assertIn("eth1", caps["nics"])
        self.assertIsInstance(caps["nics"]["eth1"]["speed"], int)
        # the capabilities of Host.getCapabilities carry the same sections
        full = self.ok("Host.getCapabilities")
        self.assertEqual(full["networks"]["blue"]["iface"], "blue")
        self.assertIn("blue", full["bridges"])
        stats = self.ok("Host.getNetworkStatistics")
        api = _api()
        conforms(stats, api["verbs"]["Host.getNetworkStatistics"]["result"], api)
        self.assertIn("blue", stats["network"])
        self.assertIsInstance(stats["network"]["eth1"]["rx"], str)
        # |net|host_conn|no_id tells the engine to refresh capabilities: after
        # setupNetworks, and when a managed network's link changes by itself
        self.wait_host_conn(ev)
        while True:  # drain what the change itself caused
            try:
                ev.read_frame(1.0)
            except TimeoutError:
                break
        ip("link", "set", "blue", "down", ns=self.hns)
        self.wait_host_conn(ev)

    @unittest.skipUnless(HAS_BOND and HAS_VLAN,
                         "this kernel has no bonding or no 802.1Q VLAN support")
    def test_vlan_over_bond(self):
        r = self.setup_networks(
            {"red": {"bonding": "bond0", "vlan": 10, "bridged": "false",
                     "ipaddr": "192.0.2.97", "prefix": 27}},
            {"bond0": {"nics": ["eth2", "eth1"], "options": "mode=1 miimon=100"}})
        self.assertIn("result", r, r)
        self.assertEqual(self.link("bond0")["linkinfo"]["info_kind"], "bond")
        self.assertEqual(self.link("eth1")["master"], "bond0")
        self.assertEqual(self.link("eth2")["master"], "bond0")
        vl = self.link("bond0.10")
        self.assertEqual(vl["linkinfo"]["info_data"]["id"], 10)
        self.assertEqual(self.addrs("bond0.10"), ["192.0.2.97/27"])
        caps = self.netcaps()
        self.assertEqual(caps["networks"]["red"]["iface"], "bond0.10")
        self.assertIs(caps["networks"]["red"]["bridged"], False)
        self.assertEqual(caps["networks"]["red"]["vlanid"], 10)
        bond = caps["bondings"]["bond0"]
        self.assertEqual(sorted(bond["slaves"]), ["eth1", "eth2"])
        self.assertEqual(bond["opts"]["mode"], "1")
        self.assertEqual(bond["opts"]["miimon"], "100")
        self.assertEqual(caps["vlans"]["bond0.10"], dict(caps["vlans"]["bond0.10"],
                                                         vlanid=10, iface="bond0"))
        # remove both in one call
        r = self.setup_networks({"red": {"remove": True}}, {"bond0": {"remove": "true"}})
        self.assertIn("result", r, r)
        self.assert_pristine()

    @unittest.skipIf(HAS_VLAN, "this kernel has 802.1Q VLANs (test_vlan_over_bond covers them)")
    def test_vlan_unsupported_by_the_kernel_rolls_back(self):
        # built after "blue": the kernel refuses the VLAN device
        r = self.setup_networks({"blue": self.BLUE,
                                 "red": {"nic": "eth2", "vlan": 10, "bridged": True}})
        self.assertEqual(r["error"]["code"], 26, r)
        self.assertIn("eth2.10", r["error"]["message"])
        self.assert_pristine()
        self.assertEqual(self.netcaps()["networks"], {})

    def test_mtu_change_and_removal(self):
        self.assertIn("result", self.setup_networks({"blue": self.BLUE}))
        self.assertEqual(self.link("blue")["mtu"], 1500)
        self.assertIn("result", self.setup_networks({"blue": dict(self.BLUE, mtu=9000)}))
        self.assertEqual(self.link("blue")["mtu"], 9000)
        self.assertEqual(self.link("eth1")["mtu"], 9000)
        caps = self.netcaps()
        self.assertEqual(caps["networks"]["blue"]["mtu"], 9000)
        self.assertEqual(caps["nics"]["eth1"]["mtu"], 9000)
        self.assertIn("result", self.setup_networks({"blue": {"remove": True}}))
        self.assert_pristine()
        self.assertEqual(self.netcaps()["networks"], {})
        r = self.setup_networks({"blue": {"remove": True}})
        self.assertEqual(r["error"]["code"], 27, r)

    def test_failed_step_rolls_back_everything(self):
        # "zz" exists as a veth, not a bridge: building the bridge "zz" fails
        # after "blue" (bridge, v4+v6 addresses, default route, MTU) and the
        # nics were already taken over.
        ip("link", "add", "zz", "type", "veth", "peer", "name", "zzp", ns=self.hns)
        r = self.setup_networks(
            {"blue": dict(self.BLUE, mtu=9000, gateway="192.0.2.66", defaultRoute=True),
             "zz": {"nic": "eth2", "bridged": True, "ipaddr": "192.0.2.129",
                    "netmask": "255.255.255.224"}})
        self.assertEqual(r["error"]["code"], 27, r)
        self.assertIn("zz", r["error"]["message"])
        self.assert_pristine()
        self.assertEqual(self.link("zz")["linkinfo"]["info_kind"], "veth")
        self.assertEqual(ip("route", "show", "default", ns=self.hns).strip(), "")
        self.assertEqual(self.netcaps()["networks"], {})

    def test_missing_nic_changes_nothing(self):
        r = self.setup_networks({"blue": dict(self.BLUE, nic="nosuch0")})
        self.assertEqual(r["error"]["code"], 23, r)
        self.assertIn("nosuch0", r["error"]["message"])
        self.assert_pristine()

    def test_connectivity_check_rolls_back_without_confirm(self):
        t0 = time.monotonic()
        r = self.setup_networks({"blue": self.BLUE}, options={
            "connectivityCheck": "true", "connectivityTimeout": 2})
        self.assertEqual(r["error"]["code"], 10, r)
        self.assertGreaterEqual(time.monotonic() - t0, 2.0)
        self.assert_pristine()
        self.assertEqual(self.netcaps()["networks"], {})

    def _setup_with_confirm(self, networks, options, timeout=20):
        """setupNetworks on one connection while a second one polls
        Host.confirmConnectivity, as the engine does."""
        rid = self.c.request("Host.setupNetworks", {"networks": networks, "bondings": {},
                                                    "options": options})
        poll = self.client()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.assertEqual(self.call("Host.confirmConnectivity", c=poll)["result"], True)
            try:
                f = self.c.read_frame(0.3)
            except (TimeoutError, OSError, EOFError, AssertionError):
                continue
            if f.cmd == "MESSAGE" and f.json().get("id") == rid:
                return f.json()
        self.fail("no setupNetworks answer")

    def test_confirm_keeps_the_change(self):
        r = self._setup_with_confirm({"blue": self.BLUE},
                                     {"connectivityCheck": True, "connectivityTimeout": 10})
        self.assertEqual(r.get("result"), DONE, r)
        self.assertEqual(self.link("eth1")["master"], "blue")
        self.assertIn("blue", self.netcaps()["networks"])

    def test_management_address_needs_the_check(self):
        r = self.setup_networks({"ovirtmgmt": {"nic": "eth0", "bridged": True,
                                               "bootproto": "dhcp"}})
        self.assertEqual(r["error"]["code"], 21, r)
        self.assertIn("192.0.2.1", r["error"]["message"])
        self.assert_pristine()

    def test_safe_config_survives_kill_and_restart(self):
        self.assertIn("result", self.setup_networks({"blue": self.BLUE}))
        self.assertEqual(self.ok("Host.setSafeNetworkConfig"), True)
        self.assertTrue(os.path.exists(os.path.join(self.state, "safe.json")))
        vt.restart(self.d, signal.SIGKILL)
        self.assertTrue(self.d.wait_ready(20))
        self.c = self.client()
        self.assertEqual(self.link("eth1")["master"], "blue")
        self.assertIn("192.0.2.65/27", self.addrs("blue"))
        self.assertEqual(self.netcaps()["networks"]["blue"]["addr"], "192.0.2.65")
        # and it is still managed: removal works after the restart
        self.assertIn("result", self.setup_networks({"blue": {"remove": True}}))
        self.assert_pristine()

    def test_unsafe_change_is_undone_at_restart(self):
        self.assertIn("result", self.setup_networks(
            {"blue": dict(self.BLUE, mtu=9000),
             "red": {"nic": "eth2", "bridged": False, "ipaddr": "192.0.2.97", "prefix": 27}}))
        self.assertEqual(self.link("eth1")["master"], "blue")
        self.assertEqual(self.addrs("eth2"), ["192.0.2.97/27"])
        vt.restart(self.d, signal.SIGKILL)
        self.assertTrue(self.d.wait_ready(20))
        self.assertTrue(self.d.wait_log("restoring the safe network configuration", 1),
                        self.d.log_lines()[-10:])
        self.c = self.client()
        self.assert_pristine()
        self.assertEqual(self.netcaps()["networks"], {})

    def test_unreadable_safe_file_leaves_links_alone(self):
        self.assertIn("result", self.setup_networks({"blue": self.BLUE}))
        with open(os.path.join(self.state, "safe.json"), "w") as f:
            f.write('{"version":1,"networks":{"blue":')
        vt.restart(self.d, signal.SIGKILL)
        self.assertTrue(self.d.wait_ready(20))
        self.assertTrue(self.d.wait_log("safe.json unreadable", 1), self.d.log_lines()[-10:])
        self.c = self.client()
        self.assertEqual(self.link("eth1")["master"], "blue")
        self.assertIn("192.0.2.65/27", self.addrs("blue"))
        self.assertIn("blue", self.netcaps()["networks"])

    def test_engine_connect_flow_creates_bridged_ovirtmgmt(self):
        """engine-flows.json, connect flow step 3, then steps 4 and the save."""
        step3 = {"ovirtmgmt": {"nic": "eth0", "mtu": 1500, "bridged": "true",
                               "bootproto": "dhcp", "defaultRoute": True,
                               "switch": "legacy"}}
        r = self._setup_with_confirm(step3, {"connectivityCheck": "true",
                                             "commitOnSuccess": True,
                                             "connectivityTimeout": 120})
        self.assertEqual(r.get("result"), DONE, r)
        caps = self.ok("Host.getCapabilities")
        net = caps["networks"]["ovirtmgmt"]
        self.assertEqual(net["switch"], "legacy")
        self.assertIn(net["bridged"], (True, "true"))
        self.assertEqual(net["iface"], "ovirtmgmt")
        self.assertEqual(net["addr"], "192.0.2.1")
        self.assertEqual(caps["bridges"]["ovirtmgmt"]["addr"], "192.0.2.1")
        self.assertEqual(caps["bridges"]["ovirtmgmt"]["ports"], ["eth0"])
        self.assertIn("eth0", caps["nics"])
        self.assertIsInstance(caps["nameservers"], list)
        for key in ("networks", "bridges", "nics", "vlans", "bondings"):
            self.assertIsInstance(caps[key], dict, key)
        self.assertEqual(self.ok("Host.setSafeNetworkConfig"), True)
        with open(os.path.join(self.state, "safe.json")) as f:
            self.assertIn("ovirtmgmt", json.load(f)["networks"])
        self.assertEqual(self.link("eth0")["master"], "ovirtmgmt")
        self.assertEqual(self.addrs("eth0"), [])
        self.assertEqual(self.addrs("ovirtmgmt"), ["192.0.2.1/26"])

    def dirty(self):
        """netConfigDirty as getCapabilities, getNetworkCapabilities and
        getStats report it (VDSM's str(bool)): one value, or the test fails."""
        seen = {self.ok("Host.getCapabilities")["netConfigDirty"],
                self.netcaps()["netConfigDirty"], self.ok("Host.getStats")["netConfigDirty"]}
        self.assertEqual(len(seen), 1, seen)
        return seen.pop()

    # ovirt-engine's HostSetupNetworksVDSCommand for the management network
    # of a new host: bridged as Boolean.toString, STP "yes"/"no", the MTU
    # (an int today, a string in older engines), dhcpv6/ipv6autoconf as
    # booleans, options.connectivityCheck as Boolean.toString
    ENGINE_MGMT = {"nic": "eth0", "mtu": "1500", "bridged": "true", "STP": "no",
                   "bootproto": "dhcp", "defaultRoute": True, "dhcpv6": False,
                   "ipv6autoconf": False, "switch": "legacy"}

    def test_engine_forms_flow_and_net_config_dirty(self):
        """setupNetworks in the engine's forms -> confirmConnectivity ->
        setSafeNetworkConfig, with netConfigDirty "True" in between and
        lastClientIface following the engine's address onto the bridge."""
        caps = self.ok("Host.getCapabilities")
        self.assertEqual(caps["lastClientIface"], "eth0")    # we talk to 192.0.2.1
        self.assertIs(caps["supportsIPv6"], True)
        self.assertIs(self.netcaps()["supportsIPv6"], True)
        self.assertEqual(self.dirty(), "False")
        r = self._setup_with_confirm({"ovirtmgmt": self.ENGINE_MGMT},
                                     {"connectivityCheck": "true", "commitOnSuccess": False,
                                      "connectivityTimeout": 120})
        self.assertEqual(r.get("result"), DONE, r)
        self.assertEqual(self.link("eth0")["master"], "ovirtmgmt")
        self.assertEqual(self.addrs("ovirtmgmt"), ["192.0.2.1/26"])
        caps = self.ok("Host.getCapabilities")
        self.assertEqual(caps["lastClientIface"], "ovirtmgmt")
        self.assertEqual(caps["bridges"]["ovirtmgmt"]["stp"], "off")
        self.assertEqual(caps["networks"]["ovirtmgmt"]["mtu"], 1500)
        self.assertIs(caps["networks"]["ovirtmgmt"]["ipv6autoconf"], False)
        self.assertEqual(self.sysctl6("ovirtmgmt", "autoconf"), "0")
        self.assertEqual(self.dirty(), "True")
        self.assertEqual(self.ok("Host.setSafeNetworkConfig"), True)
        self.assertEqual(self.dirty(), "False")
        # a bad form is VDSM's code 21, and marks the configuration dirty as
        # VDSM's API.setupNetworks does before it tries anything
        r = self.setup_networks({"blue": dict(self.BLUE, STP="maybe")})
        self.assertEqual(r["error"]["code"], 21, r)
        self.assertIn("maybe", r["error"]["message"])
        self.assertIsNone(self.link("blue"))
        self.assertEqual(self.dirty(), "True")
        # a restart starts clean (VDSM's clientIF), the safe conf in place
        vt.restart(self.d, signal.SIGKILL)
        self.assertTrue(self.d.wait_ready(20))
        self.c = self.client()
        self.assertEqual(self.dirty(), "False")
        self.assertEqual(self.link("eth0")["master"], "ovirtmgmt")
        # commitOnSuccess saves it: clean right after
        r = self._setup_with_confirm(
            {"blue": {"nic": "eth1", "bridged": "false", "vlan": "", "mtu": 9000,
                      "ipaddr": "192.0.2.65", "prefix": "27", "switch": "legacy"}},
            {"connectivityCheck": "false", "commitOnSuccess": True})
        self.assertEqual(r.get("result"), DONE, r)
        self.assertEqual(self.addrs("eth1"), ["192.0.2.65/27"])
        self.assertEqual(self.link("eth1")["mtu"], 9000)
        self.assertEqual(self.dirty(), "False")

    def sysctl6(self, dev, key, value=None):
        """/proc/sys/net/ipv6/conf/<dev>/<key> in the host namespace."""
        path = "/proc/sys/net/ipv6/conf/%s/%s" % (dev, key)
        cmd = [IP, "netns", "exec", self.hns, "sh", "-c",
               ("echo %s > %s" % (value, path)) if value is not None else "cat " + path]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    def test_ipv6autoconf_on_off_and_given_back(self):
        """ipv6autoconf (the engine's Boolean) turns SLAAC on or off on the
        network's device, as VDSM's backend does; a nic a bridgeless network
        borrowed gets its own setting back when released."""
        for key in ("accept_ra", "autoconf"):
            self.sysctl6("eth2", key, 1)
        r = self.setup_networks({
            "blue": dict(self.BLUE, ipv6autoconf=True, dhcpv6=False),
            "red": {"nic": "eth2", "bridged": "false", "ipv6autoconf": "false",
                    "switch": "legacy"}})
        self.assertIn("result", r, r)
        self.assertEqual((self.sysctl6("blue", "accept_ra"), self.sysctl6("blue", "autoconf")),
                         ("1", "1"))
        self.assertEqual((self.sysctl6("eth2", "accept_ra"), self.sysctl6("eth2", "autoconf")),
                         ("0", "0"))
        caps = self.netcaps()
        self.assertIs(caps["networks"]["blue"]["ipv6autoconf"], True)
        self.assertIs(caps["bridges"]["blue"]["ipv6autoconf"], True)
        self.assertIs(caps["networks"]["red"]["ipv6autoconf"], False)
        self.assertIs(caps["nics"]["eth2"]["ipv6autoconf"], False)
        # dhcpv6 stays a gap: refused, nothing changes
        r = self.setup_networks({"blue": dict(self.BLUE, dhcpv6=True)})
        self.assertEqual(r["error"]["code"], 21, r)
        self.assertEqual(self.sysctl6("blue", "autoconf"), "1")
        r = self.setup_networks({"blue": {"remove": "true"}, "red": {"remove": "true"}})
        self.assertIn("result", r, r)
        self.assert_pristine()
        self.assertEqual((self.sysctl6("eth2", "accept_ra"), self.sysctl6("eth2", "autoconf")),
                         ("1", "1"))

    def test_engine_forms_rollback_leaves_dirty(self):
        """No confirmation: rolled back (code 10), and still dirty, as VDSM
        (its flag is only cleared by a save)."""
        r = self.setup_networks({"blue": dict(self.BLUE, bridged="true", STP="yes", mtu="1500")},
                                options={"connectivityCheck": "True",
                                         "connectivityTimeout": "1"})
        self.assertEqual(r["error"]["code"], 10, r)
        self.assert_pristine()
        self.assertEqual(self.dirty(), "True")
        r = self.setup_networks({"blue": self.BLUE},
                                options={"connectivityCheck": "true",
                                         "connectivityTimeout": "soon"})
        self.assertEqual(r["error"]["code"], 21, r)
        self.assertIn("connectivityTimeout", r["error"]["message"])
        self.assert_pristine()
        self.assertEqual(self.ok("Host.setSafeNetworkConfig"), True)
        self.assertEqual(self.dirty(), "False")

    def vm_with_nic(self, vm, network):
        """VM.create with the engine's XML: one NIC on network (the engine
        names it as the source bridge and in the metadata)."""
        xml = ('<?xml version="1.0" encoding="UTF-8"?><domain type="kvm" '
               'xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>n%s</name><uuid>%s</uuid>'
               '<memory>65536</memory><vcpu>1</vcpu><os><type arch="x86_64">hvm</type></os>'
               '<devices><interface type="bridge"><model type="virtio"/>'
               '<source bridge="%s"/><mac address="00:1a:4a:16:01:61"/>'
               '<alias name="ua-nic"/></interface></devices><metadata><ovirt-vm:vm>'
               '<ovirt-vm:device mac_address="00:1a:4a:16:01:61"><ovirt-vm:network>%s'
               '</ovirt-vm:network></ovirt-vm:device></ovirt-vm:vm></metadata></domain>'
               % (vm[-6:], vm, network, network))
        return self.call("VM.create", {"vmID": vm, "vmParams": {"vmId": vm, "xml": xml}})

    def test_vm_nic_network_is_asked_of_net(self):
        """virt asks net/ (through the daemon's interface) for a VM NIC's
        bridge: a bridged network gives its bridge, a bridgeless one or an
        unknown name is VDSM's code 9 (VM.create) / 49 (VM.hotplugNic); a
        Linux bridge net/ does not manage is used under its own name, as
        VDSM hands the engine's bridge to libvirt unchanged."""
        red = {"nic": "eth2", "bridged": False, "switch": "legacy"}
        self.assertEqual(self.setup_networks({"blue": self.BLUE, "red": red}).get("result"), DONE)
        caps = self.netcaps()
        self.assertIs(caps["networks"]["blue"]["bridged"], True)
        self.assertIs(caps["networks"]["red"]["bridged"], False)
        vm1 = "0e000000-0000-4000-8000-000000000001"
        self.assertIn("result", self.vm_with_nic(vm1, "blue"))
        x = self.ok("Host.dumpxmls", {"vmList": [vm1]})[vm1]
        self.assertIn("<source bridge='blue'/>", x)
        vm2 = "0e000000-0000-4000-8000-000000000002"
        for net in ("red", "ghost"):
            r = self.vm_with_nic(vm2, net)
            self.assertEqual(r.get("error", {}).get("code"), 9, r)
            self.assertIn(net, r["error"]["message"])
        # net/ decides, not the links: a bridge named like the bridgeless
        # network does not make it a VM network
        ip("link", "add", "red", "type", "bridge", ns=self.hns)
        r = self.vm_with_nic(vm2, "red")
        self.assertEqual(r.get("error", {}).get("code"), 9, r)
        self.assertIn("not a bridged", r["error"]["message"])
        ip("link", "del", "red", ns=self.hns)
        nic = ('<hotplug><devices><interface type="bridge"><source bridge="ghost"/>'
               '<mac address="00:1a:4a:16:01:62"/></interface></devices></hotplug>')
        r = self.call("VM.hotplugNic", {"vmID": vm1, "params": {"vmId": vm1, "xml": nic}})
        self.assertEqual(r.get("error", {}).get("code"), 49, r)
        # a bridge of the host that is no VDSM network
        ip("link", "add", "extbr", "type", "bridge", ns=self.hns)
        self.assertIn("result", self.vm_with_nic(vm2, "extbr"))
        x = self.ok("Host.dumpxmls", {"vmList": [vm2]})[vm2]
        self.assertIn("<source bridge='extbr'/>", x)
        for vm in (vm1, vm2):
            self.ok("VM.destroy", {"vmID": vm})
        r = self.setup_networks({"blue": {"remove": True}, "red": {"remove": True}})
        self.assertEqual(r.get("result"), DONE, r)


if __name__ == "__main__":
    unittest.main()
