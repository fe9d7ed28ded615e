#!/usr/bin/env bash
# with-prometheus.sh runs its arguments as a command with a throwaway
# Prometheus server for the prometheus verifier's tests:
#
#   RECONCILER_TEST_PROMETHEUS         the server's URL (http://127.0.0.1:PORT)
#   RECONCILER_TEST_PROMETHEUS_TARGET  host:port the test must serve /metrics
#                                      on; Prometheus scrapes it every second
#                                      as job "reconciler-test"
#
# When RECONCILER_TEST_PROMETHEUS is already set the command runs as is.
# Otherwise Debian's `prometheus` package is installed when missing (as
# root), and the server is started on loopback with a temporary data
# directory, then stopped and removed when the command ends, however it
# ends. The command's exit status is kept.
#
#   scripts/with-prometheus.sh go test ./adapters/prometheus/
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 2
fi

if [[ -n "${RECONCILER_TEST_PROMETHEUS:-}" ]]; then
	exec "$@"
fi

log() { echo "with-prometheus: $*" >&2; }

if ! command -v prometheus >/dev/null 2>&1; then
	if [[ $(id -u) -ne 0 ]]; then
		log "no prometheus on PATH and not root: install Debian's 'prometheus' package, or set RECONCILER_TEST_PROMETHEUS to a server you run"
		exit 1
	fi
	log "installing Prometheus (apt-get install prometheus)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends prometheus >&2
fi

# free_port comes from free-port.sh beside this script.
. "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

# ready_now reports whether the server on port answers /-/ready with 200.
ready_now() {
	local line
	{ exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
	printf 'GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	read -r -t 2 line <&3 || true
	exec 3<&- 3>&-
	[[ "$line" == *" 200 "* ]]
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/reconciler-prom.XXXXXX")
pid=""
cleanup() {
	if [[ -n "$pid" ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

target_port=$(free_port)
cat >"$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: reconciler-test
    scrape_interval: 1s
    static_configs:
      - targets: ["127.0.0.1:$target_port"]
YAML

ready=0
for _ in 1 2 3 4 5; do
	port=$(free_port)
	# native histograms on: the verifier's test queries one (they are
	# scraped over the protobuf exposition format).
	prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
		--enable-feature=native-histograms --web.listen-address="127.0.0.1:$port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do
		if ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		if ready_now "$port"; then
			ready=1
			break
		fi
		sleep 0.2
	done
	if [[ $ready -eq 1 ]]; then
		break
	fi
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=""
done
if [[ $ready -ne 1 ]]; then
	log "Prometheus did not start:"
	cat "$tmp/prometheus.log" >&2 || true
	exit 1
fi

export RECONCILER_TEST_PROMETHEUS="http://127.0.0.1:$port"
export RECONCILER_TEST_PROMETHEUS_TARGET="127.0.0.1:$target_port"
log "Prometheus $(prometheus --version 2>&1 | head -n1 | awk '{print $3}') at $RECONCILER_TEST_PROMETHEUS scraping $RECONCILER_TEST_PROMETHEUS_TARGET"

status=0
"$@" || status=$?
exit "$status"
