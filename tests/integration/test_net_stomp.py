"""STOMP 1.2 against a real vdsmd (PROTOCOL.md section 2): heart-beats,
frames before CONNECT, routing, receipts, every ERROR case, limits,
pipelining."""

import json
import time
import unittest

import vdsmtest as vt


class StompBase(unittest.TestCase):
    ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon(*cls.ARGS)
        assert cls.d.wait_ready(), "vdsmd never became ready"

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)

    def conn(self, connect=True, **kw):
        c = self.d.stomp()
        self.addCleanup(c.close)
        if connect:
            f = c.connect(**kw)
            self.assertEqual(f.cmd, "CONNECTED", f)
        return c

    def assert_open(self, c):
        """The connection still works: a receipt comes back."""
        c.send_frame("SUBSCRIBE", [("destination", "x.alive"), ("id", "alive-%f" % time.time()),
                                   ("receipt", "alive")])
        f = c.read_frame()
        self.assertEqual((f.cmd, f.headers.get("receipt-id")), ("RECEIPT", "alive"), f)

    def assert_error_then_close(self, c, text):
        frames = c.read_eof()
        self.assertTrue(frames, "no ERROR frame before close")
        self.assertEqual(frames[0].cmd, "ERROR", frames)
        self.assertIn(text, frames[0].headers.get("message", "") + frames[0].body.decode())


class HeartBeat(StompBase):
    def test_table(self):
        for sent, want in (("0,15000", "15000,0"), ("0,500", "1000,0"),
                           ("6000,5000", "5000,6000"), (None, "0,0")):
            c = self.conn(connect=False)
            f = c.connect(heart_beat=sent)
            self.assertEqual(f.cmd, "CONNECTED")
            self.assertEqual(f.headers["heart-beat"], want, sent)
            self.assertEqual(f.headers["version"], "1.2")
            self.assertTrue(f.headers["server"].startswith("vdsmd/"))
            self.assertTrue(f.headers["session"])

    def test_server_sends_heartbeats_when_idle(self):
        c = self.conn(heart_beat="0,1000")
        self.assertRaises(TimeoutError, c.read_frame, 2.6)
        self.assertGreaterEqual(c.heartbeats, 2)

    def test_silent_client_closed_after_twice_its_interval(self):
        c = self.conn(heart_beat="1000,0")  # we promise traffic every 1 s
        t0 = time.monotonic()
        self.assertEqual(c.read_eof(timeout=8), [])
        self.assertGreaterEqual(time.monotonic() - t0, 1.5)

    def test_client_heartbeats_keep_connection(self):
        c = self.conn(heart_beat="1000,0")
        for _ in range(5):
            time.sleep(0.5)
            c.send(b"\n")
        self.assert_open(c)


