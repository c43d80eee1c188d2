#!/bin/sh
# tests/lint.sh - `make lint`: cppcheck and clang-tidy over our own C code
# (common codecs stomp rpc vdsmd client tests bench), and storage's error
# idiom (vdsmd/storage/st_file.h: `strerror(-` and `-errno` only in the
# file primitives).  Configuration:
#   .clang-tidy (checks and why some are off; tests/ and bench/ add one more),
#   tests/cppcheck-suppressions.txt (each false positive with its reason);
# single false positives are silenced in place with NOLINT(check) + reason.
# Output in $BUILD/lint/; exit 1 on any finding.  Runs two jobs at a time.
set -u
cd "$(dirname "$0")/.."
: "${BUILD:=build}" "${JOBS:=2}"
DIRS="common io codecs stomp rpc vdsmd client tests bench"
out="$BUILD/lint"
mkdir -p "$out" "$BUILD/results"
PKGS="yajl openssl libvirt libnl-3.0 libnl-route-3.0 check"
pkg-config --exists msgpack 2>/dev/null && PKGS="$PKGS msgpack" && MP=-DWITH_MSGPACK=1
FLAGS="-std=c11 -D_GNU_SOURCE ${MP:-} -DVDSMD_VERSION=\"lint\" -I. $(pkg-config --cflags $PKGS)"
export FLAGS
start=$(date +%s)

# storage's error idiom: a failed system call becomes a value
# (vd_sys(errno)) or text only in the file primitives that st_file.h's
# header names; every other storage file returns named vd_err codes
# (VD_ECANCELED, VD_ESYS(EEXIST), ...) and hands an rc to st_fail_rc,
# st_errf or st_rc_text.  A literal -EXXX there is a bare errno, which
# shares its numbers with enum vd_err (-ENOENT == VD_EPROTO).
ST_PRIMITIVES="st_file.h st_meta.c st_safe.c st_volume.c"
why="errno outside the file primitives (vdsmd/storage/st_file.h) [storage-errno]"
for f in vdsmd/storage/*.[ch]; do
	case " $ST_PRIMITIVES " in *" ${f##*/} "*) continue ;; esac
	grep -HnE -e 'strerror\(-' -e '-errno' -e '(^|[^A-Za-z0-9_])-E[A-Z][A-Z0-9]*' "$f" |
		sed "s|\$|: error: $why|"
done > "$out/errno.txt"
errno_n=$(wc -l < "$out/errno.txt")
echo "storage error idiom: $errno_n finding(s)"

# cppcheck: warnings, portability, performance (style is left to review).
# shellcheck disable=SC2086
cppcheck -q -j"$JOBS" --std=c11 --enable=warning,portability,performance \
	--inline-suppr --suppressions-list=tests/cppcheck-suppressions.txt \
	-D_GNU_SOURCE ${MP:-} '-DVDSMD_VERSION="lint"' -I. \
	--template='{file}:{line}:{column}: {severity}: {message} [{id}]' \
	$DIRS 2> "$out/cppcheck.txt"
cpp_n=$(grep -c '\[[A-Za-z0-9_]*\]$' "$out/cppcheck.txt")
echo "cppcheck: $cpp_n finding(s) in $(( $(date +%s) - start ))s"

# clang-tidy: one process per 4 files, $JOBS at a time; findings in headers
# of our tree are reported once (deduplicated).
t1=$(date +%s)
# shellcheck disable=SC2086
find $DIRS -name '*.c' | sort | xargs -P"$JOBS" -n4 sh -c \
	'clang-tidy --quiet --header-filter="^$PWD/(common|io|codecs|stomp|rpc|vdsmd|client|tests|bench)/" "$@" -- $FLAGS 2>/dev/null' _ \
	> "$out/clang-tidy.raw"
grep -E ': (warning|error): .*\[[A-Za-z0-9.,-]+\]$' "$out/clang-tidy.raw" \
	| sed "s|^$PWD/||" | sort -u > "$out/clang-tidy.txt"
tidy_n=$(wc -l < "$out/clang-tidy.txt")
echo "clang-tidy: $tidy_n finding(s) in $(( $(date +%s) - t1 ))s"

cat "$out/errno.txt" "$out/cppcheck.txt" "$out/clang-tidy.txt"
bad=$((errno_n + cpp_n + tidy_n))
echo "lint $([ $bad -eq 0 ] && echo 1 || echo 0) $([ $bad -eq 0 ] && echo 0 || echo 1)" > "$BUILD/results/lint.txt"
echo "lint: $bad finding(s) in $(( $(date +%s) - start ))s"
[ "$bad" -eq 0 ]
