package terraformcloud

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/jobagent/jobagenttest"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func newAgent(t *testing.T, r ports.JobReporter, o Options) *Agent {
	a := New(r, testSecrets, o)
	t.Cleanup(a.Close)
	return a
}

// settled waits for the next terminal or actionRequired report.
func settled(t *testing.T, r *jobagenttest.Reports) ports.JobReport {
	t.Helper()
	return r.Until(t, func(rep ports.JobReport) bool {
		return rep.Status.IsTerminal() || rep.Status == release.JobActionRequired
	})
}

func TestConformance(t *testing.T) {
	f := newFakeTFC(t)
	porttest.JobAgent(t, func(t *testing.T, r ports.JobReporter) ports.JobAgent {
		return newAgent(t, r, jobagenttest.FastOptions())
	}, porttest.JobAgentOptions{Config: f.config(), Durable: true, RunsOf: f.runsOf})
}

func TestDispatchCreatesTheRunAndFollowsItToApplied(t *testing.T) {
	t.Parallel()
	f := newFakeTFC(t)
	rep := jobagenttest.NewReports()
	res, err := newAgent(t, rep, jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, "run-100", res.ExternalID)
	require.Equal(t, release.JobInProgress, res.Status)
	f.Mu.Lock()
	require.Equal(t, []string{"GET /api/v2/workspaces/ws-abc123/runs", "POST /api/v2/runs"}, f.Requests)
	require.Equal(t, map[string]any{"data": map[string]any{"type": "runs",
		"attributes": map[string]any{"message": "Triggered by reconciler [" + jobfollow.CorrelationKey("job-1") + "]",
			"variables": []any{map[string]any{"key": "image_tag", "value": `"v1.2.3"`}, map[string]any{"key": "replicas", "value": "3"}}},
		"relationships": map[string]any{"workspace": map[string]any{"data": map[string]any{"type": "workspaces", "id": "ws-abc123"}}}}}, f.created[0])
	f.Mu.Unlock()
	got := settled(t, rep)
	require.Equal(t, release.JobSuccessful, got.Status)
	require.Equal(t, f.URL+"/app/acme/workspaces/prod/runs/run-100", got.Outputs["url"])
}

func TestErroredRunFailsAndConfirmableRunNeedsAction(t *testing.T) {
	t.Parallel()
	f := newFakeTFC(t)
	f.end = "errored"
	rep := jobagenttest.NewReports()
	_, err := newAgent(t, rep, jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobFailure, settled(t, rep).Status)

	g := newFakeTFC(t)
	g.confirm = true
	rep = jobagenttest.NewReports()
	a := newAgent(t, rep, jobagenttest.FastOptions())
	d := porttest.JobAgentDispatch(Type, "job-2", g.config())
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.Equal(t, release.JobActionRequired, settled(t, rep).Status)
	// Cancelling a run waiting for confirmation discards it.
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-2", ExternalID: res.ExternalID, Agent: d.Agent}))
	g.Mu.Lock()
	require.Equal(t, []string{"run-100 discard"}, g.actions)
	g.Mu.Unlock()
	require.Equal(t, release.JobCancelled, settled(t, rep).Status)
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-2", ExternalID: res.ExternalID, Agent: d.Agent}), "an ended run")
}

func TestCancelJobCancelsAPlanningRun(t *testing.T) {
	t.Parallel()
	f := newFakeTFC(t)
	o := jobagenttest.FastOptions()
	o.MinPoll = time.Hour
	a := newAgent(t, jobagenttest.NewReports(), o)
	d := porttest.JobAgentDispatch(Type, "job-1", f.config())
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent}))
	f.Mu.Lock()
	require.Equal(t, []string{"run-100 cancel"}, f.actions)
	f.Mu.Unlock()
}

