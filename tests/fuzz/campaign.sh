#!/bin/sh
# tests/fuzz/campaign.sh - the long fuzzing campaign (issue 8): every target
# for $SECONDS_PER (default 600) with ASan+UBSan, $JOBS (default 2) at a time,
# each on a scratch copy of its seed corpus.  Not part of `make check` (which
# keeps a short pass through tests/run-fuzz.sh); run it by hand after
# `make fuzz-build`:   nohup tests/fuzz/campaign.sh > build/campaign.log &
# Logs, the grown corpora and any reproducer land in $OUT (build/campaign).
# Afterwards fold a grown corpus back into the committed seeds (edge-coverage
# set cover, <= 200 files) with
#   /usr/bin/python3 tests/fuzz/cover_merge.py $OUT/bin/NAME tests/fuzz/corpus/NAME $OUT/NAME-corpus
set -u
: "${BUILD:=build}" "${SECONDS_PER:=600}" "${JOBS:=2}" "${OUT:=$BUILD/campaign}"
mkdir -p "$OUT/bin"
targets=${*:-$(ls "$BUILD"/fuzz/ | grep '^fuzz_')}

run_one() {
	name=$1
	# a private copy, so a rebuild of build/fuzz does not pull the binary away
	cp "$BUILD/fuzz/$name" "$OUT/bin/$name"
	work="$OUT/$name-corpus"
	mkdir -p "$work"
	cp -n tests/fuzz/corpus/"$name"/* "$work"/ 2>/dev/null
	dict=""
	[ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
	start=$(date +%s)
	"$OUT/bin/$name" -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 -artifact_prefix="$OUT/$name-" \
		$dict "$work" > "$OUT/$name.log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$name.log" | tail -n 1)
	cov=$(grep -o 'cov: [0-9]*' "$OUT/$name.log" | tail -n 1)
	echo "$name rc=$rc secs=$secs execs=${execs:-?} ${cov} corpus=$(ls "$work" | wc -l)"
}

# JOBS queues, round-robin over the targets
for q in $(seq 1 "$JOBS"); do
	(
		n=0
		for t in $targets; do
			if [ $((n % JOBS + 1)) -eq "$q" ]; then run_one "$t"; fi
			n=$((n + 1))
		done
	) &
done
wait
echo "campaign done"
