"""NBD.start_server / NBD.stop_server against the real vdsmd: volumes of a
LOCALFS domain in a connected pool exported by qemu-nbd on a unix socket
under --run-dir (vdsmtest's <tmp>/run), read with clients that are not
ours (libnbd's nbdinfo and nbdcopy, qemu-io, qemu-img compare).  VDSM's semantics (storage/nbd.py):
the URL nbd:unix:<socket>, read-only exports refuse writes,
backing_chain=false exports only the top volume, a bitmap export shows the
ranges written since SDM.add_bitmap (qemu:dirty-bitmap:<name>), bitmap
errors 2009 / 946 / 947, 313 without a pool, stop of an unknown id
succeeds.  The daemon's supervision: a qemu-nbd that dies is noticed (its
socket removed), vdsmd's exit stops every server, and a server left by a
vdsmd killed with SIGKILL is stopped by stop_server after the restart."""

import json
import os
import signal
import subprocess
import time
import types
import unittest
import uuid

import vdsmtest as vt
from test_storage import BLANK, call_ready, connect, result, wait_task
from test_storage_engine import SD, SP, conn_params, make_pool

IMG_R = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6a1"
RAW = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60a01"
IMG_C = "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6a2"
BASE = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60a02"
TOP = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60a03"
MiB = 1 << 20
SIZE = 8 * MiB
COW_FMT, RAW_FMT, SPARSE = 4, 5, 2


def uri(url):
    """VDSM's nbd:unix:<socket> as libnbd's URI."""
    assert url.startswith("nbd:unix:"), url
    return "nbd+unix:///?socket=" + url[len("nbd:unix:"):]


def run(*cmd, check=True):
    p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60)
    if check and p.returncode != 0:
        raise AssertionError("%s: exit %d: %s" % (" ".join(cmd), p.returncode,
                                                  p.stdout.decode(errors="replace")))
    return p


# nbdinfo --json describes an export's content with file(1) unless told not
# to; without file(1) (a minimal Debian) that field is raw bytes, not JSON.
def nbd_map(url, context=None):
    """[(offset, length, type)] of nbdinfo --map, adjacent equal types merged."""
    arg = "--map" if context is None else "--map=" + context
    ext = json.loads(run("nbdinfo", arg, "--json", uri(url)).stdout)
    return merge([(e["offset"], e["length"], e["type"]) for e in ext])


def qemu_map(path, fmt):
    """qemu-img map in nbdinfo's base:allocation terms: 1 hole, 2 zero."""
    ext = json.loads(run("qemu-img", "map", "-U", "--output=json", "-f", fmt, path).stdout)
    return merge([(e["start"], e["length"], (0 if e["data"] else 1) | (2 if e["zero"] else 0))
                  for e in ext])


def merge(ext):
    out = []
    for off, length, typ in ext:
        if out and out[-1][2] == typ and out[-1][0] + out[-1][1] == off:
            out[-1] = (out[-1][0], out[-1][1] + length, typ)
        else:
            out.append((off, length, typ))
    return out


