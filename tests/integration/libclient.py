"""libclient - a STOMP client that reads the way the oVirt engine's client
library (vdsm-jsonrpc-java 1.7) does, to test PROTOCOL.md 2: one frame per
write, and the frame layout that library reads right (vdsmd/wire.c).

What the library does, and so what this model does:
  - Reactor.run: select() with a 1 s timeout, then every key of the
    selected-key set is processed once.  The set is never cleared, so after
    the first event the connection is processed on every wake-up, and a
    wake-up comes when the socket is readable, when requests wait to be
    written (OP_WRITE), or after the 1 s timeout.
  - ReactorClient.process: processIncoming, then processOutgoing (one
    queued message written per wake-up).
  - StompCommonClient.processIncoming: a read into a 1024-byte header buffer
    (after what was left in it); Message.parse of the buffer; when
    content-length says more is coming, a read of exactly the rest of the
    frame, in the same wake-up.  A read that returned nothing ends the
    wake-up (bytes left in the header buffer then wait for new bytes).
  - Message.parse splits on EOL and walks the header lines; bytes that end
    inside the header block (blank line and one body byte included) make it
    throw (ArrayIndexOutOfBounds / StringIndexOutOfBounds), the reactor
    then drops the connection and every pending call fails (LibraryError).
  - Plaintext: a read is channel.read of the buffer's free space.
  - TLS (SSLEngineNioHelper.read): only when its decrypted data is used up,
    one channel.read of up to 16 709 bytes (the packet buffer's free space)
    and ONE SSLEngine.unwrap: one record decrypted per read.  A complete
    record left in the packet buffer waits for the next wake-up, which is
    the 1 s timeout when the socket has nothing more.  The model reads the
    raw socket and decrypts record by record with ssl.MemoryBIO.

Every frame handled carries when its last byte came off the socket and
when the model handled it: `lag` is how long the library held it."""

import collections
import json
import select
import socket
import ssl
import time

import vdsmtest as vt

HEADER_BUFFER = 1024      # ReactorClient.BUFFER_SIZE
PACKET_BUFFER = 16709     # SSLSession.getPacketBufferSize() (TLS)
SELECT_TIMEOUT = 1.0      # Reactor.TIMEOUT
COMMANDS = {"SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "DISCONNECT",
            "CONNECT", "RECEIPT", "CONNECTED", "ERROR", "ACK", "MESSAGE"}


class LibraryError(Exception):
    """What the library throws while reading: it drops the connection."""


Frame = collections.namedtuple("Frame", "cmd headers body arrived handled")
Frame.lag = property(lambda f: f.handled - f.arrived)


def _java_lines(data):
    """String.split("\\n"): trailing empty strings removed."""
    lines = data.decode("utf-8", "replace").split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def library_parse(data):
    """Message.parse: (cmd, headers, content) or None (read as a heart-beat:
    the bytes stay in the header buffer); LibraryError where it throws."""
    lines = _java_lines(data)
    if not lines:
        return None
    line = 0
    while lines[line] == "":
        line += 1
    if len(lines) - line <= 2:
        return None
    cmd = lines[line].replace("\0", "")
    if cmd not in COMMANDS:
        raise LibraryError("Unrecognized message received")
    headers = {}
    line += 1
    while True:
        if line >= len(lines):
            raise LibraryError("ArrayIndexOutOfBoundsException: the read ended inside "
                               "the header block (%d bytes): %r" % (len(data), data[-80:]))
        cur = lines[line]
        if cur == "":
            break
        ind = cur.find(":")
        if ind < 0:
            raise LibraryError("StringIndexOutOfBoundsException: the read ended inside "
                               "a header line (%d bytes): %r" % (len(data), data[-80:]))
        headers[cur[:ind]] = cur[ind + 1:]   # HashMap.put: the last one wins
        line += 1
    line += 1
    prefix = len("".join(x + "\n" for x in lines[:line]).encode())
    return cmd, headers, bytes(data[prefix:])


def content_length(headers):
    try:
        return int(headers.get("content-length", "-1"))
    except ValueError:
        return -1


class TimedBuffer:
    """Bytes with the time each chunk came off the socket."""

    def __init__(self):
        self.data = bytearray()
        self.ends = collections.deque()   # (end offset, time), oldest first

    def __len__(self):
        return len(self.data)

    def append(self, data, t):
        if data:
            self.data += data
            self.ends.append((len(self.data), t))

    def take(self, n):
        """The first n bytes and the time of the last of them."""
        n = min(n, len(self.data))
        if n == 0:
            return b"", 0.0
        t = next(tt for end, tt in self.ends if end >= n)
        out = bytes(self.data[:n])
        del self.data[:n]
        self.ends = collections.deque((e - n, tt) for e, tt in self.ends if e > n)
        return out, t


