"""SDM.copy_data volume by volume into a destination chain, as the engine's
live storage migration does it (CloneImageGroupVolumesStructure creates the
chain on the destination domain with Volume.create, base first, then
CopyImageGroupVolumesData runs one copy_data per volume): real vdsmd, two
LOCALFS domains, real qcow2 files, real qemu-img and qemu-io.

A destination volume with a parent must receive only its source
counterpart's own data, as VDSM's copy_data does (qemuimg.convert with -n
and -B <parent>: qemu-img then skips what the source volume does not
allocate itself), not the whole chain's guest view.  Checked per layer:
the leaf guest views compare equal (and so do the intermediate views), each
destination layer allocates about what its source layer does (megabytes
apart from the chain's total), data a child overwrote reads the child's
(zeros a child wrote over its parent's data too), data only a parent holds
shows through.  Kept: a destination without a parent receives the whole
guest view (the copy collapses the chain), and so does a raw destination.
The figures (MiB allocated per layer, source and destination) are printed."""

import json
import os
import subprocess
import time
import unittest
import uuid

import vdsmtest as vt
from test_storage import BLANK, call_ready, connect, result, wait_task

SD1 = "6d1c0000-3d3f-4c9b-8c2a-3b2a7c0e8d71"
SD2 = "6d1c0000-3d3f-4c9b-8c2a-3b2a7c0e8d72"
IMG = "6e2d0000-e5f6-4a70-8b91-c2d3e4f5a671"
BASE = "6f3e0000-f6a7-4b81-9c2d-d3e4f5a6b771"
MID = "6f3e0000-f6a7-4b81-9c2d-d3e4f5a6b772"
LEAF = "6f3e0000-f6a7-4b81-9c2d-d3e4f5a6b773"
FLAT_IMG = "6e2d0000-e5f6-4a70-8b91-c2d3e4f5a672"
FLAT = "6f3e0000-f6a7-4b81-9c2d-d3e4f5a6b774"    # qcow2, no parent: the whole view
RAW_IMG = "6e2d0000-e5f6-4a70-8b91-c2d3e4f5a673"
RAW = "6f3e0000-f6a7-4b81-9c2d-d3e4f5a6b775"     # raw: the whole view
MiB = 1 << 20
SIZE = 128 * MiB
COW, RAWF, SPARSE = 4, 5, 2

# (offset MiB, length MiB, pattern) written into each source layer
DATA = {
    BASE: [(0, 32, 0x11), (64, 16, 0x12)],
    MID: [(16, 8, 0x22), (96, 4, 0x23)],           # over half of base's first run
    LEAF: [(20, 2, 0x33), (104, 2, 0x34)],         # over mid's run
}
ZEROS = {LEAF: [(0, 4)]}                           # the leaf zeroes base's data


def qemu_io(path, *cmds, fmt="qcow2"):
    args = ["qemu-io", "-f", fmt]
    for c in cmds:
        args += ["-c", c]
    out = subprocess.run(args + [path], capture_output=True, text=True)
    assert out.returncode == 0 and "fail" not in out.stdout + out.stderr, \
        (cmds, out.stdout, out.stderr)
    return out.stdout


def layer(path):
    """The layer alone (backing null): what this file itself holds."""
    return "json:" + json.dumps({"driver": "qcow2", "backing": None,
                                 "file": {"driver": "file", "filename": path}})


def own_data(path):
    """Bytes this qcow2 layer allocates as data itself (qemu-img map of the
    layer alone; zero clusters and unallocated ones are not data)."""
    out = subprocess.run(["qemu-img", "map", "--output=json", layer(path)],
                         capture_output=True, text=True, check=True)
    return sum(e["length"] for e in json.loads(out.stdout) if e["data"])


def own_entries(path):
    """(start, length) of the layer's own clusters, data or zero."""
    out = subprocess.run(["qemu-img", "map", "--output=json", path],
                         capture_output=True, text=True, check=True)
    runs = []
    for e in sorted(json.loads(out.stdout), key=lambda e: e["start"]):
        if e["depth"] != 0 or not (e["data"] or e.get("present")):
            continue
        if runs and runs[-1][0] + runs[-1][1] == e["start"] and runs[-1][2] == e["data"]:
            runs[-1][1] += e["length"]     # map splits where host offsets do
        else:
            runs.append([e["start"], e["length"], e["data"]])
    return runs


