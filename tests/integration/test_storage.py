"""Storage verbs against a real vdsmd: the volume lifecycle over STOMP with
qcow2 checked by qemu-img, |jobs|status| events, path traversal refused on
the wire, out-of-space (RLIMIT_FSIZE) failing a task cleanly, and a crash
test: kill -9 at random moments during a stream of Volume.create/delete,
restart, and check that what is listed is LEGAL and matches the disk."""

import json
import os
import random
import resource
import signal
import subprocess
import threading
import time
import unittest

import vdsmtest as vt

SD = "11111111-1111-1111-1111-111111111111"
BLANK = "00000000-0000-0000-0000-000000000000"
MiB = 1024 * 1024


def uuid_n(prefix, n):
    return "%s-0000-0000-0000-%012d" % (prefix, n)


def call_ready(c, method, params=None, timeout=10.0):
    """Call, retrying while the agent still answers 99 (initializing)."""
    deadline = time.monotonic() + timeout
    while True:
        r = c.call(method, params)
        err = r.get("error")
        if not err or err.get("code") != 99 or time.monotonic() > deadline:
            return r
        time.sleep(0.02)


def result(r):
    assert "result" in r, r
    return r["result"]


def connect(d):
    c = d.stomp()
    c.connect()
    c.subscribe(vt.RESPONSES, "responses")
    return c


