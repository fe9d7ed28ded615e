package flow_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
	"github.com/reconcilerhq/reconciler/workflow/scenario"
)

// stores builds the workflow store, release store and queue of an adapter.
var stores = map[string]func(t *testing.T, clock ports.Clock) (ports.WorkflowStore, ports.ReleaseStore, ports.Queue){
	"memory": func(_ *testing.T, clock ports.Clock) (ports.WorkflowStore, ports.ReleaseStore, ports.Queue) {
		return memory.NewWorkflowStore(), memory.NewReleaseStore(clock), memory.NewQueue(clock)
	},
	"postgres": func(t *testing.T, clock ports.Clock) (ports.WorkflowStore, ports.ReleaseStore, ports.Queue) {
		dsn, _ := pgtest.Schema(t)
		ctx := context.Background()
		db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(4))
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.NoError(t, db.MigrateUp(ctx))
		q := postgres.NewQueue(db, clock)
		t.Cleanup(q.Close)
		return postgres.NewWorkflowStore(db), postgres.NewReleaseStore(db, clock), q
	},
}

// world plays the outside world of a scenario: scripted jobs that finish
// after the scenario's job duration, webhooks that answer at once,
// approvers who approve when an approval "job" would have succeeded.
type world struct {
	sc    *scenario.Scenario
	sim   *scenario.Sim // the scenario's script, outputs and durations
	clock *porttest.FakeClock

	mu        sync.Mutex
	pending   map[string]event // job id or approval run → when and how it ends
	requests  []ports.WebhookRequest
	jobs      []ports.JobDispatch
	cancelled map[string]ports.JobCancel // by job id
}

// CancelJob records the cancel; the job never reports.
func (w *world) CancelJob(_ context.Context, c ports.JobCancel) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancelled == nil {
		w.cancelled = map[string]ports.JobCancel{}
	}
	w.cancelled[c.JobID] = c
	delete(w.pending, c.JobID)
	return nil
}

type event struct {
	at       time.Time
	result   scenario.Result
	report   ports.JobReport
	approval string // task run id of an approval
	task     string
	index    int
}

func (w *world) Type() string { return "script" }

// Dispatch schedules the scripted end of the job's attempt.
func (w *world) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.jobs = append(w.jobs, d)
	task, _ := d.Job.DispatchContext["task_run_id"].(string)
	attempt, _ := d.Job.DispatchContext["attempt"].(int)
	name, index := splitRun(task)
	res := w.sim.Script(name, index, attempt)
	if _, ok := w.pending[d.Job.ID]; !ok {
		w.pending[d.Job.ID] = event{at: w.clock.Now().Add(w.sim.JobDuration), result: res, task: name, index: index,
			report: ports.JobReport{JobID: d.Job.ID, AgentID: d.Agent.ID, ExternalID: "script/" + d.Job.ID}}
	}
	return ports.JobDispatchResult{ExternalID: "script/" + d.Job.ID, Status: release.JobInProgress}, nil
}

// Send answers a webhook at once: 200 with the scripted outputs, or 500.
func (w *world) Send(_ context.Context, r ports.WebhookRequest) (ports.WebhookResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.requests = append(w.requests, r)
	return ports.WebhookResponse{Status: 200, Body: []byte(`{"ok":true}`)}, nil
}

// Measure plays a verification's scripted result: value 0 when the
// attempt succeeds, 1 when it fails (the scenarios' metrics want < 0.01).
func (w *world) Measure(_ context.Context, r ports.MeasureRequest) (any, error) {
	parts := strings.Split(r.Job.ID, "/")
	task, index := splitRun(parts[2])
	attempt := 0
	if len(parts) == 4 && parts[3] != "0" {
		attempt = int(parts[3][0] - '0')
	}
	if w.sim.Script(task, index, attempt) == scenario.Succeed {
		return map[string]any{"value": 0.0}, nil
	}
	return map[string]any{"value": 1.0}, nil
}

// Resolve reveals the scenario's secrets, referenced as "scenario:NAME".
func (w *world) Resolve(_ context.Context, ref release.SecretRef) (string, error) {
	return w.sc.Secrets[strings.TrimPrefix(ref.Ref, "scenario:")], nil
}

// splitRun splits a TaskRun id into task and matrix index.
func splitRun(id string) (string, int) {
	if i := strings.LastIndexByte(id, '.'); i >= 0 {
		n := 0
		for _, c := range id[i+1:] {
			if c < '0' || c > '9' {
				return id, workflow.NoMatrix
			}
			n = n*10 + int(c-'0')
		}
		return id[:i], n
	}
	return id, workflow.NoMatrix
}

