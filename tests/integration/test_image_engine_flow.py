"""The engine's image transfers end to end (issue 28): TransferDiskImageCommand's
sequence of verbs, each sent exactly as the engine-forms corpus gives it
(tests/engine_forms/*.json, steps 320-339, "flow": "image", with the file and
line of ovirt-engine for every value), with the HTTP transfer a client
(imageio's client, a browser, a backup product) runs between them:

  upload (FILE backend)   Image.prepare (allowIllegal) -> Host.add_image_ticket
                          (ops write, the engine's full field set) -> PUTs, PATCH
                          zero, flush -> Host.get_image_ticket polls ->
                          Host.extend_image_ticket -> Host.remove_image_ticket ->
                          Volume.verify_untrusted -> Image.teardown
  upload of qcow2 (NBD)   Image.prepare -> NBD.start_server (readonly false) ->
                          ticket on nbd:unix:... -> PUTs, zero -> polls -> remove ->
                          NBD.stop_server -> Volume.verify_untrusted
  download (NBD)          Image.prepare -> NBD.start_server (readonly) -> ticket
                          (ops read, filename) -> GET -> polls -> remove -> stop
  backup-style            SDM.add_bitmap, writes, then NBD.start_server with the
                          bitmap -> ticket (dirty) -> extents?context=dirty ->
                          GETs of the dirty ranges -> polls -> remove -> stop

Every answer is read with the engine's rules of its entry (check_reads of
test_engine_forms) and checked against its api/ result type; what moved is
checked with qemu-img (compare, convert) and the ticket's status with what
the client sent.  The last test checks that every flow entry of the corpus
was replayed here."""

import http.client
import json
import os
import subprocess
import time
import unittest
import uuid

import apischema
import test_engine_forms as ef
import vdsmtest as vt
from test_storage import BLANK, connect, result, wait_task
from test_storage_engine import SD, SP, conn_params, make_pool

MiB = 1 << 20
KiB = 1 << 10
SIZE = 16 * MiB
RAW_FMT, COW_FMT, SPARSE = 5, 4, 2
VOLS = {   # name -> (image, volume, format)
    "raw": ("a1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6d1", "a2b3c4d5-e6f7-4081-9a2b-c3d4e5f60d01", RAW_FMT),
    "qcow": ("a1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6d2", "a2b3c4d5-e6f7-4081-9a2b-c3d4e5f60d02", COW_FMT),
    "down": ("a1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6d3", "a2b3c4d5-e6f7-4081-9a2b-c3d4e5f60d03", COW_FMT),
    "backup": ("a1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6d4", "a2b3c4d5-e6f7-4081-9a2b-c3d4e5f60d04",
               COW_FMT),
}


def run(*cmd):
    p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    if p.returncode != 0:
        raise AssertionError("%s: exit %d: %s" % (" ".join(cmd), p.returncode,
                                                  p.stdout.decode(errors="replace")))
    return p.stdout


def flow_entries():
    return {e["step"]: e for e in ef.load_corpus() if e.get("flow") == "image"}


def data_map(path, fmt):
    """(start, length, data) runs of a source image (qemu-img map)."""
    out = []
    for e in json.loads(run("qemu-img", "map", "--output=json", "-f", fmt, path)):
        d = e["data"] and not e.get("zero", False)
        if out and out[-1][2] == d and out[-1][0] + out[-1][1] == e["start"]:
            out[-1] = (out[-1][0], out[-1][1] + e["length"], d)
        else:
            out.append((e["start"], e["length"], d))
    return out


