"""PROTOCOL.md 2 "one frame per write", checked with a client that reads the
way the engine's Java library does (libclient.py): one TLS record decrypted
per wake-up, one STOMP frame per wake-up, bytes already buffered wait for
the next wake-up.  1000 calls with several in flight complete over plaintext
and TLS well within one heart-beat interval, and the replies of VM.pause,
VM.cont, VM.shutdown and VM.destroy come before the VM_status events they
cause.  (The engine's own load, all calls at once, is test_wire_library.)"""

import json
import os
import shutil
import tempfile
import time
import unittest

import libclient
import vdsmtest as vt

CALLS = 1000
WINDOW = 16               # calls in flight at once
HEART_BEAT = 15.0         # the engine's heart-beat interval (seconds)
BUDGET = HEART_BEAT / 2   # every reply handled well before a heart-beat
FLEET_URI = "test://" + os.path.join(vt.REPO, "examples", "fleet.xml")


def setUpModule():
    global PKI
    PKI = vt.make_pki(tempfile.mkdtemp(prefix="vdsm-wire-pki-"))


def tearDownModule():
    shutil.rmtree(PKI, ignore_errors=True)


class ManyCalls(unittest.TestCase):
    """CALLS Host.ping2 calls, WINDOW in flight, requests sent in bursts."""

    def run_calls(self, tls):
        with vt.Daemon(tls=tls, pki=PKI if tls else None) as d:
            c = libclient.tls_client(d, PKI) if tls else libclient.plain_client(d)
            try:
                c.connect()
                c.subscribe(vt.RESPONSES, "r")
                start = time.monotonic()
                deadline = start + BUDGET
                sent = answered = 0
                outstanding = set()
                while answered < CALLS:
                    if len(outstanding) <= WINDOW // 2 and sent < CALLS:
                        burst = b""
                        while len(outstanding) < WINDOW and sent < CALLS:
                            burst += c.request("Host.ping2", {}, sent)
                            outstanding.add(sent)
                            sent += 1
                        c.send(burst)
                    f = c.next_frame(deadline)
                    if f is None:
                        break
                    self.assertEqual(f.cmd, "MESSAGE", f)
                    r = json.loads(f.body)
                    self.assertIs(r.get("result"), True, r)
                    outstanding.discard(r["id"])
                    answered += 1
                took = time.monotonic() - start
                self.assertEqual(answered, CALLS,
                                 "%d of %d replies were not handled within %.1f s (%s): "
                                 "they arrived packed with an earlier frame and wait "
                                 "for a heart-beat" % (CALLS - answered, CALLS, BUDGET,
                                                       "TLS" if tls else "plaintext"))
                self.assertLess(took, BUDGET)
            finally:
                c.close()

    def test_plaintext(self):
        self.run_calls(False)

    def test_tls(self):
        self.run_calls(True)


class PeerGone(unittest.TestCase):
    """A TLS client that sends many requests and leaves without reading:
    the frame writes after it is gone fail (EPIPE) and close the
    connection; the daemon keeps serving (a 0 from SSL_write once made the
    write loop spin)."""

    def test_tls_client_leaves_mid_output(self):
        with vt.Daemon(tls=True, pki=PKI) as d:
            for _ in range(3):
                s = vt.tls_connect(d.host, d.port, PKI)
                s.sendall(vt.frame("CONNECT", [("accept-version", "1.2"), ("host", "x")],
                                   content_length=False) +
                          vt.frame("SUBSCRIBE", [("destination", vt.RESPONSES), ("id", "r")]) +
                          b"".join(libclient.LibraryClient.request("Host.ping2", {}, i)
                                   for i in range(300)))
                s.close()  # unread replies: the kernel answers with a reset
            time.sleep(0.5)
            c = vt.Conn(vt.tls_connect(d.host, d.port, PKI))
            c.connect()
            c.subscribe(vt.RESPONSES, "r")
            self.assertIs(c.call("Host.ping2", timeout=5).get("result"), True)
            c.close()


class LifecycleReplies(unittest.TestCase):
    """The engine's one connection subscribes to replies and events: the
    reply of a lifecycle verb comes first and is not held back behind the
    VM_status event the verb causes."""

    VM = "6d5f0001-0001-4001-8007-000000000001"

    def check(self, tls):
        with vt.Daemon(tls=tls, pki=PKI if tls else None, libvirt_uri=FLEET_URI) as d:
            d.wait_ready()
            c = libclient.tls_client(d, PKI) if tls else libclient.plain_client(d)
            try:
                c.connect()
                c.subscribe(vt.RESPONSES, "r")
                c.subscribe(vt.EVENTS, "e")
                steps = [("VM.pause", {}, "Paused"), ("VM.cont", {}, "Up"),
                         ("VM.shutdown", {"delay": "0", "message": "bye"}, "Down"),
                         ("VM.destroy", {}, None)]
                for i, (verb, params, status) in enumerate(steps):
                    p = dict(params, vmID=self.VM)
                    c.send(c.request(verb, p, i))
                    deadline = time.monotonic() + 5.0
                    order = []
                    while time.monotonic() < deadline:
                        if "reply" in order and (status is None or status in order):
                            break
                        f = c.next_frame(deadline)
                        if f is None:
                            break
                        msg = json.loads(f.body)
                        if msg.get("id") == i:
                            # VM.pause/VM.cont answer a map (as VDSM), the others true
                            if verb in ("VM.pause", "VM.cont"):
                                self.assertIsInstance(msg.get("result"), dict, msg)
                            else:
                                self.assertIs(msg.get("result"), True, msg)
                            order.append("reply")
                        elif msg.get("method") == "|virt|VM_status|" + self.VM:
                            order.append(msg["params"][self.VM]["status"])
                    self.assertIn("reply", order, "%s: reply not handled within 5 s "
                                  "(frames handled: %s)" % (verb, order))
                    if status is not None:
                        self.assertIn(status, order, "%s: VM_status %s not handled within "
                                      "5 s (frames handled: %s)" % (verb, status, order))
                        self.assertLess(order.index("reply"), order.index(status),
                                        "%s: event before its reply" % verb)
            finally:
                c.close()

    def test_plaintext(self):
        self.check(False)

    def test_tls(self):
        self.check(True)


if __name__ == "__main__":
    unittest.main()
