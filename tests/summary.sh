#!/bin/sh
# tests/summary.sh BUILD - add up every results file of a `make check` run and
# print the closing line "N passed, N failed" (", N skipped" when some were).
: "${1:=build}"
find "$1" -path '*/results/*.txt' -exec cat {} + | awk '
	{ p += $2; f += $3; s += $4 }
	END {
		if (s > 0) printf "%d passed, %d failed, %d skipped\n", p, f, s
		else printf "%d passed, %d failed\n", p, f
		exit (f > 0)
	}'
