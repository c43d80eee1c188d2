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
                body = json.dumps(dict(answer(req), jsonrpc="2.0", id=req["id"])).encode()
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

    def __init__(self, lv, env=None, pki=None):
        old = {k: os.environ.get(k) for k in (env or {})}
        os.environ.update(env or {})
        try:
            self.d = vt.Daemon(libvirt_uri=lv.uri if lv else "test:///default",
                               tls=pki is not None, pki=pki)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
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


class Migration(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lvs = privlibvirt.start_all(2)
        if cls.lvs[0].skip_reason:
            reason = cls.lvs[0].skip_reason
            for x in cls.lvs:
                x.stop()
            raise unittest.SkipTest("private libvirtd: " + reason)
        cls.src = Host(cls.lvs[0], {"VDSMD_MIGRATION_URI": cls.lvs[1].uri})
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
        self.assertEqual(self.dst.status(), "Migration Destination")
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
        # the destination forgets the VM it expected (as the engine would)
        result(self.dst.c.call("VM.destroy", {"vmID": VM}))
        self.assertIsNone(self.dst.status())
        result(self.src.c.call("VM.destroy", {"vmID": VM}))

    def test_2_migrate(self):
        self.create()
        dst = "127.0.0.1:%d" % self.dst.d.port
        t0 = time.monotonic()
        self.assertIs(result(self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": dst}})), True)
        print("\nVM.migrate answered (migrationCreate over HTTP included): %.1f ms"
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
        result(self.src.c.call("VM.destroy", {"vmID": VM}))
        self.assertIsNone(self.src.status())
        self.assertIn("ovirt-vm:clusterVersion", result(self.dst.c.call(
            "Host.dumpxmls", {"vmList": [VM]}))[VM])
        result(self.dst.c.call("VM.destroy", {"vmID": VM}))

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
        type(self).src = Host(self.lvs[0], {"VDSMD_MIGRATION_URI": self.lvs[1].uri},
                              pki=host_pki(pki, "hosta", "ca"))
        type(self).dst = Host(self.lvs[1], pki=host_pki(pki, "hostb", "ca"))
        rogue = vt.Daemon(tls=True, pki=host_pki(pki, "rogue", "wrong-ca"))
        self.addCleanup(rogue.__exit__, None, None, None)
        self.create()
        r = self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % rogue.port}})
        self.assertEqual(r.get("error", {}).get("code"), 10, r)
        self.assertIn("certificate verify failed", r["error"]["message"])
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
        print("\nVM.migrate answered (migrationCreate over TLS included): %.1f ms"
              % ((time.monotonic() - t0) * 1000))
        got = self.src.events_any(lambda g: any(k == "VM_status" and e["status"] == "Down"
                                                for k, e in g))
        self.assertEqual([e for k, e in got if k == "VM_status"][-1]["exitReason"], 4, got)
        self.dst.events("VM_status", lambda e: e["status"] == "Up")
        self.assertEqual(self.dst.status(), "Up")
        self.assertEqual(self.lvs[0].qemu_pids(), [])
        self.assertEqual(len(self.lvs[1].qemu_pids()), 1)
        result(self.src.c.call("VM.destroy", {"vmID": VM}))
        result(self.dst.c.call("VM.destroy", {"vmID": VM}))

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
        # a destination that refuses: its message, code 12, the VM stays Up
        refuse = ScriptedDestination(lambda req: {"error": {
            "code": 4, "message": "Virtual machine already exists"}})
        self.addCleanup(refuse.close)
        r = self.src.c.call("VM.migrate", {"vmID": VM, "params": {
            "dst": "127.0.0.1:%d" % refuse.port}})
        self.assertEqual(r.get("error", {}).get("code"), 12, r)
        self.assertIn("Virtual machine already exists (code 4)", r["error"]["message"])
        self.assertEqual(self.src.status(), "Up")
        self.assertEqual(self.lvs[1].qemu_pids(), [])
        result(self.src.c.call("VM.destroy", {"vmID": VM}))


if __name__ == "__main__":
    unittest.main()
