"""SDM.amend_volume, SDM.update_volume and Volume.verify_untrusted on a
LOCALFS domain: real vdsmd, real qcow2/raw files, real qemu-img and qemu-io.
The SDM verbs start host jobs followed through Host.getJobs; the results are
checked on the volume files (qemu-img info, qemu-io reads) and with
Volume.getInfo; each refusal with VDSM's code (sdm/api/amend_volume.py,
update_volume.py, volume.update_attributes, hsm.verify_untrusted_volume):
100 for a wrong attribute (at once) or a volume amend cannot take (the job),
911 for a stale or missing generation, 235 InvalidVolumeUpdate, 484
ImageVerificationError, 201/268/358 for what does not exist."""

import hashlib
import json
import os
import struct
import subprocess
import unittest
import uuid

import vdsmtest as vt
from vdsmtest import BLANK, call_ready, result

error_code = vt.error_code

SD = "5c1b3d4e-3d3f-4c9b-8c2a-3b2a7c0e8d51"
IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a651"
BASE = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b751"     # COW base of LEAF
LEAF = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b752"     # COW top
RAW_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a652"
RAW = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b753"
SOLO_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a653"
SOLO = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b754"     # COW without parent or child
UP_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a654"
UP_RAW = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b755"   # "uploaded" volumes
UP_COW = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b756"
UP_TOP = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b757"   # COW top of UP_COW
OTHER = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b799"
MiB = 1 << 20
COW_FMT, RAW_FMT = 4, 5


class Base(vt.VolumeJobCase):
    SD, SD_NAME, IMG = SD, "am", IMG


