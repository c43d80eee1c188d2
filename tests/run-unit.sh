#!/bin/sh
# tests/run-unit.sh BIN... - run Check programs, record per-program results
# under $BUILD/results/ as "NAME PASSED FAILED SKIPPED" (test cases), print
# one summary line; exit 1 if any failed.  A program announces a test it
# cannot run in this build with a "SKIP: name: reason" line (check_skip() of
# tests/unit/check_main.h): counted as skipped, never as passed.
# SANITIZER_FAIL=REGEX: a log line matching it fails the program too (make
# tsan: reports of forked Check children).
set -u
: "${BUILD:=build}"
mkdir -p "$BUILD/results"
out="$BUILD/results/unit.txt"
: > "$out"
pass=0 fail=0 skip=0 bad=""
for t in "$@"; do
	log="$BUILD/results/$(basename "$t").log"
	"$t" > "$log" 2>&1
	rc=$?
	line=$(grep -E '^[0-9]+%: Checks: ' "$log" | tail -n 1)
	checks=$(echo "$line" | sed -n 's/.*Checks: \([0-9]*\).*/\1/p')
	failures=$(echo "$line" | sed -n 's/.*Failures: \([0-9]*\).*/\1/p')
	errors=$(echo "$line" | sed -n 's/.*Errors: \([0-9]*\).*/\1/p')
	s=$(grep -c '^SKIP: ' "$log")
	if [ -z "$checks" ]; then checks=1 failures=1 errors=0; fi
	f=$((failures + errors))
	if [ -n "${SANITIZER_FAIL:-}" ] && grep -Eq "$SANITIZER_FAIL" "$log" && [ $f -eq 0 ]; then
		f=1; rc=1
	fi
	if [ $rc -ne 0 ] && [ $f -eq 0 ]; then f=1; fi
	p=$((checks - failures - errors)); [ $p -lt 0 ] && p=0
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
	echo "$(basename "$t") $p $f $s" >> "$out"
	if [ $f -ne 0 ]; then
		bad="$bad $(basename "$t")"
		echo "FAIL $t (rc=$rc):"; grep -vE '^Running suite' "$log" | tail -n 30
	else
		extra=""; [ "$s" -gt 0 ] && extra=", $s skipped"
		echo "ok   $t: $line$extra"
		grep '^SKIP: ' "$log" | sed 's/^/       /'
	fi
done
echo "unit ($BUILD): $pass passed, $fail failed, $skip skipped"
[ -z "$bad" ]
