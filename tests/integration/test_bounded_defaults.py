"""Hostile input, round two (issue 27): each attack of the issue against a
daemon at its default settings (memory_budget 256M, 64 connections per
address, 2 pending incoming migrations), with the bystander of
test_bounded.Attack pinging from its own process.  Every case prints a
"BOUNDED" line; the common bounds are a peak RSS under 1 GiB, a bystander
p99 under 1 s, no ping lost and new clients served afterwards.

Attackers that need more connections than one address may hold connect
from 127.0.0.2 and up (all of 127/8 is loopback), as an attacker with a few
addresses would."""

import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import unittest

import hostile
import vdsmtest as vt
from test_bounded import BASELINE, SANITIZED, Attack, closed, proc_status

GiB = 1 << 30
DEFAULT_BUDGET = 256 << 20
BLANK = "00000000-0000-0000-0000-000000000000"


def metric(d, name):
    text = d.http("GET", "/metrics")[2].decode()
    m = re.search(r"\n%s (\d+)" % re.escape(name), text)
    return int(m.group(1)) if m else None


class Defaults(Attack):
    GUARD = False
    BUDGET_LIMIT = DEFAULT_BUDGET
    RSS_LIMIT = GiB

    def stomp_conn(self, src=None):
        c = vt.Conn(self.sock(src=src))
        c.sock.settimeout(30)
        self.assertEqual(c.connect().cmd, "CONNECTED")
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        return c


def ping_body(s):
    return '{"jsonrpc":"2.0","method":"Host.ping2","id":1,"params":{"x":"%s"}}' % s


