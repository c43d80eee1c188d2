"""rabbitmq - a private, loopback-only RabbitMQ for tests and benchmarks.

    with rabbitmq.RabbitMQ() as mq:      # starts it, fails loudly when it cannot
        mq.stomp_port, mq.amqp_port
        # RabbitMQ(pki=DIR): also STOMP over TLS on mq.stomps_port with
        # DIR/server.{crt,key}, client certificates required (DIR/ca.crt)
        mq.restart()                     # same data dir and ports
    # stopped, with its epmd, temp dir removed

Everything is private: a temp dir holds RABBITMQ_MNESIA_BASE, LOG_BASE,
the config file and the enabled-plugins file ([rabbitmq_stomp], enabled
offline: no rabbitmq-plugins call, no network).  We run our own epmd on a
free loopback port (ERL_EPMD_ADDRESS=127.0.0.1, ERL_EPMD_PORT) so a system
epmd is neither used nor left behind; the node's AMQP, STOMP and
distribution listeners bind 127.0.0.1 on free ports.  Processes run in
their own session and are killed as a group on stop().  The node runs as
the current user (root in CI) straight from /usr/lib/rabbitmq/bin, not
through Debian's su wrapper.

If the server cannot start, start() raises RuntimeError with the reason
and the tail of the node's log (tests fail, never skip).
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
EPMD = "/usr/bin/epmd"
START_TIMEOUT = float(os.environ.get("RABBITMQ_START_TIMEOUT", "60"))


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (bound then released)."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def port_open(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class RabbitMQ:
    def __init__(self, start=True, extra_conf="", pki=None):
        self.tmp = tempfile.mkdtemp(prefix="vdsm-rabbitmq-")
        (self.amqp_port, self.stomp_port, self.dist_port,
         self.epmd_port, self.stomps_port) = free_ports(5)
        self.pki = pki
        self.node = "vdsmtest%d@localhost" % os.getpid()
        self.extra_conf = extra_conf
        self.proc = None
        self.epmd = None
        self._log = None
        if start:
            try:
                self.start()
            except BaseException:
                self.close()
                raise

    # -- files and environment --
    def _write_files(self):
        for d in ("mnesia", "log", "home"):
            os.makedirs(os.path.join(self.tmp, d), exist_ok=True)
        with open(os.path.join(self.tmp, "enabled_plugins"), "w") as f:
            f.write("[rabbitmq_stomp].\n")
        with open(os.path.join(self.tmp, "rabbitmq.conf"), "w") as f:
            f.write("listeners.tcp.default = 127.0.0.1:%d\n" % self.amqp_port)
            f.write("stomp.listeners.tcp.1 = 127.0.0.1:%d\n" % self.stomp_port)
            f.write("stomp.tcp_listen_options.nodelay = true\n")
            f.write("management.tcp.ip = 127.0.0.1\n")
            f.write("log.file.level = info\n")
            f.write("log.console = false\n")
            if self.pki:
                f.write("stomp.listeners.ssl.1 = 127.0.0.1:%d\n" % self.stomps_port)
                f.write("ssl_options.cacertfile = %s\n" % os.path.join(self.pki, "ca.crt"))
                f.write("ssl_options.certfile = %s\n" % os.path.join(self.pki, "server.crt"))
                f.write("ssl_options.keyfile = %s\n" % os.path.join(self.pki, "server.key"))
                f.write("ssl_options.verify = verify_peer\n")
                f.write("ssl_options.fail_if_no_peer_cert = true\n")
            f.write(self.extra_conf)
        cookie = os.path.join(self.tmp, "home", ".erlang.cookie")
        if not os.path.exists(cookie):
            with open(cookie, "w") as f:
                f.write("VDSMTESTCOOKIE%d" % os.getpid())
            os.chmod(cookie, 0o400)

    def env(self):
        e = dict(os.environ)
        e.update({
            "HOME": os.path.join(self.tmp, "home"),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": os.path.join(self.tmp, "mnesia"),
            "RABBITMQ_LOG_BASE": os.path.join(self.tmp, "log"),
            "RABBITMQ_CONFIG_FILE": os.path.join(self.tmp, "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": os.path.join(self.tmp, "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(self.tmp, "enabled_plugins"),
            "RABBITMQ_PID_FILE": os.path.join(self.tmp, "rabbit.pid"),
            "RABBITMQ_LOGS": os.path.join(self.tmp, "log", "node.log"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_ALLOW_INPUT": "",
        })
        # the node's own distribution listener: loopback only
        e["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = (
            "-kernel inet_dist_use_interface {127,0,0,1}")
        e.pop("RABBITMQ_ENABLED_PLUGINS", None)
        return e

    # -- lifecycle --
    def start(self, timeout=START_TIMEOUT):
        if not os.path.exists(SERVER):
            raise RuntimeError("RabbitMQ is not installed (%s missing): "
                               "apt-get install rabbitmq-server (scripts/deps.sh)" % SERVER)
        self._write_files()
        env = self.env()
        if self.epmd is None or self.epmd.poll() is not None:
            self.epmd = subprocess.Popen(
                [EPMD, "-address", "127.0.0.1", "-port", str(self.epmd_port)],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        self._log = open(os.path.join(self.tmp, "log", "console.log"), "ab")
        self.proc = subprocess.Popen([SERVER], env=env, cwd=self.tmp,
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("RabbitMQ exited with status %s during startup:\n%s"
                                   % (self.proc.returncode, self.log_tail()))
            if port_open(self.stomp_port) and (not self.pki or port_open(self.stomps_port)):
                return self
            time.sleep(0.2)
        raise RuntimeError("RabbitMQ did not open its STOMP port %d within %gs:\n%s"
                           % (self.stomp_port, timeout, self.log_tail()))

    def log_tail(self, n=40):
        out = []
        for name in ("console.log", "node.log"):
            p = os.path.join(self.tmp, "log", name)
            try:
                with open(p, "rb") as f:
                    lines = f.read().decode("utf-8", "replace").splitlines()
                out.append("--- %s ---" % name)
                out.extend(lines[-n:])
            except OSError:
                pass
        return "\n".join(out)

    @staticmethod
    def _kill_group(proc, sig, wait):
        if proc is None:
            return
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        # children left in the group (erl_child_setup, inet_gethost)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, sig=signal.SIGTERM, wait=20):
        """Stop the node (SIGTERM: Erlang's orderly shutdown); epmd stays
        (restart() reuses it).  Waits for the STOMP port to close."""
        self._kill_group(self.proc, sig, wait)
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None
        deadline = time.monotonic() + 10
        while port_open(self.stomp_port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def restart(self, sig=signal.SIGTERM):
        self.stop(sig)
        return self.start()

    def close(self):
        self.stop()
        self._kill_group(self.epmd, signal.SIGTERM, 5)
        self.epmd = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cpu_seconds(self):
        """User+system CPU seconds of the node's process group so far
        (beam.smp and its children), from /proc."""
        if not self.proc:
            return 0.0
        total = 0
        tick = os.sysconf("SC_CLK_TCK")
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    st = f.read()
            except OSError:
                continue
            fields = st[st.rfind(")") + 2:].split()
            # fields[2] = pgrp, [11] utime, [12] stime (0-based after state)
            if int(fields[2]) == self.proc.pid:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def memory_breakdown(self):
        """RabbitMQ's own memory accounting (rabbitmq-diagnostics
        memory_breakdown), as {category: kB}; {} when unavailable."""
        try:
            p = subprocess.run([os.path.join(os.path.dirname(SERVER), "rabbitmq-diagnostics"),
                                "-n", self.node, "memory_breakdown", "--unit", "kb"],
                               env=self.env(), capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return {}
        out = {}
        for line in p.stdout.splitlines():
            k, sep, rest = line.partition(": ")
            if sep and rest.split() and rest.split()[0].replace(".", "", 1).isdigit():
                out[k.strip()] = float(rest.split()[0])
        return out

    def used_kb(self):
        """Memory RabbitMQ accounts as used (breakdown minus the allocator's
        reserved/unused space), in kB; 0 when unavailable."""
        m = self.memory_breakdown()
        return sum(v for k, v in m.items()
                   if k not in ("reserved_unallocated", "allocated_unused"))

    def rss_kb(self):
        """Resident memory (kB) of the node's process group, from /proc."""
        if not self.proc:
            return 0
        total = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    st = f.read()
                if int(st[st.rfind(")") + 2:].split()[2]) != self.proc.pid:
                    continue
                with open("/proc/%s/status" % pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except (OSError, ValueError, IndexError):
                continue
        return total

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == "__main__":
    t0 = time.monotonic()
    with RabbitMQ() as mq:
        print("started in %.1fs, stomp %d amqp %d" % (time.monotonic() - t0,
                                                       mq.stomp_port, mq.amqp_port))
        t1 = time.monotonic()
        mq.restart()
        print("restarted in %.1fs" % (time.monotonic() - t1))
