"""Cold merge on a LOCALFS domain: real vdsmd, real qcow2 files written with
qemu-io, real qemu-img.  The engine's order (RemoveSnapshotSingleDiskCommand):
StoragePool.prepareMerge (SPM task), SDM.merge (host job followed in
Host.getJobs), StoragePool.finalizeMerge (SPM task), then the merged top,
left ILLEGAL, is deleted.  A three-volume chain BASE (raw, 4 MiB) <- MID
(qcow2, 8 MiB) <- TOP (qcow2, 8 MiB): MID is merged into BASE (internal:
BASE grows to 8 MiB, TOP is rebased onto BASE), then TOP into BASE (leaf).
What the guest sees (qemu-img convert of the chain to raw) is compared
before and after; the metadata (parent, legality, generation, capacity) is
checked against what VDSM's merge.py leaves; the refusals carry VDSM's
codes (920 VolumeIsNotInChain, 921 WrongParentVolume, 911
GenerationMismatch, 358, 268).  CrashAtStep kills vdsmd (SIGKILL at a named
step of a test build) before and after the rebase of finalizeMerge and
during SDM.merge's commit: after the restart the chain is the old one or the
new one, the task says which, and the engine's retry works."""

import filecmp
import json
import os
import subprocess
import time
import unittest
import uuid

import vdsmtest as vt
from test_storage import BLANK, call_ready, connect, result, wait_task

SD = "5c1b2d3e-3d3f-4c9b-8c2a-3b2a7c0e8d51"
MiB = 1 << 20
COW_FMT, RAW_FMT, SPARSE = 4, 5, 2


def hooks_build():
    """True when VDSMD_BIN has the crash points (-DVD_TEST_HOOKS)."""
    with open(vt.VDSMD_BIN, "rb") as f:
        return b"VDSMD_TEST_CRASH_AT" in f.read()


class MergeBase:
    """The chain and the helpers (self.d, self.c, self.root set by the test)."""

    @staticmethod
    def make_domain(c, root):
        os.mkdir(root, 0o755)
        r = call_ready(c, "StorageDomain.create", [SD, 4, root, "cm", 1, "5", 0, 250])
        assert result(r) is True, r

    def make_chain(self):
        self.img = str(uuid.uuid4())
        self.base, self.mid, self.top = (str(uuid.uuid4()) for _ in range(3))
        self.mkvol(self.base, RAW_FMT, 4 * MiB, BLANK)
        self.mkvol(self.mid, COW_FMT, 8 * MiB, self.base)
        self.mkvol(self.top, COW_FMT, 8 * MiB, self.mid)
        self.io(self.base, "raw", "write -P 0x11 0 4M")
        self.io(self.mid, "qcow2", "write -P 0x22 1M 512k")
        self.io(self.mid, "qcow2", "write -P 0x23 6M 256k")     # beyond BASE's end
        self.io(self.top, "qcow2", "write -P 0x33 1280k 64k")   # over MID's
        self.io(self.top, "qcow2", "write -P 0x34 7M 4k")
        self.before = os.path.join(self.d.tmp, "before-%s.raw" % self.img)
        self.convert(self.top, self.before)

    # ---- helpers ---------------------------------------------------------

    def mkvol(self, vol, fmt, size, parent):
        tid = result(self.c.call("Volume.create", [
            vol, BLANK, SD, self.img, str(size), fmt, SPARSE, "DATA", "v",
            self.img if parent != BLANK else BLANK, parent]))
        st = wait_task(self.c, tid)
        self.assertEqual(st["taskResult"], "success", st)

    def path(self, vol):
        return os.path.join(self.root, SD, "images", self.img, vol)

    def io(self, vol, fmt, cmd):
        subprocess.check_call(["qemu-io", "-f", fmt, "-c", cmd, self.path(vol)],
                              stdout=subprocess.DEVNULL)

    def convert(self, vol, out):
        """The guest's view through vol (its qcow2 headers), as raw."""
        subprocess.check_call(["qemu-img", "convert", "-U", "-O", "raw", self.path(vol), out])

    def backing(self, vol):
        info = json.loads(subprocess.check_output(
            ["qemu-img", "info", "-U", "--output=json", self.path(vol)]))
        return info.get("backing-filename")

    def info(self, vol):
        return result(self.c.call("Volume.getInfo", [vol, BLANK, SD, self.img]))

    def sub(self, top, base, **kw):
        d = {"sd_id": SD, "img_id": self.img, "top_id": top, "base_id": base}
        d.update(kw)
        return d

    def task(self, verb, sub):
        tid = result(self.c.call("StoragePool." + verb, [BLANK, sub]))
        st = wait_task(self.c, tid)
        self.assertEqual(result(self.c.call("Task.clear", [tid])), True)
        return st

    def job(self, sub, *bitmaps):
        jid = str(uuid.uuid4())
        self.assertIs(result(self.c.call("SDM.merge", [jid, sub] + list(bitmaps))), True)
        deadline = time.monotonic() + 30
        while True:
            j = result(self.c.call("Host.getJobs", ["storage", [jid]]))[jid]
            if j["status"] not in ("pending", "running") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual((j["id"], j["job_type"], j["description"]),
                         (jid, "storage", "merge_subchain"))
        return j

    def assertDone(self, st):
        self.assertEqual((st["taskState"], st["taskResult"], st["code"]),
                         ("finished", "success", 0), st)

    def assertSame(self, vol):
        now = os.path.join(self.d.tmp, "now.raw")
        self.convert(vol, now)
        try:
            self.assertTrue(filecmp.cmp(now, self.before, shallow=False),
                            "the guest's data through %s changed" % vol)
        finally:
            os.unlink(now)


