"""The image server's nbd: backend against the real vdsmd: the engine's
download and upload of qcow2 volumes through NBD.start_server's qemu-nbd
export (TransferDiskImageCommand: start_server -> add_image_ticket with the
nbd:unix: url -> transfer -> get_image_ticket -> remove_image_ticket ->
stop_server), with Python's http.client as the client and qemu-img to check
what moved.

Covered: a download's bytes equal `qemu-img convert -O raw` of the volume,
and its zero extents equal `qemu-img map` (holes of the chain reported, never
needed on the wire; the GET of them still reads zeroes); an upload through a
writable export with PUT ranges, PATCH zero and flush equals its source
(`qemu-img compare`); dirty extents of a bitmap export (SDM.add_bitmap, then
writes) are exactly the written ranges (cold incremental backup); a ticket
url outside <run_dir>/nbd is refused (400)."""

import http.client
import json
import os
import socket
import subprocess
import time
import unittest
import uuid

import vdsmtest as vt
from test_storage import BLANK, connect, result, wait_task
from test_storage_engine import SD, SP, conn_params, make_pool

IMG_D = "f1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6c1"   # downloaded
VOL_D = "f2b3c4d5-e6f7-4081-9a2b-c3d4e5f60c01"
IMG_U = "f1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6c2"   # uploaded into
VOL_U = "f2b3c4d5-e6f7-4081-9a2b-c3d4e5f60c02"
IMG_B = "f1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6c3"   # backed up with a bitmap
VOL_B = "f2b3c4d5-e6f7-4081-9a2b-c3d4e5f60c03"
MiB = 1 << 20
KiB = 1 << 10
SIZE = 16 * MiB
COW_FMT, SPARSE = 4, 2


def run(*cmd):
    p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    if p.returncode != 0:
        raise AssertionError("%s: exit %d: %s" % (" ".join(cmd), p.returncode,
                                                  p.stdout.decode(errors="replace")))
    return p.stdout


def merge(ext):
    out = []
    for e in ext:
        if out and out[-1][2:] == e[2:] and out[-1][0] + out[-1][1] == e[0]:
            out[-1] = (out[-1][0], out[-1][1] + e[1]) + e[2:]
        else:
            out.append(tuple(e))
    return out


def qemu_zero_extents(path):
    """qemu-img map of a qcow2 file in imageio's zero-extent terms: zero as
    qemu says, hole where no layer has the cluster (not present)."""
    m = json.loads(run("qemu-img", "map", "-U", "--output=json", "-f", "qcow2", path))
    return merge([(e["start"], e["length"], e["zero"], not e.get("present", e["data"]))
                  for e in m])


