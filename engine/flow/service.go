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

// ReportJob records an agent's report on a workflow job (see JobID): a
// terminal status ends the TaskRun's attempt, with the report's outputs;
// a non-terminal one with a Lease renews the job's lease (JobLeaser).
// A report of another attempt, or on a run no longer running, is ignored;
// a job id that is not a workflow job's is ErrNotFound. A terminal report
// is read, written and followed by its wake-up in one transaction.
func (c *Controller) ReportJob(ctx context.Context, rep ports.JobReport) error {
	wfID, trID, attempt, ok := parseJobID(rep.JobID)
	if !ok {
		return fmt.Errorf("report job %s: not a workflow job: %w", rep.JobID, ports.ErrNotFound)
	}
	if !rep.Status.IsTerminal() {
		if rep.Lease > 0 {
			return c.renewLease(ctx, rep, wfID, trID)
		}
		return nil
	}
	// One transaction: the read, the write and the wake-up commit once (a
	// conflict writes nothing, so the loop may read again inside it).
	return c.inTx(ctx, func(ctx context.Context) error {
		for range 5 {
			r, err := c.Store.TaskRunGet(ctx, wfID, trID)
			if err != nil {
				return fmt.Errorf("report job %s: %w", rep.JobID, err)
			}
			if !c.reported(&r, rep, attempt) {
				return nil // stale: another attempt, or already over
			}
			if err = c.Store.TaskRunsSave(ctx, wfID, []ports.TaskRunRecord{r}); errors.Is(err, ports.ErrConflict) {
				continue
			}
			if err != nil {
				return fmt.Errorf("report job %s: %w", rep.JobID, err)
			}
			return c.wake(ctx, wfID)
		}
		return fmt.Errorf("report job %s: %w", rep.JobID, ports.ErrConflict)
	})
}

// reported applies a terminal report to its run as read, and says whether
// it applies: false for another attempt's or a run no longer running.
func (c *Controller) reported(r *ports.TaskRunRecord, rep ports.JobReport, attempt int) bool {
	if r.Attempt != attempt || r.Phase != workflow.TaskRunning || (r.JobID != "" && r.JobID != rep.JobID) {
		return false
	}
	// The dispatching pass recorded the job id before sending it (see
	// outbox.go); a record without one is older than that rule.
	r.JobID = rep.JobID
	if r.ExternalID == "" {
		r.ExternalID = rep.ExternalID
	}
	at := rep.At
	if at.IsZero() {
		at = c.Clock.Now()
	}
	end(r, jobPhase(rep.Status), at, rep.Message)
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

// Status reads a workflow and its TaskRuns; dispatch configs are left out
// (they may hold secret references).
func (c *Controller) Status(ctx context.Context, id string) (Status, error) {
	w, err := c.Store.WorkflowGet(ctx, id)
	if err != nil {
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
