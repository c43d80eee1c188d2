#!/bin/sh
# bench/wire.sh - what the frame layout for the engine's client library
# (PROTOCOL.md 2, vdsmd/wire.c) costs per request: a client that does not
# send vdsmd-framing:packed ("engine": one frame per write, MESSAGE bodies
# padded to 1024 bytes on plaintext and to TLS records of 8448 bytes or
# more, TCP_NOTSENT_LOWAT on plaintext) against one that does ("packed":
# frames as they are, queued ones in one write), in the same run against
# the same two daemons (plaintext, TLS), Host.ping2 with 16 connections x 8
# in flight and 1 x 1.  The modes take turns round by round (WIRE_ROUNDS,
# default 5, WIRE_DURATION seconds each after WIRE_WARMUP), so both see the
# same machine load; printed: median req/s with min-max over the rounds,
# median p50/p99 latency, median server CPU per request with min-max, and
# engine against packed.
# Run by bench/run.sh (`make bench`) or alone: BUILD=build sh bench/wire.sh
set -u
: "${BUILD:=build}"
B="$BUILD/bench"
rounds=${WIRE_ROUNDS:-5}
dur=${WIRE_DURATION:-3}
warm=${WIRE_WARMUP:-1}
rc=0
tmp=$(mktemp -d /tmp/vdsmd-bench-wire.XXXXXX)
sh examples/make-pki.sh "$tmp/pki" > /dev/null 2>&1 || { echo "wire: make-pki failed"; exit 1; }
pids=""

# start NAME TLS(on|off): sets port_NAME and pid_NAME
start() {
	name=$1 tls=$2
	set -- "$BUILD/vdsmd" --config /dev/null --listen 127.0.0.1 --port 0 --tls "$tls" \
		--libvirt-uri test:///default --storage-root "$tmp/storage-$name"
	if [ "$tls" = on ]; then
		set -- "$@" --cert-file "$tmp/pki/server.crt" --key-file "$tmp/pki/server.key" \
			--ca-file "$tmp/pki/ca.crt"
	fi
	mkdir -p "$tmp/storage-$name"
	"$@" --log-level info 2> "$tmp/$name.log" &
	pid=$!
	pids="$pids $pid"
	i=0
	while ! grep -q 'listening on' "$tmp/$name.log" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1; i=$((i + 1))
	done
	port=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\) .*/\1/p' "$tmp/$name.log" | head -n 1)
	eval "port_$name=$port pid_$name=$pid"
}

start plain off
start tls on
sleep 0.5

vals() { sed -n "s/^RESULT.* $1=\([0-9.]*\).*/\1/p" "$2" | sort -n; }
med() { vals "$1" "$2" | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
lo() { vals "$1" "$2" | head -n 1; }
hi() { vals "$1" "$2" | tail -n 1; }

modes="plain_engine plain_packed tls_engine tls_packed"
echo "wire: Host.ping2, engine framing vs vdsmd-framing:packed, $rounds rounds of ${dur}s (+${warm}s warm-up), alternating"
for c in 16:8 1:1; do
	n=${c%:*}; d=${c#*:}
	for m in $modes; do : > "$tmp/$m-$n-$d.txt"; done
	r=0
	while [ $r -lt "$rounds" ]; do
		for m in $modes; do
			t=${m%_*}; f=${m#*_}
			eval "port=\$port_$t pid=\$pid_$t"
			tlsarg=""
			[ "$t" = tls ] && tlsarg="--tls $tmp/pki"
			# shellcheck disable=SC2086
			"$B/load" $tlsarg --framing "$f" --port "$port" --conns "$n" --depth "$d" \
				--duration "$dur" --warmup "$warm" --pid "$pid" --label "$m" \
				>> "$tmp/$m-$n-$d.txt" || rc=1
		done
		r=$((r + 1))
	done
	for m in $modes; do
		f="$tmp/$m-$n-$d.txt"
		printf "wire %-12s %2d x %-2d req/s median %7s (min %7s max %7s)  p50 %5s us  p99 %6s us  server CPU %5s us/req (min %5s max %5s)\n" \
			"$m" "$n" "$d" "$(med rps "$f")" "$(lo rps "$f")" "$(hi rps "$f")" \
			"$(med p50_us "$f")" "$(med p99_us "$f")" "$(med cpu_us_per_req "$f")" \
			"$(lo cpu_us_per_req "$f")" "$(hi cpu_us_per_req "$f")"
	done
	for t in plain tls; do
		a="$tmp/${t}_engine-$n-$d.txt"; b="$tmp/${t}_packed-$n-$d.txt"
		awk -v t="$t" -v n="$n" -v d="$d" -v er="$(med rps "$a")" -v pr="$(med rps "$b")" \
			-v ec="$(med cpu_us_per_req "$a")" -v pc="$(med cpu_us_per_req "$b")" \
			'BEGIN { if (pr > 0 && pc > 0) printf "wire cost  %-5s %2d x %-2d engine framing / packed: req/s %.2fx, server CPU/req %.2fx (%+.1f us per request)\n", t, n, d, er / pr, ec / pc, ec - pc }'
	done
done
for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
rm -rf "$tmp"
exit $rc
