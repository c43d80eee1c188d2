"""Interoperability matrix: real third-party STOMP client libraries against a
real vdsmd (issue 8).  Each client script under tests/interop/ connects,
subscribes, sends Host.ping2 and VM.getStats with a reply-to, gets the
responses, gets the |virt|VM_status| event of a VM this test pauses through
its own connection, and disconnects.  A recording proxy sits between client
and daemon, so every case also asserts the client's wire quirk it exists for
(STOMP instead of CONNECT, accept-version lists, SEND with or without
content-length, heart-beats, DISCONNECT with or without receipt) and that the
server never answered with an ERROR frame.

Clients: Debian python3-stomp (stomp.py), ruby-stomp, libnet-stomp-perl and
npm @stomp/stompjs over @stomp/tcp-wrapper (installed into build/npm by
tests/interop/setup.sh at test time with Debian's npm; when it cannot be had
here - no node/npm, the npm registry unreachable - the stompjs cases are
SKIPPED with setup.sh's reason; any other setup failure fails them)."""

import os
import queue
import shutil
import socket
import subprocess
import threading
import time
import unittest

import vdsmtest as vt

INTEROP = os.path.join(vt.REPO, "tests", "interop")
FLEET_URI = "test://" + os.path.join(vt.REPO, "examples", "fleet.xml")
NPM_PREFIX = os.path.join(vt.VDSMD_BUILD, "npm")
# VMs of examples/fleet.xml that start Up: one per case, so no case depends
# on another's pause.
UP_VMS = ["6d5f0000-0000-4000-8000-000000000000", "6d5f0001-0001-4001-8007-000000000001",
          "6d5f0003-0003-4003-8015-000000000003", "6d5f0004-0004-4004-801c-000000000004",
          "6d5f0005-0005-4005-8023-000000000005", "6d5f0007-0007-4007-8031-000000000007",
          "6d5f0008-0008-4008-8038-000000000008", "6d5f0009-0009-4009-803f-000000000009"]
CLIENT_TIMEOUT = 30


class Frames(list):
    """Frames of one direction; .eols counts the heart-beat EOLs between them."""
    eols = 0


def parse_frames(data):
    """Split a recorded byte stream into (command, headers, body) frames
    (heart-beat EOLs skipped and counted; first header occurrence wins; no
    unescaping)."""
    frames = Frames()
    i = 0
    while True:
        while data[i:i + 1] in (b"\n", b"\r") and i < len(data):
            frames.eols += data[i:i + 1] == b"\n"
            i += 1
        if i >= len(data):
            return frames
        end = data.find(b"\n\n", i)
        end_crlf = data.find(b"\r\n\r\n", i)
        if end_crlf >= 0 and (end < 0 or end_crlf < end):
            hdr_end, body = end_crlf, end_crlf + 4
        elif end >= 0:
            hdr_end, body = end, end + 2
        else:
            return frames
        lines = data[i:hdr_end].decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers.setdefault(k, v)
        if "content-length" in headers:
            stop = body + int(headers["content-length"])
        else:
            stop = data.find(b"\0", body)
            if stop < 0:
                return frames
        frames.append((lines[0], headers, data[body:stop]))
        i = stop + 1


class Proxy:
    """A one-connection TCP relay that records both directions."""

    def __init__(self, port):
        self.upstream = port
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.c2s = bytearray()
        self.s2c = bytearray()
        self.server_closed = threading.Event()   # daemon closed its side
        self.client_closed = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _pump(self, src, dst, rec, done):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                rec += data
                dst.sendall(data)
        except OSError:
            pass
        done.set()
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _run(self):
        self.lsock.settimeout(CLIENT_TIMEOUT)
        try:
            cli, _ = self.lsock.accept()
        except OSError:
            return
        srv = socket.create_connection(("127.0.0.1", self.upstream))
        t = threading.Thread(target=self._pump, args=(srv, cli, self.s2c, self.server_closed),
                             daemon=True)
        t.start()
        self._pump(cli, srv, self.c2s, self.client_closed)
        t.join(CLIENT_TIMEOUT)
        cli.close()
        srv.close()

    def close(self):
        self.lsock.close()
        self.thread.join(CLIENT_TIMEOUT)


