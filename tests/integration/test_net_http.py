"""HTTP on the STOMP port (PROTOCOL.md section 5)."""

import json
import unittest

import vdsmtest as vt

PING = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "Host.ping2"})


class Http(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon("--max-frame-size", "4K")
        assert cls.d.wait_ready(), "vdsmd never became ready"

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)

    def test_health(self):
        status, h, body = self.d.http("GET", "/health")
        self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))
        self.assertEqual(h["content-type"], "application/json")
        _, _, metrics = self.d.http("GET", "/metrics")
        self.assertIn("\nvdsmd_up 1\n", metrics.decode())

    def test_head_health(self):
        status, h, body = self.d.http("HEAD", "/health")
        self.assertIn(status, (200, 503))
        self.assertEqual(body, b"")
        self.assertGreater(int(h["content-length"]), 0)

    def test_metrics(self):
        self.d.http("POST", "/jsonrpc", PING)
        status, h, body = self.d.http("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(h["content-type"].startswith("text/plain"))
        text = body.decode()
        for name in ("vdsmd_connections ", "vdsmd_stomp_frames_received_total",
                     "vdsmd_stomp_frames_sent_total", 'vdsmd_codec_info{codec="auto"} 1',
                     "vdsmd_events_published_total", "vdsmd_events_dropped_total",
                     "vdsmd_http_requests_total", "Host.ping2"):
            self.assertIn(name, text)
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                float(value)  # every sample line ends in a number
                self.assertTrue(name)

    def test_jsonrpc(self):
        status, h, body = self.d.http("POST", "/jsonrpc", PING,
                                      {"Content-Type": "application/json"})
        self.assertEqual(status, 200)
        self.assertEqual(h["content-type"], "application/json")
        self.assertEqual(json.loads(body), {"jsonrpc": "2.0", "id": 7, "result": True})

    def test_last_client_iface_over_http(self):
        """The HTTP transport hands the connection's local address on too."""
        status, _, body = self.d.http("POST", "/jsonrpc", json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "Host.getCapabilities"}))
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["result"]["lastClientIface"], "lo")

    def test_jsonrpc_errors_and_notification(self):
        status, _, body = self.d.http("POST", "/jsonrpc", "{bad")
        self.assertEqual((status, json.loads(body)["error"]["code"]), (200, -32700))
        status, _, body = self.d.http("POST", "/jsonrpc",
                                      json.dumps({"jsonrpc": "2.0", "method": "Host.ping2"}))
        self.assertEqual((status, body), (204, b""))

    def test_keep_alive_and_pipelining(self):
        s = self.d.sock()
        st = {}
        s.sendall(vt.http_request("GET", "/metrics") + vt.http_request("POST", "/jsonrpc", PING)
                  + vt.http_request("GET", "/nothing"))
        self.assertEqual(vt.read_http_response(s, state=st)[0], 200)
        status, _, body = vt.read_http_response(s, state=st)
        self.assertEqual((status, json.loads(body)["id"]), (200, 7))
        self.assertEqual(vt.read_http_response(s, state=st)[0], 404)
        s.sendall(vt.http_request("POST", "/jsonrpc", PING))
        self.assertEqual(vt.read_http_response(s, state=st)[0], 200)
        s.close()

    def test_pipelined_blocking_verbs_answered_in_order(self):
        s = self.d.sock()
        st = {}
        reqs = []
        for i in range(10):
            m = "Host.getStorageDomains" if i % 2 == 0 else "Host.ping2"
            reqs.append(vt.http_request("POST", "/jsonrpc", json.dumps(
                {"jsonrpc": "2.0", "id": i, "method": m})))
        s.sendall(b"".join(reqs))
        for i in range(10):
            status, _, body = vt.read_http_response(s, state=st)
            self.assertEqual((status, json.loads(body)["id"]), (200, i))
        s.close()

    def test_msgpack_body(self):
        body = b"\x83\xa7jsonrpc\xa32.0\xa6method\xaaHost.ping2\xa2id\x01"
        status, h, out = self.d.http("POST", "/jsonrpc", body,
                                     {"Content-Type": "application/msgpack"})
        self.assertEqual((status, h["content-type"]), (200, "application/msgpack"))
        self.assertEqual(out, b"\x83\xa7jsonrpc\xa32.0\xa2id\x01\xa6result\xc3")

    def test_connection_close(self):
        s = self.d.sock()
        s.sendall(vt.http_request("GET", "/health", headers={"Connection": "close"}))
        status, h, _ = vt.read_http_response(s)
        self.assertEqual(h.get("connection"), "close")
        self.assertTrue(vt.wait_closed(s, 5))
        s.close()

    def test_http10_closes(self):
        s = self.d.sock()
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        vt.read_http_response(s)
        self.assertTrue(vt.wait_closed(s, 5))
        s.close()

    def test_status_codes(self):
        self.assertEqual(self.d.http("GET", "/nope")[0], 404)
        status, h, _ = self.d.http("POST", "/health", "")
        self.assertEqual((status, h["allow"]), (405, "GET, HEAD"))
        status, h, _ = self.d.http("GET", "/jsonrpc")
        self.assertEqual((status, h["allow"]), (405, "POST"))
        self.assertEqual(self.d.http("PUT", "/metrics", "x")[0], 405)
        self.assertEqual(self.d.http("POST", "/jsonrpc", "x" * 5000)[0], 413)
        self.assertEqual(self.d.http("POST", "/jsonrpc", "{}",
                                     {"Content-Type": "text/xml"})[0], 415)

    def test_malformed_request(self):
        s = self.d.sock()
        s.sendall(b"GET /health HTTP/1.1\r\nbad header line\r\n\r\n")
        self.assertEqual(vt.read_http_response(s)[0], 400)
        self.assertTrue(vt.wait_closed(s, 5))
        s.close()

    def test_header_section_too_large(self):
        s = self.d.sock()
        s.sendall(b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
        self.assertEqual(vt.read_http_response(s)[0], 431)
        s.close()

    def test_split_request(self):
        s = self.d.sock()
        req = vt.http_request("POST", "/jsonrpc", PING)
        for i in range(0, len(req), 7):
            s.sendall(req[i:i + 7])
        self.assertEqual(vt.read_http_response(s)[0], 200)
        s.close()


if __name__ == "__main__":
    unittest.main()