// runScenario drives one scenario through the engine on an adapter and
// returns the stored end state.
func runScenario(t *testing.T, sc *scenario.Scenario, backend string) (flow.Status, *world) {
	sim, err := sc.Prepare()
	require.NoError(t, err)
	clock := porttest.NewFakeClock(scenario.Start)
	wfs, rel, q := stores[backend](t, clock)
	w := &world{sc: sc, sim: sim, clock: clock, pending: map[string]event{}}
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &flow.Controller{Store: wfs, Queue: q, Releases: rel, Agents: map[string]ports.JobAgent{"script": w},
		Webhooks: w, Secrets: w, Verifiers: map[string]ports.Verifier{"datadog": w}, Clock: clock, Logger: log}
	eng := engine.New(q, engine.Options{Clock: clock, Logger: log, Owner: "test"})
	c.Register(eng, 1)
	for i := range sc.TemplateDoc().Spec.Tasks {
		if ref := sc.TemplateDoc().Spec.Tasks[i].JobAgentRef; ref != "" {
			if _, err := rel.JobAgents().Get(ctx, ref); err != nil {
				_, err := rel.JobAgents().Put(ctx, release.JobAgent{ID: ref, Name: ref, Type: "script"}, 0)
				require.NoError(t, err)
			}
		}
	}
	doc, err := json.Marshal(sc.TemplateDoc())
	require.NoError(t, err)
	vars := map[string]release.Value{}
	for k, v := range sc.Variables {
		vars[k] = release.Value{Literal: v}
	}
	for k := range sc.Secrets {
		vars[k] = release.Value{Sensitive: &release.SecretRef{Ref: "scenario:" + k}}
	}
	wf, err := c.Start(ctx, flow.StartParams{ID: "wf-" + sc.Name, Template: doc, Parameters: sc.Parameters,
		VersionConfig: sc.VersionConfig, Variables: vars, Release: sc.Release,
		Inputs: workflow.Inputs{Resources: sc.Inputs.Resources, Environments: sc.Inputs.Environments, ReleaseTargets: sc.Inputs.ReleaseTargets}})
	require.NoError(t, err)
	cancelAt := time.Time{}
	if sc.CancelAfter != nil {
		cancelAt = scenario.Start.Add(sc.CancelAfter.D())
	}
	for step := 0; step < 2000; step++ {
		_, err := eng.Drain(ctx)
		require.NoError(t, err)
		st, err := c.Status(ctx, wf.ID)
		require.NoError(t, err)
		if st.Workflow.Phase.Terminal() {
			return st, w
		}
		// Approval runs end like jobs: approved when they would succeed.
		for _, r := range st.TaskRuns {
			if r.Type == workflow.TaskApproval && r.Phase == workflow.TaskRunning {
				key := "approval/" + r.ID + "/" + string(rune('0'+r.Attempt))
				w.mu.Lock()
				if _, ok := w.pending[key]; !ok {
					w.pending[key] = event{at: clock.Now().Add(sim.JobDuration), result: sim.Script(r.Task, r.MatrixIndex, r.Attempt), approval: r.ID}
				}
				w.mu.Unlock()
			}
		}
		// Move the clock to the next event: a job's end, the workflow's
		// wake-up, the cancel request.
		next := time.Time{}
		consider := func(at time.Time) {
			if !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		w.mu.Lock()
		for _, e := range w.pending {
			if e.result != scenario.Hang {
				consider(e.at)
			}
		}
		w.mu.Unlock()
		if it, err := q.WorkGet(ctx, flow.Key(wf.ID)); err == nil && it.State == ports.WorkPending {
			consider(it.NotBefore)
		}
		if !cancelAt.IsZero() {
			consider(cancelAt)
		}
		if next.IsZero() {
			for _, r := range st.TaskRuns {
				t.Logf("%s %s attempt %d job %q: %s", r.ID, r.Phase, r.Attempt, r.JobID, r.Message)
			}
			t.Fatalf("scenario %s is stuck: nothing to wait for (workflow %s)", sc.Name, st.Workflow.Phase)
		}
		if next.After(clock.Now()) {
			clock.Set(next)
		}
		if !cancelAt.IsZero() && !clock.Now().Before(cancelAt) {
			require.NoError(t, c.Cancel(ctx, wf.ID))
			cancelAt = time.Time{}
		}
		w.mu.Lock()
		var due []string
		for k, e := range w.pending {
			if e.result != scenario.Hang && !e.at.After(clock.Now()) {
				due = append(due, k)
			}
		}
		slices.Sort(due)
		evs := make([]event, len(due))
		for i, k := range due {
			evs[i] = w.pending[k]
			delete(w.pending, k)
		}
		w.mu.Unlock()
		for _, e := range evs {
			if e.approval != "" {
				if e.result == scenario.Succeed {
					user := "approver"
					name, _ := splitRun(e.approval)
					for _, task := range sc.TemplateDoc().Spec.Tasks {
						if task.Name == name && task.Approval != nil && len(task.Approval.Approvers) > 0 {
							user = task.Approval.Approvers[0]
						}
					}
					_ = c.Approve(ctx, wf.ID, e.approval, user) // a cancelled run refuses: fine
				}
				continue
			}
			rep := e.report
			rep.Status = release.JobSuccessful
			if e.result == scenario.Fail {
				rep.Status = release.JobFailure
			}
			if rep.Status == release.JobSuccessful {
				rep.Outputs = sim.Outputs(e.task, e.index)
			}
			require.NoError(t, c.ReportJob(ctx, rep))
		}
	}
	st, _ := c.Status(ctx, wf.ID)
	for _, r := range st.TaskRuns {
		t.Logf("%s %s attempt %d job %q: %s", r.ID, r.Phase, r.Attempt, r.JobID, r.Message)
	}
	t.Fatalf("scenario %s did not finish", sc.Name)
	return flow.Status{}, nil
}

// TestScenariosThroughEngine runs every scenario of testdata/workflows
// through the engine on both adapters and checks the expected phases,
// attempts, messages and stored configs; the dispatch expectations are
// checked on what the agents and webhooks were actually sent.
func TestScenariosThroughEngine(t *testing.T) {
	t.Parallel()
	scs, err := scenario.LoadAll(os.DirFS("../../testdata/workflows"), "scenarios")
	require.NoError(t, err)
	require.NotEmpty(t, scs)
	for backend := range stores {
		for _, sc := range scs {
			t.Run(backend+"/"+sc.Name, func(t *testing.T) {
				t.Parallel()
				st, w := runScenario(t, sc, backend)
				sim := &scenario.Sim{In: workflow.ScheduleInput{Workflow: workflow.WorkflowState{Phase: st.Workflow.Phase}},
					Created: map[string]workflow.CreateTaskRun{}}
				for _, r := range st.TaskRuns {
					sim.In.TaskRuns = append(sim.In.TaskRuns, r.TaskRun)
					sim.Created[r.ID] = workflow.CreateTaskRun{Config: r.Config, DispatchConfig: sent(w, &r)}
				}
				require.Empty(t, sc.Check(sim), "scenario %s", sc.Name)
				// The agent was told to stop every job the workflow ended
				// (cancelled, timed out), and only those.
				w.mu.Lock()
				for _, r := range st.TaskRuns {
					c, told := w.cancelled[r.JobID]
					if r.Type != workflow.TaskJob || r.JobID == "" {
						continue
					}
					if r.Phase == workflow.TaskCancelled || strings.Contains(r.Message, "timed out") {
						require.True(t, told, "run %s (%s: %s): its agent is told to stop job %s", r.ID, r.Phase, r.Message, r.JobID)
						require.Equal(t, "script/"+r.JobID, c.ExternalID)
						require.Equal(t, r.Message, c.Reason)
					} else {
						require.False(t, told, "run %s (%s) was not stopped", r.ID, r.Phase)
					}
				}
				w.mu.Unlock()
				raw, err := json.Marshal(st)
				require.NoError(t, err)
				for _, s := range sc.Secrets {
					require.NotContains(t, string(raw), s, "a secret's value is never stored")
				}
			})
		}
	}
}

// sent is the config an executor actually sent for a run: the last job or
// request it made, as the dispatch config's shape.
func sent(w *world, r *ports.TaskRunRecord) map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.Type {
	case workflow.TaskWebhook:
		if n := len(w.requests); n > 0 {
			q := w.requests[n-1]
			hook := map[string]any{"url": q.URL, "method": q.Method, "body": q.Body}
			headers := map[string]any{}
			for k, v := range q.Headers {
				headers[k] = v
			}
			hook["headers"] = headers
			return workflow.Normalize(map[string]any{"webhook": hook}).(map[string]any)
		}
	case workflow.TaskJob:
		for i := len(w.jobs) - 1; i >= 0; i-- {
			if id, _ := w.jobs[i].Job.DispatchContext["task_run_id"].(string); id == r.ID {
				return workflow.Normalize(map[string]any{"config": w.jobs[i].Job.JobAgentConfig}).(map[string]any)
			}
		}
	}
	return r.Config
}
