#!/bin/bash
# tests/package/test-deb.sh DEB_DIR - the built vdsmd and vdsm-client
# packages in a fresh Debian 12 root (`make package-test`, needs root).
#
#   1. a minbase bookworm root from debootstrap, with the packages' runtime
#      dependencies; the debootstrap tarball is cached in
#      $BUILD/debootstrap/ (keyed by that package list), so a second run
#      needs no network
#   2. dpkg -i: the vdsm user and its directories, the conffile, the unit
#      enabled, vdsm-tool's pre-start check refusing a host without
#      certificates
#   3. the unit's ExecStart (read from the installed unit) in the root with
#      a loopback configuration on top, until the packaged vdsm-client
#      answers Host.ping2; SIGTERM stops it with exit status 0
#   4. the packaged vdsm-tool enrols a certificate (a test CA signs it), the
#      pre-start check passes, vdsmd serves TLS with the packaged
#      configuration and the packaged vdsm-client answers with its defaults
#   5. dpkg --purge with vdsmd running: no process and no file of the
#      package, of vdsmd or owned by the vdsm user is left (but the host
#      certificates under /etc/pki, kept as documented)
# Each check prints "ok" or "FAIL"; the exit status is the number of FAILs
# (2 when the root cannot be made).
set -u
# shellcheck source=tests/package/lib.sh
. "$(dirname "$0")/lib.sh"
pkg_setup package-test "${1:-}"

root=$(mktemp -d /tmp/package-root.XXXXXX)
mounts=()
daemon=
cleanup() {
	[ -n "$daemon" ] && kill -KILL "$daemon" 2>/dev/null
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}"; done
	rm -rf --one-file-system "$root"
}
trap cleanup EXIT
start=$SECONDS
new_root "$root" || exit 2
for m in proc dev sys; do
	if [ $m = proc ]; then mount -t proc proc "$root/proc"; else mount --bind /$m "$root/$m"; fi &&
		mounts+=("$root/$m")
done
in_root() { chroot "$root" "$@"; }

# --- install --------------------------------------------------------------
mkdir -p "$root/tmp/debs"
cp "${pkgs[@]}" "$root/tmp/debs/"
check "dpkg -i vdsmd vdsm-client" in_root sh -c 'dpkg -i /tmp/debs/*.deb'
check "system user vdsm (no login shell)" \
	in_root sh -c 'getent passwd vdsm | grep -q ":/var/lib/vdsmd:/usr/sbin/nologin$"'
check "/var/lib/vdsmd and /var/log/vdsmd owned by vdsm" in_root sh -c \
	'[ "$(stat -c %U /var/lib/vdsmd)" = vdsm ] && [ "$(stat -c %U /var/log/vdsmd)" = vdsm ] &&
	 [ "$(stat -c %U /var/lib/vdsmd/storage)" = vdsm ]'
check "/etc/vdsmd/vdsmd.conf is a conffile" \
	in_root sh -c 'dpkg-query -W -f="\${Conffiles}\n" vdsmd | grep -q " /etc/vdsmd/vdsmd.conf "'
check "vdsmd.conf: user = vdsm, the rest the commented defaults" in_root sh -c \
	'[ "$(grep -v -e "^#" -e "^\$" -e "^\[" /etc/vdsmd/vdsmd.conf | sort | tr "\n" ";")" = \
	   "log_file = /var/log/vdsmd/vdsmd.log;user = vdsm;" ]'
check "vdsmd.service enabled" test -L "$root/etc/systemd/system/multi-user.target.wants/vdsmd.service"
check "logrotate, man pages, bash completion" in_root sh -c \
	'[ -f /etc/logrotate.d/vdsmd ] && [ -f /usr/share/man/man8/vdsmd.8.gz ] &&
	 [ -f /usr/share/man/man8/vdsm-tool.8.gz ] && [ -f /usr/share/man/man1/vdsm-client.1.gz ] &&
	 [ -f /usr/share/bash-completion/completions/vdsm-client ]'
unit=$root/lib/systemd/system/vdsmd.service
pre=$(sed -n 's/^ExecStartPre=//p' "$unit")
exe=$(sed -n 's/^ExecStart=//p' "$unit")
say "ExecStartPre: $pre"
say "ExecStart: $exe"
# shellcheck disable=SC2086
out=$(in_root $pre 2>&1); rc=$?
echo "$out" >>"$LOG"
check "pre-start check refuses a host without certificates (3 missing lines)" \
	test "$rc:$(echo "$out" | grep -c '^vdsm-tool: missing: ')" = "1:3"

# --- run the unit's ExecStart ----------------------------------------------
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
loopback="--listen 127.0.0.1 --port $port --tls off --libvirt-uri test:///default"
run_daemon() { # stderr file [flags]
	local out=$1
	shift
	# shellcheck disable=SC2086
	setsid chroot "$root" $exe $loopback "$@" >"$out" 2>&1 &
	daemon=$!
}
ping2() {
	for _ in $(seq 100); do
		if in_root vdsm-client -a 127.0.0.1 -p "$port" --insecure --timeout 2 Host ping2 \
			>"$root/tmp/ping2.out" 2>&1; then
			grep -qx true "$root/tmp/ping2.out" && return 0
		fi
		kill -0 "$daemon" 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}
t0=$SECONDS
# the packaged log_file: /var/log/vdsmd/vdsmd.log
log=$root/var/log/vdsmd/vdsmd.log
run_daemon "$root/tmp/vdsmd.1.err"
check "packaged vdsm-client: Host.ping2 answers true" ping2
say "vdsmd answered after $((SECONDS - t0)) s"
check "vdsmd logs to /var/log/vdsmd/vdsmd.log, dropped to user vdsm" \
	grep -q "running as user vdsm" "$log"
