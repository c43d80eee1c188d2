"""Security (issue 8): the TLS matrix, `user = NAME` privilege drop, and the
refusal of plaintext on a non-loopback address (PROTOCOL.md section 1).

The TLS matrix: TLS 1.0 and 1.1 refused, no client certificate, an expired
one, a not-yet-valid one and one from another CA refused; a good one
accepted over TLS 1.2 and 1.3; a stalled handshake cut at its timeout.
Privileges: the tests run as root in CI; `nobody` must exist."""

import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import warnings

import vdsmtest as vt

CA_CNF = """[ca]
default_ca = ca_default
[ca_default]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = policy_any
copy_extensions = none
[policy_any]
commonName = supplied
[client_ext]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
"""


def dated_client(pki, name, start, end):
    """A client certificate from the test CA valid only from start to end
    (YYYYMMDDHHMMSSZ): name.crt, name.key in pki."""
    def run(*args):
        subprocess.run(args, cwd=pki, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    with open(os.path.join(pki, "ca.cnf"), "w") as f:
        f.write(CA_CNF)
    open(os.path.join(pki, "index.txt"), "w").close()
    with open(os.path.join(pki, "serial"), "w") as f:
        f.write("%04X\n" % (abs(hash(name)) % 60000 + 16))
    run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-out", name + ".key")
    run("openssl", "req", "-new", "-key", name + ".key", "-subj", "/CN=" + name,
        "-out", name + ".csr")
    run("openssl", "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.crt", "-keyfile", "ca.key",
        "-in", name + ".csr", "-out", name + ".crt", "-startdate", start, "-enddate", end,
        "-extensions", "client_ext", "-notext")


def old_tls_ctx(version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer old versions
        ctx.minimum_version = version
        ctx.maximum_version = version
    return ctx


class TlsMatrix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = vt.make_pki(tempfile.mkdtemp(prefix="vdsmtest-pki-"))
        dated_client(cls.pki, "expired-client", "20200101000000Z", "20200201000000Z")
        dated_client(cls.pki, "future-client", "20991201000000Z", "20991231000000Z")
        cls.d = vt.Daemon("--handshake-timeout", "2", tls=True, pki=cls.pki)

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)
        shutil.rmtree(cls.pki, ignore_errors=True)

    def refused(self, **kw):
        """The handshake fails, or (TLS 1.3: the server judges the client
        certificate after the client finished) the first read gets EOF."""
        start = len(self.d.log_lines())
        try:
            s = vt.tls_connect(self.d.host, self.d.port, self.pki, **kw)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            refused = True
        else:
            try:
                s.sendall(vt.frame("CONNECT", [("accept-version", "1.2")]))
                refused = vt.wait_closed(s, 5)
            except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
                refused = True
            finally:
                s.close()
        self.assertTrue(refused)
        return self.d.wait_log(r"TLS handshake with 127\.0\.0\.1:\d+ failed: (.*)", 5, start)

    def old_version_refused(self, version):
        start = len(self.d.log_lines())
        with self.assertRaises((ssl.SSLError, ConnectionResetError)):
            old_tls_ctx(version).wrap_socket(self.d.sock())
        m = self.d.wait_log(r"TLS handshake with .* failed: (.*)", 5, start)
        self.assertTrue(m, "the server logged no refusal")
        self.assertRegex(m.group(1), r"(?i)version|protocol")

    def test_tls10_refused(self):
        self.old_version_refused(ssl.TLSVersion.TLSv1)

    def test_tls11_refused(self):
        self.old_version_refused(ssl.TLSVersion.TLSv1_1)

    def test_no_client_cert_refused(self):
        m = self.refused(cert=False)
        self.assertTrue(m)
        self.assertRegex(m.group(1), r"(?i)certificate")

    def test_expired_client_cert_refused(self):
        m = self.refused(client="expired-client")
        self.assertTrue(m)
        self.assertRegex(m.group(1), r"(?i)expired")

    def test_not_yet_valid_client_cert_refused(self):
        m = self.refused(client="future-client")
        self.assertTrue(m)
        self.assertRegex(m.group(1), r"(?i)not yet valid|certificate")

    def test_wrong_ca_client_cert_refused(self):
        m = self.refused(client="wrong-client")
        self.assertTrue(m)
        self.assertRegex(m.group(1), r"(?i)certificate|unknown ca")

    def good(self, maximum):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.maximum_version = maximum
        ctx.load_verify_locations(os.path.join(self.pki, "ca.crt"))
        ctx.load_cert_chain(os.path.join(self.pki, "client.crt"),
                            os.path.join(self.pki, "client.key"))
        s = ctx.wrap_socket(self.d.sock())
        c = vt.Conn(s)
        self.addCleanup(c.close)
        self.assertEqual(c.connect().cmd, "CONNECTED")
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        self.assertIs(c.call("Host.ping2")["result"], True)
        return s.version()

    def test_good_cert_accepted_tls12(self):
        self.assertEqual(self.good(ssl.TLSVersion.TLSv1_2), "TLSv1.2")

    def test_good_cert_accepted_tls13(self):
        self.assertEqual(self.good(ssl.TLSVersion.MAXIMUM_SUPPORTED), "TLSv1.3")

    def test_handshake_timeout_enforced(self):
        start = len(self.d.log_lines())
        s = self.d.sock()
        t0 = time.monotonic()
        self.assertTrue(vt.wait_closed(s, 6))
        took = time.monotonic() - t0
        s.close()
        self.assertGreater(took, 1.5)
        self.assertTrue(self.d.wait_log(r"TLS handshake timed out", 3, start))


def free_privileged_port():
    for port in range(1000, 600, -1):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port below 1024")


def proc_ids(pid):
    """(uids, gids, groups) of a process from /proc/<pid>/status."""
    ids = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Uid", "Gid", "Groups"):
                ids[k] = [int(x) for x in v.split()]
    return ids["Uid"], ids["Gid"], ids["Groups"]


class PrivilegeDrop(unittest.TestCase):
    def setUp(self):
        self.assertEqual(os.geteuid(), 0, "these tests run as root (as CI does)")
        self.nobody = pwd.getpwnam("nobody")

    def daemon_as_nobody(self, *args, **kw):
        """A daemon started as root with --user nobody; its temp dir is made
        reachable and its storage root owned by nobody (the deployment's job)."""
        d = vt.Daemon("--user", "nobody", *args, start=False, **kw)
        os.chmod(d.tmp, 0o755)
        st = os.path.join(d.tmp, "storage")
        os.makedirs(st, exist_ok=True)
        os.chown(st, self.nobody.pw_uid, self.nobody.pw_gid)
        d.start()
        self.addCleanup(d.__exit__, None, None, None)
        return d

    def assert_runs_as_nobody(self, d):
        # the drop follows the "listening on" line the harness waits for
        self.assertTrue(d.wait_log(r"running as user nobody \(uid 65534", 5))
        uids, gids, groups = proc_ids(d.proc.pid)
        self.assertEqual(uids, [self.nobody.pw_uid] * 4)  # real, effective, saved, fs
        self.assertEqual(gids, [self.nobody.pw_gid] * 4)
        self.assertNotIn(0, groups)

    def test_drops_after_binding_privileged_port(self):
        port = free_privileged_port()
        d = self.daemon_as_nobody("--port", str(port))
        self.assertEqual(d.port, port)
        self.assert_runs_as_nobody(d)
        self.assertTrue(d.wait_ready())
        c = d.stomp()
        self.addCleanup(c.close)
        c.connect()
        c.subscribe(vt.RESPONSES, "r", receipt="s")
        self.assertIs(c.call("Host.ping2")["result"], True)
        with self.subTest("storage as nobody"):
            if not os.stat("/").st_mode & 0o001:
                # a root directory other users cannot search (a chroot made
                # with mktemp -d): no process running as nobody reaches a file
                self.skipTest("/ is mode %o: nobody cannot reach the storage root"
                              % (os.stat("/").st_mode & 0o777))
            self.assertIsInstance(c.call("Host.getStorageDomains")["result"], list)

    def test_tls_files_readable_only_by_root(self):
        pki = vt.make_pki(tempfile.mkdtemp(prefix="vdsmtest-pki-"))
        self.addCleanup(shutil.rmtree, pki, True)
        os.chmod(pki, 0o700)
        for f in os.listdir(pki):
            os.chmod(os.path.join(pki, f), 0o600)
        d = self.daemon_as_nobody(tls=True, pki=pki)
        self.assert_runs_as_nobody(d)
        c = vt.Conn(vt.tls_connect(d.host, d.port, pki))
        self.addCleanup(c.close)
        self.assertEqual(c.connect().cmd, "CONNECTED")

    def test_unknown_user_refused(self):
        r = subprocess.run([vt.VDSMD_BIN, "--config", "/dev/null", "--listen", "127.0.0.1",
                            "--port", "0", "--tls", "off", "--libvirt-uri", "test:///default",
                            "--user", "no-such-user-vdsmd"], capture_output=True, timeout=10)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b'user "no-such-user-vdsmd": no such user', r.stderr)

    def test_user_key_in_config_file(self):
        d = vt.Daemon(start=False)
        self.addCleanup(d.__exit__, None, None, None)
        with open(os.path.join(d.tmp, "vdsmd.conf"), "w") as f:
            f.write("[vdsmd]\nuser = nobody\n")
        os.chmod(d.tmp, 0o755)
        os.makedirs(os.path.join(d.tmp, "storage"), exist_ok=True)
        os.chown(os.path.join(d.tmp, "storage"), self.nobody.pw_uid, self.nobody.pw_gid)
        d.start()
        self.assert_runs_as_nobody(d)

    def test_no_user_keeps_root(self):
        with vt.Daemon() as d:
            uids, _, _ = proc_ids(d.proc.pid)
            self.assertEqual(uids, [0] * 4)


