"""Host verbs over STOMP against a running vdsmd: Host.ping2,
Host.confirmConnectivity, Host.getStats values checked against /proc, and
Host.getCapabilities (memSize equals /proc/meminfo's MemTotal in MiB)."""

import json
import os
import re
import time
import unittest

import vdsmtest as vt


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            parts = v.split()
            if parts and parts[0].isdigit():
                out[k.strip()] = int(parts[0])
    return out


def proc_btime():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    return None


def proc_ifaces():
    names = []
    with open("/proc/net/dev") as f:
        for line in f.readlines()[2:]:
            name, sep, _ = line.partition(":")
            if sep:
                names.append(name.strip())
    return names


def proc_threads():
    with open("/proc/cpuinfo") as f:
        return sum(1 for line in f if re.match(r"processor\s*:", line))


def is_num_str(v):
    if not isinstance(v, str):
        return False
    try:
        float(v)
        return True
    except ValueError:
        return False


def connect(d):
    c = d.stomp()
    f = c.connect()
    assert f.cmd == "CONNECTED", f
    c.subscribe(vt.RESPONSES, "host-sub", receipt="r-host")
    return c


class HostVerbs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.c = connect(cls.d)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    def test_ping2_and_confirm(self):
        r = self.c.call("Host.ping2")
        self.assertEqual(r["result"], True, r)
        self.assertEqual(r["jsonrpc"], "2.0")
        r = vt.call_ready(self.c, "Host.confirmConnectivity")
        self.assertEqual(r["result"], True, r)

    def test_get_stats(self):
        before = time.time()
        r = vt.call_ready(self.c, "Host.getStats")
        self.assertIn("result", r, r)
        s = r["result"]
        # VDSM sends these as strings
        for k in ("cpuUser", "cpuSys", "cpuIdle", "cpuLoad", "memUsed",
                  "elapsedTime", "bootTime", "rxDropped", "txDropped"):
            self.assertTrue(is_num_str(s[k]), (k, s[k]))
        user, sys_, idle = float(s["cpuUser"]), float(s["cpuSys"]), float(s["cpuIdle"])
        for v in (user, sys_, idle):
            self.assertGreaterEqual(v, 0.0)
            self.assertLessEqual(v, 100.0)
        self.assertAlmostEqual(user + sys_ + idle, 100.0, delta=0.05)
        self.assertGreaterEqual(float(s["cpuLoad"]), 0.0)
        self.assertTrue(0 <= int(s["memUsed"]) <= 100)
        # and these as integers
        for k in ("memFree", "swapTotal", "swapFree", "vmCount", "vmActive"):
            self.assertIsInstance(s[k], int, k)
        m = meminfo()
        self.assertGreater(s["memFree"], 0)
        self.assertLessEqual(s["memFree"], m["MemTotal"] // 1024)
        self.assertEqual(s["swapTotal"], m.get("SwapTotal", 0) // 1024)
        self.assertLessEqual(s["swapFree"], s["swapTotal"])
        self.assertGreaterEqual(s["vmCount"], s["vmActive"])
        self.assertGreaterEqual(s["vmActive"], 0)
        # btime is derived from the wall clock: allow for a clock step
        self.assertLessEqual(abs(int(s["bootTime"]) - proc_btime()), 2)
        self.assertLess(int(s["elapsedTime"]), 600)
        dt = time.strptime(s["dateTime"], "%Y-%m-%dT%H:%M:%S GMT")
        self.assertLess(abs(time.mktime(dt) - time.mktime(time.gmtime(before))), 120)
        net = s["network"]
        self.assertIsInstance(net, dict)
        self.assertTrue(set(proc_ifaces()) <= set(net), (proc_ifaces(), list(net)))
        for name, it in net.items():
            self.assertEqual(it["name"], name)
            for k in ("rx", "tx", "rxDropped", "txDropped", "rxErrors", "txErrors", "speed"):
                self.assertTrue(it[k].isdigit(), (name, k, it[k]))
            self.assertIn(it["state"], ("up", "down", "unknown"))
            self.assertIsInstance(it["sampleTime"], float)
            self.assertLess(abs(it["sampleTime"] - before), 120)
        self.assertIsInstance(s["storageDomains"], dict)

    def test_get_capabilities(self):
        r = vt.call_ready(self.c, "Host.getCapabilities")
        self.assertIn("result", r, r)
        caps = r["result"]
        self.assertEqual(caps["memSize"], str(meminfo()["MemTotal"] // 1024))
        self.assertEqual(caps["cpuThreads"], str(proc_threads()))
        for k in ("cpuCores", "cpuSockets", "cpuThreads"):
            self.assertTrue(caps[k].isdigit() and int(caps[k]) >= 1, (k, caps[k]))
        self.assertGreaterEqual(int(caps["cpuThreads"]), int(caps["cpuCores"]))
        self.assertNotIn(" ", caps["cpuFlags"])
        self.assertEqual(caps["kvmEnabled"], "true" if os.path.exists("/dev/kvm") else "false")
        for k in ("name", "version", "release"):
            self.assertIsInstance(caps["operatingSystem"][k], str)
        self.assertTrue(caps["software_version"])
        self.assertEqual(caps["hostname"], os.uname().nodename)
        # served from the cached encoding: identical on repeat
        again = vt.call_ready(self.c, "Host.getCapabilities")["result"]
        self.assertEqual(json.dumps(caps, sort_keys=True), json.dumps(again, sort_keys=True))


class HostSampling(unittest.TestCase):
    def test_resampled_every_interval(self):
        with vt.Daemon("--host-sample-interval", "1") as d:
            c = connect(d)
            try:
                first = vt.call_ready(c, "Host.getStats")["result"]
                t1 = next(iter(first["network"].values()))["sampleTime"]
                deadline = time.monotonic() + 10
                t2 = t1
                while t2 == t1 and time.monotonic() < deadline:
                    time.sleep(0.2)
                    s = c.call("Host.getStats")["result"]
                    t2 = next(iter(s["network"].values()))["sampleTime"]
                self.assertGreater(t2, t1)
                # about one interval apart (a loose bound: no timing assertion)
                self.assertLess(t2 - t1, 10)
            finally:
                c.close()


if __name__ == "__main__":
    unittest.main()
