#!/bin/sh
# tests/memcheck.sh - the integration suite against an ASan+LSan+UBSan build
# of vdsmd ($BUILD, built by `make memcheck`).  vdsmtest.Daemon.stop() fails a
# test when the daemon's stderr holds a sanitizer report or when a daemon
# stopped with SIGTERM does not exit 0 (LeakSanitizer reports leaks at exit).
# The soak (a timing test) is not part of it.  Results: $BUILD/results/.
set -u
: "${BUILD:=build/asan-daemon}"
export VDSMD_SANITIZER_CHECK=1
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-}"
BUILD="$BUILD" exec tests/run-integration.sh
