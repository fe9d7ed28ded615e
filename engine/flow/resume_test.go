package flow_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// resumingLeaser holds a lease on each job and resumes jobs
// (ports.JobResumer), as the external agents do; nobody renews its leases
// here: each runs out, as when its process died.
type resumingLeaser struct {
	mu         sync.Mutex
	dispatches int
	resumes    []ports.JobDispatch
	outcome    release.JobStatus // what a resume finds (default: running)
}

func (*resumingLeaser) Type() string            { return "resumer" }
func (*resumingLeaser) JobLease() time.Duration { return 10 * time.Second }

func (a *resumingLeaser) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dispatches++
	return ports.JobDispatchResult{ExternalID: "ext/" + d.Job.ID, Status: release.JobInProgress}, nil
}

func (a *resumingLeaser) ResumeJob(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resumes = append(a.resumes, d)
	status := a.outcome
	if status == "" {
		status = release.JobInProgress
	}
	return ports.JobDispatchResult{ExternalID: d.Job.ExternalID, Status: status, Message: "found again"}, nil
}

// TestJobOfAResumerIsResumedNotLost: a job TaskRun whose agent resumes
// jobs is not failed as lost when its lease runs out: the pass renews the
// lease in its write and hands the job, with its external id and first
// record time, to ResumeJob, never dispatching it again; what the run did
// meanwhile ends the attempt.
func TestJobOfAResumerIsResumedNotLost(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, eng, clock := setupController(t, open)
			agent := &resumingLeaser{}
			useAgent(t, c, "r", agent)
			tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{"tasks":[
				{"name":"a","type":"job","jobAgentRef":"r"}]}}`
			_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl)})
			require.NoError(t, err)
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			st, err := c.Status(ctx, "w")
			require.NoError(t, err)
			recorded := st.TaskRuns[0].Delivery.RecordedAt
			jobID := st.TaskRuns[0].JobID

			step := func() flow.Status {
				t.Helper()
				clock.Advance(11 * time.Second) // the lease runs out
				require.NoError(t, c.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: flow.Key("w")}))
				_, err := eng.Drain(ctx)
				require.NoError(t, err)
				st, err := c.Status(ctx, "w")
				require.NoError(t, err)
				return st
			}
			st = step()
			r := st.TaskRuns[0]
			require.Equal(t, workflow.TaskRunning, r.Phase, r.Message)
			require.Equal(t, clock.Now().Add(10*time.Second), r.Delivery.LeaseUntil, "claimed anew")
			agent.mu.Lock()
			require.Len(t, agent.resumes, 1)
			d := agent.resumes[0]
			require.Equal(t, jobID, d.Job.ID)
			require.Equal(t, "ext/"+jobID, d.Job.ExternalID)
			require.Equal(t, recorded, d.Job.CreatedAt, "the job's first record time")
			require.Equal(t, 1, agent.dispatches)
			agent.outcome = release.JobSuccessful
			agent.mu.Unlock()

			st = step()
			require.Equal(t, workflow.TaskSucceeded, st.TaskRuns[0].Phase, st.TaskRuns[0].Message)
			require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase)
			agent.mu.Lock()
			require.Len(t, agent.resumes, 2)
			require.Equal(t, 1, agent.dispatches, "dispatched once")
			agent.mu.Unlock()
		})
	}
}
