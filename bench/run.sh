#!/bin/sh
# bench/run.sh - run the benchmarks (make bench).  Each helper owns one
# clearly delimited block below; env: BUILD (build dir), PYTHON.
set -u
: "${BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
rc=0

# --- rpc ---
# JSON-RPC engine ns/request per codec and worker pool scaling (bench/dispatch.c).
if [ -x "$BUILD/bench/dispatch" ]; then
	echo "# rpc: engine dispatch and worker pool"
	"$BUILD/bench/dispatch" || rc=1
fi
# --- end rpc ---

exit $rc
