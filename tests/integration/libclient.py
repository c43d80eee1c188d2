"""libclient - a STOMP client that reads the way the oVirt engine's client
library (vdsm-jsonrpc-java) does, to test PROTOCOL.md 2 "one frame per write".

What the library does (StompCommonClient.processIncoming, ReactorClient.process,
SSLEngineNioHelper.read), and so what this client does:
  - One readable event handles at most one STOMP frame.  A read goes into a
    1024-byte header buffer (after what was left in it); a frame whose
    content-length says more is coming gets exactly its remainder read in the
    same event.  Bytes after the frame are kept for later, and are looked at
    only after the next readable event that brings new bytes: a frame that
    arrived together with the previous one waits for the next bytes (up to a
    heart-beat).  A left-over of 1024 bytes or more is never processed (the
    read into a full buffer returns 0).
  - Over TLS one read returns at most one TLS record's data (Python's
    SSLSocket.recv, like SSLEngine.unwrap; test_wire_frames checks it), and
    the SSL layer's pending() bytes are ignored: the next frame is handled
    after select() says the socket is readable.

The events are driven by select(); nothing here looks at buffered bytes on
its own."""

import json
import select
import socket
import ssl
import time

import vdsmtest as vt

HEADER_BUFFER = 1024  # ReactorClient.BUFFER_SIZE


class LibraryReader:
    """processIncoming(), one call per readable event."""

    def __init__(self, sock):
        self.sock = sock
        self.head = b""        # the header buffer's content
        self.partial = None    # (frame bytes so far, bytes still wanted)
        self.eof = False
        self.reads = 0

    def _read(self, n):
        if n <= 0:
            return b""
        try:
            data = self.sock.recv(n)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return b""
        self.reads += 1
        if not data:
            self.eof = True
        return data

    def on_readable(self):
        """Handle one readable event; returns the frame completed (bytes
        including the NUL) or None."""
        if self.partial is None:
            data = self._read(HEADER_BUFFER - len(self.head))
            if not data:
                return None
            self.head += data
            buf = self.head
            start = 0
            while start < len(buf) and buf[start:start + 1] in (b"\n", b"\r"):
                start += 1
            end = buf.find(b"\n\n", start)
            if end < 0:
                return None  # headers incomplete: wait for more bytes
            body_at = end + 2
            clen = None
            for line in buf[start:end].split(b"\n")[1:]:
                if line.lower().startswith(b"content-length:"):
                    clen = int(line.split(b":", 1)[1])
                    break
            if clen is None:  # control frame without content-length
                nul = buf.find(b"\0", body_at)
                if nul < 0:
                    return None
                frame, self.head = buf[:nul + 1], buf[nul + 1:]
                return frame
            have = len(buf) - body_at
            if have >= clen + 1:
                frame, self.head = buf[:body_at + clen + 1], buf[body_at + clen + 1:]
                return frame
            self.partial = (buf, clen + 1 - have)
            self.head = b""
        # the rest of a frame: exactly what it still needs, same event
        got, want = self.partial
        data = self._read(want)
        got += data
        want -= len(data)
        if want:
            self.partial = (got, want)
            return None
        self.partial = None
        return got


def parse(frame):
    """(cmd, headers, body) of one complete frame."""
    frame = frame.lstrip(b"\r\n")
    head, _, rest = frame.partition(b"\n\n")
    lines = head.decode().split("\n")
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs.setdefault(k, v)
    n = int(hdrs.get("content-length", len(rest) - 1))
    return lines[0], hdrs, rest[:n]


class LibraryClient:
    """A connection driven the library's way; requests go out whole."""

    def __init__(self, sock):
        sock.setblocking(False)
        self.sock = sock
        self.reader = LibraryReader(sock)
        self.frames = 0

    def send(self, data, timeout=vt.TIMEOUT):
        view = memoryview(data)
        deadline = time.monotonic() + timeout
        while view:
            try:
                n = self.sock.send(view)
                view = view[n:]
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                if time.monotonic() > deadline:
                    raise TimeoutError("send blocked")
                select.select([], [self.sock], [], 0.05)

    def next_frame(self, deadline):
        """Wait for readable events until one completes a frame (None at
        the deadline)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                return None
            f = self.reader.on_readable()
            if f is not None:
                self.frames += 1
                return parse(f)
            if self.reader.eof:
                raise ConnectionError("server closed the connection")

    def connect(self, heart_beat="0,15000"):
        self.send(vt.frame("CONNECT", [("accept-version", "1.2"), ("host", "localhost"),
                                       ("heart-beat", heart_beat)], content_length=False))
        f = self.next_frame(time.monotonic() + vt.TIMEOUT)
        assert f and f[0] == "CONNECTED", f
        return f

    def subscribe(self, dest, sub_id, receipt):
        self.send(vt.frame("SUBSCRIBE", [("destination", dest), ("id", sub_id),
                                         ("ack", "auto"), ("receipt", receipt)]))
        f = self.next_frame(time.monotonic() + vt.TIMEOUT)
        assert f and f[0] == "RECEIPT" and f[1].get("receipt-id") == receipt, f

    @staticmethod
    def request(method, params, req_id):
        body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {},
                           "id": req_id}).encode()
        return vt.frame("SEND", [("destination", vt.REQUESTS), ("reply-to", vt.RESPONSES),
                                 ("content-type", "application/json")], body)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def plain_client(d):
    s = socket.create_connection((d.host, d.port), timeout=vt.TIMEOUT)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return LibraryClient(s)


def tls_client(d, pki):
    return LibraryClient(vt.tls_connect(d.host, d.port, pki))