class ImageNBD(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.iport = vt.free_port()
        cls.d = vt.Daemon("--image-port", str(cls.iport))
        cls.run_dir = os.path.join(cls.d.tmp, "run")   # vdsmtest's --run-dir
        cls.c = connect(cls.d)
        cls.root = os.path.join(cls.d.tmp, "dom")
        os.mkdir(cls.root, 0o755)
        make_pool(unittest.TestCase(), cls.c, 4, conn_params(cls.root), cls.root)
        for vol, img in ((VOL_D, IMG_D), (VOL_U, IMG_U), (VOL_B, IMG_B)):
            tid = result(cls.c.call("Volume.create", [vol, SP, SD, img, str(SIZE), COW_FMT,
                                                      SPARSE, "DATA", "v", BLANK, BLANK]))
            st = wait_task(cls.c, tid)
            assert st["taskResult"] == "success", st

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    # -- helpers ------------------------------------------------------------

    def path(self, img, vol):
        return os.path.join(self.root, SD, "images", img, vol)

    def io(self, img, vol, *cmds):
        args = ["qemu-io", "-f", "qcow2"]
        for c in cmds:
            args += ["-c", c]
        run(*(args + [self.path(img, vol)]))

    def start_server(self, img, vol, readonly, bitmap=None):
        """NBD.start_server in the engine's form (TransferDiskImageCommand's
        getStartNbdServerParameters: detect_zeroes always, discard for a
        sparse volume of a file domain, readonly for a download)."""
        sid = str(uuid.uuid4())
        cfg = {"sd_id": SD, "img_id": img, "vol_id": vol, "readonly": readonly,
               "discard": True, "detect_zeroes": True, "backing_chain": True,
               "bitmap": bitmap}
        url = result(self.c.call("NBD.start_server", [sid, cfg]))
        self.assertEqual(url, "nbd:unix:%s/nbd/%s.sock" % (self.run_dir, sid))
        self.addCleanup(self.c.call, "NBD.stop_server", [sid])
        return sid, url

    def stop_server(self, sid):
        self.assertIs(result(self.c.call("NBD.stop_server", [sid])), True)
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "nbd", sid + ".sock")))

    def ticket(self, url, ops, dirty=False, size=SIZE):
        """Host.add_image_ticket in the engine's form (AddImageTicketVDSCommand)."""
        tid = str(uuid.uuid4())
        t = {"uuid": tid, "timeout": 300, "inactivity_timeout": 60, "size": size,
             "url": url, "ops": ops, "sparse": True, "transfer_id": str(uuid.uuid4()),
             "dirty": dirty}
        r = self.c.call("Host.add_image_ticket", [t])
        self.assertIn("result", r, r)
        self.addCleanup(self.c.call, "Host.remove_image_ticket", [tid])
        return tid

    def remove_ticket(self, tid):
        self.assertIs(result(self.c.call("Host.remove_image_ticket", [tid])), True)

    def request(self, method, url, body=None, headers=None, conn=None):
        h = conn or http.client.HTTPConnection("127.0.0.1", self.iport, timeout=60)
        h.request(method, url, body=body, headers=headers or {})
        r = h.getresponse()
        data = r.read()
        if conn is None:
            h.close()
        return r, data

    def extents(self, tid, context):
        r, body = self.request("GET", "/images/%s/extents?context=%s" % (tid, context))
        self.assertEqual(r.status, 200, body)
        return json.loads(body)

    def info(self, tid):
        return result(self.c.call("Host.get_image_ticket", [tid]))

    # -- the engine's download ----------------------------------------------

    def test_download_qcow2(self):
        self.io(IMG_D, VOL_D, "write -P 0x11 1M 2M", "write -z 6M 1M",
                "write -P 0x22 10M 512k", "write -P 0x33 15M 1M")
        path = self.path(IMG_D, VOL_D)
        sid, url = self.start_server(IMG_D, VOL_D, readonly=True)
        tid = self.ticket(url, ["read"])
        r, body = self.request("OPTIONS", "/images/" + tid)
        self.assertEqual(r.status, 200)
        opts = json.loads(body)
        self.assertEqual(opts["features"], ["extents"])
        self.assertEqual(opts["max_readers"], 8)
        # the client asks for the extents first, as imageio's client does
        ext = self.extents(tid, "zero")
        got = merge([(e["start"], e["length"], e["zero"], e["hole"]) for e in ext])
        self.assertEqual(got, qemu_zero_extents(path))
        self.assertIn((6 * MiB, MiB, True, False), got)        # zeroes written
        self.assertEqual(got[0], (0, MiB, True, True))           # never written
        self.assertEqual(sum(e["length"] for e in ext), SIZE)
        # the whole image: holes and zeroes read as zeroes
        r, data = self.request("GET", "/images/" + tid)
        self.assertEqual(r.status, 200)
        self.assertEqual(int(r.getheader("content-length")), SIZE)
        raw = os.path.join(self.d.tmp, "download.raw")
        run("qemu-img", "convert", "-U", "-f", "qcow2", "-O", "raw", path, raw)
        with open(raw, "rb") as f:
            self.assertEqual(data, f.read())
        os.unlink(raw)
        self.assertEqual(data[1 * MiB:3 * MiB], b"\x11" * (2 * MiB))
        # a range, and only the data extents, as a sparse-aware client reads
        h = http.client.HTTPConnection("127.0.0.1", self.iport, timeout=60)
        for e in ext:
            if e["zero"]:
                continue
            rng = "bytes=%d-%d" % (e["start"], e["start"] + e["length"] - 1)
            r, part = self.request("GET", "/images/" + tid, headers={"Range": rng}, conn=h)
            self.assertEqual(r.status, 206)
            self.assertEqual(part, data[e["start"]:e["start"] + e["length"]])
        h.close()
        # the engine watches the ticket (a GET's op ends just after its
        # last byte reaches the client: poll, as the engine does)
        deadline = time.monotonic() + 10
        inf = self.info(tid)
        while inf["active"] and time.monotonic() < deadline:
            time.sleep(0.02)
            inf = self.info(tid)
        self.assertEqual(inf["url"], url)
        self.assertGreaterEqual(inf["transferred"], SIZE)
        self.assertFalse(inf["active"])
        # a read ticket never writes, even on a writable path
        r, _ = self.request("PUT", "/images/" + tid, body=b"x" * 10)
        self.assertEqual(r.status, 403)
        self.remove_ticket(tid)
        r, _ = self.request("GET", "/images/" + tid)
        self.assertEqual(r.status, 403)
        self.stop_server(sid)

    # -- the engine's upload into a qcow2 volume ----------------------------

    def test_upload_qcow2(self):
        src = os.path.join(self.d.tmp, "src.qcow2")
        run("qemu-img", "create", "-q", "-f", "qcow2", src, str(SIZE))
        run("qemu-io", "-f", "qcow2", "-c", "write -P 0x44 0 3M", "-c", "write -P 0x55 8M 1M",
            "-c", "write -P 0x66 14M 64k", src)
        # the volume had old data where the source is zero: zero must clear it
        self.io(IMG_U, VOL_U, "write -P 0x99 4M 2M", "write -P 0x98 12M 1M")
        sid, url = self.start_server(IMG_U, VOL_U, readonly=False)
        tid = self.ticket(url, ["write"])
        r, body = self.request("OPTIONS", "/images/" + tid)
        self.assertEqual(sorted(json.loads(body)["features"]), ["extents", "flush", "zero"])
        srcraw = os.path.join(self.d.tmp, "src.raw")
        run("qemu-img", "convert", "-f", "qcow2", "-O", "raw", src, srcraw)
        m = merge([(e["start"], e["length"], e["data"])
                   for e in json.loads(run("qemu-img", "map", "--output=json", "-f", "qcow2",
                                           src))])
        h = http.client.HTTPConnection("127.0.0.1", self.iport, timeout=60)
        with open(srcraw, "rb") as f:
            for start, length, data in m:
                if data:
                    f.seek(start)
                    rng = "bytes %d-%d/*" % (start, start + length - 1)
                    r, body = self.request("PUT", "/images/%s?flush=n" % tid, body=f.read(length),
                                           headers={"Content-Range": rng}, conn=h)
                else:
                    r, body = self.request(
                        "PATCH", "/images/" + tid,
                        body=json.dumps({"op": "zero", "offset": start, "size": length,
                                         "flush": False}),
                        headers={"Content-Type": "application/json"}, conn=h)
                self.assertEqual(r.status, 200, body)
        r, body = self.request("PATCH", "/images/" + tid, body=json.dumps({"op": "flush"}),
                               headers={"Content-Type": "application/json"}, conn=h)
        self.assertEqual(r.status, 200, body)
        h.close()
        self.assertEqual(self.info(tid)["transferred"],
                         sum(n for _, n, d in m if d) + sum(n for _, n, d in m if not d))
        # the zeroed ranges read as zero through the export already
        ext = self.extents(tid, "zero")
        self.assertTrue(any(e["zero"] and e["start"] <= 4 * MiB < e["start"] + e["length"]
                            for e in ext), ext)
        self.remove_ticket(tid)
        self.stop_server(sid)
        run("qemu-img", "compare", "-f", "qcow2", "-F", "qcow2", src, self.path(IMG_U, VOL_U))
        run("qemu-img", "check", "-q", self.path(IMG_U, VOL_U))
        os.unlink(srcraw)
        os.unlink(src)

    # -- incremental (cold) backup: dirty extents ---------------------------

    def test_dirty_extents(self):
        self.io(IMG_B, VOL_B, "write -P 0x77 0 4M")
        bm = str(uuid.uuid4())
        jid = str(uuid.uuid4())
        vi = {"sd_id": SD, "img_id": IMG_B, "vol_id": VOL_B}
        self.assertIs(result(self.c.call("SDM.add_bitmap", [jid, vi, bm])), True)
        deadline = time.monotonic() + 30
        while True:
            j = result(self.c.call("Host.getJobs", ["storage", [jid]]))[jid]
            if j["status"] not in ("pending", "running") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual(j["status"], "done", j)
        self.io(IMG_B, VOL_B, "write -P 0x78 1M 64k", "write -z 5M 128k",
                "write -P 0x79 9M 192k")
        sid, url = self.start_server(IMG_B, VOL_B, readonly=True, bitmap=bm)
        tid = self.ticket(url, ["read"], dirty=True)
        ext = self.extents(tid, "dirty")
        self.assertEqual(sum(e["length"] for e in ext), SIZE)
        self.assertTrue(all(set(e) == {"start", "length", "dirty", "zero"} for e in ext), ext)
        dirty = merge([(e["start"], e["length"], e["zero"]) for e in ext if e["dirty"]])
        self.assertEqual(dirty, [(MiB, 64 * KiB, False), (5 * MiB, 128 * KiB, True),
                                 (9 * MiB, 192 * KiB, False)])
        # what a backup reads of the dirty data ranges
        r, part = self.request("GET", "/images/" + tid,
                               headers={"Range": "bytes=%d-%d" % (9 * MiB, 9 * MiB + 192 * KiB - 1)})
        self.assertEqual((r.status, part), (206, b"\x79" * (192 * KiB)))
        # zero extents come from the same export
        self.assertEqual(self.extents(tid, "zero")[0],
                         {"start": 0, "length": 4 * MiB, "zero": False, "hole": False})
        # a ticket that is not dirty has no dirty extents
        plain = self.ticket(url, ["read"])
        r, _ = self.request("GET", "/images/%s/extents?context=dirty" % plain)
        self.assertEqual(r.status, 404)
        self.remove_ticket(plain)
        self.remove_ticket(tid)
        self.stop_server(sid)

    # -- refusals -------------------------------------------------------------

    def test_url_outside_run_dir(self):
        # a listening unix socket that is not under <run_dir>/nbd
        sock = os.path.join(self.d.tmp, "rogue.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sock)
        s.listen(1)
        self.addCleanup(os.unlink, sock)
        self.addCleanup(s.close)
        for url in ("nbd:unix:" + sock, "nbd:unix:%s/nbd/../../rogue.sock" % self.run_dir):
            tid = self.ticket(url, ["read"])
            r, body = self.request("GET", "/images/" + tid)
            self.assertEqual(r.status, 400, body)
            self.assertIn(b"outside", body)
        # an nbd url over TCP is not VDSM's form: refused too
        tid = self.ticket("nbd:127.0.0.1:10809", ["read"])
        r, _ = self.request("GET", "/images/" + tid)
        self.assertGreaterEqual(r.status, 400)


if __name__ == "__main__":
    unittest.main()
