#!/bin/sh
# scripts/deps.sh - install the Debian packages vdsmd needs to build and test.
#   deps.sh ensure   install only when something is missing (fast when not)
#   deps.sh install  install (or upgrade) every package
#   deps.sh list     print the package list
set -eu

PKGS="build-essential pkg-config libyajl-dev libmsgpack-dev libev-dev check
libssl-dev openssl libvirt-dev qemu-utils python3 python3-yaml python3-stomp clang
libclang-rt-14-dev procps rabbitmq-server ruby-stomp libnet-stomp-perl nodejs
cppcheck clang-tidy libvirt-daemon-system qemu-system-x86 libvirt-clients util-linux"

missing() {
	for p in $PKGS; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
			|| echo "$p"
	done
}

install() {
	if [ "$(id -u)" != 0 ]; then
		echo "deps.sh: installing $* needs root (apt-get); run 'sudo make deps'" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends "$@"
	case " $* " in
	*" rabbitmq-server "*)
		# The package may start its system service (invoke-rc.d); the
		# broker tests run their own private, loopback-only instance.
		if command -v invoke-rc.d >/dev/null 2>&1; then
			invoke-rc.d rabbitmq-server stop >/dev/null 2>&1 || true
		fi
		epmd -kill >/dev/null 2>&1 || true
		;;
	esac
	case " $* " in
	*" libvirt-daemon-system "*)
		# The QEMU tests start a private session libvirtd of their own
		# (tests/integration/privlibvirt.py); the system one is not used.
		if command -v invoke-rc.d >/dev/null 2>&1; then
			invoke-rc.d libvirtd stop >/dev/null 2>&1 || true
		fi
		;;
	esac
}

case "${1:-ensure}" in
list) echo $PKGS ;;
install) install $PKGS ;;
ensure)
	m=$(missing | tr '\n' ' ')
	if [ -n "${m% }" ]; then
		echo "deps.sh: installing missing packages: $m"
		install $m
	fi
	;;
*) echo "usage: deps.sh ensure|install|list" >&2; exit 2 ;;
esac
