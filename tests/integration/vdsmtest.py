"""vdsmtest - shared harness for vdsmd integration tests (stdlib only).

Start a real daemon on an ephemeral loopback port, talk STOMP or HTTP to it
over plain sockets, stop it:

    import vdsmtest as vt

    class T(unittest.TestCase):
        def test_ping(self):
            with vt.Daemon() as d:               # --port 0, tls off, temp dirs
                c = d.stomp()                    # connected socket
                c.connect()                      # CONNECT, returns CONNECTED frame
                c.subscribe("jms.topic.vdsm_responses", "s1")
                resp = c.call("Host.ping2")      # SEND + wait MESSAGE, json-decoded
                status, hdrs, body = d.http("GET", "/health")

Daemon(*extra_args, tls=False, pki=None, log_level="info", libvirt_uri=...)
  extra_args are passed to vdsmd (e.g. "--detect-timeout", "1").  The daemon
  gets --config with an empty file (no /etc), a temp storage_root, and the
  libvirt test driver.  d.port, d.log_lines() (stderr so far), d.stop()
  (SIGTERM; returns the exit status), d.wait_log(regex), d.wait_ready()
  (GET /health is 200: needed before verbs that answer 99 while starting).
Frames: frame(cmd, headers, body) -> bytes; Conn.read_frame() -> Frame
  (cmd, headers dict (first occurrence wins, unescaped), body bytes).
PKI: make_pki(dir) runs examples/make-pki.sh and returns dir.

Environment: VDSMD_BIN (default <repo>/build/vdsmd), VDSMD_BUILD.
Other helpers may append functions at the end of this file.
"""

import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

import apischema

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VDSMD_BIN = os.environ.get("VDSMD_BIN", os.path.join(REPO, "build", "vdsmd"))
VDSMD_BUILD = os.environ.get("VDSMD_BUILD", os.path.join(REPO, "build"))
LISTEN_RE = re.compile(r"listening on (\S+):(\d+)")
REQUESTS = "jms.topic.vdsm_requests"
RESPONSES = "jms.topic.vdsm_responses"
EVENTS = "jms.queue.events"
TIMEOUT = 10.0


