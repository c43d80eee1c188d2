#!/bin/sh
# tests/interop/setup.sh [debian|npm|all] - install what the interoperability
# matrix (tests/integration/test_interop_matrix.py) needs:
#   debian  the Debian client libraries, through scripts/deps.sh (python3-stomp,
#           ruby-stomp, libnet-stomp-perl, nodejs); needs root only when one
#           is missing
#   npm     @stomp/stompjs and @stomp/tcp-wrapper (pinned) into $NPM_PREFIX
#           (default build/npm) with npm; nothing is fetched when the pinned
#           versions are already there.  Third-party code stays under build/.
# Exit status 3 with a message when a piece cannot be had here (no node or
# npm command, the npm registry unreachable): the stompjs tests are then
# skipped with that message; 1 for any other failure (the tests fail).
set -u
cd "$(dirname "$0")/../.."
: "${NPM_PREFIX:=${VDSMD_BUILD:-build}/npm}"
STOMPJS=7.5.0
TCPWRAP=1.0.1

have_npm_pkgs() {
	node -e '
		const p = process.argv[1];
		const v = (n) => require(p + "/node_modules/" + n + "/package.json").version;
		process.exit(v("@stomp/stompjs") === process.argv[2] && v("@stomp/tcp-wrapper") === process.argv[3] ? 0 : 1);
	' "$(cd "$NPM_PREFIX" 2>/dev/null && pwd || echo /nonexistent)" "$STOMPJS" "$TCPWRAP" 2>/dev/null
}

setup_debian() {
	scripts/deps.sh ensure || {
		echo "interop setup: Debian packages missing (run 'sudo make deps')" >&2
		return 1
	}
}

setup_npm() {
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		echo "interop setup: node and npm are needed for @stomp/stompjs (Debian: apt-get install nodejs npm; make deps installs both)" >&2
		return 3
	fi
	have_npm_pkgs && return 0
	mkdir -p "$NPM_PREFIX"
	# a package.json of our own keeps npm from walking up into the repository
	[ -f "$NPM_PREFIX/package.json" ] || echo '{"name":"vdsmd-interop","private":true}' > "$NPM_PREFIX/package.json"
	if ! npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error \
		--fetch-timeout=30000 --fetch-retries=1 \
		"@stomp/stompjs@$STOMPJS" "@stomp/tcp-wrapper@$TCPWRAP" >&2; then
		reg=$(npm config get registry 2>/dev/null)
		if ! ping_out=$(npm ping --fetch-timeout=15000 --fetch-retries=0 2>&1); then
			why=$(echo "$ping_out" | sed -n 's/^npm ERR! code //p' | head -n 1)
			echo "interop setup: the npm registry ($reg) cannot be reached from here${why:+ ($why)}: @stomp/stompjs@$STOMPJS cannot be installed" >&2
			return 3
		fi
		echo "interop setup: 'npm install @stomp/stompjs@$STOMPJS @stomp/tcp-wrapper@$TCPWRAP' failed (registry $reg reachable)" >&2
		return 1
	fi
	have_npm_pkgs || { echo "interop setup: npm packages not usable under $NPM_PREFIX" >&2; return 1; }
}

case "${1:-all}" in
debian) setup_debian ;;
npm) setup_npm ;;
all) setup_debian && setup_npm ;;
*) echo "usage: setup.sh [debian|npm|all]" >&2; exit 2 ;;
esac
