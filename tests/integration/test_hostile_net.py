"""Hostile-client catalogue (issue 8), network part: hostile TLS clients
against a TLS daemon and connections past --max-connections, each run while
a well-behaved client pings (see test_hostile.py for the outcomes and
hostile.py for the shared parts), and the check that the catalogue across
both modules has at least 40 cases."""

import socket
import ssl
import time
import unittest

import vdsmtest as vt
import test_hostile
from hostile import RESP, PingedDaemon, build_table


class TlsCatalogue(PingedDaemon, unittest.TestCase):
    """Hostile TLS clients against a TLS daemon (handshake timeout 2 s)
    while a well-behaved TLS client pings."""
    ARGS = ("--handshake-timeout", "2")
    TLS = True

    def raw(self):
        s = self.d.sock()
        self.addCleanup(s.close)
        return s

    def refused(self, **kw):
        """close: the handshake fails, or (TLS 1.3) the first read after it."""
        try:
            s = vt.tls_connect(self.d.host, self.d.port, self.pki, **kw)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True
        try:
            s.sendall(vt.frame("CONNECT", [("accept-version", "1.2")]))
            return vt.wait_closed(s, 5)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True
        finally:
            s.close()

    def case_tls_handshake_stalls(self):
        """close: TCP connect, then nothing: cut at the handshake timeout."""
        s = self.raw()
        t0 = time.monotonic()
        self.assertTrue(vt.wait_closed(s, 6))
        self.assertGreater(time.monotonic() - t0, 1.5)

    def case_tls_partial_client_hello(self):
        """close: a ClientHello record header and then silence."""
        s = self.raw()
        s.sendall(b"\x16\x03\x01\x02\x00\x01")
        t0 = time.monotonic()
        self.assertTrue(vt.wait_closed(s, 6))
        self.assertGreater(time.monotonic() - t0, 1.5)

    def case_tls_client_cert_other_ca(self):
        """close: a client certificate signed by another CA."""
        self.assertTrue(self.refused(client="wrong-client"))

    def case_tls_no_client_cert(self):
        """close: no client certificate."""
        self.assertTrue(self.refused(cert=False))

    def case_tls_plaintext_stomp(self):
        """close: plaintext STOMP on the TLS port, logged."""
        s = self.raw()
        s.sendall(vt.frame("CONNECT", [("accept-version", "1.2")]))
        self.assertTrue(vt.wait_closed(s, 5))
        self.assertTrue(self.d.wait_log(r"plaintext connection from .* on the TLS port refused", 5))

    def case_tls_plaintext_http(self):
        """close: plaintext HTTP on the TLS port."""
        s = self.raw()
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(vt.wait_closed(s, 5))

    def case_tls_garbage_after_handshake(self):
        """close: a good TLS client that then speaks no protocol."""
        s = self.d.tls_sock()
        self.addCleanup(s.close)
        s.sendall(b"\x00\x01garbage")
        self.assertTrue(vt.wait_closed(s, 5))

    def case_tls_good_client_still_served(self):
        """answer: a fresh good client after all that."""
        c = vt.Conn(self.d.tls_sock())
        self.addCleanup(c.close)
        self.assertEqual(c.connect().cmd, "CONNECTED")
        c.subscribe(RESP, "r", receipt="s")
        self.assertIs(c.call("Host.ping2")["result"], True)


class LimitCatalogue(PingedDaemon, unittest.TestCase):
    """More connections than --max-connections 4 (the pinger holds one)."""
    ARGS = ("--max-connections", "4")

    def case_over_the_limit(self):
        """close: the connection past the limit is closed at once, logged;
        once one closes a new one is served."""
        held = [self.d.stomp() for _ in range(3)]
        for c in held:
            self.addCleanup(c.close)
            self.assertEqual(c.connect().cmd, "CONNECTED")
        s = self.d.sock()
        self.addCleanup(s.close)
        self.assertTrue(vt.wait_closed(s, 5))
        self.assertTrue(self.d.wait_log(r"connection limit 4 reached", 5))
        held[0].close()
        time.sleep(0.2)
        c = self.d.stomp()
        self.addCleanup(c.close)
        self.assertEqual(c.connect().cmd, "CONNECTED")

    def case_flood_past_the_limit(self):
        """close: 500 connections opened at once past the limit are all closed."""
        socks = [socket.create_connection((self.d.host, self.d.port)) for _ in range(500)]
        try:
            closed = sum(vt.wait_closed(s, 5) for s in socks)
        finally:
            for s in socks:
                s.close()
        self.assertGreaterEqual(closed, 497)


TLS_CASES = build_table(TlsCatalogue)
LIMIT_CASES = build_table(LimitCatalogue)


class TableSize(unittest.TestCase):
    def test_catalogue_has_40_cases(self):
        self.assertGreaterEqual(
            len(test_hostile.CASES) + len(TLS_CASES) + len(LIMIT_CASES), 40)


if __name__ == "__main__":
    unittest.main()