class Daemon:
    """A vdsmd process; use as a context manager (stops it on exit)."""

    def __init__(self, *args, tls=False, pki=None, log_level="info",
                 libvirt_uri="test:///default", start=True, host="127.0.0.1"):
        self.args = list(args)
        self.tls = tls
        self.pki = pki
        self.log_level = log_level
        self.libvirt_uri = libvirt_uri
        self.proc = None
        self.port = None
        self.host = host  # listen address, also what clients connect to
        self._lines = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self.tmp = tempfile.mkdtemp(prefix="vdsmtest-")
        if start:
            self.start()

    def command(self):
        conf = os.path.join(self.tmp, "vdsmd.conf")
        if not os.path.exists(conf):
            open(conf, "w").close()
        cmd = [VDSMD_BIN, "--config", conf, "--listen", self.host, "--port", "0",
               "--log-level", self.log_level, "--log-file", "stderr",
               "--libvirt-uri", self.libvirt_uri,
               "--storage-root", os.path.join(self.tmp, "storage"),
               "--run-dir", os.path.join(self.tmp, "run"),
               "--tls", "on" if self.tls else "off",
               # the image server's fixed default port (54322) would collide
               # between daemons: tests that use it pass --image-port
               "--image-port", "0"]
        if self.tls:
            p = self.pki
            cmd += ["--cert-file", os.path.join(p, "server.crt"),
                    "--key-file", os.path.join(p, "server.key"),
                    "--ca-file", os.path.join(p, "ca.crt")]
        return cmd + self.args

    def start(self):
        os.makedirs(os.path.join(self.tmp, "storage"), exist_ok=True)
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._thread = threading.Thread(target=self._reader, daemon=True)
        self._thread.start()
        m = self.wait_log(LISTEN_RE, timeout=TIMEOUT)
        if not m:
            self.stop()
            raise RuntimeError("vdsmd did not start:\n" + "\n".join(self._lines))
        self.port = int(m.group(2))
        return self

    def wait_ready(self, timeout=TIMEOUT):
        """Poll GET /health until 200 (host and VM samples taken; verbs
        without RPC_F_ALWAYS answer code 99 before).  Returns True when ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.http("GET", "/health")[0] == 200:
                    return True
            except (OSError, EOFError):
                pass
            time.sleep(0.05)
        return False

    def _reader(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cond:
                self._lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._lines.append(None)  # EOF marker
            self._cond.notify_all()

    def log_lines(self):
        with self._lock:
            return [x for x in self._lines if x is not None]

    def wait_log(self, regex, timeout=TIMEOUT, start=0):
        """Wait for a stderr line matching regex (from line index start);
        returns the match or None on timeout / exit."""
        rx = re.compile(regex) if isinstance(regex, str) else regex
        end = time.monotonic() + timeout
        i = start
        with self._cond:
            while True:
                while i < len(self._lines):
                    line = self._lines[i]
                    i += 1
                    if line is None:
                        return None
                    m = rx.search(line)
                    if m:
                        return m
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Signal the daemon and wait; returns its exit status."""
        if not self.proc:
            return None
        signalled = self.proc.poll() is None
        if signalled:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self._thread.join(5)
        self.proc.stderr.close()
        self.proc = None
        bad = [l for l in self.log_lines() if "Sanitizer" in l or "runtime error:" in l]
        if bad:  # a sanitizer build (VDSMD_BIN) reported memory errors or UB
            raise AssertionError("vdsmd sanitizer report:\n" + "\n".join(self.log_lines()[-60:]))
        # make memcheck: a daemon stopped by SIGTERM must exit 0 (LeakSanitizer
        # reports at exit and then exits non-zero)
        if (os.environ.get("VDSMD_SANITIZER_CHECK") and sig == signal.SIGTERM
                and signalled and rc != 0):
            raise AssertionError("vdsmd exited %s after SIGTERM:\n%s" %
                                 (rc, "\n".join(self.log_lines()[-60:])))
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- clients --
    def sock(self, timeout=TIMEOUT):
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stomp(self, sock=None):
        return Conn(sock or self.sock())

    def tls_sock(self, cert=True, ca=None, pki=None):
        return tls_connect(self.host, self.port, pki or self.pki, cert=cert, ca=ca)

    def http(self, method, path, body=None, headers=None, sock=None):
        """One HTTP/1.1 request on a new (or given) socket; returns
        (status, headers dict lower-case, body bytes)."""
        s = sock or self.sock()
        try:
            s.sendall(http_request(method, path, body, headers))
            return read_http_response(s, head=(method == "HEAD"))
        finally:
            if sock is None:
                s.close()


# ---- STOMP ---------------------------------------------------------------

def _esc(v):
    return (v.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")
            .replace(":", "\\c"))


def _unesc(v):
    out, i = [], 0
    while i < len(v):
        ch = v[i]
        if ch == "\\" and i + 1 < len(v):
            out.append({"\\": "\\", "n": "\n", "r": "\r", "c": ":"}.get(v[i + 1], "?"))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def frame(cmd, headers=(), body=None, content_length=True, escape=None):
    """Encode a frame.  headers: dict or list of (name, value) pairs (a list
    may repeat names).  content-length is added when body is not None."""
    if isinstance(headers, dict):
        headers = list(headers.items())
    if escape is None:
        escape = cmd not in ("CONNECT", "CONNECTED")
    if isinstance(body, str):
        body = body.encode()
    out = [cmd]
    for k, v in headers:
        out.append("%s:%s" % (k, _esc(str(v)) if escape else v))
    if body is not None and content_length:
        out.append("content-length:%d" % len(body))
    return ("\n".join(out) + "\n\n").encode() + (body or b"") + b"\0"


