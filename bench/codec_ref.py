#!/usr/bin/python3
"""bench/codec_ref.py - Python's json on the codec benchmark's fixtures (what
VDSM uses), run by build/bench/codec in the same run.

usage: codec_ref.py DIR RUNS RUN_MS NAME[:request]...
Prints one JSON object per row: decode (json.loads) and encode (json.dumps,
compact separators) per fixture, and for a fixture marked :request the time
to find method, id and params.  ns_per_op is the median of RUNS runs of
thread CPU time, as in build/bench/codec."""
import json
import sys
import time


def measure(fn, runs, run_ms):
    fn()
    t0 = time.thread_time_ns()
    fn()
    one = max(time.thread_time_ns() - t0, 1)
    iters = max(1, int(run_ms * 1e6 / one))
    samples = []
    for _ in range(runs):
        t0 = time.thread_time_ns()
        for _ in range(iters):
            fn()
        samples.append((time.thread_time_ns() - t0) / iters)
    samples.sort()
    med = samples[len(samples) // 2]
    return med, 100.0 * (samples[-1] - samples[0]) / med


def row(fixture, op, ns, spread):
    print(json.dumps({"codec": "python-json", "fixture": fixture, "op": op,
                      "ns_per_op": ns, "spread_pct": spread}), flush=True)


def main():
    d, runs, run_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    for arg in sys.argv[4:]:
        name, _, kind = arg.partition(":")
        with open(f"{d}/{name}.json", "rb") as f:
            text = f.read().decode()
        obj = json.loads(text)
        if kind == "request":
            def req():
                r = json.loads(text)
                return r["method"], r["id"], r["params"]
            row(name, "request", *measure(req, runs, run_ms))
        row(name, "decode", *measure(lambda: json.loads(text), runs, run_ms))
        row(name, "encode",
            *measure(lambda: json.dumps(obj, separators=(",", ":")), runs, run_ms))


if __name__ == "__main__":
    main()
