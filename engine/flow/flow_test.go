package flow_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
	"github.com/reconcilerhq/reconciler/workflow/scenario"
)

// instantAgent reports every job's success from inside Dispatch: before
// the dispatching pass could record the job id.
type instantAgent struct{ c *flow.Controller }

func (instantAgent) Type() string { return "instant" }

func (a instantAgent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	err := a.c.ReportJob(ctx, ports.JobReport{JobID: d.Job.ID, AgentID: d.Agent.ID, Status: release.JobSuccessful,
		Outputs: map[string]any{"n": d.Job.JobAgentConfig["n"]}})
	return ports.JobDispatchResult{ExternalID: d.Job.ID, Status: release.JobInProgress}, err
}

// TestReportBeforeJobRecorded: a report that overtakes the pass that
// dispatched the job still ends the TaskRun, and its outputs feed the
// next task; the workflow succeeds.
func TestReportBeforeJobRecorded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := porttest.NewFakeClock(scenario.Start)
	q, rel := memory.NewQueue(clock), memory.NewReleaseStore(clock)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &flow.Controller{Store: memory.NewWorkflowStore(), Queue: q, Releases: rel, Clock: clock, Logger: log}
	c.Agents = map[string]ports.JobAgent{"instant": instantAgent{c}}
	_, err := rel.JobAgents().Put(ctx, release.JobAgent{ID: "a", Name: "a", Type: "instant"}, 0)
	require.NoError(t, err)
	eng := engine.New(q, engine.Options{Clock: clock, Logger: log, Owner: "test"})
	c.Register(eng, 1)
	tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{"tasks":[
		{"name":"one","type":"job","jobAgentRef":"a","config":{"n":1}},
		{"name":"two","type":"job","jobAgentRef":"a","config":{"n":"{{tasks.one.outputs.n}}"},"dependencies":["one"]}]}}`
	w, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl)})
	require.NoError(t, err)
	_, err = eng.Drain(ctx)
	require.NoError(t, err)
	st, err := c.Status(ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase)
	require.Len(t, st.TaskRuns, 2)
	require.Equal(t, map[string]any{"n": float64(1)}, st.TaskRuns[1].Config["config"], "outputs of one fed two")
}

// TestStartRefusesBadInput: a bad template or parameter stores nothing and
// lists every problem.
func TestStartRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := porttest.NewFakeClock(scenario.Start)
	store := memory.NewWorkflowStore()
	c := &flow.Controller{Store: store, Queue: memory.NewQueue(clock), Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(`{"kind":"WorkflowTemplate","spec":{"tasks":[{"name":"a","type":"nope"}]}}`)})
	var inv *workflow.InvalidError
	require.ErrorAs(t, err, &inv)
	tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{
		"parameters":[{"name":"n","type":"number","required":true},{"name":"mode","type":"string","enum":["a","b"]}],
		"tasks":[{"name":"w","type":"wait","wait":{"duration":"1s"}}]}}`
	_, err = c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl), Parameters: map[string]any{"mode": "c"}})
	require.ErrorAs(t, err, &inv)
	require.Len(t, inv.Problems, 2, "the missing n and the bad mode: %v", err)
	_, err = store.WorkflowGet(ctx, "w")
	require.ErrorIs(t, err, ports.ErrNotFound, "nothing stored")

	// Ids: a '/' would break its jobs' ids (wf/ID/TASKRUN/ATTEMPT) and
	// their reports would never reach it; control characters, spaces and
	// long ids are refused too, naming the field.
	for _, id := range []string{"a/b", "ship\x1b[31m", "two words", "-lead", strings.Repeat("x", flow.MaxIDLen+1), "\x00"} {
		_, err = c.Start(ctx, flow.StartParams{ID: id, Template: []byte(tmpl), Parameters: map[string]any{"n": 1}})
		require.ErrorIs(t, err, release.ErrInvalid, "%q", id)
		var fe *release.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "id", fe.Field)
		require.NotContains(t, err.Error(), "\x1b[31m", "the id is quoted, escapes and all")
	}
	list, err := store.WorkflowList(ctx, "", 100)
	require.NoError(t, err)
	require.Empty(t, list, "nothing stored")
	w, err := c.Start(ctx, flow.StartParams{ID: "Ship_1.a-b", Template: []byte(tmpl), Parameters: map[string]any{"n": 1}})
	require.NoError(t, err)
	require.Equal(t, "Ship_1.a-b", w.ID)
}
