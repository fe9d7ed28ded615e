#!/usr/bin/env bash
# with-chromium.sh runs its arguments as a command once a Chromium the
# console's browser tests can drive is on PATH: Debian's `chromium` package
# is installed when missing (as root). Without root and without chromium
# it says how to get it and fails, like with-postgres.sh.
#
#   scripts/with-chromium.sh go test -run TestConsoleInBrowser ./cmd/reconciler/
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 2
fi

log() { echo "with-chromium: $*" >&2; }

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 &&
	! command -v google-chrome >/dev/null 2>&1; then
	if [[ $(id -u) -ne 0 ]]; then
		log "no chromium on PATH and not root: install Debian's 'chromium' package"
		exit 1
	fi
	log "installing Chromium (apt-get install chromium)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends chromium >&2
fi
exec "$@"