class EscapeScan(Defaults):
    def test_escape_heavy_strings_cost_like_plain_ones(self):
        """2 MiB strings of "\\n" escapes cost at most 3x plain strings of the
        same size over the whole request path (STOMP and POST /jsonrpc,
        valid and invalid JSON); the bystander never waits 100 ms.  (The
        value count before decoding searched the closing quote again after
        every backslash: 0.8 s for 512 KiB, 44 s for 2 MiB.)"""
        size = 2 << 20
        plain, esc = "a" * size, "\\n" * (size // 2)
        c = self.stomp_conn()
        kinds = {}
        for name, body in (("plain", ping_body(plain)), ("escapes", ping_body(esc)),
                           ("plain_invalid", ping_body(plain)[:-3]),
                           ("escapes_invalid", ping_body(esc)[:-3])):
            kinds[name] = hostile.send_frame(body=body)
        times = {k: [] for k in kinds}
        codes = {}
        for _ in range(7):
            for k, f in kinds.items():
                t0 = time.monotonic()
                c.send(f)
                resp = c.read_frame(60).json()
                times[k].append(time.monotonic() - t0)
                codes[k] = resp.get("error", {}).get("code", "ok")
        # HTTP's two kinds take turns too, so a burst of load on the machine
        # falls on both (three plain, then three escapes, read 3.3x once)
        http = {"http_plain": [], "http_escapes": []}
        for _ in range(5):
            for k, body in (("http_plain", ping_body(plain)), ("http_escapes", ping_body(esc))):
                t0 = time.monotonic()
                st, _, out = self.d.http("POST", "/jsonrpc", body,
                                         {"Content-Type": "application/json"})
                http[k].append(time.monotonic() - t0)
                codes[k] = st, json.loads(out).get("result")
        med = {k: statistics.median(v) for k, v in list(times.items()) + list(http.items())}
        ratio = {"stomp": med["escapes"] / med["plain"],
                 "stomp_invalid": med["escapes_invalid"] / med["plain_invalid"],
                 "http": med["http_escapes"] / med["http_plain"]}
        samples = self.pinger_samples()
        worst = max(s[1] for s in samples if s[0] >= self.t_attack)
        new = self.new_client_ok()
        self.finish("escapes_2MiB", bystander_worst_ms="%.1f" % (worst * 1e3), new_conn_s=new,
                    **{"median_%s_ms" % k: "%.1f" % (v * 1e3) for k, v in med.items()},
                    **{"ratio_" + k: "%.2f" % v for k, v in ratio.items()})
        self.assertEqual(codes["plain"], "ok")
        self.assertEqual(codes["escapes"], "ok")
        self.assertEqual(codes["plain_invalid"], -32700)
        self.assertEqual(codes["escapes_invalid"], -32700)
        self.assertEqual(codes["http_escapes"], (200, True))
        # 3x is the optimized build's bound; under ASan (make memcheck) the
        # escape path's instrumentation costs more than the plain one's (seen:
        # 3.5x over HTTP on a loaded machine), so there the bound only has to
        # catch a quadratic scan again (2 MiB of escapes took 44 s: ~1000x)
        bound = 10.0 if SANITIZED else 3.0
        for k, v in ratio.items():
            self.assertLessEqual(v, bound, "%s: escapes cost %.2fx plain" % (k, v))
        if not SANITIZED:
            self.assertLess(worst, 0.1, "the bystander waited %.0f ms" % (worst * 1e3))

    def pinger_samples(self):
        """Stop the bystander and keep its samples for finish()."""
        samples = self.pinger.stop()
        self.pinger = _Done(samples)
        return samples


class _Done:
    """A stopped pinger: stop() gives its samples again."""

    def __init__(self, samples):
        self.samples = samples

    def stop(self):
        return self.samples


class FanOut(Defaults):
    def test_send_to_300_subscribers_that_never_read(self):
        """300 subscriber connections (five source addresses) that never
        read and one 12 MiB SEND to their topic: refused whole (ERROR, the
        sender stays connected), nothing queued; a SEND that fits reaches
        every one.  (It was copied into all 300 before anything was
        charged: 5.05 GB charged under a 256 MiB budget, 2.03 GB RSS.)"""
        subs = []
        for i in range(300):
            s = self.sock(rcvbuf=4096, src="127.0.0.%d" % (2 + i // 60))
            s.sendall(self.connect_frames() +
                      vt.frame("SUBSCRIBE", [("destination", "hostile.fan"), ("id", "f")]))
            subs.append(s)
        time.sleep(0.5)
        c = self.stomp_conn()
        big = b"x" * (12 << 20)
        c.send_frame("SEND", [("destination", "hostile.fan"), ("receipt", "big")], big)
        f = c.read_frame(30)
        refused = metric(self.d, "vdsmd_stomp_fanout_refused_total")
        c.send_frame("SEND", [("destination", "hostile.fan"), ("receipt", "small")], b"y" * 1000)
        g = c.read_frame(30)
        got = hostile.Bulk(vt.Conn(subs[7])).frames(2, timeout=10)  # CONNECTED, MESSAGE
        new = self.new_client_ok()
        self.finish("fanout_300_subscribers_12MiB", sender_got=f.cmd, refused=refused,
                    small=g.cmd, new_conn_s=new)
        self.assertEqual(f.cmd, "ERROR", f)
        self.assertEqual(f.headers.get("message"), "memory budget exceeded")
        self.assertEqual(f.headers.get("receipt-id"), "big")
        self.assertGreaterEqual(refused, 1)
        self.assertEqual((g.cmd, g.headers.get("receipt-id")), ("RECEIPT", "small"))
        self.assertEqual([x[0] for x in got], ["CONNECTED", "MESSAGE"])
        self.assertEqual(len(got[1][2]), 1000)
        self.assertIsNotNone(new)


class PartialFrames(Defaults):
    def test_partial_frames_at_defaults(self):
        """64 connections (two addresses) each holding an 8 MiB frame they
        never finish (512 MiB): the budget closes the biggest, the daemon
        stays under it.  (At the old default, a quarter of RAM, 200 such
        frames held 1.66 GB.)"""
        chunk = b"x" * (1 << 20)
        for i in range(64):
            s = self.sock(src="127.0.0.%d" % (2 + i // 32))
            s.sendall(self.connect_frames() + b"SEND\ndestination:" + vt.REQUESTS.encode() +
                      b"\ncontent-length:%d\n\n" % (9 << 20))
            try:
                for _ in range(8):
                    s.sendall(chunk)
            except OSError:
                pass
        time.sleep(0.5)
        cut = sum(closed(s, 0.05) for s in self.socks)
        new = self.new_client_ok()
        self.finish("partial_frames_64x8MiB_defaults", attackers_closed="%d/64" % cut,
                    new_conn_s=new)
        self.assertIsNotNone(new)
        if not BASELINE:
            self.assertGreaterEqual(cut, 64 - DEFAULT_BUDGET // (8 << 20))


class SlowReaders(Defaults):
    URI = "test://" + os.path.join(vt.REPO, "examples", "fleet.xml")

    def test_50_connections_that_never_read(self):
        """50 connections (two addresses) send batches of 50
        Host.getAllVmStats and never read: the budget (256 MiB) cuts them.
        (At the old default, a quarter of RAM, 50 slow readers held 2.0 GB
        with a bystander p99 of 2.6 s.)"""
        f = hostile.send_frame(body=json.dumps(
            [{"jsonrpc": "2.0", "method": "Host.getAllVmStats", "id": i} for i in range(50)]))
        for i in range(50):
            s = self.sock(rcvbuf=4096, src="127.0.0.%d" % (2 + i // 25))
            s.setblocking(False)
            try:
                s.send(self.connect_frames() +
                       vt.frame("SUBSCRIBE", [("destination", vt.RESPONSES), ("id", "r")]))
            except OSError:
                pass
        hostile.send_until_blocked(self.socks, f, 4)
        time.sleep(1.0)
        # closed by the budget or at max_output (reading 50 sockets to see
        # it would let the throttled ones run their queued batches)
        text = self.d.http("GET", "/metrics")[2].decode()
        cut = sum(int(m) for m in re.findall(
            r'vdsmd_connection_errors_total\{reason="(?:memory_budget|output_overflow)"\} (\d+)',
            text))
        new = self.new_client_ok()
        self.finish("never_read_50_conns_defaults", attackers_closed="%d/50" % cut,
                    new_conn_s=new)
        self.assertIsNotNone(new)
        self.assertGreater(cut, 0)


class PerAddress(Defaults):
    def test_one_address_cannot_take_every_slot(self):
        """100 heart-beating sessions from 127.0.0.1: past 64 (the pinger's
        included) they are closed at once; another address is served."""
        socks = []
        for i in range(100):
            s = self.sock()
            s.sendall(self.connect_frames("10000,0"))
            socks.append(s)
        time.sleep(0.5)
        cut = sum(closed(s, 0.05) for s in socks)
        other = vt.Conn(self.sock(src="127.0.0.9"))
        ok = other.connect().cmd
        for s in socks:
            s.close()
        time.sleep(0.3)
        refused = metric(self.d, "vdsmd_connections_refused_per_address_total")
        new = self.new_client_ok()
        self.finish("per_address_100_sessions", closed=cut, refused=refused,
                    other_address=ok, new_conn_s=new)
        self.assertEqual(ok, "CONNECTED")
        self.assertGreaterEqual(cut, 100 - 63)
        self.assertLessEqual(cut, 100 - 60)   # the others kept their slots
        self.assertIsNotNone(new)


def uuid_n(n):
    return "27000000-0000-4000-8000-%012d" % n


class IncomingMigrations(Defaults):
    ARGS = ("--incoming-migration-timeout", "2", "--vm-sample-interval", "1")

    def test_pending_incoming_migrations_are_bounded_and_expire(self):
        """50 VM.migrationCreate for VMs that never come: 2 pending at most
        (VDSM's max_incoming_migrations), the rest get code 82, and the
        pending ones are forgotten after incoming_migration_timeout.  (Every
        one became a "Migration Destination" VM for ever: 3261 in a run.)"""
        c = self.stomp_conn()
        codes = []
        for i in range(50):
            r = c.call("VM.migrationCreate", {"params": {"vmId": uuid_n(i)}}, timeout=20)
            codes.append(r.get("error", {}).get("code", "ok"))
        vms = c.call("Host.getAllVmStats", timeout=20)["result"]
        dest = sorted(v["vmId"] for v in vms if v.get("status") == "Migration Destination")
        time.sleep(4.5)
        vms = c.call("Host.getAllVmStats", timeout=20)["result"]
        after = [v["vmId"] for v in vms if v["vmId"].startswith("27000000")]
        again = c.call("VM.migrationCreate", {"params": {"vmId": uuid_n(99)}}, timeout=20)
        new = self.new_client_ok()
        self.finish("migration_create_50", accepted=codes.count("ok"),
                    limit_82=codes.count(82), pending=len(dest), after_timeout=len(after),
                    new_conn_s=new)
        self.assertEqual(codes, ["ok", "ok"] + [82] * 48)
        self.assertEqual(dest, [uuid_n(0), uuid_n(1)])
        self.assertEqual(after, [])
        self.assertIn("result", again)
        self.assertTrue(self.d.wait_log(r"no migration arrived within 2 s", 1))


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


@unittest.skipUnless(os.geteuid() == 0, "mounts a tmpfs: needs root")
class MountSpecs(Defaults):
    """POSIXFS connections on a tmpfs, storage_root given non-canonically."""

    def setUp(self):
        self.top = tempfile.mkdtemp(prefix="vdsmtest-root-")
        self.root = os.path.join(self.top, "storage")
        # the daemon's own --storage-root comes first; this one wins
        self.ARGS = ("--storage-root", self.top + "//x/../storage/.",)
        super().setUp()

    def tearDown(self):
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
        for line in lines[::-1]:
            mp = line.split()[4]
            if mp.startswith(self.top):
                subprocess.run(["umount", "-l", mp], check=False)
        super().tearDown()

    def connect(self, c, verb, spec):
        p = [{"id": "27270000-0000-4000-8000-000000000001", "connection": spec,
              "vfs_type": "tmpfs", "mnt_options": "size=1m"}]
        return [x["status"] for x in hostile_result(c.call(verb, [BLANK, 6, p], timeout=30))]

    def test_dot_specs_refused_and_disconnect_finds_the_mount(self):
        """"." / ".." / "a/.." would mount over <root>/mnt or the storage
        root itself: refused (451) by connect and disconnect, nothing
        mounted.  A good spec is mounted strictly under <root>/mnt/ and its
        disconnect (spec written differently) unmounts it, although the
        storage_root was given as <top>//x/../storage/. (the umount was
        skipped and 0 answered)."""
        c = self.stomp_conn()
        st = {spec: self.connect(c, "StoragePool.connectStorageServer", spec)
              for spec in (".", "..", "a/..", "../x")}
        over = [p for p in (self.root, os.path.join(self.root, "mnt")) if mounted(p)]
        dst = self.connect(c, "StoragePool.disconnectStorageServer", "..")
        good = self.connect(c, "StoragePool.connectStorageServer", "hostile27")
        mp = os.path.join(self.root, "mnt", "hostile27")
        was = mounted(mp)
        gone = self.connect(c, "StoragePool.disconnectStorageServer", "./hostile27/")
        still = mounted(mp)
        new = self.new_client_ok()
        self.finish("mount_specs", refused=st, mounted_over_root=over, mounted=was,
                    after_disconnect=still, new_conn_s=new)
        self.assertEqual(st, {".": [451], "..": [451], "a/..": [451], "../x": [451]})
        self.assertEqual(over, [])
        self.assertEqual(dst, [451])
        self.assertEqual((good, was), ([0], True))
        self.assertEqual((gone, still), ([0], False))


def hostile_result(r):
    assert "result" in r, r
    return r["result"]


class StorageRoot(Defaults):
    def test_system_directories_are_never_storage(self):
        """Running as root, LOCALFS "/" and "/etc" were accepted: refused
        (469 for the connection, as VDSM's vdsm user is; -32602 for the
        domain), and a storage_root of /etc is refused at startup."""
        c = self.stomp_conn()
        p = [{"id": "27270000-0000-4000-8000-000000000002", "connection": d} for d in
             ("/", "/etc", "/usr/lib", self.d.tmp)]
        st = [x["status"] for x in hostile_result(
            c.call("StoragePool.connectStorageServer", [BLANK, 4, p], timeout=30))]
        sd = "27270000-0000-4000-8000-0000000000d1"
        r = c.call("StorageDomain.create", [sd, 4, "/etc", "x", 1, "5", 0, 250], timeout=30)
        refused = None
        if not BASELINE:  # (an older build would write its task records into /etc)
            with vt.Daemon("--storage-root", "/etc") as d2:
                refused = d2.wait_log(r"storage_root /etc is a system directory", 10)
        new = self.new_client_ok()
        self.finish("storage_root_rules", statuses=st,
                    create=r.get("error", {}).get("code"), root_etc=bool(refused), new_conn_s=new)
        self.assertEqual(st[:3], [469, 469, 469])
        self.assertEqual(r["error"]["code"], -32602)
        self.assertIn("system directory", r["error"]["message"])
        self.assertTrue(refused)
        self.assertFalse(os.path.exists("/etc/tasks"))


if __name__ == "__main__":
    unittest.main()
