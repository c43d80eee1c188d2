"""Interop with Debian's python3-stomp (stomp.py 8), which opens with STOMP."""

import json
import queue
import time
import unittest

import stomp

import vdsmtest as vt


class Listener(stomp.ConnectionListener):
    def __init__(self):
        self.q = queue.Queue()

    def on_message(self, frame):
        self.q.put(frame)

    def on_error(self, frame):
        self.q.put(("ERROR", frame))


class StompPy(unittest.TestCase):
    def test_connect_subscribe_send_and_rpc(self):
        with vt.Daemon() as d:
            conn = stomp.Connection12([("127.0.0.1", d.port)], heartbeats=(0, 0))
            lst = Listener()
            conn.set_listener("t", lst)
            conn.connect(wait=True)
            try:
                conn.subscribe(destination="jms.topic.chat", id="1", ack="auto")
                conn.subscribe(destination=vt.RESPONSES, id="2", ack="auto")
                conn.send(destination="jms.topic.chat", body="hello vdsmd",
                          headers={"receipt": "r1"})
                f = lst.q.get(timeout=10)
                self.assertEqual(f.body, "hello vdsmd")
                self.assertEqual(f.headers["destination"], "jms.topic.chat")
                self.assertEqual(f.headers["subscription"], "1")
                self.assertIn("message-id", f.headers)
                req = {"jsonrpc": "2.0", "method": "Host.ping2", "id": "interop-1"}
                conn.send(destination=vt.REQUESTS, body=json.dumps(req),
                          content_type="application/json",
                          headers={"reply-to": vt.RESPONSES})
                f = lst.q.get(timeout=10)
                self.assertEqual(json.loads(f.body),
                                 {"jsonrpc": "2.0", "id": "interop-1", "result": True})
            finally:
                conn.disconnect()

    def test_heartbeats_keep_connection_alive(self):
        # stomp.py asks for 500 ms both ways; vdsmd raises that to 1000 ms,
        # sends "\n" when idle and expects stomp.py's heart-beats: after
        # several intervals of silence the connection still works.
        with vt.Daemon() as d:
            conn = stomp.Connection12([("127.0.0.1", d.port)], heartbeats=(500, 500))
            lst = Listener()
            conn.set_listener("t", lst)
            conn.connect(wait=True)
            try:
                conn.subscribe(destination=vt.RESPONSES, id="1", ack="auto")
                time.sleep(3.5)
                self.assertTrue(conn.is_connected())
                req = {"jsonrpc": "2.0", "method": "Host.ping2", "id": 2}
                conn.send(destination=vt.REQUESTS, body=json.dumps(req))
                f = lst.q.get(timeout=10)
                self.assertEqual(json.loads(f.body)["result"], True)
            finally:
                conn.disconnect()
            self.assertFalse(d.wait_log(r"heart-beat", timeout=0.1))


if __name__ == "__main__":
    unittest.main()
