"""The image server against the real vdsmd: disk upload and download over
ovirt-imageio's HTTP API (its docs/images.md), with tickets added through
Host.add_image_ticket in the engine's form, clients that are not ours (curl,
Python's http.client) and qemu-img to check what arrived.

Covered: the engine's sequence (add ticket -> PUT -> get ticket ->
remove), GET with and without Range (200 / 206 / 416), PUT with
Content-Range and ?flush=, PATCH zero (holes punched: extents match
qemu-img map) and flush, OPTIONS, GET .../extents; every refusal (unknown,
expired, removed ticket: 403; a read ticket asked to write: 403; past the
ticket's size: 416; a url outside the domains: 400; a second writer while
the image takes one: 409); a client that
disconnects mid-upload (the volume stays usable); a ticket removed while an
upload streams ends it; the unix socket; TLS on the image port without a
client certificate while the main port still demands one; /metrics."""

import http.client
import json
import os
import socket
import ssl
import subprocess
import threading
import time
import unittest
import uuid

import vdsmtest as vt
from test_storage import BLANK, connect, result, wait_task
from test_storage_engine import SD, SP, conn_params, make_pool

IMG = "e1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6b1"
VOL = "e2b3c4d5-e6f7-4081-9a2b-c3d4e5f60b01"
IMG_Q = "e1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f6b2"
VOL_Q = "e2b3c4d5-e6f7-4081-9a2b-c3d4e5f60b02"
MiB = 1 << 20
SIZE = 16 * MiB
COW_FMT, RAW_FMT, SPARSE = 4, 5, 2