class Routing(StompBase):
    def test_frames_before_connect(self):
        c = self.conn(connect=False)
        c.subscribe(vt.RESPONSES, "early")
        rid = c.request("Host.ping2")
        # The response was produced before CONNECT, so it comes first.
        c.send_frame("CONNECT", [("accept-version", "1.2")])
        frames = [c.read_frame(), c.read_frame()]
        self.assertEqual(sorted(f.cmd for f in frames), ["CONNECTED", "MESSAGE"])
        msg = [x for x in frames if x.cmd == "MESSAGE"][0]
        self.assertEqual(msg.json()["id"], rid)

    def test_default_response_destination(self):
        c = self.conn()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        rid = c.request("Host.ping2", reply_to=None)
        f = c.read_frame()
        self.assertEqual(f.cmd, "MESSAGE")
        self.assertEqual(f.headers["destination"], vt.RESPONSES)
        self.assertEqual(f.json()["id"], rid)

    def test_message_headers(self):
        c = self.conn()
        c.subscribe("jms.topic.hdrs", "sub-h", receipt="s")
        c.request("Host.ping2", reply_to="jms.topic.hdrs")
        f = c.read_frame()
        self.assertEqual(f.cmd, "MESSAGE")
        self.assertEqual(f.headers["subscription"], "sub-h")
        self.assertEqual(f.headers["content-type"], "application/json")
        self.assertTrue(f.headers["message-id"])
        self.assertEqual(int(f.headers["content-length"]), len(f.body))

    def test_request_sub_destinations(self):
        c = self.conn()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        for dest in ("jms.topic.vdsm_requests.sub", "jms.topic.vdsm_irs_requests",
                     "jms.topic.vdsm_irs_requests.x.y"):
            resp = c.call("Host.ping2", dest=dest)
            self.assertIn("result", resp)

    def test_reply_never_to_other_connection(self):
        # Replies are private (PROTOCOL.md 2): b listens on a's reply-to, a
        # has no subscription there: nobody gets the reply.
        a, b = self.conn(), self.conn()
        b.subscribe("jms.topic.listener", "b1", receipt="s")
        a.request("Host.ping2", reply_to="jms.topic.listener")
        self.assertRaises(TimeoutError, b.read_frame, 0.5)
        self.assert_open(b)
        self.assert_open(a)

    def test_reply_prefers_requesting_connection(self):
        a, b = self.conn(), self.conn()
        a.subscribe("jms.topic.both", "a1", receipt="s")
        b.subscribe("jms.topic.both", "b1", receipt="s")
        rid = a.request("Host.ping2", reply_to="jms.topic.both")
        self.assertEqual(a.read_frame().json()["id"], rid)
        # b got nothing: its next frame is the receipt for a later frame.
        self.assert_open(b)

    def test_prefix_forwarding(self):
        sub, snd = self.conn(), self.conn()
        sub.subscribe("jms", "p1")
        sub.subscribe("jms.topic", "p2")
        sub.subscribe("jms.top", "p3", receipt="s")
        snd.send_frame("SEND", [("destination", "jms.topic.x"), ("custom", "kept")], "hello")
        got = sorted((f.headers["subscription"], f.body, f.headers.get("custom"),
                      f.headers["destination"]) for f in (sub.read_frame(), sub.read_frame()))
        self.assertEqual(got, [("p1", b"hello", "kept", "jms.topic.x"),
                               ("p2", b"hello", "kept", "jms.topic.x")])
        self.assert_open(sub)  # p3 received nothing

    def test_send_without_subscriber(self):
        c = self.conn()
        c.send_frame("SEND", [("destination", "nobody.listens")], "x")
        f = c.read_frame()
        self.assertEqual(f.cmd, "ERROR")
        self.assertIn("Subscription not available", f.headers.get("message", "") + f.body.decode())
        self.assert_open(c)

    def test_unsubscribe(self):
        c = self.conn()
        c.subscribe("jms.topic.u", "u1", receipt="s")
        c.send_frame("UNSUBSCRIBE", [("id", "u1"), ("receipt", "u")])
        self.assertEqual(c.read_frame().headers["receipt-id"], "u")
        c.send_frame("UNSUBSCRIBE", [("id", "never"), ("receipt", "u2")])
        self.assertEqual(c.read_frame().headers["receipt-id"], "u2")

    def test_pipelined_1000(self):
        c = self.conn()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        data = b"".join(vt.frame("SEND", [("destination", vt.REQUESTS),
                                          ("reply-to", vt.RESPONSES)],
                                 json.dumps({"jsonrpc": "2.0", "method": "Host.ping2",
                                             "id": i}))
                        for i in range(1000))
        c.send(data)
        ids = set()
        while len(ids) < 1000:
            f = c.read_frame()
            self.assertEqual(f.cmd, "MESSAGE")
            resp = f.json()
            self.assertIn("result", resp)
            ids.add(resp["id"])
        self.assertEqual(ids, set(range(1000)))

    def test_msgpack_request(self):
        # {"jsonrpc": "2.0", "method": "Host.ping2", "id": 1} in msgpack
        body = (b"\x83\xa7jsonrpc\xa32.0\xa6method\xaaHost.ping2\xa2id\x01")
        c = self.conn()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        c.send_frame("SEND", [("destination", vt.REQUESTS),
                              ("content-type", "application/msgpack")], body)
        f = c.read_frame()
        self.assertEqual(f.headers["content-type"], "application/msgpack")
        # {"jsonrpc":"2.0","id":1,"result":true}
        self.assertEqual(f.body, b"\x83\xa7jsonrpc\xa32.0\xa2id\x01\xa6result\xc3")

    def test_cached_vm_stats_whole_in_every_codec(self):
        # A JSON Host.getAllVmStats reply is sent from the snapshot's cache
        # in pieces (issue 25); msgpack's is copied in.  Both must be the
        # very bytes HTTP gets, where the engine joins the pieces itself.
        reqs = [("application/msgpack",
                 b"\x83\xa7jsonrpc\xa32.0\xa6method\xb2Host.getAllVmStats\xa2id\x01"),
                ("application/json", b'{"jsonrpc":"2.0","method":"Host.getAllVmStats","id":1}')]
        for ct, body in reqs:
            c = self.conn()
            c.subscribe(vt.RESPONSES, "r", receipt="s")
            for _ in range(2):  # the second poll is served from the cache
                c.send_frame("SEND", [("destination", vt.REQUESTS), ("content-type", ct)], body)
                f = c.read_frame()
                self.assertEqual(f.headers["content-type"], ct)
                status, _, got = self.d.http("POST", "/jsonrpc", body, {"Content-Type": ct})
                self.assertEqual(status, 200)
                self.assertEqual(f.body, got, ct)
            if ct == "application/json":
                self.assertIsInstance(f.json()["result"], list)

    def test_blocking_verb_on_worker_pool(self):
        c = self.conn()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        ids = [c.request("Host.getStorageDomains") for _ in range(20)]
        ids.append(c.request("Host.ping2"))
        got = {}
        while len(got) < len(ids):
            f = c.read_frame()
            r = f.json()
            got[r["id"]] = r
        self.assertEqual(set(got), set(ids))
        self.assertTrue(all("result" in r for r in got.values()), got)

    def test_json_rpc_errors_are_answered(self):
        c = self.conn()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        resp = c.call("No.such", req_id="e1")
        self.assertEqual(resp["error"]["code"], -32601)
        c.send_frame("SEND", [("destination", vt.REQUESTS)], "{not json")
        f = c.read_frame()
        self.assertEqual(f.json()["error"]["code"], -32700)