def qemu_nbd_pids(sock):
    """pids of qemu-nbd processes serving sock (from /proc)."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"qemu-nbd" and \
                ("--socket=" + sock).encode() in argv:
            pids.append(int(p))
    return pids


def wait_gone(pred, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


class NBD(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        cls.run_dir = os.path.join(cls.d.tmp, "run")   # vdsmtest's --run-dir
        cls.c = connect(cls.d)
        cls.root = os.path.join(cls.d.tmp, "dom")
        os.mkdir(cls.root, 0o755)
        make_pool(unittest.TestCase(), cls.c, 4, conn_params(cls.root), cls.root)
        for vol, img, fmt, parent in ((RAW, IMG_R, RAW_FMT, BLANK), (BASE, IMG_C, COW_FMT, BLANK),
                                      (TOP, IMG_C, COW_FMT, BASE)):
            tid = result(cls.c.call("Volume.create", [vol, SP, SD, img, str(SIZE), fmt, SPARSE,
                                                      "DATA", "v",
                                                      img if parent != BLANK else BLANK,
                                                      parent]))
            st = wait_task(cls.c, tid)
            assert st["taskResult"] == "success", st
        # data: raw 1M..1.5M; base 0..1M; top 2M..3M over it
        cls.io(cls.path(IMG_R, RAW), "raw", "write -P 0xab 1M 512k")
        cls.io(cls.path(IMG_C, BASE), "qcow2", "write -P 0x11 0 1M")
        cls.io(cls.path(IMG_C, TOP), "qcow2", "write -P 0x22 2M 1M")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    @classmethod
    def path(cls, img, vol):
        return os.path.join(cls.root, SD, "images", img, vol)

    @staticmethod
    def io(path, fmt, cmd):
        run("qemu-io", "-f", fmt, "-c", cmd, path)

    def cfg(self, img, vol, **kw):
        d = {"sd_id": SD, "img_id": img, "vol_id": vol}
        d.update(kw)
        return d

    def start(self, cfg, sid=None):
        sid = sid or str(uuid.uuid4())
        url = result(self.c.call("NBD.start_server", [sid, cfg]))
        self.assertEqual(url, "nbd:unix:%s/nbd/%s.sock" % (self.run_dir, sid))
        self.assertTrue(os.path.exists(url[len("nbd:unix:"):]))
        self.addCleanup(self.stop, sid)
        return sid, url

    def stop(self, sid):
        self.assertIs(result(self.c.call("NBD.stop_server", [sid])), True)

    def sock(self, sid):
        return os.path.join(self.run_dir, "nbd", sid + ".sock")

    def error(self, r):
        self.assertIn("error", r, r)
        return r["error"]["code"]

    def copy_compare(self, url, path, fmt):
        out = os.path.join(self.d.tmp, "out.raw")
        run("nbdcopy", uri(url), out)
        run("qemu-img", "compare", "-U", "-f", "raw", "-F", fmt, out, path)
        os.unlink(out)

    def test_raw(self):
        sid, url = self.start(self.cfg(IMG_R, RAW, readonly=True))
        info = json.loads(run("nbdinfo", "--json", "--no-content", uri(url)).stdout)
        self.assertEqual(info["exports"][0]["export-size"], SIZE)
        self.assertTrue(info["exports"][0]["is_read_only"])
        got = nbd_map(url)
        self.assertEqual(got, qemu_map(self.path(IMG_R, RAW), "raw"))
        self.assertIn((MiB, MiB // 2, 0), got)
        self.copy_compare(url, self.path(IMG_R, RAW), "raw")
        # read-only: a client cannot write
        p = run("qemu-io", "-f", "raw", "-c", "write -P 0xcd 0 4k", url, check=False)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        with open(self.path(IMG_R, RAW), "rb") as f:
            self.assertEqual(f.read(4096), b"\0" * 4096)
        # stop: socket and process gone
        sock = self.sock(sid)
        self.assertEqual(len(qemu_nbd_pids(sock)), 1)
        self.stop(sid)
        self.assertFalse(os.path.exists(sock))
        self.assertEqual(qemu_nbd_pids(sock), [])
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "nbd", sid + ".pid")))

    def test_writable(self):
        sid, url = self.start(self.cfg(IMG_R, RAW, readonly=False, discard=True,
                                       detect_zeroes=True))
        run("qemu-io", "-f", "raw", "-c", "write -P 0x5a 6M 64k", url)
        self.stop(sid)
        with open(self.path(IMG_R, RAW), "rb") as f:
            f.seek(6 * MiB)
            self.assertEqual(f.read(65536), b"\x5a" * 65536)
        self.io(self.path(IMG_R, RAW), "raw", "discard 6M 64k")

    def test_qcow2_chain(self):
        sid, url = self.start(self.cfg(IMG_C, TOP, readonly=True))
        info = json.loads(run("nbdinfo", "--json", "--no-content", uri(url)).stdout)
        self.assertEqual(info["exports"][0]["export-size"], SIZE)
        self.assertIn("qemu:allocation-depth", info["exports"][0]["contexts"])
        got = nbd_map(url)
        self.assertEqual(got, qemu_map(self.path(IMG_C, TOP), "qcow2"))
        self.assertEqual(got[0], (0, MiB, 0))   # the base's data through the chain
        self.copy_compare(url, self.path(IMG_C, TOP), "qcow2")

    def test_top_only(self):
        sid, url = self.start(self.cfg(IMG_C, TOP, readonly=True, backing_chain=False))
        out = os.path.join(self.d.tmp, "top.raw")
        run("nbdcopy", uri(url), out)
        with open(out, "rb") as f:
            data = f.read()
        os.unlink(out)
        self.assertEqual(len(data), SIZE)
        self.assertEqual(data[:MiB], b"\0" * MiB)             # the base is not exported
        self.assertEqual(data[2 * MiB:3 * MiB], b"\x22" * MiB)
        # allocation depth: the top's own cluster at depth 1, the rest absent (0)
        depth = nbd_map(url, "qemu:allocation-depth")
        self.assertEqual(depth[:2], [(0, 2 * MiB, 0), (2 * MiB, MiB, 1)])
        self.assertEqual({t for _, _, t in depth}, {0, 1})

    def test_bitmap(self):
        bm = str(uuid.uuid4())
        jid = str(uuid.uuid4())
        vi = {"sd_id": SD, "img_id": IMG_C, "vol_id": TOP}
        self.assertIs(result(self.c.call("SDM.add_bitmap", [jid, vi, bm])), True)
        deadline = time.monotonic() + 30
        while True:
            j = result(self.c.call("Host.getJobs", ["storage", [jid]]))[jid]
            if j["status"] not in ("pending", "running") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual(j["status"], "done", j)
        self.io(self.path(IMG_C, TOP), "qcow2", "write -P 0x33 4M 64k")
        self.io(self.path(IMG_C, TOP), "qcow2", "write -P 0x44 7M 128k")
        sid, url = self.start(self.cfg(IMG_C, TOP, readonly=True, bitmap=bm))
        dirty = [(o, n) for o, n, t in nbd_map(url, "qemu:dirty-bitmap:" + bm) if t & 1]
        self.assertEqual(dirty, [(4 * MiB, 64 * 1024), (7 * MiB, 128 * 1024)])
        self.copy_compare(url, self.path(IMG_C, TOP), "qcow2")
        # what this is for: the engine offers cold backup on this host
        caps = result(call_ready(self.c, "Host.getCapabilities", [], timeout=30))
        self.assertIs(caps["coldBackupEnabled"], True)
        # refusals of VDSM's ServerConfig / start_server
        for cfg, code in ((self.cfg(IMG_C, TOP, readonly=False, bitmap=bm), 2009),
                          (self.cfg(IMG_C, TOP, readonly=True, bitmap=bm,
                                    backing_chain=False), 2009),
                          (self.cfg(IMG_R, RAW, readonly=True, bitmap=bm), 2009),
                          (self.cfg(IMG_C, TOP, readonly=True, bitmap=str(uuid.uuid4())), 947),
                          (self.cfg(IMG_C, TOP, readonly=True, bitmap="not-a-uuid"), -32602)):
            r = self.c.call("NBD.start_server", [str(uuid.uuid4()), cfg])
            self.assertEqual(self.error(r), code, (cfg, r))
        # the refused calls left nothing in the run directory
        self.assertEqual(sorted(os.listdir(os.path.join(self.run_dir, "nbd"))),
                         [sid + ".pid", sid + ".sock"])

    def test_bitmap_hole(self):
        """In the base but not in the top: a hole in the chain (946)."""
        bm = str(uuid.uuid4())
        run("qemu-img", "bitmap", "--add", "--enable", self.path(IMG_C, BASE), bm)
        try:
            r = self.c.call("NBD.start_server",
                            [str(uuid.uuid4()), self.cfg(IMG_C, TOP, readonly=True, bitmap=bm)])
            self.assertEqual(self.error(r), 946, r)
        finally:
            run("qemu-img", "bitmap", "--remove", self.path(IMG_C, BASE), bm)

    def test_bitmap_chain_merge(self):
        """In the base and in the top (a snapshot taken after the bitmap):
        VDSM's overlay merges both copies; the export shows the writes made
        to either volume while the bitmap was on it."""
        bm = str(uuid.uuid4())
        base, top = self.path(IMG_C, BASE), self.path(IMG_C, TOP)
        run("qemu-img", "bitmap", "--add", "--enable", base, bm)
        try:
            self.io(base, "qcow2", "write -P 0x55 6M 64k")
            run("qemu-img", "bitmap", "--add", "--enable", top, bm)
            self.io(top, "qcow2", "write -P 0x66 3584k 64k")
            sid, url = self.start(self.cfg(IMG_C, TOP, readonly=True, bitmap=bm))
            dirty = [(o, n) for o, n, t in nbd_map(url, "qemu:dirty-bitmap:" + bm) if t & 1]
            self.assertEqual(dirty, [(3584 * 1024, 64 * 1024), (6 * MiB, 64 * 1024)])
            self.copy_compare(url, top, "qcow2")
            # the overlay is gone once qemu-nbd holds it; the volumes keep theirs
            self.assertEqual(sorted(os.listdir(os.path.join(self.run_dir, "nbd"))),
                             [sid + ".pid", sid + ".sock"])
            self.stop(sid)
        finally:
            run("qemu-img", "bitmap", "--remove", top, bm, check=False)
            run("qemu-img", "bitmap", "--remove", base, bm)

    def test_refusals(self):
        other = "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60aff"
        for cfg, code in ((self.cfg(IMG_C, other), 201),
                          (self.cfg(IMG_R, TOP), 201),          # a volume of another image
                          (dict(self.cfg(IMG_C, TOP), sd_id=other), 358),
                          ({"sd_id": SD, "img_id": IMG_C}, -32602),
                          (self.cfg(IMG_C, TOP, readonly="maybe"), -32602)):
            r = self.c.call("NBD.start_server", [str(uuid.uuid4()), cfg])
            self.assertIn(self.error(r), (code,) if code != 201 else (201, 268), (cfg, r))
        r = self.c.call("NBD.start_server", ["nope", self.cfg(IMG_C, TOP)])
        self.assertEqual(self.error(r), -32602, r)
        # an id in use
        sid, url = self.start(self.cfg(IMG_C, TOP, readonly=True))
        r = self.c.call("NBD.start_server", [sid, self.cfg(IMG_R, RAW, readonly=True)])
        self.assertEqual(self.error(r), 100, r)
        self.assertEqual(json.loads(run("nbdinfo", "--json", "--no-content", uri(url)).stdout)
                         ["exports"][0]["export-size"], SIZE)
        # unknown id: succeeds (VDSM), twice
        self.stop(str(uuid.uuid4()))
        self.stop(sid)
        self.stop(sid)

    def test_server_dies(self):
        sid, url = self.start(self.cfg(IMG_R, RAW, readonly=True))
        sock = self.sock(sid)
        pids = qemu_nbd_pids(sock)
        self.assertEqual(len(pids), 1)
        mark = len(self.d.log_lines())
        os.kill(pids[0], signal.SIGKILL)
        self.assertTrue(self.d.wait_log(r"NBD server %s: qemu-nbd .* exited by itself" % sid,
                                        start=mark))
        self.assertTrue(wait_gone(lambda: not os.path.exists(sock)))
        # the id is free again
        url2 = result(self.c.call("NBD.start_server",
                                  [sid, self.cfg(IMG_R, RAW, readonly=True)]))
        self.assertEqual(url2, url)

    def test_zz_restart_and_exit(self):
        """Last (it restarts the class's daemon): a qemu-nbd left by a vdsmd
        killed with SIGKILL is stopped by stop_server after the restart;
        vdsmd's SIGTERM exit stops every server."""
        sid = str(uuid.uuid4())
        url = result(self.c.call("NBD.start_server", [sid, self.cfg(IMG_R, RAW,
                                                                    readonly=True)]))
        sock = self.sock(sid)
        left = qemu_nbd_pids(sock)
        self.assertEqual(len(left), 1)
        self.c.close()
        vt.restart(self.d, sig=signal.SIGKILL)
        type(self).c = self.c = connect(self.d)
        self.assertEqual(qemu_nbd_pids(sock), left)     # survived the crash
        self.assertEqual(json.loads(run("nbdinfo", "--json", "--no-content", uri(url)).stdout)
                         ["exports"][0]["export-size"], SIZE)
        self.stop(sid)
        self.assertTrue(wait_gone(lambda: not qemu_nbd_pids(sock)))
        self.assertFalse(os.path.exists(sock))
        socks = []
        for _ in range(2):
            s2, _ = self.start(self.cfg(IMG_R, RAW, readonly=True))
            socks.append(self.sock(s2))
        pids = [p for s in socks for p in qemu_nbd_pids(s)]
        self.assertEqual(len(pids), 2)
        self.c.close()
        self._cleanups.clear()      # the daemon is gone: no stop_server
        self.assertEqual(self.d.stop(), 0)
        for p in pids:
            self.assertFalse(os.path.exists("/proc/%d" % p) and
                             open("/proc/%d/stat" % p).read().split()[2] != "Z", p)
        for s in socks:
            self.assertFalse(os.path.exists(s))
        type(self).c = types.SimpleNamespace(close=lambda: None)


class NoPool(unittest.TestCase):
    def test_pool_not_connected(self):
        """VDSM's hsm checks the pool first: 313, nothing started."""
        with vt.Daemon() as d:
            run_dir = os.path.join(d.tmp, "run")
            c = connect(d)
            try:
                r = call_ready(c, "NBD.start_server",
                               [str(uuid.uuid4()), {"sd_id": SD, "img_id": IMG_R,
                                                    "vol_id": RAW, "readonly": True}])
                self.assertEqual(r["error"]["code"], 313, r)
                nbd_dir = os.path.join(run_dir, "nbd")
                self.assertEqual(os.listdir(nbd_dir) if os.path.isdir(nbd_dir) else [], [])
            finally:
                c.close()


if __name__ == "__main__":
    unittest.main()
