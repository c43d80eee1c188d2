"""SDM.sparsify_volume on a LOCALFS domain: real vdsmd, real qcow2/raw
files, real qemu-img, qemu-io and qemu-nbd.  Data is written with qemu-io,
some of it overwritten with zeros that stay allocated (write -P 0); the job
(followed through Host.getJobs) must give that space back - st_blocks drops
by about the zeroed amount - while the guest-visible data stays equal to a
copy taken before (qemu-img compare) and qemu-img check finds no corruption.
Refusals with VDSM's codes (sdm/api/sparsify_volume.py): 0 for a volume that
is not a leaf (SHARED, or with children), 911 for a stale generation,
201/268/358 for what does not exist.  A vdsmd killed with SIGKILL mid-job
leaves the data equal and the qcow2 uncorrupted; the job is gone after the
restart, the generation the old one."""

import json
import os
import subprocess
import time
import unittest
import uuid

import vdsmtest as vt
from vdsmtest import BLANK, result

SD = "5c1b3d4e-3d3f-4c9b-8c2a-3b2a7c0e8d61"
IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a661"
BASE = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b761"     # COW base of LEAF
LEAF = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b762"     # COW top
RAW_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a662"
RAW = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b763"
SOLO_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a663"
SOLO = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b764"     # COW without parent or child
TPL_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a664"
TPL = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b765"      # made SHARED (a template's)
BIG_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a665"
MB_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a666"
MB = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b767"       # qcow2 with 1 MiB clusters
BIG = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b766"      # the kill -9 test's
OTHER = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b799"
MiB = 1 << 20
COW_FMT, RAW_FMT = 4, 5


def qemu_io(path, fmt, *cmds):
    args = ["qemu-io", "-f", fmt]
    for c in cmds:
        args += ["-c", c]
    out = subprocess.run(args + [path], capture_output=True, text=True, check=True)
    assert "failed" not in out.stdout, out.stdout
    return out.stdout


def used(path):
    return os.stat(path).st_blocks * 512