def run(*cmd):
    p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    if p.returncode != 0:
        raise AssertionError("%s: exit %d: %s" % (" ".join(cmd), p.returncode,
                                                  p.stdout.decode(errors="replace")))
    return p.stdout


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def pattern(size, seed):
    """size bytes of data with 1 MiB holes of zeroes every other MiB."""
    out = bytearray(size)
    for off in range(0, size, 2 * MiB):
        n = min(MiB, size - off)
        out[off:off + n] = (bytes([seed, (off >> 20) & 0xff]) * (n // 2))[:n]
    return bytes(out)


class ImageTransfer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sock_path = os.path.join("/tmp", "vdsmd-img-%d.sock" % os.getpid())
        cls.iport = vt.free_port()
        cls.d = vt.Daemon("--image-port", str(cls.iport), "--image-socket", cls.sock_path)
        cls.c = connect(cls.d)
        cls.root = os.path.join(cls.d.tmp, "dom")
        os.mkdir(cls.root, 0o755)
        make_pool(unittest.TestCase(), cls.c, 4, conn_params(cls.root), cls.root)
        for vol, img, fmt in ((VOL, IMG, RAW_FMT), (VOL_Q, IMG_Q, COW_FMT)):
            tid = result(cls.c.call("Volume.create", [vol, SP, SD, img, str(SIZE), fmt, SPARSE,
                                                      "DATA", "v", BLANK, BLANK]))
            st = wait_task(cls.c, tid)
            assert st["taskResult"] == "success", st

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    # -- helpers ------------------------------------------------------------

    def prepare(self, img, vol):
        r = result(self.c.call("Image.prepare", [SP, SD, img, vol]))
        return r["path"]

    def ticket(self, path, ops, size=SIZE, **kw):
        """Host.add_image_ticket in the engine's form (AddImageTicketVDSCommand)."""
        tid = str(uuid.uuid4())
        t = {"uuid": tid, "timeout": 300, "inactivity_timeout": 60, "size": size,
             "url": "file://" + path, "ops": ops, "sparse": True,
             "transfer_id": str(uuid.uuid4()), "dirty": False}
        t.update(kw)
        r = self.c.call("Host.add_image_ticket", [t])
        self.assertIn("result", r, r)
        self.addCleanup(self.c.call, "Host.remove_image_ticket", [tid])
        return tid

    def http(self):
        return http.client.HTTPConnection("127.0.0.1", self.iport, timeout=30)

    def request(self, method, url, body=None, headers=None, conn=None):
        h = conn or self.http()
        h.request(method, url, body=body, headers=headers or {})
        r = h.getresponse()
        data = r.read()
        if conn is None:
            h.close()
        return r, data

    def info(self, tid):
        return result(self.c.call("Host.get_image_ticket", [tid]))

    # -- the engine's flow --------------------------------------------------

    def test_upload_then_download_raw(self):
        path = self.prepare(IMG, VOL)
        data = pattern(SIZE, 0x5a)
        src = os.path.join(self.d.tmp, "src.raw")
        with open(src, "wb") as f:
            f.write(data)
        tid = self.ticket(path, ["write"])
        # upload with curl, as the engine's web UI proxy or ansible would
        out = run("curl", "-sS", "-f", "-X", "PUT", "--upload-file", src,
                  "http://127.0.0.1:%d/images/%s?flush=y" % (self.iport, tid),
                  "-w", "%{http_code}")
        self.assertEqual(out.decode().strip()[-3:], "200")
        run("qemu-img", "compare", "-f", "raw", "-F", "raw", src, path)
        inf = self.info(tid)
        self.assertEqual(inf["transferred"], SIZE)
        self.assertFalse(inf["active"])
        self.assertEqual(inf["ops"], ["write"])
        # download (write implies read) with http.client
        r, got = self.request("GET", "/images/" + tid)
        self.assertEqual(r.status, 200)
        self.assertEqual(int(r.getheader("content-length")), SIZE)
        self.assertEqual(got, data)
        self.assertIs(result(self.c.call("Host.remove_image_ticket", [tid])), True)
        r, body = self.request("GET", "/images/" + tid)
        self.assertEqual(r.status, 403)
        self.assertIn(b"No such ticket", body)

    def test_ranges_keep_alive_and_options(self):
        path = self.prepare(IMG, VOL)
        data = pattern(SIZE, 0x33)
        with open(path, "r+b") as f:
            f.write(data)
        tid = self.ticket(path, ["read"])
        h = self.http()
        r, body = self.request("OPTIONS", "/images/" + tid, conn=h)
        self.assertEqual(r.status, 200)
        opts = json.loads(body)
        # a read ticket offers what reading needs (imageio's options())
        self.assertEqual(opts["features"], ["extents"])
        self.assertEqual(opts["unix_socket"], "\0" + self.sock_path
                         if opts["unix_socket"].startswith("\0") else self.sock_path)
        self.assertNotIn("PUT", r.getheader("allow"))
        # several requests on one connection
        r, got = self.request("GET", "/images/" + tid, headers={"Range": "bytes=1000-4999"},
                              conn=h)
        self.assertEqual(r.status, 206)
        self.assertEqual(r.getheader("content-range"), "bytes 1000-4999/%d" % SIZE)
        self.assertEqual(got, data[1000:5000])
        r, got = self.request("GET", "/images/" + tid, headers={"Range": "bytes=-100"}, conn=h)
        self.assertEqual((r.status, got), (206, data[-100:]))
        r, got = self.request("GET", "/images/" + tid,
                              headers={"Range": "bytes=%d-" % (SIZE - 10)}, conn=h)
        self.assertEqual((r.status, got), (206, data[-10:]))
        r, _ = self.request("GET", "/images/" + tid, headers={"Range": "bytes=%d-" % SIZE},
                            conn=h)
        self.assertEqual(r.status, 416)
        h.close()
        # the read ticket never writes
        r, body = self.request("PUT", "/images/" + tid, body=b"x" * 10)
        self.assertEqual(r.status, 403)
        r, body = self.request("PATCH", "/images/" + tid,
                               body=json.dumps({"op": "zero", "offset": 0, "size": 4096}))
        self.assertEqual(r.status, 403)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), data)

    def test_zero_flush_and_extents(self):
        path = self.prepare(IMG, VOL)
        with open(path, "r+b") as f:
            f.write(b"\xff" * SIZE)
            os.fsync(f.fileno())
        tid = self.ticket(path, ["write"])
        r, body = self.request("OPTIONS", "/images/" + tid)
        self.assertEqual(r.status, 200)
        self.assertEqual(sorted(json.loads(body)["features"]), ["extents", "flush", "zero"])
        self.assertIn("PUT", r.getheader("allow"))
        r, _ = self.request("PATCH", "/images/" + tid,
                            body=json.dumps({"op": "zero", "offset": 2 * MiB, "size": 4 * MiB,
                                             "flush": True}),
                            headers={"Content-Type": "application/json"})
        self.assertEqual(r.status, 200)
        r, _ = self.request("PATCH", "/images/" + tid, body=json.dumps({"op": "flush"}))
        self.assertEqual(r.status, 200)
        with open(path, "rb") as f:
            got = f.read()
        self.assertEqual(got[:2 * MiB], b"\xff" * (2 * MiB))
        self.assertEqual(got[2 * MiB:6 * MiB], b"\0" * (4 * MiB))
        self.assertEqual(got[6 * MiB:], b"\xff" * (SIZE - 6 * MiB))
        r, body = self.request("GET", "/images/%s/extents?context=zero" % tid)
        self.assertEqual(r.status, 200)
        ext = [(e["start"], e["length"], e["zero"]) for e in json.loads(body)]
        qm = json.loads(run("qemu-img", "map", "--output=json", "-f", "raw", path))
        self.assertEqual(ext, [(e["start"], e["length"], e["zero"]) for e in qm])
        self.assertIn((2 * MiB, 4 * MiB, True), ext)
        # dirty extents need a dirty ticket
        r, _ = self.request("GET", "/images/%s/extents?context=dirty" % tid)
        self.assertEqual(r.status, 404)
        r, _ = self.request("PATCH", "/images/" + tid, body=json.dumps({"op": "trim"}))
        self.assertEqual(r.status, 400)

    def test_qcow2_volume_bytes_upload(self):
        """A qcow2 image uploaded byte for byte (the engine's upload of a
        qcow2 disk into a COW volume) is what qemu-img then reads."""
        path = self.prepare(IMG_Q, VOL_Q)
        src = os.path.join(self.d.tmp, "src.qcow2")
        run("qemu-img", "create", "-f", "qcow2", src, str(SIZE))
        run("qemu-io", "-f", "qcow2", "-c", "write -P 0x7e 1M 2M", src)
        size = os.path.getsize(src)
        tid = self.ticket(path, ["write"], size=size)
        with open(src, "rb") as f:
            r, _ = self.request("PUT", "/images/" + tid, body=f.read())
        self.assertEqual(r.status, 200)
        with open(path, "r+b") as f:
            f.truncate(size)
        run("qemu-img", "compare", "-f", "qcow2", "-F", "qcow2", src, path)
        run("qemu-img", "check", "-f", "qcow2", path)

    # -- refusals ------------------------------------------------------------

    def test_refusals(self):
        path = self.prepare(IMG, VOL)
        r, body = self.request("GET", "/images/" + str(uuid.uuid4()))
        self.assertEqual(r.status, 403)
        tid = self.ticket(path, ["write"], size=MiB)
        # a write past the ticket's size
        r, _ = self.request("PUT", "/images/" + tid, body=b"a" * 100,
                            headers={"Content-Range": "bytes %d-%d/*" % (MiB - 50, MiB + 49)})
        self.assertEqual(r.status, 416)
        r, _ = self.request("GET", "/images/" + tid, headers={"Range": "bytes=0-%d" % MiB})
        self.assertEqual(r.status, 416)
        # an expired ticket (extend to 0): 403, still visible to get
        self.assertIn("result", self.c.call("Host.extend_image_ticket", [tid, 0]))
        time.sleep(1.1)
        r, body = self.request("GET", "/images/" + tid, headers={"Range": "bytes=0-9"})
        self.assertEqual(r.status, 403)
        self.assertIn(b"expired", body)
        self.assertIn("expires", self.info(tid))
        # a url outside every domain
        outside = os.path.join(self.d.tmp, "outside.raw")
        with open(outside, "wb") as f:
            f.write(b"secret" * 100)
        t2 = self.ticket(outside, ["read"], size=600)
        r, _ = self.request("GET", "/images/" + t2)
        self.assertEqual(r.status, 400)
        t3 = self.ticket("/etc/passwd", ["read"], size=100)
        r, body = self.request("GET", "/images/" + t3)
        self.assertEqual(r.status, 400)
        self.assertNotIn(b"root:", body)
        # not under /images/, a bad method, no Content-Length on PUT
        r, _ = self.request("GET", "/tickets/" + tid)
        self.assertEqual(r.status, 404)
        r, _ = self.request("DELETE", "/images/" + tid)
        self.assertEqual(r.status, 405)
        so = socket.create_connection(("127.0.0.1", self.iport), timeout=10)
        so.sendall(b"PUT /images/%s HTTP/1.1\r\nHost: x\r\n\r\n" % tid.encode())
        self.assertIn(b" 400 ", so.recv(4096))
        so.close()

    def test_disconnect_mid_upload_and_remove_during_upload(self):
        path = self.prepare(IMG, VOL)
        tid = self.ticket(path, ["write"])
        so = socket.create_connection(("127.0.0.1", self.iport), timeout=10)
        so.sendall(b"PUT /images/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                   % (tid.encode(), SIZE))
        so.sendall(b"\x11" * (3 * MiB))
        so.close()
        # the server notices, the op ends: the ticket is idle again and the
        # volume takes a full upload on a new connection (30 s: the image
        # threads run at nice +10, and a busy machine starved them past 10 s)
        deadline = time.monotonic() + 30
        while self.info(tid)["active"] and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(self.info(tid)["active"])
        data = pattern(SIZE, 0x44)
        r, _ = self.request("PUT", "/images/" + tid, body=data)
        self.assertEqual(r.status, 200)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), data)
        # an upload that stalls while the engine removes its ticket ends
        so = socket.create_connection(("127.0.0.1", self.iport), timeout=20)
        so.sendall(b"PUT /images/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                   % (tid.encode(), SIZE))
        so.sendall(b"\x22" * MiB)
        while not self.info(tid)["active"]:
            time.sleep(0.02)
        done = {}

        def remove():
            done["r"] = self.c.call("Host.remove_image_ticket", [tid])
        t = threading.Thread(target=remove)
        t.start()
        # the stalled client keeps sending: the server stops reading it
        try:
            for _ in range(64):
                so.sendall(b"\x22" * (256 * 1024))
        except OSError:
            pass
        t.join(30)
        self.assertIs(done["r"].get("result"), True, done["r"])
        so.close()
        r, _ = self.request("GET", "/images/" + tid)
        self.assertEqual(r.status, 403)

    def test_two_writers_where_one_is_allowed(self):
        path = self.prepare(IMG, VOL)
        tid = self.ticket(path, ["write"])
        r, body = self.request("OPTIONS", "/images/" + tid)
        self.assertEqual(json.loads(body)["max_writers"], 1)
        first = socket.create_connection(("127.0.0.1", self.iport), timeout=10)
        first.sendall(b"PUT /images/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                      % (tid.encode(), 2 * MiB))
        first.sendall(b"\x01" * MiB)
        while not self.info(tid)["active"]:
            time.sleep(0.02)
        # a second writer while the first streams: refused, nothing written
        r, body = self.request("PUT", "/images/" + tid, body=b"\x02" * 4096)
        self.assertEqual(r.status, 409, body)
        r, body = self.request("PATCH", "/images/" + tid,
                               body=json.dumps({"op": "zero", "offset": 0, "size": 4096}))
        self.assertEqual(r.status, 409, body)
        # reads go on meanwhile
        r, _ = self.request("GET", "/images/" + tid, headers={"Range": "bytes=0-15"})
        self.assertEqual(r.status, 206)
        first.sendall(b"\x01" * MiB)
        f = first.makefile("rb")
        self.assertIn(b" 200 ", f.readline())
        f.close()
        first.close()
        with open(path, "rb") as fh:
            self.assertEqual(fh.read(2 * MiB), b"\x01" * (2 * MiB))
        # the writer ended: the next one is taken
        r, _ = self.request("PUT", "/images/" + tid, body=b"\x03" * 4096)
        self.assertEqual(r.status, 200)

    def test_download_disconnect_and_image_shrinking(self):
        """A client that leaves mid-download frees the ticket, and an image
        cut short under a download ends it with a close (never a hang,
        never bytes past the end)."""
        path = self.prepare(IMG, VOL)
        data = pattern(SIZE, 0x66)
        wt = self.ticket(path, ["write"])
        r, _ = self.request("PUT", "/images/" + wt, body=data)
        self.assertEqual(r.status, 200)
        tid = self.ticket(path, ["read"])
        so = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        so.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        so.settimeout(10)
        so.connect(("127.0.0.1", self.iport))
        so.sendall(b"GET /images/%s HTTP/1.1\r\nHost: x\r\n\r\n" % tid.encode())
        got = b""
        while len(got) < MiB:
            got += so.recv(65536)
        head, _, body = got.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        self.assertTrue(body == data[:len(body)], "the bytes sent differ from the file's")
        so.close()
        deadline = time.monotonic() + 30   # nice +10 image threads (see above)
        while self.info(tid)["active"] and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(self.info(tid)["active"])
        r, body = self.request("GET", "/images/" + tid)
        self.assertEqual((r.status, body == data), (200, True))
        # a file beneath the storage root (the root fallback) shrinks while
        # its download waits on a full socket
        small = os.path.join(self.d.tmp, "storage", "shrink.raw")
        with open(small, "wb") as f:
            f.write(data)
        sid = self.ticket(small, ["read"], size=SIZE)
        so = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        so.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        so.settimeout(10)
        so.connect(("127.0.0.1", self.iport))
        so.sendall(b"GET /images/%s HTTP/1.1\r\nHost: x\r\n\r\n" % sid.encode())
        got = so.recv(65536)
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:64])
        self.assertIn(b"content-length: %d" % SIZE, got.partition(b"\r\n\r\n")[0].lower())
        os.truncate(small, MiB)
        while True:
            b = so.recv(1 << 20)
            if not b:
                break
            got += b
        so.close()
        body = got.partition(b"\r\n\r\n")[2]
        self.assertLess(len(body), SIZE)
        self.assertTrue(body == data[:len(body)], "the bytes sent differ from the file's")
        self.assertTrue(self.d.wait_log(r"read at \d+ failed: end of image", timeout=10))
        os.unlink(small)

    # -- other listeners ------------------------------------------------------

    def test_unix_socket_and_metrics(self):
        path = self.prepare(IMG, VOL)
        tid = self.ticket(path, ["read"])
        h = UnixHTTPConnection(self.sock_path)
        h.request("GET", "/images/" + tid, headers={"Range": "bytes=0-1023"})
        r = h.getresponse()
        self.assertEqual((r.status, len(r.read())), (206, 1024))
        h.close()
        status, _, body = self.d.http("GET", "/metrics")
        text = body.decode() if isinstance(body, bytes) else body
        self.assertEqual(status, 200)
        read = [l for l in text.splitlines() if l.startswith("vdsmd_image_read_bytes_total ")]
        self.assertTrue(read and int(read[0].split()[1]) >= 1024, read)
        self.assertIn("vdsmd_image_tickets ", text)


