#!/usr/bin/env bash
# with-postgres.sh runs its arguments as a command with RECONCILER_TEST_DSN
# set. When the variable is already set the command runs as is; otherwise a
# throwaway PostgreSQL cluster is started in a temporary directory (tuned for
# tests: no fsync, loopback and a unix socket only), and stopped and removed
# when the command ends, however it ends. The command's exit status is kept.
#
# With RECONCILER_PG_DURABLE=1 the cluster keeps PostgreSQL's stock
# durability (fsync, synchronous_commit and full_page_writes on), for
# benchmarks, and is always started, even when RECONCILER_TEST_DSN is set.
#
# With RECONCILER_PG_STATEMENTS=1 the cluster loads pg_stat_statements
# (track = all, so statements inside functions and triggers count too), to
# see where a benchmark's server time goes; run CREATE EXTENSION
# pg_stat_statements in the database before reading the view. It applies
# only to a cluster this script starts.
#
#   scripts/with-postgres.sh go test ./...
#   RECONCILER_PG_DURABLE=1 scripts/with-postgres.sh COMMAND
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 2
fi

# switch prints 1 or 0 for the environment variable named $1 (unset or
# empty: 0); any other value is a usage error.
switch() {
	case "${!1:-}" in
	"" | 0) echo 0 ;;
	1) echo 1 ;;
	*)
		echo "$0: $1: want 1 or 0, got '${!1}'" >&2
		return 2
		;;
	esac
}

statements=$(switch RECONCILER_PG_STATEMENTS) || exit 2
durable=$(switch RECONCILER_PG_DURABLE) || exit 2

if [[ $durable -eq 0 && -n "${RECONCILER_TEST_DSN:-}" ]]; then
	exec "$@"
fi

log() { echo "with-postgres: $*" >&2; }

# pg_bindir prints the bin directory of the highest installed PostgreSQL.
pg_bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5n | tail -n1 || true)
	if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
		echo "$d"
	fi
}

bindir=$(pg_bindir)
if [[ -z "$bindir" ]]; then
	if [[ $(id -u) -ne 0 ]]; then
		log "no PostgreSQL under /usr/lib/postgresql/*/bin and not root: install Debian's 'postgresql' package, or set RECONCILER_TEST_DSN to a server you run"
		exit 1
	fi
	log "installing PostgreSQL (apt-get install postgresql)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends postgresql >&2
	bindir=$(pg_bindir)
	if [[ -z "$bindir" ]]; then
		log "apt-get installed postgresql but no initdb/pg_ctl appeared under /usr/lib/postgresql/*/bin"
		exit 1
	fi
fi

# as_pg runs a PostgreSQL binary as the postgres user when we are root
# (PostgreSQL refuses to run as root), else as ourselves.
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# free_port comes from free-port.sh beside this script.
. "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

# As root the cluster runs as postgres, who must reach the directory: /tmp.
tmpbase=${TMPDIR:-/tmp}
if [[ $(id -u) -eq 0 ]]; then
	tmpbase=/tmp
fi
tmp=$(mktemp -d "$tmpbase/reconciler-pg.XXXXXX")
data="$tmp/data"
started=0

cleanup() {
	if [[ $started -eq 1 ]]; then
		as_pg "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ $(id -u) -eq 0 ]]; then
	chown postgres: "$tmp"
fi

as_pg "$bindir/initdb" -D "$data" -A trust -U postgres -E UTF8 --no-sync >"$tmp/initdb.log" 2>&1 || {
	log "initdb failed:"
	cat "$tmp/initdb.log" >&2
	exit 1
}

port=""
for _ in 1 2 3 4 5; do
	port=$(free_port)
	opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$tmp"
	if [[ $durable -eq 0 ]]; then
		opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	fi
	opts+=" -c max_connections=500 -c shared_buffers=256MB"
	if [[ $statements -eq 1 ]]; then
		opts+=" -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
	fi
	if as_pg "$bindir/pg_ctl" -D "$data" -l "$tmp/postgres.log" -o "$opts" -w -t 60 start >/dev/null 2>&1; then
		started=1
		break
	fi
	# Most likely someone took the port meanwhile: try another.
	port=""
done
if [[ $started -ne 1 ]]; then
	log "PostgreSQL did not start:"
	cat "$tmp/postgres.log" >&2 || true
	exit 1
fi

export RECONCILER_TEST_DSN="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
settings="fsync, synchronous_commit and full_page_writes off"
if [[ $durable -eq 1 ]]; then
	settings="stock durability: fsync, synchronous_commit and full_page_writes on"
fi
log "PostgreSQL $(basename "$(dirname "$bindir")") ($settings) running at 127.0.0.1:$port (socket in $tmp), RECONCILER_TEST_DSN set"

status=0
"$@" || status=$?
exit "$status"
