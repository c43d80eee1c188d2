"""Broker mode against a real, private RabbitMQ (issue 9).

One RabbitMQ for the module (its startup is slow); every vdsmd uses its own
host_id.  The engine side is Debian's python3-stomp (not our code).  If
RabbitMQ cannot start, every test fails with the reason (no skip).
"""

import json
import queue
import re
import signal
import time
import unittest
import uuid

import stomp  # Debian's python3-stomp

import rabbitmq
import vdsmtest as vt

MQ = None
MQ_ERROR = None
USER, PASS = "guest", "guest"


PKI = None


def setUpModule():
    global MQ, MQ_ERROR, PKI
    import tempfile
    try:
        PKI = vt.make_pki(tempfile.mkdtemp(prefix="vdsm-broker-pki-"))
        MQ = rabbitmq.RabbitMQ(pki=PKI)
    except Exception as e:  # reported by every test
        MQ_ERROR = "RabbitMQ could not be started: %s" % e


def tearDownModule():
    import shutil
    if MQ:
        MQ.close()
    if PKI:
        shutil.rmtree(PKI, ignore_errors=True)


class Engine(stomp.ConnectionListener):
    """An engine-side client: requests to /queue/vdsm.<host>.requests,
    replies through a /temp-queue, events from a topic subscription."""

    def __init__(self, port):
        self.replies = queue.Queue()
        self.events = queue.Queue()
        self.receipts = queue.Queue()
        self.errors = []
        self.conn = stomp.Connection12([("127.0.0.1", port)], vhost="/",
                                       heartbeats=(0, 0), auto_content_length=True)
        self.conn.set_listener("engine", self)
        self.conn.connect(USER, PASS, wait=True)
        self.reply_to = "/temp-queue/replies-%s" % uuid.uuid4().hex[:8]

    def on_message(self, frame):
        if frame.headers.get("destination", "").startswith("/topic/"):
            self.events.put(json.loads(frame.body))
        else:
            self.replies.put(json.loads(frame.body))

    def on_error(self, frame):
        self.errors.append(frame)

    def on_receipt(self, frame):
        self.receipts.put(frame.headers.get("receipt-id"))

    def send(self, host_id, method, params=None, req_id=None):
        req_id = req_id or str(uuid.uuid4())
        msg = {"jsonrpc": "2.0", "method": method, "id": req_id}
        if params is not None:
            msg["params"] = params
        self.conn.send("/queue/vdsm.%s.requests" % host_id, json.dumps(msg),
                       content_type="application/json",
                       headers={"reply-to": self.reply_to})
        return req_id

    def call(self, host_id, method, params=None, timeout=15):
        rid = self.send(host_id, method, params)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply to %s through the broker" % method)
            r = self.replies.get(timeout=left)
            if r.get("id") == rid:
                return r

    def subscribe_events(self, host_id):
        """Subscribe to the host's event topic; returns once the broker
        confirmed it (RECEIPT), so no event published later is missed."""
        self.conn.subscribe("/topic/vdsm.%s.events" % host_id, id="ev", ack="auto",
                            headers={"receipt": "sub-ev"})
        while self.receipts.get(timeout=10) != "sub-ev":
            pass

    def close(self):
        try:
            self.conn.disconnect()
        except Exception:
            pass


def broker_daemon(host_id, passcode=PASS, start=True):
    return vt.Daemon("--broker-uri", "stomp://127.0.0.1:%d" % MQ.stomp_port,
                     "--broker-login", USER, "--broker-passcode", passcode,
                     "--host-id", host_id, "--vm-sample-interval", "1",
                     "--host-sample-interval", "1", start=start)


def metrics(d):
    status, _, body = d.http("GET", "/metrics")
    assert status == 200
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("vdsmd_broker_"):
            k, v = line.split()
            out[k] = int(v)
    return out


