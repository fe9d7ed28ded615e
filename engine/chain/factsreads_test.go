package chain_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// factsReadCounter counts the facts reads of the chain: the statements
// (TargetFactsGet, TargetFactsGetMany calls) and the targets they read.
type factsReadCounter struct {
	ports.ReleaseStore
	calls, targets atomic.Int64
}

func (s *factsReadCounter) TargetFactsGet(ctx context.Context, t release.ReleaseTarget, jobLimit int) (ports.TargetFacts, error) {
	s.calls.Add(1)
	s.targets.Add(1)
	return s.ReleaseStore.TargetFactsGet(ctx, t, jobLimit)
}

func (s *factsReadCounter) TargetFactsGetMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]ports.TargetFacts, error) {
	s.calls.Add(1)
	s.targets.Add(int64(len(ts)))
	return s.ReleaseStore.TargetFactsGetMany(ctx, ts, jobLimit)
}

// TestRolloutFactsReadsPerTarget: rolling a new version out to targets
// without policies, in batches as under Run, reads each target's facts at
// most twice (desired-release, then job-dispatch) in one statement per
// batch, so a third read per target (e.g. a controller between them, or
// a load outside the batch's prefetch) cannot creep back unnoticed.
func TestRolloutFactsReadsPerTarget(t *testing.T) {
	wrap := func(s ports.ReleaseStore) ports.ReleaseStore { return &factsReadCounter{ReleaseStore: s} }
	onEachStore(t, true, wrap, func(t *testing.T, h *harness) {
		counting := h.store.(*factsReadCounter)
		h.drain() // the new targets' first decision: no version yet
		counting.calls.Store(0)
		counting.targets.Store(0)

		h.version("v1")
		h.drain()
		const targets = 6 // 3 environments × 2 clusters (seed)
		for _, env := range []string{"dev", "staging", "prod"} {
			for _, res := range []string{"c1", "c2"} {
				require.Len(t, h.jobs(env, res), 1, "%s/%s has its job", env, res)
			}
		}
		t.Logf("facts reads: %d targets in %d statements for %d targets", counting.targets.Load(), counting.calls.Load(), targets)
		require.LessOrEqual(t, counting.targets.Load(), int64(2*targets), "facts read more than twice per target")
		require.LessOrEqual(t, counting.calls.Load(), int64(2), "facts read in more than one statement per controller's batch")
	})
}
