package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// MaxIDLen is the longest workflow id Start accepts.
const MaxIDLen = 128

// idRe is the shape of a workflow id: no '/' (job ids are
// wf/WORKFLOW/TASKRUN/ATTEMPT), no space or control character.
var idRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidateID checks a workflow id given to Start: letters, digits, '.',
// '_' and '-', starting with a letter or digit, at most MaxIDLen bytes.
// The error names the field "id" and quotes (escaped) at most 64 bytes of
// the id.
func ValidateID(id string) error {
	if len(id) <= MaxIDLen && idRe.MatchString(id) {
		return nil
	}
	shown := id
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	return release.Invalid("id", fmt.Sprintf("%q (%d bytes) is not a valid workflow id: letters, digits, '.', '_' and '-', starting with a letter or digit, at most %d bytes", shown, len(id), MaxIDLen))
}

// StartParams start a workflow.
type StartParams struct {
	// ID names the workflow; empty: the template name and a time stamp.
	ID string
	// Template is the template document (YAML or JSON): a catalog
	// revision's content, pinned in the workflow as it is now.
	Template []byte
	// TemplateName and TemplateRevision name the catalog revision
	// (TemplateName empty: the template's metadata.name; revision 0: a
	// template given inline).
	TemplateName     string
	TemplateRevision int
	// Parameters are explicit values; VersionConfig and Variables are the
	// lower-priority sources (workflow.Sources).
	Parameters    map[string]any
	VersionConfig map[string]any
	// Variables are readable as variables.*; sensitive ones keep their
	// reference (never a plain value) and show as Redacted in stored
	// configs.
	Variables map[string]release.Value
	// Release is readable as release.*; ReleaseID and TargetKey tie a
	// release-triggered workflow to its release.
	Release              map[string]any
	ReleaseID, TargetKey string
	// JobID is the release chain's job a release-triggered workflow runs:
	// the controller reports the workflow's end to it.
	JobID string
	// Trigger is the hook or schedule that starts the workflow, if any.
	Trigger *ports.WorkflowTrigger
	// Inputs are the candidates of matrix sources; the lists left nil that
	// a matrix source needs are read from the release store within Scope.
	Inputs workflow.Inputs
	Scope  InputScope
}

// Start validates the id (ValidateID), the template and the parameters (every problem at once,
// as a *workflow.InvalidError), expands the matrices, stores the workflow
// pinned to the template and enqueues its first pass. Nothing is stored
// when anything is wrong.
func (c *Controller) Start(ctx context.Context, p StartParams) (ports.WorkflowRecord, error) {
	if p.ID != "" {
		if err := ValidateID(p.ID); err != nil {
			return ports.WorkflowRecord{}, fmt.Errorf("start workflow: %w", err)
		}
	}
	t, err := workflow.Load(p.Template)
	if err != nil {
		return ports.WorkflowRecord{}, err
	}
	vars, secrets, plain := map[string]any{}, []string(nil), map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(p.Variables)) {
		v := p.Variables[k]
		switch v.Kind() {
		case release.ValueSensitive:
			vars[k], secrets = v.Sensitive, append(secrets, k)
			plain[k] = workflow.SecretValue{Value: v.Sensitive}
		case release.ValueReference:
			vars[k], plain[k] = v.Reference, v.Reference
		default:
			vars[k], plain[k] = v.Literal, v.Literal
		}
	}
	params, problems := workflow.ResolveParameters(t.Spec.Parameters, workflow.Sources{
		Explicit: p.Parameters, VersionConfig: p.VersionConfig, DeploymentVariables: plain})
	inputs, err := c.loadInputs(ctx, t, p.Inputs, p.Scope)
	if err != nil {
		return ports.WorkflowRecord{}, fmt.Errorf("start workflow: %w", err)
	}
	matrix := map[string][]any{}
	for i := range t.Spec.Parameters {
		par := &t.Spec.Parameters[i]
		if par.Type != workflow.TypeMatrix {
			continue
		}
		items, err := workflow.ExpandMatrix(par, inputs)
		if err != nil {
			problems = append(problems, workflow.Problem{Path: "parameters." + par.Name, Message: err.Error()})
			continue
		}
		matrix[par.Name] = items
	}
	if len(problems) > 0 {
		return ports.WorkflowRecord{}, &workflow.InvalidError{Problems: problems}
	}
	doc, err := json.Marshal(t)
	if err != nil {
		return ports.WorkflowRecord{}, fmt.Errorf("start workflow: encode template: %w", err)
	}
	now := c.Clock.Now()
	if p.TemplateName == "" {
		p.TemplateName = t.Metadata.Name
	}
	w := ports.WorkflowRecord{ID: p.ID, Name: t.Metadata.Name, TemplateName: p.TemplateName, TemplateRevision: p.TemplateRevision, JobID: p.JobID,
		Template: doc, Parameters: redact(params), Matrix: matrix, Release: p.Release, Variables: vars, Secrets: secrets,
		ReleaseID: p.ReleaseID, TargetKey: p.TargetKey, Trigger: p.Trigger, Phase: workflow.WorkflowPending, CreatedAt: now}
	if w.ID == "" {
		w.ID = t.Metadata.Name + "-" + strconv.FormatInt(now.UnixNano(), 36)
	}
	if err := c.Store.WorkflowCreate(ctx, w); err != nil {
		return ports.WorkflowRecord{}, fmt.Errorf("start workflow: %w", err)
	}
	w.Version = 1
	return w, c.wake(ctx, w.ID)
}

