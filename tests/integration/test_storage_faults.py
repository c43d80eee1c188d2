"""Storage faults against a real vdsmd, on real mounts the test makes as root
(skipped, and counted as skipped, where it cannot mount):

- a full tmpfs (ENOSPC): a preallocated create fails its task cleanly,
  leaves nothing behind, and the daemon keeps serving;
- a read-only filesystem: creates are refused/fail without a crash, what
  was there stays listed;
- kill -9 while deletes are queued behind a slow preallocation: after the
  restart every task's outcome agrees with what is listed and on disk;
- SIGTERM while tasks are queued: they are rolled back and reported aborted
  (411), nothing half-made remains;
- a file size limit (RLIMIT_FSIZE, vdsmd started under prlimit --fsize): a
  volume or a copy that would grow past it fails with "File too large",
  nothing half-made remains, and the daemon (SIGXFSZ ignored) keeps serving.
Every mount is undone in tearDown."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import vdsmtest as vt
from test_storage import BLANK, MiB, SD, call_ready, connect, result, uuid_n, wait_task


def can_mount():
    return os.geteuid() == 0


class MountedDomain(unittest.TestCase):
    """A vdsmd with a LOCALFS domain on a tmpfs of the given size."""
    SIZE = "24m"

    def setUp(self):
        if not can_mount():
            self.skipTest("needs root to mount a tmpfs")
        self.d = vt.Daemon()
        self.mnt = os.path.join(self.d.tmp, "mnt")
        os.makedirs(self.mnt)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % self.SIZE,
                            "vdsmtest", self.mnt], capture_output=True)
        if r.returncode != 0:
            self.d.__exit__(None, None, None)
            self.skipTest("cannot mount tmpfs: %s" % r.stderr.decode().strip())
        self.c = connect(self.d)
        r = call_ready(self.c, "StorageDomain.create", [SD, 4, self.mnt, "tmpfs", 1])
        self.assertIs(result(r), True)

    def tearDown(self):
        if hasattr(self, "c"):
            self.c.close()
        self.d.__exit__(None, None, None)
        subprocess.run(["umount", "-l", self.mnt], capture_output=True)

    def images(self):
        return os.path.join(self.mnt, SD, "images")

    def listed(self):
        out = {}
        for img in result(self.c.call("StorageDomain.getImages", [SD])):
            for vol in result(self.c.call("Image.getVolumes", [img, BLANK, SD])):
                out[vol] = img
        return out

    def on_disk(self):
        files = set()
        for img in os.listdir(self.images()):
            for f in os.listdir(os.path.join(self.images(), img)):
                files.add((img, f))
        return files


class FullTmpfs(MountedDomain):
    def test_enospc_fails_task_and_cleans(self):
        img, v1, v2 = uuid_n("aaaaaaaa", 1), uuid_n("bbbbbbbb", 1), uuid_n("bbbbbbbb", 2)
        tid = result(self.c.call("Volume.create", [v1, BLANK, SD, img, str(8 * MiB), 5, 1]))
        self.assertEqual(wait_task(self.c, tid)["taskResult"], "success")
        # far more than is left: preallocation hits ENOSPC
        tid = result(self.c.call("Volume.create", [v2, BLANK, SD, img, str(64 * MiB), 5, 1]))
        st = wait_task(self.c, tid)
        self.assertEqual(st["taskResult"], "cleanSuccess")
        self.assertIn("No space left", st["message"])
        self.assertEqual(self.on_disk(), {(img, v1), (img, v1 + ".meta")})
        self.assertEqual(self.listed(), {v1: img})
        # a qcow2 image in the little space left still works
        v3 = uuid_n("bbbbbbbb", 3)
        tid = result(self.c.call("Volume.create", [v3, BLANK, SD, img, str(64 * MiB), 4, 2]))
        self.assertEqual(wait_task(self.c, tid)["taskResult"], "success")


class ReadOnly(MountedDomain):
    def test_read_only_filesystem(self):
        img, v1, v2 = uuid_n("aaaaaaaa", 1), uuid_n("bbbbbbbb", 1), uuid_n("bbbbbbbb", 2)
        tid = result(self.c.call("Volume.create", [v1, BLANK, SD, img, str(MiB), 5, 2]))
        self.assertEqual(wait_task(self.c, tid)["taskResult"], "success")
        r = subprocess.run(["mount", "-o", "remount,ro", self.mnt], capture_output=True)
        if r.returncode != 0:
            self.skipTest("cannot remount read-only: %s" % r.stderr.decode().strip())
        try:
            r = self.c.call("Volume.create", [v2, BLANK, SD, img, str(MiB), 5, 2])
            self.assertEqual(r["error"]["code"], 100, r)
            self.assertIn("Read-only", r["error"]["message"])
            r = self.c.call("Volume.delete", [v1, BLANK, SD, img])
            self.assertEqual(r["error"]["code"], 100, r)
            vi = result(self.c.call("Volume.getInfo", [v1, BLANK, SD, img]))
            self.assertEqual(vi["legality"], "LEGAL")
            vt.restart(self.d, signal.SIGKILL)
            self.c.close()
            self.c = connect(self.d)
            vi = result(call_ready(self.c, "Volume.getInfo", [v1, BLANK, SD, img]))
            self.assertEqual(vi["legality"], "LEGAL")
        finally:
            subprocess.run(["mount", "-o", "remount,rw", self.mnt], capture_output=True)
        self.assertEqual(self.on_disk(), {(img, v1), (img, v1 + ".meta")})


class FakeQemuImg(unittest.TestCase):
    """A vdsmd whose qemu-img is a stand-in that records its pid and sleeps
    (tearDown kills what a kill -9 orphaned)."""

    def setUp(self):
        self.bin = tempfile.mkdtemp(prefix="vdsmtest-bin-")
        self.pids = os.path.join(self.bin, "pids")
        fake = os.path.join(self.bin, "qemu-img")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho $$ >> %s\nexec sleep 30\n" % self.pids)
        os.chmod(fake, 0o755)
        old = os.environ["PATH"]
        os.environ["PATH"] = self.bin + ":" + old
        try:
            self.d = vt.Daemon()
        finally:
            os.environ["PATH"] = old
        self.c = connect(self.d)
        self.root = os.path.join(self.d.tmp, "storage")
        self.assertIs(result(call_ready(self.c, "StorageDomain.create", [SD, 4, "", "d", 1])), True)

    def tearDown(self):
        self.c.close()
        self.d.__exit__(None, None, None)
        if os.path.exists(self.pids):   # orphans of the kill -9
            with open(self.pids) as f:
                lines = f.read().split()
            for line in lines:
                try:
                    os.kill(int(line), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        shutil.rmtree(self.bin, ignore_errors=True)

    def images(self):
        return os.path.join(self.root, SD, "images")

    listed = MountedDomain.listed
    on_disk = MountedDomain.on_disk


class QueuedAtCrashAndShutdown(FakeQemuImg):
    """COW creates whose qemu-img (the stand-in) keeps both executor threads
    busy, with deletes and creates queued behind them."""

    def queue_work(self):
        img, img2 = uuid_n("aaaaaaaa", 1), uuid_n("aaaaaaaa", 2)
        keep = [uuid_n("bbbbbbbb", 10 + i) for i in range(3)]
        for v in keep:
            tid = result(self.c.call("Volume.create", [v, BLANK, SD, img2, str(MiB), 5, 2]))
            self.assertEqual(wait_task(self.c, tid)["taskResult"], "success")
        tids = {}
        for i in range(2):
            v = uuid_n("bbbbbbbb", i)
            tids[result(self.c.call("Volume.create",
                                    [v, BLANK, SD, img, str(MiB), 4, 2]))] = ("c", v)
        for v in keep:
            tids[result(self.c.call("Volume.delete", [v, BLANK, SD, img2]))] = ("d", v)
        v = uuid_n("bbbbbbbb", 5)
        tids[result(self.c.call("Volume.create", [v, BLANK, SD, img, str(MiB), 5, 2]))] = ("c", v)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:   # both qemu-img stand-ins started
            if os.path.exists(self.pids):
                with open(self.pids) as f:
                    if len(f.read().split()) >= 2:
                        break
            time.sleep(0.02)
        return tids

    def check_outcomes(self, tids, want_aborted):
        statuses = result(call_ready(self.c, "Host.getAllTasksStatuses"))
        listed = self.listed()
        for tid, (kind, vol) in tids.items():
            st = statuses[tid]
            self.assertEqual(st["taskState"], "finished", st)
            ok = st["taskResult"] == "success"
            if kind == "c":   # never got past the stand-in / the queue
                self.assertFalse(ok, st)
                self.assertNotIn(vol, listed, st)
            else:
                # a delete marked its volume ILLEGAL when accepted: a crash
                # completes it, a clean shutdown makes it LEGAL again
                self.assertEqual(ok, not want_aborted, st)
                self.assertEqual(vol in listed, want_aborted, st)
            if want_aborted:
                self.assertEqual(st["code"], 411, st)
                self.assertIn("shutting down", st["message"])
        expected = set()
        for vol, img in listed.items():
            vi = result(self.c.call("Volume.getInfo", [vol, BLANK, SD, img]))
            self.assertEqual(vi["legality"], "LEGAL", vi)
            expected.update({(img, vol), (img, vol + ".meta")})
        self.assertEqual(self.on_disk(), expected)

    def test_kill_9_with_queued_tasks(self):
        tids = self.queue_work()
        self.c.close()
        vt.restart(self.d, signal.SIGKILL)
        self.c = connect(self.d)
        self.check_outcomes(tids, want_aborted=False)

    def test_sigterm_rolls_back_queued_tasks(self):
        tids = self.queue_work()
        self.c.close()
        vt.restart(self.d, signal.SIGTERM)
        self.c = connect(self.d)
        self.check_outcomes(tids, want_aborted=True)
        with open(self.pids) as f:
            lines = f.read().split()
        self.assertEqual(len(lines), 2)
        for line in lines:   # the stand-ins were killed
            with self.assertRaises(ProcessLookupError):
                os.kill(int(line), 0)


class CopyCrash(FakeQemuImg):
    """kill -9 while SDM.copy_data runs (qemu-img convert blocked in the
    stand-in): after the restart the destination is kept, ILLEGAL (a half
    copy is never served as good), the source is intact and LEGAL."""

    def start_blocked_copy(self, n, job):
        """Two 1 MiB volumes in image n, then SDM.copy_data between them
        until the stand-in qemu-img has started (and blocks)."""
        img, src, dst = uuid_n("aaaaaaaa", n), uuid_n("bbbbbbbb", 10 * n), \
            uuid_n("bbbbbbbb", 10 * n + 1)
        for v in (src, dst):
            tid = result(self.c.call("Volume.create", [v, BLANK, SD, img, str(MiB), 5, 2]))
            self.assertEqual(wait_task(self.c, tid)["taskResult"], "success")
        ep = lambda v: {"endpoint_type": "div", "sd_id": SD, "img_id": img, "vol_id": v}
        self.assertIs(result(self.c.call("SDM.copy_data", [job, ep(src), ep(dst)])), True)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        return img, src, dst

    def test_kill_9_during_copy(self):
        job = "e0e1e2e3-e4e5-4e6e-8e7e-8e9eaebecedf"
        img, src, dst = self.start_blocked_copy(7, job)
        self.assertEqual(result(self.c.call("Host.getJobs", ["storage", [job]]))[job]["status"],
                         "running")
        vi = result(self.c.call("Volume.getInfo", [dst, BLANK, SD, img]))
        self.assertEqual(vi["legality"], "ILLEGAL")
        self.c.close()
        vt.restart(self.d, signal.SIGKILL)
        self.c = connect(self.d)
        vi = result(call_ready(self.c, "Volume.getInfo", [dst, BLANK, SD, img]))
        self.assertEqual(vi["legality"], "ILLEGAL")
        vi = result(self.c.call("Volume.getInfo", [src, BLANK, SD, img]))
        self.assertEqual(vi["legality"], "LEGAL")
        self.assertEqual(self.on_disk(), {(img, v + m) for v in (src, dst) for m in ("", ".meta")})
        self.assertEqual(result(self.c.call("Host.getJobs", ["storage"])), {})
        # the engine's recovery: delete the half copy
        tid = result(self.c.call("Volume.delete", [dst, BLANK, SD, img]))
        self.assertEqual(wait_task(self.c, tid)["taskResult"], "success")

    def test_abort_on_shutdown(self):
        img, _, dst = self.start_blocked_copy(8, "e0e1e2e3-e4e5-4e6e-8e7e-8e9eaebeceef")
        self.c.close()
        t0 = time.monotonic()
        vt.restart(self.d, signal.SIGTERM)   # qemu-img is killed, vdsmd exits
        self.assertLess(time.monotonic() - t0, 25)
        with open(self.pids) as f:
            for line in f.read().split():
                with self.assertRaises(ProcessLookupError):
                    os.kill(int(line), 0)
        self.c = connect(self.d)
        vi = result(call_ready(self.c, "Volume.getInfo", [dst, BLANK, SD, img]))
        self.assertEqual(vi["legality"], "ILLEGAL")


class FsizeDaemon(vt.Daemon):
    """vdsmd started under prlimit --fsize (RLIMIT_FSIZE, inherited by its
    qemu-img children)."""
    LIMIT = 4 * MiB

    def command(self):
        return ["prlimit", "--fsize=%d:%d" % (self.LIMIT, self.LIMIT), "--"] + super().command()


class FileSizeLimit(unittest.TestCase):
    def setUp(self):
        if not shutil.which("prlimit") or not shutil.which("qemu-io"):
            self.skipTest("needs prlimit (util-linux) and qemu-io (qemu-utils)")
        self.d = FsizeDaemon()
        self.c = connect(self.d)
        self.root = os.path.join(self.d.tmp, "storage")
        self.assertIs(result(call_ready(self.c, "StorageDomain.create", [SD, 4, "", "d", 1])), True)

    def tearDown(self):
        self.c.close()
        self.d.__exit__(None, None, None)

    def images(self):
        return os.path.join(self.root, SD, "images")

    listed = MountedDomain.listed
    on_disk = MountedDomain.on_disk

    def create(self, vol, img, size, fmt, alloc):
        tid = result(self.c.call("Volume.create", [vol, BLANK, SD, img, str(size), fmt, alloc]))
        return wait_task(self.c, tid)

    def test_file_size_limit(self):
        img = uuid_n("aaaaaaaa", 1)
        small, pre, sparse, cow, dst = (uuid_n("bbbbbbbb", i) for i in range(1, 6))
        self.assertEqual(self.create(small, img, MiB, 5, 2)["taskResult"], "success")
        # past the limit: preallocated (fallocate) and sparse (ftruncate) RAW
        for vol, alloc in ((pre, 1), (sparse, 2)):
            st = self.create(vol, img, 8 * MiB, 5, alloc)
            self.assertEqual(st["taskResult"], "cleanSuccess", st)
            self.assertIn("File too large", st["message"])
        # a qcow2 file starts small: fine under the limit
        self.assertEqual(self.create(cow, img, 64 * MiB, 4, 2)["taskResult"], "success")
        self.assertEqual(self.create(dst, img, 64 * MiB, 4, 2)["taskResult"], "success")
        # 6 MiB of data written into cow by the test (no limit here); copying it
        # makes qemu-img convert (under the limit) write past it
        path = os.path.join(self.images(), img, cow)
        subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0x33 0 6M", path],
                       check=True, capture_output=True)
        ep = lambda v: {"endpoint_type": "div", "sd_id": SD, "img_id": img, "vol_id": v}
        job = "e0e1e2e3-e4e5-4e6e-8e7e-8e9eaebecef0"
        self.assertIs(result(self.c.call("SDM.copy_data", [job, ep(cow), ep(dst)])), True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            j = result(self.c.call("Host.getJobs", ["storage", [job]]))[job]
            if j["status"] not in ("pending", "running"):
                break
            time.sleep(0.02)
        self.assertEqual(j["status"], "failed", j)
        self.assertIn("File too large", j["error"]["message"], j)
        self.assertNotIn("%)", j["error"]["message"])   # no progress lines in it
        vi = result(self.c.call("Volume.getInfo", [dst, BLANK, SD, img]))
        self.assertEqual(vi["legality"], "ILLEGAL")   # a half copy is not served as good
        # still alive and serving; nothing half-made on disk
        self.assertIsNone(self.d.proc.poll())
        self.assertEqual(set(self.listed()), {small, cow, dst})
        self.assertEqual(self.on_disk(), {(img, v + m) for v in (small, cow, dst)
                                          for m in ("", ".meta")})


if __name__ == "__main__":
    unittest.main()