class Receipts(StompBase):
    def test_receipt_on_any_frame(self):
        c = self.conn(connect=False)
        c.send_frame("CONNECT", [("accept-version", "1.2"), ("receipt", "c")])
        frames = [c.read_frame(), c.read_frame()]
        self.assertEqual([f.cmd for f in frames], ["CONNECTED", "RECEIPT"])
        for cmd, h in (("SUBSCRIBE", [("destination", "d"), ("id", "1")]),
                       ("ACK", [("id", "x")]), ("NACK", [("id", "x")]),
                       ("UNSUBSCRIBE", [("id", "1")])):
            c.send_frame(cmd, h + [("receipt", cmd)])
            f = c.read_frame()
            self.assertEqual((f.cmd, f.headers["receipt-id"]), ("RECEIPT", cmd))

    def test_disconnect_with_receipt(self):
        c = self.conn()
        c.send_frame("DISCONNECT", [("receipt", "bye")])
        frames = c.read_eof()
        self.assertEqual([(f.cmd, f.headers.get("receipt-id")) for f in frames],
                         [("RECEIPT", "bye")])

    def test_disconnect_without_receipt(self):
        c = self.conn()
        c.send_frame("DISCONNECT")
        self.assertEqual(c.read_eof(), [])

    def test_escaped_receipt_id(self):
        c = self.conn()
        c.send_frame("SUBSCRIBE", [("destination", "e"), ("id", "e1"), ("receipt", "a:b\nc")])
        self.assertEqual(c.read_frame().headers["receipt-id"], "a:b\nc")


