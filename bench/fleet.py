#!/usr/bin/python3
"""bench/fleet.py - the fleet benchmark (`make bench-fleet`, issue 9).

One private RabbitMQ (tests/integration/rabbitmq.py), N vdsmd processes in
broker mode, each with its own host_id and a libvirt test-driver fleet of
--vms domains (examples/gen-fleet.py), and the engine-side driver
bench/fleet.c: every --period ms it polls each host's Host.getAllVmStats and
Host.getStats, and keeps --ping-depth Host.ping2 in flight per host (full
speed).  The same run is repeated direct (one STOMP connection per vdsmd),
then the next N.  Reported per N and mode: per-host round-trip p50/p99
(median over hosts; worst host p99), req/s, and the CPU of RabbitMQ, of all
vdsmd together and of the driver (percent of one core; the machine has
os.cpu_count() cores shared by all of them).

    bench/fleet.py [--sizes 1,10,50] [--duration 10] [--warmup 2]
                   [--period 1000] [--vms 20] [--ping-depth 1]
                   [--engine-conns 1,4] [--json FILE]

Broker mode runs once per --engine-conns value: the engine's connections to
RabbitMQ (hosts spread over them), since one STOMP connection is one
serial process inside RabbitMQ.

Environment: BUILD (default build).
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import rabbitmq  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
if not os.path.isabs(BUILD):
    BUILD = os.path.join(REPO, BUILD)
VDSMD = os.path.join(BUILD, "vdsmd")
DRIVER = os.path.join(BUILD, "bench", "fleet")
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return 0.0
    fields = st[st.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_file(path, rx, timeout=30, procs=()):
    deadline = time.monotonic() + timeout
    r = re.compile(rx)
    while time.monotonic() < deadline:
        try:
            with open(path, errors="replace") as f:
                m = r.search(f.read())
            if m:
                return m
        except OSError:
            pass
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError("vdsmd exited: see %s" % path)
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for /%s/ in %s" % (rx, path))


class Fleet:
    def __init__(self, n, mq, tmp, fleet_xml):
        self.procs, self.ports, self.ids, self.logs = [], [], [], []
        for i in range(n):
            hid = "fleet%03d" % i
            log = os.path.join(tmp, "%s.log" % hid)
            st = os.path.join(tmp, "st-%s" % hid)
            os.makedirs(st, exist_ok=True)
            cmd = [VDSMD, "--config", "/dev/null", "--listen", "127.0.0.1", "--port", "0",
                   "--tls", "off", "--libvirt-uri", "test://" + fleet_xml,
                   "--storage-root", st, "--log-level", "info",
                   "--broker-uri", "stomp://127.0.0.1:%d" % mq.stomp_port,
                   "--broker-login", "guest", "--broker-passcode", "guest",
                   "--host-id", hid]
            with open(log, "w") as lf:
                p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=lf)
            self.procs.append(p)
            self.ids.append(hid)
            self.logs.append(log)
        for p, log in zip(self.procs, self.logs):
            m = wait_file(log, r"listening on \S+:(\d+)", procs=[p])
            self.ports.append(int(m.group(1)))
        for p, log in zip(self.procs, self.logs):
            wait_file(log, r"consuming /queue/vdsm\.", timeout=60, procs=[p])

    def cpu(self):
        return sum(proc_cpu(p.pid) for p in self.procs)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_driver(args, mode_args, mq, fleet):
    cmd = [DRIVER] + mode_args + ["--duration", str(args.duration), "--warmup",
                                  str(args.warmup), "--period", str(args.period),
                                  "--ping-depth", str(args.ping_depth)]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    mq0, vd0, t0 = mq.cpu_seconds(), fleet.cpu(), time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 60)
    wall = time.monotonic() - t0
    mq1, vd1 = mq.cpu_seconds(), fleet.cpu()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError("driver failed (%d): %s" % (p.returncode, p.stderr))
    res = {}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT"):
            for kv in line.split()[1:]:
                k, _, v = kv.partition("=")
                res[k] = v if k == "mode" else float(v)
    drv = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    res["broker_cpu_pct"] = 100.0 * (mq1 - mq0) / wall
    res["vdsmd_cpu_pct"] = 100.0 * (vd1 - vd0) / wall
    res["driver_cpu_pct"] = 100.0 * drv / wall
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,10,50")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--period", type=float, default=1000)
    ap.add_argument("--vms", type=int, default=20)
    ap.add_argument("--ping-depth", type=int, default=1)
    ap.add_argument("--engine-conns", default="1,4")
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    tmp = tempfile.mkdtemp(prefix="vdsm-fleet-")
    rows = []
    mq = None
    try:
        fleet_xml = os.path.join(tmp, "fleet.xml")
        subprocess.run([sys.executable, os.path.join(REPO, "examples", "gen-fleet.py"),
                        str(args.vms), "-o", fleet_xml], check=True)
        t0 = time.monotonic()
        mq = rabbitmq.RabbitMQ()
        print("fleet: RabbitMQ up in %.1f s (STOMP port %d); %d VMs per host, poll period "
              "%g ms, ping2 depth %d per host, %gs runs after %gs warm-up, %d cores"
              % (time.monotonic() - t0, mq.stomp_port, args.vms, args.period,
                 args.ping_depth, args.duration, args.warmup, os.cpu_count()), flush=True)
        for n in sizes:
            fleet = None
            try:
                t0 = time.monotonic()
                rss0, used0 = mq.rss_kb(), mq.used_kb()
                fleet = Fleet(n, mq, tmp, fleet_xml)
                time.sleep(1)
                rss1, used1 = mq.rss_kb(), mq.used_kb()
                per_host_kb = (used1 - used0) / n
                print("fleet: %d vdsmd up and consuming in %.1f s; RabbitMQ RSS %d -> %d MiB, "
                      "memory used (its own accounting) %.1f -> %.1f MiB: %.0f KiB per "
                      "connected host" % (n, time.monotonic() - t0, rss0 // 1024, rss1 // 1024,
                                          used0 / 1024, used1 / 1024, per_host_kb),
                      flush=True)
                runs = []
                for k in sorted({min(int(x), n) for x in args.engine_conns.split(",")}):
                    runs.append(("broker/%d" % k, ["--broker", str(mq.stomp_port), "--conns",
                                                   str(k), "--hosts", ",".join(fleet.ids)]))
                runs.append(("direct", ["--direct", ",".join(map(str, fleet.ports))]))
                for mode, margs in runs:
                    r = run_driver(args, margs, mq, fleet)
                    r["hosts"] = n
                    r["mode"] = mode
                    r["mq_kb_per_host"] = per_host_kb
                    rows.append(r)
                    print("fleet: N=%-3d %-8s ping %7.0f/s p50 %6.2f ms p99 %6.2f ms | poll "
                          "p50 %6.2f ms p99 %6.2f ms | total %7.0f req/s | CPU rabbitmq %3.0f%% "
                          "vdsmd %3.0f%% driver %3.0f%% | poll reply %.0f B | errors %d lost %d"
                          % (n, mode, r["ping_rps"], r["ping_p50_us"] / 1e3,
                             r["ping_p99_us"] / 1e3, r["poll_p50_us"] / 1e3,
                             r["poll_p99_us"] / 1e3, r["rps"], r["broker_cpu_pct"],
                             r["vdsmd_cpu_pct"], r["driver_cpu_pct"], r["poll_reply_bytes"],
                             r["errors"], r["lost"]),
                          flush=True)
            except RuntimeError as e:
                print("fleet: N=%d failed: %s" % (n, e), flush=True)
                rows.append({"hosts": n, "error": str(e)})
            finally:
                if fleet:
                    fleet.stop()
    finally:
        if mq:
            mq.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("%-5s %-8s %9s %9s %9s %9s %9s %9s %7s %7s %7s" % (
        "hosts", "mode", "req/s", "ping/s", "ping p50", "ping p99", "poll p50", "poll p99",
        "mq cpu", "vd cpu", "drv cpu"))
    for r in rows:
        if "error" in r:
            print("%-5d failed: %s" % (r["hosts"], r["error"]))
            continue
        print("%-5d %-8s %9.0f %9.0f %7.2fms %7.2fms %7.2fms %7.2fms %6.0f%% %6.0f%% %6.0f%%" % (
            r["hosts"], r["mode"], r["rps"], r["ping_rps"], r["ping_p50_us"] / 1e3,
            r["ping_p99_us"] / 1e3, r["poll_p50_us"] / 1e3, r["poll_p99_us"] / 1e3,
            r["broker_cpu_pct"], r["vdsmd_cpu_pct"], r["driver_cpu_pct"]))
    if args.json:
        with open(args.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
