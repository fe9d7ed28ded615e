package chain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestScenarioLiveOwnerKeepsItsJobs: a job whose in-process agent's lease
// ran out unrenewed is not lost while its owner process is alive (its
// liveness row); once that row lapses the job is lost at once, saying
// whose process stopped.
func TestScenarioLiveOwnerKeepsItsJobs(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		live := memory.NewLiveness()
		h.chain.Agents["fake"] = leasingFake{h.agent}
		h.chain.Owner, h.chain.Liveness = "serve-1", live
		require.NoError(t, live.LivenessBeat(h.ctx, "serve-1", h.clock.Now().Add(2*time.Minute)))
		h.version("v1")
		h.drain()
		h.requireRunning("v1", "dev", "staging", "prod")
		require.Equal(t, "serve-1", h.jobs("dev", "c1")[0].LeaseOwner)

		h.clock.Advance(40 * time.Second) // past the 30 s lease, unrenewed
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			require.Equal(t, release.JobInProgress, h.jobs(env, "c1")[0].Status, "%s: its owner is alive", env)
		}

		h.clock.Advance(2 * time.Minute) // past the owner's liveness
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			row := h.jobs(env, "c1")[0]
			require.Equal(t, release.JobFailure, row.Status, env)
			require.Contains(t, row.Message, "lost: the process running it (serve-1) stopped")
		}
	})
}

// TestScenarioLapsedOwnerLosesItsJobsAtOnce: once its owner's liveness row
// lapses, a job is lost at once, while its own lease still has time left.
func TestScenarioLapsedOwnerLosesItsJobsAtOnce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		live := memory.NewLiveness()
		h.chain.Agents["fake"] = leasingFake{h.agent}
		h.chain.Owner, h.chain.Liveness = "serve-1", live
		require.NoError(t, live.LivenessBeat(h.ctx, "serve-1", h.clock.Now().Add(10*time.Second)))
		h.version("v1")
		h.drain()
		h.requireRunning("v1", "dev", "staging", "prod")
		lease := h.jobs("dev", "c1")[0].LeaseUntil

		h.clock.Advance(15 * time.Second) // past the owner's liveness, inside the 30 s lease
		require.True(t, h.clock.Now().Before(lease))
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			row := h.jobs(env, "c1")[0]
			require.Equal(t, release.JobFailure, row.Status, env)
			require.Contains(t, row.Message, "lost: the process running it (serve-1) stopped")
		}
	})
}