def wait_consuming(d, start=0, timeout=30):
    m = d.wait_log(r"broker .*: consuming /queue/vdsm\.", timeout=timeout, start=start)
    assert m, "vdsmd did not subscribe through the broker:\n" + "\n".join(d.log_lines()[-30:])


class BrokerTest(unittest.TestCase):
    def setUp(self):
        if MQ_ERROR:
            self.fail(MQ_ERROR)

    def test_1_calls_and_events(self):
        """ping2 and getAllVmStats through the broker; events reach the
        host's topic and local subscribers alike; /metrics counts them."""
        with broker_daemon("itest1") as d:
            wait_consuming(d)
            self.assertTrue(d.wait_ready())
            eng = Engine(MQ.stomp_port)
            try:
                r = eng.call("itest1", "Host.ping2")
                self.assertEqual(r, {"jsonrpc": "2.0", "id": r["id"], "result": True})
                r = eng.call("itest1", "Host.getAllVmStats")
                vms = r["result"]
                self.assertIsInstance(vms, list)
                # the same answer as a local client gets
                c = d.stomp()
                c.connect()
                c.subscribe(vt.RESPONSES, "r")
                local = c.call("Host.getAllVmStats")["result"]
                self.assertEqual(sorted(v["vmId"] for v in vms),
                                 sorted(v["vmId"] for v in local))
                self.assertTrue(vms, "the test driver has a VM")
                # events: topic subscriber and local subscriber
                eng.subscribe_events("itest1")
                c.subscribe(vt.EVENTS, "ev", receipt="ev-r")
                vm = vms[0]["vmId"]
                r = eng.call("itest1", "VM.pause", {"vmID": vm})
                self.assertEqual(r.get("result"), {"vmList": {}}, r)
                ev = eng.events.get(timeout=10)
                while not ev["method"].startswith("|virt|VM_status|"):
                    ev = eng.events.get(timeout=10)
                self.assertEqual(ev["method"], "|virt|VM_status|" + vm)
                self.assertEqual(ev["params"][vm]["status"], "Paused")
                self.assertIsInstance(ev["params"]["notify_time"], int)
                deadline = time.monotonic() + 10
                while True:
                    f = c.read_frame(max(0.1, deadline - time.monotonic()))
                    if f.cmd == "MESSAGE" and f.headers.get("destination") == vt.EVENTS:
                        self.assertEqual(f.json()["method"], "|virt|VM_status|" + vm)
                        break
                eng.call("itest1", "VM.cont", {"vmID": vm})
                m = metrics(d)
                self.assertEqual(m["vdsmd_broker_connected"], 1)
                self.assertGreaterEqual(m["vdsmd_broker_requests_received_total"], 4)
                self.assertEqual(m["vdsmd_broker_requests_acked_total"],
                                 m["vdsmd_broker_requests_received_total"])
                self.assertGreaterEqual(m["vdsmd_broker_events_published_total"], 1)
                self.assertEqual(eng.errors, [])
                c.close()
            finally:
                eng.close()

    def test_2_kill9_with_requests_in_flight(self):
        """kill -9 while 200 requests are queued and in flight; after a
        restart every request is answered, none lost; duplicates (a reply
        written just before the crash, its ACK lost with it) are dropped
        by id on the client side, as at-least-once delivery requires."""
        with broker_daemon("itest2") as d:
            wait_consuming(d)
            self.assertTrue(d.wait_ready())
            eng = Engine(MQ.stomp_port)
            try:
                ids = {}
                for i in range(40):  # these run normally
                    ids[eng.send("itest2", "Host.ping2", req_id="r%03d" % i)] = True
                # stop the daemon: what follows is queued or delivered
                # (prefetch 64) but never answered before the crash
                d.proc.send_signal(signal.SIGSTOP)
                for i in range(40, 200):
                    m = "Host.getAllVmStats" if i % 2 else "Host.ping2"
                    ids[eng.send("itest2", m, req_id="r%03d" % i)] = m
                time.sleep(0.5)  # the broker pushes the prefetch window
                d.proc.send_signal(signal.SIGKILL)
                d.proc.wait()
                vt.restart(d)
                wait_consuming(d)
                seen = {}
                dupes = 0
                deadline = time.monotonic() + 30
                while len(seen) < 200 and time.monotonic() < deadline:
                    try:
                        r = eng.replies.get(timeout=1)
                    except queue.Empty:
                        continue
                    if r["id"] in seen:
                        dupes += 1
                        continue
                    seen[r["id"]] = r
                missing = sorted(set(ids) - set(seen))
                self.assertEqual(missing, [], "requests lost")
                for rid, r in seen.items():
                    self.assertIn("result", r, r)
                    if ids[rid] == "Host.getAllVmStats":
                        self.assertIsInstance(r["result"], list)
                    else:
                        self.assertIs(r["result"], True)
                m = metrics(d)
                self.assertGreaterEqual(m["vdsmd_broker_requests_redelivered_total"], 1)
                print("\nkill -9: 200 answered, %d duplicate replies dropped by id, "
                      "%d redelivered after restart" %
                      (dupes, m["vdsmd_broker_requests_redelivered_total"]))
            finally:
                eng.close()

    def test_3_rabbitmq_restart(self):
        """Restart RabbitMQ under a running vdsmd: it reconnects,
        resubscribes and serves again; a local client never notices."""
        with broker_daemon("itest3") as d:
            wait_consuming(d)
            self.assertTrue(d.wait_ready())
            eng = Engine(MQ.stomp_port)
            self.assertIs(eng.call("itest3", "Host.ping2")["result"], True)
            eng.close()
            c = d.stomp()
            c.connect()
            c.subscribe(vt.RESPONSES, "r")
            mark = len(d.log_lines())
            MQ.stop()
            self.assertTrue(d.wait_log(r"broker .*: connection lost", start=mark, timeout=10))
            # local service is unaffected while the broker is down
            self.assertIs(c.call("Host.ping2")["result"], True)
            MQ.start()
            self.assertIs(c.call("Host.ping2")["result"], True)
            wait_consuming(d, start=mark, timeout=60)
            eng = Engine(MQ.stomp_port)
            try:
                self.assertIs(eng.call("itest3", "Host.ping2")["result"], True)
            finally:
                eng.close()
            self.assertIs(c.call("Host.ping2")["result"], True)
            m = metrics(d)
            self.assertGreaterEqual(m["vdsmd_broker_reconnects_total"], 1)
            self.assertEqual(m["vdsmd_broker_connected"], 1)
            c.close()

    def test_4_wrong_credentials(self):
        """A wrong passcode: a clear log line, retries with backoff, no
        crash, local clients served."""
        with broker_daemon("itest4", passcode="wrong") as d:
            m = d.wait_log(r"broker .*login as \"guest\".*refused.*check broker_login",
                           timeout=15)
            self.assertTrue(m, "\n".join(d.log_lines()))
            self.assertTrue(d.wait_log(r"reconnecting in [0-9.]+ s", timeout=5))
            mark = len(d.log_lines())
            self.assertTrue(d.wait_log(r"login as .*refused", start=mark, timeout=10),
                            "no second attempt")
            self.assertTrue(d.wait_log(r"reconnecting in", start=mark, timeout=5))
            print("\n" + "\n".join(l for l in d.log_lines() if "broker" in l))
            delays = [float(x) for x in re.findall(r"reconnecting in ([0-9.]+) s",
                                                   "\n".join(d.log_lines()))]
            self.assertGreaterEqual(len(delays), 2)
            # jittered exponential backoff: 1-2 s, then 2-4 s
            self.assertTrue(1.0 <= delays[0] <= 2.0, delays)
            self.assertTrue(2.0 <= delays[1] <= 4.0, delays)
            self.assertTrue(d.wait_ready())
            c = d.stomp()
            c.connect()
            c.subscribe(vt.RESPONSES, "r")
            self.assertIs(c.call("Host.ping2")["result"], True)
            c.close()
            mt = metrics(d)
            self.assertEqual(mt["vdsmd_broker_connected"], 0)
            self.assertGreaterEqual(mt["vdsmd_broker_connect_failures_total"], 2)
            self.assertIsNone(d.proc.poll())
            self.assertEqual(d.stop(), 0)

    def test_5_client_broker_option(self):
        """vdsm-client --broker URI --host-id H calls a host through the
        broker (temp-queue reply destination)."""
        import os
        import subprocess
        client = os.environ.get("VDSM_CLIENT_BIN",
                                os.path.join(vt.VDSMD_BUILD, "vdsm-client"))
        with broker_daemon("itest5") as d:
            wait_consuming(d)
            self.assertTrue(d.wait_ready())
            uri = "stomp://%s:%s@127.0.0.1:%d" % (USER, PASS, MQ.stomp_port)
            p = subprocess.run([client, "--broker", uri, "--host-id", "itest5",
                                "--timeout", "15", "Host", "ping2"],
                               capture_output=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            self.assertEqual(p.stdout.decode().strip(), "true")
            p = subprocess.run([client, "--broker", uri, "--host-id", "itest5",
                                "--timeout", "15", "--compact", "Host", "getVMList"],
                               capture_output=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            self.assertIsInstance(json.loads(p.stdout), list)

    def test_6_stomps(self):
        """stomps://: vdsmd and vdsm-client reach RabbitMQ over TLS with the
        cert/key/CA keys (the broker requires a client certificate)."""
        import os
        import subprocess
        args = ["--broker-uri", "stomps://127.0.0.1:%d" % MQ.stomps_port,
                "--broker-login", USER, "--broker-passcode", PASS, "--host-id", "itest6",
                "--cert-file", os.path.join(PKI, "client.crt"),
                "--key-file", os.path.join(PKI, "client.key"),
                "--ca-file", os.path.join(PKI, "ca.crt")]
        with vt.Daemon(*args) as d:
            wait_consuming(d)
            self.assertTrue(d.wait_ready())
            client = os.environ.get("VDSM_CLIENT_BIN",
                                    os.path.join(vt.VDSMD_BUILD, "vdsm-client"))
            uri = "stomps://%s:%s@127.0.0.1:%d" % (USER, PASS, MQ.stomps_port)
            p = subprocess.run([client, "--broker", uri, "--host-id", "itest6",
                                "--cert", os.path.join(PKI, "client.crt"),
                                "--key", os.path.join(PKI, "client.key"),
                                "--cacert", os.path.join(PKI, "ca.crt"),
                                "--timeout", "15", "Host", "ping2"],
                               capture_output=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            self.assertEqual(p.stdout.decode().strip(), "true")
        # a broker certificate from another CA is refused, with the reason
        bad = list(args)
        bad[-1] = os.path.join(PKI, "wrong-ca.crt")
        with vt.Daemon(*bad) as d:
            m = d.wait_log(r"broker .*cannot connect: TLS: broker certificate not trusted",
                           timeout=15)
            self.assertTrue(m, "\n".join(d.log_lines()))


class FakeBrokerTest(unittest.TestCase):
    """vdsmd against a scripted STOMP broker (a socket in this test): the
    exact frames of the at-least-once contract, and a redelivered request
    answered from the reply cache instead of running twice."""

    def accept(self, lsock):
        lsock.settimeout(15)
        s, _ = lsock.accept()
        c = vt.Conn(s)
        f = c.read_frame()
        self.assertEqual(f.cmd, "CONNECT")
        self.assertEqual(f.headers.get("accept-version"), "1.2")
        self.assertEqual(f.headers.get("host"), "/")
        self.assertEqual(f.headers.get("login"), "fake")
        self.assertEqual(f.headers.get("passcode"), "secret")
        self.assertRegex(f.headers.get("heart-beat", ""), r"^[1-9]\d*,[1-9]\d*$")
        c.send_frame("CONNECTED", [("version", "1.2"), ("heart-beat", "0,0")])
        f = c.read_frame()
        self.assertEqual(f.cmd, "SUBSCRIBE")
        self.assertEqual(f.headers.get("destination"), "/queue/vdsm.fake1.requests")
        self.assertEqual(f.headers.get("ack"), "client-individual")
        self.assertEqual(f.headers.get("prefetch-count"), "7")
        return c, f.headers["id"]

    def message(self, c, sub, ack, body, redelivered=False):
        h = [("destination", "/queue/vdsm.fake1.requests"), ("subscription", sub),
             ("message-id", "m-" + ack), ("ack", ack), ("reply-to", "/reply-queue/r1"),
             ("content-type", "application/json")]
        if redelivered:
            h.append(("redelivered", "true"))
        c.send_frame("MESSAGE", h, body)

    def test_reply_then_ack_and_dedupe(self):
        import socket
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(4)
        port = lsock.getsockname()[1]
        with vt.Daemon("--broker-uri", "stomp://127.0.0.1:%d" % port, "--broker-login", "fake",
                       "--broker-passcode", "secret", "--host-id", "fake1",
                       "--broker-prefetch", "7") as d:
            self.assertTrue(d.wait_ready())
            c, sub = self.accept(lsock)
            body = json.dumps({"jsonrpc": "2.0", "method": "Host.getVMList",
                               "params": {}, "id": "dup-1"})
            self.message(c, sub, "a1", body)
            f = c.read_frame()
            self.assertEqual(f.cmd, "SEND")  # the reply comes first ...
            self.assertEqual(f.headers["destination"], "/reply-queue/r1")
            first = f.json()
            self.assertEqual(first["id"], "dup-1")
            self.assertIsInstance(first["result"], list)
            f = c.read_frame()
            self.assertEqual((f.cmd, f.headers.get("id")), ("ACK", "a1"))  # ... then ACK
            # the connection dies; the broker redelivers the same request
            c.close()
            self.assertTrue(d.wait_log(r"broker .*connection lost", timeout=10))
            c, sub = self.accept(lsock)
            self.message(c, sub, "a2", body, redelivered=True)
            f = c.read_frame()
            self.assertEqual(f.cmd, "SEND")
            self.assertEqual(f.json(), first)
            f = c.read_frame()
            self.assertEqual((f.cmd, f.headers.get("id")), ("ACK", "a2"))
            # a redelivered request never answered before runs normally
            other = json.dumps({"jsonrpc": "2.0", "method": "Host.ping2", "id": 42})
            self.message(c, sub, "a3", other, redelivered=True)
            f = c.read_frame()
            self.assertEqual(f.json(), {"jsonrpc": "2.0", "id": 42, "result": True})
            self.assertEqual(c.read_frame().headers.get("id"), "a3")
            m = metrics(d)
            self.assertEqual(m["vdsmd_broker_requests_received_total"], 3)
            self.assertEqual(m["vdsmd_broker_requests_redelivered_total"], 2)
            self.assertEqual(m["vdsmd_broker_requests_deduplicated_total"], 1)
            self.assertEqual(m["vdsmd_broker_requests_acked_total"], 3)
            # executed once: the engine counted one Host.getVMList
            _, _, text = d.http("GET", "/metrics")
            calls = [l for l in text.decode().splitlines()
                     if "Host.getVMList" in l and not l.startswith("#")
                     and "_total{" in l]
            self.assertTrue(calls, "no per-verb request counter in /metrics")
            self.assertEqual(sum(int(float(l.split()[-1])) for l in calls), 1, calls)
            # a broker ERROR frame: logged, reconnect
            c.send_frame("ERROR", [("message", "fake failure")], "details")
            self.assertTrue(d.wait_log(r"broker ERROR: fake failure", timeout=10))
            c.close()
            lsock.close()
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
