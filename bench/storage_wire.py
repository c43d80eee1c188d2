"""bench/storage_wire.py - storage figures over STOMP against a real vdsmd
(run by bench/run.sh with Debian's python3):

  1. Volume.create (RAW sparse) tasks/s end to end: requests pipelined on
     one connection (at most 32 awaiting their task id), each counted when
     its |jobs|status| "finished" event arrives on the same connection.
  2. Volume.getInfo req/s at 16 connections x depth 8 with bench/load,
     against Host.ping2 in the same run (target: getInfo >= 50% of ping2).

Environment: BUILD (default build), STORAGE_WIRE_SECONDS (default 3)."""

import json
import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
BUILD = os.environ.get("BUILD", "build")
os.environ.setdefault("VDSMD_BIN", os.path.join(REPO, BUILD, "vdsmd"))
import vdsmtest as vt  # noqa: E402

SD = "11111111-1111-1111-1111-111111111111"
IMG = "aaaaaaaa-0000-0000-0000-000000000001"
BLANK = "00000000-0000-0000-0000-000000000000"
SECONDS = float(os.environ.get("STORAGE_WIRE_SECONDS", "3"))


def vol(i):
    return "bbbbbbbb-0000-0000-0000-%012d" % i


def ready_call(c, method, params=None):
    while True:
        r = c.call(method, params)
        if r.get("error", {}).get("code") != 99:
            return r
        time.sleep(0.02)


def create_bench(c, n):
    c.subscribe(vt.EVENTS, "events")
    pending = {}     # request id -> volume
    tasks = set()
    finished = 0
    failed = 0
    sent = 0
    t0 = time.monotonic()
    while finished + failed < n:
        while sent < n and len(pending) < 32:
            rid = c.request("Volume.create", [vol(1000 + sent), BLANK, SD, IMG, "1048576", 5, 2])
            pending[rid] = sent
            sent += 1
        f = c.read_frame(10)
        if f.cmd != "MESSAGE":
            continue
        m = f.json()
        if "id" in m and m["id"] in pending:
            del pending[m["id"]]
            if "result" in m:
                tasks.add(m["result"])
            else:
                failed += 1
        elif m.get("method", "").startswith("|jobs|status|"):
            tid = m["method"].rsplit("|", 1)[1]
            st = m["params"][tid]
            if st["taskState"] == "finished" and tid in tasks:
                tasks.discard(tid)
                if st["taskResult"] == "success":
                    finished += 1
                else:
                    failed += 1
    dt = time.monotonic() - t0
    return finished / dt, failed


def load(port, pid, method, params):
    cmd = [os.path.join(REPO, BUILD, "bench", "load"), "--port", str(port), "--conns", "16",
           "--depth", "8", "--duration", str(SECONDS), "--warmup", "1", "--method", method,
           "--pid", str(pid), "--label", method]
    if params is not None:
        cmd += ["--params", json.dumps(params)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    m = re.search(r"^RESULT.* rps=(\d+).*errors=(\d+)", out, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else (0, -1)


def main():
    with vt.Daemon() as d:
        c = d.stomp()
        c.connect()
        c.subscribe(vt.RESPONSES, "responses")
        r = ready_call(c, "StorageDomain.create", [SD, 4, "", "bench", 1])
        assert r.get("result") is True, r
        rate, failed = create_bench(c, 400)
        print("storage: Volume.create RAW sparse end to end (STOMP, create -> |jobs|status| "
              "finished): %.0f tasks/s (%d failed)" % (rate, failed))
        pid = d.proc.pid
        params = [vol(1000), BLANK, SD, IMG]
        r = c.call("Volume.getInfo", params)
        assert r.get("result", {}).get("legality") == "LEGAL", r
        c.close()
        gi, gi_err = load(d.port, pid, "Volume.getInfo", params)
        pg, pg_err = load(d.port, pid, "Host.ping2", None)
        ratio = gi / pg if pg else 0
        print("storage: 16 conns x depth 8: Volume.getInfo %d req/s (errors %d), Host.ping2 "
              "%d req/s (errors %d): getInfo = %.0f%% of ping2 (target >= 50%%)"
              % (gi, gi_err, pg, pg_err, 100 * ratio))
        return 0 if gi_err == 0 and failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
