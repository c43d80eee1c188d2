#!/bin/sh
# bench/ping_instr.sh - user instructions of vdsmd's main thread per
# Host.ping2 request (issue 25), counted by callgrind: the figure that stays
# put on a loaded machine, where req/s does not.  vdsmd runs under
# valgrind --tool=callgrind --separate-threads=yes; bench/load drives it
# (engine framing, CONNS x DEPTH) for a warm-up, the counters are zeroed,
# then PING_DURATION seconds of load and a dump.  Printed: the main
# thread's instructions over the calls of rpc_dispatch_pieces (one per
# STOMP request) in that dump.  Compare two builds in the same way (A/B):
#   BUILD=build sh bench/ping_instr.sh 1 1
# A busy machine lowers the request count, and the per-second timers then
# weigh more per request: compare runs made under similar load.
set -u
: "${BUILD:=build}"
: "${PYTHON:=python3}"
n=${1:-1}; d=${2:-1}
dur=${PING_DURATION:-3}
command -v valgrind > /dev/null || { echo "ping_instr: valgrind not installed"; exit 1; }
tmp=$(mktemp -d /tmp/vdsmd-ping-instr.XXXXXX)
mkdir -p "$tmp/storage"
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.%p" --separate-threads=yes \
	--dump-instr=no "$BUILD/vdsmd" --config /dev/null --listen 127.0.0.1 --port 0 \
	--image-port 0 --tls off --libvirt-uri test:///default --storage-root "$tmp/storage" \
	--max-connections-per-address 0 --log-level info 2> "$tmp/vd.out" &
vp=$!
i=0
while ! grep -q 'listening on' "$tmp/vd.out" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
port=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\) .*/\1/p' "$tmp/vd.out" | head -n 1)
rc=0
if [ -z "$port" ]; then
	echo "ping_instr: vdsmd did not start"; rc=1
else
	"$BUILD/bench/load" --framing engine --port "$port" --conns "$n" --depth "$d" \
		--duration 2 --warmup 1 > /dev/null || rc=1
	callgrind_control -z "$vp" > /dev/null 2>&1
	"$BUILD/bench/load" --framing engine --port "$port" --conns "$n" --depth "$d" \
		--duration "$dur" --warmup 0 > "$tmp/load.out" || rc=1
	callgrind_control -d "$vp" > /dev/null 2>&1
fi
sleep 0.5
kill "$vp" 2>/dev/null; wait "$vp" 2>/dev/null
# the dump after the zeroing, main thread: cg.PID.1-01
f="$tmp/cg.$vp.1-01"
if [ $rc = 0 ] && [ -f "$f" ]; then
	"$PYTHON" - "$f" "$n" "$d" <<'EOF'
import re, sys
path, conns, depth = sys.argv[1:4]
names, cfn, calls, total = {}, None, 0, 0
for line in open(path):
    if line.startswith(("summary:", "totals:")):
        total = int(line.split()[1])
        continue
    m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
    if m:
        if m.group(3):
            names[m.group(2)] = m.group(3).strip()
        if m.group(1) == "cfn":
            cfn = names.get(m.group(2))
        continue
    if line.startswith("calls=") and cfn == "rpc_dispatch_pieces":
        calls += int(line[6:].split()[0])
if not calls:
    sys.exit("ping_instr: no request counted")
print(f"ping_instr {conns} x {depth}: {total / calls:.0f} instructions per Host.ping2 "
      f"(main thread, {calls} requests, {total} instructions)")
EOF
	rc=$?
else
	echo "ping_instr: no callgrind dump"; rc=1
fi
[ -n "${PING_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
exit $rc
