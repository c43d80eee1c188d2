"""Image.cloneStructure / Image.syncData / Image.move against a real vdsmd,
with real files and real qemu-img: a 2-volume qcow2 chain (raw-free: a qcow2
base with data and a qcow2 snapshot layer with other data) is cloned and
synced to a second LOCALFS domain and every layer compared with `qemu-img
compare`; a move removes the source only after the destination compares
equal; a move onto a full destination (a small tmpfs this test mounts, as
root; skipped where it cannot mount) fails, removes what it created there
and leaves the source intact.  Prints the move throughput (informative).
CrashAtStep: vdsmd killed (SIGKILL, VDSMD_TEST_CRASH_AT of a test build) in
the middle of Image.move; after the restart the task is reported over the
API as VDSM reports a task that died with it, and the move is rolled back
(partial destination removed) or completed (source removed).  Skipped,
with the reason, against a vdsmd built without the test hooks."""

import os
import shutil
import subprocess
import tempfile
import time
import unittest

import vdsmtest as vt
from test_storage import BLANK, call_ready, connect, result, wait_task

SD1 = "6a0b2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c01"
SD2 = "6a0b2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c02"
IMG = "7b1a2b3c-d5e6-4f70-8a91-b2c3d4e5f601"
BASE = "8c2b3c4d-e6f7-4081-9a2b-c3d4e5f60701"
TOP = "8c2b3c4d-e6f7-4081-9a2b-c3d4e5f60702"
SIZE = 64 << 20


def qemu_io(path, cmd):
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", cmd, path], check=True,
                   capture_output=True)