class Amend(Base):
    VOLS = ((BASE, IMG, COW_FMT, BLANK), (LEAF, IMG, COW_FMT, BASE),
            (RAW, RAW_IMG, RAW_FMT, BLANK))

    def read_ok(self, pattern, off, length):
        """qemu-io reads the leaf through its chain and finds pattern."""
        out = subprocess.run(["qemu-io", "-r", "-U", "-f", "qcow2", "-c",
                              "read -P %d %d %d" % (pattern, off, length),
                              self.path(IMG, LEAF)], capture_output=True, text=True)
        return out.returncode == 0 and "Pattern verification failed" not in out.stdout

    def test_downgrade_keeps_data_and_upgrade(self):
        # base data under a zero cluster of the leaf: the downgrade must keep
        # reading zeros there (an amend without the backing file would not)
        subprocess.check_call(["qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 1M",
                               self.path(IMG, BASE)], stdout=subprocess.DEVNULL)
        subprocess.check_call(["qemu-io", "-f", "qcow2", "-c", "write -z 0 64k", "-c",
                               "write -P 0x33 1M 64k", self.path(IMG, LEAF)],
                              stdout=subprocess.DEVNULL)
        self.assertTrue(self.read_ok(0, 0, 65536))
        self.assertEqual(self.qinfo(IMG, LEAF)["format-specific"]["data"]["compat"], "1.1")
        gen = self.info(IMG, LEAF)["generation"]
        j = self.job("amend_volume", self.vi(LEAF, generation=gen), {"compat": "0.10"})
        self.assertDone(j)
        q = self.qinfo(IMG, LEAF)
        self.assertEqual(q["format-specific"]["data"]["compat"], "0.10")
        self.assertEqual(q["backing-filename"], BASE)
        self.assertTrue(self.read_ok(0, 0, 65536), "the zero cluster shows the base's data")
        self.assertTrue(self.read_ok(0x5a, 65536, 65536))
        self.assertTrue(self.read_ok(0x33, MiB, 65536))
        vi = self.info(IMG, LEAF)
        self.assertEqual((vi["generation"], vi["legality"]), (gen + 1, "LEGAL"))
        self.assertEqual(self.qinfo(IMG, BASE)["format-specific"]["data"]["compat"], "1.1")
        subprocess.check_call(["qemu-img", "check", "-q", self.path(IMG, LEAF)])
        # a stale generation: 911, nothing changes
        self.assertFailed(self.job("amend_volume", self.vi(LEAF, generation=gen),
                                   {"compat": "1.1"}), 911)
        self.assertEqual(self.qinfo(IMG, LEAF)["format-specific"]["data"]["compat"], "0.10")
        # back up, as the engine sends it (generation null when unknown)
        self.assertDone(self.job("amend_volume", self.vi(LEAF, generation=None),
                                 {"compat": "1.1"}))
        self.assertEqual(self.qinfo(IMG, LEAF)["format-specific"]["data"]["compat"], "1.1")
        self.assertEqual(self.info(IMG, LEAF)["generation"], gen + 2)
        self.assertTrue(self.read_ok(0x33, MiB, 65536))

    def test_raw_refused(self):
        gen = self.info(RAW_IMG, RAW)["generation"]
        j = self.job("amend_volume", self.vi(RAW, RAW_IMG), {"compat": "0.10"})
        self.assertFailed(j, 100)
        self.assertIn("not COW", j["error"]["message"])
        self.assertEqual(self.info(RAW_IMG, RAW)["generation"], gen)

    def test_in_use_refused(self):
        # a writer holding the image (as a running VM's QEMU): qemu-img
        # cannot take its lock and the job fails, the volume untouched
        gen = self.info(IMG, BASE)["generation"]
        p = subprocess.Popen(["qemu-io", "-f", "qcow2", self.path(IMG, BASE)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        try:
            p.stdin.write(b"help\n")
            p.stdin.flush()
            p.stdout.readline()
            self.assertFailed(self.job("amend_volume", self.vi(BASE), {"compat": "0.10"}), 100)
        finally:
            p.stdin.close()
            p.wait(10)
        self.assertEqual(self.qinfo(IMG, BASE)["format-specific"]["data"]["compat"], "1.1")
        self.assertEqual(self.info(IMG, BASE)["generation"], gen)

    def test_unknown(self):
        self.assertFailed(self.job("amend_volume", self.vi(OTHER), {"compat": "1.1"}), 201)
        self.assertFailed(self.job("amend_volume", self.vi(LEAF, img=OTHER),
                                   {"compat": "1.1"}), 268)
        self.assertFailed(self.job("amend_volume", self.vi(LEAF, sd=OTHER),
                                   {"compat": "1.1"}), 358)

    def test_bad_params(self):
        jid = str(uuid.uuid4())
        # qemuimg.supports_compat / "No attributes to amend": ValueError, 100
        self.assertRefused("SDM.amend_volume", [jid, self.vi(LEAF), {"compat": "2.0"}], 100)
        self.assertRefused("SDM.amend_volume", [jid, self.vi(LEAF), {}], 100)
        self.assertRefused("SDM.amend_volume", [jid, self.vi(LEAF), {"compat": None}], 100)
        self.assertRefused("SDM.amend_volume", [jid, self.vi(LEAF, generation=1000),
                                                {"compat": "1.1"}], 100)
        self.assertRefused("SDM.amend_volume", [jid, {"sd_id": SD}, {"compat": "1.1"}],
                           -32602)
        self.assertRefused("SDM.amend_volume", ["nope", self.vi(LEAF), {"compat": "1.1"}],
                           -32602)
        self.assertEqual(result(self.c.call("Host.getJobs", ["storage", [jid]])), {})


class Update(Base):
    VOLS = ((BASE, IMG, COW_FMT, BLANK), (LEAF, IMG, COW_FMT, BASE),
            (SOLO, SOLO_IMG, COW_FMT, BLANK))

    def div(self, vol, img=IMG, **kw):
        """vol_info as the engine's LocationInfoHelper builds it."""
        return self.vi(vol, img, endpoint_type="div", prepared=False, **kw)

    def meta(self, img, vol):
        with open(self.path(img, vol) + ".meta") as f:
            return dict(line.strip().split("=", 1) for line in f if "=" in line)

    def test_legality_description_generation(self):
        g = self.info(IMG, LEAF)["generation"]
        self.assertDone(self.job("update_volume", self.div(LEAF, generation=g),
                                 {"legality": "ILLEGAL"}))
        vi = self.info(IMG, LEAF)
        self.assertEqual((vi["legality"], vi["generation"]), ("ILLEGAL", g + 1))
        self.assertEqual(self.meta(IMG, LEAF)["LEGALITY"], "ILLEGAL")
        # the same legality again: 235, nothing written
        self.assertFailed(self.job("update_volume", self.div(LEAF, generation=g + 1),
                                   {"legality": "ILLEGAL"}), 235)
        self.assertEqual(self.info(IMG, LEAF)["generation"], g + 1)
        # several at once, the generation given: that one is used
        desc = "d" * 300
        self.assertDone(self.job("update_volume", self.div(LEAF, generation=g + 1),
                                 {"legality": "LEGAL", "description": desc,
                                  "generation": 998}))
        vi = self.info(IMG, LEAF)
        self.assertEqual((vi["legality"], vi["generation"]), ("LEGAL", 998))
        self.assertEqual(vi["description"], desc[:210])
        self.assertEqual(self.meta(IMG, LEAF)["GEN"], "998")
        # 998 -> 999 -> 0 (MAX_GENERATION wraps)
        self.assertDone(self.job("update_volume", self.div(LEAF, generation=998),
                                 {"description": "x"}))
        self.assertDone(self.job("update_volume", self.div(LEAF, generation=999),
                                 {"description": "y"}))
        vi = self.info(IMG, LEAF)
        self.assertEqual((vi["generation"], vi["description"]), (0, "y"))
        self.assertEqual(self.meta(IMG, LEAF)["DESCRIPTION"], "y")

    def test_generation_check(self):
        g = self.info(IMG, BASE)["generation"]
        # stale, and missing: VDSM compares None with the generation (911)
        self.assertFailed(self.job("update_volume", self.div(BASE, generation=g + 5),
                                   {"description": "z"}), 911)
        j = self.job("update_volume", self.div(BASE), {"description": "z"})
        self.assertFailed(j, 911)
        self.assertIn("requested=None", j["error"]["message"])
        self.assertEqual(self.info(IMG, BASE)["generation"], g)
        self.assertEqual(self.info(IMG, BASE)["description"], "v")

    def test_shared(self):
        # a parent (INTERNAL) and a volume with a parent cannot become SHARED
        g = self.info(IMG, BASE)["generation"]
        self.assertFailed(self.job("update_volume", self.div(BASE, generation=g),
                                   {"type": "SHARED"}), 235)
        g = self.info(IMG, LEAF)["generation"]
        self.assertFailed(self.job("update_volume", self.div(LEAF, generation=g),
                                   {"type": "SHARED"}), 235)
        g = self.info(SOLO_IMG, SOLO)["generation"]
        self.assertEqual(self.info(SOLO_IMG, SOLO)["voltype"], "LEAF")
        self.assertDone(self.job("update_volume", self.div(SOLO, SOLO_IMG, generation=g),
                                 {"type": "SHARED"}))
        self.assertEqual(self.info(SOLO_IMG, SOLO)["voltype"], "SHARED")
        self.assertEqual(self.meta(SOLO_IMG, SOLO)["VOLTYPE"], "SHARED")
        # SHARED is SHARED: not again, and amend refuses it (VDSM: "volume is shared")
        self.assertFailed(self.job("update_volume", self.div(SOLO, SOLO_IMG, generation=g + 1),
                                   {"type": "SHARED"}), 235)
        j = self.job("amend_volume", self.vi(SOLO, SOLO_IMG), {"compat": "0.10"})
        self.assertFailed(j, 100)
        self.assertIn("shared", j["error"]["message"])
        # kept on disk: a restarted vdsmd still says SHARED
        self.restart_vdsmd(SOLO_IMG, SOLO)
        self.assertEqual(self.info(SOLO_IMG, SOLO)["voltype"], "SHARED")

    def test_bad_params(self):
        jid = str(uuid.uuid4())
        for attr in ({}, {"legality": "FAKE"}, {"type": "LEAF"}, {"generation": 1000},
                     {"generation": -1}, {"description": 5}):
            self.assertRefused("SDM.update_volume", [jid, self.div(LEAF, generation=0), attr],
                               100)
        self.assertRefused("SDM.update_volume", [jid, self.div(LEAF), None], -32602)
        self.assertEqual(result(self.c.call("Host.getJobs", ["storage", [jid]])), {})

    def test_unknown(self):
        self.assertFailed(self.job("update_volume", self.div(OTHER, generation=0),
                                   {"description": "q"}), 201)
        self.assertFailed(self.job("update_volume", self.div(LEAF, img=OTHER, generation=0),
                                   {"description": "q"}), 268)


class VerifyUntrusted(Base):
    VOLS = ((UP_RAW, UP_IMG, RAW_FMT, BLANK), (UP_COW, UP_IMG, COW_FMT, BLANK),
            (UP_TOP, UP_IMG, COW_FMT, UP_COW))

    def verify(self, vol, img=UP_IMG):
        # the engine's form: VerifyUntrustedVolumeVDSCommand, named params
        return self.c.call("Volume.verify_untrusted", {
            "storagepoolID": BLANK, "storagedomainID": SD, "imageID": img, "volumeID": vol})

    def assertVerified(self, vol):
        r = self.verify(vol)
        self.assertIs(result(r), True)

    def assertRejected(self, vol, img=UP_IMG, code=484, text=None):
        r = self.verify(vol, img)
        self.assertIn("error", r, r)
        self.assertEqual(r["error"]["code"], code, r)
        if text:
            self.assertIn(text, r["error"]["message"])

    def upload(self, vol, fmt, size=64 * MiB, backing=None, compat="1.1"):
        """Replace the volume's data as an upload would (same inode)."""
        tmp = os.path.join(self.d.tmp, "upload")
        cmd = ["qemu-img", "create", "-q", "-f", fmt]
        if fmt == "qcow2":
            cmd += ["-o", "compat=" + compat]
        if backing:
            cmd += ["-u", "-b", backing, "-F", "qcow2"]
        subprocess.check_call(cmd + [tmp, str(size)])
        if fmt == "qcow2" and not backing:
            subprocess.check_call(["qemu-io", "-f", "qcow2", "-c", "write -P 7 0 128k", tmp],
                                  stdout=subprocess.DEVNULL)
        with open(tmp, "rb") as src, open(self.path(UP_IMG, vol), "r+b") as dst:
            dst.truncate(0)
            dst.write(src.read())
        os.unlink(tmp)

    def test_raw(self):
        self.assertVerified(UP_RAW)
        # a qcow2 header in a RAW volume: qemu probes it, the formats differ
        self.upload(UP_RAW, "qcow2")
        self.assertRejected(UP_RAW, text="format specified by QEMU is qcow2")
        self.upload(UP_RAW, "raw")
        self.assertVerified(UP_RAW)
        # bigger than the volume: 484; smaller only warns (VDSM)
        self.upload(UP_RAW, "raw", size=65 * MiB)
        self.assertRejected(UP_RAW, text="bigger than volume size")
        self.upload(UP_RAW, "raw", size=32 * MiB)
        self.assertVerified(UP_RAW)

    def test_qcow2_base(self):
        self.upload(UP_COW, "qcow2")
        self.assertVerified(UP_COW)
        self.upload(UP_COW, "raw")
        self.assertRejected(UP_COW, text="format specified by QEMU is raw")
        # a base with a backing file (anything outside the chain)
        self.upload(UP_COW, "qcow2", backing="/etc/passwd")
        self.assertRejected(UP_COW, text="does not match volume parent")
        self.upload(UP_COW, "qcow2", compat="0.10")
        self.assertVerified(UP_COW)
        self.upload(UP_COW, "qcow2")

    def test_qcow2_top(self):
        self.upload(UP_COW, "qcow2")
        self.upload(UP_TOP, "qcow2", backing=UP_COW)
        self.assertVerified(UP_TOP)
        self.upload(UP_TOP, "qcow2", backing=UP_RAW)
        self.assertRejected(UP_TOP, text="does not match volume parent")
        self.upload(UP_TOP, "qcow2")
        self.assertRejected(UP_TOP, text="does not match volume parent")
        self.upload(UP_TOP, "qcow2", backing=UP_COW)

    def test_qcow2_corrupt(self):
        self.upload(UP_COW, "qcow2")
        path = self.path(UP_IMG, UP_COW)
        with open(path, "r+b") as f:
            hdr = f.read(72)
            cluster = 1 << struct.unpack(">I", hdr[20:24])[0]
            rt_off = struct.unpack(">Q", hdr[48:56])[0]
            f.seek(rt_off)
            rb_off = struct.unpack(">Q", f.read(8))[0]
            f.seek(rb_off)          # every refcount 0: every cluster is in use at 0
            f.write(b"\0" * cluster)
        out = subprocess.run(["qemu-img", "check", "--output=json", path],
                             capture_output=True, text=True)
        self.assertGreater(json.loads(out.stdout)["corruptions"], 0)
        self.assertRejected(UP_COW, text="qemu-img check found")
        self.upload(UP_COW, "qcow2")
        self.assertVerified(UP_COW)

    def test_unknown(self):
        self.assertRejected(OTHER, code=201)
        self.assertRejected(UP_RAW, img=OTHER, code=268)



# volumes whose interrupted amend left a qcow2 `qemu-img check -r all` cannot
# repair (the active L1 table offset in the header made unaligned: qemu-img
# cannot even open it)
BAD = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b760"       # LEGAL before: the repair marks it
WAS_ILLEGAL = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b761"   # ILLEGAL before the crash
ENGINE = "f2c3d4e5-f6a7-4b81-9c2d-d3e4f5a6b762"    # the engine sets it after the mark
BAD_IMG = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f607"   # test_virt_engine's IMG (its VM XML)
WAS_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a661"
ENGINE_IMG = "e1b2c3d4-e5f6-4a70-8b91-c2d3e4f5a662"
POOL = "5849b030-626e-47cb-ad90-3ce782d831b3"       # test_virt_engine's poolID
VM = "a7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d"


def intent_text(kv):
    """<storage_root>/amend-<vol>.intent as vdsmd writes it (kv_format)."""
    body = "".join("%s=%s\n" % (k, v) for k, v in kv)
    sha = hashlib.sha1("".join("%s=%s" % (k, v) for k, v in kv).encode()).hexdigest()
    return body + "_SHA_CKSUM=%s\n" % sha


class UnrepairedAmend(Base):
    """A qemu-img amend killed half-way whose repair (qemu-img check -r all)
    fails at the next start: the volume becomes ILLEGAL (Volume.getInfo,
    Image.prepare 100, VM.create 13), one log line gives the reason, the
    intent stays and the next start tries again; a repair that then succeeds
    makes LEGAL again only the volume the repair itself had marked."""
    VOLS = ((BAD, BAD_IMG, COW_FMT, BLANK), (WAS_ILLEGAL, WAS_IMG, COW_FMT, BLANK),
            (ENGINE, ENGINE_IMG, COW_FMT, BLANK))
    L1_OFF = 40   # the qcow2 header's l1_table_offset (8 bytes, big-endian)

    def intent(self, vol):
        return os.path.join(self.d.tmp, "storage", "amend-%s.intent" % vol)

    def intent_keys(self, vol):
        with open(self.intent(vol)) as f:
            return dict(line.strip().split("=", 1) for line in f if "=" in line)

    def legality(self, img, vol):
        return self.info(img, vol)["legality"]

    def restart(self, between):
        """Stop vdsmd (kill -9, as after the amend's crash), run between(),
        start it on the same storage_root."""
        self.restart_vdsmd(BAD_IMG, BAD, between)

    def set_l1(self, img, vol, value):
        with open(self.path(img, vol), "r+b") as f:
            f.seek(self.L1_OFF)
            old = struct.unpack(">Q", f.read(8))[0]
            f.seek(self.L1_OFF)
            f.write(struct.pack(">Q", value))
        return old

    def test_failed_repair_marks_illegal_then_repair_restores_own_mark(self):
        vols = ((BAD, BAD_IMG), (WAS_ILLEGAL, WAS_IMG), (ENGINE, ENGINE_IMG))
        self.assertIs(result(self.c.call("Volume.setLegality",
                                         [WAS_ILLEGAL, BLANK, SD, WAS_IMG, "ILLEGAL"])), True)
        self.assertIs(result(call_ready(self.c, "StoragePool.create", [
            POOL, "Default", SD, 1, [SD], 5, 60, 10, 3])), True)
        l1 = {}

        def crash_leftovers():
            for vol, img in vols:
                with open(self.intent(vol), "w") as f:
                    f.write(intent_text([("SD", SD), ("IMG", img), ("VOL", vol),
                                         ("COMPAT", "0.10")]))
                l1[vol] = self.set_l1(img, vol, 0x1234)
        self.restart(crash_leftovers)
        for vol, img in vols:
            self.assertEqual(self.legality(img, vol), "ILLEGAL", vol)
            self.assertTrue(os.path.exists(self.intent(vol)), vol)   # tried again next start
            self.assertEqual(self.meta_legality(img, vol), "ILLEGAL", vol)
        # only the one this repair took LEGAL away from carries the mark
        self.assertEqual(self.intent_keys(BAD).get("MARKED"), "1")
        self.assertEqual(self.intent_keys(ENGINE).get("MARKED"), "1")
        self.assertNotIn("MARKED", self.intent_keys(WAS_ILLEGAL))
        lines = [l for l in self.d.log_lines() if BAD in l and "repair failed" in l]
        self.assertEqual(len(lines), 1, self.d.log_lines()[-30:])
        self.assertIn("L1 table offset invalid", lines[0])
        self.assertIn("ILLEGAL", lines[0])
        # served as any ILLEGAL volume: no prepare, no VM on it
        self.assertEqual(error_code(self.c.call("Image.prepare", [POOL, SD, BAD_IMG, BAD])),
                         100)
        import test_virt_engine as tve   # the engine's one-disk XML, on our domain
        xml = tve.engine_xml(VM, self.path(BAD_IMG, BAD), vol=BAD).replace(tve.SD, SD)
        r = self.c.call("VM.create", {"vmID": VM, "vmParams": {"vmId": VM, "xml": xml}},
                        timeout=30)
        self.assertEqual(error_code(r), 13, r)
        self.assertIn("ILLEGAL", r["error"]["message"])
        # no second amend over a qcow2 known corrupt
        j = self.job("amend_volume", self.vi(BAD, BAD_IMG), {"compat": "0.10"})
        self.assertFailed(j, 100)
        self.assertIn("repair failed", j["error"]["message"])
        # the engine's own word after the mark: the repair leaves it alone
        self.assertIs(result(self.c.call("Volume.setLegality",
                                         [ENGINE, BLANK, SD, ENGINE_IMG, "ILLEGAL"])), True)
        self.assertNotIn("MARKED", self.intent_keys(ENGINE))

        # the next start fails again the same way: still ILLEGAL, one line
        self.restart(lambda: None)
        self.assertEqual(self.legality(BAD_IMG, BAD), "ILLEGAL")
        self.assertEqual(self.intent_keys(BAD).get("MARKED"), "1")
        self.assertEqual(len([l for l in self.d.log_lines()
                              if BAD in l and "repair failed" in l]), 1)

        # the header put right (an admin's fix): the repair succeeds
        def fix():
            for vol, img in vols:
                self.set_l1(img, vol, l1[vol])
        self.restart(fix)
        for vol, img in vols:
            self.assertFalse(os.path.exists(self.intent(vol)), vol)
        self.assertEqual(self.legality(BAD_IMG, BAD), "LEGAL")
        self.assertEqual(self.meta_legality(BAD_IMG, BAD), "LEGAL")
        self.assertEqual(self.legality(WAS_IMG, WAS_ILLEGAL), "ILLEGAL")
        self.assertEqual(self.legality(ENGINE_IMG, ENGINE), "ILLEGAL")
        self.assertTrue(any(BAD in l and "LEGAL again" in l for l in self.d.log_lines()))
        prep = result(self.c.call("Image.prepare", [POOL, SD, BAD_IMG, BAD]))
        self.assertEqual(prep["path"], self.path(BAD_IMG, BAD))
        self.assertIs(result(self.c.call("Image.teardown", [POOL, SD, BAD_IMG, BAD])), True)

    def meta_legality(self, img, vol):
        with open(self.path(img, vol) + ".meta") as f:
            return dict(line.strip().split("=", 1) for line in f if "=" in line)["LEGALITY"]


class AmendKilledRepairFails(Base):
    """The job's own path: qemu-img amend dies by a signal (a wrapper first
    in vdsmd's PATH breaks the header's L1 table offset through the fd vdsmd
    passed it, then kill -9s itself, as a qemu-img killed mid-write would
    leave it), the real qemu-img check -r all that follows cannot open the
    image: the job fails with 100 saying so, the volume is ILLEGAL at once,
    the intent stays with MARKED=1."""
    VOLS = ((SOLO, SOLO_IMG, COW_FMT, BLANK),)

    @classmethod
    def setUpClass(cls):
        real = subprocess.check_output(["sh", "-c", "command -v qemu-img"], text=True).strip()
        cls.bindir = os.path.join("/tmp", "vdsmtest-amendbin-%d" % os.getpid())
        os.makedirs(cls.bindir, exist_ok=True)
        with open(os.path.join(cls.bindir, "qemu-img"), "w") as f:
            f.write("#!/bin/sh\n"
                    "if [ \"$1\" = amend ]; then\n"
                    "\tprintf '\\000\\000\\000\\000\\000\\000\\022\\064' | "
                    "dd of=/proc/self/fd/3 bs=1 seek=40 conv=notrunc status=none\n"
                    "\tkill -9 $$\n"
                    "fi\n"
                    "exec %s \"$@\"\n" % real)
        os.chmod(os.path.join(cls.bindir, "qemu-img"), 0o755)
        old = os.environ["PATH"]
        os.environ["PATH"] = cls.bindir + ":" + old
        try:
            super().setUpClass()
        finally:
            os.environ["PATH"] = old

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        import shutil
        shutil.rmtree(cls.bindir, ignore_errors=True)

    def test_killed_amend_repair_fails(self):
        self.assertEqual(self.info(SOLO_IMG, SOLO)["legality"], "LEGAL")
        j = self.job("amend_volume", self.vi(SOLO, SOLO_IMG), {"compat": "0.10"})
        self.assertFailed(j, 100)
        self.assertIn("killed by signal 9", j["error"]["message"])
        self.assertIn("repair failed", j["error"]["message"])
        self.assertEqual(self.info(SOLO_IMG, SOLO)["legality"], "ILLEGAL")
        intent = os.path.join(self.d.tmp, "storage", "amend-%s.intent" % SOLO)
        with open(intent) as f:
            self.assertIn("MARKED=1\n", f.read())
        self.assertIn("the volume is ILLEGAL", j["error"]["message"])
        # the reason (qemu-img's) in one log line
        lines = [l for l in self.d.log_lines() if SOLO in l and "L1 table offset invalid" in l]
        self.assertEqual(len(lines), 1, self.d.log_lines()[-20:])
        self.assertIn("repair failed", lines[0])
        self.assertIn("ILLEGAL", lines[0])
        self.assertEqual(error_code(self.c.call("Image.prepare", [BLANK, SD, SOLO_IMG, SOLO])),
                         100)


if __name__ == "__main__":
    unittest.main()