class Matrix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = vt.Daemon(libvirt_uri=FLEET_URI)
        if not cls.d.wait_ready():
            cls.d.stop()
            raise RuntimeError("vdsmd not ready")
        cls.c = cls.d.stomp()
        cls.c.connect()
        cls.c.subscribe(vt.RESPONSES, "r", receipt="r1")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()
        shutil.rmtree(cls.d.tmp, ignore_errors=True)

    def run_client(self, argv, vm, mode=None, env=None):
        """Run one client script through a recording proxy; returns
        (proxy, {"RESP": [...], "EVENT": [...]}) after asserting the common
        script (responses, event, clean exit)."""
        proxy = Proxy(self.d.port)
        p = subprocess.Popen(argv + ["127.0.0.1", str(proxy.port), vm] + ([mode] if mode else []),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, env=env, cwd=INTEROP)
        lines = queue.Queue()

        def reader():
            for raw in p.stdout:
                lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
            lines.put(None)

        threading.Thread(target=reader, daemon=True).start()
        out = {"RESP": [], "EVENT": []}
        seen = []

        def expect(word):
            while True:
                try:
                    ln = lines.get(timeout=CLIENT_TIMEOUT)
                except queue.Empty:
                    ln = None
                if ln is None:
                    p.kill()
                    err = p.stderr.read().decode("utf-8", "replace")
                    self.fail("%s: waited for %s, got only %r; stderr:\n%s"
                              % (argv[-1], word, seen, err))
                seen.append(ln)
                kw, _, rest = ln.partition(" ")
                if kw in out:
                    out[kw].append(vt.json.loads(rest))
                if kw == word:
                    return

        try:
            expect("READY")
            r = self.c.call("VM.pause", {"vmID": vm})
            self.assertEqual(r.get("result"), {"vmList": {}}, r)
            expect("EVENT")
            expect("BYE")
            rc = p.wait(CLIENT_TIMEOUT)
            err = p.stderr.read().decode("utf-8", "replace")
            self.assertEqual(rc, 0, err)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
            proxy.close()

        ping, stats = out["RESP"]
        self.assertEqual(ping, {"jsonrpc": "2.0", "id": "ping", "result": True})
        self.assertEqual(stats["id"], "stats")
        self.assertEqual(len(stats["result"]), 1, stats)
        self.assertEqual(stats["result"][0]["vmId"], vm)
        self.assertEqual(stats["result"][0]["status"], "Up")
        ev, = out["EVENT"]
        self.assertEqual(ev["jsonrpc"], "2.0")
        self.assertEqual(ev["method"], "|virt|VM_status|" + vm)
        self.assertNotIn("id", ev)
        self.assertEqual(ev["params"][vm]["status"], "Paused")
        self.assertIsInstance(ev["params"]["notify_time"], int)

        # the wire: no ERROR from the server, DISCONNECT last, connection
        # closed on both sides
        self.assertTrue(proxy.server_closed.wait(5), "daemon kept the connection open")
        sent = parse_frames(bytes(proxy.c2s))
        got = parse_frames(bytes(proxy.s2c))
        self.assertEqual([f for f in got if f[0] == "ERROR"], [])
        self.assertEqual(got[0][0], "CONNECTED")
        self.assertEqual(got[0][1]["version"], "1.2")
        self.assertEqual(sent[-1][0], "DISCONNECT")
        for f in got:
            if f[0] == "MESSAGE":
                self.assertIn("message-id", f[1])
                self.assertEqual(int(f[1]["content-length"]), len(f[2]))
        receipt = sent[-1][1].get("receipt")
        if receipt is not None:
            self.assertEqual(got[-1][0], "RECEIPT")
            self.assertEqual(got[-1][1]["receipt-id"], receipt)
        sends = [f for f in sent if f[0] == "SEND"]
        self.assertEqual(len(sends), 2)
        for f in sends:
            self.assertEqual(f[1]["destination"], vt.REQUESTS)
            self.assertTrue(f[1]["reply-to"].startswith("jms.topic.interop."))
        return sent, got

    def test_stomppy(self):
        """stomp.py opens with STOMP (not CONNECT) and a receipt on DISCONNECT."""
        sent, got = self.run_client(["/usr/bin/python3", "stomppy_client.py"], UP_VMS[0])
        self.assertEqual(sent[0][0], "STOMP")
        self.assertEqual(sent[0][1]["accept-version"], "1.2")
        self.assertIn("receipt", sent[-1][1])
        self.assertTrue(all("content-length" in f[1] for f in sent if f[0] == "SEND"))

    def test_stomppy_no_content_length(self):
        """stomp.py with auto_content_length=False: SEND bodies end at the NUL."""
        sent, got = self.run_client(["/usr/bin/python3", "stomppy_client.py"], UP_VMS[1],
                                    mode="nocl")
        self.assertEqual(sent[0][0], "STOMP")
        self.assertTrue(all("content-length" not in f[1] for f in sent if f[0] == "SEND"))

    def test_ruby(self):
        """ruby-stomp offers accept-version 1.0,1.1,1.2 and adds content-length."""
        sent, got = self.run_client(["ruby", "ruby_client.rb"], UP_VMS[2])
        self.assertEqual(sent[0][0], "CONNECT")
        self.assertEqual(sent[0][1]["accept-version"], "1.0,1.1,1.2")
        # content-length (0) and content-type on every frame, CONNECT included
        self.assertTrue(all("content-length" in f[1] and "content-type" in f[1] for f in sent))
        self.assertTrue(all("content-length" in f[1] for f in sent if f[0] == "SEND"))

    def test_ruby_default_content_type(self):
        """ruby-stomp's own content-type (text/plain; charset=UTF-8) on a
        request: decoded with the JSON codec (VDSM ignores content-type)."""
        sent, got = self.run_client(["ruby", "ruby_client.rb"], UP_VMS[6], mode="noct")
        self.assertTrue(all(f[1]["content-type"].startswith("text/plain")
                            for f in sent if f[0] == "SEND"))

    def test_perl(self):
        """Net::Stomp sends SEND without content-length and DISCONNECT without
        a receipt (the daemon must still close cleanly)."""
        sent, got = self.run_client(["perl", "perl_client.pl"], UP_VMS[3])
        self.assertEqual(sent[0][0], "CONNECT")
        self.assertTrue(all("content-length" not in f[1] for f in sent if f[0] == "SEND"))
        self.assertNotIn("receipt", sent[-1][1])

    def test_perl_content_length(self):
        """Net::Stomp with bytes_message: SEND with content-length."""
        sent, got = self.run_client(["perl", "perl_client.pl"], UP_VMS[5], mode="cl")
        self.assertTrue(all("content-length" in f[1] for f in sent if f[0] == "SEND"))

    def npm_setup(self):
        r = subprocess.run([os.path.join(INTEROP, "setup.sh"), "npm"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=dict(os.environ, NPM_PREFIX=NPM_PREFIX), timeout=300)
        out = r.stdout.decode("utf-8", "replace")
        if r.returncode == 3:  # a piece cannot be had here: say which
            self.skipTest(out.strip().splitlines()[-1] if out.strip() else "npm setup unavailable")
        self.assertEqual(r.returncode, 0, "tests/interop/setup.sh npm failed:\n" + out)

    def test_stompjs(self):
        """@stomp/stompjs over @stomp/tcp-wrapper: accept-version 1.2,1.1,1.0,
        heart-beat 10000,10000, DISCONNECT with a receipt."""
        self.npm_setup()
        sent, got = self.run_client(["node", "stompjs_client.cjs"], UP_VMS[4],
                                    env=dict(os.environ, NPM_PREFIX=NPM_PREFIX))
        self.assertEqual(sent[0][0], "CONNECT")
        self.assertEqual(sent[0][1]["accept-version"], "1.2,1.1,1.0")
        self.assertEqual(sent[0][1]["heart-beat"], "10000,10000")
        self.assertEqual(got[0][1]["heart-beat"], "10000,10000")
        self.assertIn("receipt", sent[-1][1])

    def test_stompjs_heartbeats(self):
        """stompjs with heart-beat 1000,1000 idling 3.5 s: the server's
        heart-beats keep stompjs from dropping it, and the client's keep the
        server from closing (both every second)."""
        self.npm_setup()
        sent, got = self.run_client(["node", "stompjs_client.cjs"], UP_VMS[7], mode="hb",
                                    env=dict(os.environ, NPM_PREFIX=NPM_PREFIX))
        self.assertEqual(sent[0][1]["heart-beat"], "1000,1000")
        self.assertEqual(got[0][1]["heart-beat"], "1000,1000")
        # 3.5 s idle at 1 s intervals: at least 2 beats each way
        self.assertGreaterEqual(sent.eols, 2)
        self.assertGreaterEqual(got.eols, 2)


if __name__ == "__main__":
    unittest.main()