func TestRetriesMalformedAndBadConfig(t *testing.T) {
	t.Parallel()
	f := newFakeTFC(t)
	f.Faults = []int{http.StatusTooManyRequests, http.StatusBadGateway}
	f.malformed = true
	rep := jobagenttest.NewReports()
	_, err := newAgent(t, rep, jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobSuccessful, settled(t, rep).Status)
	require.Equal(t, 1, f.createdCount())

	for field, mutate := range map[string]func(map[string]any){
		"job_agent_config.workspaceId":         func(c map[string]any) { c["workspaceId"] = "prod" },
		"job_agent_config.variables.image_tag": func(c map[string]any) { c["variables"] = map[string]any{"image_tag": []any{}} },
		"job_agent_config.tokenRef":            func(c map[string]any) { delete(c, "tokenRef") },
	} {
		cfg := f.config()
		mutate(cfg)
		require.ErrorContains(t, ValidateConfig(cfg), field)
		res, err := newAgent(t, jobagenttest.NewReports(), jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-bad", cfg))
		require.NoError(t, err)
		require.Equal(t, release.JobInvalidJobAgent, res.Status)
		require.Contains(t, res.Message, field)
	}
}

func TestVerifierReadsTheJobsRun(t *testing.T) {
	f := newFakeTFC(t)
	o := jobagenttest.FastOptions()
	o.MinPoll = time.Hour
	res, err := newAgent(t, jobagenttest.NewReports(), o).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	cfg := map[string]any{"address": f.URL, "tokenRef": "env:RECONCILER_SECRET_TFC"}
	req := porttest.MeasureRequestFor(Type, cfg, 1)
	req.Job.ExternalID = res.ExternalID
	v := NewVerifier(testSecrets, outbound.Options{Guard: netguard.Loopback, Backoff: time.Millisecond})
	got, err := v.Measure(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"run_id": "run-100", "status": "planning", "has_changes": false}, got)
	spec := req.Metric
	spec.SuccessCondition = `result.status == "applied"`
	spec.Count = 1
	status, _ := policy.EvaluateMeasurements(spec, []release.Measurement{{Result: got}})
	require.Equal(t, release.VerificationFailed, status)

	require.ErrorContains(t, ValidateProviderConfig(map[string]any{"tokenRef": "env:X", "runId": "nope"}), "provider.config.runId")
	missing := porttest.MeasureRequestFor(Type, map[string]any{"address": f.URL, "tokenRef": "env:RECONCILER_SECRET_TFC", "runId": "run-999"}, 1)
	_, err = v.Measure(t.Context(), missing)
	require.ErrorContains(t, err, "run run-999 not found")

	t.Run("conformance", func(t *testing.T) {
		withRun := porttest.MeasureRequestFor(Type, map[string]any{"address": f.URL, "tokenRef": "env:RECONCILER_SECRET_TFC", "runId": res.ExternalID}, 1)
		porttest.Verifier(t, func(t *testing.T) ports.Verifier { return v }, porttest.VerifierOptions{
			Measurable: []ports.MeasureRequest{withRun},
			Failing:    []ports.MeasureRequest{missing, porttest.MeasureRequestFor(Type, map[string]any{"address": f.URL}, 1)},
		})
	})
}

// A run waiting for a run task's decision or a policy override waits for a
// person: actionRequired saying so, not inProgress until the timeout
// (issue 31).
func TestRunsAwaitingADecisionNeedAction(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"post_plan_awaiting_decision", "policy_override"} {
		f := newFakeTFC(t)
		f.end = status
		rep := jobagenttest.NewReports()
		_, err := newAgent(t, rep, jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
		require.NoError(t, err)
		got := settled(t, rep)
		require.Equal(t, release.JobActionRequired, got.Status, status)
		require.Contains(t, got.Message, "waits", status)
	}
	var forced runData
	forced.Attributes.Status = "force_canceled"
	require.Equal(t, release.JobInProgress, stateOf(config{}, forced).Status, "force_canceled is no run status: nothing maps it")
}

// A dispatch retried after a crash finds its run, however many runs came
// after it (the newest 50 alone missed it and a second run was started).
func TestDispatchRetriedAfterACrashFindsTheRun(t *testing.T) {
	t.Parallel()
	for _, others := range []int{0, 60} {
		dispatchRetriedFindsTheRun(t, others)
	}
}

func dispatchRetriedFindsTheRun(t *testing.T, others int) {
	f := newFakeTFC(t)
	o := jobagenttest.FastOptions()
	o.MinPoll = time.Hour
	first := newAgent(t, jobagenttest.NewReports(), o)
	r1, err := first.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	first.Close()
	f.Mu.Lock()
	for i := range others { // runs started since, by others
		id := fmt.Sprintf("run-x%d", i)
		run := &runData{ID: id, Type: "runs"}
		run.Attributes.Status, run.Attributes.Message = "applied", "queued manually"
		f.runs[id], f.order = run, append(f.order, id)
	}
	f.Mu.Unlock()
	r2, err := newAgent(t, jobagenttest.NewReports(), o).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, r1.ExternalID, r2.ExternalID)
	require.Equal(t, 1, f.createdCount())
}
