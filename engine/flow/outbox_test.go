package flow_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
	"github.com/reconcilerhq/reconciler/workflow/scenario"
)

// setupController builds a workflow controller on the stores open makes,
// registered on an engine, both on a fake clock.
func setupController(t *testing.T, open func(*testing.T, ports.Clock) (ports.WorkflowStore, ports.ReleaseStore, ports.Queue)) (*flow.Controller, *engine.Engine, *porttest.FakeClock) {
	clock := porttest.NewFakeClock(scenario.Start)
	wfs, rel, q := open(t, clock)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &flow.Controller{Store: wfs, Queue: q, Releases: rel, Clock: clock, Logger: log}
	eng := engine.New(q, engine.Options{Clock: clock, Logger: log, Owner: "test"})
	c.Register(eng, 1)
	return c, eng, clock
}

// useAgent makes agent c's only job agent and stores its record under id.
func useAgent(t *testing.T, c *flow.Controller, id string, agent ports.JobAgent) {
	t.Helper()
	c.Agents = map[string]ports.JobAgent{agent.Type(): agent}
	_, err := c.Releases.JobAgents().Put(t.Context(), release.JobAgent{ID: id, Name: id, Type: agent.Type()}, 0)
	require.NoError(t, err)
}

// racingAgent counts the sends of every job id; the job named fast
// reports its success from inside Dispatch, as a millisecond job of
// another process would: before the dispatching pass is over.
type racingAgent struct {
	c    *flow.Controller
	fast string

	mu    sync.Mutex
	sends map[string]int
}

func (*racingAgent) Type() string { return "racing" }

func (a *racingAgent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	a.sends[d.Job.ID]++
	a.mu.Unlock()
	if d.Job.JobAgentConfig["name"] == a.fast {
		if err := a.c.ReportJob(ctx, ports.JobReport{JobID: d.Job.ID, AgentID: d.Agent.ID, Status: release.JobSuccessful}); err != nil {
			return ports.JobDispatchResult{}, err
		}
	}
	return ports.JobDispatchResult{ExternalID: "ext/" + d.Job.ID, Status: release.JobInProgress}, nil
}

