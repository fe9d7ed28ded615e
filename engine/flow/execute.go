package flow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/engine/verify"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// prepare does the outside work of the running TaskRuns as the pass has
// them, level-based: a job task without a job gets one, a webhook task
// sends its request, a verification task takes the measurements due, an
// approval task with enough approvals succeeds, a job whose agent's lease
// ran out is lost. What it changes goes into ch, written with the rest of
// the pass; jobs and requests are recorded there (their Delivery) and
// returned as the sends to make once that write is stored (see
// outbox.go). It also returns when a running job's lease or a
// measurement next needs a pass, and how many runs it changed.
func (c *Controller) prepare(ctx context.Context, w *ports.WorkflowRecord, t *workflow.Template, ch *changes) ([]send, time.Time, int) {
	if w.CancelRequested {
		return nil, time.Time{}, 0
	}
	var sends []send
	var wake time.Time
	n := 0
	now := c.Clock.Now()
	ctx = context.WithValue(ctx, agentCacheKey{}, map[string]ports.Stored[release.JobAgent]{})
	visit := func(r ports.TaskRunRecord) {
		if r.Phase != workflow.TaskRunning {
			return
		}
		var changed bool
		var s *send
		switch r.Type {
		case workflow.TaskJob:
			var next time.Time
			changed, s, next = c.prepareJob(ctx, w, t, &r, now)
			wake = earliest(wake, next)
		case workflow.TaskWebhook:
			changed, s = c.prepareWebhook(ctx, w, &r, now)
		case workflow.TaskApproval:
			changed = c.approved(ctx, w, &r, now)
		case workflow.TaskVerification:
			var next time.Time
			changed, next = c.verify(ctx, w, &r, now)
			wake = earliest(wake, next)
		}
		if changed {
			ch.put(r)
			n++
		}
		if s != nil {
			sends = append(sends, *s)
		}
	}
	for i := range ch.runs {
		if _, ok := ch.at[ch.runs[i].ID]; !ok {
			visit(ch.runs[i])
		}
	}
	for i, n := 0, len(ch.batch); i < n; i++ {
		visit(ch.batch[i])
	}
	return sends, wake, n
}