class PlainTransport:
    def __init__(self, sock):
        sock.setblocking(False)
        self.sock = sock
        self.eof = False
        self.raw_out = b""

    def read(self, n):
        """channel.read: (bytes, time, count the library sees)."""
        if n <= 0:
            return b"", 0.0, 0
        try:
            data = self.sock.recv(n)
        except (BlockingIOError, InterruptedError):
            return b"", 0.0, 0
        except ConnectionError:
            data = b""
        if not data:
            self.eof = True
            return b"", 0.0, -1
        return data, time.monotonic(), len(data)

    def wrap(self, data):
        return data


class TlsTransport(PlainTransport):
    """SSLEngineNioHelper over a raw socket: one record per read."""

    def __init__(self, sock, ctx):
        super().__init__(sock)
        self.inc, self.outg = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.outg, server_side=False)
        self.packet = TimedBuffer()   # packatPeerBuffer
        self.app = TimedBuffer()      # appPeerBuffer
        self.records = []             # plaintext bytes of each record decrypted
        self._handshake()

    def _handshake(self):
        deadline = time.monotonic() + vt.TIMEOUT
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush_blocking(deadline)
                r, _, _ = select.select([self.sock], [], [], max(0, deadline - time.monotonic()))
                if not r:
                    raise TimeoutError("TLS handshake")
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed during the TLS handshake")
                self.inc.write(data)
        self._flush_blocking(deadline)
        assert self.inc.pending == 0, "application data during the handshake"

    def _flush_blocking(self, deadline):
        out = self.outg.read()
        while out:
            select.select([], [self.sock], [], max(0, deadline - time.monotonic()))
            try:
                n = self.sock.send(out)
                out = out[n:]
            except BlockingIOError:
                pass

    def _unwrap_one(self):
        """SSLEngine.unwrap: one complete record, or nothing (underflow)."""
        d = self.packet.data
        if len(d) < 5 or len(d) < 5 + int.from_bytes(d[3:5], "big"):
            return 0
        rec, t = self.packet.take(5 + int.from_bytes(d[3:5], "big"))
        self.inc.write(rec)
        plain = b""
        try:
            while True:
                chunk = self.obj.read(65536)
                if not chunk:
                    break
                plain += chunk
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            self.eof = True
        self.app.append(plain, t)
        self.records.append(len(plain))
        return len(plain)

    def read(self, n):
        produced = 0
        if len(self.app) == 0:
            try:
                data = self.sock.recv(PACKET_BUFFER - len(self.packet))
                if not data:
                    self.eof = True
                self.packet.append(data, time.monotonic())
            except (BlockingIOError, InterruptedError):
                pass
            except ConnectionError:
                self.eof = True
            if len(self.packet) == 0:
                return b"", 0.0, 0
            produced = self._unwrap_one()
        data, t = self.app.take(n)
        # (the library's read returns what unwrap produced, not what it copied)
        return data, t, produced

    def wrap(self, data):
        self.obj.write(data)
        return self.outg.read()


