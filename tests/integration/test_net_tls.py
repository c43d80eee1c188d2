"""TLS with client certificates (PROTOCOL.md section 1), PKI from
examples/make-pki.sh."""

import os
import shutil
import ssl
import subprocess
import tempfile
import unittest
import warnings

import vdsmtest as vt


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = vt.make_pki(tempfile.mkdtemp(prefix="vdsmtest-pki-"))
        cls.d = vt.Daemon(tls=True, pki=cls.pki)

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)
        shutil.rmtree(cls.pki, ignore_errors=True)

    def refused(self, **kw):
        """The handshake or the first exchange fails (TLS 1.3 reports a
        rejected client certificate only after the client's handshake)."""
        try:
            s = self.d.tls_sock(**kw)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True
        try:
            s.sendall(vt.frame("CONNECT", [("accept-version", "1.2")]))
            return vt.wait_closed(s, 5)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True
        finally:
            s.close()

    def test_good_client_stomp(self):
        s = self.d.tls_sock()
        self.assertIn(s.version(), ("TLSv1.2", "TLSv1.3"))
        c = vt.Conn(s)
        self.assertEqual(c.connect().cmd, "CONNECTED")
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        self.assertIn("result", c.call("Host.ping2"))
        c.close()

    def test_burst_of_records_all_answered(self):
        """300 requests, one TLS record each, sent before any reply is read:
        the daemon reads ahead (several records per read()) and must come
        back for the records it holds once it stops reading (16 reads per
        wake-up, output backlog), which no socket readiness shows."""
        s = self.d.tls_sock()
        c = vt.Conn(s)
        c.connect()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        ids = {c.request("Host.ping2") for _ in range(300)}
        while ids:
            f = c.read_frame()
            self.assertEqual(f.cmd, "MESSAGE")
            resp = f.json()
            self.assertIn("result", resp)
            ids.remove(resp["id"])
        c.close()

    def test_disconnect_ends_cleanly(self):
        s = self.d.tls_sock()
        c = vt.Conn(s)
        c.connect()
        c.send_frame("DISCONNECT", [("receipt", "bye")])
        self.assertEqual(c.read_frame().headers["receipt-id"], "bye")
        self.assertEqual(s.recv(100), b"")  # close_notify: clean EOF, no SSLError
        s.close()

    def test_good_client_http(self):
        s = self.d.tls_sock()
        status, _, _ = self.d.http("GET", "/metrics", sock=s)
        self.assertEqual(status, 200)
        s.close()

    def test_tls12_client(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = False
        ctx.load_verify_locations(os.path.join(self.pki, "ca.crt"))
        ctx.load_cert_chain(os.path.join(self.pki, "client.crt"),
                            os.path.join(self.pki, "client.key"))
        s = ctx.wrap_socket(self.d.sock())
        self.assertEqual(s.version(), "TLSv1.2")
        c = vt.Conn(s)
        self.assertEqual(c.connect().cmd, "CONNECTED")
        c.close()

    def test_tls11_refused(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer TLS 1.1
            ctx.minimum_version = ssl.TLSVersion.TLSv1_1
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        with self.assertRaises((ssl.SSLError, ConnectionResetError)):
            ctx.wrap_socket(self.d.sock())
        self.assertTrue(self.d.wait_log(r"TLS handshake with .* failed.*(version|protocol)", 5))

    def test_no_client_cert_refused(self):
        self.assertTrue(self.refused(cert=False))
        self.assertTrue(self.d.wait_log(r"TLS handshake with .* failed", 5))

    def test_wrong_ca_client_refused(self):
        s = None
        try:
            s = vt.tls_connect(self.d.host, self.d.port, self.pki, client="wrong-client")
            s.sendall(vt.frame("CONNECT", [("accept-version", "1.2")]))
            self.assertTrue(vt.wait_closed(s, 5))
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            pass
        finally:
            if s:
                s.close()

    def test_plaintext_refused(self):
        c = self.d.stomp()
        c.send(vt.frame("CONNECT", [("accept-version", "1.2")]))
        self.assertEqual(c.read_eof(), [])
        self.assertTrue(self.d.wait_log(r"plaintext connection from 127\.0\.0\.1:\d+ on the TLS port refused", 5))
        c.close()
        status = None
        try:
            status = self.d.http("GET", "/health")[0]
        except (EOFError, ConnectionResetError):
            pass
        self.assertIsNone(status)

    def test_handshake_timeout(self):
        with vt.Daemon("--handshake-timeout", "1", tls=True, pki=self.pki) as d:
            s = d.sock()
            self.assertTrue(vt.wait_closed(s, 8))
            self.assertTrue(d.wait_log(r"TLS handshake timed out", 5))
            s.close()

    def test_missing_file_refuses_start(self):
        for key in ("--cert-file", "--key-file", "--ca-file"):
            missing = os.path.join(self.pki, "missing.pem")
            r = subprocess.run([vt.VDSMD_BIN, "--config", "/dev/null", "--listen", "127.0.0.1",
                                "--port", "0", "--tls", "on",
                                "--cert-file", os.path.join(self.pki, "server.crt"),
                                "--key-file", os.path.join(self.pki, "server.key"),
                                "--ca-file", os.path.join(self.pki, "ca.crt"), key, missing],
                               capture_output=True, timeout=10)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(missing.encode(), r.stderr)
            self.assertIn(key[2:].replace("-", "_").encode(), r.stderr)


if __name__ == "__main__":
    unittest.main()
