"""SDM.add_bitmap, SDM.remove_bitmap and SDM.clear_bitmaps on a LOCALFS
domain's volumes: real vdsmd, real qcow2 files, real qemu-img.  Each verb
starts a host job followed in Host.getJobs; the bitmaps are checked with
qemu-img info on the volume file, the generation with Volume.getInfo, the
failures with VDSM's codes (sdm/api/*_bitmap*.py, bitmaps.py): 100 for a
raw volume or a bitmap already in the chain, 2009 for clear_bitmaps of a
raw volume, 911 for a stale generation, 201/358 for an unknown volume or
domain (the job fails, the verb succeeds, as VDSM)."""

import json
import os
import subprocess
import time
import unittest
import uuid

import vdsmtest as vt
from test_storage import BLANK, call_ready, connect, result, wait_task

SD = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c41"
IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f641"
BASE = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60741"
LEAF = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60742"
RAW_IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f642"
RAW = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60743"
MiB = 1 << 20
COW_FMT, RAW_FMT, SPARSE = 4, 5, 2


class Bitmaps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.d.__enter__()
        cls.c = connect(cls.d)
        cls.root = os.path.join(cls.d.tmp, "dom")
        os.mkdir(cls.root, 0o755)
        r = call_ready(cls.c, "StorageDomain.create", [SD, 4, cls.root, "bm", 1, "5", 0, 250])
        assert result(r) is True, r
        for vol, img, fmt, parent in ((BASE, IMG, COW_FMT, BLANK), (LEAF, IMG, COW_FMT, BASE),
                                      (RAW, RAW_IMG, RAW_FMT, BLANK)):
            tid = result(cls.c.call("Volume.create", [vol, BLANK, SD, img, str(64 * MiB), fmt,
                                                      SPARSE, "DATA", "v",
                                                      img if parent != BLANK else BLANK,
                                                      parent]))
            st = wait_task(cls.c, tid)
            assert st["taskResult"] == "success", st

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    def path(self, img, vol):
        return os.path.join(self.root, SD, "images", img, vol)

    def bitmaps(self, img, vol):
        info = json.loads(subprocess.check_output(
            ["qemu-img", "info", "-U", "--output=json", self.path(img, vol)]))
        data = info.get("format-specific", {}).get("data", {})
        return {b["name"]: b["flags"] for b in data.get("bitmaps", [])}

    def generation(self, img, vol):
        return result(self.c.call("Volume.getInfo", [vol, BLANK, SD, img]))["generation"]

    def job(self, verb, vol_info, *bitmap):
        """Start the job, wait for its end; returns Host.getJobs' entry."""
        jid = str(uuid.uuid4())
        self.assertIs(result(self.c.call("SDM." + verb, [jid, vol_info] + list(bitmap))), True)
        deadline = time.monotonic() + 30
        while True:
            jobs = result(self.c.call("Host.getJobs", ["storage", [jid]]))
            self.assertIn(jid, jobs)
            j = jobs[jid]
            if j["status"] not in ("pending", "running") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual((j["id"], j["job_type"], j["description"]), (jid, "storage", verb))
        return j

    def assertFailed(self, j, code):
        self.assertEqual(j["status"], "failed", j)
        self.assertEqual(j["error"]["code"], code, j)

    @staticmethod
    def vi(vol, img=IMG, sd=SD, **kw):
        d = {"sd_id": sd, "img_id": img, "vol_id": vol}
        d.update(kw)
        return d

    def test_add_remove_clear(self):
        gen = self.generation(IMG, LEAF)
        j = self.job("add_bitmap", self.vi(LEAF, generation=gen), "b1")
        self.assertEqual((j["status"], j["progress"]), ("done", 100), j)
        self.assertEqual(self.bitmaps(IMG, LEAF), {"b1": ["auto"]})
        self.assertEqual(self.bitmaps(IMG, BASE), {})   # the leaf only
        self.assertEqual(self.generation(IMG, LEAF), gen + 1)
        vi = result(self.c.call("Volume.getInfo", [LEAF, BLANK, SD, IMG]))
        self.assertEqual(vi["legality"], "LEGAL")
        # a stale generation: 911, nothing added, generation unchanged
        self.assertFailed(self.job("add_bitmap", self.vi(LEAF, generation=gen), "b2"), 911)
        self.assertNotIn("b2", self.bitmaps(IMG, LEAF))
        self.assertEqual(self.generation(IMG, LEAF), gen + 1)
        # already there: 100
        self.assertFailed(self.job("add_bitmap", self.vi(LEAF), "b1"), 100)
        # a name that looks like an option is a name, no generation given
        self.assertEqual(self.job("add_bitmap", self.vi(LEAF), "--help")["status"], "done")
        self.assertEqual(set(self.bitmaps(IMG, LEAF)), {"b1", "--help"})
        # remove: gone; a missing one counts as removed (VDSM)
        self.assertEqual(self.job("remove_bitmap", self.vi(LEAF), "b1")["status"], "done")
        self.assertEqual(set(self.bitmaps(IMG, LEAF)), {"--help"})
        self.assertEqual(self.job("remove_bitmap", self.vi(LEAF), "nosuch")["status"], "done")
        self.assertFailed(self.job("remove_bitmap", self.vi(LEAF, generation=0), "--help"), 911)
        # clear: every bitmap goes
        self.assertEqual(self.job("add_bitmap", self.vi(LEAF), "b3")["status"], "done")
        self.assertEqual(set(self.bitmaps(IMG, LEAF)), {"--help", "b3"})
        g = self.generation(IMG, LEAF)
        self.assertEqual(self.job("clear_bitmaps", self.vi(LEAF, generation=g))["status"], "done")
        self.assertEqual(self.bitmaps(IMG, LEAF), {})
        self.assertEqual(self.generation(IMG, LEAF), g + 1)
        # the backing chain is untouched
        info = json.loads(subprocess.check_output(
            ["qemu-img", "info", "-U", "--output=json", self.path(IMG, LEAF)]))
        self.assertEqual(info["backing-filename"], BASE)

    def test_bitmap_in_chain(self):
        self.assertEqual(self.job("add_bitmap", self.vi(BASE), "inbase")["status"], "done")
        try:
            self.assertIn("inbase", self.bitmaps(IMG, BASE))
            self.assertFailed(self.job("add_bitmap", self.vi(LEAF), "inbase"), 100)
            self.assertNotIn("inbase", self.bitmaps(IMG, LEAF))
        finally:
            self.assertEqual(self.job("remove_bitmap", self.vi(BASE), "inbase")["status"],
                             "done")
        self.assertEqual(self.bitmaps(IMG, BASE), {})

    def test_raw_refused(self):
        gen = self.generation(RAW_IMG, RAW)
        self.assertFailed(self.job("add_bitmap", self.vi(RAW, RAW_IMG), "b"), 100)
        self.assertFailed(self.job("remove_bitmap", self.vi(RAW, RAW_IMG), "b"), 100)
        self.assertFailed(self.job("clear_bitmaps", self.vi(RAW, RAW_IMG)), 2009)
        self.assertEqual(self.generation(RAW_IMG, RAW), gen)

    def test_unknown_volume(self):
        other = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60799"
        self.assertFailed(self.job("add_bitmap", self.vi(other), "b"), 201)
        self.assertFailed(self.job("clear_bitmaps", self.vi(LEAF, img=other)), 268)
        self.assertFailed(self.job("remove_bitmap", self.vi(LEAF, sd=other), "b"), 358)

    def test_bad_params(self):
        jid = str(uuid.uuid4())
        r = self.c.call("SDM.add_bitmap", [jid, {"sd_id": SD, "img_id": IMG}, "b"])
        self.assertEqual(r["error"]["code"], -32602, r)
        r = self.c.call("SDM.add_bitmap", [jid, self.vi(LEAF, generation=-1), "b"])
        self.assertEqual(r["error"]["code"], -32602, r)
        r = self.c.call("SDM.add_bitmap", [jid, self.vi(LEAF), "x" * 1024])
        self.assertEqual(r["error"]["code"], -32602, r)
        r = self.c.call("SDM.clear_bitmaps", ["not-a-uuid", self.vi(LEAF)])
        self.assertEqual(r["error"]["code"], -32602, r)
        self.assertEqual(result(self.c.call("Host.getJobs", ["storage", [jid]])), {})
        # a job id in use is refused by the verb (VDSM: JobExistsError)
        j = self.job("clear_bitmaps", self.vi(LEAF))
        self.assertEqual(j["status"], "done")
        r = self.c.call("SDM.clear_bitmaps", [j["id"], self.vi(LEAF)])
        self.assertEqual(r["error"]["code"], 100, r)


if __name__ == "__main__":
    unittest.main()
