#!/bin/bash
# tests/package/test-deb-systemd.sh DEB_DIR - the packages under a real
# systemd: a fresh Debian 12 root (the cached debootstrap tarball of
# lib.sh) booted with systemd-nspawn, with a private network (loopback
# only, so the packaged configuration's port 54321 collides with nothing).
# `make package-test` runs it after test-deb.sh; needs root.
#
#   1. dpkg -i: the unit is enabled and started by the postinst; without
#      certificates its pre-start check fails (one journal line per file)
#      and the start limit leaves it failed instead of retrying forever
#   2. vdsm-tool enrols a certificate (a test CA signs it); systemctl start:
#      active, running as vdsm, the packaged vdsm-client answers Host.ping2
#      over TLS with its defaults
#   3. systemctl reload reopens the log (SIGHUP); a killed vdsmd is
#      restarted (Restart=on-failure); systemctl stop is a clean stop
#   4. dpkg --purge with the service running: stopped by systemd, the unit
#      and the package's files gone
# Each check prints "ok" or "FAIL"; the exit status is the number of FAILs.
set -u
# shellcheck source=tests/package/lib.sh
. "$(dirname "$0")/lib.sh"
pkg_setup package-test-systemd "${1:-}"
command -v systemd-nspawn >/dev/null ||
	{ say "systemd-nspawn is missing (scripts/deps.sh ensure deb)"; exit 2; }

root=$(mktemp -d /tmp/package-nspawn.XXXXXX)
nspawn=
cleanup() {
	if [ -n "$nspawn" ] && kill -0 "$nspawn" 2>/dev/null; then
		kill -TERM "$nspawn"   # nspawn halts the container
		for _ in $(seq 50); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$nspawn" 2>/dev/null
	fi
	rm -rf --one-file-system "$root"
}
trap cleanup EXIT
start=$SECONDS
new_root "$root" || exit 2
mkdir -p "$root/root/debs"
cp "${pkgs[@]}" "$root/root/debs/"   # not /tmp: the booted system mounts a tmpfs there

setsid systemd-nspawn --register=no --keep-unit --private-network -q -D "$root" -b \
	--console=pipe </dev/null >>"$LOG" 2>&1 &
nspawn=$!
# the container's init: the child of systemd-nspawn running systemd (it
# forks short-lived helpers first)
init=
for _ in $(seq 300); do
	for c in $(pgrep -P "$nspawn"); do
		[ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ] && init=$c
	done
	[ -n "$init" ] && break
	kill -0 "$nspawn" 2>/dev/null || break
	sleep 0.1
done
[ -n "$init" ] || { say "systemd-nspawn did not start systemd (see $LOG)"; exit 2; }
in_ct() { timeout 60 nsenter -t "$init" -a "$@"; }
booted() {
	for _ in $(seq 150); do
		case $(in_ct systemctl is-system-running 2>/dev/null) in
		running | degraded) return 0 ;;
		esac
		sleep 0.2
	done
	return 1
}
check "the root boots systemd in systemd-nspawn" booted
say "booted in $((SECONDS - start)) s"
[ "$fails" = 0 ] || exit "$fails"

# --- install: enabled, started, refused until configured --------------------
check "dpkg -i (postinst enables and starts vdsmd.service)" \
	in_ct sh -c 'dpkg -i /root/debs/*.deb'
check "vdsmd.service is enabled" in_ct systemctl is-enabled --quiet vdsmd
failed_for_good() {
	for _ in $(seq 150); do
		in_ct systemctl is-failed --quiet vdsmd && return 0
		sleep 0.2
	done
	return 1
}
check "without certificates the start limit leaves it failed (no endless retries)" failed_for_good
tries=$(in_ct journalctl -u vdsmd --no-pager -o cat | grep -c '^vdsm-tool: missing: vdsmd certificate ')
check "the journal names the missing certificate once per try ($tries tries, limit 5)" \
	test "$tries" -ge 1 -a "$tries" -le 5
