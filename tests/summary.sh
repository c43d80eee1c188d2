#!/bin/sh
# tests/summary.sh BUILD - add up every results file of a `make check` run and
# print the closing line "N passed, N failed".
: "${1:=build}"
find "$1" -path '*/results/*.txt' -exec cat {} + | awk '
	{ p += $2; f += $3 }
	END { printf "%d passed, %d failed\n", p, f; exit (f > 0) }'
