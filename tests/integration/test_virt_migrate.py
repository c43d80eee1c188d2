"""Live migration between two vdsmd hosts, each on its own private libvirt
daemon (privlibvirt.py) on this machine, driven as the engine does:
VM.migrate {dst} on the source (which prepares the destination with
VM.migrationCreate), |virt|VM_migration_status| progress events, the VM Up
on the destination and Down (exitReason 4, migration succeeded) on the
source; a throttled migration cancelled with VM.migrateCancel stays Up on
the source and leaves nothing on the destination.  Skipped, with the
reason, where the private daemons or QEMU cannot start."""

import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import privlibvirt
import vdsmtest as vt

VM = "5e1f0000-1111-4222-8333-4444555566aa"


def vm_xml(vm, name):
    return ('<domain type="kvm" xmlns:ovirt-vm="http://ovirt.org/vm/1.0"><name>%s</name>'
            '<uuid>%s</uuid><memory unit="MiB">64</memory><vcpu>1</vcpu>'
            '<os><type arch="x86_64" machine="pc">hvm</type></os><features><acpi/></features>'
            '<devices><graphics type="vnc" port="-1" autoport="yes" listen="127.0.0.1"/>'
            '</devices><metadata><ovirt-vm:vm><ovirt-vm:clusterVersion>4.8'
            '</ovirt-vm:clusterVersion></ovirt-vm:vm></metadata></domain>' % (name, vm))


result = vt.result
# VM.destroy right after a migration: libvirt's destroy waits for the
# migration job's clean-up (its state-change lock), seconds on a loaded
# machine; vt.TIMEOUT (10 s) was hit once in CI under ASan at load ~9
DESTROY = 60


class ScriptedDestination:
    """A destination vdsmd's HTTP endpoint, scripted: answers each POST
    /jsonrpc with answer(request) as a JSON-RPC response (result or error)
    and keeps the requests."""

    def __init__(self, answer):
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(req)
                # the source's clean-up after a failed or cancelled
                # migration (VM.destroy) is kept and answered, not scripted
                ans = {"result": True} if req.get("method") == "VM.destroy" else answer(req)
                body = json.dumps(dict(ans, jsonrpc="2.0", id=req["id"])).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Host:
    """One vdsmd on its own private libvirtd, with a requests and an events
    connection."""

    def __init__(self, lv, migration_uri=None, pki=None):
        # migration_libvirt_uri: the destination's libvirt (a private
        # libvirtd here, VDSM's qemu+tls://%s/system by default)
        args = ["--migration-libvirt-uri", migration_uri] if migration_uri else []
        self.d = vt.Daemon(*args, libvirt_uri=lv.uri if lv else "test:///default",
                           tls=pki is not None, pki=pki)
        self.c, self.ev = vt.vm_connections(self.d, self.d.tls_sock if pki else None)

    def close(self):
        self.c.close()
        self.ev.close()
        self.d.__exit__(None, None, None)

    def status(self, vm=VM):
        for v in result(self.c.call("Host.getVMList")):
            if v["vmId"] == vm:
                return v["status"]
        return None

    def wait_status(self, want, timeout=20):
        deadline = time.monotonic() + timeout
        while self.status() != want and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.status()

    def failed_migration(self, timeout=20):
        """VM.getMigrationStatus once the migration has failed (VDSM: the
        verb answered at once, the failure comes here) and the VM is Up."""
        deadline = time.monotonic() + timeout
        while True:
            ms = result(self.c.call("VM.getMigrationStatus", {"vmID": VM}))
            if ms["status"]["code"] != 0 and self.status() == "Up":
                return ms
            if time.monotonic() > deadline:
                raise AssertionError("migration did not fail: %r, %s" % (ms, self.status()))
            time.sleep(0.05)

    def events_any(self, until, timeout=30):
        """(kind, params) of VM's |virt|<kind>| events until until(list)."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not until(got):
            try:
                f = self.ev.read_frame(max(0.05, deadline - time.monotonic()))
            except Exception:
                break
            if f.cmd != "MESSAGE":
                continue
            m = f.json()
            parts = m.get("method", "").split("|")
            if len(parts) == 4 and parts[3] == VM:
                got.append((parts[2], m["params"][VM]))
        return got

    def events(self, kind, until, timeout=30):
        """|virt|<kind>| events of VM until until(params) is true."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                f = self.ev.read_frame(max(0.05, deadline - time.monotonic()))
            except Exception:
                break
            if f.cmd != "MESSAGE":
                continue
            m = f.json()
            if m.get("method") == "|virt|%s|%s" % (kind, VM):
                got.append(m["params"][VM])
                if until(got[-1]):
                    break
        return got


