package chain_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// instantAgent's jobs succeed as they are dispatched, so that their ends
// are recorded in the dispatch's batch (handOverAll), as a bench worker's.
type instantAgent struct{}

func (instantAgent) Type() string { return "fake" }

func (instantAgent) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return ports.JobDispatchResult{ExternalID: "instant/" + d.Job.ID, Status: release.JobSuccessful}, nil
}

// summaryReadCounter counts ProgressionSummary reads.
type summaryReadCounter struct {
	ports.ReleaseStore
	reads atomic.Int64
}

func (s *summaryReadCounter) ProgressionSummary(ctx context.Context, p ports.ProgressionSummaryParams) (policy.ProgressionSummary, error) {
	s.reads.Add(1)
	return s.ReleaseStore.ProgressionSummary(ctx, p)
}

// TestBatchWakesDownstreamOnce: jobs that end in one batch decide the wake
// of the environments after theirs once, when the batch's jobs are all
// written, not once per job; and the wake still comes: a version flows
// dev → staging → prod under 100% progression rules with no other help.
func TestBatchWakesDownstreamOnce(t *testing.T) {
	const clusters = 12
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := porttest.NewFakeClock(t0)
			store, q := open(t, clock)
			counting := &summaryReadCounter{ReleaseStore: store}
			h := newHarnessOn(t, t.Context(), clock, counting, q)
			h.batched = true
			h.chain.Agents["fake"] = instantAgent{}
			for i := 3; i <= clusters; i++ {
				id := fmt.Sprintf("c%d", i)
				_, err := store.Resources().Put(h.ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "cluster", Identifier: id, Name: id}, 0)
				require.NoError(t, err)
			}
			_, err := h.chain.SyncTargets(h.ctx, "sys")
			require.NoError(t, err)
			for _, p := range [][2]string{{"staging", "dev"}, {"prod", "staging"}} {
				h.policy(policy.Policy{ID: p[0] + "-after-" + p[1], Selector: `environment.name == "` + p[0] + `"`, Rules: []policy.Rule{
					{ID: "after", Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "` + p[1] + `"`, MinimumSuccessPercentage: 100}}}})
			}
			h.drain()
			counting.reads.Store(0)

			h.version("v1")
			h.drain()
			for _, env := range []string{"dev", "staging", "prod"} {
				for i := 1; i <= clusters; i++ {
					rows := h.jobs(env, fmt.Sprintf("c%d", i))
					require.NotEmpty(t, rows, "%s/c%d has no job", env, i)
					require.Equal(t, release.JobSuccessful, rows[0].Status, "%s/c%d", env, i)
				}
			}
			t.Logf("progression summary reads: %d for %d jobs", counting.reads.Load(), 3*clusters)
			require.Less(t, counting.reads.Load(), int64(clusters), "the summary read once per ended job")
		})
	}
}