class Errors(StompBase):
    def test_version_unsupported_keeps_connection(self):
        c = self.conn(connect=False)
        f = c.connect(version="1.0,1.1")
        self.assertEqual(f.cmd, "ERROR")
        self.assertIn("Version unsupported", f.headers.get("message", "") + f.body.decode())
        self.assertEqual(c.connect(version="1.1,1.2").cmd, "CONNECTED")

    def test_stomp_command_and_version_list(self):
        c = self.conn(connect=False)
        f = c.connect(command="STOMP", version="1.0,1.1,1.2")
        self.assertEqual(f.cmd, "CONNECTED")

    def test_subscribe_errors_keep_connection(self):
        c = self.conn()
        for h in ([("id", "1")], [("destination", "d")]):
            c.send_frame("SUBSCRIBE", h)
            self.assertEqual(c.read_frame().cmd, "ERROR", h)
        c.subscribe("d", "dup", receipt="ok")
        c.send_frame("SUBSCRIBE", [("destination", "d2"), ("id", "dup")])
        self.assertEqual(c.read_frame().cmd, "ERROR")
        self.assert_open(c)

    def test_transactions_refused(self):
        c = self.conn()
        for cmd in ("BEGIN", "COMMIT", "ABORT"):
            c.send_frame(cmd, [("transaction", "t1")])
            f = c.read_frame()
            self.assertEqual(f.cmd, "ERROR")
            self.assertIn("transactions not supported",
                          f.headers.get("message", "") + f.body.decode())
        self.assert_open(c)

    def test_ack_nack_ignored(self):
        c = self.conn()
        c.send_frame("ACK", [("id", "1")])
        c.send_frame("NACK", [("id", "2")])
        self.assert_open(c)

    def test_bad_escape_closes(self):
        c = self.conn()
        c.send(b"SEND\ndestination:a\\tb\n\nx\0")
        self.assert_error_then_close(c, "")

    def test_missing_nul_closes(self):
        c = self.conn()
        c.send(b"SEND\ndestination:a\ncontent-length:1\n\nxy\0")
        self.assert_error_then_close(c, "")

    def test_unknown_command_closes(self):
        c = self.conn()
        c.send(b"FROB\n\n\0")
        self.assert_error_then_close(c, "")


class Limits(StompBase):
    ARGS = ("--max-frame-size", "2K", "--max-headers", "8", "--max-header-line", "128")

    def test_frame_too_big(self):
        c = self.conn()
        c.send_frame("SEND", [("destination", "a")], "x" * 4096)
        self.assert_error_then_close(c, "")

    def test_frame_too_big_without_content_length(self):
        c = self.conn()
        c.send(b"SEND\ndestination:a\n\n" + b"x" * 4096)
        self.assert_error_then_close(c, "")

    def test_too_many_headers(self):
        c = self.conn()
        c.send_frame("SEND", [("destination", "a")] + [("h%d" % i, "v") for i in range(12)], "x")
        self.assert_error_then_close(c, "")

    def test_header_line_too_long(self):
        c = self.conn()
        c.send_frame("SEND", [("destination", "a"), ("long", "v" * 300)], "x")
        self.assert_error_then_close(c, "")

    def test_within_limits_works(self):
        c = self.conn()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        self.assertIn("result", c.call("Host.ping2"))


class FlowId(StompBase):
    ARGS = ("--log-level", "debug")

    def test_correlation_id_in_log(self):
        c = self.conn()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        c.call("Host.ping2", headers=[("ovirtCorrelationId", "flow-4711")])
        self.assertTrue(self.d.wait_log(r"flow_id=flow-4711", timeout=5))


if __name__ == "__main__":
    unittest.main()
