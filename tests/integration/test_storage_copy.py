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
The figures (MiB allocated per layer, source and destination) are printed.
A copy into a volume whose parent is another copy's destination (being
written) is refused as busy (100): the parent is opened as its backing."""

import json
import os
import shutil
import subprocess
import tempfile
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


def create(c, sd, img, vol, fmt, parent):
    tid = result(c.call("Volume.create", [vol, BLANK, sd, img, str(SIZE), fmt, SPARSE, "DATA",
                                          "v", img if parent != BLANK else BLANK, parent]))
    st = wait_task(c, tid)
    assert st["taskResult"] == "success", st


def make_domains(c, tmp):
    roots = {}
    for sd in (SD1, SD2):
        root = os.path.join(tmp, "dom" + sd[-1])
        os.mkdir(root, 0o755)
        roots[sd] = root
        r = call_ready(c, "StorageDomain.create", [sd, 4, root, "d" + sd[-1], 1, "5", 0, 250])
        assert result(r) is True, r
    return roots


class Vols:
    """Volumes, copies and compares on self.c (a client) and self.roots."""

    def path(self, sd, img, vol):
        return os.path.join(self.roots[sd], sd, "images", img, vol)

    def info(self, sd, img, vol):
        return result(self.c.call("Volume.getInfo", [vol, BLANK, sd, img]))

    def wait_job(self, jid):
        deadline = time.monotonic() + 120
        while True:
            j = result(self.c.call("Host.getJobs", ["storage", [jid]]))[jid]
            if j["status"] not in ("pending", "running") or time.monotonic() > deadline:
                return j
            time.sleep(0.02)

    def copy(self, src, dst):
        ep = lambda sd, img, vol: {"endpoint_type": "div", "sd_id": sd, "img_id": img,
                                   "vol_id": vol,
                                   "generation": self.info(sd, img, vol)["generation"]}
        jid = str(uuid.uuid4())
        self.assertIs(result(self.c.call("SDM.copy_data", [jid, ep(*src), ep(*dst)])), True)
        j = self.wait_job(jid)
        self.assertEqual((j["status"], j["progress"]), ("done", 100), j)
        vi = self.info(*dst)
        self.assertEqual(vi["legality"], "LEGAL", vi)

    def compare(self, a, b, fmt_b="qcow2"):
        r = subprocess.run(["qemu-img", "compare", "-f", "qcow2", "-F", fmt_b, a, b],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class CopyChain(Vols, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.d.__enter__()
        cls.c = connect(cls.d)
        cls.roots = make_domains(cls.c, cls.d.tmp)
        # the source chain, then the destination chain as the engine makes it
        for sd in (SD1, SD2):
            parent = BLANK
            for vol in (BASE, MID, LEAF):
                create(cls.c, sd, IMG, vol, COW, parent)
                parent = vol
        for vol in (BASE, MID, LEAF):
            p = os.path.join(cls.roots[SD1], SD1, "images", IMG, vol)
            qemu_io(p, *["write -P %d %dM %dM" % (pat, off, n) for off, n, pat in DATA[vol]],
                    *["write -z %dM %dM" % (off, n) for off, n in ZEROS.get(vol, [])])
        create(cls.c, SD2, FLAT_IMG, FLAT, COW, BLANK)
        create(cls.c, SD2, RAW_IMG, RAW, RAWF, BLANK)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

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


class ParentBusy(Vols, unittest.TestCase):
    """qemu-img convert held at a gate (a wrapper that runs the real one once
    the gate file exists) keeps a copy into BASE running; a copy into MID,
    whose parent BASE is, is refused as busy; once the gate opens both
    copies go through and the chain compares equal."""

    def setUp(self):
        self.bin = tempfile.mkdtemp(prefix="vdsmtest-bin-")
        self.gate = os.path.join(self.bin, "gate")
        real = shutil.which("qemu-img")
        with open(os.path.join(self.bin, "qemu-img"), "w") as f:
            f.write('#!/bin/sh\nif [ "$1" = convert ]; then\n'
                    '  i=0; while [ ! -e %s ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n'
                    'fi\nexec %s "$@"\n' % (self.gate, real))
        os.chmod(os.path.join(self.bin, "qemu-img"), 0o755)
        old = os.environ["PATH"]
        os.environ["PATH"] = self.bin + ":" + old
        try:
            self.d = vt.Daemon()
            self.d.__enter__()
        finally:
            os.environ["PATH"] = old
        self.c = connect(self.d)

    def tearDown(self):
        open(self.gate, "w").close()
        self.c.close()
        self.d.__exit__(None, None, None)
        shutil.rmtree(self.bin, ignore_errors=True)

    def test_parent_being_written(self):
        self.roots = make_domains(self.c, self.d.tmp)
        for sd in (SD1, SD2):
            create(self.c, sd, IMG, BASE, COW, BLANK)
            create(self.c, sd, IMG, MID, COW, BASE)
        qemu_io(self.path(SD1, IMG, BASE), "write -P 0x41 0 4M")
        qemu_io(self.path(SD1, IMG, MID), "write -P 0x42 2M 4M")
        ep = lambda sd, vol: {"endpoint_type": "div", "sd_id": sd, "img_id": IMG, "vol_id": vol}
        first = str(uuid.uuid4())
        self.assertIs(result(self.c.call("SDM.copy_data", [first, ep(SD1, BASE),
                                                          ep(SD2, BASE)])), True)
        r = self.c.call("SDM.copy_data", [str(uuid.uuid4()), ep(SD1, MID), ep(SD2, MID)])
        self.assertEqual(r.get("error", {}).get("code"), 100, r)
        self.assertIn("busy", r["error"]["message"])
        self.assertIn(BASE, r["error"]["message"])
        open(self.gate, "w").close()
        j = self.wait_job(first)
        self.assertEqual(j["status"], "done", j)
        self.copy((SD1, IMG, MID), (SD2, IMG, MID))
        self.compare(self.path(SD1, IMG, MID), self.path(SD2, IMG, MID))
        self.assertLessEqual(abs(own_data(self.path(SD2, IMG, MID)) - 4 * MiB), MiB // 4)


if __name__ == "__main__":
    unittest.main()