class Frame:
    def __init__(self, cmd, headers, body):
        self.cmd, self.headers, self.body = cmd, headers, body

    def json(self):
        return json.loads(self.body.decode())

    def __repr__(self):
        return "Frame(%s, %r, %r)" % (self.cmd, self.headers, self.body[:200])


class Conn:
    """A STOMP connection over a (possibly TLS) socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.heartbeats = 0  # bare EOLs seen between frames
        self.skipped = []    # frames call() read past
        self._id = 0

    def send(self, data):
        self.sock.sendall(data)

    def send_frame(self, cmd, headers=(), body=None, **kw):
        self.send(frame(cmd, headers, body, **kw))

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no frame within timeout")
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("no frame within timeout")
        if not data:
            raise EOFError("connection closed")
        self.buf += data

    def read_frame(self, timeout=TIMEOUT):
        """Next frame (heart-beat EOLs skipped and counted)."""
        deadline = time.monotonic() + timeout
        while True:
            while self.buf[:1] in (b"\n", b"\r"):
                if self.buf[:2] == b"\r\n":
                    self.buf = self.buf[2:]
                elif self.buf[:1] == b"\n":
                    self.buf = self.buf[1:]
                else:
                    break
                self.heartbeats += 1
            end = self.buf.find(b"\n\n")
            end_crlf = self.buf.find(b"\r\n\r\n")
            if end_crlf >= 0 and (end < 0 or end_crlf < end):
                hdr_end, body_start = end_crlf, end_crlf + 4
            else:
                hdr_end, body_start = end, end + 2
            if hdr_end >= 0:
                lines = self.buf[:hdr_end].decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
                cmd = lines[0]
                esc = cmd not in ("CONNECT", "CONNECTED")
                headers = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    if esc:
                        k, v = _unesc(k), _unesc(v)
                    headers.setdefault(k, v)
                if "content-length" in headers:
                    n = int(headers["content-length"])
                    if len(self.buf) >= body_start + n + 1:
                        body = self.buf[body_start:body_start + n]
                        assert self.buf[body_start + n:body_start + n + 1] == b"\0", "missing NUL"
                        self.buf = self.buf[body_start + n + 1:]
                        return Frame(cmd, headers, body)
                else:
                    nul = self.buf.find(b"\0", body_start)
                    if nul >= 0:
                        body = self.buf[body_start:nul]
                        self.buf = self.buf[nul + 1:]
                        return Frame(cmd, headers, body)
            self._fill(deadline)

    def read_eof(self, timeout=TIMEOUT):
        """Read until the server closes; returns the frames seen before."""
        frames = []
        try:
            while True:
                frames.append(self.read_frame(timeout))
        except EOFError:
            return frames
        except (ConnectionResetError, ssl.SSLError, OSError) as e:
            if isinstance(e, TimeoutError):
                raise
            return frames

    def connect(self, heart_beat=None, version="1.2", command="CONNECT", host="localhost"):
        h = [("accept-version", version), ("host", host)]
        if heart_beat is not None:
            h.append(("heart-beat", heart_beat))
        self.send_frame(command, h)
        return self.read_frame()

    def subscribe(self, dest, sub_id, receipt=None, **extra):
        h = [("destination", dest), ("id", sub_id), ("ack", "auto")] + list(extra.items())
        if receipt:
            h.append(("receipt", receipt))
        self.send_frame("SUBSCRIBE", h)
        if receipt:
            f = self.read_frame()
            assert f.cmd == "RECEIPT" and f.headers.get("receipt-id") == receipt, f
            return f

    def request(self, method, params=None, req_id=None, dest=REQUESTS, reply_to=RESPONSES,
                headers=()):
        """Send a JSON-RPC request; returns its id."""
        if req_id is None:
            self._id += 1
            req_id = "req-%d" % self._id
        msg = {"jsonrpc": "2.0", "method": method, "id": req_id}
        if params is not None:
            msg["params"] = params
        h = [("destination", dest), ("content-type", "application/json")]
        if reply_to:
            h.append(("reply-to", reply_to))
        self.send_frame("SEND", h + list(headers), json.dumps(msg))
        return req_id

    def call(self, method, params=None, timeout=TIMEOUT, **kw):
        """request() then the matching MESSAGE's decoded JSON (needs a
        subscription on the reply destination).  Other frames read while
        waiting (events, other responses) are appended to self.skipped.
        A result is validated against the verb's result type in the API
        schema (apischema.py): a mismatch raises apischema.SchemaViolation."""
        rid = self.request(method, params, **kw)
        deadline = time.monotonic() + timeout
        while True:
            f = self.read_frame(max(0.01, deadline - time.monotonic()))
            if f.cmd == "MESSAGE":
                try:
                    resp = f.json()
                except ValueError:
                    resp = None
                if isinstance(resp, dict) and resp.get("id") == rid:
                    if "result" in resp and isinstance(method, str):
                        # every result checked against the API schema
                        apischema.check_response(method, resp["result"])
                    return resp
            self.skipped.append(f)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ---- HTTP -------------------------------------------------------------------

def http_request(method, path, body=None, headers=None):
    if isinstance(body, str):
        body = body.encode()
    h = {"Host": "localhost"}
    h.update(headers or {})
    if body is not None and "Content-Length" not in h:
        h["Content-Length"] = str(len(body))
    head = "%s %s HTTP/1.1\r\n" % (method, path) + "".join(
        "%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
    return head.encode() + (body or b"")


def read_http_response(sock, head=False, timeout=TIMEOUT, state=None):
    """Read one response; state (a dict) keeps leftover bytes for pipelining."""
    state = state if state is not None else {}
    buf = state.get("buf", b"")
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in buf:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        d = sock.recv(65536)
        if not d:
            raise EOFError("connection closed")
        buf += d
    hdr, _, rest = buf.partition(b"\r\n\r\n")
    lines = hdr.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = 0 if head or status == 204 else int(headers.get("content-length", "0"))
    while len(rest) < n:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        d = sock.recv(65536)
        if not d:
            raise EOFError("connection closed")
        rest += d
    state["buf"] = rest[n:]
    return status, headers, rest[:n]


# ---- TLS ----------------------------------------------------------------------

def make_pki(directory):
    """Create the test PKI (examples/make-pki.sh) in directory; returns it.
    Files: ca.crt, server.{crt,key}, client.{crt,key}, and from a second CA:
    wrong-ca.crt, wrong-client.{crt,key}."""
    subprocess.run(["sh", os.path.join(REPO, "examples", "make-pki.sh"), directory],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return directory


def tls_context(pki, cert=True, ca=None, client="client"):
    """Client context: the PKI's CA; cert=False sends no client certificate;
    client names the key pair ("client" or "wrong-client")."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca or os.path.join(pki, "ca.crt"))
    ctx.check_hostname = False
    if cert:
        ctx.load_cert_chain(os.path.join(pki, client + ".crt"), os.path.join(pki, client + ".key"))
    return ctx