class Plaintext(unittest.TestCase):
    def run_vdsmd(self, *args):
        return subprocess.run([vt.VDSMD_BIN, "--config", "/dev/null", "--port", "0",
                               "--libvirt-uri", "test:///default", "--log-file", "stderr",
                               "--storage-root", tempfile.gettempdir()] + list(args),
                              capture_output=True, timeout=15)

    def test_refused_on_any_address(self):
        for addr in ("::", "0.0.0.0"):
            r = self.run_vdsmd("--listen", addr, "--tls", "off")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(b"not a loopback address", r.stderr)
            self.assertIn(b"allow_plaintext", r.stderr)
            self.assertNotIn(b"listening on", r.stderr)  # refused before binding

    def test_allowed_with_loud_warning(self):
        # allow_plaintext passes the check (warning logged); binding then
        # fails on a port held here, so no test binds a non-loopback address.
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        try:
            port = held.getsockname()[1]
            r = subprocess.run([vt.VDSMD_BIN, "--config", "/dev/null", "--listen", "0.0.0.0",
                                "--port", str(port), "--tls", "off", "--allow-plaintext", "yes",
                                "--libvirt-uri", "test:///default"],
                               capture_output=True, timeout=15)
        finally:
            held.close()
        err = r.stderr.decode()
        self.assertIn("SECURITY WARNING: tls is off on 0.0.0.0 (allow_plaintext = yes)", err)
        self.assertIn("PLAINTEXT", err)
        self.assertIn("cannot listen on 0.0.0.0 port %d" % port, err)

    def test_loopback_needs_no_override(self):
        for addr in ("127.0.0.1", "::1", "localhost"):
            d = vt.Daemon(start=False)
            d.host = addr
            try:
                d.start()
                self.assertFalse(any("SECURITY WARNING" in l for l in d.log_lines()))
                self.assertEqual(d.http("GET", "/health")[0] in (200, 503), True)
            finally:
                d.__exit__(None, None, None)

    def test_tls_on_any_address_is_fine(self):
        pki = vt.make_pki(tempfile.mkdtemp(prefix="vdsmtest-pki-"))
        self.addCleanup(shutil.rmtree, pki, True)
        # the check passes; stopped before binding by a port held here
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        try:
            r = self.run_vdsmd("--listen", "0.0.0.0", "--port", str(held.getsockname()[1]),
                               "--tls", "on", "--cert-file", os.path.join(pki, "server.crt"),
                               "--key-file", os.path.join(pki, "server.key"),
                               "--ca-file", os.path.join(pki, "ca.crt"))
        finally:
            held.close()
        self.assertNotIn(b"SECURITY WARNING", r.stderr)
        self.assertNotIn(b"not a loopback address", r.stderr)
        self.assertIn(b"cannot listen on 0.0.0.0", r.stderr)


if __name__ == "__main__":
    unittest.main()
