"""vdsm-tool (tools/vdsm-tool, issue 26) against a temporary root prefix:
the key and certificate requests for the engine's CA, a certificate signed
by a test CA (examples/make-pki.sh) installed where vdsmd reads it, and the
real build/vdsmd then serving TLS with it; the libvirt settings it writes
and the missing pieces it reports."""

import os
import shutil
import ssl
import stat
import subprocess
import tempfile
import unittest

import vdsmtest as vt

TOOL = os.path.join(vt.REPO, "tools", "vdsm-tool")
PKI = "/etc/pki/vdsm"


def tool(root, *args, config=None):
    cmd = ["/usr/bin/python3", TOOL, "--root", root]
    if config:
        cmd += ["--config", config]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60)


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def sign(pki, req, out, ca="ca"):
    """What the engine's pki-enroll-request.sh does, with the test CA."""
    ext = out + ".ext"
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth,clientAuth\n"
                "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    subprocess.run(["openssl", "x509", "-req", "-in", req, "-CA", os.path.join(pki, ca + ".crt"),
                    "-CAkey", os.path.join(pki, ca + ".key"), "-CAcreateserial",
                    "-CAserial", out + ".srl", "-days", "2", "-sha256", "-extfile", ext,
                    "-out", out], check=True, capture_output=True)
    return out


