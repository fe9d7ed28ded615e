#!/usr/bin/env bash
# bench-durable.sh runs the durable comparison against the server named by
# RECONCILER_TEST_DSN (make bench-durable starts a stock-settings cluster
# for it): reconciler's three benches, then River and the bare SKIP LOCKED
# loop through the burn-down of `bench queue`, and the release chain again in
# 1 and 2 worker processes. Each prints its JSON line on stdout; progress
# goes to stderr. Sizes come from the environment:
# BENCH_TARGETS (bench release), BENCH_ITEMS (bench workflow) and
# BENCH_QUEUE_ITEMS (bench queue, River, the bare loop; each runs again at
# four times that backlog). Last, the Go
# benchmark of the pure workflow scheduling pass prints its lines.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${RECONCILER_TEST_DSN:?run through scripts/with-postgres.sh (make bench-durable)}"
targets=${BENCH_TARGETS:-10000}
items=${BENCH_ITEMS:-10000}
queue=${BENCH_QUEUE_ITEMS:-50000}
dsn=$RECONCILER_TEST_DSN
reconciler=${RECONCILER_BIN:-bin/reconciler}
compare=${BENCH_COMPARE_BIN:-bin/bench-compare}

# The queues first, while the database is small and alike for each. The
# engine's queue twice: a processor call per item, then batch passes of up
# to 64 items (the passes of the release chain's processors).
"$reconciler" bench queue --dsn "$dsn" --items "$queue" --duration 60s
"$reconciler" bench queue --dsn "$dsn" --items "$queue" --duration 60s --pass-items 64
"$compare" --system river --dsn "$dsn" --items "$queue" --timeout 5m
"$compare" --system skiplocked --dsn "$dsn" --items "$queue" --timeout 5m
# The same at four times the backlog: a lease must read the items it
# claims, not the backlog, whatever the statistics of the queue table.
"$reconciler" bench queue --dsn "$dsn" --items "$((queue * 4))" --duration 60s
"$reconciler" bench queue --dsn "$dsn" --items "$((queue * 4))" --duration 60s --pass-items 64
"$compare" --system river --dsn "$dsn" --items "$((queue * 4))" --timeout 5m
"$compare" --system skiplocked --dsn "$dsn" --items "$((queue * 4))" --timeout 5m
"$reconciler" bench release --dsn "$dsn" --targets "$targets" --timeout 10m
# The same rollout with the chain in 1, then 2, worker processes (like serve
# processes sharing the database), each line with the workers' peak RSS.
"$reconciler" bench release --dsn "$dsn" --targets "$targets" --timeout 10m --processes 1,2
# Again with each worker given its share of this machine (GOMAXPROCS and
# pool_max_conns divided by the count), as processes sharing one host are.
"$reconciler" bench release --dsn "$dsn" --targets "$targets" --timeout 10m --processes 1,2 --share-machine
"$reconciler" bench workflow --dsn "$dsn" --items "$items" --timeout 10m
# The pure scheduling pass over the 10,000 TaskRuns of bench workflow's
# shape (no database): issue 19's 2 ms target.
${GO:-go} test -run '^$' -bench 'BenchmarkSchedulePassBenchWorkflow' -benchtime 200x ./workflow/ | grep '^Benchmark'