class EngineImageFlow(ef.Replay, unittest.TestCase):
    used = set()

    @classmethod
    def setUpClass(cls):
        cls.entries = flow_entries()
        cls.iport = vt.free_port()
        cls.d = vt.Daemon("--image-port", str(cls.iport))
        cls.run_dir = os.path.join(cls.d.tmp, "run")   # vdsmtest's --run-dir
        cls.c = connect(cls.d)
        cls.root = os.path.join(cls.d.tmp, "dom")
        os.mkdir(cls.root, 0o755)
        make_pool(unittest.TestCase(), cls.c, 4, conn_params(cls.root), cls.root)
        for img, vol, fmt in VOLS.values():
            tid = result(cls.c.call("Volume.create", [vol, SP, SD, img, str(SIZE), fmt, SPARSE,
                                                      "DATA", "v", BLANK, BLANK]))
            st = wait_task(cls.c, tid)
            assert st["taskResult"] == "success", st
        cls.vds, cls.irs = ef.hf_conns(cls.d)

    @classmethod
    def tearDownClass(cls):
        for c in (cls.vds, cls.irs, cls.c):
            c.close()
        cls.d.__exit__(None, None, None)

    # -- the corpus --------------------------------------------------------

    def ph(self, vol):
        """The placeholders of one transfer: the engine's ids for it."""
        img, v, _ = VOLS[vol]
        return {"spUUID": SP, "sdUUID": SD, "imgUUID": img, "volUUID": v, "size": SIZE,
                "ticketId": str(uuid.uuid4()), "transferId": str(uuid.uuid4())}

    def step(self, n, ph):
        """Send corpus entry n filled from ph, as the engine does; its answer
        must be accepted and readable by the engine; saves go into ph."""
        e = self.entries[n]
        r = self.send(e["verb"], ef.fill(e["params"], ph), e.get("connection", "vds"))
        self.assertIn("result", r, (n, e["verb"], r))
        res = r["result"]
        self.assertEqual(ef.check_reads(e, res, ph) + apischema.validate(e["verb"], res), [],
                         (n, e["verb"], res))
        for name, key in e.get("save", {}).items():
            ph[name] = res if not key else res.get(key)
        EngineImageFlow.used.add(n)
        return res

    def poll(self, ph, transferred):
        """Host.get_image_ticket as pollTransferStatus does, until the
        client's last operation has ended and counted."""
        deadline = time.monotonic() + 10
        while True:
            inf = self.step(322, ph)
            if (not inf["active"] and inf["transferred"] >= transferred) or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual((inf["active"], inf["transferred"]), (False, transferred), inf)
        self.assertEqual((inf["uuid"], inf["size"]), (ph["ticketId"], SIZE))
        self.assertIsInstance(inf["idle_time"], int)
        return inf

    # -- the client ---------------------------------------------------------

    def request(self, h, method, url, body=None, headers=None):
        h.request(method, url, body=body, headers=headers or {})
        r = h.getresponse()
        return r, r.read()

    def upload(self, tid, src, fmt):
        """imageio's client: the data runs PUT, the rest PATCH zero, a flush;
        returns the bytes the ticket counts."""
        raw = src + ".raw"
        run("qemu-img", "convert", "-f", fmt, "-O", "raw", src, raw)
        h = http.client.HTTPConnection("127.0.0.1", self.iport, timeout=60)
        r, body = self.request(h, "OPTIONS", "/images/" + tid)
        self.assertEqual(r.status, 200, body)
        self.assertIn("zero", json.loads(body)["features"])
        total = 0
        with open(raw, "rb") as f:
            for start, length, data in data_map(src, fmt):
                if data:
                    f.seek(start)
                    r, body = self.request(
                        h, "PUT", "/images/%s?flush=n" % tid, body=f.read(length),
                        headers={"Content-Range": "bytes %d-%d/*" % (start, start + length - 1)})
                else:
                    r, body = self.request(
                        h, "PATCH", "/images/" + tid, headers={"Content-Type": "application/json"},
                        body=json.dumps({"op": "zero", "offset": start, "size": length,
                                         "flush": False}))
                self.assertEqual(r.status, 200, body)
                total += length
        r, body = self.request(h, "PATCH", "/images/" + tid, body=json.dumps({"op": "flush"}),
                               headers={"Content-Type": "application/json"})
        self.assertEqual(r.status, 200, body)
        h.close()
        os.unlink(raw)
        return total

    def vol_path(self, vol):
        img, v, _ = VOLS[vol]
        return os.path.join(self.root, SD, "images", img, v)

    def source(self, name, fmt, *writes):
        src = os.path.join(self.d.tmp, name)
        run("qemu-img", "create", "-q", "-f", fmt, src, str(SIZE))
        args = ["qemu-io", "-f", fmt]
        for w in writes:
            args += ["-c", w]
        run(*(args + [src]))
        return src

    # -- the transfers -------------------------------------------------------

    def test_upload_file(self):
        ph = self.ph("raw")
        src = self.source("up.raw", "raw", "write -P 0x41 0 2M", "write -P 0x42 5M 512k",
                          "write -P 0x43 15M 1M")
        path = self.step(320, ph)["path"]
        self.assertEqual(path, self.vol_path("raw"))
        self.step(321, ph)
        sent = self.upload(ph["ticketId"], src, "raw")
        self.assertEqual(sent, SIZE)
        self.poll(ph, sent)
        self.step(323, ph)
        self.step(324, ph)
        # the ticket is gone: the client is refused
        h = http.client.HTTPConnection("127.0.0.1", self.iport, timeout=30)
        r, _ = self.request(h, "PUT", "/images/" + ph["ticketId"], body=b"x")
        self.assertEqual(r.status, 403)
        h.close()
        self.step(325, ph)
        self.step(326, ph)
        run("qemu-img", "compare", "-f", "raw", "-F", "raw", src, path)

    def test_upload_qcow2_over_nbd(self):
        ph = self.ph("qcow")
        src = self.source("up.qcow2", "qcow2", "write -P 0x51 1M 3M", "write -P 0x52 9M 64k")
        self.step(320, ph)
        self.step(327, ph)
        self.assertEqual(ph["nbdUrl"], "nbd:unix:%s/nbd/%s.sock" % (self.run_dir,
                                                                    ph["transferId"]))
        self.step(328, ph)
        sent = self.upload(ph["ticketId"], src, "qcow2")
        self.poll(ph, sent)
        self.step(324, ph)
        self.step(329, ph)
        self.assertFalse(os.path.exists(ph["nbdUrl"][len("nbd:unix:"):]))
        self.step(325, ph)
        run("qemu-img", "compare", "-f", "qcow2", "-F", "qcow2", src, self.vol_path("qcow"))

    def test_download_over_nbd(self):
        ph = self.ph("down")
        path = self.vol_path("down")
        run("qemu-io", "-f", "qcow2", "-c", "write -P 0x61 0 1M", "-c", "write -P 0x62 7M 2M",
            path)
        ph["filename"] = "disk-%s.raw" % ph["imgUUID"][:8]
        self.step(320, ph)
        self.step(330, ph)
        self.step(331, ph)
        h = http.client.HTTPConnection("127.0.0.1", self.iport, timeout=60)
        r, body = self.request(h, "OPTIONS", "/images/" + ph["ticketId"])
        self.assertEqual(json.loads(body)["features"], ["extents"])
        r, data = self.request(h, "GET", "/images/" + ph["ticketId"])
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("content-disposition"),
                         "attachment; filename=" + ph["filename"])
        h.close()
        raw = os.path.join(self.d.tmp, "down.raw")
        run("qemu-img", "convert", "-U", "-f", "qcow2", "-O", "raw", path, raw)
        with open(raw, "rb") as f:
            self.assertTrue(data == f.read(), "the download differs from the volume")
        os.unlink(raw)
        inf = self.poll(ph, SIZE)
        self.assertEqual(inf["filename"], ph["filename"])
        self.assertEqual(inf["ops"], ["read"])
        self.step(324, ph)
        self.step(329, ph)

    def test_backup_dirty_extents(self):
        ph = self.ph("backup")
        path = self.vol_path("backup")
        run("qemu-io", "-f", "qcow2", "-c", "write -P 0x71 0 4M", path)
        ph["bitmapId"] = str(uuid.uuid4())
        jid = str(uuid.uuid4())
        vi = {"sd_id": SD, "img_id": ph["imgUUID"], "vol_id": ph["volUUID"]}
        self.assertIs(result(self.c.call("SDM.add_bitmap", [jid, vi, ph["bitmapId"]])), True)
        deadline = time.monotonic() + 30
        while True:
            j = result(self.c.call("Host.getJobs", ["storage", [jid]]))[jid]
            if j["status"] not in ("pending", "running") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual(j["status"], "done", j)
        # what the VM wrote since the checkpoint
        run("qemu-io", "-f", "qcow2", "-c", "write -P 0x72 2M 128k", "-c",
            "write -P 0x73 11M 64k", path)
        self.step(320, ph)
        self.step(332, ph)
        self.step(333, ph)
        tid = ph["ticketId"]
        h = http.client.HTTPConnection("127.0.0.1", self.iport, timeout=60)
        r, body = self.request(h, "GET", "/images/%s/extents?context=dirty" % tid)
        self.assertEqual(r.status, 200, body)
        ext = json.loads(body)
        self.assertEqual(sum(e["length"] for e in ext), SIZE)
        dirty = [(e["start"], e["length"]) for e in ext if e["dirty"]]
        self.assertEqual(dirty, [(2 * MiB, 128 * KiB), (11 * MiB, 64 * KiB)])
        got = 0
        for start, length in dirty:
            r, part = self.request(h, "GET", "/images/" + tid,
                                   headers={"Range": "bytes=%d-%d" % (start, start + length - 1)})
            self.assertEqual(r.status, 206)
            self.assertEqual(part, bytes([0x72 if start == 2 * MiB else 0x73]) * length)
            got += length
        h.close()
        self.poll(ph, got)
        self.step(324, ph)
        self.step(329, ph)

    def test_zz_every_flow_entry_replayed(self):
        """Runs last (unittest sorts by name): every corpus entry of the
        image flow was sent by one of the transfers above."""
        self.assertGreaterEqual(len(self.entries), 14)
        self.assertTrue(all(320 <= n <= 339 for n in self.entries), sorted(self.entries))
        self.assertEqual(set(self.entries) - EngineImageFlow.used, set())


if __name__ == "__main__":
    unittest.main()