def wait_task(c, tid, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        st = result(c.call("Task.getStatus", [tid]))
        if st["taskState"] == "finished" or time.monotonic() > deadline:
            return st
        time.sleep(0.01)


class LimitedDaemon(vt.Daemon):
    """A Daemon whose process runs under RLIMIT_FSIZE (writes past it fail
    with EFBIG; vdsmd ignores SIGXFSZ)."""

    def __init__(self, fsize, *args, **kw):
        self.fsize = fsize
        super().__init__(*args, **kw)

    def start(self):
        real = subprocess.Popen
        fsize = self.fsize

        def limited(*a, **kw):
            kw["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            return real(*a, **kw)
        subprocess.Popen = limited
        try:
            return super().start()
        finally:
            subprocess.Popen = real


class StorageFlow(unittest.TestCase):
    def setUp(self):
        self.d = vt.Daemon()
        self.c = connect(self.d)
        self.root = os.path.join(self.d.tmp, "storage")
        r = call_ready(self.c, "StorageDomain.create", [SD, 4, "", "dom", 1])
        self.assertIs(result(r), True)

    def tearDown(self):
        self.c.close()
        self.d.__exit__(None, None, None)

    def vpath(self, img, vol):
        return os.path.join(self.root, SD, "images", img, vol)

    def test_volume_lifecycle_and_qcow2(self):
        c = self.c
        img = uuid_n("aaaaaaaa", 1)
        base, snap, pre = uuid_n("bbbbbbbb", 1), uuid_n("bbbbbbbb", 2), uuid_n("bbbbbbbb", 3)
        tid = result(c.call("Volume.create", {
            "volumeID": base, "storagepoolID": BLANK, "storagedomainID": SD, "imageID": img,
            "size": str(256 * MiB), "volFormat": 4, "preallocate": 2, "diskType": "DATA",
            "desc": "base", "srcImgUUID": BLANK, "srcVolUUID": BLANK}))
        st = wait_task(c, tid)
        self.assertEqual((st["taskState"], st["taskResult"], st["code"]), ("finished", "success", 0), st)
        tid = result(c.call("Volume.create", [snap, BLANK, SD, img, str(MiB), 4, 2, "DATA",
                                              "snap", img, base]))
        self.assertEqual(wait_task(c, tid)["taskResult"], "success")
        info = json.loads(subprocess.check_output(
            ["qemu-img", "info", "--output=json", self.vpath(img, snap)]))
        self.assertEqual(info["format"], "qcow2")
        self.assertEqual(info["virtual-size"], 256 * MiB)
        self.assertEqual(info["backing-filename"], base)
        vi = result(c.call("Volume.getInfo", [snap, BLANK, SD, img]))
        self.assertEqual((vi["format"], vi["legality"], vi["parent"], vi["capacity"]),
                         ("COW", "LEGAL", base, str(256 * MiB)))
        self.assertEqual(result(c.call("Volume.getInfo", [base, BLANK, SD, img]))["voltype"],
                         "INTERNAL")
        # raw preallocated: allocated on disk
        tid = result(c.call("Volume.create", [pre, BLANK, SD, img, str(8 * MiB), 5, 1]))
        self.assertEqual(wait_task(c, tid)["taskResult"], "success")
        sz = result(c.call("Volume.getSize", [pre, BLANK, SD, img]))
        self.assertEqual(sz["apparentsize"], str(8 * MiB))
        self.assertGreaterEqual(int(sz["truesize"]), 8 * MiB)
        self.assertEqual(sorted(result(c.call("Image.getVolumes", [img, BLANK, SD]))),
                         sorted([base, snap, pre]))
        # errors on the wire
        self.assertEqual(c.call("Volume.delete", [base, BLANK, SD, img])["error"]["code"], 100)
        self.assertEqual(c.call("Volume.getInfo", [uuid_n("bbbbbbbb", 9), BLANK, SD, img])
                         ["error"]["code"], 201)
        self.assertEqual(c.call("Volume.getInfo", [base, BLANK, SD, uuid_n("aaaaaaaa", 9)])
                         ["error"]["code"], 268)
        self.assertEqual(c.call("StorageDomain.getInfo", [BLANK])["error"]["code"], 358)
        self.assertEqual(c.call("Task.getStatus", [BLANK])["error"]["code"], 401)
        # image delete removes everything
        tid = result(c.call("Image.delete", [img, BLANK, SD]))
        self.assertEqual(wait_task(c, tid)["taskResult"], "success")
        self.assertFalse(os.path.exists(os.path.join(self.root, SD, "images", img)))
        self.assertEqual(result(c.call("StorageDomain.getImages", [SD])), [])

    def test_volume_create_coerced_params(self):
        """initialSize is an int-or-numstring and diskType a DiskContentType,
        checked and coerced by the schema before the handler runs: the
        engine's string of digits works, a mistyped value answers -32602
        as any mistyped param does."""
        c = self.c
        img = uuid_n("aaaaaaaa", 2)

        def create(vol, **kw):
            p = {"volumeID": vol, "storagepoolID": BLANK, "storagedomainID": SD,
                 "imageID": img, "size": str(8 * MiB), "volFormat": 5, "preallocate": 1,
                 "diskType": "DATA", "desc": "", "srcImgUUID": BLANK, "srcVolUUID": BLANK}
            p.update(kw)
            return c.call("Volume.create", p)
        # the engine's forms: initialSize as a string of digits, or absent;
        # a JSON integer too; the engine's hibernation content types
        for n, kw in enumerate([{"initialSize": str(4 * MiB)}, {"initialSize": 4 * MiB},
                                {}, {"diskType": "MEMD"}], 1):
            tid = result(create(uuid_n("cccccccc", n), **kw))
            st = wait_task(c, tid)
            self.assertEqual((st["taskResult"], st["code"]), ("success", 0), (kw, st))
        self.assertEqual(result(c.call("Volume.getInfo", [uuid_n("cccccccc", 4), BLANK, SD,
                                                          img]))["disktype"], "MEMD")
        sz = result(c.call("Volume.getSize", [uuid_n("cccccccc", 1), BLANK, SD, img]))
        self.assertGreaterEqual(int(sz["truesize"]), 4 * MiB)
        bad = [
            ({"initialSize": "4M"}, "param 'initialSize' of Volume.create must be "
             "int-or-string, got string '4M': not a string of decimal digits within int64"),
            ({"initialSize": "-1"}, "param 'initialSize' of Volume.create must be "
             "int-or-string, got string '-1': not a string of decimal digits within int64"),
            ({"initialSize": "99999999999999999999"}, "param 'initialSize' of Volume.create "
             "must be int-or-string, got string '99999999999999999999': not a string of "
             "decimal digits within int64"),
            ({"initialSize": 1.5}, "param 'initialSize' of Volume.create must be "
             "int-or-string, got double 1.5"),
            ({"initialSize": True}, "param 'initialSize' of Volume.create must be "
             "int-or-string, got bool true"),
            ({"initialSize": -1}, "initialSize: expected a non-negative integer"),
            ({"diskType": 2}, "param 'diskType' of Volume.create must be string, got int 2"),
            ({"diskType": ""}, "diskType: expected a DiskContentType"),
        ]
        for n, (kw, msg) in enumerate(bad, 10):
            err = create(uuid_n("cccccccc", n), **kw).get("error")
            self.assertEqual(err, {"code": -32602, "message": "Invalid params: " + msg}, kw)
        self.assertEqual(len(result(c.call("Image.getVolumes", [img, BLANK, SD]))), 4)

    def test_domain_monitor_in_host_stats(self):
        st = result(call_ready(self.c, "Host.getStats"))["storageDomains"]
        self.assertIn(SD, st)
        dom = st[SD]
        self.assertEqual(dom["code"], 0)
        self.assertIs(dom["valid"], True)
        self.assertIs(dom["acquired"], True)
        self.assertIs(dom["actual"], True)
        self.assertEqual(dom["version"], 5)
        float(dom["delay"])
        float(dom["lastCheck"])
        stats = result(self.c.call("StorageDomain.getStats", [SD]))
        self.assertGreater(int(stats["disktotal"]), 0)
        self.assertGreaterEqual(int(stats["diskfree"]), 0)
        info = result(self.c.call("StorageDomain.getInfo", [SD]))
        self.assertEqual((info["uuid"], info["type"], info["class"], info["version"]),
                         (SD, "LOCALFS", "Data", "5"))

    def test_task_events(self):
        ev = self.d.stomp()
        ev.connect()
        ev.subscribe(vt.EVENTS, "events")
        img, vol = uuid_n("aaaaaaaa", 2), uuid_n("bbbbbbbb", 4)
        tid = result(self.c.call("Volume.create", [vol, BLANK, SD, img, str(MiB), 5, 2]))
        method = "|jobs|status|" + tid
        states = []
        deadline = time.monotonic() + 10
        while "finished" not in states and time.monotonic() < deadline:
            f = ev.read_frame(max(0.01, deadline - time.monotonic()))
            if f.cmd != "MESSAGE":
                continue
            m = f.json()
            if m.get("method") == method:
                self.assertIsInstance(m["params"]["notify_time"], int)
                states.append(m["params"][tid]["taskState"])
        self.assertIn("finished", states)
        ev.close()

    def test_path_traversal_refused(self):
        c = self.c
        img, vol = uuid_n("aaaaaaaa", 3), uuid_n("bbbbbbbb", 5)
        for evil in ["../../etc", "..", "/etc/passwd", img + "/../x", "a/b"]:
            cases = [
                ("Volume.create", [evil, BLANK, SD, img, "512", 5, 2]),
                ("Volume.create", [vol, BLANK, evil, img, "512", 5, 2]),
                ("Volume.create", [vol, BLANK, SD, evil, "512", 5, 2]),
                ("Volume.create", [vol, BLANK, SD, img, "512", 4, 2, "DATA", "", evil, vol]),
                ("Volume.getInfo", [vol, BLANK, SD, evil]),
                ("Volume.delete", [evil, BLANK, SD, img]),
                ("Image.delete", [evil, BLANK, SD]),
                ("StorageDomain.create", [evil, 4, "", "x", 1]),
                ("StorageDomain.format", [evil]),
                ("Task.getStatus", [evil]),
                ("Task.clear", [evil]),
            ]
            for method, params in cases:
                r = c.call(method, params)
                self.assertEqual(r.get("error", {}).get("code"), -32602, (method, params, r))
        r = c.call("StorageDomain.create", [uuid_n("dddddddd", 1), 4, self.root + "/../..", "x", 1])
        self.assertEqual(r["error"]["code"], -32602)
        self.assertEqual(os.listdir(os.path.join(self.root, SD, "images")), [])


class OutOfSpace(unittest.TestCase):
    def test_efbig_fails_task_and_cleans(self):
        with LimitedDaemon(16 * MiB) as d:
            c = connect(d)
            self.assertIs(result(call_ready(c, "StorageDomain.create", [SD, 4, "", "d", 1])), True)
            img, vol = uuid_n("aaaaaaaa", 1), uuid_n("bbbbbbbb", 1)
            tid = result(c.call("Volume.create", [vol, BLANK, SD, img, str(64 * MiB), 5, 1]))
            st = wait_task(c, tid)
            self.assertEqual(st["taskState"], "finished")
            self.assertEqual(st["taskResult"], "cleanSuccess")
            self.assertNotEqual(st["code"], 0)
            self.assertIn("File too large", st["message"])
            idir = os.path.join(d.tmp, "storage", SD, "images", img)
            self.assertFalse(os.path.exists(os.path.join(idir, vol)))
            self.assertFalse(os.path.exists(os.path.join(idir, vol + ".meta")))
            self.assertEqual(c.call("Volume.getInfo", [vol, BLANK, SD, img])["error"]["code"], 268)
            # the daemon is still alive and a small volume works
            tid = result(c.call("Volume.create", [vol, BLANK, SD, img, str(MiB), 5, 1]))
            self.assertEqual(wait_task(c, tid)["taskResult"], "success")
            c.close()


class CrashSafety(unittest.TestCase):
    KILLS = 22

    def check_consistent(self, c, root):
        """Everything listed is LEGAL and matches the disk; nothing else is
        on disk; no task is left unfinished."""
        statuses = result(c.call("Host.getAllTasksStatuses"))
        for tid, st in statuses.items():
            self.assertEqual(st["taskState"], "finished", (tid, st))
        listed = {}
        for vol in result(c.call("StorageDomain.getVolumes", [SD, BLANK, BLANK])):
            listed[vol] = None
        images = result(c.call("StorageDomain.getImages", [SD]))
        for img in images:
            for vol in result(c.call("Image.getVolumes", [img, BLANK, SD])):
                listed[vol] = img
        self.assertNotIn(None, listed.values())
        expected = set()
        for vol, img in listed.items():
            vi = result(c.call("Volume.getInfo", [vol, BLANK, SD, img]))
            self.assertEqual(vi["legality"], "LEGAL", vi)
            self.assertEqual(vi["status"], "OK")
            data = os.path.join(root, SD, "images", img, vol)
            meta = data + ".meta"
            with open(meta) as f:
                kv = dict(line.rstrip("\n").split("=", 1) for line in f)
            self.assertEqual(kv["LEGALITY"], "LEGAL")
            self.assertEqual(kv["CAP"], vi["capacity"])
            self.assertEqual(kv["FORMAT"], vi["format"])
            self.assertEqual(kv["PUUID"], vi["parent"])
            if vi["parent"] != BLANK:
                self.assertIn(vi["parent"], listed, "parent of %s is gone" % vol)
            if vi["format"] == "RAW":
                self.assertEqual(os.stat(data).st_size, int(vi["capacity"]))
            else:
                info = json.loads(subprocess.check_output(
                    ["qemu-img", "info", "--output=json", data]))
                self.assertEqual(info["virtual-size"], int(vi["capacity"]))
            expected.add(os.path.join(img, vol))
            expected.add(os.path.join(img, vol + ".meta"))
        on_disk = set()
        idir = os.path.join(root, SD, "images")
        for img in os.listdir(idir):
            files = os.listdir(os.path.join(idir, img))
            self.assertTrue(files, "empty image directory %s left" % img)
            on_disk.update(os.path.join(img, f) for f in files)
        self.assertEqual(on_disk, expected)
        return listed

    def test_kill_9_during_create_delete(self):
        rnd = random.Random(1234)
        d = vt.Daemon()
        root = os.path.join(d.tmp, "storage")
        try:
            c = connect(d)
            self.assertIs(result(call_ready(c, "StorageDomain.create", [SD, 4, "", "d", 1])), True)
            n = 0
            total_listed = 0
            reconciled = 0
            for cycle in range(self.KILLS):
                listed = self.check_consistent(c, root) if cycle else {}
                total_listed += len(listed)
                known = [(v, i, None) for v, i in listed.items()]
                # a stream of creates and deletes, pipelined, then kill -9
                t_end = time.monotonic() + rnd.uniform(0.02, 0.25)
                while time.monotonic() < t_end:
                    if known and rnd.random() < 0.3:
                        vol, img, _ = known.pop(rnd.randrange(len(known)))
                        c.request("Volume.delete", [vol, BLANK, SD, img])
                    elif known and rnd.random() < 0.15:
                        # a snapshot: succeeds when the parent is a LEGAL COW
                        pvol, pimg, _ = rnd.choice(known)
                        n += 1
                        vol = uuid_n("bbbbbbbb", n)
                        c.request("Volume.create", [vol, BLANK, SD, pimg, str(MiB), 4, 2,
                                                    "DATA", "snap", pimg, pvol])
                        known.append((vol, pimg, 4))
                    else:
                        n += 1
                        img = uuid_n("aaaaaaaa", rnd.randrange(4))
                        vol = uuid_n("bbbbbbbb", n)
                        kind = rnd.randrange(3)
                        size = str(rnd.choice([1, 4, 16]) * MiB)
                        if kind == 0:
                            c.request("Volume.create", [vol, BLANK, SD, img, size, 5, 2])
                        elif kind == 1:
                            c.request("Volume.create", [vol, BLANK, SD, img, size, 5, 1])
                        else:
                            c.request("Volume.create", [vol, BLANK, SD, img, size, 4, 2])
                        known.append((vol, img, kind))
                    time.sleep(rnd.uniform(0, 0.01))
                c.close()
                vt.restart(d, signal.SIGKILL)
                c = connect(d)
                r = call_ready(c, "Host.getAllTasksStatuses")
                result(r)
                log = "\n".join(d.log_lines())
                if "was unfinished when vdsmd stopped" in log or "scan: removed" in log:
                    reconciled += 1
            listed = self.check_consistent(c, root)
            total_listed += len(listed)
            # kills did land mid-operation, and volumes survived them
            self.assertGreater(reconciled, 0)
            self.assertGreater(total_listed, 0)
            c.close()
        finally:
            d.__exit__(None, None, None)


if __name__ == "__main__":
    unittest.main()
