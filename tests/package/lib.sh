# shellcheck shell=bash
# tests/package/lib.sh - shared by test-deb.sh and test-deb-systemd.sh
# (sourced, bash): arguments, checks, the cached debootstrap root, signing.
#   pkg_setup NAME DEB_DIR   LOG=$BUILD/results/NAME.log, pkgs=(the .debs),
#                            root checks; exits 2 when it cannot run
#   check DESCRIPTION CMD... "ok"/"FAIL" line, output to $LOG, counts $fails
#   new_root DIR             a fresh bookworm minbase root in DIR: a copy of
#                            the root unpacked once from the debootstrap
#                            tarball, both cached in $BUILD/debootstrap/
#                            (keyed by the package list: the packages'
#                            Depends, systemd and dbus)
#   sign_request PKI REQ OUT sign REQ with the test CA in PKI as the engine's
#                            pki-enroll-request.sh does (its cert.template's
#                            extensions); SAN localhost and 127.0.0.1
say() { echo "package-test: $*"; }
fails=0
check() { # description command...
	local what=$1
	shift
	if "$@" >>"$LOG" 2>&1; then
		echo "ok   $what"
	else
		echo "FAIL $what"
		fails=$((fails + 1))
	fi
}

pkg_setup() { # name deb_dir
	debs=$(cd "${2:?usage: $1 DEB_DIR}" && pwd) || exit 2
	BUILD=${BUILD:-build}
	cache=$(mkdir -p "$BUILD/debootstrap" && cd "$BUILD/debootstrap" && pwd) || exit 2
	LOG=${LOG:-$BUILD/results/$1.log}
	mkdir -p "$(dirname "$LOG")"
	: > "$LOG"
	[ "$(id -u)" = 0 ] || { say "needs root (chroot, mounts)"; exit 2; }
	command -v debootstrap >/dev/null ||
		{ say "debootstrap is missing (scripts/deps.sh ensure deb)"; exit 2; }
	pkgs=()
	local p f
	for p in vdsmd vdsm-client; do
		f=$(find "$debs" -maxdepth 1 -name "${p}_*.deb" | head -n 1)
		[ -n "$f" ] || { say "no ${p}_*.deb in $debs (make deb)"; exit 2; }
		pkgs+=("$f")
	done
	# the packages' Depends without versions and alternatives, and systemd
	# for test-deb-systemd.sh (one root for both)
	deps=$(for f in "${pkgs[@]}"; do dpkg-deb -f "$f" Depends; done | tr ',' '\n' |
		sed 's/|.*//; s/(.*)//; s/ //g' | grep -v -e '^$' -e '^vdsm' | sort -u | tr '\n' ',')
	deps=${deps}systemd,systemd-sysv,dbus
	tarball=$cache/bookworm-minbase-$(echo "$deps" | sha256sum | cut -c1-12).tgz
	mirror=$(sed -n 's/^URIs: *\([^ ]*debian\/*\)$/\1/p; s/^deb \([^ ]*debian\/*\) .*/\1/p' \
		/etc/apt/sources.list.d/* /etc/apt/sources.list 2>/dev/null | grep -v security | head -n 1)
	mirror=${mirror:-http://deb.debian.org/debian}
}

new_root() { # dir
	local t0=$SECONDS tmp key pristine
	key=$(basename "$tarball" .tgz)
	pristine=$cache/$key.root
	if [ ! -s "$tarball" ]; then
		say "debootstrap tarball (minbase + $deps) -> $tarball"
		tmp=$(mktemp -d /tmp/package-tarball.XXXXXX)
		if ! debootstrap --variant=minbase --include="$deps" --make-tarball="$tarball.tmp" \
			bookworm "$tmp" "$mirror" >>"$LOG" 2>&1; then
			rm -rf "$tmp" "$tarball.tmp"
			say "debootstrap --make-tarball failed (see $LOG)"
			return 1
		fi
		rm -rf "$tmp"
		mv "$tarball.tmp" "$tarball"
		# tarballs and roots of other package lists are stale
		find "$cache" -maxdepth 1 -name 'bookworm-minbase-*.tgz' \
			! -name "$(basename "$tarball")" -delete
		find "$cache" -maxdepth 1 -name 'bookworm-minbase-*.root' ! -name "$key.root" \
			-exec rm -rf --one-file-system {} +
	fi
	# the unpacked root is kept too (debootstrap's second stage is most of
	# the time); each test gets its own copy, never mounts into this one
	if [ ! -e "$pristine/.complete" ]; then
		say "debootstrap from $tarball into $pristine"
		rm -rf --one-file-system "$pristine"
		mkdir -p "$pristine"
		if ! debootstrap --variant=minbase --include="$deps" --unpack-tarball="$tarball" \
			bookworm "$pristine" "$mirror" >>"$LOG" 2>&1; then
			say "debootstrap failed (see $LOG)"
			return 1
		fi
		touch "$pristine/.complete"
	fi
	cp -a "$pristine/." "$1/" && rm -f "$1/.complete" || return 1
	chmod 0755 "$1"   # the root's "/": mktemp makes it 0700, vdsm could not walk it
	say "fresh root in $1 in $((SECONDS - t0)) s"
}

sign_request() { # pki req out
	printf '%s\n' "basicConstraints=CA:FALSE" \
		"keyUsage=critical,digitalSignature,keyEncipherment" \
		"extendedKeyUsage=critical,serverAuth,clientAuth" \
		"subjectAltName=DNS:localhost,IP:127.0.0.1" > "$3.ext"
	openssl x509 -req -in "$2" -CA "$1/ca.crt" -CAkey "$1/ca.key" -CAcreateserial \
		-CAserial "$3.srl" -days 2 -sha256 -extfile "$3.ext" -out "$3" >>"$LOG" 2>&1
}