check "storage under /var/lib/vdsmd/storage, no ERROR line" sh -c \
	"grep -q 'storage: 0 domain(s), 0 task record(s) under /var/lib/vdsmd/storage' '$log' &&
	 ! grep ' ERROR ' '$log' && [ ! -s '$root/tmp/vdsmd.1.err' ]"
uid=$(in_root id -u vdsm)
check "the daemon's process runs as uid $uid (vdsm)" test "$(stat -c %u "/proc/$daemon")" = "$uid"
# what logrotate does: move the file away, then SIGHUP (postrotate)
mv "$log" "$log.1"
kill -HUP "$daemon"
reopened() {
	for _ in $(seq 50); do
		grep -q "SIGHUP: log file reopened" "$log" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
check "SIGHUP reopens the log file (a new vdsmd.log, written as vdsm)" reopened
check "the new log file belongs to vdsm" test "$(stat -c %u "$log")" = "$uid"
kill -TERM "$daemon"
wait "$daemon"
rc=$?
daemon=
check "SIGTERM: graceful stop, exit status 0 (got $rc)" test "$rc" = 0
cat "$log.1" "$log" "$root/tmp/vdsmd.1.err" >>"$LOG"

# --- the production path: TLS with certificates enrolled by vdsm-tool ------
# vdsm-tool (packaged) makes the key and request in the root, a test CA
# (examples/make-pki.sh) signs it as the engine's pki-enroll-request.sh
# would, vdsm-tool installs it; the unit's pre-start check then passes and
# vdsmd serves TLS with the packaged configuration (only listen, port and
# the libvirt URI overridden); the packaged vdsm-client uses its defaults,
# the host's own certificate, as VDSM's does.
pki=$root/tmp/pki
sh "$(dirname "$0")/../../examples/make-pki.sh" "$pki" >>"$LOG" 2>&1
check "vdsm-tool certificate-request" in_root vdsm-tool certificate-request \
	--subject /O=Test/CN=localhost --san DNS:localhost,IP:127.0.0.1
sign_request "$pki" "$root/etc/pki/vdsm/requests/vdsm.req" "$pki/host.cer"
check "vdsm-tool certificate-install" in_root vdsm-tool certificate-install \
	--cert /tmp/pki/host.cer --ca /tmp/pki/ca.crt
# shellcheck disable=SC2086
check "pre-start check passes with the enrolled certificate" in_root $pre
# shellcheck disable=SC2086
setsid chroot "$root" $exe --listen 127.0.0.1 --port "$port" --libvirt-uri test:///default \
	--log-file stderr >"$root/tmp/vdsmd.2.log" 2>&1 &
daemon=$!
tls_ping2() {
	for _ in $(seq 100); do
		if in_root vdsm-client -a 127.0.0.1 -p "$port" --timeout 2 Host ping2 \
			>"$root/tmp/ping2.out" 2>&1; then
			grep -qx true "$root/tmp/ping2.out" && return 0
		fi
		kill -0 "$daemon" 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}
check "TLS (packaged config): packaged vdsm-client with the host certificate: Host.ping2" tls_ping2
check "plaintext is refused on the TLS port" sh -c \
	"! chroot '$root' vdsm-client -a 127.0.0.1 -p $port --insecure --timeout 2 Host ping2"
check "vdsmd served TLS from /etc/pki/vdsm" grep -q "tls on" "$root/tmp/vdsmd.2.log"

# --- purge with vdsmd running ----------------------------------------------
check "dpkg --purge vdsmd vdsm-client (vdsmd running)" in_root dpkg --purge vdsmd vdsm-client
sleep 0.5
alive=
for p in /proc/[0-9]*; do
	[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && alive="$alive ${p#/proc/}"
done
check "no process left in the root:${alive:- none}" test -z "$alive"
check "prerm stopped vdsmd gracefully (SIGTERM, then stopped)" sh -c \
	"grep -q 'SIGTERM: stopping' '$root/tmp/vdsmd.2.log' && grep -q 'INFO stopped' '$root/tmp/vdsmd.2.log'"
kill -0 "$daemon" 2>/dev/null || daemon=
check "packages gone from dpkg's database" in_root sh -c \
	'! dpkg-query -W -f="\${Status}\n" vdsmd vdsm-client 2>/dev/null | grep -q installed'
left=
for f in /etc/vdsmd /var/lib/vdsmd /var/log/vdsmd /usr/sbin/vdsmd /usr/bin/vdsm-client \
	/usr/bin/vdsm-tool /lib/systemd/system/vdsmd.service /etc/logrotate.d/vdsmd \
	/etc/systemd/system/multi-user.target.wants/vdsmd.service \
	/usr/share/doc/vdsmd /usr/share/bash-completion/completions/vdsm-client; do
	[ -e "$root$f" ] || [ -L "$root$f" ] && left="$left $f"
done
check "no file of the packages left:${left:- none}" test -z "$left"
# kept on purge, as documented: the host's certificates (enrolled with the
# engine's CA) under /etc/pki
owned=$(find "$root" -xdev -uid "$uid" -not -path "$root/etc/pki/*" 2>/dev/null |
	sed "s|^$root||" | head -n 5 | tr '\n' ' ')
check "no file owned by vdsm (uid $uid) left outside /etc/pki: ${owned:-none}" test -z "$owned"
check "the host certificate and key are kept in /etc/pki/vdsm" \
	test -f "$root/etc/pki/vdsm/certs/vdsmcert.pem" -a -f "$root/etc/pki/vdsm/keys/vdsmkey.pem"
say "$fails failure(s) in $((SECONDS - start)) s (log $LOG)"
exit "$fails"
