#!/bin/sh
# tests/run-fuzz.sh BIN... - run each libFuzzer target for $FUZZ_SECONDS on a
# scratch copy of its seed corpus (tests/fuzz/corpus/<name>); a crash, leak or
# sanitizer report fails the run and leaves the reproducer in $BUILD/fuzz-out.
set -u
: "${BUILD:=build}" "${FUZZ_SECONDS:=60}"
mkdir -p "$BUILD/results" "$BUILD/fuzz-out"
out="$BUILD/results/fuzz.txt"
: > "$out"
bad=""
for f in "$@"; do
	name=$(basename "$f")
	work="$BUILD/fuzz-out/$name-corpus"
	mkdir -p "$work"
	[ -d "tests/fuzz/corpus/$name" ] && cp -n tests/fuzz/corpus/"$name"/* "$work"/ 2>/dev/null
	dict=""
	[ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
	log="$BUILD/results/$name.log"
	"$f" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
		-artifact_prefix="$BUILD/fuzz-out/$name-" $dict "$work" > "$log" 2>&1
	rc=$?
	runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -n 1)
	if [ $rc -ne 0 ]; then
		bad="$bad $name"; echo "$name 0 1" >> "$out"
		echo "FAIL $name (rc=$rc):"; tail -n 40 "$log"
	else
		echo "$name 1 0" >> "$out"
		echo "ok   $name: ${runs:-?} in ${FUZZ_SECONDS}s"
	fi
done
[ -z "$bad" ]