def tls_connect(host, port, pki, cert=True, ca=None, client="client"):
    """TLS client socket (tls_context)."""
    ctx = tls_context(pki, cert, ca, client)
    raw = socket.create_connection((host, port), timeout=TIMEOUT)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(raw)


def wait_closed(sock, timeout=TIMEOUT):
    """True when the peer closes the socket (EOF/reset) within timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            continue
        try:
            d = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError, OSError):
            return True
        if not d:
            return True
    return False


def restart(d, sig=signal.SIGKILL, between=None):
    """Stop daemon d with sig (default: kill -9, a crash), call between()
    if given (the daemon down), and start it again on the same temp dirs
    (storage_root survives); returns its exit status.  The log of the
    previous run is dropped so start() finds the new port."""
    rc = d.stop(sig=sig)
    with d._lock:
        d._lines = []
    if between:
        between()
    d.start()
    return rc


def call_ready(c, method, params=None, timeout=10.0, **kw):
    """c.call(method, params, **kw), repeated while the agent still answers
    code 99 (initializing) and timeout seconds have not passed; returns the
    last response."""
    deadline = time.monotonic() + timeout
    while True:
        resp = c.call(method, params, **kw)
        err = resp.get("error")
        if not err or err.get("code") != 99 or time.monotonic() > deadline:
            return resp
        time.sleep(0.05)


# ---- VM tests (test_virt*.py) ---------------------------------------------

def result(r):
    """r's result; fails (showing r) when r is an error."""
    assert "result" in r, r
    return r["result"]


