package chain_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// countKey marks the contexts whose store reads are counted.
type countKey struct{}

// countingStore counts the release store's reads made with a marked
// context: every read of a target, its jobs, versions and approvals.
type countingStore struct {
	ports.ReleaseStore
	n atomic.Int64
}

func (s *countingStore) hit(ctx context.Context) {
	if ctx.Value(countKey{}) != nil {
		s.n.Add(1)
	}
}

func (s *countingStore) TargetFactsGet(ctx context.Context, t release.ReleaseTarget, limit int) (ports.TargetFacts, error) {
	s.hit(ctx)
	return s.ReleaseStore.TargetFactsGet(ctx, t, limit)
}

func (s *countingStore) TargetList(ctx context.Context, p ports.TargetListParams) ([]release.ReleaseTarget, error) {
	s.hit(ctx)
	return s.ReleaseStore.TargetList(ctx, p)
}

func (s *countingStore) TargetGet(ctx context.Context, t release.ReleaseTarget) (ports.TargetDetail, error) {
	s.hit(ctx)
	return s.ReleaseStore.TargetGet(ctx, t)
}

func (s *countingStore) JobsByTarget(ctx context.Context, t release.ReleaseTarget, limit int) ([]ports.JobRow, error) {
	s.hit(ctx)
	return s.ReleaseStore.JobsByTarget(ctx, t, limit)
}

func (s *countingStore) JobsLatest(ctx context.Context, p ports.JobsLatestParams) ([]ports.JobRow, error) {
	s.hit(ctx)
	return s.ReleaseStore.JobsLatest(ctx, p)
}

func (s *countingStore) ProgressionSummary(ctx context.Context, p ports.ProgressionSummaryParams) (policy.ProgressionSummary, error) {
	s.hit(ctx)
	return s.ReleaseStore.ProgressionSummary(ctx, p)
}

func (s *countingStore) TargetJobState(ctx context.Context, t release.ReleaseTarget) (ports.TargetJobState, error) {
	s.hit(ctx)
	return s.ReleaseStore.TargetJobState(ctx, t)
}

func (s *countingStore) ApprovalList(ctx context.Context, versionID, environmentID string) ([]release.Approval, error) {
	s.hit(ctx)
	return s.ReleaseStore.ApprovalList(ctx, versionID, environmentID)
}

func (s *countingStore) PolicySkipList(ctx context.Context, versionID string) ([]release.PolicySkip, error) {
	s.hit(ctx)
	return s.ReleaseStore.PolicySkipList(ctx, versionID)
}

func (s *countingStore) VersionGet(ctx context.Context, id string) (release.DeploymentVersion, error) {
	s.hit(ctx)
	return s.ReleaseStore.VersionGet(ctx, id)
}

// statementCounter counts the SQL statements run with a marked context.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if ctx.Value(countKey{}) != nil {
		c.n.Add(1)
	}
	return ctx
}

func (*statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// explainCost seeds a deployment over resources clusters in dev, staging
// and prod with progression policies (staging after dev, prod after
// staging), v1 successful in dev, and returns the port reads (and on
// Postgres the statements) of one explain of staging/c1 and of dev/c1.
func explainCost(t *testing.T, backend string, resources int) (staging, dev, stagingSQL int64) {
	t.Helper()
	ctx := t.Context()
	clock := porttest.NewFakeClock(t0)
	var store ports.ReleaseStore
	var q ports.Queue
	sql := &statementCounter{}
	if backend == "postgres" {
		dsn, _ := pgtest.Schema(t)
		db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(4), postgres.WithTracer(sql))
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.NoError(t, db.MigrateUp(ctx))
		pq := postgres.NewQueue(db, clock)
		t.Cleanup(pq.Close)
		store, q = postgres.NewReleaseStore(db, clock), pq
	} else {
		store, q = memory.NewReleaseStore(clock), memory.NewQueue(clock)
	}
	h := newHarnessOn(t, ctx, clock, store, q)
	for i := 3; i <= resources; i++ {
		id := fmt.Sprint("c", i)
		_, err := store.Resources().Put(ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "cluster", Identifier: id, Name: id}, 0)
		require.NoError(t, err)
	}
	_, err := h.chain.SyncTargets(ctx, "sys")
	require.NoError(t, err)
	progressionPolicies(h, false)
	h.version("v1")
	h.drain()
	h.finish(release.JobSuccessful, "dev")
	h.drain()

	counting := &countingStore{ReleaseStore: store}
	c := &chain.Chain{Store: counting, Queue: q, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	explain := func(env string) (int64, int64) {
		counting.n.Store(0)
		sql.n.Store(0)
		mctx := context.WithValue(ctx, countKey{}, true)
		out, err := c.Explain(mctx, target(env, "c1"), 0)
		require.NoError(t, err)
		require.NotEmpty(t, out.Versions)
		return counting.n.Load(), sql.n.Load()
	}
	staging, stagingSQL = explain("staging")
	dev, _ = explain("dev")
	return staging, dev, stagingSQL
}

