"""vdsmd as a process: --help/--version, config errors, signals, connection
limit, slow readers, ephemeral port logging."""

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import vdsmtest as vt


def run(*args, timeout=10):
    return subprocess.run([vt.VDSMD_BIN] + list(args), capture_output=True, timeout=timeout)


class Cli(unittest.TestCase):
    def test_help_lists_every_key(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        out = r.stdout.decode()
        for key in ("listen", "port", "tls", "cert_file", "key_file", "ca_file", "codec",
                    "log_level", "log_file", "max_connections", "max_frame_size",
                    "libvirt_uri", "vm_sample_interval", "storage_root", "workers",
                    "detect_timeout"):
            self.assertIn(key, out)
            self.assertIn("--" + key.replace("_", "-"), out)

    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout.decode(), r"^vdsmd \d+\.\d+")

    def test_config_errors_name_file_and_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write("# ok\nport = 1\nfrobnicate = yes\n")
        try:
            r = run("--config", f.name)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(('%s:3: unknown key "frobnicate"' % f.name).encode(), r.stderr)
            with open(f.name, "w") as g:
                g.write("[vdsmd]\nport = many\n")
            r = run("--config", f.name)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(("%s:2: port: bad value" % f.name).encode(), r.stderr)
        finally:
            os.unlink(f.name)

    def test_bad_flag(self):
        r = run("--config", "/dev/null", "--max-connections", "lots")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"--max-connections", r.stderr)

    def test_unknown_codec(self):
        r = run("--config", "/dev/null", "--codec", "xml")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"unknown codec", r.stderr)

    def test_file_values_and_flag_precedence(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write("listen = 127.0.0.1\nport = 1\ntls = off\ncodec = fallback\n")
        try:
            with vt.Daemon("--config", f.name, "--port", "0") as d:
                self.assertTrue(d.wait_log(r"listening on 127\.0\.0\.1:\d+ \(tls off, codec fallback\)"))
                c = d.stomp()
                c.connect()
                c.subscribe(vt.RESPONSES, "r", receipt="s")
                self.assertIn("result", c.call("Host.ping2"))
                c.close()
        finally:
            os.unlink(f.name)


class Process(unittest.TestCase):
    def test_first_info_line_names_bound_port(self):
        with vt.Daemon() as d:
            first = [l for l in d.log_lines() if " INFO " in l][0]
            self.assertRegex(first, r"listening on 127\.0\.0\.1:%d\b" % d.port)

    def test_ipv6_loopback(self):
        try:
            with socket.socket(socket.AF_INET6) as t:
                t.bind(("::1", 0))
        except OSError:
            self.skipTest("no IPv6 loopback on this machine")
        with vt.Daemon(host="::1") as d:
            self.assertTrue(d.wait_log(r"listening on \[::1\]:%d " % d.port))
            c = d.stomp()
            self.assertEqual(c.connect().cmd, "CONNECTED")
            # lastClientIface over IPv6: the device holding ::1
            c.subscribe(vt.RESPONSES, "r")
            caps = vt.call_ready(c, "Host.getCapabilities")["result"]
            self.assertEqual(caps["lastClientIface"], "lo")
            c.close()

    def test_sigterm_with_clients_exits_zero(self):
        d = vt.Daemon()
        try:
            c = d.stomp()
            c.connect()
            h = d.sock()
            t0 = time.monotonic()
            self.assertEqual(d.stop(signal.SIGTERM), 0)
            self.assertLess(time.monotonic() - t0, 5)
            self.assertEqual(c.read_eof(), [])
            self.assertTrue(vt.wait_closed(h, 1))
            c.close()
            h.close()
        finally:
            d.__exit__(None, None, None)

    def test_sigint_exits_zero(self):
        d = vt.Daemon()
        try:
            self.assertEqual(d.stop(signal.SIGINT), 0)
        finally:
            d.__exit__(None, None, None)

    def test_sighup_reopens_log_file(self):
        tmp = tempfile.mkdtemp(prefix="vdsmtest-log-")
        log = os.path.join(tmp, "vdsmd.log")
        d = vt.Daemon("--log-file", log, start=False)
        d.proc = subprocess.Popen(d.command(), stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            port = None
            while port is None and time.monotonic() < deadline:
                if os.path.exists(log):
                    with open(log) as f:
                        m = vt.LISTEN_RE.search(f.read())
                    if m:
                        port = int(m.group(2))
                time.sleep(0.05)
            self.assertIsNotNone(port)
            os.rename(log, log + ".1")
            d.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 5
            while not os.path.exists(log) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.1)
            with open(log) as f:
                self.assertIn("log file reopened", f.read())
        finally:
            d.proc.send_signal(signal.SIGTERM)
            self.assertEqual(d.proc.wait(10), 0)
            d.proc = None
            d.__exit__(None, None, None)

    def test_connection_limit(self):
        with vt.Daemon("--max-connections", "2") as d:
            a, b = d.stomp(), d.stomp()
            a.connect()
            b.connect()
            c = d.sock()
            self.assertTrue(vt.wait_closed(c, 5))
            self.assertTrue(d.wait_log(r"connection limit 2 reached", 5))
            self.assertEqual(a.connect().cmd, "CONNECTED")  # others unaffected
            a.close()
            b.close()
            c.close()

    def test_slow_reader_closed_others_unaffected(self):
        with vt.Daemon("--max-output", "64K") as d:
            slow = socket.socket()
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(("127.0.0.1", d.port))
            slow.sendall(vt.frame("CONNECT", [("accept-version", "1.2")]) +
                         vt.frame("SUBSCRIBE", [("destination", vt.RESPONSES), ("id", "r")]))
            batch = json.dumps([{"jsonrpc": "2.0", "method": "Host.ping2", "id": i}
                                for i in range(1000)])
            f = vt.frame("SEND", [("destination", vt.REQUESTS)], batch)
            try:
                for _ in range(300):  # ~10 MB of responses never read
                    slow.sendall(f)
                    if d.wait_log(r"closing slow reader", 0.001):
                        break
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.assertTrue(d.wait_log(r"output pending \(max_output 65536\), closing slow reader", 10))
            other = d.stomp()
            other.connect()
            other.subscribe(vt.RESPONSES, "r", receipt="s")
            self.assertIn("result", other.call("Host.ping2"))
            other.close()
            slow.close()


    def test_slow_subscriber_loses_messages_not_connection(self):
        # Fan-out (events, forwarded SENDs) is dropped for a subscriber whose
        # output is over half of max_output; the connection stays open.
        with vt.Daemon("--max-output", "1M") as d:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", d.port))
            slow = vt.Conn(s)
            slow.connect()
            # (not jms.queue.events: clients may not SEND there, PROTOCOL.md 2)
            slow.subscribe("jms.topic.fanout", "ev", receipt="r")
            p = d.stomp()
            p.connect()
            for _ in range(300):  # ~19 MB the subscriber never reads
                p.send_frame("SEND", [("destination", "jms.topic.fanout")], "x" * 65536)
            p.send_frame("SUBSCRIBE", [("destination", "z"), ("id", "z"), ("receipt", "done")])
            self.assertEqual(p.read_frame().headers["receipt-id"], "done")
            metrics = d.http("GET", "/metrics")[2].decode()
            dropped = int(re.search(r"\nvdsmd_stomp_messages_dropped_total (\d+)", metrics).group(1))
            self.assertGreater(dropped, 0)
            self.assertIn('reason="output_overflow"} 0', metrics)
            got = 0
            try:
                while True:
                    f = slow.read_frame(timeout=2)
                    self.assertEqual(f.cmd, "MESSAGE")
                    got += 1
            except TimeoutError:
                pass
            self.assertEqual(got + dropped, 300)
            slow.send_frame("UNSUBSCRIBE", [("id", "ev"), ("receipt", "still-open")])
            self.assertEqual(slow.read_frame().headers["receipt-id"], "still-open")
            slow.close()
            p.close()


if __name__ == "__main__":
    unittest.main()