def error_code(r):
    """r's error code; fails (showing r) when r is a result."""
    assert "error" in r, r
    return r["error"]["code"]


def vm_connections(d, sock=None):
    """Two connections to daemon d, a requests one (subscribed to RESPONSES)
    and an events one (EVENTS), once d answers Host.getVMList (code 99 until
    its first VM sample).  sock: a function making each socket (d.tls_sock),
    else plain TCP.  Returns (c, ev)."""
    conns = []
    for dest, sub in ((RESPONSES, "r"), (EVENTS, "ev")):
        c = d.stomp(sock() if sock else None)
        c.connect()
        c.subscribe(dest, sub, receipt=sub[0] + "1")
        conns.append(c)
    c = conns[0]
    deadline = time.monotonic() + TIMEOUT
    while "result" not in c.call("Host.getVMList"):
        assert time.monotonic() < deadline, "vdsmd never answered Host.getVMList"
        time.sleep(0.05)
    return conns[0], conns[1]


def vm_status_events(ev, vm, n, timeout=TIMEOUT):
    """The params of up to n |virt|VM_status|<vm> events read from ev
    (other frames are dropped) within timeout seconds."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        try:
            f = ev.read_frame(max(0.05, deadline - time.monotonic()))
        except Exception:
            break
        if f.cmd == "MESSAGE" and f.json().get("method") == "|virt|VM_status|" + vm:
            got.append(f.json()["params"][vm])
    return got


def vm_stats(c, vm):
    """VM vm's entry of Host.getAllVmStats, None when it has none."""
    for v in result(c.call("Host.getAllVmStats")):
        if v["vmId"] == vm:
            return v
    return None


def wait_task(c, tid, what="Volume.create", timeout=20):
    """Wait until storage task tid has finished, with code 0; returns its
    Task.getStatus."""
    deadline = time.monotonic() + timeout
    while True:
        st = result(c.call("Task.getStatus", [tid]))
        if st["taskState"] == "finished":
            assert st["code"] == 0, st
            return st
        assert time.monotonic() < deadline, what + " did not finish"
        time.sleep(0.02)


def free_port():
    """A loopback port nobody listens on now (a console's own, not
    libvirt's 5900 up, which concurrent test runs contend for)."""
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def volume_path(d, sd, img, vol):
    """Where daemon d keeps volume vol of image img in file domain sd."""
    return os.path.join(d.tmp, "storage", sd, "images", img, vol)


def open_for_qemu(d, paths):
    """A private libvirtd's QEMU runs as nobody: every directory from d's
    temp dir down to each of paths is opened (o+rx), each file is made
    readable and writable by everyone."""
    for path in paths:
        p = path
        while p != os.path.dirname(d.tmp):
            p = os.path.dirname(p)
            os.chmod(p, os.stat(p).st_mode | 0o005)
        os.chmod(path, 0o666)


# ---- volume job tests (test_storage_sparsify/amend/bitmaps.py) -------------

BLANK = "00000000-0000-0000-0000-000000000000"


