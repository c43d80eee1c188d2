#!/bin/sh
# tests/run-unit.sh BIN... - run Check programs, record per-program results
# under $BUILD/results/, print one summary line; exit 1 if any failed.
set -u
: "${BUILD:=build}"
mkdir -p "$BUILD/results"
out="$BUILD/results/unit.txt"
: > "$out"
pass=0 fail=0 bad=""
for t in "$@"; do
	log="$BUILD/results/$(basename "$t").log"
	"$t" > "$log" 2>&1
	rc=$?
	line=$(grep -E '^[0-9]+%: Checks: ' "$log" | tail -n 1)
	checks=$(echo "$line" | sed -n 's/.*Checks: \([0-9]*\).*/\1/p')
	failures=$(echo "$line" | sed -n 's/.*Failures: \([0-9]*\).*/\1/p')
	errors=$(echo "$line" | sed -n 's/.*Errors: \([0-9]*\).*/\1/p')
	if [ -z "$checks" ]; then checks=1 failures=1 errors=0; fi
	f=$((failures + errors))
	if [ $rc -ne 0 ] && [ $f -eq 0 ]; then f=1; fi
	p=$((checks - failures - errors)); [ $p -lt 0 ] && p=0
	pass=$((pass + p)); fail=$((fail + f))
	echo "$(basename "$t") $p $f" >> "$out"
	if [ $f -ne 0 ]; then
		bad="$bad $(basename "$t")"
		echo "FAIL $t (rc=$rc):"; grep -vE '^Running suite' "$log" | tail -n 30
	else
		echo "ok   $t: $line"
	fi
done
echo "unit ($BUILD): $pass passed, $fail failed"
[ -z "$bad" ]
