#!/bin/sh
# tests/tsan.sh UNIT_BIN... - `make tsan`: the Check unit programs and a
# representative part of the integration suite against a ThreadSanitizer
# build ($BUILD, default build/tsan, built by the Makefile: the daemon's and
# core's code under -fsanitize=thread, a VD_TEST_HOOKS test build).
#
# Any ThreadSanitizer report fails: in a unit program's output (Check forks
# one child per test; a child's report lands in the same log), or in the
# daemon's stderr (vdsmtest.Daemon.stop fails the test on a "Sanitizer"
# line, and on a non-zero exit after SIGTERM: TSan exits 66 after a report).
#
# Suppressions: tests/tsan-suppressions.txt (libvirt and GLib only, each
# with its reason).  libev is Debian's shared library, not instrumented:
# built under TSan, its ev_async/signal pipe protocol (plain flags ordered by
# memory fences, which TSan does not model) is itself reported, which would
# need libev suppressions; uninstrumented, its read()/write() of the wake-up
# eventfd still go through TSan's interceptors.  Our code never relies on
# ev_async_send for ordering (the bus and the pool hand data over under a
# mutex), so nothing is lost that the reports could show.
#
# Integration subset: $TSAN_INTEGRATION (file names, or "all"), default the
# files whose daemon paths cross threads: VM sampling and lifecycle verbs on
# workers (test_virt), storage tasks on their executor (test_storage), the
# event bus from the samplers to the loop (test_rpc_events), host stats
# sampling (test_host), the STOMP server with the worker pool
# (test_net_stomp) and event fan-out to slow subscribers (test_net_daemon):
# ~70 s on 2 cores.  The whole suite under TSan took 4 min (249 tests, no
# report) on a loaded 2-core machine: too much for CI's 20 minutes next to
# make check and make memcheck; TSAN_INTEGRATION=all runs it.  Every file
# runs without TSan in `make check`.
set -u
: "${BUILD:=build/tsan}" "${PYTHON:=/usr/bin/python3}"
: "${TSAN_INTEGRATION:=tests/integration/test_virt.py tests/integration/test_storage.py \
tests/integration/test_rpc_events.py tests/integration/test_host.py tests/integration/test_net_stomp.py \
tests/integration/test_net_daemon.py}"
[ "$TSAN_INTEGRATION" = all ] && TSAN_INTEGRATION=$(echo tests/integration/test_*.py)
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan-suppressions.txt second_deadlock_stack=1 exitcode=66${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
# TSan is 5-15x slower: Check's per-test timeouts scale with it
export CK_TIMEOUT_MULTIPLIER="${CK_TIMEOUT_MULTIPLIER:-10}"
rm -rf "$BUILD/results"
rc=0
SANITIZER_FAIL='ThreadSanitizer|^SUMMARY: ' BUILD="$BUILD" tests/run-unit.sh "$@" || rc=1
VDSMD_SANITIZER_CHECK=1 INTEGRATION_TESTS="$TSAN_INTEGRATION" BUILD="$BUILD" PYTHON="$PYTHON" \
	tests/run-integration.sh || rc=1
exit $rc