// TestExplainCostIsConstant: explaining a target costs the same number of
// store reads (and SQL statements) whatever the deployment's size, and a
// target no progression rule applies to reads no progression facts.
func TestExplainCostIsConstant(t *testing.T) {
	for name := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			small, smallDev, smallSQL := explainCost(t, name, 3)
			big, bigDev, bigSQL := explainCost(t, name, 40)
			t.Logf("explain reads: %d (3 clusters), %d (40 clusters); SQL statements %d, %d", small, big, smallSQL, bigSQL)
			require.Equal(t, small, big, "reads of one explain grow with the deployment")
			require.Equal(t, smallDev, bigDev, "reads of one explain without progression grow with the deployment")
			require.Equal(t, smallSQL, bigSQL, "statements of one explain grow with the deployment")
			require.Less(t, smallDev, small, "a target without a progression rule reads no progression facts")
		})
	}
}

// pending reports whether the queue holds key pending.
func (h *harness) pending(key ports.WorkKey) bool {
	h.t.Helper()
	it, err := h.q.WorkGet(h.ctx, key)
	if errors.Is(err, ports.ErrNotFound) {
		return false
	}
	require.NoError(h.t, err)
	return it.State == ports.WorkPending
}

// TestJobEndWakesOnlyDownstream: a job ending in dev wakes its own target
// and one environment-wake of staging, whose progression reads dev; prod,
// which reads staging, is not woken, and the two dev jobs share the wake.
func TestJobEndWakesOnlyDownstream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		progressionPolicies(h, false)
		h.version("v1")
		h.drain()
		h.finish(release.JobSuccessful, "dev")
		require.True(t, h.pending(chain.TargetKey(chain.KindDesiredRelease, target("dev", "c1"))))
		require.True(t, h.pending(chain.EnvironmentKey("api", "staging")))
		require.False(t, h.pending(chain.EnvironmentKey("api", "prod")), "prod reads staging, not dev")
		require.False(t, h.pending(chain.TargetKey(chain.KindDesiredRelease, target("prod", "c1"))), "prod reads staging, not dev")
		require.False(t, h.pending(chain.TargetKey(chain.KindDesiredRelease, target("staging", "c1"))), "woken through the environment's wake")
		h.drain()
		h.requireRunning("v1", "staging")
	})
}

// TestJobEndWakesDownstreamOnlyWhenProgressionMayPass: with staging after
// 100% of dev, the first of dev's two jobs ending wakes no environment
// (staging's verdict cannot change yet); the second, which completes dev,
// wakes staging.
func TestJobEndWakesDownstreamOnlyWhenProgressionMayPass(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		progressionPolicies(h, false)
		h.version("v1")
		h.drain()
		report := func(res string) {
			t.Helper()
			rows := h.jobs("dev", res)
			require.NotEmpty(t, rows)
			require.NoError(t, h.chain.ReportJob(h.ctx, ports.JobReport{AgentID: "fake-agent", ExternalID: rows[0].ExternalID, Status: release.JobSuccessful}))
		}
		report("c1")
		require.True(t, h.pending(chain.TargetKey(chain.KindDesiredRelease, target("dev", "c1"))), "the job's own target")
		require.False(t, h.pending(chain.EnvironmentKey("api", "staging")), "1 of 2 dev targets: staging cannot pass yet")
		h.drain()
		report("c2")
		require.True(t, h.pending(chain.EnvironmentKey("api", "staging")), "dev complete: staging may pass")
		h.drain()
		h.requireRunning("v1", "staging")
	})
}