sleep 3
tries2=$(in_ct journalctl -u vdsmd --no-pager -o cat | grep -c '^vdsm-tool: missing: vdsmd certificate ')
check "and stays failed ($tries2 tries 3 s later)" test "$tries" -ge 1 -a "$tries2" = "$tries"

# --- enrol, start, TLS ---------------------------------------------------------
pki=$root/root/pki
sh "$(dirname "$0")/../../examples/make-pki.sh" "$pki" >>"$LOG" 2>&1
check "vdsm-tool certificate-request" in_ct vdsm-tool certificate-request \
	--subject /O=Test/CN=localhost --san DNS:localhost,IP:127.0.0.1
sign_request "$pki" "$root/etc/pki/vdsm/requests/vdsm.req" "$pki/host.cer"
check "vdsm-tool certificate-install" in_ct vdsm-tool certificate-install \
	--cert /root/pki/host.cer --ca /root/pki/ca.crt
# no libvirt daemon in the container: the test driver, the rest as packaged
echo "libvirt_uri = test:///default" >> "$root/etc/vdsmd/vdsmd.conf"
check "systemctl start vdsmd" in_ct sh -c 'systemctl reset-failed vdsmd; systemctl start vdsmd'
ping2() {
	for _ in $(seq 100); do
		in_ct vdsm-client --timeout 2 Host ping2 2>/dev/null | grep -qx true && return 0
		sleep 0.2
	done
	return 1
}
check "the packaged vdsm-client (TLS, host certificate) answers Host.ping2" ping2
main=$(in_ct systemctl show -p MainPID --value vdsmd)
uid=$(in_ct id -u vdsm)
check "MainPID $main runs as vdsm (uid $uid)" \
	in_ct sh -c "grep -q '^Uid:[[:space:]]*${uid}[[:space:]]' /proc/$main/status"
log=$root/var/log/vdsmd/vdsmd.log
check "systemctl reload: SIGHUP reopens /var/log/vdsmd/vdsmd.log" sh -c \
	"nsenter -t $init -a systemctl reload vdsmd && for i in \$(seq 50); do
	   grep -q 'SIGHUP: log file reopened' '$log' && exit 0; sleep 0.1; done; exit 1"
in_ct sh -c "kill -KILL $main"
restarted() {
	for _ in $(seq 100); do
		local now
		now=$(in_ct systemctl show -p MainPID --value vdsmd)
		[ -n "$now" ] && [ "$now" != 0 ] && [ "$now" != "$main" ] && ping2 && return 0
		sleep 0.2
	done
	return 1
}
check "a killed vdsmd is restarted (Restart=on-failure) and answers again" restarted
check "systemctl stop: clean stop (inactive, not failed; 'stopped' logged)" sh -c \
	"nsenter -t $init -a systemctl stop vdsmd &&
	 [ \"\$(nsenter -t $init -a systemctl is-active vdsmd)\" = inactive ] &&
	 tail -n 3 '$log' | grep -q 'INFO stopped'"

# --- purge with the service running ---------------------------------------------
check "systemctl start vdsmd (again)" in_ct systemctl start vdsmd
check "running before the purge" ping2
check "dpkg --purge vdsmd vdsm-client" in_ct dpkg --purge vdsmd vdsm-client
check "no vdsmd process in the container" sh -c "! nsenter -t $init -a pgrep -x vdsmd"
check "systemd no longer knows vdsmd.service" sh -c \
	"[ \"\$(nsenter -t $init -a systemctl show -p LoadState --value vdsmd)\" = not-found ]"
left=
for f in /etc/vdsmd /var/lib/vdsmd /var/log/vdsmd /usr/sbin/vdsmd /usr/bin/vdsm-client \
	/lib/systemd/system/vdsmd.service /etc/systemd/system/multi-user.target.wants/vdsmd.service; do
	if [ -e "$root$f" ] || [ -L "$root$f" ]; then left="$left $f"; fi
done
check "no file of the packages left:${left:- none}" test -z "$left"
say "$fails failure(s) in $((SECONDS - start)) s (log $LOG)"
exit "$fails"
