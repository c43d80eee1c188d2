#!/bin/sh
# bench/run.sh - run the benchmarks (`make bench`).  Each area adds its own
# block below, delimited by "# --- <area> ---" / "# --- end <area> ---".
# Environment: BUILD (default build), PYTHON.  Programs are in $BUILD/bench/.
set -u
: "${BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
B="$BUILD/bench"
rc=0

# --- codec ---
# Codec microbenchmarks (bench/codec.c): decode/encode MB/s (JSON-equivalent)
# and request ns/op for yajl, fallback and msgpack on generated fixtures,
# with raw yajl SAX, yajl_gen and Python's json (bench/codec_ref.py) as
# references in the same run; median of 7 runs with the spread.  The JSON
# rows also go to $BUILD/results/bench-codec.jsonl.
mkdir -p "$BUILD/results"
PYTHON="$PYTHON" "$B/codec" --json "$BUILD/results/bench-codec.jsonl" || rc=1
# --- end codec ---

# --- net ---
# End-to-end STOMP round trips: bench/load.c against the raw libev floor
# (bench/raw_server.c) and against vdsmd, same configurations, same run;
# then the RSS of idle connections.  NET_DURATION/NET_WARMUP (seconds)
# tune the length; the machine may be shared, so figures are noisy.
net_bench() {
	dur=${NET_DURATION:-5}
	warm=${NET_WARMUP:-1}
	tmp=$(mktemp -d /tmp/vdsmd-bench-net.XXXXXX)
	configs="1:1 16:1 16:8"
	# Raw floor.
	"$B/raw_server" 0 > "$tmp/raw.out" &
	rpid=$!
	i=0
	while ! grep -q '^port' "$tmp/raw.out" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	rport=$(sed -n 's/^port //p' "$tmp/raw.out")
	# vdsmd (plaintext, test libvirt driver, temp storage).
	"$BUILD/vdsmd" --config /dev/null --listen 127.0.0.1 --port 0 --tls off \
		--libvirt-uri test:///default --storage-root "$tmp/storage" \
		--max-connections 20000 --log-level info 2> "$tmp/vdsmd.log" &
	vpid=$!
	i=0
	while ! grep -q 'listening on' "$tmp/vdsmd.log" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	vport=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\) .*/\1/p' "$tmp/vdsmd.log" | head -n 1)
	# Wait for readiness so Host.ping2 and friends answer normally.
	sleep 0.5
	echo "net: raw floor on port $rport, vdsmd on port $vport; ${dur}s runs after ${warm}s warm-up"
	for c in $configs; do
		n=${c%:*}; d=${c#*:}
		"$B/load" --port "$rport" --conns "$n" --depth "$d" --duration "$dur" --warmup "$warm" \
			--pid "$rpid" --label raw > "$tmp/raw-$n-$d.txt" || rc=1
		"$B/load" --port "$vport" --conns "$n" --depth "$d" --duration "$dur" --warmup "$warm" \
			--pid "$vpid" --label vdsmd > "$tmp/vd-$n-$d.txt" || rc=1
		grep -v '^RESULT' "$tmp/raw-$n-$d.txt" "$tmp/vd-$n-$d.txt" | sed 's/^[^:]*://'
		rr=$(sed -n 's/^RESULT.* rps=\([0-9]*\).*/\1/p' "$tmp/raw-$n-$d.txt")
		vr=$(sed -n 's/^RESULT.* rps=\([0-9]*\).*/\1/p' "$tmp/vd-$n-$d.txt")
		if [ -n "$rr" ] && [ -n "$vr" ] && [ "$rr" -gt 0 ]; then
			awk -v v="$vr" -v r="$rr" -v n="$n" -v d="$d" \
				'BEGIN { printf "ratio    %2d conns x depth %-2d vdsmd/raw = %.2fx\n", n, d, v / r }'
		fi
	done
	"$B/load" --port "$vport" --conns 4 --depth 4 --duration 2 --warmup 0.5 \
		--method Host.getStats --pid "$vpid" --label vdsmd | grep -v '^RESULT' || rc=1
	kill "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null
	# Idle connections: RSS growth per connection, then 10000 at once.
	"$B/load" --port "$vport" --idle 1000 --pid "$vpid" | grep -v '^RESULT' || rc=1
	"$B/load" --port "$vport" --idle 10000 --pid "$vpid" | grep -v '^RESULT' || rc=1
	echo "vdsmd total RSS after the 10000-connection run: $(sed -n 's/^VmHWM:[ \t]*//p' /proc/$vpid/status) peak"
	kill "$vpid" 2>/dev/null; wait "$vpid" 2>/dev/null
	rm -rf "$tmp"
}
net_bench
# --- end net ---