// TestJobSentOnceWhenAReportWinsTheRace: three jobs dispatched by one
// pass, one of which reports before the pass is over. Each job id is sent
// exactly once, the slow jobs keep their external ids, and their reports
// finish the workflow.
func TestJobSentOnceWhenAReportWinsTheRace(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, eng, _ := setupController(t, open)
			agent := &racingAgent{c: c, fast: "b", sends: map[string]int{}}
			useAgent(t, c, "r", agent)
			tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{"tasks":[
				{"name":"a","type":"job","jobAgentRef":"r","config":{"name":"a"}},
				{"name":"b","type":"job","jobAgentRef":"r","config":{"name":"b"}},
				{"name":"c","type":"job","jobAgentRef":"r","config":{"name":"c"}}]}}`
			_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl)})
			require.NoError(t, err)
			_, err = eng.Drain(ctx)
			require.NoError(t, err)

			st, err := c.Status(ctx, "w")
			require.NoError(t, err)
			require.Len(t, st.TaskRuns, 3)
			for _, r := range st.TaskRuns {
				require.Equal(t, 1, agent.sends[r.JobID], "job %s sent once", r.JobID)
				if r.Task != "b" {
					require.Equal(t, workflow.TaskRunning, r.Phase, r.ID)
					require.Equal(t, "ext/"+r.JobID, r.ExternalID, "the agent's id is recorded")
					require.NoError(t, c.ReportJob(ctx, ports.JobReport{JobID: r.JobID, Status: release.JobSuccessful}))
				}
			}
			require.Len(t, agent.sends, 3)
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			st, err = c.Status(ctx, "w")
			require.NoError(t, err)
			require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase, st.Workflow.Message)
		})
	}
}

// recordingHook is a Webhook that, at each send, reads what the store
// holds of the sending TaskRun.
type recordingHook struct {
	store ports.WorkflowStore

	mu       sync.Mutex
	requests []ports.WebhookRequest
	stored   []*ports.Delivery
}

func (h *recordingHook) Send(ctx context.Context, r ports.WebhookRequest) (ports.WebhookResponse, error) {
	run, err := h.store.TaskRunGet(ctx, "w", "hook")
	if err != nil {
		return ports.WebhookResponse{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, r)
	h.stored = append(h.stored, run.Delivery)
	if len(h.requests) == 1 {
		return ports.WebhookResponse{Status: 503}, nil
	}
	return ports.WebhookResponse{Status: 200, Body: []byte(`{"ok":true}`)}, nil
}

// TestWebhookRecordedBeforeSentWithIdempotencyKey: a webhook request is
// recorded in its TaskRun before it goes out and carries the
// Idempotency-Key of (workflow, TaskRun, attempt); the retried attempt
// has a key of its own.
func TestWebhookRecordedBeforeSentWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, eng, clock := setupController(t, open)
			hook := &recordingHook{store: c.Store}
			c.Webhooks = hook
			tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{"tasks":[
				{"name":"hook","type":"webhook","retryStrategy":{"limit":1},"webhook":{"url":"http://hooks.example/deploy","body":{"a":1}}}]}}`
			_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl)})
			require.NoError(t, err)
			for range 10 {
				_, err = eng.Drain(ctx)
				require.NoError(t, err)
				clock.Advance(time.Minute) // past the retry's backoff
			}
			st, err := c.Status(ctx, "w")
			require.NoError(t, err)
			require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase, st.Workflow.Message)
			require.Len(t, hook.requests, 2, "the failed attempt and its retry, each sent once")
			for i, want := range []string{"wf/w/hook/0", "wf/w/hook/1"} {
				require.Equal(t, want, hook.requests[i].IdempotencyKey)
				require.NotNil(t, hook.stored[i], "request %d recorded before it was sent", i)
				require.Equal(t, want, hook.stored[i].Key)
				require.True(t, hook.stored[i].SentAt.IsZero(), "recorded as in flight")
			}
		})
	}
}

// slowLeaser is a JobLeaser whose sends take longer than its lease: the
// fake clock moves by took during each Dispatch.
type slowLeaser struct {
	clock *porttest.FakeClock
	took  time.Duration
}

func (*slowLeaser) Type() string            { return "slow" }
func (*slowLeaser) JobLease() time.Duration { return 10 * time.Second }

func (a *slowLeaser) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.clock.Advance(a.took)
	return ports.JobDispatchResult{ExternalID: "ext/" + d.Job.ID, Status: release.JobInProgress}, nil
}

// TestJobLeaseStartsWhenSent: a JobLeaser's lease on a job runs from the
// moment the agent accepted it, not from the job's record, so a send that
// took longer than the lease (a loaded machine) does not end a job its
// agent is running as lost; once the lease runs out unrenewed, it does.
func TestJobLeaseStartsWhenSent(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, eng, clock := setupController(t, open)
			useAgent(t, c, "s", &slowLeaser{clock: clock, took: 15 * time.Second})
			tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{"tasks":[
				{"name":"a","type":"job","jobAgentRef":"s"}]}}`
			_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl)})
			require.NoError(t, err)
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			sent := clock.Now()

			clock.Advance(5 * time.Second) // 20 s after the record, 5 s after the send
			require.NoError(t, c.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: flow.Key("w")}))
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			st, err := c.Status(ctx, "w")
			require.NoError(t, err)
			require.Len(t, st.TaskRuns, 1)
			require.Equal(t, workflow.TaskRunning, st.TaskRuns[0].Phase, st.TaskRuns[0].Message)

			clock.Set(sent.Add(11 * time.Second)) // the lease from the send ran out
			require.NoError(t, c.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: flow.Key("w")}))
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			st, err = c.Status(ctx, "w")
			require.NoError(t, err)
			require.Equal(t, workflow.TaskFailed, st.TaskRuns[0].Phase)
			require.Contains(t, st.TaskRuns[0].Message, "lease ran out")
		})
	}
}