class VolumeJobCase(unittest.TestCase):
    """A vdsmd with one LOCALFS domain SD (named SD_NAME, under <tmp>/dom)
    holding VOLS, each (vol, img, format, parent[, size in MiB: 64]) made
    with Volume.create (parent BLANK: a base in its own image), and the
    helpers of the tests of the SDM job verbs on them (job: start one,
    follow it in Host.getJobs to its end).  cls.d is the daemon, cls.c a
    connection subscribed to RESPONSES.  A subclass with tests sets SD."""
    SD = None
    SD_NAME = "sd"
    IMG = None          # vi()'s image when none is given
    VOLS = ()
    JOB_TIMEOUT = 30    # seconds a job may take

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()
        cls.d.__enter__()
        cls.c = cls.connect()
        cls.root = os.path.join(cls.d.tmp, "dom")
        os.mkdir(cls.root, 0o755)
        r = call_ready(cls.c, "StorageDomain.create",
                       [cls.SD, 4, cls.root, cls.SD_NAME, 1, "5", 0, 250])
        assert result(r) is True, r
        for vol, img, fmt, parent, *size in cls.VOLS:
            mib = size[0] if size else 64
            tid = result(cls.c.call("Volume.create", [
                vol, BLANK, cls.SD, img, str(mib << 20), fmt, 2, "DATA", "v",  # 2: SPARSE
                img if parent != BLANK else BLANK, parent]))
            st = wait_task(cls.c, tid)
            assert st["taskResult"] == "success", st

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.__exit__(None, None, None)

    @classmethod
    def connect(cls):
        c = cls.d.stomp()
        c.connect()
        c.subscribe(RESPONSES, "responses")
        return c

    def restart_vdsmd(self, img, vol, between=None):
        """kill -9 vdsmd (a crash), between() if given, start it again on the
        same storage_root, reconnect; returns once vol answers Volume.getInfo
        (the domain is found again)."""
        cls = self.__class__
        cls.c.close()
        restart(self.d, signal.SIGKILL, between)
        cls.c = cls.connect()
        call_ready(self.c, "Host.getAllTasksStatuses")
        deadline = time.monotonic() + 10
        while "error" in self.c.call("Volume.getInfo", [vol, BLANK, self.SD, img]):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)

    def path(self, img, vol):
        return os.path.join(self.root, self.SD, "images", img, vol)

    def qinfo(self, img, vol):
        """qemu-img info of the volume file (-U: also while a job holds it)."""
        return json.loads(subprocess.check_output(
            ["qemu-img", "info", "-U", "--output=json", self.path(img, vol)]))

    def info(self, img, vol):
        return result(self.c.call("Volume.getInfo", [vol, BLANK, self.SD, img]))

    def vi(self, vol, img=None, sd=None, **kw):
        """A VolumeInfo (vol_info): the ids, then kw (generation=...)."""
        d = {"sd_id": sd or self.SD, "img_id": img or self.IMG, "vol_id": vol}
        d.update(kw)
        return d

    def start_job(self, verb, *args):
        """SDM.<verb>(a new job id, *args), which must answer true; the id."""
        jid = str(uuid.uuid4())
        self.assertIs(result(self.c.call("SDM." + verb, [jid] + list(args))), True)
        return jid

    def wait_job(self, jid, verb):
        """Host.getJobs' entry of job jid (of SDM.<verb>) once it has ended,
        or JOB_TIMEOUT seconds on."""
        deadline = time.monotonic() + self.JOB_TIMEOUT
        while True:
            jobs = result(self.c.call("Host.getJobs", ["storage", [jid]]))
            self.assertIn(jid, jobs)
            j = jobs[jid]
            if j["status"] not in ("pending", "running") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual((j["id"], j["job_type"], j["description"]), (jid, "storage", verb))
        return j

    def job(self, verb, *args):
        """Start the job, wait for its end; returns Host.getJobs' entry."""
        return self.wait_job(self.start_job(verb, *args), verb)

    def assertDone(self, j):
        self.assertEqual((j["status"], j["progress"]), ("done", 100), j)

    def assertFailed(self, j, code):
        self.assertEqual(j["status"], "failed", j)
        self.assertEqual(j["error"]["code"], code, j)

    def assertRefused(self, verb, args, code):
        """The verb itself answers the error code (no job)."""
        r = self.c.call(verb, args)
        self.assertIn("error", r, r)
        self.assertEqual(r["error"]["code"], code, r)
