#!/bin/sh
# tests/run-integration.sh - run every tests/integration/test_*.py (or the
# files named in $INTEGRATION_TESTS) against the real $BUILD/vdsmd (Python's
# unittest, Debian's /usr/bin/python3); results go to $BUILD/results/ as
# "NAME PASSED FAILED SKIPPED" (test cases: a skipTest() is skipped, never
# passed); exit 1 if any failed.
set -u
: "${BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
mkdir -p "$BUILD/results"
out="$BUILD/results/integration.txt"
: > "$out"
export VDSMD_BIN="$PWD/$BUILD/vdsmd" VDSM_CLIENT_BIN="$PWD/$BUILD/vdsm-client" VDSMD_BUILD="$PWD/$BUILD"
pass=0 fail=0 skip=0 bad=""
for t in ${INTEGRATION_TESTS:-tests/integration/test_*.py}; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .py)
	log="$BUILD/results/$name.log"
	start=$(date +%s)
	(cd tests/integration && timeout 600 "$PYTHON" -m unittest -v "$name") > "$log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in.*/\1/p' "$log" | tail -n 1)
	# the closing line: "OK", "OK (skipped=2)", "FAILED (failures=1, errors=1, skipped=3)"
	tail=$(grep -E '^(OK|FAILED)( \(.*\))?$' "$log" | tail -n 1)
	count() { v=$(echo "$tail" | sed -n "s/.*[( ]$1=\([0-9]*\).*/\1/p"); echo "${v:-0}"; }
	nf=$(( $(count failures) + $(count errors) + $(count 'unexpected successes') ))
	ns=$(count skipped)
	[ -n "$ran" ] || ran=1
	[ $rc -ne 0 ] && [ "$nf" -eq 0 ] && nf=1
	p=$((ran - nf - ns)); [ $p -lt 0 ] && p=0
	pass=$((pass + p)); fail=$((fail + nf)); skip=$((skip + ns))
	echo "$name $p $nf $ns" >> "$out"
	if [ $rc -ne 0 ]; then
		bad="$bad $name"
		echo "FAIL $t (rc=$rc, ${secs}s):"; tail -n 60 "$log"
	else
		echo "ok   $t: $ran tests in ${secs}s$( [ "$ns" -gt 0 ] && echo ", $ns skipped:")"
		sed -n 's/^\(.*\) \.\.\. skipped \(.*\)$/       SKIP \1: \2/p' "$log"
	fi
done
echo "integration ($BUILD): $pass passed, $fail failed, $skip skipped"
[ -z "$bad" ]
