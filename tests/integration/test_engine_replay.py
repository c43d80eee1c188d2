"""Frame-level replay of the oVirt engine's connection pattern (issue 8,
PROTOCOL.md section 2): the engine (vdsm-jsonrpc-java) queues its
SUBSCRIBEs ahead of CONNECT, sends CONNECT with accept-version:1.2,
heart-beat:0,15000 and an unescaped host header holding an IPv6 literal,
SENDs requests with reply-to and ovirtCorrelationId but no content-type,
and ends with DISCONNECT carrying a receipt.  Every byte the server sends
back is checked: command, header names, their order and values, the body,
the NUL; only the session id and message-id values vary (checked by form).
"""

import json
import re
import socket
import time
import unittest

import vdsmtest as vt

RESP_SUB = "b0bf4ff4-1d2c-4e5b-8a0e-6b6c1a55c3a1"
EVENT_SUB = "5d3bd0c4-31b5-4a8e-9f7f-2cf2d6e3b1aa"
HOST = "2001:db8:0:1::17"  # sent raw: CONNECT headers are not escaped


class EngineReplay(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon(log_level="debug")
        assert cls.d.wait_ready(), "vdsmd never became ready"

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)

    def setUp(self):
        self.s = self.d.sock()
        self.addCleanup(self.s.close)
        self.buf = b""

    def read_raw_frame(self, timeout=10):
        """The next server frame's exact bytes (heart-beat EOLs skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            self.buf = self.buf.lstrip(b"\n")
            he = self.buf.find(b"\n\n")
            if he >= 0:
                m = re.search(rb"\ncontent-length:(\d+)\n", self.buf[:he + 1])
                end = he + 2 + int(m.group(1)) if m else self.buf.find(b"\0", he)
                if 0 <= end < len(self.buf):
                    self.assertEqual(self.buf[end:end + 1], b"\0")
                    raw, self.buf = self.buf[:end + 1], self.buf[end + 1:]
                    return raw
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame")
            self.s.settimeout(left)
            d = self.s.recv(65536)
            if not d:
                raise EOFError("closed")
            self.buf += d

    def assert_silent(self, secs=0.3):
        self.s.settimeout(secs)
        try:
            d = self.s.recv(65536)
        except socket.timeout:
            return
        self.fail("unexpected bytes %r" % d)

    def engine_request(self, method, params, rid, corr):
        body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params,
                           "id": rid}).encode()
        # the engine's SEND: destination, reply-to, ovirtCorrelationId,
        # content-length; no content-type
        return (b"SEND\ndestination:jms.topic.vdsm_requests\n"
                b"reply-to:jms.topic.vdsm_responses\n"
                b"ovirtCorrelationId:" + corr.encode() + b"\n"
                b"content-length:%d\n\n" % len(body) + body + b"\0")

    def expect_message(self, raw, dest, sub, body_check):
        # On plaintext a MESSAGE under 1024 bytes is padded to 1024 with
        # spaces after its JSON body, inside content-length (PROTOCOL.md 2:
        # the engine's library reads 1024 bytes at a time); headers as ever.
        m = re.fullmatch(rb"MESSAGE\ndestination:" + re.escape(dest.encode()) +
                         rb"\ncontent-type:application/json\nsubscription:" +
                         re.escape(sub.encode()) +
                         rb"\nmessage-id:(\d+)\ncontent-length:(\d+)\n\n(.*)\0",
                         raw, re.S)
        self.assertTrue(m, raw)
        body = m.group(3)
        self.assertEqual(int(m.group(2)), len(body))
        self.assertGreaterEqual(len(raw), 1024, raw)
        if len(body.rstrip(b" ")) + 200 < 1024:
            self.assertLessEqual(len(raw), 1025, raw)   # padded, not more
        body_check(body.rstrip(b" "))
        return int(m.group(1))

    def test_engine_session(self):
        s = self.s
        # 1. SUBSCRIBE responses and events before CONNECT: accepted silently
        s.sendall(b"SUBSCRIBE\ndestination:jms.topic.vdsm_responses\nid:" + RESP_SUB.encode() +
                  b"\nack:auto\n\n\0")
        s.sendall(b"SUBSCRIBE\ndestination:jms.queue.events\nid:" + EVENT_SUB.encode() +
                  b"\nack:auto\n\n\0")
        self.assert_silent()

        # 2. CONNECT: CONNECTED with exactly these headers in this order
        s.sendall(b"CONNECT\naccept-version:1.2\nheart-beat:0,15000\nhost:" + HOST.encode() +
                  b"\n\n\0")
        raw = self.read_raw_frame()
        self.assertRegex(raw, rb"\ACONNECTED\nversion:1\.2\nheart-beat:15000,0\n"
                              rb"server:vdsmd/\d+\.\d+\.\d+\nsession:[0-9a-f]{8}-[0-9a-f]{4}-"
                              rb"[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n\n\0\Z")

        # 3. SEND with reply-to and ovirtCorrelationId, no content-type
        start = len(self.d.log_lines())
        s.sendall(self.engine_request("Host.ping2", {}, "7f0d3c1e-ping", "corr-ping-1"))
        ids = [self.expect_message(
            self.read_raw_frame(), "jms.topic.vdsm_responses", RESP_SUB,
            lambda b: self.assertEqual(b, b'{"jsonrpc":"2.0","id":"7f0d3c1e-ping","result":true}'))]
        self.assertTrue(self.d.wait_log(r"corr-ping-1", 5, start),
                        "ovirtCorrelationId not in the request's log line")

        # a verb with a result object, and one that emits an event
        s.sendall(self.engine_request("Host.getVMList", {}, "7f0d3c1e-list", "corr-list-1"))
        vms = []
        ids.append(self.expect_message(
            self.read_raw_frame(), "jms.topic.vdsm_responses", RESP_SUB,
            lambda b: vms.extend(json.loads(b)["result"])))
        running = [v["vmId"] for v in vms if v.get("status") == "Up"]
        self.assertTrue(running, vms)
        vm = running[0]
        s.sendall(self.engine_request("VM.pause", {"vmID": vm}, "7f0d3c1e-pause", "corr-pause"))
        got = {}
        for _ in range(2):  # the response and the VM_status event, either order
            raw = self.read_raw_frame()
            if b"destination:jms.queue.events" in raw:
                ids.append(self.expect_message(raw, "jms.queue.events", EVENT_SUB,
                                               lambda b: got.__setitem__("event", json.loads(b))))
            else:
                ids.append(self.expect_message(raw, "jms.topic.vdsm_responses", RESP_SUB,
                                               lambda b: got.__setitem__("resp", json.loads(b))))
        # VDSM answers VM.pause with {"vmList": {}}; the engine casts it to a map
        self.assertEqual(got["resp"], {"jsonrpc": "2.0", "id": "7f0d3c1e-pause",
                                       "result": {"vmList": {}}})
        ev = got["event"]
        self.assertEqual(list(ev), ["jsonrpc", "method", "params"])
        self.assertEqual(ev["method"], "|virt|VM_status|" + vm)
        self.assertEqual(ev["params"][vm]["status"], "Paused")
        self.assertIsInstance(ev["params"]["notify_time"], int)
        self.assertEqual(len(set(ids)), len(ids), "message-ids repeat")
        s.sendall(self.engine_request("VM.cont", {"vmID": vm}, "7f0d3c1e-cont", "corr-cont"))
        for _ in range(2):
            self.read_raw_frame()

        # 4. DISCONNECT with receipt: exactly one RECEIPT, then the server closes
        s.sendall(b"DISCONNECT\nreceipt:d7c1e3a0-engine-bye\n\n\0")
        self.assertEqual(self.read_raw_frame(), b"RECEIPT\nreceipt-id:d7c1e3a0-engine-bye\n\n\0")
        self.assertEqual(self.buf, b"")
        self.assertTrue(vt.wait_closed(s, 5))


if __name__ == "__main__":
    unittest.main()
