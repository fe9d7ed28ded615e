package chain_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// dyingLeaser is an in-process (JobLeaser) agent whose process dies right
// after its first send: the job went out, its external id was never
// recorded.
type dyingLeaser struct {
	mu    sync.Mutex
	sends map[string]int
}

func (*dyingLeaser) Type() string            { return "fake" }
func (*dyingLeaser) JobLease() time.Duration { return time.Minute }
func (a *dyingLeaser) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	a.sends[d.Job.ID]++
	n := a.sends[d.Job.ID]
	a.mu.Unlock()
	if n == 1 {
		panic("the process died after sending " + d.Job.ID)
	}
	return ports.JobDispatchResult{ExternalID: "x/" + d.Job.ID, Status: release.JobInProgress}, nil
}

// TestLeaserJobNotSentAgainAfterACrash: a JobLeaser's job is claimed
// before it is sent, so the pass that runs after a crash between the
// send and its record does not send it again.
func TestLeaserJobNotSentAgainAfterACrash(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		agent := &dyingLeaser{sends: map[string]int{}}
		h.chain.Agents["fake"] = agent
		h.version("v1")
		for range 5 {
			h.drain()
			h.clock.Advance(time.Minute) // past the retries' backoff
		}
		jobs := h.jobs("dev", "c1")
		require.NotEmpty(t, jobs)
		require.Equal(t, 1, agent.sends[jobs[0].ID], "job %s sent once", jobs[0].ID)
		require.False(t, jobs[0].StartedAt.IsZero(), "claimed before it was sent")
	})
}
