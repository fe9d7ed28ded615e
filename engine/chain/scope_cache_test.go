package chain_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// scopeReadCounter counts the reads of a deployment's targets in an
// environment: the rows TargetList and ScopeTargets return for such a
// scope, and the ScopeTargets calls.
type scopeReadCounter struct {
	ports.ReleaseStore
	rows, reads atomic.Int64
}

func (s *scopeReadCounter) TargetList(ctx context.Context, p ports.TargetListParams) ([]release.ReleaseTarget, error) {
	ts, err := s.ReleaseStore.TargetList(ctx, p)
	if p.Scope.DeploymentID != "" && p.Scope.EnvironmentID != "" {
		s.rows.Add(int64(len(ts)))
	}
	return ts, err
}

func (s *scopeReadCounter) ScopeTargets(ctx context.Context, p ports.ScopeTargetsParams) (ports.ScopeTargets, error) {
	st, err := s.ReleaseStore.ScopeTargets(ctx, p)
	s.reads.Add(1)
	s.rows.Add(int64(len(st.Targets)))
	return st, err
}

// onEachStore runs f in parallel on a harness over each adapter's store,
// wrapped by wrap, draining in batches when batched.
func onEachStore(t *testing.T, batched bool, wrap func(ports.ReleaseStore) ports.ReleaseStore, f func(t *testing.T, h *harness)) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := porttest.NewFakeClock(t0)
			store, q := open(t, clock)
			h := newHarnessOn(t, t.Context(), clock, wrap(store), q)
			h.batched = batched
			f(t, h)
		})
	}
}

// rolloutPolicy rolls every environment out one target a minute.
func rolloutPolicy(h *harness) {
	h.policy(policy.Policy{ID: "rollout", Selector: `environment.name != ""`, Rules: []policy.Rule{
		{ID: "rollout", Spec: policy.GradualRollout{RolloutType: policy.RolloutLinear, TimeScaleInterval: 60}}}})
}

// addClusters stores clusters c<from>..c<to> and syncs the targets.
func addClusters(h *harness, from, to int) {
	h.t.Helper()
	for i := from; i <= to; i++ {
		id := fmt.Sprintf("c%d", i)
		_, err := h.store.Resources().Put(h.ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "cluster", Identifier: id, Name: id}, 0)
		require.NoError(h.t, err)
	}
	_, err := h.chain.SyncTargets(h.ctx, "sys")
	require.NoError(h.t, err)
}

// TestRolloutReadsScopeOncePerGeneration: rolling a version out under a
// gradual rollout, in batches as under Run, reads each environment's list
// of targets once while it does not change, not once per batch (which
// made a rollout N²/B): later batches only ask whether it changed.
func TestRolloutReadsScopeOncePerGeneration(t *testing.T) {
	wrap := func(s ports.ReleaseStore) ports.ReleaseStore { return &scopeReadCounter{ReleaseStore: s} }
	onEachStore(t, true, wrap, func(t *testing.T, h *harness) {
		counting := h.store.(*scopeReadCounter)
		const clusters = 80 // 3 environments × 80 targets: several batches each
		addClusters(h, 3, clusters)
		rolloutPolicy(h)
		counting.rows.Store(0)
		counting.reads.Store(0)

		h.drain() // the targets' first decisions: no version yet
		h.version("v1")
		h.drain()
		h.clock.Advance(clusters * time.Minute)
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			for i := 1; i <= clusters; i++ {
				require.Len(t, h.jobs(env, fmt.Sprintf("c%d", i)), 1, "%s/c%d has its job", env, i)
			}
		}
		t.Logf("scope reads: %d rows in %d reads", counting.rows.Load(), counting.reads.Load())
		require.Greater(t, counting.reads.Load(), int64(3*2), "several batches per environment ask")
		require.LessOrEqual(t, counting.rows.Load(), int64(3*clusters), "each environment's targets listed once")
	})
}

// TestRolloutSeesTargetAddedBetweenBatches: a target added between two
// batches is in the next batch's rollout positions.
func TestRolloutSeesTargetAddedBetweenBatches(t *testing.T) {
	onEachStore(t, false, func(s ports.ReleaseStore) ports.ReleaseStore { return s }, func(t *testing.T, h *harness) {
		rolloutPolicy(h)
		h.version("v1")
		of := func(n int) []release.ReleaseTarget {
			var ts []release.ReleaseTarget
			for i := 1; i <= n; i++ {
				ts = append(ts, target("prod", fmt.Sprintf("c%d", i)))
			}
			return ts
		}
		positions := func(ts []release.ReleaseTarget) []string {
			t.Helper()
			got, err := h.chain.DecideMany(h.ctx, ts)
			require.NoError(t, err)
			require.Len(t, got, len(ts))
			var out []string
			for _, d := range got {
				for _, r := range d.Reasons {
					if i := strings.Index(r, "rollout position "); i >= 0 {
						out = append(out, strings.Fields(r[i:])[2:5]...)
					}
				}
			}
			return out
		}
		require.Equal(t, []string{"2", "of", "2"}, positions(of(2)), "one of two waits")
		require.Equal(t, []string{"2", "of", "2"}, positions(of(2)), "read again, unchanged")
		addClusters(h, 3, 3)
		got := positions(of(3))
		require.Len(t, got, 6, "two of three wait")
		require.Equal(t, "3", got[2], "the added target counts")
		require.Equal(t, "3", got[5], "the added target counts")
	})
}