def host_pki(pki, name, signer):
    """A host's TLS files as vdsmd and the tests read them (pki/name/:
    server.crt/.key, ca.crt, client.crt/.key): a certificate for both TLS
    roles, as a host's is (it serves the engine and calls its peers), signed
    by signer ("ca" or "wrong-ca"); every host trusts the test CA."""
    d = os.path.join(pki, name)
    os.makedirs(d)
    key, csr, ext, crt = (os.path.join(d, f) for f in ("server.key", "h.csr", "h.ext", "server.crt"))
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-out", key], check=True, capture_output=True)
    subprocess.run(["openssl", "req", "-new", "-key", key, "-subj", "/CN=" + name, "-out", csr],
                   check=True, capture_output=True)
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth,clientAuth\n"
                "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", os.path.join(pki, signer + ".crt"),
                    "-CAkey", os.path.join(pki, signer + ".key"), "-CAcreateserial",
                    "-days", "2", "-extfile", ext, "-out", crt], check=True, capture_output=True)
    for f in ("ca.crt", "client.crt", "client.key", "wrong-ca.crt"):
        shutil.copy(os.path.join(pki, f), d)
    return d


class AnswersAtOnce(unittest.TestCase):
    """VM.migrate as VDSM answers it (vm.py migrate: the SourceThread is
    started, the call returns "Migration in progress"): accepted before the
    destination is contacted; a destination that cannot be reached or
    refuses fails the migration, seen in VM.getMigrationStatus with the VM
    Up again, never in the verb's answer.  libvirt's test driver: the
    migration never gets as far as libvirt."""

    def setUp(self):
        self.h = Host(None)
        self.addCleanup(self.h.close)
        p = {"vmID": VM, "vmParams": {"vmId": VM, "vmName": "mig-at-once", "memSize": 64}}
        result(self.h.c.call("VM.create", p, timeout=60))
        self.assertEqual(self.h.wait_status("Up"), "Up")

    def test_unreachable_destination(self):
        dead = vt.free_port()
        t0 = time.monotonic()
        r = self.h.c.call("VM.migrate", {"vmID": VM, "params": {
            "vmId": VM, "src": "127.0.0.1", "dst": "127.0.0.1:%d" % dead, "method": "online",
            "tunneled": "false", "abortOnError": "true", "downtime": "500",
            "autoConverge": "true", "compressed": "false", "maxBandwidth": 52}})
        self.assertIs(result(r), True, r)
        self.assertLess(time.monotonic() - t0, 5)
        ms = self.h.failed_migration()
        self.assertEqual(ms["status"]["code"], 12, ms)   # migrateErr
        self.assertIn("127.0.0.1:%d" % dead, ms["status"]["message"])
        self.assertEqual(self.h.status(), "Up")
        # the VM can be migrated again (no migration is left running)
        self.assertIs(result(self.h.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % dead}})), True)
        self.assertEqual(self.h.failed_migration()["status"]["code"], 12)

    def test_destination_refuses(self):
        refuse = ScriptedDestination(lambda req: {"error": {
            "code": 4, "message": "Virtual machine already exists"}})
        self.addCleanup(refuse.close)
        self.assertIs(result(self.h.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % refuse.port}})), True)
        ms = self.h.failed_migration()
        self.assertEqual(ms["status"]["code"], 4, ms)    # the destination's own
        self.assertIn("Virtual machine already exists", ms["status"]["message"])
        self.assertEqual(len(refuse.requests), 1)
        self.assertEqual(refuse.requests[0]["method"], "VM.migrationCreate")
        self.assertEqual(refuse.requests[0]["params"]["params"]["vmId"], VM)

    def test_failure_after_acceptance_destroys_on_destination(self):
        # the destination accepts the VM, then libvirt's migration fails
        # (the test driver cannot migrate): the source sends VM.destroy
        # there (VDSM's SourceThread._recover) before it is Up again here
        accept = ScriptedDestination(lambda req: {"result": (
            {"migrationPort": 0, "params": {"vmId": VM, "status": "Migration Destination"}}
            if req["method"] == "VM.migrationCreate" else True)})
        self.addCleanup(accept.close)
        self.assertIs(result(self.h.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % accept.port}})), True)
        ms = self.h.failed_migration()
        self.assertEqual(ms["status"]["code"], 12, ms)
        self.assertEqual([r["method"] for r in accept.requests],
                         ["VM.migrationCreate", "VM.destroy"])
        self.assertEqual(accept.requests[1]["params"], {"vmID": VM})
        self.assertEqual(self.h.status(), "Up")

    def test_failure_leaves_no_vm_on_destination_vdsmd(self):
        # a real destination vdsmd (its own test:/// driver) that accepted
        # the VM ("Migration Destination") has none once the source reports
        # the failure: nothing half-created is left for the engine to clean
        dst = Host(None)
        self.addCleanup(dst.close)
        self.assertIs(result(self.h.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % dst.d.port}})), True)
        ms = self.h.failed_migration()
        self.assertEqual(ms["status"]["code"], 12, ms)
        got = dst.events("VM_status", lambda e: e["status"] == "Migration Destination", 10)
        self.assertIn("Migration Destination", [e["status"] for e in got])
        self.assertIsNone(dst.status())
        r = dst.c.call("VM.destroy", {"vmID": VM})
        self.assertEqual(vt.error_code(r), 1, r)   # noVM: already gone
        self.assertEqual(self.h.status(), "Up")

    def test_call_errors_stay_synchronous(self):
        # what vm.py checks before the thread starts: no such VM, bad params
        other = "5e1f0000-1111-4222-8333-4444555566ff"
        r = self.h.c.call("VM.migrate", {"vmID": other, "params": {"dst": "127.0.0.1:1"}})
        self.assertEqual(vt.error_code(r), 1, r)
        r = self.h.c.call("VM.migrate", {"vmID": VM, "params": {"method": "online"}})
        self.assertEqual(vt.error_code(r), -32602, r)   # no dst
        self.assertEqual(self.h.status(), "Up")


