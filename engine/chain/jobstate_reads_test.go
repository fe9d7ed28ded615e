package chain_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// jobStateReadCounter counts the chain's job state reads: one target at a
// time (TargetJobState) and batched (TargetJobStateMany calls).
type jobStateReadCounter struct {
	ports.ReleaseStore
	single, many atomic.Int64
}

func (s *jobStateReadCounter) TargetJobState(ctx context.Context, t release.ReleaseTarget) (ports.TargetJobState, error) {
	s.single.Add(1)
	return s.ReleaseStore.TargetJobState(ctx, t)
}

func (s *jobStateReadCounter) TargetJobStateMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]ports.TargetJobState, error) {
	s.many.Add(1)
	return s.ReleaseStore.(ports.JobStateBatcher).TargetJobStateMany(ctx, ts)
}

func (s *jobStateReadCounter) DesiredGetMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]ports.DesiredRelease, error) {
	return s.ReleaseStore.(ports.JobStateBatcher).DesiredGetMany(ctx, ts)
}

// TestPolicyJobStatesReadPerBatch: deciding targets under policies in
// batches, as under Run, reads their job states (the active and
// successful versions every policy decision needs) in one call per batch,
// not one per target, and the decisions still see them: v2 rolls out after
// v1 only where v1 succeeded.
func TestPolicyJobStatesReadPerBatch(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := porttest.NewFakeClock(t0)
			store, q := open(t, clock)
			counting := &jobStateReadCounter{ReleaseStore: store}
			h := newHarnessOn(t, t.Context(), clock, counting, q)
			h.batched = true
			h.policy(policy.Policy{ID: "rollout", Rules: []policy.Rule{
				{ID: "at-once", Spec: policy.GradualRollout{RolloutType: policy.RolloutLinear, TimeScaleInterval: 0}}}})
			h.drain()
			counting.single.Store(0)
			counting.many.Store(0)

			h.version("v1")
			passes := h.drain()
			h.requireRunning("v1", "dev", "staging", "prod")
			t.Logf("job state reads over %d passes: %d single, %d batched", passes, counting.single.Load(), counting.many.Load())
			require.Zero(t, counting.single.Load(), "a target's job state read on its own in a batch pass")
			require.Positive(t, counting.many.Load())
			require.Less(t, counting.many.Load(), int64(6), "job states read once per target, not per batch")

			h.finish(release.JobSuccessful, "dev", "staging", "prod")
			h.version("v2")
			h.drain()
			h.requireRunning("v2", "dev", "staging", "prod")
			require.Zero(t, counting.single.Load(), "a target's job state read on its own in a batch pass")
		})
	}
}