class ColdMerge(MergeBase, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.d.__enter__()
        cls.c = connect(cls.d)
        cls.root = os.path.join(cls.d.tmp, "dom")
        cls.make_domain(cls.c, cls.root)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    def setUp(self):
        self.make_chain()

    def test_merge_internal_then_leaf(self):
        g0 = self.info(self.base)["generation"]
        # 1. internal: MID into BASE
        self.assertDone(self.task("prepareMerge", self.sub(self.mid, self.base)))
        b = self.info(self.base)
        self.assertEqual(int(b["capacity"]), 8 * MiB)             # grew to MID's
        self.assertEqual(os.path.getsize(self.path(self.base)), 8 * MiB)
        self.assertEqual((b["legality"], b["generation"]), ("LEGAL", g0))
        j = self.job(self.sub(self.mid, self.base, base_generation=g0))
        self.assertEqual((j["status"], j["progress"]), ("done", 100), j)
        self.assertEqual(self.info(self.base)["generation"], g0 + 1)
        self.assertEqual(self.info(self.base)["legality"], "LEGAL")
        self.assertEqual(self.backing(self.top), self.mid)        # not rebased yet
        self.assertSame(self.top)
        self.assertDone(self.task("finalizeMerge", self.sub(self.mid, self.base)))
        m, t = self.info(self.mid), self.info(self.top)
        self.assertEqual(m["legality"], "ILLEGAL")
        self.assertEqual((t["legality"], t["parent"]), ("LEGAL", self.base))
        self.assertEqual(self.backing(self.top), self.base)
        self.assertEqual(self.info(self.base)["generation"], g0 + 1)
        self.assertSame(self.top)
        # the engine deletes the merged volume: no child holds it any more
        st = wait_task(self.c, result(self.c.call("Image.deleteVolumes", [
            self.img, BLANK, SD, [self.mid], "false", "false", False])))
        self.assertDone(st)
        self.assertFalse(os.path.exists(self.path(self.mid)))
        self.assertSame(self.top)
        # 2. leaf: TOP into BASE
        g1 = g0 + 1
        self.assertDone(self.task("prepareMerge", self.sub(self.top, self.base)))
        self.assertEqual(int(self.info(self.base)["capacity"]), 8 * MiB)   # no change
        j = self.job(self.sub(self.top, self.base, base_generation=g1), False)
        self.assertEqual(j["status"], "done", j)
        self.assertDone(self.task("finalizeMerge", self.sub(self.top, self.base)))
        t, b = self.info(self.top), self.info(self.base)
        # the top is left ILLEGAL for the engine to delete
        self.assertEqual((t["legality"], t["parent"]), ("ILLEGAL", self.base))
        self.assertEqual((b["legality"], b["generation"]), ("LEGAL", g1 + 1))
        self.assertEqual(self.backing(self.top), self.base)
        st = wait_task(self.c, result(self.c.call("Volume.delete", [
            self.top, BLANK, SD, self.img, "false", "false", False])))
        self.assertDone(st)
        # the base alone is what the guest saw through TOP
        self.assertTrue(filecmp.cmp(self.path(self.base), self.before, shallow=False))
        vols = result(self.c.call("StorageDomain.getVolumes", [SD, BLANK, self.img]))
        self.assertEqual(vols, [self.base])

    def test_cow_base_grows_in_metadata(self):
        """A COW base smaller than its top: prepare changes the capacity in
        the metadata only; the commit grows the qcow2 image."""
        img, base, top = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
        self.img = img
        self.mkvol(base, COW_FMT, 2 * MiB, BLANK)
        self.mkvol(top, COW_FMT, 8 * MiB, base)
        self.io(base, "qcow2", "write -P 0x41 0 1M")
        self.io(top, "qcow2", "write -P 0x42 5M 1M")
        self.before = os.path.join(self.d.tmp, "before-%s.raw" % img)
        self.convert(top, self.before)
        self.assertDone(self.task("prepareMerge", self.sub(top, base)))
        self.assertEqual(int(self.info(base)["capacity"]), 8 * MiB)
        qi = json.loads(subprocess.check_output(
            ["qemu-img", "info", "-U", "--output=json", self.path(base)]))
        self.assertEqual(qi["virtual-size"], 2 * MiB)      # the image itself: not yet
        self.assertEqual(self.job(self.sub(top, base))["status"], "done")
        qi = json.loads(subprocess.check_output(
            ["qemu-img", "info", "-U", "--output=json", self.path(base)]))
        self.assertEqual(qi["virtual-size"], 8 * MiB)
        self.assertDone(self.task("finalizeMerge", self.sub(top, base)))
        self.assertEqual(self.info(top)["legality"], "ILLEGAL")
        self.assertSame(base)

    def bitmaps(self, vol):
        info = json.loads(subprocess.check_output(
            ["qemu-img", "info", "-U", "--output=json", self.path(vol)]))
        data = info.get("format-specific", {}).get("data", {})
        return {b["name"]: b["flags"] for b in data.get("bitmaps", [])}

    def test_bitmaps(self):
        """prepare prunes a COW base's stale bitmaps (bitmaps.prune_bitmaps);
        merge_bitmaps adds top's valid bitmaps to base and merges them."""
        img, base, top = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
        self.img = img
        self.mkvol(base, COW_FMT, 8 * MiB, BLANK)
        self.mkvol(top, COW_FMT, 8 * MiB, base)
        for vol, name in ((base, "stale"), (base, "both"), (top, "both"), (top, "new")):
            subprocess.check_call(["qemu-img", "bitmap", "--add", self.path(vol), name])
        subprocess.check_call(["qemu-img", "bitmap", "--add", "--disable", self.path(top),
                               "off"])
        self.io(top, "qcow2", "write -P 0x51 2M 64k")
        self.assertDone(self.task("prepareMerge", self.sub(top, base)))
        self.assertEqual(self.bitmaps(base), {"both": ["auto"]})      # "stale" pruned
        j = self.job(self.sub(top, base), True)
        self.assertEqual(j["status"], "done", j)
        # "new" added and merged; "off" (disabled in top) is not valid: skipped
        self.assertEqual(self.bitmaps(base), {"both": ["auto"], "new": ["auto"]})

    def test_refusals(self):
        other = str(uuid.uuid4())
        for verb in ("prepareMerge", "finalizeMerge"):
            for sub, code in ((self.sub(other, self.base), 920),        # top not in the chain
                              (self.sub(self.mid, other), 920),         # base not in it
                              (self.sub(self.top, self.base), 921),     # base is not top's parent
                              (self.sub(self.mid, self.base, sd_id=other), 358),
                              (self.sub(self.mid, self.base, img_id=other), 268)):
                r = self.c.call("StoragePool." + verb, [BLANK, sub])
                self.assertEqual(r.get("error", {}).get("code"), code, (verb, sub, r))
            for bad in ({"sd_id": SD, "img_id": self.img, "top_id": self.mid},
                        self.sub(self.mid, self.mid),
                        self.sub(self.mid, self.base, base_generation=-1),
                        self.sub("not-a-uuid", self.base)):
                r = self.c.call("StoragePool." + verb, [BLANK, bad])
                self.assertEqual(r.get("error", {}).get("code"), -32602, (verb, bad, r))
        # another pool than the domain's (none): 309
        r = self.c.call("StoragePool.prepareMerge", [str(uuid.uuid4()),
                                                     self.sub(self.mid, self.base)])
        self.assertEqual(r.get("error", {}).get("code"), 309, r)
        # the job's errors are the job's (VDSM checks in the job)
        g = self.info(self.base)["generation"]
        for sub, code in ((self.sub(self.top, self.base), 921),
                          (self.sub(other, self.base), 920),
                          (self.sub(self.mid, self.base, base_generation=g + 5), 911)):
            j = self.job(sub)
            self.assertEqual((j["status"], j["error"]["code"]), ("failed", code), j)
        # nothing changed
        self.assertEqual(self.info(self.base)["generation"], g)
        for vol in (self.base, self.mid, self.top):
            self.assertEqual(self.info(vol)["legality"], "LEGAL")
        self.assertEqual(self.backing(self.top), self.mid)
        self.assertSame(self.top)



class CrashAtStep(MergeBase, unittest.TestCase):
    """vdsmd killed (SIGKILL, VDSMD_TEST_CRASH_AT of a test build) at a step
    of the merge; after the restart the chain is the old one or the new one
    and the task says which.  Skipped, with the reason, against a vdsmd
    built without the test hooks (the ASan tree has them)."""

    def setUp(self):
        if not hooks_build():
            self.skipTest("kill -9 at a named step needs a VD_TEST_HOOKS build of vdsmd "
                          "(make memcheck runs this file against one)")
        self.d = vt.Daemon()
        self.d.__enter__()
        self.c = connect(self.d)
        self.root = os.path.join(self.d.tmp, "dom")
        self.make_domain(self.c, self.root)
        self.make_chain()
        self.sc = self.sub(self.mid, self.base)
        self.assertDone(self.task("prepareMerge", self.sc))

    def tearDown(self):
        self.c.close()
        self.d.__exit__(None, None, None)

    def arm(self, step):
        """Restart vdsmd set to die at step."""
        self.c.close()
        self.d.stop()
        os.environ["VDSMD_TEST_CRASH_AT"] = step
        try:
            with self.d._lock:
                self.d._lines = []
            self.d.start()
        finally:
            del os.environ["VDSMD_TEST_CRASH_AT"]
        self.c = connect(self.d)

    def died(self, step):
        try:
            self.d.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.fail("vdsmd did not die at step %s" % step)
        self.assertEqual(self.d.proc.returncode, -9, "killed by SIGKILL at %s" % step)
        self.c.close()
        vt.restart(self.d)
        self.c = connect(self.d)

    def wait_orphans(self):
        """A qemu-img the killed vdsmd ran lives on (as under systemd until
        its cgroup is killed): wait for it to end before the engine retries."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            busy = False
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        busy |= self.root.encode() in f.read()
                except OSError:
                    pass
            if not busy:
                return
            time.sleep(0.05)
        self.fail("qemu-img of the killed vdsmd still runs")

    def finalize_killed_at(self, step):
        self.assertEqual(self.job(self.sc)["status"], "done")
        self.arm(step)
        tid = result(call_ready(self.c, "StoragePool.finalizeMerge", [BLANK, self.sc]))
        self.died(step)
        return result(call_ready(self.c, "Task.getStatus", [tid]))

    def test_kill_before_rebase_keeps_old_chain(self):
        st = self.finalize_killed_at("finalize_merge.top-illegal")
        self.assertEqual((st["taskState"], st["taskResult"], st["code"]),
                         ("finished", "cleanSuccess", 411), st)
        self.assertEqual(self.info(self.mid)["legality"], "LEGAL")   # LEGAL again
        self.assertEqual(self.info(self.top)["parent"], self.mid)
        self.assertEqual(self.backing(self.top), self.mid)
        self.assertSame(self.top)
        # the engine retries the finalize: it works
        self.assertDone(self.task("finalizeMerge", self.sc))
        self.assertEqual(self.info(self.mid)["legality"], "ILLEGAL")
        self.assertEqual(self.backing(self.top), self.base)
        self.assertSame(self.top)

    def test_kill_after_rebase_completes(self):
        st = self.finalize_killed_at("finalize_merge.child-rebased")
        self.assertEqual((st["taskState"], st["taskResult"], st["code"]),
                         ("finished", "success", 0), st)
        self.assertEqual(self.info(self.mid)["legality"], "ILLEGAL")
        self.assertEqual(self.info(self.top)["parent"], self.base)
        self.assertEqual(self.backing(self.top), self.base)
        self.assertSame(self.top)

    def test_kill_during_commit(self):
        g = self.info(self.base)["generation"]
        self.arm("merge.committing")
        jid = str(uuid.uuid4())
        try:
            self.assertIs(result(call_ready(self.c, "SDM.merge", [jid, self.sc])), True)
        except (EOFError, ConnectionError):
            # the job's thread can reach the step (and vdsmd die) before the
            # loop has written the verb's answer: the engine sees a dropped
            # connection, as after any crash
            pass
        self.died("merge.committing")
        self.wait_orphans()
        # the job ended with vdsmd; the generation says it did not finish
        # (the restarted daemon may still be recovering: code 99 until ready)
        self.assertEqual(result(call_ready(self.c, "Host.getJobs", ["storage", [jid]])), {})
        self.assertEqual(self.info(self.base)["generation"], g)
        for vol in (self.base, self.mid, self.top):
            self.assertEqual(self.info(vol)["legality"], "LEGAL")
        self.assertSame(self.top)
        # the engine retries the merge
        self.assertEqual(self.job(self.sub(self.mid, self.base, base_generation=g))["status"],
                         "done")
        self.assertEqual(self.info(self.base)["generation"], g + 1)


if __name__ == "__main__":
    unittest.main()
