#!/bin/sh
# tests/summary.sh BUILD - add up the test-case results of a `make check` run
# (unit and integration, every results dir under BUILD: build/results and
# build/asan/results) and print the closing line
# "N passed, N failed, N skipped".  Fuzzing and lint are not tests: they
# print their own lines (results/fuzz.txt, results/lint.txt) and only fail
# the run.  Result files: "NAME PASSED FAILED [SKIPPED]" per line.
: "${1:=build}"
rc=0
for kind in fuzz lint; do
	files=$(find "$1" -path "*/results/$kind.txt" 2>/dev/null)
	[ -n "$files" ] || continue
	# shellcheck disable=SC2086
	cat $files | awk -v k="$kind" '
		{ n++; if ($3 > 0) bad++ }
		END { printf "%s: %d target(s), %d failed\n", (k == "fuzz" ? "fuzz" : "lint"), n, bad; exit (bad > 0) }' || rc=1
done
find "$1" \( -path '*/results/unit.txt' -o -path '*/results/integration.txt' \) -exec cat {} + | awk -v rc="$rc" '
	{ p += $2; f += $3; s += $4 }
	END { printf "%d passed, %d failed, %d skipped\n", p, f, s; exit (f > 0 || rc > 0) }'