def disk_size(path):
    out = subprocess.run(["qemu-img", "info", "--output=json", "-U", path],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["actual-size"]


def mib(n):
    return n / MiB


class CopyChain(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.d.__enter__()
        cls.c = connect(cls.d)
        cls.roots = {}
        for sd in (SD1, SD2):
            root = os.path.join(cls.d.tmp, "dom" + sd[-1])
            os.mkdir(root, 0o755)
            cls.roots[sd] = root
            r = call_ready(cls.c, "StorageDomain.create", [sd, 4, root, "d" + sd[-1], 1, "5",
                                                          0, 250])
            assert result(r) is True, r
        # the source chain, then the destination chain as the engine makes it
        for sd in (SD1, SD2):
            parent = BLANK
            for vol in (BASE, MID, LEAF):
                cls.create(sd, IMG, vol, COW, parent)
                parent = vol
        for vol in (BASE, MID, LEAF):
            p = cls.path(SD1, IMG, vol)
            qemu_io(p, *["write -P %d %dM %dM" % (pat, off, n) for off, n, pat in DATA[vol]],
                    *["write -z %dM %dM" % (off, n) for off, n in ZEROS.get(vol, [])])
        cls.create(SD2, FLAT_IMG, FLAT, COW, BLANK)
        cls.create(SD2, RAW_IMG, RAW, RAWF, BLANK)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    @classmethod
    def create(cls, sd, img, vol, fmt, parent):
        tid = result(cls.c.call("Volume.create", [vol, BLANK, sd, img, str(SIZE), fmt, SPARSE,
                                                  "DATA", "v", img if parent != BLANK else BLANK,
                                                  parent]))
        st = wait_task(cls.c, tid)
        assert st["taskResult"] == "success", st

    @classmethod
    def path(cls, sd, img, vol):
        return os.path.join(cls.roots[sd], sd, "images", img, vol)

    def info(self, sd, img, vol):
        return result(self.c.call("Volume.getInfo", [vol, BLANK, sd, img]))

    def copy(self, src, dst):
        ep = lambda sd, img, vol: {"endpoint_type": "div", "sd_id": sd, "img_id": img,
                                   "vol_id": vol,
                                   "generation": self.info(sd, img, vol)["generation"]}
        jid = str(uuid.uuid4())
        self.assertIs(result(self.c.call("SDM.copy_data", [jid, ep(*src), ep(*dst)])), True)
        deadline = time.monotonic() + 120
        while True:
            j = result(self.c.call("Host.getJobs", ["storage", [jid]]))[jid]
            if j["status"] not in ("pending", "running") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual((j["status"], j["progress"]), ("done", 100), j)
        vi = self.info(*dst)
        self.assertEqual(vi["legality"], "LEGAL", vi)

    def compare(self, a, b, fmt_b="qcow2"):
        r = subprocess.run(["qemu-img", "compare", "-f", "qcow2", "-F", fmt_b, a, b],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_1_chain_volume_by_volume(self):
        for vol in (BASE, MID, LEAF):
            self.copy((SD1, IMG, vol), (SD2, IMG, vol))
        src = {v: self.path(SD1, IMG, v) for v in (BASE, MID, LEAF)}
        dst = {v: self.path(SD2, IMG, v) for v in (BASE, MID, LEAF)}
        # (1) every view of the chain is the same on both domains
        for vol in (BASE, MID, LEAF):
            self.compare(src[vol], dst[vol])
        # (2) each destination layer holds about its source layer's data
        chain = sum(own_data(src[v]) for v in (BASE, MID, LEAF))
        print("\ncopy_data chain (MiB of own data per layer; the chain holds %.1f):" % mib(chain))
        sizes = {}
        for name, vol in (("base", BASE), ("mid", MID), ("leaf", LEAF)):
            s, d = sizes[name] = own_data(src[vol]), own_data(dst[vol])
            print("  %-4s source %6.1f  destination %6.1f  (disk size %.1f / %.1f)"
                  % (name, mib(s), mib(d), mib(disk_size(src[vol])), mib(disk_size(dst[vol]))))
        for name, vol in (("base", BASE), ("mid", MID), ("leaf", LEAF)):
            s, d = sizes[name]
            want = sum(n for _, n, _ in DATA[vol]) * MiB
            self.assertEqual(s, want, name)
            self.assertLessEqual(abs(d - s), MiB // 4, "%s: destination %.1f MiB, source "
                                 "%.1f MiB" % (name, mib(d), mib(s)))
        # the same clusters, data and zeros, in each layer
        for vol in (MID, LEAF):
            self.assertEqual(own_entries(dst[vol]), own_entries(src[vol]), vol)
        # mid's whole view is 32 + 16 + 4 MiB; its own 12: megabytes apart
        self.assertLess(own_data(dst[MID]), 16 * MiB)
        self.assertLess(own_data(dst[LEAF]), 8 * MiB)
        # (3) what a child overwrote reads the child's; what only a parent
        # holds shows through; the leaf's zeros hide base's data
        qemu_io(dst[LEAF], "read -P 0 0 4M", "read -P 0x11 4M 12M", "read -P 0x22 16M 4M",
                "read -P 0x33 20M 2M", "read -P 0x22 22M 2M", "read -P 0x11 24M 8M",
                "read -P 0x12 64M 16M", "read -P 0x23 96M 4M", "read -P 0x34 104M 2M",
                "read -P 0 106M 22M")
        qemu_io(dst[MID], "read -P 0x11 0 16M", "read -P 0x22 16M 8M")
        # the destination's headers back onto its own chain (Volume.create's)
        for child, parent in ((MID, BASE), (LEAF, MID)):
            out = subprocess.run(["qemu-img", "info", "--output=json", "-U", dst[child]],
                                 capture_output=True, text=True, check=True)
            self.assertEqual(json.loads(out.stdout).get("backing-filename"), parent)

    def test_2_no_parent_gets_the_whole_view(self):
        """The leaf into a qcow2 volume without a parent, and into a raw one:
        the whole guest view, as before (the chain collapses)."""
        leaf = self.path(SD1, IMG, LEAF)
        flat = self.path(SD2, FLAT_IMG, FLAT)
        self.copy((SD1, IMG, LEAF), (SD2, FLAT_IMG, FLAT))
        self.compare(leaf, flat)
        n = own_data(flat)
        print("\ncopy_data leaf -> a qcow2 without parent: %.1f MiB of data" % mib(n))
        # base's 32 + 16, mid's 4 at 96, leaf's 2 at 104, less the leaf's 4 zeroed
        self.assertLessEqual(abs(n - 50 * MiB), MiB // 4)
        raw = self.path(SD2, RAW_IMG, RAW)
        self.copy((SD1, IMG, LEAF), (SD2, RAW_IMG, RAW))
        self.compare(leaf, raw, "raw")


if __name__ == "__main__":
    unittest.main()
