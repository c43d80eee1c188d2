#!/bin/sh
# tests/run-integration.sh - run every tests/integration/test_*.py against the
# real build/vdsmd (Python's unittest, Debian's /usr/bin/python3); results go
# to $BUILD/results/; exit 1 if any failed.
set -u
: "${BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
mkdir -p "$BUILD/results"
out="$BUILD/results/integration.txt"
: > "$out"
export VDSMD_BIN="$PWD/$BUILD/vdsmd" VDSM_CLIENT_BIN="$PWD/$BUILD/vdsm-client" VDSMD_BUILD="$PWD/$BUILD"
pass=0 fail=0 skip=0 bad=""
for t in tests/integration/test_*.py; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .py)
	log="$BUILD/results/$name.log"
	start=$(date +%s)
	(cd tests/integration && timeout 600 "$PYTHON" -m unittest -v "$name") > "$log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in.*/\1/p' "$log" | tail -n 1)
	nf=$(sed -n 's/^FAILED (\(.*\))/\1/p' "$log" | tr ',' '\n' | sed -n 's/^ *\(failures\|errors\|unexpected successes\)=\([0-9]*\)/\2/p' | awk '{ s += $1 } END { print s + 0 }')
	# "OK (skipped=2)" / "FAILED (failures=1, skipped=2)": skipped tests are
	# counted as skipped, never as passed
	ns=$(sed -n 's/^\(OK\|FAILED\) (.*skipped=\([0-9]*\).*/\2/p' "$log" | tail -n 1)
	[ -n "$ran" ] || ran=1
	[ -n "$nf" ] || nf=0
	[ -n "$ns" ] || ns=0
	[ $rc -ne 0 ] && [ "$nf" -eq 0 ] && nf=1
	p=$((ran - nf - ns)); [ $p -lt 0 ] && p=0
	pass=$((pass + p)); fail=$((fail + nf)); skip=$((skip + ns))
	echo "$name $p $nf $ns" >> "$out"
	if [ $rc -ne 0 ]; then
		bad="$bad $name"
		echo "FAIL $t (rc=$rc, ${secs}s):"; tail -n 60 "$log"
	else
		echo "ok   $t: $ran tests in ${secs}s"
	fi
done
echo "integration: $pass passed, $fail failed, $skip skipped"
[ -z "$bad" ]
