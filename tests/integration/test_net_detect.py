"""Protocol detection on the shared port (PROTOCOL.md section 1)."""

import time
import unittest

import vdsmtest as vt


class Detect(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon("--detect-timeout", "1")

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)

    def test_stomp_after_heartbeat_eols(self):
        c = self.d.stomp()
        c.send(b"\n\r\n\n")
        f = c.connect()
        self.assertEqual(f.cmd, "CONNECTED")
        c.close()

    def test_stomp_split_in_single_bytes(self):
        c = self.d.stomp()
        for b in vt.frame("CONNECT", [("accept-version", "1.2")]):
            c.send(bytes([b]))
        self.assertEqual(c.read_frame().cmd, "CONNECTED")
        c.close()

    def test_short_first_frame_decided_at_once(self):
        # 8 bytes: VDSM waited for 11 and hung here.  Were detection to
        # wait for more bytes, the 1 s detection timeout would close the
        # connection (EOFError) instead of this ERROR answer.
        c = self.d.stomp()
        c.send(b"BEGIN\n\n\0")
        self.assertEqual(c.read_frame(timeout=5).cmd, "ERROR")
        c.close()

    def test_http(self):
        status, _, body = self.d.http("GET", "/nope")
        self.assertEqual(status, 404)

    def test_garbage_closed_and_logged(self):
        s = self.d.sock()
        s.sendall(b"\x16\x03\x01garbage that is no protocol\r\n")
        self.assertTrue(vt.wait_closed(s, 5))
        port = s.getsockname()[1]
        self.assertTrue(self.d.wait_log(r"unrecognized protocol from 127\.0\.0\.1:%d" % port, 5))
        s.close()

    def test_lowercase_command_is_not_stomp(self):
        s = self.d.sock()
        s.sendall(b"connect\n\n\0")
        self.assertTrue(vt.wait_closed(s, 5))
        s.close()

    def test_detection_timeout(self):
        s = self.d.sock()
        s.sendall(b"CONN")  # a prefix: undecided
        t0 = time.monotonic()
        self.assertTrue(vt.wait_closed(s, 8))
        self.assertGreaterEqual(time.monotonic() - t0, 0.8)
        self.assertTrue(self.d.wait_log(r"no protocol detected", 5))
        s.close()

    def test_silent_connection_times_out(self):
        s = self.d.sock()
        self.assertTrue(vt.wait_closed(s, 8))
        s.close()


if __name__ == "__main__":
    unittest.main()