// block decodes the type's block of a run's dispatch config into v, with
// its secrets revealed (see reveal): v goes to the executor only.
func (c *Controller) block(ctx context.Context, w *ports.WorkflowRecord, r *ports.TaskRunRecord, key string, v any) error {
	raw, err := c.reveal(ctx, w, r.Dispatch[key])
	if err != nil {
		return err
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// verification decodes a verification task's block into v, each metric's
// secrets revealed for the address its provider calls (its url, else its
// address; ports.WithSecretDestination), so a sensitive variable goes only
// where it is bound.
func (c *Controller) verification(ctx context.Context, w *ports.WorkflowRecord, r *ports.TaskRunRecord, v *workflow.Verification) error {
	var plain struct {
		Metrics []json.RawMessage `json:"metrics"`
	}
	b, err := json.Marshal(r.Dispatch["verification"])
	if err == nil {
		err = json.Unmarshal(b, &plain)
	}
	if err != nil {
		return err
	}
	v.Metrics = make([]workflow.Metric, len(plain.Metrics))
	for i, raw := range plain.Metrics {
		var m workflow.Metric
		var generic any
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &generic); err != nil {
			return err
		}
		mctx := ctx
		if dest := cmp.Or(m.Provider.URL, m.Provider.Address); dest != "" {
			mctx = ports.WithSecretDestination(ctx, dest)
		}
		revealed, err := c.reveal(mctx, w, generic)
		if err != nil {
			return err
		}
		out, err := json.Marshal(revealed)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(out, &v.Metrics[i]); err != nil {
			return err
		}
	}
	return nil
}

// end moves a running run to a final phase.
func end(r *ports.TaskRunRecord, phase workflow.TaskPhase, at time.Time, msg string) {
	r.Phase, r.FinishedAt, r.Message = phase, at, msg
}

// agentCacheKey carries the agent records one execute call read, by
// name, so that its jobs read each agent once, not once per TaskRun.
type agentCacheKey struct{}

// agentOf is the agent record a job task names (jobAgentRef) and the
// implementation registered for its type.
func (c *Controller) agentOf(ctx context.Context, t *workflow.Template, task string) (release.JobAgent, ports.JobAgent, error) {
	var ref string
	for i := range t.Spec.Tasks {
		if t.Spec.Tasks[i].Name == task {
			ref = t.Spec.Tasks[i].JobAgentRef
		}
	}
	cache, _ := ctx.Value(agentCacheKey{}).(map[string]ports.Stored[release.JobAgent])
	agent, ok := cache[ref]
	if !ok {
		var err error
		if agent, err = c.Releases.JobAgents().Get(ctx, ref); err != nil {
			return release.JobAgent{}, nil, fmt.Errorf("job agent %s: %w", strconv.Quote(ref), err)
		}
		if cache != nil {
			cache[ref] = agent
		}
	}
	impl, ok := c.Agents[agent.Value.Type]
	if !ok {
		return release.JobAgent{}, nil, errors.New("no agent of type " + strconv.Quote(agent.Value.Type) + " is registered")
	}
	return agent.Value, impl, nil
}

// stopJobs tells the agents of jobs the workflow no longer wants (runs
// ended by cancellation or a timeout) to stop them, when the agent can
// (ports.JobCanceler). The runs are already ended, so a failure is only
// logged: the job's later report is ignored either way.
func (c *Controller) stopJobs(ctx context.Context, w *ports.WorkflowRecord, t *workflow.Template, runs []ports.TaskRunRecord) {
	for i := range runs {
		r := &runs[i]
		agent, impl, err := c.agentOf(ctx, t, r.Task)
		if err == nil {
			canceler, ok := impl.(ports.JobCanceler)
			if !ok {
				continue
			}
			err = canceler.CancelJob(ctx, ports.JobCancel{JobID: r.JobID, ExternalID: r.ExternalID, Agent: agent, Reason: r.Message})
		}
		if err != nil {
			c.Logger.LogAttrs(ctx, slog.LevelWarn, "workflow.cancel_job_failed", slog.String("workflow", w.ID),
				slog.String("task_run", r.ID), slog.String("job", r.JobID), slog.String("error", err.Error()))
		}
	}
}

// jobPhase maps a terminal job status to a TaskRun phase.
func jobPhase(s release.JobStatus) workflow.TaskPhase {
	switch s {
	case release.JobSuccessful:
		return workflow.TaskSucceeded
	case release.JobCancelled:
		return workflow.TaskCancelled
	case release.JobSkipped:
		return workflow.TaskSkipped
	}
	return workflow.TaskFailed
}

// approved succeeds an approval task's run once enough of its approvers
// (anyone when it names none) approved; minApprovals defaults to 1.
func (c *Controller) approved(ctx context.Context, w *ports.WorkflowRecord, r *ports.TaskRunRecord, now time.Time) bool {
	var a workflow.Approval
	if err := c.block(ctx, w, r, "approval", &a); err != nil {
		end(r, workflow.TaskFailed, now, "approval: "+err.Error())
		return true
	}
	need := max(a.MinApprovals, 1)
	what := approvalMessage(r)
	if got := countApprovals(&a, r.ApprovedBy); got < need {
		msg := fmt.Sprintf("waiting for approval (%d of %d", got, need)
		if len(a.Approvers) > 0 {
			msg += " from " + strings.Join(a.Approvers, ", ")
		}
		msg += ")"
		if rel := releaseSubject(w); rel != "" {
			msg += " of " + rel
		}
		if what != "" {
			msg += ": " + what
		}
		if r.Message == msg {
			return false
		}
		r.Message = msg
		return true
	}
	msg := "approved by " + fmt.Sprint(r.ApprovedBy)
	if what != "" {
		msg += ": " + what
	}
	end(r, workflow.TaskSucceeded, now, msg)
	return true
}

// releaseSubject names what a release-triggered workflow releases: the
// version (tag and id) to the environment (name and id) on its target;
// "" for another workflow.
func releaseSubject(w *ports.WorkflowRecord) string {
	if w.TargetKey == "" {
		return ""
	}
	field := func(obj, key string) string {
		m, _ := w.Release[obj].(map[string]any)
		v, _ := m[key].(string)
		return v
	}
	return fmt.Sprintf("version %s (%s) to environment %s (%s), target %s",
		field("version", "tag"), field("version", "id"), field("environment", "name"), field("environment", "id"), w.TargetKey)
}

// approvalMessage is what an approval task's run asks its approvers to
// approve: the message of its shown config, whose secrets are redacted, so
// the run's message never holds a secret.
func approvalMessage(r *ports.TaskRunRecord) string {
	block, _ := r.Config["approval"].(map[string]any)
	msg, _ := block["message"].(string)
	return msg
}

// countApprovals counts the users who may approve.
func countApprovals(a *workflow.Approval, users []string) int {
	if len(a.Approvers) == 0 {
		return len(users)
	}
	n := 0
	for _, u := range users {
		for _, ok := range a.Approvers {
			if u == ok {
				n++
				break
			}
		}
	}
	return n
}

// verify takes a verification task's due measurements through the
// verifiers and judges them as the release chain does; the outputs keep
// the measurements. It returns whether the run changed and when the next
// measurement is due.
func (c *Controller) verify(ctx context.Context, w *ports.WorkflowRecord, r *ports.TaskRunRecord, now time.Time) (bool, time.Time) {
	var v workflow.Verification
	if err := c.verification(ctx, w, r, &v); err != nil {
		end(r, workflow.TaskFailed, now, "verification: "+err.Error())
		return true, time.Time{}
	}
	var taken map[string][]release.Measurement
	if b, err := json.Marshal(r.Outputs["measurements"]); err == nil {
		_ = json.Unmarshal(b, &taken)
	}
	if taken == nil {
		taken = map[string][]release.Measurement{}
	}
	specs := make([]policy.MetricSpec, len(v.Metrics))
	for i := range v.Metrics {
		specs[i] = metricSpec(&v.Metrics[i])
	}
	job := release.Job{ID: JobID(w.ID, r.ID, r.Attempt), Status: release.JobSuccessful}
	step := verify.Run(ctx, c.Verifiers, c.Clock, specs, taken, &job, r.AttemptStartedAt, now)
	for _, m := range step.Measured {
		c.Metrics.Verification(m.Provider, m.Outcome)
	}
	changed := step.Changed
	if changed {
		out := map[string]any{}
		for k, v := range r.Outputs {
			out[k] = v
		}
		out["measurements"] = taken
		r.Outputs = out
	}
	switch step.Status {
	case release.VerificationFailed:
		end(r, workflow.TaskFailed, now, step.FailMessage)
		return true, time.Time{}
	case release.VerificationRunning:
		return changed, step.Wake
	}
	end(r, workflow.TaskSucceeded, now, "verification passed")
	return true, time.Time{}
}

// metricSpec is a workflow metric as the policy package judges it.
func metricSpec(m *workflow.Metric) policy.MetricSpec {
	spec := policy.MetricSpec{Name: m.Name, Count: max(m.Count, 1), SuccessCondition: m.SuccessCondition,
		FailureCondition: m.FailureCondition, FailureLimit: m.FailureLimit,
		Provider: policy.Provider{Type: m.Provider.Type, Config: map[string]any{}}}
	if m.Interval != nil {
		spec.IntervalSeconds = int64(m.Interval.D() / time.Second)
	}
	p := m.Provider
	for k, v := range map[string]string{"query": p.Query, "address": p.Address, "url": p.URL, "method": p.Method, "body": p.Body} {
		if v != "" {
			spec.Provider.Config[k] = v
		}
	}
	if len(p.Headers) > 0 {
		h := map[string]any{}
		for k, v := range p.Headers {
			h[k] = v
		}
		spec.Provider.Config["headers"] = h
	}
	return spec
}
