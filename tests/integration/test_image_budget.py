"""The image server's transfer buffers and the daemon's memory_budget
(issue 28): each GET or PUT body streams through one 1 MiB buffer that is
charged to memory_budget (shared with the main port's connections) while
the body streams and given back when it ends; /metrics shows it
(vdsmd_image_buffered_bytes) with the transfer counters.  A transfer whose
buffer does not fit below 7/8 of the budget is answered 503 with a JSON
body, logged, counted (vdsmd_image_budget_refused_total), and the main port
goes on answering.

Real parts: vdsmd with its image port, plain sockets as the clients (so a
transfer can be held half-way), /metrics over the main port's HTTP."""

import json
import os
import re
import socket
import time
import unittest
import uuid

import vdsmtest as vt

MiB = 1 << 20
SIZE = 64 * MiB  # more than loopback's socket buffers hold: a GET stays mid-body


def metric(d, name):
    status, _, body = d.http("GET", "/metrics")
    assert status == 200, status
    text = body.decode() if isinstance(body, bytes) else body
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    assert m, "%s not in /metrics" % name
    return int(m.group(1))


def wait_metric(d, name, want, timeout=10.0):
    end = time.monotonic() + timeout
    while True:
        v = metric(d, name)
        if v == want or time.monotonic() > end:
            return v
        time.sleep(0.05)


def read_head(s):
    """The status and headers of one response on socket s; the bytes of the
    body that came with them."""
    data = b""
    while b"\r\n\r\n" not in data:
        b = s.recv(65536)
        if not b:
            raise AssertionError("connection closed before a response: %r" % data)
        data += b
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, rest


def read_body(s, hdrs, rest):
    n = int(hdrs.get("content-length", "0"))
    while len(rest) < n:
        b = s.recv(min(4 * MiB, n - len(rest)))
        if not b:
            break
        rest += b
    return rest


