#!/bin/sh
# tests/summary.sh BUILD - add up the test-case results of a `make check` run
# (BUILD/results: unit and integration; BUILD/asan/results: the unit tests
# under ASan) and print the closing line "N passed, N failed, N skipped".
# Fuzzing and lint are not tests: they print their own lines (fuzz.txt,
# lint.txt) and only fail the run.  Result files: "NAME PASSED FAILED
# [SKIPPED]" per line.
: "${1:=build}"
dirs="$1/results $1/asan/results"
rc=0
for kind in fuzz lint; do
	files=""
	for d in $dirs; do [ -f "$d/$kind.txt" ] && files="$files $d/$kind.txt"; done
	[ -n "$files" ] || continue
	# shellcheck disable=SC2086
	cat $files | awk -v k="$kind" '
		{ n++; if ($3 > 0) bad++ }
		END { printf "%s: %d %s, %d failed (not counted as tests)\n", k, n,
			(k == "fuzz" ? "target(s)" : "pass(es)"), bad; exit (bad > 0) }' || rc=1
done
for d in $dirs; do
	for f in unit integration; do [ -f "$d/$f.txt" ] && cat "$d/$f.txt"; done
done | awk -v rc="$rc" '
	{ p += $2; f += $3; s += $4 }
	END { printf "%d passed, %d failed, %d skipped\n", p, f, s; exit (f > 0 || rc > 0) }'