class Migration(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lvs = privlibvirt.start_all(2)
        if cls.lvs[0].skip_reason:
            reason = cls.lvs[0].skip_reason
            for x in cls.lvs:
                x.stop()
            raise unittest.SkipTest("private libvirtd: " + reason)
        cls.src = Host(cls.lvs[0], cls.lvs[1].uri)
        cls.dst = Host(cls.lvs[1])

    @classmethod
    def tearDownClass(cls):
        for h in ("src", "dst"):
            if hasattr(cls, h):
                getattr(cls, h).close()
        for lv in cls.lvs:
            lv.stop()

    def create(self, xml=None):
        p = {"vmID": VM, "vmParams": {"vmId": VM, "xml": xml or vm_xml(VM, "mig1")}}
        result(self.src.c.call("VM.create", p, timeout=60))
        self.src.events("VM_status", lambda e: e["status"] == "Up")
        self.assertEqual(self.src.status(), "Up")

    def test_1_cancel(self):
        # throttled to 1 MiB/s, the migration of this guest takes several
        # seconds: cancelled as soon as libvirt runs it
        self.create()
        dst = "127.0.0.1:%d" % self.dst.d.port
        self.assertIs(result(self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": dst, "maxBandwidth": 1}})), True)
        self.assertEqual(self.src.status(), "Migration Source")
        # the destination is prepared by the migration job, after the answer
        self.assertEqual(self.dst.wait_status("Migration Destination"), "Migration Destination")
        deadline = time.monotonic() + 10
        while "Outgoing migration" not in self.lvs[0].virsh("domjobinfo", "mig1").stdout:
            self.assertLess(time.monotonic(), deadline, "no migration job in libvirt")
            time.sleep(0.05)
        self.assertIs(result(self.src.c.call("VM.migrateCancel", {"vmID": VM})), True)
        deadline = time.monotonic() + 20
        while self.src.status() != "Up" and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.src.status(), "Up")
        ms = result(self.src.c.call("VM.getMigrationStatus", {"vmID": VM}))
        self.assertEqual(ms["status"]["message"], "Migration canceled")
        self.assertEqual(self.lvs[1].qemu_pids(), [])
        # the source had the destination forget the VM it expected
        # (VM.destroy, before it reported the failure)
        self.assertIsNone(self.dst.status())
        self.assertEqual(vt.error_code(self.dst.c.call("VM.destroy", {"vmID": VM})), 1)
        result(self.src.c.call("VM.destroy", {"vmID": VM}, timeout=DESTROY))

    def test_2_migrate(self):
        self.create()
        dst = "127.0.0.1:%d" % self.dst.d.port
        t0 = time.monotonic()
        self.assertIs(result(self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": dst}})), True)
        print("\nVM.migrate answered (before VM.migrationCreate, as VDSM): %.1f ms"
              % ((time.monotonic() - t0) * 1000))
        def finished(got):
            return (any(k == "VM_status" and e["status"] == "Down" for k, e in got) and
                    any(k == "VM_migration_status" and e["progress"] == 100 for k, e in got))
        got = self.src.events_any(finished)
        print("\nmigration of a 64 MiB TCG guest: %.1f s" % (time.monotonic() - t0))
        self.assertTrue(finished(got), got)
        st = [e["progress"] for k, e in got if k == "VM_migration_status"]
        self.assertTrue(all(isinstance(p, int) for p in st), st)
        self.assertEqual(st, sorted(st))
        down = [e for k, e in got if k == "VM_status" and e["status"] == "Down"]
        self.assertEqual(down[-1]["exitReason"], 4)
        up = self.dst.events("VM_status", lambda e: e["status"] == "Up")
        self.assertEqual(up[-1]["status"], "Up")
        self.assertEqual(self.dst.status(), "Up")
        self.assertEqual(len(self.lvs[1].qemu_pids()), 1)
        self.assertEqual(self.lvs[0].qemu_pids(), [])
        result(self.src.c.call("VM.destroy", {"vmID": VM}, timeout=DESTROY))
        self.assertIsNone(self.src.status())
        self.assertIn("ovirt-vm:clusterVersion", result(self.dst.c.call(
            "Host.dumpxmls", {"vmList": [VM]}))[VM])
        result(self.dst.c.call("VM.destroy", {"vmID": VM}, timeout=DESTROY))

    def test_3_migrate_over_tls(self):
        """vdsmd serving TLS calls the destination vdsmd over TLS with its own
        certificate and checks the destination's against its CA: the whole
        migration between two TLS hosts, and a refusal (code 10, the VM
        stays Up here) when the destination's certificate is not trusted."""
        for h in ("src", "dst"):
            getattr(self, h).close()
            delattr(type(self), h)
        pki = vt.make_pki(tempfile.mkdtemp(prefix="vdsmpki-"))
        self.addCleanup(shutil.rmtree, pki, True)
        type(self).src = Host(self.lvs[0], self.lvs[1].uri, pki=host_pki(pki, "hosta", "ca"))
        type(self).dst = Host(self.lvs[1], pki=host_pki(pki, "hostb", "ca"))
        rogue = vt.Daemon(tls=True, pki=host_pki(pki, "rogue", "wrong-ca"))
        self.addCleanup(rogue.__exit__, None, None, None)
        self.create()
        # accepted at once (VDSM); the refused handshake fails the
        # migration: code 12 (SourceThread._recover: migrateErr) with the
        # reason, the VM Up again here
        self.assertIs(result(self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % rogue.port}})), True)
        ms = self.src.failed_migration()
        self.assertEqual(ms["status"]["code"], 12, ms)
        self.assertIn("certificate verify failed", ms["status"]["message"])
        self.assertEqual(self.src.status(), "Up")
        # the rogue host never got the request (talked to with its own CA)
        rc = rogue.stomp(rogue.tls_sock(ca=os.path.join(pki, "wrong-ca.crt")))
        self.addCleanup(rc.close)
        rc.connect()
        rc.subscribe(vt.RESPONSES, "r", receipt="r1")
        self.assertNotIn(VM, [v["vmId"] for v in result(rc.call("Host.getVMList"))])
        # the trusted TLS destination: migrationCreate over TLS, then libvirt
        t0 = time.monotonic()
        self.assertIs(result(self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % self.dst.d.port}})), True)
        print("\nVM.migrate answered (over TLS, before VM.migrationCreate): %.1f ms"
              % ((time.monotonic() - t0) * 1000))
        got = self.src.events_any(lambda g: any(k == "VM_status" and e["status"] == "Down"
                                                for k, e in g))
        self.assertEqual([e for k, e in got if k == "VM_status"][-1]["exitReason"], 4, got)
        self.dst.events("VM_status", lambda e: e["status"] == "Up")
        self.assertEqual(self.dst.status(), "Up")
        self.assertEqual(self.lvs[0].qemu_pids(), [])
        self.assertEqual(len(self.lvs[1].qemu_pids()), 1)
        result(self.src.c.call("VM.destroy", {"vmID": VM}, timeout=DESTROY))
        result(self.dst.c.call("VM.destroy", {"vmID": VM}, timeout=DESTROY))

    def test_2b_error_text_in_reply(self):
        """The destination's reply is read as JSON-RPC: "error" in a result
        (a string that says "error", a member named "error", the domain
        XML whose description says "error" echoed back) is a success; an
        error member is a refusal with the destination's message, and the
        VM stays Up."""
        xml = vm_xml(VM, "mig1").replace(
            "<memory", '<description>on "error": call the admin</description><memory')
        self.create(xml)
        echo = ScriptedDestination(lambda req: {"result": {
            "migrationPort": 0, "params": {
                "vmId": VM, "status": "Migration Destination", "lastCheck": "error",
                "guestAgent": {"error": None},
                "xml": req["params"]["params"]["_srcDomXML"]}}})
        self.addCleanup(echo.close)
        self.assertIs(result(self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % echo.port, "maxBandwidth": 1}})), True)
        self.assertEqual(self.src.status(), "Migration Source")
        deadline = time.monotonic() + 10
        while "Outgoing migration" not in self.lvs[0].virsh("domjobinfo", "mig1").stdout:
            self.assertLess(time.monotonic(), deadline, "no migration job in libvirt")
            time.sleep(0.05)
        self.assertIs(result(self.src.c.call("VM.migrateCancel", {"vmID": VM})), True)
        deadline = time.monotonic() + 20
        while self.src.status() != "Up" and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.src.status(), "Up")
        self.assertIn('on &quot;error&quot;: call the admin',
                      echo.requests[0]["params"]["params"]["_srcDomXML"])
        # a destination that refuses: the call is accepted, the migration
        # fails with the destination's code and message (SourceThread:
        # self.status = result), the VM Up again
        refuse = ScriptedDestination(lambda req: {"error": {
            "code": 4, "message": "Virtual machine already exists"}})
        self.addCleanup(refuse.close)
        self.assertIs(result(self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % refuse.port}})), True)
        ms = self.src.failed_migration()
        self.assertEqual(ms["status"]["code"], 4, ms)
        self.assertIn("Virtual machine already exists (code 4)", ms["status"]["message"])
        self.assertEqual(self.src.status(), "Up")
        self.assertEqual(self.lvs[1].qemu_pids(), [])
        result(self.src.c.call("VM.destroy", {"vmID": VM}, timeout=DESTROY))


if __name__ == "__main__":
    unittest.main()
