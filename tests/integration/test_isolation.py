"""Isolation between clients (PROTOCOL.md section 2, issue 17): nobody can
forge a reply or an event, nobody receives another client's replies, not even
through a prefix subscription; a reply goes once to the requester's first
subscription on its reply destination; MESSAGE frames of client and
client-individual subscriptions carry `ack` (checked with Debian's
python3-stomp, which ACKs by that header)."""

import json
import queue
import re
import unittest

import stomp  # Debian's python3-stomp

import vdsmtest as vt


def metric(d, name):
    st, _, body = d.http("GET", "/metrics")
    assert st == 200, st
    m = re.search(r"^%s (\d+)$" % re.escape(name), body.decode(), re.M)
    assert m, name
    return int(m.group(1))


class Isolation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon()
        assert cls.d.wait_ready(), "vdsmd never became ready"

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)

    def conn(self):
        c = self.d.stomp()
        self.addCleanup(c.close)
        self.assertEqual(c.connect().cmd, "CONNECTED")
        return c

    def assert_nothing(self, c, tag):
        """c received nothing: its next frame is the receipt asked for now."""
        c.send_frame("SUBSCRIBE", [("destination", "x.alive"), ("id", "alive-" + tag),
                                   ("receipt", tag)])
        f = c.read_frame()
        self.assertEqual((f.cmd, f.headers.get("receipt-id")), ("RECEIPT", tag), f)

    def test_forged_replies_and_events_refused(self):
        victim, attacker = self.conn(), self.conn()
        victim.subscribe(vt.RESPONSES, "r")
        victim.subscribe(vt.EVENTS, "e")
        victim.subscribe("jms.topic.private", "p", receipt="s")
        # the victim names its own reply destination: it becomes reserved
        victim.call("Host.ping2", reply_to="jms.topic.private")
        before = metric(self.d, "vdsmd_stomp_reserved_refused_total")
        forged = json.dumps({"jsonrpc": "2.0", "id": "req-1", "result": "forged"})
        for dest in (vt.RESPONSES, vt.EVENTS, "jms.topic.private"):
            attacker.send_frame("SEND", [("destination", dest), ("receipt", "x")], forged)
            f = attacker.read_frame()
            self.assertEqual(f.cmd, "ERROR", f)
            self.assertEqual(f.headers.get("message"), "destination is reserved")
        # below a reserved destination: not forwarded into it either
        attacker.send_frame("SEND", [("destination", vt.RESPONSES + ".x")], forged)
        self.assertEqual(attacker.read_frame().headers.get("message"),
                         "Subscription not available")
        self.assert_nothing(victim, "v1")
        self.assertEqual(metric(self.d, "vdsmd_stomp_reserved_refused_total"), before + 3)
        # the attacker's connection stays usable
        attacker.subscribe(vt.RESPONSES, "mine", receipt="s2")
        self.assertIs(attacker.call("Host.ping2")["result"], True)

    def test_no_eavesdropping_on_replies(self):
        victim, spy = self.conn(), self.conn()
        for i, dest in enumerate(("jms", "jms.topic", vt.RESPONSES, "jms.queue")):
            spy.subscribe(dest, "spy%d" % i)
        spy.subscribe("jms.topic.victim", "spy-v", receipt="s")
        victim.subscribe(vt.RESPONSES, "r", receipt="s")
        for _ in range(5):
            self.assertIs(victim.call("Host.ping2")["result"], True)
        # a reply-to the spy listens on, the victim does not: nobody gets it
        before = metric(self.d, "vdsmd_stomp_replies_unrouted_total")
        victim.request("Host.ping2", reply_to="jms.topic.victim")
        self.assert_nothing(victim, "v2")
        self.assert_nothing(spy, "s2")
        self.assertEqual(metric(self.d, "vdsmd_stomp_replies_unrouted_total"), before + 1)

    def test_reply_once_with_many_subscriptions(self):
        c = self.conn()
        for i in range(50):
            c.subscribe(vt.RESPONSES, "dup%d" % i)
        c.subscribe("x.y", "last", receipt="s")
        rid = c.request("Host.ping2")
        f = c.read_frame()
        self.assertEqual(f.headers["subscription"], "dup0")
        self.assertEqual(f.json()["id"], rid)
        self.assert_nothing(c, "once")


class Listener(stomp.ConnectionListener):
    def __init__(self):
        self.q = queue.Queue()

    def on_message(self, frame):
        self.q.put(frame)

    def on_error(self, frame):
        self.q.put(("ERROR", frame))

    def on_receipt(self, frame):
        self.q.put(("RECEIPT", frame))


class StompPyAck(unittest.TestCase):
    def test_client_individual_ack(self):
        with vt.Daemon() as d:
            conn = stomp.Connection12([("127.0.0.1", d.port)], heartbeats=(0, 0))
            lst = Listener()
            conn.set_listener("t", lst)
            conn.connect(wait=True)
            try:
                for mode, dest in (("client-individual", vt.RESPONSES),
                                   ("client", "jms.topic.mine")):
                    conn.subscribe(destination=dest, id=mode, ack=mode)
                    req = {"jsonrpc": "2.0", "method": "Host.ping2", "id": mode}
                    conn.send(destination=vt.REQUESTS, body=json.dumps(req),
                              headers={"reply-to": dest})
                    f = lst.q.get(timeout=10)
                    self.assertNotIsInstance(f, tuple, f)
                    self.assertEqual(json.loads(f.body)["id"], mode)
                    self.assertEqual(f.headers["ack"], f.headers["message-id"])
                    if mode == "client":
                        conn.nack(f.headers["ack"], receipt="n-" + mode)
                    else:
                        conn.ack(f.headers["ack"], receipt="a-" + mode)
                    kind, r = lst.q.get(timeout=10)
                    self.assertEqual(kind, "RECEIPT", r)
                self.assertTrue(conn.is_connected())
            finally:
                conn.disconnect()


if __name__ == "__main__":
    unittest.main()
