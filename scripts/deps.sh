#!/bin/sh
# scripts/deps.sh - install the Debian packages vdsmd needs.
#   deps.sh ensure [run|all|deb]   install only what is missing (fast when nothing is)
#   deps.sh install [run|all|deb]  install (or upgrade) every package of the set
#   deps.sh list [run|all|deb]     print the package list
# Sets: "run" is what building and running vdsmd needs (`make run`); "all"
# (the default) adds what the tests, fuzzing, lint and benchmarks need
# (`make check`, `make deps`); "deb" adds to "run" what `make deb` and
# `make package-test` need (debhelper, lintian, debootstrap), kept out of
# "all" so that `make check` does not wait for them.
#
# Services: packages such as rabbitmq-server (and erlang's epmd) start a
# system service from their maintainer scripts; the tests start their own
# private, loopback-only broker instead.  While apt-get runs, a policy-rc.d
# (see invoke-rc.d(8)) refuses every start, stop and restart of those
# services, so nothing new is started and a service the machine already
# runs is neither stopped nor restarted.  An existing /usr/sbin/policy-rc.d
# (the administrator's) is left as it is.
set -eu

# python3 + python3-yaml: api/gen.py generates the verb schema at build time;
# groff-base: test_api_schema.py checks that man/vdsm-client.1 renders cleanly;
# curl and libnbd-bin (nbdinfo, nbdcopy): the image-transfer and NBD tests read
# what vdsmd serves with clients that are not ours; libnbd-dev: the image
# server's nbd: backend is a libnbd client
RUN_PKGS="build-essential pkg-config libyajl-dev libmsgpack-dev libev-dev libssl-dev
libvirt-dev libnl-3-dev libnl-route-3-dev libnbd-dev qemu-utils python3 python3-yaml"
TEST_PKGS="check openssl python3-stomp clang libclang-rt-14-dev procps
rabbitmq-server ruby-stomp libnet-stomp-perl nodejs npm cppcheck clang-tidy
qemu-system-x86 iproute2 libvirt-daemon-system libvirt-clients util-linux
groff-base curl libnbd-bin"
# make deb (dpkg-buildpackage, dh, lintian) and make package-test
# (debootstrap; systemd-nspawn boots the root under systemd)
DEB_PKGS="debhelper dpkg-dev fakeroot lintian debootstrap systemd-container"

pkgs() {
	case "${1:-all}" in
	run) echo $RUN_PKGS ;;
	all) echo $RUN_PKGS $TEST_PKGS ;;
	deb) echo $RUN_PKGS $DEB_PKGS ;;
	*) echo "deps.sh: unknown set '$1' (run, all or deb)" >&2; exit 2 ;;
	esac
}

# The set to install: NodeSource's nodejs package bundles npm and conflicts
# with Debian's npm package, so npm is left out when a working npm command
# exists (apt-get would otherwise refuse the whole set).
installable() {
	for p in $(pkgs "$1"); do
		[ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
		echo "$p"
	done
}

missing() {
	for p in $(pkgs "$1"); do
		# NodeSource's nodejs package bundles npm (and conflicts with
		# Debian's npm package): a working npm command is enough.
		[ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
			|| echo "$p"
	done
}

POLICY=/usr/sbin/policy-rc.d
ours=""
drop_policy() { [ -n "$ours" ] && rm -f "$POLICY"; ours=""; }

install() {
	if [ "$(id -u)" != 0 ]; then
		echo "deps.sh: installing $* needs root (apt-get); run 'sudo make deps'" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	if [ ! -e "$POLICY" ]; then
		trap drop_policy EXIT
		trap 'drop_policy; exit 130' INT TERM
		cat > "$POLICY" <<'POL'
#!/bin/sh
# Written by vdsmd's scripts/deps.sh for one apt-get run (removed after it):
# the broker's services are neither started, stopped nor restarted.
for a in "$@"; do
	case "$a" in
	rabbitmq-server|rabbitmq-server.service|epmd|epmd.service|epmd.socket) exit 101 ;;
	esac
done
exit 0
POL
		chmod 0755 "$POLICY"
		ours=1
	fi
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends "$@"
	drop_policy
}

set_name=${2:-all}
case "${1:-ensure}" in
list) pkgs "$set_name" ;;
install) install $(installable "$set_name") ;;
ensure)
	m=$(missing "$set_name" | tr '\n' ' ')
	if [ -n "${m% }" ]; then
		echo "deps.sh: installing missing packages: $m"
		install $m
	fi
	;;
*) echo "usage: deps.sh ensure|install|list [run|all|deb]" >&2; exit 2 ;;
esac