class LibraryClient:
    """One connection driven the library's way."""

    def __init__(self, transport):
        self.t = transport
        self.sock = transport.sock
        self.head = TimedBuffer()     # the header buffer
        self.message = None           # (cmd, headers, content, time) awaiting its rest
        self.rest = None              # the ibuff: (TimedBuffer, bytes wanted)
        self.outbox = collections.deque()
        self.raw_out = b""
        self.frames = collections.deque()
        self.error = None
        self.wakeups = self.timeouts = self.handled = 0

    # -- processIncoming -----------------------------------------------------

    def _emit(self, cmd, headers, content, arrived):
        # trimEndOfMessage drops the last byte (the NUL); processMessage
        # hands MESSAGE bodies on, keeps CONNECTED, logs ERROR, ignores the rest
        self.frames.append(Frame(cmd, headers, content[:-1], arrived, time.monotonic()))
        self.handled += 1
        self.head = TimedBuffer()
        self.message = self.rest = None

    def _incoming(self):
        if self.rest is None:
            data, t, n = self.t.read(HEADER_BUFFER - len(self.head))
            self.head.append(data, t)
            if n <= 0:
                return
            buf = bytes(self.head.data)
            t_all = self.head.ends[-1][1]
            msg = library_parse(buf)
            if msg is None:
                return
            cmd, headers, content = msg
            clen = content_length(headers)
            if clen == -1:
                self._control_frames(buf, t_all)
                return
            if clen == len(content) - 1:
                self._emit(cmd, headers, content, t_all)
                return
            if clen > len(content):
                self.message = (cmd, headers, content, t_all)
                self.rest = (TimedBuffer(), clen - len(content) + 1)
            else:
                # the read took more than this frame: the rest stays in
                # the header buffer, looked at after the next read
                at = len(buf) - len(content) + clen + 1
                left, _ = self.head.take(len(buf))
                self._emit(cmd, headers, content[:clen + 1], t_all)
                self.head.append(left[at:], t_all)
                return
        got, want = self.rest
        data, t, _ = self.t.read(want - len(got))
        got.append(data, t)
        if len(got) < want:
            return
        cmd, headers, content, _ = self.message
        self._emit(cmd, headers, content + bytes(got.data), got.ends[-1][1])

    def _control_frames(self, buf, t):
        """The no-content-length branch: the whole 1024-byte header buffer
        (zeros after the data) split on NUL, each piece parsed again."""
        arr = buf + b"\0" * (HEADER_BUFFER - len(buf))
        pieces = arr.decode("utf-8", "replace").split("\0")
        while pieces and pieces[-1] == "":
            pieces.pop()
        for piece in pieces:
            m = library_parse((piece + "\0").encode())
            if m is None:
                raise LibraryError("NullPointerException: a heart-beat after a frame "
                                   "without content-length in one read")
            clen = content_length(m[1])
            if clen != -1 and clen != len(m[2]) - 1:
                # kept as this.message, then overwritten by the next read: lost
                raise LibraryError("a frame read with a control frame was lost: %r" %
                                   piece[:80])
            self._emit(m[0], m[1], m[2], t)

    # -- the reactor ---------------------------------------------------------

    def _outgoing(self):
        if self.raw_out:
            try:
                n = self.sock.send(self.raw_out)
                self.raw_out = self.raw_out[n:]
            except BlockingIOError:
                pass
            return
        if self.outbox:
            self.raw_out = self.t.wrap(self.outbox.popleft())
            self._outgoing()

    def wakeup(self, timeout=SELECT_TIMEOUT):
        w = [self.sock] if (self.outbox or self.raw_out) else []
        r, wr, _ = select.select([self.sock], w, [], timeout)
        self.wakeups += 1
        if not r and not wr:
            self.timeouts += 1
        try:
            self._incoming()
        except LibraryError as e:
            self.error = e
            raise
        self._outgoing()

    def run(self, until, deadline):
        """Wake-ups until until() is true (True) or the deadline (False)."""
        while not until():
            if self.error:
                raise self.error
            if self.t.eof:
                raise ConnectionError("server closed the connection")
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.wakeup(min(SELECT_TIMEOUT, left))
        return True

    # -- what the tests use --------------------------------------------------

    def queue(self, data):
        """StompCommonClient.send: written one message per wake-up."""
        self.outbox.append(data)

    def send(self, data, timeout=vt.TIMEOUT):
        self.queue(data)
        if not self.run(lambda: not self.outbox and not self.raw_out,
                        time.monotonic() + timeout):
            raise TimeoutError("send blocked")

    def next_frame(self, deadline):
        """The next frame handled: Frame, or None at the deadline."""
        if not self.run(lambda: self.frames, deadline):
            return None
        return self.frames.popleft()

    def connect(self, heart_beat="0,15000", packed=False):
        h = [("accept-version", "1.2"), ("host", "localhost"), ("heart-beat", heart_beat)]
        if packed:
            h.append(("vdsmd-framing", "packed"))
        self.send(vt.frame("CONNECT", h, content_length=False))
        f = self.next_frame(time.monotonic() + vt.TIMEOUT)
        assert f and f.cmd == "CONNECTED", f
        return f

    def subscribe(self, dest, sub_id):
        """As the engine subscribes: no receipt (frames on a connection are
        handled in order, so the SENDs after it see the subscription)."""
        self.send(vt.frame("SUBSCRIBE", [("destination", dest), ("id", sub_id),
                                         ("ack", "auto")]))

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
    return LibraryClient(PlainTransport(s))


def tls_client(d, pki, host=None, port=None):
    raw = socket.create_connection((host or d.host, port or d.port), timeout=vt.TIMEOUT)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw.setblocking(False)
    return LibraryClient(TlsTransport(raw, vt.tls_context(pki)))