class ImageCopy(unittest.TestCase):
    def setUp(self):
        self.d = vt.Daemon()
        self.c = connect(self.d)
        self.dirs = {}
        self.mounted = None

    def tearDown(self):
        self.c.close()
        self.d.__exit__(None, None, None)
        if self.mounted:
            subprocess.run(["umount", "-l", self.mounted], capture_output=True)
            shutil.rmtree(self.mounted, ignore_errors=True)

    def domain(self, sd, path=None):
        if path is None:
            path = os.path.join(self.d.tmp, sd[-2:])
            os.mkdir(path, 0o755)
        self.dirs[sd] = path
        r = call_ready(self.c, "StorageDomain.create", [sd, 4, path, "d", 1, "5", 0, 250])
        self.assertIs(result(r), True, r)

    def vpath(self, sd, vol):
        return os.path.join(self.dirs[sd], sd, "images", IMG, vol)

    def task_ok(self, tid, timeout=60):
        st = wait_task(self.c, tid, timeout=timeout)
        self.assertEqual(st["taskResult"], "success", st)

    def make_chain(self):
        """qcow2 base with data at 0 and 8 MiB, a qcow2 layer on it that
        overwrites 8 MiB and adds data at 32 MiB."""
        self.task_ok(result(self.c.call(
            "Volume.create", [BASE, BLANK, SD1, IMG, str(SIZE), 4, 2, "DATA", "base"])))
        qemu_io(self.vpath(SD1, BASE), "write -P 0x11 0 4M")
        qemu_io(self.vpath(SD1, BASE), "write -P 0x22 8M 4M")
        self.task_ok(result(self.c.call(
            "Volume.create", [TOP, BLANK, SD1, IMG, str(SIZE), 4, 2, "DATA", "top", IMG, BASE])))
        qemu_io(self.vpath(SD1, TOP), "write -P 0x33 8M 2M")
        qemu_io(self.vpath(SD1, TOP), "write -P 0x44 32M 4M")

    def compare(self, a, b):
        r = subprocess.run(["qemu-img", "compare", "-f", "qcow2", "-F", "qcow2", a, b],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def info(self, sd, vol):
        return result(self.c.call("Volume.getInfo", [vol, BLANK, sd, IMG]))

    def test_clone_then_sync_layers(self):
        self.domain(SD1)
        self.domain(SD2)
        self.make_chain()
        self.task_ok(result(self.c.call("Image.cloneStructure", [IMG, BLANK, SD1, SD2])))
        # LEGAL, as VDSM's clone (createVolume's legal=True): what the engine
        # reads, and what VM.diskReplicateStart prepares without allowIllegal
        for vol, parent in ((BASE, BLANK), (TOP, BASE)):
            vi = self.info(SD2, vol)
            self.assertEqual((vi["format"], vi["parent"], vi["capacity"], vi["legality"]),
                             ("COW", parent, str(SIZE), "LEGAL"), vi)
        prep = result(self.c.call("Image.prepare", [BLANK, SD2, IMG, TOP]))
        self.assertEqual(prep["path"], self.vpath(SD2, TOP))
        self.assertIs(result(self.c.call("Image.teardown", [BLANK, SD2, IMG, TOP])), True)
        # an unknown syncType is refused before anything runs
        r = self.c.call("Image.syncData", [IMG, BLANK, SD1, SD2, "SOME"])
        self.assertEqual(r["error"]["code"], -32602, r)
        # INTERNAL: every volume but the leaf; legality stays LEGAL throughout
        self.task_ok(result(self.c.call("Image.syncData", [IMG, BLANK, SD1, SD2, "INTERNAL"])))
        self.assertEqual(self.info(SD2, BASE)["legality"], "LEGAL")
        self.assertEqual(self.info(SD2, TOP)["legality"], "LEGAL")
        self.assertEqual(self.compare(self.vpath(SD1, BASE), self.vpath(SD2, BASE))[0], 0)
        rc, out = self.compare(self.vpath(SD1, TOP), self.vpath(SD2, TOP))
        self.assertNotEqual(rc, 0, "leaf was not synced yet, it must differ: " + out)
        # a layer whose write fails (qemu-img convert -n cannot open the
        # destination: its qcow2 magic overwritten) is ILLEGAL, the task failed
        with open(self.vpath(SD2, TOP), "r+b") as f:
            magic = f.read(4)
            f.seek(0)
            f.write(b"\0\0\0\0")
        st = wait_task(self.c, result(self.c.call("Image.syncData",
                                                  [IMG, BLANK, SD1, SD2, "LEAF"])))
        self.assertEqual((st["taskState"], st["taskResult"], st["code"]),
                         ("finished", "cleanFailure", 100), st)
        self.assertEqual(self.info(SD2, TOP)["legality"], "ILLEGAL")
        self.assertEqual(self.info(SD2, BASE)["legality"], "LEGAL")   # not in LEAF's range
        with open(self.vpath(SD2, TOP), "r+b") as f:
            f.write(magic)
        # LEAF again: the rest, and the layer LEGAL once synced
        self.task_ok(result(self.c.call("Image.syncData", [IMG, BLANK, SD1, SD2, "LEAF"])))
        for vol in (BASE, TOP):
            rc, out = self.compare(self.vpath(SD1, vol), self.vpath(SD2, vol))
            self.assertEqual(rc, 0, out)
            self.assertEqual(self.info(SD2, vol)["legality"], "LEGAL")
        # each layer holds only its own data: the top's map does not
        # carry the base's clusters
        m = subprocess.run(["qemu-img", "map", "--output=json", "-f", "qcow2",
                            self.vpath(SD2, TOP)], capture_output=True, text=True, check=True)
        self.assertIn('"depth": 1', m.stdout)
        # the source is untouched
        self.assertEqual(self.info(SD1, TOP)["legality"], "LEGAL")
        # cloning again onto a domain that has the image is refused
        r = self.c.call("Image.cloneStructure", [IMG, BLANK, SD1, SD2])
        self.assertIn(r["error"]["code"], (100, 212), r)

    def test_move_removes_source_after_verified_copy(self):
        self.domain(SD1)
        self.domain(SD2)
        self.make_chain()
        ref = os.path.join(self.d.tmp, "ref")
        os.mkdir(ref)
        for vol in (BASE, TOP):   # the original data, kept aside
            shutil.copy(self.vpath(SD1, vol), os.path.join(ref, vol))
        r = self.c.call("Image.move", [IMG, BLANK, SD1, SD2, 2, False, True])
        self.assertEqual(r["error"]["code"], -32602, r)   # force is refused
        r = self.c.call("Image.move", [IMG, BLANK, SD1, SD1, 2, False, False])
        self.assertEqual(r["error"]["code"], -32602, r)   # same domain
        t0 = time.monotonic()
        self.task_ok(result(self.c.call("Image.move", [IMG, BLANK, SD1, SD2, 2, False, False])))
        secs = time.monotonic() - t0
        self.assertFalse(os.path.exists(self.vpath(SD1, BASE)))
        self.assertFalse(os.path.exists(self.vpath(SD1, TOP)))
        self.assertEqual(result(self.c.call("StorageDomain.getImages", [SD1])), [])
        r = self.c.call("Volume.getInfo", [TOP, BLANK, SD1, IMG])
        self.assertIn("error", r)
        self.assertEqual(sorted(result(self.c.call("Image.getVolumes", [IMG, BLANK, SD2]))),
                         sorted([BASE, TOP]))
        for vol in (BASE, TOP):
            self.assertEqual(self.info(SD2, vol)["legality"], "LEGAL")
        # the leaf against the original chain (ref/TOP backs onto "BASE"
        # relative to ref/, where the original base was kept)
        rc, out = self.compare(os.path.join(ref, TOP), self.vpath(SD2, TOP))
        self.assertEqual(rc, 0, out)
        rc, out = self.compare(os.path.join(ref, BASE), self.vpath(SD2, BASE))
        self.assertEqual(rc, 0, out)
        # copy back (operation 1): both sides keep the image
        self.task_ok(result(self.c.call("Image.move", [IMG, BLANK, SD2, SD1, 1, False, False])))
        self.assertEqual(self.compare(self.vpath(SD2, TOP), self.vpath(SD1, TOP))[0], 0)
        self.assertTrue(os.path.exists(self.vpath(SD2, TOP)))
        print("\nImage.move of a 2-layer qcow2 chain (%d MiB virtual, 14 MiB data): %.2f s"
              % (SIZE >> 20, secs))

    def test_failed_move_keeps_source(self):
        self.domain(SD1)
        mnt = tempfile.mkdtemp(prefix="vdsmd-imgcopy-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt],
                           capture_output=True, text=True)
        if r.returncode != 0:
            os.rmdir(mnt)
            self.skipTest("cannot mount a tmpfs: " + r.stderr.strip())
        self.mounted = mnt
        os.chmod(mnt, 0o755)
        self.domain(SD2, mnt)
        self.make_chain()      # 14 MiB of data: does not fit in 6 MiB
        st = wait_task(self.c, result(self.c.call(
            "Image.move", [IMG, BLANK, SD1, SD2, 2, False, False])), timeout=60)
        self.assertEqual(st["taskState"], "finished")
        self.assertNotEqual(st["taskResult"], "success", st)
        self.assertNotEqual(st["code"], 0, st)
        # the source is intact and usable
        for vol in (BASE, TOP):
            self.assertTrue(os.path.exists(self.vpath(SD1, vol)))
            self.assertEqual(self.info(SD1, vol)["legality"], "LEGAL")
        subprocess.run(["qemu-img", "check", "-f", "qcow2", self.vpath(SD1, TOP)], check=True,
                       capture_output=True)
        r = subprocess.run(["qemu-io", "-f", "qcow2", "-c", "read -P 0x44 32M 4M",
                            "-c", "read -P 0x33 8M 2M", "-c", "read -P 0x11 0 4M",
                            self.vpath(SD1, TOP)], capture_output=True, text=True)
        self.assertNotIn("Pattern verification failed", r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # the destination was rolled back
        r = self.c.call("Image.getVolumes", [IMG, BLANK, SD2])
        self.assertEqual(r.get("result", []), [], r)
        self.assertFalse(os.path.exists(self.vpath(SD2, BASE)))
        self.assertFalse(os.path.exists(self.vpath(SD2, TOP)))
        # and a copy to a domain with room still works afterwards
        self.assertIs(result(self.c.call("Image.prepare", [BLANK, SD1, IMG, TOP])) is not None,
                      True)

    def test_needs_spm_in_a_pool(self):
        """On domains of a pool the verbs answer 654 until this host is SPM."""
        sp = "5849b030-626e-47cb-ad90-3ce782d831c4"
        self.domain(SD1)
        self.domain(SD2)
        self.make_chain()
        r = self.c.call("StoragePool.create", [sp, "dc", SD1, 1, [SD1, SD2], 1, 3, 10, 3])
        self.assertIs(result(r), True, r)
        r = self.c.call("StoragePool.connect", [sp, 1, sp, SD1, 1, {SD1: "active", SD2: "active"}])
        self.assertIs(result(r), True, r)
        for verb, params in (("Image.move", [IMG, sp, SD1, SD2, 1, False, False]),
                             ("Image.cloneStructure", [IMG, sp, SD1, SD2]),
                             ("Image.syncData", [IMG, sp, SD1, SD2, "ALL"])):
            r = self.c.call(verb, params)
            self.assertEqual(r.get("error", {}).get("code"), 654, (verb, r))
        self.assertFalse(os.path.exists(os.path.join(self.dirs[SD2], SD2, "images", IMG)))
        tid = result(self.c.call("StoragePool.spmStart", [sp, -1, "-1", "false", 250, "5"]))
        self.task_ok(tid, timeout=30)
        self.assertIs(result(self.c.call("StorageDomain.activate", [SD2, sp])), True)
        self.task_ok(result(self.c.call("Image.move", [IMG, sp, SD1, SD2, 1, False, False])))
        for vol in (BASE, TOP):
            rc, out = self.compare(self.vpath(SD1, vol), self.vpath(SD2, vol))
            self.assertEqual(rc, 0, out)


def hooks_build():
    """True when VDSMD_BIN has the crash points (-DVD_TEST_HOOKS)."""
    with open(vt.VDSMD_BIN, "rb") as f:
        return b"VDSMD_TEST_CRASH_AT" in f.read()


class CrashAtStep(unittest.TestCase):
    def setUp(self):
        if not hooks_build():
            self.skipTest("kill -9 at a named step needs a VD_TEST_HOOKS build of vdsmd "
                          "(make memcheck runs this file against one)")
        ImageCopy.setUp(self)

    tearDown = ImageCopy.tearDown
    domain = ImageCopy.domain
    vpath = ImageCopy.vpath
    task_ok = ImageCopy.task_ok
    make_chain = ImageCopy.make_chain
    compare = ImageCopy.compare
    info = ImageCopy.info

    def crash_move(self, step):
        """Image.move with vdsmd set to die at step; returns the task id
        after the restart (without the variable)."""
        self.domain(SD1)
        self.domain(SD2)
        self.make_chain()
        self.ref = os.path.join(self.d.tmp, "ref")
        os.mkdir(self.ref)
        for vol in (BASE, TOP):
            shutil.copy(self.vpath(SD1, vol), os.path.join(self.ref, vol))
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
        tid = result(call_ready(self.c, "Image.move", [IMG, BLANK, SD1, SD2, 2, False, False]))
        try:
            self.d.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.fail("vdsmd did not die at step %s" % step)
        self.assertEqual(self.d.proc.returncode, -9, "killed by SIGKILL at %s" % step)
        self.c.close()
        vt.restart(self.d)
        self.c = connect(self.d)
        return tid

    def images_on_disk(self, sd):
        p = os.path.join(self.dirs[sd], sd, "images")
        return {(i, f) for i in os.listdir(p) for f in os.listdir(os.path.join(p, i))}

    def test_kill_during_convert_rolls_back(self):
        tid = self.crash_move("imgcopy.converted")
        st = result(call_ready(self.c, "Task.getStatus", [tid]))
        self.assertEqual((st["taskState"], st["taskResult"], st["code"]),
                         ("finished", "cleanSuccess", 411), st)
        self.assertIn(tid, result(self.c.call("Host.getAllTasksStatuses")))
        # the source is whole and LEGAL, the partial destination is gone
        for vol in (BASE, TOP):
            self.assertEqual(self.info(SD1, vol)["legality"], "LEGAL")
            rc, out = self.compare(os.path.join(self.ref, vol), self.vpath(SD1, vol))
            self.assertEqual(rc, 0, out)
        self.assertEqual(result(self.c.call("StorageDomain.getImages", [SD2])), [])
        self.assertEqual(self.images_on_disk(SD2), set())
        # the engine retries: it works
        self.task_ok(result(self.c.call("Image.move", [IMG, BLANK, SD1, SD2, 2, False, False])))
        rc, out = self.compare(os.path.join(self.ref, TOP), self.vpath(SD2, TOP))
        self.assertEqual(rc, 0, out)

    def test_kill_during_source_removal_completes(self):
        tid = self.crash_move("imgcopy.src-data-unlinked")
        st = result(call_ready(self.c, "Task.getStatus", [tid]))
        self.assertEqual((st["taskState"], st["taskResult"], st["code"]),
                         ("finished", "success", 0), st)
        self.assertEqual(result(self.c.call("StorageDomain.getImages", [SD1])), [])
        self.assertEqual(self.images_on_disk(SD1), set())
        for vol in (BASE, TOP):
            self.assertEqual(self.info(SD2, vol)["legality"], "LEGAL")
            rc, out = self.compare(os.path.join(self.ref, vol), self.vpath(SD2, vol))
            self.assertEqual(rc, 0, out)


class ReconstructMaster(unittest.TestCase):
    """StoragePool.reconstructMaster moves the master role to another domain
    at a new version; refused (325) while the pool is connected here."""

    def test_reconstruct_master(self):
        sp = "5849b030-626e-47cb-ad90-3ce782d831c5"
        with vt.Daemon() as d:
            c = connect(d)
            for sd in (SD1, SD2):
                path = os.path.join(d.tmp, sd[-2:])
                os.mkdir(path, 0o755)
                r = call_ready(c, "StorageDomain.create", [sd, 4, path, "d", 1, "5", 0, 250])
                self.assertIs(result(r), True, r)
            self.assertIs(result(c.call("StoragePool.create",
                                        [sp, "dc", SD1, 1, [SD1, SD2], 1, 3, 10, 3])), True)
            doms = {SD1: "Active", SD2: "Active"}
            self.assertIs(result(c.call("StoragePool.connect", [sp, 1, sp, SD1, 1, doms])), True)
            args = [sp, 1, "dc", SD2, 2, {SD1: "Attached", SD2: "Active"}, 1, 3, 10, 3]
            r = c.call("StoragePool.reconstructMaster", args)
            self.assertEqual(r.get("error", {}).get("code"), 325, r)
            self.assertIs(result(c.call("StoragePool.disconnect", [sp, 1, sp])), True)
            bad = list(args)
            bad[5] = {SD1: "Active"}     # the new master must be listed
            r = c.call("StoragePool.reconstructMaster", bad)
            self.assertIn("error", r)
            self.assertIs(result(c.call("StoragePool.reconstructMaster", args)), True)
            # the old master and version are refused now, the new ones work
            r = c.call("StoragePool.connect", [sp, 1, sp, SD1, 1, doms])
            self.assertEqual(r.get("error", {}).get("code"), 324, r)
            self.assertIs(result(c.call("StoragePool.connect", [sp, 1, sp, SD2, 2, doms])), True)
            info = result(c.call("StoragePool.getInfo", [sp]))["info"]
            self.assertEqual((info["master_uuid"], str(info["master_ver"])), (SD2, "2"), info)
            for sd, role in ((SD1, "Regular"), (SD2, "Master")):
                di = result(c.call("StorageDomain.getInfo", [sd]))
                self.assertEqual(di["role"], role, di)
                self.assertEqual(di["pool"], [sp], di)
            # the change is on the domains' own metadata (shared storage)
            for sd, role in ((SD1, "Regular"), (SD2, "Master")):
                with open(os.path.join(d.tmp, sd[-2:], sd, "dom_md", "metadata")) as f:
                    self.assertIn("ROLE=%s\n" % role, f.read())
            c.close()


if __name__ == "__main__":
    unittest.main()
