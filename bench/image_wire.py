"""bench/image_wire.py - the image server over loopback (issue 28), run by
bench/run.sh with Debian's python3.  The transfers and baselines are C
(bench/imgxfer.c); this script starts vdsmd, adds the tickets through
Host.add_image_ticket and prints the table.

  1. Download and upload of a 1 GiB dense file and a 1 GiB sparse one
     (64 MiB of data in 16 extents) beneath --storage-root (the root
     fallback, no pool).  Baselines from the same run: a sequential 8 MiB
     read of the same file from the page cache for downloads (dd bs=8M),
     an 8 MiB read+write copy of the same bytes into the same destination
     (dd bs=8M conv=notrunc, no fsync) for uploads; the PUTs carry
     ?flush=n, so neither side syncs.  Every case runs IMG_ROUNDS times
     (default 3), the cases interleaved; the table gives the median MiB/s,
     the spread (min..max) and the ratio of the medians.  The sparse
     transfers go the imageio way: a download asks for /extents and reads
     the data extents only, an upload PUTs the data extents (Content-Range)
     and PATCHes zero over the holes; the "wire" column counts every byte
     on the socket, "CPU s/GiB" the daemon's CPU time (all threads) per GiB
     of the image moved (median), less sensitive to a busy machine.
  2. Ten concurrent 1 GiB uploads: the daemon's VmRSS idle and its peak
     (sampled every 20 ms), and a bystander on the main port
     (bench/load: Host.ping2, 1 connection x depth 1) idle and during the
     uploads, p50/p99.

Environment: BUILD (default build), IMG_ROUNDS, IMG_SIZE_MIB (default 1024),
IMG_CONCURRENT (default 10), IMG_PARTS (default "transfer,memory"), IMG_JSON (a file for the result rows)."""

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
BUILD = os.environ.get("BUILD", "build")
os.environ.setdefault("VDSMD_BIN", os.path.join(REPO, BUILD, "vdsmd"))
import vdsmtest as vt  # noqa: E402

XFER = os.path.join(REPO, BUILD, "bench", "imgxfer")
LOAD = os.path.join(REPO, BUILD, "bench", "load")
MiB = 1 << 20
SIZE = int(os.environ.get("IMG_SIZE_MIB", "1024")) * MiB
SPARSE_DATA = SIZE // 16
ROUNDS = int(os.environ.get("IMG_ROUNDS", "3"))
CONCURRENT = int(os.environ.get("IMG_CONCURRENT", "10"))
RESULT_RE = re.compile(r"^RESULT (.*)$", re.M)


