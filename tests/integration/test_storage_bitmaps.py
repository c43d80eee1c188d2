"""SDM.add_bitmap, SDM.remove_bitmap and SDM.clear_bitmaps on a LOCALFS
domain's volumes: real vdsmd, real qcow2 files, real qemu-img.  Each verb
starts a host job followed in Host.getJobs; the bitmaps are checked with
qemu-img info on the volume file, the generation with Volume.getInfo, the
failures with VDSM's codes (sdm/api/*_bitmap*.py, bitmaps.py): 100 for a
raw volume or a bitmap already in the chain, 2009 for clear_bitmaps of a
raw volume, 911 for a stale generation, 201/358 for an unknown volume or
domain (the job fails, the verb succeeds, as VDSM)."""

import unittest
import uuid

import vdsmtest as vt
from vdsmtest import BLANK, result

SD = "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c41"
IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f641"
BASE = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60741"
LEAF = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60742"
RAW_IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f642"
RAW = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60743"
COW_FMT, RAW_FMT = 4, 5


class Bitmaps(vt.VolumeJobCase):
    SD, SD_NAME, IMG = SD, "bm", IMG
    VOLS = ((BASE, IMG, COW_FMT, BLANK), (LEAF, IMG, COW_FMT, BASE),
            (RAW, RAW_IMG, RAW_FMT, BLANK))

    def bitmaps(self, img, vol):
        data = self.qinfo(img, vol).get("format-specific", {}).get("data", {})
        return {b["name"]: b["flags"] for b in data.get("bitmaps", [])}

    def generation(self, img, vol):
        return self.info(img, vol)["generation"]

    def test_add_remove_clear(self):
        gen = self.generation(IMG, LEAF)
        j = self.job("add_bitmap", self.vi(LEAF, generation=gen), "b1")
        self.assertEqual((j["status"], j["progress"]), ("done", 100), j)
        self.assertEqual(self.bitmaps(IMG, LEAF), {"b1": ["auto"]})
        self.assertEqual(self.bitmaps(IMG, BASE), {})   # the leaf only
        self.assertEqual(self.generation(IMG, LEAF), gen + 1)
        self.assertEqual(self.info(IMG, LEAF)["legality"], "LEGAL")
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
        self.assertEqual(self.qinfo(IMG, LEAF)["backing-filename"], BASE)

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
        for verb, args in (("add_bitmap", [jid, {"sd_id": SD, "img_id": IMG}, "b"]),
                           ("add_bitmap", [jid, self.vi(LEAF, generation=-1), "b"]),
                           ("add_bitmap", [jid, self.vi(LEAF), "x" * 1024]),
                           ("clear_bitmaps", ["not-a-uuid", self.vi(LEAF)])):
            self.assertRefused("SDM." + verb, args, -32602)
        self.assertEqual(result(self.c.call("Host.getJobs", ["storage", [jid]])), {})
        # a job id in use is refused by the verb (VDSM: JobExistsError)
        j = self.job("clear_bitmaps", self.vi(LEAF))
        self.assertEqual(j["status"], "done")
        self.assertRefused("SDM.clear_bitmaps", [j["id"], self.vi(LEAF)], 100)


if __name__ == "__main__":
    unittest.main()
