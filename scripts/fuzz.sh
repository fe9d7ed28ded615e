#!/usr/bin/env bash
# Runs every Go fuzz target of the module (each `func FuzzXxx(f *testing.F)`
# in a _test.go file) for FUZZTIME each (a duration such as 60s, or a count
# of executions such as 1000000x), one after the other, and prints one
# summary line per target: its package, name, executions and time.
# A crasher stops the run; Go writes it under the package's
# testdata/fuzz/FuzzXxx, where it stays as a regression seed.
# Go minimizes every newly interesting input for -fuzzminimizetime (60s by
# default) before it counts or reports anything; for a target whose inputs
# are kilobytes of YAML (FuzzLoadTemplate) each minimization uses the whole
# minute, so the run stalls at a few dozen executions. FUZZMINIMIZETIME
# (default 200x: at most 200 calls) bounds it. A count, not a duration: with
# a duration Go also gives up waiting for the worker when it expires, and
# a worker that answers late (a loaded machine) is killed and restarted, with
# its process start and the target's setup, every few seconds.
#   FUZZTIME=60s FUZZPARALLEL=1 FUZZ=Snapshot scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}
parallel=${FUZZPARALLEL:-1}
minimize=${FUZZMINIMIZETIME:-200x}
filter=${FUZZ:-}
summary=()
status=0
while IFS=: read -r file _ decl; do
	name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$decl")
	[[ -n "$filter" && "$name" != *"$filter"* ]] && continue
	pkg=$(dirname "$file")
	echo "== $pkg $name ($fuzztime)"
	log=$(mktemp)
	start=$(date +%s)
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" -parallel "$parallel" "$pkg" 2>&1 | tee "$log"; then
		status=1
	fi
	secs=$(( $(date +%s) - start ))
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
	result=ok
	grep -q '^--- FAIL\|^FAIL' "$log" && result=FAIL
	summary+=("$(printf '%-24s %-22s execs=%-10s seconds=%-6s %s' "$pkg" "$name" "$execs" "$secs" "$result")")
	rm -f "$log"
	[[ $status -ne 0 ]] && break
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | grep -v '^./\.' | sort)
echo
echo "fuzz summary (FUZZTIME=$fuzztime):"
printf '%s\n' "${summary[@]}"
exit $status