class Budget(unittest.TestCase):
    """memory_budget 2M: 7/8 of it takes the main port's few KiB and one
    1 MiB transfer buffer, not two."""

    @classmethod
    def setUpClass(cls):
        cls.iport = vt.free_port()
        cls.d = vt.Daemon("--image-port", str(cls.iport), "--memory-budget", "2M")
        cls.d.__enter__()
        cls.c = cls.d.stomp()
        cls.c.connect()
        cls.c.subscribe(vt.RESPONSES, "responses")
        cls.path = os.path.join(cls.d.tmp, "storage", "disk.raw")
        with open(cls.path, "wb") as f:
            f.truncate(SIZE)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    def ticket(self, ops):
        tid = str(uuid.uuid4())
        r = vt.call_ready(self.c, "Host.add_image_ticket", [{
            "uuid": tid, "timeout": 300, "inactivity_timeout": 60, "size": SIZE,
            "url": "file://" + self.path, "ops": ops, "sparse": True,
            "transfer_id": str(uuid.uuid4()), "dirty": False}])
        self.assertIn("result", r, r)
        self.addCleanup(self.c.call, "Host.remove_image_ticket", [tid])
        return tid

    def sock(self):
        s = socket.create_connection(("127.0.0.1", self.iport), timeout=30)
        self.addCleanup(s.close)
        return s

    def get(self, tid, s=None):
        s = s or self.sock()
        s.sendall(("GET /images/%s HTTP/1.1\r\nHost: x\r\n\r\n" % tid).encode())
        return s

    def ping(self):
        r = self.c.call("Host.ping2", [])
        self.assertIn("result", r, r)

    def refused(self, s):
        status, hdrs, rest = read_head(s)
        body = read_body(s, hdrs, rest)
        self.assertEqual(status, 503, body)
        self.assertEqual(hdrs.get("content-type"), "application/json")
        self.assertEqual(hdrs.get("connection"), "close")
        doc = json.loads(body)
        self.assertEqual((doc["code"], doc["title"]), (503, "Service Unavailable"))
        self.assertIn("memory_budget", doc["explanation"])

    def test_download_charged_and_second_refused(self):
        tid = self.ticket(["read"])
        self.assertEqual(wait_metric(self.d, "vdsmd_image_buffered_bytes", 0), 0)
        refused0 = metric(self.d, "vdsmd_image_budget_refused_total")
        s = self.get(tid)
        status, hdrs, rest = read_head(s)
        self.assertEqual((status, hdrs["content-length"]), (200, str(SIZE)))
        # mid-body (the client stopped reading): the buffer is held and shown
        self.assertEqual(wait_metric(self.d, "vdsmd_image_buffered_bytes", MiB), MiB)
        self.assertEqual(metric(self.d, "vdsmd_image_transfers_active"), 1)
        # a second transfer's buffer does not fit: 503, logged, counted
        self.refused(self.get(tid))
        self.assertTrue(self.d.wait_log(r"download refused \(503\).*memory_budget 2097152",
                                        timeout=10))
        self.assertEqual(metric(self.d, "vdsmd_image_budget_refused_total"), refused0 + 1)
        # the main port answers meanwhile
        self.ping()
        body = read_body(s, hdrs, rest)
        self.assertEqual(len(body), SIZE)
        self.assertEqual(wait_metric(self.d, "vdsmd_image_buffered_bytes", 0), 0)
        self.assertEqual(wait_metric(self.d, "vdsmd_image_transfers_active", 0), 0)
        # given back: the next download runs (on the same connection too)
        self.get(tid, s)
        status, hdrs, rest = read_head(s)
        self.assertEqual(status, 200)
        self.assertEqual(len(read_body(s, hdrs, rest)), SIZE)
        self.assertGreaterEqual(metric(self.d, "vdsmd_image_read_bytes_total"), 2 * SIZE)

    def test_upload_charged_while_body_streams(self):
        tid = self.ticket(["write"])
        n = 8 * MiB
        s = self.sock()
        s.sendall(("PUT /images/%s?flush=n HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                   "Content-Range: bytes 0-%d/*\r\n\r\n" % (tid, n, n - 1)).encode())
        s.sendall(b"\x5a" * MiB)
        self.assertEqual(wait_metric(self.d, "vdsmd_image_buffered_bytes", MiB), MiB)
        # another upload meanwhile: refused before its body is read
        s2 = self.sock()
        s2.sendall(("PUT /images/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                    "Expect: 100-continue\r\n\r\n" % (tid, n)).encode())
        self.refused(s2)
        self.ping()
        s.sendall(b"\x5a" * (n - MiB))
        status, hdrs, rest = read_head(s)
        self.assertEqual(status, 200)
        self.assertEqual(wait_metric(self.d, "vdsmd_image_buffered_bytes", 0), 0)
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(n), b"\x5a" * n)
        self.assertGreaterEqual(metric(self.d, "vdsmd_image_written_bytes_total"), n)


class TinyBudget(unittest.TestCase):
    """memory_budget 1M: no transfer buffer fits; every GET and PUT is
    refused 503 and the main port keeps answering."""

    def test_refused_cleanly(self):
        iport = vt.free_port()
        with vt.Daemon("--image-port", str(iport), "--memory-budget", "1M") as d:
            c = d.stomp()
            c.connect()
            c.subscribe(vt.RESPONSES, "responses")
            path = os.path.join(d.tmp, "storage", "disk.raw")
            with open(path, "wb") as f:
                f.truncate(MiB)
            tid = str(uuid.uuid4())
            r = vt.call_ready(c, "Host.add_image_ticket", [{
                "uuid": tid, "timeout": 300, "inactivity_timeout": 60, "size": MiB,
                "url": "file://" + path, "ops": ["write"], "sparse": True,
                "transfer_id": str(uuid.uuid4()), "dirty": False}])
            self.assertIn("result", r, r)
            for req in ("GET /images/%s HTTP/1.1\r\nHost: x\r\n\r\n" % tid,
                        "PUT /images/%s HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n"
                        % tid):
                with socket.create_connection(("127.0.0.1", iport), timeout=30) as s:
                    s.sendall(req.encode())
                    status, hdrs, rest = read_head(s)
                    body = read_body(s, hdrs, rest)
                    self.assertEqual(status, 503, body)
                    self.assertEqual(json.loads(body)["code"], 503)
                    # the connection ends after the refusal
                    self.assertEqual(s.recv(1), b"")
                r = c.call("Host.ping2", [])
                self.assertIn("result", r, r)
            # requests that need no transfer buffer still run
            with socket.create_connection(("127.0.0.1", iport), timeout=30) as s:
                s.sendall(("OPTIONS /images/%s HTTP/1.1\r\nHost: x\r\n\r\n" % tid).encode())
                status, hdrs, rest = read_head(s)
                self.assertEqual(status, 200)
            self.assertEqual(metric(d, "vdsmd_image_budget_refused_total"), 2)
            self.assertEqual(metric(d, "vdsmd_image_buffered_bytes"), 0)
            self.assertEqual(metric(d, "vdsmd_memory_budget_bytes"), MiB)
            c.close()


if __name__ == "__main__":
    unittest.main()
