#!/bin/sh
# bench/frames.sh - the one-frame-per-write path (issue 25) at the cost of
# its write()s: Host.ping2 over STOMP from a client that does not send
# vdsmd-framing:packed (the engine layout, PROTOCOL.md 2, vdsmd/wire.c)
# against `raw_server -1`, a libev echo that sends one frame per send()
# under the same rule (plaintext: MESSAGEs padded to 1024 bytes with spaces
# after the JSON body, TCP_NOTSENT_LOWAT 1; TLS, `-1 -t`: one record per
# frame, MESSAGEs padded to 8448 bytes; bench/raw_server.c says what it
# leaves out).  16 x 8, 16 x 1 and 1 x 1 (connections x requests in
# flight), plaintext then TLS (FRAMES_TLS=0: plaintext only); the two
# servers take turns round by round (FRAMES_ROUNDS, default 5, of
# FRAMES_DURATION s after FRAMES_WARMUP s), so both see the same machine
# load.  Printed per row: median req/s with min-max over the rounds, median
# server CPU per request, and vdsmd / echo: the ratio of the medians, with
# the spread of the per-round ratios (round r of vdsmd over round r of the
# echo: min..max).  Targets (issue 25): 16 x 8 >= 0.9x, 16 x 1 and
# 1 x 1 >= 0.95x.  On a loaded machine req/s swings with the neighbours;
# CPU per request much less.
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
sh examples/make-pki.sh "$tmp/pki" > /dev/null 2>&1 || { echo "frames: make-pki failed"; exit 1; }
pids=""

# up NAME: waits for NAME's port (echo: "port N" on stdout; vdsmd: its log)
up() {
	i=0
	while ! grep -q '^port\|listening on' "$tmp/$1.out" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1; i=$((i + 1))
	done
	sed -n 's/^port //p; s/.*listening on [^ ]*:\([0-9]*\) .*/\1/p' "$tmp/$1.out" | head -n 1
}

# start TRANSPORT(plain|tls): sets eport epid vport vpid
start() {
	if [ "$1" = tls ]; then
		"$B/raw_server" -1 -t "$tmp/pki" 0 > "$tmp/echo-$1.out" &
	else
		"$B/raw_server" -1 0 > "$tmp/echo-$1.out" &
	fi
	epid=$!
	set -- "$1" --tls off
	[ "$1" = tls ] && set -- "$1" --tls on --cert-file "$tmp/pki/server.crt" \
		--key-file "$tmp/pki/server.key" --ca-file "$tmp/pki/ca.crt"
	t=$1; shift
	"$BUILD/vdsmd" --config /dev/null --listen 127.0.0.1 --port 0 --image-port 0 "$@" \
		--libvirt-uri test:///default --storage-root "$tmp/storage" \
		--max-connections-per-address 0 --log-level info 2> "$tmp/vd-$t.out" &
	vpid=$!
	pids="$pids $epid $vpid"
	eport=$(up "echo-$t"); vport=$(up "vd-$t")
	sleep 0.5
}

vals() { sed -n "s/^RESULT.* $1=\([0-9.]*\).*/\1/p" "$2"; }
med() { vals "$1" "$2" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }'; }
lo() { vals "$1" "$2" | sort -g | head -n 1; }
hi() { vals "$1" "$2" | sort -g | tail -n 1; }

echo "frames: Host.ping2, engine layout (one frame per write), vdsmd vs raw_server -1;" \
	"$rounds rounds of ${dur}s (+${warm}s warm-up), alternating"
transports="plain tls"
[ "${FRAMES_TLS:-1}" = 0 ] && transports=plain
for t in $transports; do
	start "$t"
	tlsarg=""
	[ "$t" = tls ] && tlsarg="--tls $tmp/pki"
	for c in $configs; do
		n=${c%:*}; d=${c#*:}
		e="$tmp/echo-$t-$n-$d.txt"; v="$tmp/vd-$t-$n-$d.txt"
		: > "$e"; : > "$v"
		r=0
		while [ $r -lt "$rounds" ]; do
			# shellcheck disable=SC2086
			"$B/load" $tlsarg --framing engine --port "$eport" --conns "$n" --depth "$d" \
				--duration "$dur" --warmup "$warm" --pid "$epid" --label echo-1 >> "$e" || rc=1
			# shellcheck disable=SC2086
			"$B/load" $tlsarg --framing engine --port "$vport" --conns "$n" --depth "$d" \
				--duration "$dur" --warmup "$warm" --pid "$vpid" --label vdsmd >> "$v" || rc=1
			r=$((r + 1))
		done
		for m in echo vd; do
			f="$tmp/$m-$t-$n-$d.txt"
			printf "frames %-5s %-5s %2d x %-2d req/s median %7s (min %7s max %7s)  p99 %6s us  server CPU %5s us/req (min %5s max %5s)\n" \
				"$m" "$t" "$n" "$d" "$(med rps "$f")" "$(lo rps "$f")" "$(hi rps "$f")" \
				"$(med p99_us "$f")" "$(med cpu_us_per_req "$f")" "$(lo cpu_us_per_req "$f")" \
				"$(hi cpu_us_per_req "$f")"
		done
		vals rps "$v" > "$tmp/v"; vals rps "$e" > "$tmp/e"
		spread=$(paste "$tmp/v" "$tmp/e" | awk '$2 > 0 { r = $1 / $2; if (NR == 1 || r < lo) lo = r; if (NR == 1 || r > hi) hi = r }
			END { printf "%.2f..%.2f", lo, hi }')
		awk -v t="$t" -v n="$n" -v d="$d" -v k="$rounds" -v v="$(med rps "$v")" -v e="$(med rps "$e")" \
			-v vc="$(med cpu_us_per_req "$v")" -v ec="$(med cpu_us_per_req "$e")" -v sp="$spread" \
			'BEGIN { if (e > 0) printf "ratio  %-5s %2d x %-2d median of %d rounds: vdsmd %d / echo -1 %d req/s = %.2fx (per-round %s); server CPU/req %.2f / %.2f us = %.2fx\n", t, n, d, k, v, e, v / e, sp, vc, ec, (ec > 0 ? vc / ec : 0) }'
	done
	kill "$epid" "$vpid" 2>/dev/null
	wait "$epid" 2>/dev/null; wait "$vpid" 2>/dev/null
done
for p in $pids; do kill "$p" 2>/dev/null; done
rm -rf "$tmp"
exit $rc
