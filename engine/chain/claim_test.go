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

// resumingAgent holds leases on its jobs and resumes them
// (ports.JobResumer), as the external agents do; nobody renews its
// leases here: each lease runs out, as when its process died.
type resumingAgent struct {
	mu         sync.Mutex
	dispatches map[string]int
	resumes    []ports.JobDispatch
	// outcome is what a resume finds the run did (default: still running).
	outcome release.JobStatus
}

func (*resumingAgent) Type() string            { return "fake" }
func (*resumingAgent) JobLease() time.Duration { return time.Minute }
func (a *resumingAgent) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dispatches[d.Job.ID]++
	return ports.JobDispatchResult{ExternalID: "x/" + d.Job.ID, Status: release.JobInProgress}, nil
}

// resumesOf returns the resumes of job id.
func (a *resumingAgent) resumesOf(id string) []ports.JobDispatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []ports.JobDispatch
	for _, d := range a.resumes {
		if d.Job.ID == id {
			out = append(out, d)
		}
	}
	return out
}

func (a *resumingAgent) ResumeJob(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resumes = append(a.resumes, d)
	status := a.outcome
	if status == "" {
		status = release.JobInProgress
	}
	return ports.JobDispatchResult{ExternalID: d.Job.ExternalID, Status: status, Message: "resumed"}, nil
}

// TestJobWhoseLeaseRanOutIsResumedNotLost: the job of an agent that
// resumes jobs (ports.JobResumer) is not ended as lost when its lease runs
// out: the job-dispatch pass claims it anew (a later lease) and hands it
// to ResumeJob with its external id, once per lease that runs out, never
// dispatching it again; what the run did meanwhile is recorded.
func TestJobWhoseLeaseRanOutIsResumedNotLost(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		agent := &resumingAgent{dispatches: map[string]int{}}
		h.chain.Agents["fake"] = agent
		h.version("v1")
		h.drain()
		jobs := h.jobs("dev", "c1")
		require.Len(t, jobs, 1)
		job := jobs[0]
		require.Equal(t, release.JobInProgress, job.Status)
		require.Equal(t, "x/"+job.ID, job.ExternalID)
		lease := job.LeaseUntil
		require.Equal(t, h.clock.Now().Add(time.Minute), lease)

		h.clock.Advance(time.Minute) // the lease runs out: its process died
		h.drain()
		jobs = h.jobs("dev", "c1")
		require.Len(t, jobs, 1, "no second job")
		require.Equal(t, release.JobInProgress, jobs[0].Status, "not lost: %s", jobs[0].Message)
		require.Equal(t, h.clock.Now().Add(time.Minute), jobs[0].LeaseUntil, "claimed anew")
		resumes := agent.resumesOf(job.ID)
		require.Len(t, resumes, 1)
		require.Equal(t, job.ExternalID, resumes[0].Job.ExternalID, "resumed by its external id")
		require.Equal(t, "v1", resumes[0].Version.Tag)
		agent.mu.Lock()
		require.Equal(t, 1, agent.dispatches[job.ID], "dispatched once")
		agent.outcome = release.JobSuccessful
		agent.mu.Unlock()

		h.drain()
		require.Len(t, agent.resumesOf(job.ID), 1, "no resume while the new lease runs")
		h.clock.Advance(time.Minute)
		h.drain()
		jobs = h.jobs("dev", "c1")
		require.Equal(t, release.JobSuccessful, jobs[0].Status, "what the run did meanwhile is recorded")
		require.Len(t, agent.resumesOf(job.ID), 2)
		agent.mu.Lock()
		require.Equal(t, 1, agent.dispatches[job.ID])
		agent.mu.Unlock()
	})
}

// TestResumedJobStillTimesOut: a job past its deployment's timeout is
// ended as timed out even when its lease ran out too: it is not resumed.
func TestResumedJobStillTimesOut(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		agent := &resumingAgent{dispatches: map[string]int{}}
		h.chain.Agents["fake"] = agent
		dep, err := h.store.Deployments().Get(h.ctx, "api")
		require.NoError(t, err)
		dep.Value.JobTimeoutSeconds = 30
		_, err = h.store.Deployments().Put(h.ctx, dep.Value, dep.Version)
		require.NoError(t, err)
		h.version("v1")
		h.drain()
		h.clock.Advance(time.Minute)
		h.drain()
		jobs := h.jobs("dev", "c1")
		require.Equal(t, release.JobFailure, jobs[len(jobs)-1].Status)
		require.Contains(t, jobs[len(jobs)-1].Message, "timed out")
		require.Empty(t, agent.resumesOf(jobs[len(jobs)-1].ID))
	})
}
