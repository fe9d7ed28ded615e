package chain_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine/gate"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// planBenchTargets is about how many targets the plan benchmarks plan:
// three environments on planBenchTargets/3 clusters.
const planBenchTargets = 10_000

// benchPlan seeds the harness's workspace to about planBenchTargets
// targets, with the progression policies and a version, and times the dry
// run of renaming prod (every target of the system is affected: its gates,
// and its desired release before and after, are decided).
func benchPlan(b *testing.B, h *harness, tx ports.Transactor) {
	ctx, s := h.ctx, h.store
	progressionPolicies(h, false)
	for i := range planBenchTargets/3 - 2 {
		id := fmt.Sprintf("k%05d", i)
		_, err := s.Resources().Put(ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "cluster", Identifier: id, Name: id}, 0)
		require.NoError(b, err)
	}
	_, err := h.chain.SyncTargets(ctx, "sys")
	require.NoError(b, err)
	h.version("v1")
	all, err := s.TargetList(ctx, ports.TargetListParams{})
	require.NoError(b, err)
	write := func(ctx context.Context) error {
		return put(ctx, s.Environments(), "prod", func(e *release.Environment) { e.Name = "production" })
	}
	cpu0 := cpuTime()
	for b.Loop() {
		d, err := gate.Check(ctx, gate.Params{Tx: tx, Store: s, MayLift: true, DryRun: true, Decide: h.chain.DecideMany}, write)
		require.NoError(b, err)
		require.Len(b, d.Targets, len(all)/3, "every prod target loses its gates")
	}
	b.ReportMetric(float64(len(all)), "targets")
	// The process's CPU time per plan: on a shared machine the wall time
	// (ns/op) says more about the other processes than about the plan.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}

// cpuTime is the CPU time (user and system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlan10kMemory: the dry-run plan of 10,000 targets in memory
// (go test ./engine/chain/ -run '^$' -bench BenchmarkPlan10kMemory -benchtime 3x).
func BenchmarkPlan10kMemory(b *testing.B) {
	clock := porttest.NewFakeClock(t0)
	store, q := memory.NewReleaseStore(clock), memory.NewQueue(clock)
	h := newHarnessOn(b, context.Background(), clock, store, q)
	benchPlan(b, h, memory.NewTransactor(store, q))
}

// BenchmarkPlan10kPostgres is BenchmarkPlan10kMemory on PostgreSQL
// (scripts/with-postgres.sh go test ./engine/chain/ -run '^$' -bench
// BenchmarkPlan10kPostgres -benchtime 1x).
func BenchmarkPlan10kPostgres(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skip(pgtest.EnvDSN + " is unset")
	}
	dsn, _ := pgtest.Schema(b)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(4))
	require.NoError(b, err)
	b.Cleanup(db.Close)
	require.NoError(b, db.MigrateUp(ctx))
	clock := porttest.NewFakeClock(t0)
	q := postgres.NewQueue(db, clock)
	b.Cleanup(q.Close)
	store := postgres.NewReleaseStore(db, clock)
	h := newHarnessOn(b, ctx, clock, store, q)
	benchPlan(b, h, store)
}