// redact replaces secret parameter values by workflow.Redacted for storage.
func redact(params map[string]any) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		if _, ok := v.(workflow.SecretValue); ok {
			v = workflow.Redacted
		}
		out[k] = v
	}
	return out
}

// Cancel requests a workflow's cancellation: nothing new starts, what runs
// is cancelled, and it ends Cancelled. Cancelling a finished workflow
// changes nothing.
func (c *Controller) Cancel(ctx context.Context, id string) error {
	for range 5 {
		w, err := c.Store.WorkflowGet(ctx, id)
		if err != nil {
			return fmt.Errorf("cancel workflow %s: %w", id, err)
		}
		if w.Phase.Terminal() || w.CancelRequested {
			return nil
		}
		w.CancelRequested = true
		if _, err = c.Store.WorkflowUpdate(ctx, w, w.Version); errors.Is(err, ports.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cancel workflow %s: %w", id, err)
		}
		return c.wake(ctx, id)
	}
	return fmt.Errorf("cancel workflow %s: %w", id, ports.ErrConflict)
}

// Approve records user's approval of a running approval task's run.
// Approving twice counts once; a run that is not a running approval is
// invalid input.
func (c *Controller) Approve(ctx context.Context, workflowID, taskRunID, user string) error {
	op := "approve " + workflowID + "/" + taskRunID
	if user == "" {
		return fmt.Errorf("%s: %w", op, release.Invalid("user", "is required"))
	}
	for range 5 {
		r, err := c.Store.TaskRunGet(ctx, workflowID, taskRunID)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if r.Type != workflow.TaskApproval {
			return fmt.Errorf("%s: %w", op, release.Invalid("task_run", "is a "+string(r.Type)+" task, not an approval"))
		}
		if r.Phase != workflow.TaskRunning {
			return fmt.Errorf("%s: %w", op, release.Invalid("task_run", "is "+string(r.Phase)+", not waiting for approval"))
		}
		if slices.Contains(r.ApprovedBy, user) {
			return nil
		}
		r.ApprovedBy = append(r.ApprovedBy, user)
		if err = c.Store.TaskRunsSave(ctx, workflowID, []ports.TaskRunRecord{r}); errors.Is(err, ports.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return c.wake(ctx, workflowID)
	}
	return fmt.Errorf("%s: %w", op, ports.ErrConflict)
}

// ReportJob records an agent's report on a workflow job (see JobID) in
// the workflow's inbox: the workflow's next pass ends the TaskRun's
// attempt with a terminal one (outputs included) and extends the job's
// lease by a non-terminal one with a Lease (JobLeaser), or drops it when
// it is another attempt's or the run is no longer running; other
// non-terminal reports change nothing. A job id that is not a workflow
// job's, or names no TaskRun, is ErrNotFound. Concurrent reports are
// stored together: one insert for the batch (taking no lock on any
// TaskRun) and, in the same transaction, one wake-up enqueue per workflow
// with a terminal report (a renewal needs no pass before the lease's end,
// when its workflow has one due anyway).
func (c *Controller) ReportJob(ctx context.Context, rep ports.JobReport) error {
	wfID, trID, _, ok := parseJobID(rep.JobID)
	if !ok {
		return fmt.Errorf("report job %s: not a workflow job: %w", rep.JobID, ports.ErrNotFound)
	}
	if !rep.Status.IsTerminal() && rep.Lease <= 0 {
		return nil
	}
	r := ports.TaskRunReport{WorkflowID: wfID, TaskRunID: trID, JobID: rep.JobID, ExternalID: rep.ExternalID,
		Status: rep.Status, Message: rep.Message, At: rep.At, Outputs: rep.Outputs}
	if r.At.IsZero() {
		r.At = c.Clock.Now()
	}
	if r.Renewal() {
		r.ExternalID, r.Message, r.Outputs, r.LeaseUntil = "", "", nil, r.At.Add(rep.Lease)
	}
	// Refused alone, so that it fails no other report of its batch.
	if err := ports.ValidateTaskRunReport(&r); err != nil {
		return fmt.Errorf("report job %s: %w", rep.JobID, err)
	}
	if _, err := release.EncodeText(&r); err != nil {
		return fmt.Errorf("report job %s: %w", rep.JobID, err)
	}
	c.reportsOnce.Do(func() { c.reports = engine.NewCoalescer(c.storeReports) })
	return c.reports.Do(ctx, r)
}

// storeReports stores a batch of reports in their workflows' inboxes and
// wakes the workflows, in one transaction.
func (c *Controller) storeReports(ctx context.Context, reps []ports.TaskRunReport) []error {
	errs := make([]error, len(reps))
	err := c.inTx(ctx, func(ctx context.Context) error {
		stored, err := c.Store.ReportsAdd(ctx, reps)
		if err != nil {
			return err
		}
		var wake []ports.EnqueueParams
		seen := map[string]bool{}
		for i, ok := range stored {
			r := &reps[i]
			if !ok {
				errs[i] = fmt.Errorf("report job %s: task run %s/%s: %w", r.JobID, r.WorkflowID, r.TaskRunID, ports.ErrNotFound)
				continue
			}
			if !r.Renewal() && !seen[r.WorkflowID] {
				seen[r.WorkflowID] = true
				wake = append(wake, ports.EnqueueParams{Key: Key(r.WorkflowID)})
			}
		}
		if len(wake) == 0 {
			return nil
		}
		if err := c.Queue.WorkEnqueue(ctx, wake...); err != nil {
			return fmt.Errorf("wake %d workflows: %w", len(wake), err)
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("report job %s: %w", reps[i].JobID, err)
		}
	}
	return errs
}

// reportedOn applies a report to its run, and says whether it applies:
// false for another attempt's, a run no longer running, or a renewal
// that extends nothing (no lease held, or not beyond it).
func reportedOn(r *ports.TaskRunRecord, rep *ports.TaskRunReport, attempt int) bool {
	if r.Attempt != attempt || r.Phase != workflow.TaskRunning || (r.JobID != "" && r.JobID != rep.JobID) {
		return false
	}
	if rep.Renewal() {
		d := r.Delivery
		if r.JobID != rep.JobID || d == nil || d.Key != rep.JobID || d.LeaseUntil.IsZero() || !rep.LeaseUntil.After(d.LeaseUntil) {
			return false
		}
		next := *d
		next.LeaseUntil = rep.LeaseUntil
		r.Delivery = &next
		return true
	}
	// The dispatching pass recorded the job id before sending it (see
	// outbox.go); a record without one is older than that rule.
	r.JobID = rep.JobID
	if r.ExternalID == "" {
		r.ExternalID = rep.ExternalID
	}
	end(r, jobPhase(rep.Status), rep.At, rep.Message)
	if rep.Outputs != nil {
		r.Outputs = rep.Outputs
	}
	return true
}

// Status is a workflow with its TaskRuns, for display.
type Status struct {
	Workflow ports.WorkflowRecord  `json:"workflow"`
	TaskRuns []ports.TaskRunRecord `json:"taskRuns"`
}

// Status reads a workflow, its template, its matrix and its TaskRuns; dispatch configs
// are left out (they may hold secret references).
func (c *Controller) Status(ctx context.Context, id string) (Status, error) {
	w, err := c.Store.WorkflowGet(ctx, id)
	if err != nil {
		return Status{}, fmt.Errorf("workflow status %s: %w", id, err)
	}
	if w.Template, err = c.Store.WorkflowTemplate(ctx, id); err != nil {
		return Status{}, fmt.Errorf("workflow status %s: %w", id, err)
	}
	if w.Matrix, err = c.Store.WorkflowMatrix(ctx, id); err != nil {
		return Status{}, fmt.Errorf("workflow status %s: %w", id, err)
	}
	runs, err := c.Store.TaskRunsList(ctx, id)
	if err != nil {
		return Status{}, fmt.Errorf("workflow status %s: %w", id, err)
	}
	for i := range runs {
		runs[i].Dispatch = nil
	}
	return Status{Workflow: w, TaskRuns: runs}, nil
}

// JobAgentOf returns the id of the job agent a workflow job (see JobID)
// goes to: its task's jobAgentRef. A job id that is not a workflow job's,
// or names no TaskRun, is ErrNotFound.
func (c *Controller) JobAgentOf(ctx context.Context, jobID string) (string, error) {
	wfID, trID, _, ok := parseJobID(jobID)
	if !ok {
		return "", fmt.Errorf("job %s: not a workflow job: %w", jobID, ports.ErrNotFound)
	}
	w, err := c.Store.WorkflowGet(ctx, wfID)
	if err != nil {
		return "", fmt.Errorf("job %s: %w", jobID, err)
	}
	r, err := c.Store.TaskRunGet(ctx, wfID, trID)
	if err != nil {
		return "", fmt.Errorf("job %s: %w", jobID, err)
	}
	t, err := c.template(ctx, w.ID)
	if err != nil {
		return "", fmt.Errorf("job %s: %w", jobID, err)
	}
	for i := range t.Spec.Tasks {
		if t.Spec.Tasks[i].Name == r.Task {
			return t.Spec.Tasks[i].JobAgentRef, nil
		}
	}
	return "", fmt.Errorf("job %s: task %s is not in its template: %w", jobID, r.Task, ports.ErrNotFound)
}

// CancelJob cancels the job of one TaskRun's attempt by its id (JobID),
// as an operator by: the job's agent is asked to stop it (when it can,
// ports.JobCanceler) and the job is reported cancelled, so its TaskRun
// ends Cancelled without a retry. The workflow itself is not cancelled:
// its failure policy decides, as for any cancelled task (the task's
// dependents are cancelled, other branches run on, and the workflow ends
// Failed). A job id of no TaskRun, or of an attempt the TaskRun no longer
// runs, is ErrNotFound; a job that ended is invalid input.
func (c *Controller) CancelJob(ctx context.Context, jobID, by string) error {
	op := "cancel job " + jobID
	wfID, trID, attempt, ok := parseJobID(jobID)
	if !ok {
		return fmt.Errorf("%s: not a workflow job: %w", op, ports.ErrNotFound)
	}
	w, err := c.Store.WorkflowGet(ctx, wfID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	r, err := c.Store.TaskRunGet(ctx, wfID, trID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch {
	case r.Type != workflow.TaskJob || r.JobID == "" || attempt > r.Attempt:
		return fmt.Errorf("%s: task run %s/%s runs no job: %w", op, wfID, trID, ports.ErrNotFound)
	case r.JobID != jobID || r.Phase != workflow.TaskRunning:
		return fmt.Errorf("%s: %w", op, release.Invalid("status", "job has already ended (its task run is "+string(r.Phase)+")"))
	}
	t, err := c.template(ctx, w.ID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	msg := "cancelled by " + by
	stop := r
	stop.Message = "job " + msg
	c.stopJobs(ctx, &w, t, []ports.TaskRunRecord{stop})
	return c.ReportJob(ctx, ports.JobReport{JobID: jobID, Status: release.JobCancelled, Message: msg})
}