class ImageTLS(unittest.TestCase):
    """TLS on the image port: the host's certificate, no client certificate
    asked; the main port still refuses a client without one."""

    def test_tls_without_client_certificate(self):
        import tempfile
        pki = vt.make_pki(tempfile.mkdtemp(prefix="vdsmd-img-pki-"))
        iport = vt.free_port()
        with vt.Daemon("--image-port", str(iport), tls=True, pki=pki) as d:
            c = d.stomp(d.tls_sock())
            c.connect()
            c.subscribe(vt.RESPONSES, "responses")
            root = os.path.join(d.tmp, "storage")
            path = os.path.join(root, "disk.raw")
            with open(path, "wb") as f:
                f.write(b"\x5c" * MiB)
            tid = str(uuid.uuid4())
            r = vt.call_ready(c, "Host.add_image_ticket", [{
                "uuid": tid, "timeout": 300, "size": MiB, "url": "file://" + path,
                "ops": ["read"]}])
            self.assertIn("result", r, r)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(os.path.join(pki, "ca.crt"))
            ctx.check_hostname = False
            h = http.client.HTTPSConnection("127.0.0.1", iport, context=ctx, timeout=30)
            h.request("GET", "/images/" + tid)
            resp = h.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.read(), b"\x5c" * MiB)
            h.close()
            # plaintext on the TLS image port gets nothing
            so = socket.create_connection(("127.0.0.1", iport), timeout=10)
            so.sendall(b"GET /images/%s HTTP/1.1\r\nHost: x\r\n\r\n" % tid.encode())
            try:
                got = so.recv(4096)
            except OSError:
                got = b""
            self.assertNotIn(b"\x5c" * 16, got)
            so.close()
            # the main port still demands a client certificate
            with self.assertRaises((ssl.SSLError, OSError, ConnectionError)):
                s = d.tls_sock(cert=False)
                s.sendall(b"x")
                if not s.recv(1):
                    raise ConnectionError("closed")
            c.close()


if __name__ == "__main__":
    unittest.main()