# --- client ---
# vdsm-client startup: wall time of a whole `vdsm-client --insecure Host ping2`
# process (fork+exec, connect, STOMP, reply, exit) against a running vdsmd
# started by the integration harness.  Median of 20 runs with the spread;
# target <= 5 ms (VDSM's Python vdsm-client: ~360 ms).  /bin/true under the
# same launcher is printed as the floor the measurement cannot go below.
"$PYTHON" - "$BUILD" <<'PYEOF' || { echo "client: bench FAILED"; rc=1; }
import os, statistics, subprocess, sys, time
build = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "integration"))
os.environ.setdefault("VDSMD_BIN", os.path.join(build, "vdsmd"))
import vdsmtest as vt
client = os.path.join(build, "vdsm-client")

def times(argv, n=20):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ,
                             file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
        _, st = os.waitpid(pid, 0)
        out.append((time.perf_counter() - t) * 1000)
        if os.waitstatus_to_exitcode(st) != 0:
            raise SystemExit("client: %s exited %d" % (argv, os.waitstatus_to_exitcode(st)))
    return out

with vt.Daemon() as d:
    argv = [client, "--insecure", "-p", str(d.port), "Host", "ping2"]
    times(argv, 5)  # warm the page cache and the daemon
    t = times(argv)
    floor = times(["/bin/true"])
med = statistics.median(t)
print("client: vdsm-client --insecure Host ping2: median %.2f ms (min %.2f, max %.2f, "
      "stdev %.2f; 20 runs; target <= 5 ms: %s); /bin/true floor %.2f ms"
      % (med, min(t), max(t), statistics.pstdev(t), "ok" if med <= 5 else "MISSED",
         statistics.median(floor)))
PYEOF
# --- end client ---

# --- rpc ---
# JSON-RPC engine: ns/request per codec (decode -> dispatch -> encode, no
# sockets) and worker pool scaling, 1/2/4/8 workers vs serial (bench/dispatch.c).
if [ -x "$B/dispatch" ]; then
	echo "# rpc: engine dispatch and worker pool"
	"$B/dispatch" || rc=1
fi
# --- end rpc ---

# --- storage ---
# In-process: Volume.create (RAW sparse) tasks/s through the core and
# Volume.getInfo via rpc_dispatch from the index vs reading metadata from
# disk (bench/storage.c); then over STOMP against a real vdsmd:
# create -> |jobs|status| finished tasks/s and Volume.getInfo vs Host.ping2
# at 16 connections (bench/storage_wire.py, uses bench/load).
"$B/storage" --volumes 1000 --seconds 2 || rc=1
BUILD="$BUILD" "$PYTHON" bench/storage_wire.py || rc=1
# --- end storage ---

# --- host ---
# Host backend costs without sockets (bench/host.c): one sample of /proc and
# /sys (wall and CPU), the Host.getStats handler per codec, Host.getCapabilities
# served from its cached encoding vs encoded each time, snapshot get+put.
echo "host:"
if out=$("$B/host"); then echo "$out" | sed 's/^/  /'; else echo "host: bench FAILED"; rc=1; fi
# --- end host ---

exit $rc
