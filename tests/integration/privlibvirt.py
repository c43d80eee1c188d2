"""A private libvirt daemon for the tests that need real QEMU (hotplug,
consoles, recovery across a vdsmd restart): Debian's libvirtd started in
session mode as an unprivileged user (nobody) with its own runtime, config
and cache directories under a temp dir, so it shares nothing with a system
libvirt or with another test's daemon.  Its URI is
qemu+unix:///session?socket=<tmp>/run/libvirt/libvirt-sock; root (the test
and vdsmd) connects through that socket.  VMs run under TCG (type 'qemu').

    lv = PrivateLibvirt()          # starts it, or sets lv.skip_reason
    if lv.skip_reason: raise unittest.SkipTest(lv.skip_reason)
    ... lv.uri ...
    lv.stop()                      # destroys every domain, kills every qemu
                                   # it started and the daemon, removes tmp
    lv = start_or_skip()           # the same, for a setUpClass

When libvirtd or QEMU is missing or cannot start, skip_reason says why:
those tests are skipped with it, never passed."""

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

LIBVIRTD = "/usr/sbin/libvirtd"
QEMU = "/usr/bin/qemu-system-x86_64"
USER = "nobody"


class PrivateLibvirt:
    def __init__(self, start=True):
        self.tmp = None
        self.proc = None
        self.uri = None
        self.skip_reason = None
        if start:
            self.start()

    def _env(self):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.home,
               "XDG_RUNTIME_DIR": self.run, "XDG_CONFIG_HOME": self.cfg,
               "XDG_CACHE_HOME": self.cache, "LANG": "C"}
        return env

    def start(self, timeout=30):
        """Start and wait until it answers (and QEMU is probed)."""
        return self.spawn() and self.wait_ready(timeout)

    def spawn(self):
        """Start the daemon without waiting (see start_all)."""
        for path in (LIBVIRTD, QEMU, "/usr/bin/setpriv", "/usr/bin/virsh"):
            if not os.access(path, os.X_OK):
                self.skip_reason = "%s is not installed" % path
                return False
        try:
            pw = pwd.getpwnam(USER)
        except KeyError:
            self.skip_reason = "no user %s to run a session libvirtd as" % USER
            return False
        if os.geteuid() != 0:
            self.skip_reason = "needs root to start libvirtd as %s" % USER
            return False
        if self.tmp is None:
            self.tmp = tempfile.mkdtemp(prefix="vdsmd-lv-")
            os.chmod(self.tmp, 0o755)
            self.home, self.run, self.cfg, self.cache, self.images = (
                os.path.join(self.tmp, d) for d in ("home", "run", "cfg", "cache", "images"))
            for d in (self.home, self.run, self.cfg, self.cache, self.images):
                os.makedirs(d)
                os.chown(d, pw.pw_uid, pw.pw_gid)
            os.chmod(self.images, 0o777)
        self.sock = os.path.join(self.run, "libvirt", "libvirt-sock")
        self.log = open(os.path.join(self.tmp, "libvirtd.log"), "ab")
        self.proc = subprocess.Popen(
            ["/usr/bin/setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid,
             "--clear-groups", LIBVIRTD],
            env=self._env(), cwd=self.tmp, stdout=self.log, stderr=self.log,
            start_new_session=True)
        self.uri = "qemu+unix:///session?socket=" + self.sock
        return True

    def wait_ready(self, timeout=30):
        if not self.proc:
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.skip_reason = "libvirtd exited with %s: %s" % (
                    self.proc.returncode, self.log_tail())
                self.proc = None
                return False
            if os.path.exists(self.sock) and self.virsh("uri").returncode == 0:
                # probe QEMU now (seconds on a fresh daemon), not in the
                # first VM.create a test measures
                r = self.virsh("domcapabilities", "--virttype", "qemu", timeout=60)
                if r.returncode != 0:
                    self.skip_reason = "QEMU is not usable: " + r.stderr.strip()
                    self.stop()
                    return False
                return True
            time.sleep(0.05)
        self.skip_reason = "libvirtd did not answer within %d s: %s" % (timeout, self.log_tail())
        self.stop()
        return False

    def log_tail(self, n=400):
        try:
            with open(os.path.join(self.tmp, "libvirtd.log"), "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def virsh(self, *args, timeout=30):
        return subprocess.run(["virsh", "-q", "-c", self.uri] + list(args),
                              capture_output=True, text=True, timeout=timeout)

    def image(self, name, size=1 << 20):
        """A raw image file the daemon's QEMU (nobody) can open."""
        p = os.path.join(self.images, name)
        with open(p, "wb") as f:
            f.truncate(size)
        os.chmod(p, 0o666)
        return p

    def qemu_pids(self):
        """The QEMU processes of this daemon's domains."""
        out = []
        for pid in self.tmp_pids():
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and b"qemu-system" in argv[0] and any(a.startswith(b"guest=") for a in argv):
                out.append(pid)
        return sorted(out)

    def tmp_pids(self):
        """Every process whose command line names our temp dir (QEMU
        capability probes, domains whose pid file is gone)."""
        pids = []
        if not self.tmp:
            return pids
        key = self.tmp.encode()
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if key in f.read():
                        pids.append(int(d))
            except OSError:
                pass
        return pids

    def stop_daemon(self):
        """Stop libvirtd only (the VMs keep running, as on a restart)."""
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def stop(self):
        if self.proc:
            for name in self.virsh("list", "--name").stdout.split():
                self.virsh("destroy", name)
        pids = self.qemu_pids()
        self.stop_daemon()
        for pid in pids + self.tmp_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def start_all(n):
    """n private daemons started together (their QEMU probes overlap);
    returns them, the first failure's reason in every one's skip_reason."""
    lvs = [PrivateLibvirt(start=False) for _ in range(n)]
    for lv in lvs:
        lv.spawn()
    for lv in lvs:
        if not lv.skip_reason:
            lv.wait_ready()
    reason = next((lv.skip_reason for lv in lvs if lv.skip_reason), None)
    if reason:
        for lv in lvs:
            lv.skip_reason = reason
    return lvs


def start_or_skip():
    """A started PrivateLibvirt; raises unittest.SkipTest with the reason
    (everything stopped) when it cannot start."""
    lv = PrivateLibvirt()
    if lv.skip_reason:
        reason = lv.skip_reason
        lv.stop()
        raise unittest.SkipTest("private libvirtd: " + reason)
    return lv