class Sparsify(vt.VolumeJobCase):
    SD, SD_NAME, IMG = SD, "sp", IMG
    JOB_TIMEOUT = 60
    VOLS = ((BASE, IMG, COW_FMT, BLANK, 64), (LEAF, IMG, COW_FMT, BASE, 64),
            (RAW, RAW_IMG, RAW_FMT, BLANK, 64), (SOLO, SOLO_IMG, COW_FMT, BLANK, 64),
            (TPL, TPL_IMG, COW_FMT, BLANK, 64), (BIG, BIG_IMG, COW_FMT, BLANK, 256),
            (MB, MB_IMG, COW_FMT, BLANK, 64))

    def sparsify(self, vol_info):
        return self.job("sparsify_volume", vol_info)

    def snapshot(self, img, vol, fmt):
        """A flat copy of what the guest sees now."""
        copy = os.path.join(self.d.tmp, "copy-%s.raw" % vol)
        subprocess.check_call(["qemu-img", "convert", "-U", "-f", fmt, "-O", "raw",
                               self.path(img, vol), copy])
        return copy

    def assertSame(self, img, vol, fmt, copy):
        out = subprocess.run(["qemu-img", "compare", "-U", "-f", "raw", "-F", fmt, copy,
                              self.path(img, vol)], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def assertChecked(self, img, vol):
        """qemu-img check: no corruption (0, or 3: leaked clusters only)."""
        out = subprocess.run(["qemu-img", "check", "-U", "--output=json", "-f", "qcow2",
                              self.path(img, vol)], capture_output=True, text=True)
        self.assertIn(out.returncode, (0, 3), out.stdout + out.stderr)
        self.assertEqual(json.loads(out.stdout).get("corruptions", 0), 0, out.stdout)

    def reclaim(self, img, vol, fmt, zeroed):
        """Sparsify vol (its generation given): done, the data as before,
        about `zeroed` bytes fewer on disk, the generation bumped."""
        copy = self.snapshot(img, vol, fmt)
        before = used(self.path(img, vol))
        gen = self.info(img, vol)["generation"]
        self.assertDone(self.sparsify(self.vi(vol, img, generation=gen)))
        after = used(self.path(img, vol))
        self.assertSame(img, vol, fmt, copy)
        if fmt == "qcow2":
            self.assertChecked(img, vol)
        # within 1 MiB of the zeroed amount (qcow2 metadata, fs rounding)
        self.assertLess(abs((before - after) - zeroed), MiB, (before, after, zeroed))
        vi = self.info(img, vol)
        self.assertEqual((vi["generation"], vi["legality"]), (gen + 1, "LEGAL"))
        return copy

    def test_qcow2(self):
        p = self.path(SOLO_IMG, SOLO)
        qemu_io(p, "qcow2", "write -P 0x11 0 16M", "write -P 0 4M 8M", "write -P 0x22 40M 1M",
                "write -P 0 60M 64k")
        self.reclaim(SOLO_IMG, SOLO, "qcow2", 8 * MiB + 64 * 1024)
        # the zeroed ranges are zero clusters now, the rest data
        m = json.loads(subprocess.check_output(["qemu-img", "map", "-U", "--output=json",
                                                p]))
        data = sum(e["length"] for e in m if e["data"])
        self.assertEqual(data, 8 * MiB + MiB)
        # again: nothing left to reclaim, still the same data
        self.reclaim(SOLO_IMG, SOLO, "qcow2", 0)

    def test_qcow2_large_clusters(self):
        # a 1 MiB cluster is freed whole or not at all: 512 KiB of zeros stay
        p = self.path(MB_IMG, MB)
        subprocess.check_call(["qemu-img", "create", "-q", "-f", "qcow2", "-o",
                               "cluster_size=1M", p, str(64 * MiB)])
        qemu_io(p, "qcow2", "write -P 0x11 0 8M", "write -P 0 1M 2M", "write -P 0 5M 512k")
        self.reclaim(MB_IMG, MB, "qcow2", 2 * MiB)

    def test_qcow2_over_backing(self):
        # zeros over non-zero backing data must stay zeros (zero clusters)
        qemu_io(self.path(IMG, BASE), "qcow2", "write -P 0x5a 0 8M")
        qemu_io(self.path(IMG, LEAF), "qcow2", "write -P 0 0 2M", "write -P 0x33 2M 2M",
                "write -P 0 6M 1M")
        self.reclaim(IMG, LEAF, "qcow2", 3 * MiB)
        out = qemu_io(self.path(IMG, LEAF), "qcow2", "read -P 0 0 2M", "read -P 0x33 2M 2M",
                      "read -P 0x5a 4M 2M", "read -P 0 6M 1M", "read -P 0x5a 7M 1M")
        self.assertNotIn("Pattern verification failed", out)
        self.assertChecked(IMG, BASE)

    def test_raw(self):
        p = self.path(RAW_IMG, RAW)
        qemu_io(p, "raw", "write -P 0x44 0 16M", "write -P 0 4M 8M", "write -P 0 20M 1M")
        # the zeros written over the hole at 20M allocated 1M more
        self.reclaim(RAW_IMG, RAW, "raw", 9 * MiB)
        out = qemu_io(p, "raw", "read -P 0x44 0 4M", "read -P 0 4M 8M", "read -P 0x44 12M 4M")
        self.assertNotIn("Pattern verification failed", out)

    def test_in_use_refused(self):
        # a writer holding the image (as a running VM's QEMU): qemu-nbd
        # cannot take its lock and the job fails (100), the volume untouched
        # (qemu-io shares writes of a raw image, a qcow2 it keeps to itself)
        p = self.path(SOLO_IMG, SOLO)
        gen = self.info(SOLO_IMG, SOLO)["generation"]
        w = subprocess.Popen(["qemu-io", "-f", "qcow2", p], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            w.stdin.write(b"help\n")
            w.stdin.flush()
            w.stdout.readline()
            j = self.sparsify(self.vi(SOLO, SOLO_IMG))
            self.assertFailed(j, 100)
            self.assertIn("lock", j["error"]["message"])
        finally:
            w.stdin.close()
            w.wait(10)
        self.assertEqual(self.info(SOLO_IMG, SOLO)["generation"], gen)

    def test_not_leaf(self):
        # VDSM's VolumeIsNotLeafException: a VdsmException, code 0
        gen = self.info(IMG, BASE)["generation"]
        j = self.sparsify(self.vi(BASE, IMG))
        self.assertFailed(j, 0)
        self.assertEqual(j["error"]["message"], "Volume to be sparsified is not a leaf volume")
        g = self.info(TPL_IMG, TPL)["generation"]
        self.assertDone(self.job("update_volume", self.vi(TPL, TPL_IMG, generation=g),
                                 {"type": "SHARED"}))
        self.assertEqual(self.info(TPL_IMG, TPL)["voltype"], "SHARED")
        self.assertFailed(self.sparsify(self.vi(TPL, TPL_IMG)), 0)
        self.assertEqual(self.info(IMG, BASE)["generation"], gen)
        self.assertEqual(self.info(TPL_IMG, TPL)["generation"], g + 1)

    def test_generation(self):
        gen = self.info(SOLO_IMG, SOLO)["generation"]
        j = self.sparsify(self.vi(SOLO, SOLO_IMG, generation=gen + 3))
        self.assertFailed(j, 911)
        self.assertEqual(self.info(SOLO_IMG, SOLO)["generation"], gen)
        # none given (as the engine sends it): no check
        self.assertDone(self.sparsify(self.vi(SOLO, SOLO_IMG)))
        self.assertEqual(self.info(SOLO_IMG, SOLO)["generation"], gen + 1)

    def test_unknown(self):
        self.assertFailed(self.sparsify(self.vi(OTHER, IMG)), 201)
        self.assertFailed(self.sparsify(self.vi(LEAF, OTHER)), 268)
        self.assertFailed(self.sparsify(self.vi(LEAF, IMG, sd=OTHER)), 358)

    def test_bad_params(self):
        jid = str(uuid.uuid4())
        for args, code in (([jid, {"sd_id": SD}], -32602),
                           ([jid, self.vi(LEAF, IMG, generation=1000)], 100),
                           ([jid, self.vi(LEAF, IMG, generation="x")], -32602),
                           (["nope", self.vi(LEAF, IMG)], -32602)):
            r = self.c.call("SDM.sparsify_volume", args)
            self.assertEqual(r.get("error", {}).get("code"), code, (args, r))
        self.assertEqual(result(self.c.call("Host.getJobs", ["storage", [jid]])), {})

    def test_zz_kill_mid_job(self):
        # 256 MiB allocated, every other 64 KiB zeros: 2048 runs to zero
        src = os.path.join(self.d.tmp, "pattern.raw")
        with open(src, "wb") as f:
            f.write((b"\x77" * 65536 + b"\0" * 65536) * 2048)
        p = self.path(BIG_IMG, BIG)
        subprocess.check_call(["qemu-img", "convert", "-n", "-S", "0", "-f", "raw", "-O",
                               "qcow2", src, p])
        os.unlink(src)
        copy = self.snapshot(BIG_IMG, BIG, "qcow2")
        before = used(p)
        gen = self.info(BIG_IMG, BIG)["generation"]
        jid = self.start_job("sparsify_volume", self.vi(BIG, BIG_IMG))
        deadline = time.monotonic() + 60
        while True:
            j = result(self.c.call("Host.getJobs", ["storage", [jid]]))[jid]
            if j["status"] not in ("pending", "running") or j.get("progress", 0) >= 20:
                break
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.005)
        self.assertEqual(j["status"], "running", j)
        self.restart_vdsmd(BIG_IMG, BIG)
        # as every host job: gone with the vdsmd that ran it
        self.assertEqual(result(self.c.call("Host.getJobs", ["storage", [jid]])), {})
        # qemu-nbd (our child) exits once its client is gone; its lock goes with it
        deadline = time.monotonic() + 10
        while True:
            out = subprocess.run(["qemu-img", "info", p], capture_output=True, text=True)
            if out.returncode == 0:
                break
            self.assertLess(time.monotonic(), deadline, out.stderr)
            time.sleep(0.1)
        self.assertSame(BIG_IMG, BIG, "qcow2", copy)
        self.assertChecked(BIG_IMG, BIG)
        mid = used(p)
        self.assertLess(mid, before)
        vi = self.info(BIG_IMG, BIG)
        self.assertEqual((vi["generation"], vi["legality"]), (gen, "LEGAL"))
        # run again: the rest is reclaimed
        self.assertDone(self.sparsify(self.vi(BIG, BIG_IMG, generation=gen)))
        self.assertSame(BIG_IMG, BIG, "qcow2", copy)
        self.assertChecked(BIG_IMG, BIG)
        self.assertLess(abs((before - used(p)) - 128 * MiB), 2 * MiB)


if __name__ == "__main__":
    unittest.main()