def xfer(*args):
    p = subprocess.run([XFER] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        raise SystemExit("image: imgxfer %s failed: %s" % (" ".join(map(str, args)),
                                                           p.stderr.decode(errors="replace")))
    m = RESULT_RE.search(p.stdout.decode())
    if not m:
        return {}
    out = {}
    for kv in m.group(1).split():
        k, v = kv.split("=", 1)
        out[k] = v if k == "op" else float(v)
    return out


def ticket(c, path, ops):
    tid = str(uuid.uuid4())
    r = vt.call_ready(c, "Host.add_image_ticket", [{
        "uuid": tid, "timeout": 3600, "inactivity_timeout": 600, "size": SIZE,
        "url": "file://" + path, "ops": ops, "sparse": True,
        "transfer_id": str(uuid.uuid4()), "dirty": False}])
    if "result" not in r:
        raise SystemExit("image: Host.add_image_ticket: %r" % r)
    return tid


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    """utime + stime of the process (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_run(port, pid, label, duration):
    p = subprocess.run([LOAD, "--port", str(port), "--conns", "1", "--depth", "1",
                        "--duration", str(duration), "--warmup", "0.5", "--method", "Host.ping2",
                        "--pid", str(pid), "--label", label],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    m = re.search(r"^RESULT .*p50_us=(\d+) p99_us=(\d+)", p.stdout.decode(), re.M)
    if p.returncode != 0 or not m:
        raise SystemExit("image: bystander load failed: %s" % p.stdout.decode(errors="replace"))
    return int(m.group(1)), int(m.group(2))


def spread(v):
    return "%.0f..%.0f" % (min(v), max(v))


def transfer_bench(d, c, port, root, rows):
    files = {}
    for kind, data in (("dense", SIZE), ("sparse", SPARSE_DATA)):
        src = os.path.join(root, "src-%s.raw" % kind)
        dst = os.path.join(root, "dst-%s.raw" % kind)
        base = os.path.join(root, "dst-%s-base.raw" % kind)
        xfer("mkfile", src, SIZE, data)
        xfer("read", src)  # into the page cache
        # both destinations written once first: the rounds rewrite pages
        # already allocated and cached (a sparse upload punches its holes
        # again each round; the baseline has its own file)
        for p in (dst, base):
            xfer("mkfile", p, SIZE, 0)
            xfer("copy", src, p)
        files[kind] = (src, dst, ticket(c, src, ["read"]), ticket(c, dst, ["write"]), base)
    cases = []  # (name, baseline name, kind, run())
    for kind in ("dense", "sparse"):
        src, dst, rt, wt, base = files[kind]
        sp = ["--sparse"] if kind == "sparse" else []
        cases.append(("download " + kind, "read " + kind,
                      (lambda s=src: xfer("read", s)),
                      (lambda t=rt, a=sp: xfer("get", port, t, *a))))
        cases.append(("upload " + kind, "write " + kind,
                      (lambda s=src, d=base: xfer("copy", s, d)),
                      (lambda t=wt, s=src, a=sp: xfer("put", port, t, s, *a))))
    got = {name: ([], []) for name, _, _, _ in cases}
    wire = {}
    cpu = {name: [] for name, _, _, _ in cases}
    pid = d.proc.pid
    for _ in range(ROUNDS):
        for name, _, base, run in cases:
            b = base()
            c0 = cpu_s(pid)
            r = run()
            cpu[name].append((cpu_s(pid) - c0) / (r["bytes"] / (1 << 30)))
            got[name][0].append(b["mibs"])
            got[name][1].append(r["mibs"])
            wire[name] = int(r["wire"])
    print("%-17s %-13s %9s %11s %9s %11s %7s %12s %9s" % (
        "image (median of %d)" % ROUNDS, "baseline", "base MiB/s", "spread", "vdsmd MiB/s",
        "spread", "ratio", "wire bytes", "CPU s/GiB"))
    for name, bname, _, _ in cases:
        bv, rv = got[name]
        bm, rm = statistics.median(bv), statistics.median(rv)
        ratio = rm / bm if bm else 0
        target = "" if "sparse" in name else ("  (target >= 0.30x: %s)" %
                                              ("ok" if ratio >= 0.3 else "MISSED"))
        cm = statistics.median(cpu[name])
        print("%-17s %-13s %9.0f %11s %11.0f %11s %6.2fx %12d %9.2f%s" % (
            name, bname, bm, spread(bv), rm, spread(rv), ratio, wire[name], cm, target))
        rows.append({"bench": "image", "case": name, "baseline": bname, "base_mibs": bm,
                     "base_spread": [min(bv), max(bv)], "mibs": rm, "spread": [min(rv), max(rv)],
                     "ratio": ratio, "wire_bytes": wire[name], "cpu_s_per_gib": cm, "size": SIZE, "rounds": ROUNDS})
    print("image: sparse files hold %d MiB of data in %d MiB; a sparse transfer that sends "
          "no holes has ~%d MiB on the wire" % (SPARSE_DATA // MiB, SIZE // MiB,
                                                SPARSE_DATA // MiB))
    for kind in files:
        for p in (files[kind][0], files[kind][1], files[kind][4]):
            os.unlink(p)


def memory_bench(d, c, port, root, rows):
    src = os.path.join(root, "src-dense.raw")
    xfer("mkfile", src, SIZE, SIZE)
    xfer("read", src)
    tickets = []
    dsts = []
    for i in range(CONCURRENT):
        dst = os.path.join(root, "dst-%d.raw" % i)
        xfer("mkfile", dst, SIZE, 0)
        dsts.append(dst)
        tickets.append(ticket(c, dst, ["write"]))
    pid = d.proc.pid
    idle_p50, idle_p99 = load_run(d.port, pid, "ping2/idle", 3)
    time.sleep(0.5)
    idle = rss_kb(pid)
    peak = [idle]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kb(pid))
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    res = {}

    def uploads():
        res.update(xfer("put-many", port, src, *tickets))

    up = threading.Thread(target=uploads)
    up.start()
    time.sleep(0.5)
    busy_p50, busy_p99 = load_run(d.port, pid, "ping2/uploads", 3)
    up.join()
    done.set()
    th.join()
    grow = (peak[0] - idle) / 1024
    print("image: %d concurrent %d MiB uploads: %.0f MiB/s in all, %.1f s; vdsmd VmRSS idle "
          "%.1f MiB, peak %.1f MiB: +%.1f MiB (target <= 100 MiB: %s)" % (
              CONCURRENT, SIZE // MiB, res.get("mibs", 0), res.get("secs", 0), idle / 1024,
              peak[0] / 1024, grow, "ok" if grow <= 100 else "MISSED"))
    print("image: bystander Host.ping2 on the main port (1 conn x depth 1): idle p50 %d us "
          "p99 %d us; during the uploads p50 %d us p99 %d us (p99 %.2fx)" % (
              idle_p50, idle_p99, busy_p50, busy_p99, busy_p99 / idle_p99 if idle_p99 else 0))
    rows.append({"bench": "image", "case": "concurrent uploads", "n": CONCURRENT, "size": SIZE,
                 "mibs": res.get("mibs", 0), "rss_idle_kb": idle, "rss_peak_kb": peak[0],
                 "bystander_idle_us": [idle_p50, idle_p99],
                 "bystander_busy_us": [busy_p50, busy_p99]})
    for p in dsts + [src]:
        os.unlink(p)


def main():
    rows = []
    iport = vt.free_port()
    with vt.Daemon("--image-port", str(iport)) as d:
        c = d.stomp()
        c.connect()
        c.subscribe(vt.RESPONSES, "responses")
        root = os.path.join(d.tmp, "storage")
        print("image: vdsmd image port %d, files in %s; load: %s" % (
            iport, root, open("/proc/loadavg").read().strip()))
        parts = os.environ.get("IMG_PARTS", "transfer,memory").split(",")
        if "transfer" in parts:
            transfer_bench(d, c, iport, root, rows)
        if "memory" in parts:
            memory_bench(d, c, iport, root, rows)
        c.close()
    if os.environ.get("IMG_JSON"):
        with open(os.environ["IMG_JSON"], "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
