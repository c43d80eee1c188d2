#!/bin/sh
# bench/frames.sh - the one-frame-per-write path (issue 25) at the cost of
# its write()s: Host.ping2 over plaintext STOMP from a client that does not
# send vdsmd-framing:packed (the engine layout, PROTOCOL.md 2, vdsmd/wire.c)
# against `raw_server -1`, a libev echo that sends one frame per send()
# under the same rule (MESSAGEs padded to 1024 bytes with spaces after the
# JSON body, TCP_NOTSENT_LOWAT 1; bench/raw_server.c says what it leaves
# out).  16 x 8, 16 x 1 and 1 x 1 (connections x requests in flight); the
# two servers take turns round by round (FRAMES_ROUNDS, default 5, of
# FRAMES_DURATION s after FRAMES_WARMUP s), so both see the same machine
# load.  Printed per row: median req/s with min-max over the rounds, median
# server CPU per request, and vdsmd / echo: the ratio of the medians, with
# the spread of the per-round ratios (round r of vdsmd over round r of the
# echo: min..max).  Targets (issue 25): 16 x 8 >= 0.9x, 16 x 1 and
# 1 x 1 >= 0.95x.
# Run by bench/run.sh (`make bench`) or alone: BUILD=build sh bench/frames.sh
set -u
: "${BUILD:=build}"
B="$BUILD/bench"
rounds=${FRAMES_ROUNDS:-5}
dur=${FRAMES_DURATION:-3}
warm=${FRAMES_WARMUP:-1}
configs=${FRAMES_CONFIGS:-"16:8 16:1 1:1"}
rc=0
tmp=$(mktemp -d /tmp/vdsmd-bench-frames.XXXXXX)
mkdir -p "$tmp/storage"

"$B/raw_server" -1 0 > "$tmp/echo.out" &
epid=$!
"$BUILD/vdsmd" --config /dev/null --listen 127.0.0.1 --port 0 --image-port 0 --tls off \
	--libvirt-uri test:///default --storage-root "$tmp/storage" \
	--max-connections-per-address 0 --log-level info 2> "$tmp/vdsmd.log" &
vpid=$!
i=0
while { ! grep -q '^port' "$tmp/echo.out" || ! grep -q 'listening on' "$tmp/vdsmd.log"; } 2>/dev/null &&
	[ $i -lt 50 ]; do
	sleep 0.1; i=$((i + 1))
done
eport=$(sed -n 's/^port //p' "$tmp/echo.out")
vport=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\) .*/\1/p' "$tmp/vdsmd.log" | head -n 1)
sleep 0.5

vals() { sed -n "s/^RESULT.* $1=\([0-9.]*\).*/\1/p" "$2"; }
med() { vals "$1" "$2" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }'; }
lo() { vals "$1" "$2" | sort -g | head -n 1; }
hi() { vals "$1" "$2" | sort -g | tail -n 1; }

echo "frames: Host.ping2, engine layout (one frame per write), vdsmd vs raw_server -1;" \
	"$rounds rounds of ${dur}s (+${warm}s warm-up), alternating"
for c in $configs; do
	n=${c%:*}; d=${c#*:}
	: > "$tmp/echo-$n-$d.txt"; : > "$tmp/vd-$n-$d.txt"
	r=0
	while [ $r -lt "$rounds" ]; do
		"$B/load" --framing engine --port "$eport" --conns "$n" --depth "$d" --duration "$dur" \
			--warmup "$warm" --pid "$epid" --label echo-1 >> "$tmp/echo-$n-$d.txt" || rc=1
		"$B/load" --framing engine --port "$vport" --conns "$n" --depth "$d" --duration "$dur" \
			--warmup "$warm" --pid "$vpid" --label vdsmd >> "$tmp/vd-$n-$d.txt" || rc=1
		r=$((r + 1))
	done
	for m in echo vd; do
		f="$tmp/$m-$n-$d.txt"
		printf "frames %-6s %2d x %-2d req/s median %7s (min %7s max %7s)  p99 %6s us  server CPU %5s us/req (min %5s max %5s)\n" \
			"$m" "$n" "$d" "$(med rps "$f")" "$(lo rps "$f")" "$(hi rps "$f")" \
			"$(med p99_us "$f")" "$(med cpu_us_per_req "$f")" "$(lo cpu_us_per_req "$f")" \
			"$(hi cpu_us_per_req "$f")"
	done
	vals rps "$tmp/vd-$n-$d.txt" > "$tmp/v"; vals rps "$tmp/echo-$n-$d.txt" > "$tmp/e"
	spread=$(paste "$tmp/v" "$tmp/e" | awk '$2 > 0 { r = $1 / $2; if (NR == 1 || r < lo) lo = r; if (NR == 1 || r > hi) hi = r }
			END { printf "%.2f..%.2f", lo, hi }')
	awk -v n="$n" -v d="$d" -v k="$rounds" -v v="$(med rps "$tmp/vd-$n-$d.txt")" \
		-v e="$(med rps "$tmp/echo-$n-$d.txt")" -v vc="$(med cpu_us_per_req "$tmp/vd-$n-$d.txt")" \
		-v ec="$(med cpu_us_per_req "$tmp/echo-$n-$d.txt")" -v sp="$spread" \
		'BEGIN { if (e > 0) printf "ratio  plain  %2d x %-2d median of %d rounds: vdsmd %d / echo -1 %d req/s = %.2fx (per-round %s); server CPU/req %.2f / %.2f us = %.2fx\n", n, d, k, v, e, v / e, sp, vc, ec, (ec > 0 ? vc / ec : 0) }'
done
kill "$epid" "$vpid" 2>/dev/null
wait "$epid" 2>/dev/null; wait "$vpid" 2>/dev/null
rm -rf "$tmp"
exit $rc
