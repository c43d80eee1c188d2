#!/bin/sh
# bench/wire.sh - what "one frame per write" (PROTOCOL.md 2) costs: vdsmd
# writing each STOMP frame in its own write()/TLS record (the default; on
# plaintext short MESSAGEs padded to 1024 bytes) against the old packing of
# queued frames into one write (stomp_batch_writes = on), plaintext and TLS,
# Host.ping2 with 16 connections x 8 in flight and 1 x 1.  The four daemons
# run side by side and take turns round by round (WIRE_ROUNDS, default 5,
# WIRE_DURATION seconds each after WIRE_WARMUP), so both modes see the same
# machine load; printed: median req/s with min-max over the rounds, median
# p50/p99 latency and server CPU per request, and the ratio to the baseline.
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

# start NAME TLS(on|off) BATCH(on|off): sets port_NAME and pid_NAME
start() {
	name=$1 tls=$2 batch=$3
	set -- "$BUILD/vdsmd" --config /dev/null --listen 127.0.0.1 --port 0 --tls "$tls" \
		--stomp-batch-writes "$batch" --libvirt-uri test:///default \
		--storage-root "$tmp/storage-$name"
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

start plain_frame off off
start plain_batch off on
start tls_frame on off
start tls_batch on on
sleep 0.5

med() { sed -n "s/^RESULT.* $1=\([0-9.]*\).*/\1/p" "$2" | sort -n |
	awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
lo() { sed -n "s/^RESULT.* $1=\([0-9.]*\).*/\1/p" "$2" | sort -n | head -n 1; }
hi() { sed -n "s/^RESULT.* $1=\([0-9.]*\).*/\1/p" "$2" | sort -n | tail -n 1; }

echo "wire: Host.ping2, one frame per write vs stomp_batch_writes, $rounds rounds of ${dur}s (+${warm}s warm-up), alternating"
for c in 16:8 1:1; do
	n=${c%:*}; d=${c#*:}
	for m in plain_frame plain_batch tls_frame tls_batch; do : > "$tmp/$m-$n-$d.txt"; done
	r=0
	while [ $r -lt "$rounds" ]; do
		for m in plain_frame plain_batch tls_frame tls_batch; do
			eval "port=\$port_$m pid=\$pid_$m"
			tlsarg=""
			case $m in tls_*) tlsarg="--tls $tmp/pki" ;; esac
			# shellcheck disable=SC2086
			"$B/load" $tlsarg --port "$port" --conns "$n" --depth "$d" --duration "$dur" \
				--warmup "$warm" --pid "$pid" --label "$m" >> "$tmp/$m-$n-$d.txt" || rc=1
		done
		r=$((r + 1))
	done
	for m in plain_frame plain_batch tls_frame tls_batch; do
		f="$tmp/$m-$n-$d.txt"
		printf "wire %-11s %2d x %-2d req/s median %7s (min %7s max %7s)  p50 %5s us  p99 %6s us  server CPU %5s us/req\n" \
			"$m" "$n" "$d" "$(med rps "$f")" "$(lo rps "$f")" "$(hi rps "$f")" \
			"$(med p50_us "$f")" "$(med p99_us "$f")" "$(med cpu_us_per_req "$f")"
	done
	for t in plain tls; do
		a="$tmp/${t}_frame-$n-$d.txt"; b="$tmp/${t}_batch-$n-$d.txt"
		awk -v t="$t" -v n="$n" -v d="$d" -v fr="$(med rps "$a")" -v ba="$(med rps "$b")" \
			-v fc="$(med cpu_us_per_req "$a")" -v bc="$(med cpu_us_per_req "$b")" \
			'BEGIN { if (ba > 0 && bc > 0) printf "wire ratio %-5s %2d x %-2d frame-per-write / batched: req/s %.2fx, server CPU/req %.2fx\n", t, n, d, fr / ba, fc / bc }'
	done
done
for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
rm -rf "$tmp"
exit $rc
