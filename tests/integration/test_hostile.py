"""Hostile-client catalogue (issue 8): a table of misbehaving clients, each
with its expected outcome taken from PROTOCOL.md, run against one daemon
while a well-behaved client on its own connection (a separate process, so
the attackers' Python work cannot stall it) runs a Host.ping2 loop.

Outcomes (the `expect` column):
  error-close  ERROR frame whose message names the fault, then the server
               closes the connection (PROTOCOL.md section 2, framing errors)
  error-open   ERROR frame, the connection stays usable
  rpc:<code>   a JSON-RPC error with that code (section 3)
  answer       a correct JSON-RPC answer (the misbehaviour is legal)
  ignored      nothing sent back, the connection stays usable
  close        the server closes without a frame (detection, TLS, limits)
  http:<code>  an HTTP status (section 5)

The ping loop must see no error and no gap over MAX_GAP (2 s); its p99 quiet and
under attack is printed (performance itself is for `make bench`).

The shared parts (ping loop, PingedDaemon, helpers) are in hostile.py; the
TLS and connection-limit catalogues in test_hostile_net.py."""

import json
import os
import select
import socket
import time
import unittest

import vdsmtest as vt
from hostile import REQ, RESP, Bulk, PingedDaemon, build_table, req, send_frame



class Catalogue(PingedDaemon, unittest.TestCase):
    """The table below is turned into one test method per case."""

    ARGS = ("--max-frame-size", "17M", "--detect-timeout", "2", "--max-output", "8M",
            "--vm-sample-interval", "1", "--host-sample-interval", "1")

    # -- connection helpers --
    def conn(self, connect=True, subscribe=True, heart_beat=None, sock=None):
        c = self.d.stomp(sock)
        self.addCleanup(c.close)
        if connect:
            f = c.connect(heart_beat=heart_beat)
            self.assertEqual(f.cmd, "CONNECTED", f)
        if subscribe:
            c.subscribe(RESP, "r", receipt="sub")
        return c

    def raw(self):
        s = self.d.sock()
        self.addCleanup(s.close)
        return s

    def assert_error_close(self, c, text, timeout=10):
        frames = c.read_eof(timeout)
        self.assertTrue(frames, "no ERROR frame before close")
        self.assertEqual(frames[0].cmd, "ERROR", frames)
        self.assertIn(text, frames[0].headers.get("message", ""), frames[0])
        self.assertEqual(len(frames), 1, frames)

    def assert_open(self, c):
        tag = "alive-%d" % time.monotonic_ns()
        c.send_frame("SUBSCRIBE", [("destination", "x." + tag), ("id", tag),
                                   ("receipt", tag)])
        f = c.read_frame()
        while f.cmd != "RECEIPT":
            f = c.read_frame()
        self.assertEqual(f.headers.get("receipt-id"), tag, f)

    def assert_closed_silently(self, s, timeout=10):
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([s], [], [], deadline - time.monotonic())
            if not r:
                continue
            try:
                d = s.recv(65536)
            except (ConnectionResetError, OSError):
                break
            if not d:
                break
            data += d
        else:
            self.fail("not closed within %s s" % timeout)
        self.assertEqual(data, b"")

    def rpc_body(self, c, body, extra=()):
        """SEND a raw body to the request destination; the answer (JSON)."""
        c.send(send_frame(body=body, extra=extra))
        f = c.read_frame(20)
        self.assertEqual(f.cmd, "MESSAGE", f)
        return f.json()

    def assert_rpc_error(self, resp, code, rid=None, text=None):
        self.assertIn("error", resp, resp)
        self.assertEqual(resp["error"]["code"], code, resp)
        self.assertEqual(resp["id"], rid, resp)
        self.assertEqual(list(resp), ["jsonrpc", "id", "error"])
        if text:
            self.assertIn(text, resp["error"]["message"])

    # ==== detection ====================================================
    def case_garbage_before_detection(self):
        """close: bytes no protocol starts with, logged with the peer."""
        s = self.raw()
        s.sendall(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
        self.assert_closed_silently(s)
        self.assertTrue(self.d.wait_log(r"unrecognized protocol from 127\.0\.0\.1", 5))

    def case_random_binary_before_detection(self):
        """close: 64 KiB of random bytes."""
        s = self.raw()
        try:
            s.sendall(b"\xff" + os.urandom(65535))
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assert_closed_silently(s)

    def case_slowloris_detection(self):
        """close at the detect timeout (2 s): heart-beat EOLs 1 byte/s never
        show a protocol."""
        s = self.raw()
        t0 = time.monotonic()
        closed = False
        for _ in range(6):
            try:
                s.sendall(b"\n")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            r, _, _ = select.select([s], [], [], 1.0)
            if r:
                try:
                    closed = s.recv(1) == b""
                except ConnectionResetError:
                    closed = True
                if closed:
                    break
        self.assertTrue(closed, "slow detection never closed")
        self.assertLess(time.monotonic() - t0, 4.5)
        self.assertGreater(time.monotonic() - t0, 1.5)

    def case_slowloris_header(self):
        """answer: a SEND header trickled at 1 byte/s (heart-beat 1000 keeps
        it legal) is answered once complete."""
        c = self.conn(heart_beat="1000,0")
        f = send_frame(body=req("Host.ping2", rid="slow-h"))
        cut = f.index(b"destination:") + 4
        c.send(f[:cut - 4])
        for i in range(4):
            time.sleep(1.0)
            c.send(f[cut - 4 + i:cut - 3 + i])
        c.send(f[cut:])
        resp = c.read_frame().json()
        self.assertEqual((resp["id"], resp["result"]), ("slow-h", True))

    def case_slowloris_body(self):
        """answer: a body trickled at 1 byte/s (heart-beat 1000)."""
        c = self.conn(heart_beat="1000,0")
        f = send_frame(body=req("Host.ping2", rid="slow-b"))
        cut = f.index(b"\n\n") + 2
        c.send(f[:cut + 5])
        for i in range(4):
            time.sleep(1.0)
            c.send(f[cut + 5 + i:cut + 6 + i])
        c.send(f[cut + 9:])
        resp = c.read_frame().json()
        self.assertEqual((resp["id"], resp["result"]), ("slow-b", True))

    def case_slowloris_slower_than_heartbeat(self):
        """close: a body trickling slower than the negotiated heart-beat
        (1000 ms -> closed after 2 s of silence), nothing answered."""
        c = self.conn(heart_beat="1000,0")
        f = send_frame(body=req("Host.ping2"))
        c.send(f[:-10])
        t0 = time.monotonic()
        self.assertEqual(c.read_eof(6), [])
        self.assertGreater(time.monotonic() - t0, 1.5)
        self.assertTrue(self.d.wait_log(r"no heart-beat for", 2))

    # ==== framing and limits ============================================
    def case_frame_over_size_declared(self):
        """error-close: content-length over max_frame_size, refused before the body."""
        c = self.conn()
        c.send(b"SEND\ndestination:%s\ncontent-length:%d\n\n" % (REQ.encode(), 17 << 20))
        self.assert_error_close(c, "Frame too large")

    def case_frame_over_size_streamed(self):
        """error-close: a body without content-length running past the limit."""
        c = self.conn()
        c.send(b"SEND\ndestination:%s\n\n" % REQ.encode())
        chunk = b"x" * (1 << 20)
        try:
            for _ in range(18):
                c.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assert_error_close(c, "Frame too large")

    def case_too_many_headers(self):
        """error-close: 129 headers (limit 128)."""
        c = self.conn()
        c.send_frame("SEND", [("destination", REQ)] + [("h%d" % i, "v") for i in range(128)], "{}")
        self.assert_error_close(c, "Too many headers")

    def case_ten_thousand_headers(self):
        """error-close: 10 000 headers."""
        c = self.conn()
        try:
            c.send_frame("SEND", [("destination", REQ)] + [("h%d" % i, "v") for i in range(10000)],
                         "{}")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assert_error_close(c, "Too many headers")

    def case_header_line_too_long(self):
        """error-close: one header line over 8 KiB."""
        c = self.conn()
        c.send_frame("SEND", [("destination", REQ), ("x", "v" * 9000)], "{}")
        self.assert_error_close(c, "Header line too long")

    def case_command_line_too_long(self):
        """error-close: an endless command line."""
        c = self.conn()
        try:
            c.send(b"SEND" + b"X" * 20000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        frames = c.read_eof()
        self.assertEqual([f.cmd for f in frames], ["ERROR"])

    def case_content_length_larger_then_silence(self):
        """close: content-length promises more than comes; nothing is
        answered; the heart-beat (1000 ms) closes it after 2 s."""
        c = self.conn(heart_beat="1000,0")
        c.send(b"SEND\ndestination:%s\nreply-to:%s\ncontent-length:500\n\n%s" %
               (REQ.encode(), RESP.encode(), req("Host.ping2").encode()))
        self.assertEqual(c.read_eof(6), [])

    def case_content_length_larger_no_heartbeat(self):
        """ignored: without heart-beats the partial frame just waits; the
        connection is still open and answers nothing."""
        c = self.conn()
        c.send(b"SEND\ndestination:%s\ncontent-length:500\n\n%s" %
               (REQ.encode(), req("Host.ping2").encode()))
        self.assertRaises(TimeoutError, c.read_frame, 1.0)
        c.send(b"\0")  # still waiting for body bytes: no frame ends here
        self.assertRaises(TimeoutError, c.read_frame, 0.3)

    def case_content_length_smaller(self):
        """error-close: content-length shorter than the body: no NUL where
        the body should end."""
        c = self.conn()
        body = req("Host.ping2").encode()
        c.send(b"SEND\ndestination:%s\ncontent-length:5\n\n%s\0" % (REQ.encode(), body))
        self.assert_error_close(c, "not terminated by NUL")

    def case_content_length_not_a_number(self):
        """error-close: content-length:abc."""
        c = self.conn()
        c.send(b"SEND\ndestination:%s\ncontent-length:abc\n\n{}\0" % REQ.encode())
        self.assert_error_close(c, "Invalid content-length")

    def case_content_length_negative(self):
        """error-close: content-length:-1."""
        c = self.conn()
        c.send(b"SEND\ndestination:%s\ncontent-length:-1\n\n{}\0" % REQ.encode())
        self.assert_error_close(c, "content-length")

    def case_content_length_overflow(self):
        """error-close: a content-length past 2^64."""
        c = self.conn()
        c.send(b"SEND\ndestination:%s\ncontent-length:99999999999999999999999\n\n{}\0" %
               REQ.encode())
        frames = c.read_eof()
        self.assertEqual([f.cmd for f in frames], ["ERROR"])

    def case_nul_in_header(self):
        """error-close: a NUL inside a header line."""
        c = self.conn()
        c.send(b"SEND\ndestination:%s\nx-bad:a\0b\n\n{}\0" % REQ.encode())
        self.assert_error_close(c, "NUL")

    def case_bad_escape(self):
        """error-close: \\t is not a STOMP escape."""
        c = self.conn()
        c.send(b"SUBSCRIBE\ndestination:a\\tb\nid:1\n\n\0")
        self.assert_error_close(c, "escape")

    def case_trailing_backslash(self):
        """error-close: a header value ending in a lone backslash."""
        c = self.conn()
        c.send(b"SUBSCRIBE\ndestination:ab\\\nid:1\n\n\0")
        self.assert_error_close(c, "escape")

    def case_header_without_colon(self):
        """error-close: a header line without ':'."""
        c = self.conn()
        c.send(b"SEND\ndestination:%s\nnocolon\n\n{}\0" % REQ.encode())
        self.assert_error_close(c, "Header without")

    def case_unknown_command(self):
        """error-close: a command STOMP does not have, after detection."""
        c = self.conn()
        c.send(b"PUBLISH\ndestination:x\n\n\0")
        frames = c.read_eof()
        self.assertEqual([f.cmd for f in frames], ["ERROR"])

    def case_server_frame_from_client(self):
        """error-close: a client sending MESSAGE."""
        c = self.conn()
        c.send(b"MESSAGE\ndestination:x\nmessage-id:1\nsubscription:1\n\n\0")
        self.assert_error_close(c, "Unexpected frame")

    def case_colon_in_value_accepted(self):
        """answer: a raw ':' in a header value (PROTOCOL fix) on SEND."""
        c = self.conn()
        c.send(send_frame(body=req("Host.ping2", rid="colon"),
                          extra=[("x-addr", "fe80::1")]).replace(b"fe80\\c\\c1", b"fe80::1"))
        self.assertEqual(c.read_frame().json()["result"], True)

    # ==== JSON-RPC bodies ==============================================
    def case_depth_bomb_16mib(self):
        """rpc:-32700: a 16 MiB body of '[' stops at the depth limit."""
        c = self.conn()
        resp = self.rpc_body(c, b"[" * (16 << 20))
        self.assert_rpc_error(resp, -32700, text="Invalid JSON")
        self.assert_open(c)

    def case_depth_65_in_params(self):
        """rpc:-32700: a well-formed request nested 65 deep."""
        c = self.conn()
        body = '{"jsonrpc":"2.0","id":1,"method":"Host.ping2","params":{"a":%s}}' % (
            "[" * 64 + "]" * 64)
        resp = self.rpc_body(c, body)
        self.assertEqual(resp["error"]["code"], -32700, resp)

    def case_million_element_params(self):
        """rpc:-32600: Host.ping2 with 1e6 positional params is over
        max_elements: refused before it is decoded (issue 17; the id is not
        read then)."""
        c = self.conn()
        body = '{"jsonrpc":"2.0","id":"big","method":"Host.ping2","params":[%s]}' % (
            ",".join(["0"] * 1000000))
        resp = self.rpc_body(c, body)
        self.assert_rpc_error(resp, -32600, None)
        self.assertIn("max_elements", resp["error"]["message"])
        self.assert_open(c)

    def case_million_element_batch(self):
        """rpc:-32600: a top-level array of 1e6 elements is an oversized
        batch, refused as one error (no 1e6 answers)."""
        c = self.conn()
        resp = self.rpc_body(c, "[" + ",".join(["0"] * 1000000) + "]")
        self.assert_rpc_error(resp, -32600, text="Invalid request")

    def case_invalid_utf8_in_string(self):
        """rpc:-32700: invalid UTF-8 inside a JSON string."""
        c = self.conn()
        body = b'{"jsonrpc":"2.0","id":1,"method":"Host.ping2","params":{"x":"\xff\xfe"}}'
        self.assert_rpc_error(self.rpc_body(c, body), -32700)

    def case_invalid_utf8_in_method(self):
        """rpc:-32700: invalid UTF-8 (overlong '/') in the method name."""
        c = self.conn()
        body = b'{"jsonrpc":"2.0","id":1,"method":"Host.\xc0\xafping2"}'
        self.assert_rpc_error(self.rpc_body(c, body), -32700)

    def case_id_every_json_type(self):
        """answer / rpc:-32600: string and number ids are echoed; bool,
        object and array ids are invalid (answered with id null); a null id
        is a notification (nothing)."""
        c = self.conn()
        for rid in ("s", "", 0, -7, 2 ** 53, 1.5, "\u00e9\u4e2d"):
            resp = self.rpc_body(c, req("Host.ping2", rid=rid))
            self.assertEqual((resp["id"], resp.get("result")), (rid, True), rid)
        for rid in (True, False, {"a": 1}, [1]):
            resp = self.rpc_body(c, req("Host.ping2", rid=rid))
            self.assert_rpc_error(resp, -32600, None)
        c.send(send_frame(body=req("Host.ping2", rid=None)))
        self.assertRaises(TimeoutError, c.read_frame, 0.5)

    def case_id_one_megabyte_string(self):
        """answer: a 1 MB string id is echoed whole."""
        c = self.conn()
        rid = "i" * (1 << 20)
        resp = self.rpc_body(c, req("Host.ping2", rid=rid))
        self.assertEqual(resp["id"], rid)
        self.assertIs(resp["result"], True)

    def case_batch_10000(self):
        """rpc:-32600: a batch of 10 000 (over the engine's 4096) is refused as a whole."""
        c = self.conn()
        batch = [{"jsonrpc": "2.0", "method": "Host.ping2", "id": i} for i in range(10000)]
        resp = self.rpc_body(c, json.dumps(batch))
        self.assert_rpc_error(resp, -32600, text="batch")

    def case_batch_4096(self):
        """answer: the largest batch is answered with 4096 responses."""
        c = self.conn()
        batch = [{"jsonrpc": "2.0", "method": "Host.ping2", "id": i} for i in range(4096)]
        resp = self.rpc_body(c, json.dumps(batch))
        self.assertEqual(sorted(r["id"] for r in resp), list(range(4096)))
        self.assertTrue(all(r["result"] is True for r in resp))

    def case_batch_of_notifications(self):
        """ignored: a batch made only of notifications answers nothing."""
        c = self.conn()
        batch = [{"jsonrpc": "2.0", "method": "Host.ping2"} for _ in range(4000)]
        c.send(send_frame(body=json.dumps(batch)))
        self.assertRaises(TimeoutError, c.read_frame, 0.5)
        self.assert_open(c)

    def case_notification_flood(self):
        """ignored: 20 000 notifications answer nothing; a request after them is answered."""
        c = self.conn()
        f = send_frame(body=json.dumps({"jsonrpc": "2.0", "method": "Host.ping2"}))
        c.send(f * 20000)
        resp = self.rpc_body(c, req("Host.ping2", rid="after-flood"))
        self.assertEqual(resp["id"], "after-flood")
        self.assertEqual(c.skipped, [])

    def case_empty_batch(self):
        """rpc:-32600: []."""
        c = self.conn()
        self.assert_rpc_error(self.rpc_body(c, "[]"), -32600)

    def case_not_json(self):
        """rpc:-32700: a body that is not JSON, an empty body, trailing garbage."""
        c = self.conn()
        for body in (b"hello", b"", b'{"jsonrpc":"2.0","id":1,"method":"Host.ping2"} x',
                     b"\x00\x01\x02"):
            if b"\0" in body:
                resp = self.rpc_body(c, body)  # content-length carries the NUL
            else:
                resp = self.rpc_body(c, body)
            self.assert_rpc_error(resp, -32700, text="Invalid JSON")

    def case_envelope_invalid(self):
        """rpc:-32600 with the request's id: bad jsonrpc, method not a
        string, params not a container; a scalar body."""
        c = self.conn()
        for body, rid in (('{"jsonrpc":"1.0","id":5,"method":"Host.ping2"}', 5),
                          ('{"jsonrpc":"2.0","id":6,"method":7}', 6),
                          ('{"jsonrpc":"2.0","id":7,"method":"Host.ping2","params":"x"}', 7),
                          ('42', None), ('"str"', None)):
            self.assert_rpc_error(self.rpc_body(c, body), -32600, rid)

    def case_unknown_method(self):
        """rpc:-32601 naming the method."""
        c = self.conn()
        resp = self.rpc_body(c, req("No.suchVerb" + "x" * 5000, rid=9))
        self.assert_rpc_error(resp, -32601, 9)

    def case_bad_params(self):
        """rpc:-32602: ill-typed and missing parameters."""
        c = self.conn()
        self.assert_rpc_error(self.rpc_body(c, req("VM.getStats", {"vmID": 5}, 1)), -32602, 1)
        self.assert_rpc_error(self.rpc_body(c, req("VM.getStats", {}, 2)), -32602, 2)

    def case_unknown_content_type(self):
        """rpc:-32700: a binary body under an unknown content-type is
        decoded with the startup codec and refused."""
        c = self.conn()
        resp = self.rpc_body(c, b"\x81\xa1a\x01", extra=[("content-type", "application/x-evil")])
        self.assert_rpc_error(resp, -32700)

    # ==== subscriptions ================================================
    def case_subscribe_10000(self):
        """error-open: 10 000 SUBSCRIBEs: the first 1024 are kept, each
        one past the per-connection bound gets an ERROR; the connection
        keeps working."""
        c = self.conn(subscribe=False)
        frames = b"".join(vt.frame("SUBSCRIBE", [("destination", "d.%d" % i), ("id", str(i))])
                          for i in range(10000))
        c.send(frames)
        errs = Bulk(c).frames(10000 - 1024)
        self.assertEqual({(cmd, h.get("message")) for cmd, h, _ in errs},
                         {("ERROR", "Too many subscriptions")})
        c.send_frame("UNSUBSCRIBE", [("id", "5")])
        c.subscribe(RESP, "r", receipt="after")
        self.assertIs(c.call("Host.ping2")["result"], True)

    def case_unsubscribe_unknown(self):
        """ignored: 5000 UNSUBSCRIBEs of ids never used."""
        c = self.conn()
        c.send(b"".join(vt.frame("UNSUBSCRIBE", [("id", "nope-%d" % i)]) for i in range(5000)))
        self.assert_open(c)
        self.assertIs(c.call("Host.ping2")["result"], True)

    def case_unsubscribe_without_id(self):
        """error-open: UNSUBSCRIBE without id."""
        c = self.conn()
        c.send_frame("UNSUBSCRIBE", [("receipt", "u")])
        f = c.read_frame()
        self.assertEqual((f.cmd, f.headers.get("message")), ("ERROR", "Missing id header"))
        self.assert_open(c)

    def case_duplicate_subscription_id(self):
        """error-open: the same subscription id twice."""
        c = self.conn()
        c.send_frame("SUBSCRIBE", [("destination", "a.b"), ("id", "r")])
        f = c.read_frame()
        self.assertEqual((f.cmd, f.headers.get("message")),
                         ("ERROR", "Subscription id already in use"))
        self.assert_open(c)

    def case_send_to_nobody(self):
        """error-open: SEND to a destination nobody subscribes to."""
        c = self.conn()
        c.send_frame("SEND", [("destination", "nobody.here")], "x")
        f = c.read_frame()
        self.assertEqual((f.cmd, f.headers.get("message")), ("ERROR", "Subscription not available"))
        self.assert_open(c)

    # ==== heart-beats ==================================================
    def case_heartbeat_timeout(self):
        """close: CONNECT heart-beat:1000,0 then silence: closed after 2 x 1 s."""
        c = self.conn(heart_beat="1000,0", subscribe=False)
        t0 = time.monotonic()
        self.assertEqual(c.read_eof(6), [])
        self.assertGreater(time.monotonic() - t0, 1.8)

    def case_heartbeat_garbage(self):
        """answer: an unparsable heart-beat header is taken as 0,0."""
        c = self.d.stomp()
        self.addCleanup(c.close)
        f = c.connect(heart_beat="x,,-1")
        self.assertEqual((f.cmd, f.headers["heart-beat"]), ("CONNECTED", "0,0"))

    def case_heartbeat_tiny(self):
        """answer: heart-beat:1,1 is raised to 1000 both ways."""
        c = self.d.stomp()
        self.addCleanup(c.close)
        f = c.connect(heart_beat="1,1")
        self.assertEqual(f.headers["heart-beat"], "1000,1000")
        c.send(b"\n")
        c.close()

    # ==== connections ==================================================
    def case_half_closed_with_responses_pending(self):
        """answer: requests then shutdown(SHUT_WR): every pending response
        (fast and from the worker pool) is delivered, then the server closes."""
        c = self.conn()
        # > 64 KiB, so the server reads the end of stream in the same
        # callback as the last requests, while the worker pool still has them
        data = send_frame(body=json.dumps({"jsonrpc": "2.0", "method": "Host.ping2"})) * 2000
        for i in range(50):
            data += send_frame(body=req("Host.ping2", rid="p%d" % i))
            data += send_frame(body=req("Host.getStorageDomains", rid="w%d" % i))
        c.send(data)
        c.sock.shutdown(socket.SHUT_WR)
        frames = c.read_eof(10)
        ids = sorted(f.json()["id"] for f in frames if f.cmd == "MESSAGE")
        self.assertEqual(ids, sorted(["p%d" % i for i in range(50)] +
                                     ["w%d" % i for i in range(50)]))

    def case_half_closed_http_pipeline(self):
        """answer: pipelined HTTP requests on the worker pool, then
        shutdown(SHUT_WR): every response comes back, in order, then close."""
        s = self.raw()
        body = req("Host.getStorageDomains", rid="h")
        reqs = b"".join(vt.http_request("POST", "/jsonrpc", body.replace('"h"', '"h%d"' % i),
                                        {"Content-Type": "application/json"})
                        for i in range(20))
        s.sendall(reqs)
        s.shutdown(socket.SHUT_WR)
        state = {}
        got = []
        for _ in range(20):
            status, _, rbody = vt.read_http_response(s, state=state)
            self.assertEqual(status, 200)
            got.append(json.loads(rbody)["id"])
        self.assertEqual(got, ["h%d" % i for i in range(20)])
        self.assertEqual(state["buf"], b"")
        self.assert_closed_silently(s)

    def case_half_closed_before_anything(self):
        """close: connect, shutdown(SHUT_WR) at once."""
        s = self.raw()
        s.shutdown(socket.SHUT_WR)
        self.assert_closed_silently(s)

    def case_never_reads(self):
        """close: a client that subscribes to events and responses, sends
        requests and never reads is cut at max_output (8M); events meanwhile
        are dropped for it, not queued without bound."""
        s = socket.socket()
        self.addCleanup(s.close)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((self.d.host, self.d.port))
        s.sendall(vt.frame("CONNECT", [("accept-version", "1.2")]) +
                  vt.frame("SUBSCRIBE", [("destination", vt.EVENTS), ("id", "e")]) +
                  vt.frame("SUBSCRIBE", [("destination", RESP), ("id", "r")]))
        f = send_frame(body=json.dumps([{"jsonrpc": "2.0", "method": "Host.getAllVmStats",
                                         "id": i} for i in range(200)]))
        start = len(self.d.log_lines())
        try:
            for _ in range(200):
                s.sendall(f)
                if self.d.wait_log(r"closing slow reader", 0.001, start):
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assertTrue(self.d.wait_log(r"max_output 8388608\), closing slow reader", 10, start))

    def case_connection_churn(self):
        """ignored: 10 000 connect/close (half with a partial frame); no
        connection or descriptor is left behind."""
        fds = len(os.listdir("/proc/%d/fd" % self.d.proc.pid))
        addr = (self.d.host, self.d.port)
        for i in range(10000):
            s = socket.socket()
            s.connect(addr)
            if i & 1:
                s.send(b"CONNECT\naccept-ver")
            s.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            now = len(os.listdir("/proc/%d/fd" % self.d.proc.pid))
            if now <= fds:
                break
            time.sleep(0.1)
        self.assertLessEqual(now, fds)

    # ==== HTTP =========================================================
    def http_raw(self, data, timeout=10):
        s = self.raw()
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return vt.read_http_response(s, timeout=timeout), s

    def case_http_huge_header(self):
        """http:431 then close: a 1 MB header section."""
        (status, _, _), s = self.http_raw(b"GET /health HTTP/1.1\r\nX-Big: " +
                                          b"a" * (1 << 20) + b"\r\n\r\n")
        self.assertEqual(status, 431)
        self.assert_closed_silently(s)

    def case_http_chunked(self):
        """http:501 then close: a chunked POST body."""
        (status, _, _), s = self.http_raw(
            b"POST /jsonrpc HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: application/json\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        self.assertEqual(status, 501)
        self.assert_closed_silently(s)

    def case_http_missing_content_length(self):
        """http:411 then close: POST without Content-Length."""
        (status, _, _), s = self.http_raw(
            b"POST /jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n"
            + req("Host.ping2").encode())
        self.assertEqual(status, 411)
        self.assert_closed_silently(s)

    def case_http_body_over_limit(self):
        """http:413 then close: Content-Length over max_frame_size."""
        (status, _, _), s = self.http_raw(
            b"POST /jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 999999999\r\n\r\n")
        self.assertEqual(status, 413)
        self.assert_closed_silently(s)

    def case_http_garbage_request_line(self):
        """http:400 then close: a request line with no version."""
        (status, _, _), s = self.http_raw(b"GET /\x01\x02 nonsense\r\n\r\n")
        self.assertEqual(status, 400)
        self.assert_closed_silently(s)

    def case_http_bad_json(self):
        """http:200 with rpc:-32700: POST /jsonrpc with a depth bomb."""
        body = b"[" * 100000
        (status, _, rbody), s = self.http_raw(
            b"POST /jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(rbody)["error"]["code"], -32700)



CASES = build_table(Catalogue)


if __name__ == "__main__":
    unittest.main()
