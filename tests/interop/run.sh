#!/bin/sh
# tests/interop/run.sh - install the third-party STOMP clients and run the
# interoperability matrix alone (make check runs it with the other
# integration tests: tests/integration/test_interop_matrix.py).
set -eu
cd "$(dirname "$0")/../.."
: "${BUILD:=build}"
tests/interop/setup.sh all
make --no-print-directory BUILD="$BUILD" all
export VDSMD_BIN="$PWD/$BUILD/vdsmd" VDSMD_BUILD="$PWD/$BUILD"
cd tests/integration
exec /usr/bin/python3 -m unittest -v test_interop_matrix
