#!/usr/bin/env bash
# bench-scale.sh runs the scale curve against the server named by
# RECONCILER_TEST_DSN (make bench-scale starts a stock-settings cluster for
# it): `bench release` at each size of BENCH_SCALE_SIZES (default 1000
# 10000 100000 targets), without and with --policies, in one worker process
# (so each line carries the worker's peak RSS too). Each prints its JSON
# line on stdout; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${RECONCILER_TEST_DSN:?run through scripts/with-postgres.sh (make bench-scale)}"
sizes=${BENCH_SCALE_SIZES:-1000 10000 100000}
dsn=$RECONCILER_TEST_DSN
reconciler=${RECONCILER_BIN:-bin/reconciler}

for n in $sizes; do
	"$reconciler" bench release --dsn "$dsn" --targets "$n" --timeout 20m
	"$reconciler" bench release --dsn "$dsn" --targets "$n" --timeout 20m --policies
	"$reconciler" bench release --dsn "$dsn" --targets "$n" --timeout 20m --processes 1
done