class SetupTool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = vt.make_pki(tempfile.mkdtemp(prefix="vdsm-tool-pki-"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.pki, ignore_errors=True)

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="vdsm-tool-root-")
        self.addCleanup(shutil.rmtree, self.root, True)

    def r(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def request(self):
        p = tool(self.root, "certificate-request", "--subject", "/O=Test/CN=localhost")
        self.assertEqual(p.returncode, 0, p.stderr)
        return self.r(PKI + "/requests/vdsm.req"), self.r(PKI + "/requests/qemu.req")

    def test_request_verifies_and_names_the_host(self):
        vreq, qreq = self.request()
        for req, subject in ((vreq, "CN = localhost"), (qreq, "OU = qemu")):
            v = subprocess.run(["openssl", "req", "-verify", "-noout", "-in", req],
                               capture_output=True, text=True)
            self.assertEqual(v.returncode, 0, v.stderr)
            self.assertIn("verify OK", v.stdout + v.stderr)
            text = subprocess.run(["openssl", "req", "-in", req, "-noout", "-text"],
                                  capture_output=True, text=True, check=True).stdout
            self.assertIn(subject, text)
            self.assertIn("DNS:localhost", text)
        key = self.r(PKI + "/keys/vdsmkey.pending.pem")
        self.assertEqual(stat.S_IMODE(os.stat(key).st_mode), 0o400)
        # a second request keeps the pending key (the first CSR stays valid)
        before = read(key, "rb")
        self.request()
        self.assertEqual(read(key, "rb"), before)

    def test_signed_certificate_installed_and_served_over_tls(self):
        missing = tool(self.root, "is-configured", "--module", "certificates")
        self.assertEqual(missing.returncode, 1)
        lines = [ln for ln in missing.stdout.splitlines() if "missing:" in ln]
        self.assertEqual(len(lines), 3, missing.stdout)
        self.assertTrue(any(PKI + "/certs/vdsmcert.pem" in ln for ln in lines))

        vreq, qreq = self.request()
        cert = sign(self.pki, vreq, os.path.join(self.root, "host.cer"))
        qcert = sign(self.pki, qreq, os.path.join(self.root, "host-qemu.cer"))
        ca = os.path.join(self.pki, "ca.crt")
        p = tool(self.root, "certificate-install", "--cert", cert, "--ca", ca,
                 "--qemu-cert", qcert, "--qemu-ca", ca)
        self.assertEqual(p.returncode, 0, p.stderr)
        ok = tool(self.root, "is-configured", "--module", "certificates")
        self.assertEqual(ok.returncode, 0, ok.stdout)
        self.assertNotIn("missing", ok.stdout)
        self.assertFalse(os.path.exists(self.r(PKI + "/keys/vdsmkey.pending.pem")))
        key = self.r(PKI + "/keys/vdsmkey.pem")
        self.assertEqual(stat.S_IMODE(os.stat(key).st_mode), 0o440)

        installed = self.r(PKI + "/certs/vdsmcert.pem")
        with vt.Daemon("--tls", "on", "--cert-file", installed, "--key-file", key,
                       "--ca-file", self.r(PKI + "/certs/cacert.pem")) as d:
            s = vt.tls_connect("127.0.0.1", d.port, self.pki)
            served = s.getpeercert(binary_form=True)
            pem = read(installed)
            self.assertEqual(served, ssl.PEM_cert_to_DER_cert(pem))
            c = vt.Conn(s)
            c.connect()
            c.subscribe(vt.RESPONSES, "s1")
            self.assertIs(vt.call_ready(c, "Host.ping2").get("result"), True)
            c.close()
            s.close()
            # without a client certificate the daemon refuses the handshake
            with self.assertRaises((ssl.SSLError, OSError, EOFError)):
                s2 = vt.tls_connect("127.0.0.1", d.port, self.pki, cert=False)
                s2.settimeout(5)
                s2.sendall(b"CONNECT\naccept-version:1.2\n\n\0")
                if not s2.recv(1):
                    raise EOFError
            self.assertEqual(d.stop(), 0)

    def test_install_refuses_a_foreign_ca_or_key(self):
        vreq, _ = self.request()
        wrong = sign(self.pki, vreq, os.path.join(self.root, "wrong.cer"), ca="wrong-ca")
        ca = os.path.join(self.pki, "ca.crt")
        p = tool(self.root, "certificate-install", "--cert", wrong, "--ca", ca)
        self.assertEqual(p.returncode, 1)
        self.assertIn("is not signed by", p.stderr)
        # a certificate from the right CA, but made for another key
        other = os.path.join(self.pki, "server.crt")
        p = tool(self.root, "certificate-install", "--cert", other, "--ca", ca)
        self.assertEqual(p.returncode, 1)
        self.assertIn("was not made for the pending key", p.stderr)
        self.assertFalse(os.path.exists(self.r(PKI + "/certs/vdsmcert.pem")))
        self.assertTrue(os.path.exists(self.r(PKI + "/keys/vdsmkey.pending.pem")))

    def test_install_without_request_says_what_to_do(self):
        ca = os.path.join(self.pki, "ca.crt")
        p = tool(self.root, "certificate-install", "--cert", ca, "--ca", ca)
        self.assertEqual(p.returncode, 1)
        self.assertIn("run vdsm-tool certificate-request first", p.stderr)

    def test_libvirt_settings_written_once_and_kept(self):
        conf = self.r("/etc/libvirt/libvirtd.conf")
        os.makedirs(os.path.dirname(conf))
        with open(conf, "w") as f:
            f.write("# the administrator's own line\nlog_level = 3\n")
        self.assertEqual(tool(self.root, "configure", "--module", "libvirt").returncode, 0)
        first = read(conf)
        self.assertEqual(tool(self.root, "configure", "--force").returncode, 0)
        second = read(conf)
        self.assertEqual(first, second)  # same block, same host_uuid
        self.assertEqual(second.count("## beginning of configuration section by vdsmd"), 1)
        self.assertIn("log_level = 3\n", second)
        self.assertIn("listen_tls=1\n", second)
        self.assertIn('cert_file="/etc/pki/vdsm/certs/vdsmcert.pem"', second)
        qemu = read(self.r("/etc/libvirt/qemu.conf"))
        self.assertIn('spice_tls_x509_cert_dir="/etc/pki/vdsm/libvirt-spice"', qemu)
        self.assertIn('vnc_tls_x509_cert_dir="/etc/pki/vdsm/libvirt-vnc"', qemu)
        self.assertIn('migrate_tls_x509_cert_dir="/etc/pki/vdsm/libvirt-migrate"', qemu)
        link = self.r("/etc/systemd/system/libvirtd.service.requires/libvirtd-tls.socket")
        self.assertEqual(os.readlink(link), "/lib/systemd/system/libvirtd-tls.socket")

        # settings present, TLS material not yet: one line per missing file
        p = tool(self.root, "is-configured", "--module", "libvirt")
        self.assertEqual(p.returncode, 1)
        self.assertNotIn("qemu.conf", p.stdout)
        self.assertIn("libvirt-spice certificate /etc/pki/vdsm/libvirt-spice/server-cert.pem",
                      p.stdout)
        self.assertIn("/etc/pki/vdsm/libvirt-migrate/client-key.pem", p.stdout)

        vreq, qreq = self.request()
        ca = os.path.join(self.pki, "ca.crt")
        p = tool(self.root, "certificate-install",
                 "--cert", sign(self.pki, vreq, os.path.join(self.root, "h.cer")), "--ca", ca,
                 "--qemu-cert", sign(self.pki, qreq, os.path.join(self.root, "q.cer")),
                 "--qemu-ca", ca)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = tool(self.root, "is-configured")
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("the host is configured for vdsmd", p.stdout)

        # an edited setting is reported by name
        text = read(self.r("/etc/libvirt/qemu.conf")).replace("vnc_tls=1", "vnc_tls=0")
        with open(self.r("/etc/libvirt/qemu.conf"), "w") as f:
            f.write(text)
        p = tool(self.root, "is-configured", "--module", "libvirt")
        self.assertEqual(p.returncode, 1)
        self.assertIn("qemu.conf: vnc_tls = 1 is not set", p.stdout)

    def test_libvirtd_serves_tls_with_what_vdsm_tool_wrote(self):
        """Debian's libvirtd, in private mount, network and pid namespaces
        (/etc with an overlay, the temporary root's /etc/libvirt and /etc/pki
        bound over it; tmpfs /run and libvirt state), started with --listen
        on the settings vdsm-tool configure wrote: it serves TLS on 16514
        with the installed certificate and virsh connects over
        qemu+tls://localhost/system (its QEMU driver read our qemu.conf)."""
        if os.geteuid() != 0:
            self.skipTest("needs root (namespaces, mounts)")
        for tool_path in ("/usr/sbin/libvirtd", "/usr/bin/virsh", "/usr/bin/unshare"):
            if not os.access(tool_path, os.X_OK):
                self.skipTest("%s is not installed" % tool_path)
        # a chroot whose root is no mount point (../shared/fresh-debian-check.sh)
        # cannot make a mount namespace private: nothing to start libvirtd in
        probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                               capture_output=True, text=True, timeout=30)
        if probe.returncode != 0:
            self.skipTest("no private mount namespace here: " + probe.stderr.strip())
        etc = self.r("/etc/libvirt")
        shutil.copytree("/etc/libvirt", etc, symlinks=True)   # Debian's files, ours added
        self.assertEqual(tool(self.root, "configure").returncode, 0)
        vreq, qreq = self.request()
        ca = os.path.join(self.pki, "ca.crt")
        p = tool(self.root, "certificate-install",
                 "--cert", sign(self.pki, vreq, os.path.join(self.root, "h.cer")), "--ca", ca,
                 "--qemu-cert", sign(self.pki, qreq, os.path.join(self.root, "q.cer")),
                 "--qemu-ca", ca)
        self.assertEqual(p.returncode, 0, p.stderr)
        client = os.path.join(self.root, "clientpki")
        os.makedirs(client)
        for src, dst in (("ca.crt", "cacert.pem"), ("client.crt", "clientcert.pem"),
                         ("client.key", "clientkey.pem")):
            shutil.copy(os.path.join(self.pki, src), os.path.join(client, dst))
        script = os.path.join(self.root, "libvirtd.sh")
        with open(script, "w") as f:
            f.write("""set -e
R=%(root)s
mkdir -p $R/ov/u $R/ov/w
mount -t tmpfs tmpfs /run
for d in /var/lib/libvirt /var/cache/libvirt /var/log/libvirt; do mount -t tmpfs tmpfs $d; done
mount -t overlay overlay -o lowerdir=/etc,upperdir=$R/ov/u,workdir=$R/ov/w /etc
mount --bind $R/etc/libvirt /etc/libvirt
mkdir -p /etc/pki && mount --bind $R/etc/pki /etc/pki
ip link set lo up
/usr/sbin/libvirtd --listen > $R/libvirtd.log 2>&1 &
for i in $(seq 150); do
    (exec 3<>/dev/tcp/127.0.0.1/16514) 2>/dev/null && break
    sleep 0.2
done
echo | timeout 20 openssl s_client -connect 127.0.0.1:16514 -verify_return_error \
    -CAfile %(ca)s -cert %(client)s/clientcert.pem -key %(client)s/clientkey.pem 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256
timeout 30 virsh -c 'qemu+tls://localhost/system?pkipath=%(client)s' version
""" % {"root": self.root, "ca": ca, "client": client})
        r = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork",
                            "--propagation", "private", "bash", script],
                           capture_output=True, text=True, timeout=120)
        log = os.path.join(self.root, "libvirtd.log")
        detail = r.stdout + r.stderr + (read(log) if os.path.exists(log) else "")
        want = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in",
                               self.r(PKI + "/certs/vdsmcert.pem")],
                              capture_output=True, text=True, check=True).stdout.strip()
        self.assertIn(want, r.stdout, detail)
        self.assertIn("Using API: QEMU", r.stdout, detail)
        self.assertEqual(r.returncode, 0, detail)

    def test_tls_off_needs_no_certificate(self):
        conf = self.r("/etc/vdsmd/vdsmd.conf")
        os.makedirs(os.path.dirname(conf))
        with open(conf, "w") as f:
            f.write("[vdsmd]\ntls = off\nlisten = 127.0.0.1\n")
        p = tool(self.root, "is-configured", "--module", "certificates")
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("tls is off", p.stdout)

    def test_unknown_module_and_bad_root(self):
        p = tool(self.root, "is-configured", "--module", "sanlock")
        self.assertEqual(p.returncode, 2)
        self.assertIn("invalid choice", p.stderr)
        p = tool(os.path.join(self.root, "nope"), "is-configured")
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a directory", p.stderr)


if __name__ == "__main__":
    unittest.main()
