package ports

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// WorkflowRecord is a stored workflow instance: the template revision it
// was started from (pinned: its document is kept, so later revisions never
// change a running workflow), its resolved inputs and its phase.
type WorkflowRecord struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// TemplateName and TemplateRevision say which catalog revision it was
	// started from (revision 0: given inline); Template is that revision's
	// document, as JSON. It may grow with the fan-out (a list source's
	// items) and never changes, so the stores keep it apart, as the
	// Matrix: WorkflowCreate stores it, WorkflowTemplate reads it, and the
	// other reads leave it nil.
	TemplateName     string          `json:"template_name"`
	TemplateRevision int             `json:"template_revision,omitempty"`
	Template         json.RawMessage `json:"template,omitempty"`
	// Parameters are the resolved value parameters; a secret is kept as
	// workflow.Redacted here and never in plain text.
	Parameters map[string]any `json:"parameters,omitempty"`
	// Matrix holds each matrix parameter's items, expanded at creation.
	// It grows with the fan-out and never changes, so the stores keep it
	// apart from the rest: WorkflowCreate stores it, WorkflowMatrix reads
	// it, and the other reads leave it nil (WorkflowUpdate ignores it).
	Matrix map[string][]any `json:"matrix,omitempty"`
	// Release and Variables are readable in the template as release.* and
	// variables.*; a sensitive variable holds its reference
	// (release.SecretRef), never a plain value.
	Release   map[string]any `json:"release,omitempty"`
	Variables map[string]any `json:"variables,omitempty"`
	// Secrets names the variables that are sensitive: the scheduler
	// treats them as workflow.SecretValue (stored configs show Redacted).
	Secrets []string `json:"secrets,omitempty"`
	// ReleaseID and TargetKey are set for a release-triggered workflow.
	ReleaseID string `json:"release_id,omitempty"`
	TargetKey string `json:"target_key,omitempty"`
	// JobID is the release chain's job the workflow runs, reported when
	// the workflow ends.
	JobID string `json:"job_id,omitempty"`
	// Trigger says which hook or schedule started the workflow; nil for
	// one started by a user or a release.
	Trigger *WorkflowTrigger `json:"trigger,omitempty"`

	Phase           workflow.WorkflowPhase `json:"phase"`
	Message         string                 `json:"message,omitempty"`
	CancelRequested bool                   `json:"cancel_requested,omitempty"`
	CreatedAt       time.Time              `json:"created_at"`
	StartedAt       time.Time              `json:"started_at,omitzero"`
	FinishedAt      time.Time              `json:"finished_at,omitzero"`
	// Version is the compare-and-swap version (1 after creation).
	Version int64 `json:"version"`
}

// TaskRunRecord is a stored TaskRun with what its executor needs.
type TaskRunRecord struct {
	workflow.TaskRun
	WorkflowID string            `json:"workflow_id"`
	Type       workflow.TaskType `json:"type"`
	// Config is the resolved config as shown and logged, secrets Redacted.
	Config map[string]any `json:"config,omitempty"`
	// Dispatch is the resolved config handed to the executor: secrets are
	// in it as their references (release.SecretRef), never in plain text.
	Dispatch map[string]any `json:"dispatch,omitempty"`
	// ExternalID is the agent's name for the current attempt's job.
	ExternalID string `json:"external_id,omitempty"`
	// ApprovedBy lists the users who approved an approval task's run.
	ApprovedBy []string `json:"approved_by,omitempty"`
	// Delivery is the current attempt's send (a job handed to its agent,
	// a webhook request), recorded before it is made; nil before that.
	Delivery *Delivery `json:"delivery,omitempty"`
	// Version is the compare-and-swap version: 0 on a record not stored
	// yet, n after its n-th write.
	Version int64 `json:"version"`
}

// Delivery is the outbox entry of one attempt's send: the workflow
// controller records it in the TaskRun's compare-and-swap write before it
// sends, and only the pass whose write recorded it sends, so a key is sent
// at most once by a live pass (a pass that died mid-send leaves SentAt
// zero; see engine/flow for what the next pass does).
type Delivery struct {
	// Key is the send's idempotency key: the job id of a job, the
	// Idempotency-Key header of a webhook request.
	Key        string    `json:"key"`
	RecordedAt time.Time `json:"recorded_at"`
	// SentAt is when the agent or the webhook's server answered; zero while
	// the send is in flight, or when the pass that made it died.
	SentAt time.Time `json:"sent_at,omitzero"`
	// LeaseUntil is set for a job of an in-process agent (JobLeaser): the
	// agent renews it while the job runs, and once it has passed the job
	// is lost with the process that ran it.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

// WorkflowTrigger is what started a workflow besides a user or a release:
// an event (a template's hook) or a scheduled time (its schedule).
type WorkflowTrigger struct {
	// Key groups the workflows one trigger of one template started, for
	// WorkflowsUnfinished: TriggerKey(kind, template).
	Key string `json:"key"`
	// Kind is TriggerEvent or TriggerSchedule.
	Kind string `json:"kind"`
	// Event is the event a hook started the workflow on.
	Event *Event `json:"event,omitempty"`
	// Schedule, Timezone and ScheduledAt are the schedule and the fire
	// time a scheduled workflow was started for.
	Schedule    string    `json:"schedule,omitempty"`
	Timezone    string    `json:"timezone,omitempty"`
	ScheduledAt time.Time `json:"scheduled_at,omitzero"`
}

// The trigger kinds.
const (
	TriggerEvent    = "event"
	TriggerSchedule = "schedule"
)

// TriggerKey is the WorkflowTrigger.Key of the workflows a template's
// trigger of kind starts; template is the template's catalog name.
func TriggerKey(kind, template string) string { return kind + ":" + template }

// WorkflowStore stores workflow instances and their TaskRuns.
//
// Invariants (checked by porttest.WorkflowStore):
//   - WorkflowCreate stores a new workflow at version 1; an existing id is
//     ErrConflict. WorkflowUpdate is compare-and-swap on Version and never
//     changes the pinned template, the matrix or the creation time.
//   - The pinned template and the matrix are stored apart from the record:
//     WorkflowGet, WorkflowList and WorkflowsUnfinished return records with
//     a nil Template and Matrix, and only WorkflowTemplate and
//     WorkflowMatrix read them (the matrix is nil when the workflow has
//     none), so a pass over a workflow of many items neither reads nor
//     rewrites them.
//   - TaskRunsSave writes a batch of one workflow's TaskRuns atomically:
//     a record at Version 0 is created (an existing id is ErrConflict),
//     any other is updated only at that stored Version (else ErrConflict,
//     and nothing of the batch is written). Written records are at
//     Version+1.
//   - TaskRunWrites counts every TaskRun created or written (the sum of
//     the workflow's TaskRun versions): it grows with each write, so a
//     reader that kept the TaskRuns of one count knows they are current
//     while it is unchanged.
//   - ReportsAdd appends agents' reports (terminal ones and lease
//     renewals) to their workflows' inboxes in
//     one atomic write, taking no lock on any TaskRun; a report whose
//     TaskRun does not exist is not stored (stored[i] false), the others
//     are. Reports lists a workflow's inbox in Seq order; ReportsDone
//     removes the reports named, and joins the caller's transaction when
//     the store is a Transactor, so a pass takes out what it applied in
//     the write that applied it.
//   - Lists are in id order; reads return copies.
type WorkflowStore interface {
	// WorkflowCreate stores w (Version is set to 1).
	WorkflowCreate(ctx context.Context, w WorkflowRecord) error
	// WorkflowGet reads one workflow.
	WorkflowGet(ctx context.Context, id string) (WorkflowRecord, error)
	// WorkflowUpdate writes w if the stored version is expected and returns
	// the new version.
	WorkflowUpdate(ctx context.Context, w WorkflowRecord, expected int64) (int64, error)
	// WorkflowTemplate reads the pinned template a workflow was created
	// with; ErrNotFound for an unknown workflow.
	WorkflowTemplate(ctx context.Context, id string) (json.RawMessage, error)
	// WorkflowMatrix reads the matrix a workflow was created with (nil
	// when it has none); ErrNotFound for an unknown workflow.
	WorkflowMatrix(ctx context.Context, id string) (map[string][]any, error)
	// WorkflowList lists workflows by id, at most limit after afterID.
	WorkflowList(ctx context.Context, afterID string, limit int) ([]WorkflowRecord, error)
	// WorkflowsUnfinished lists the Pending and Running workflows whose
	// Trigger.Key is triggerKey, by id (a schedule's concurrency policy).
	WorkflowsUnfinished(ctx context.Context, triggerKey string) ([]WorkflowRecord, error)
	// TaskRunsList lists a workflow's TaskRuns by id.
	TaskRunsList(ctx context.Context, workflowID string) ([]TaskRunRecord, error)
	// TaskRunGet reads one TaskRun.
	TaskRunGet(ctx context.Context, workflowID, id string) (TaskRunRecord, error)
	// TaskRunsSave creates and updates TaskRuns of one workflow in one
	// atomic step; see the invariants.
	TaskRunsSave(ctx context.Context, workflowID string, runs []TaskRunRecord) error
	// TaskRunWrites is the number of TaskRun writes of a workflow so far
	// (the sum of its TaskRuns' versions); ErrNotFound for an unknown
	// workflow.
	TaskRunWrites(ctx context.Context, workflowID string) (int64, error)
	// ReportsAdd stores reports in their workflows' inboxes (Seq is set by
	// the store) and says which were stored: those whose TaskRun exists.
	ReportsAdd(ctx context.Context, reports []TaskRunReport) (stored []bool, err error)
	// Reports lists a workflow's inbox in Seq order.
	Reports(ctx context.Context, workflowID string) ([]TaskRunReport, error)
	// ReportsDone removes the workflow's reports of the given Seqs (a Seq
	// no longer there is no error).
	ReportsDone(ctx context.Context, workflowID string, seqs []int64) error
}

// TaskRunReport is an agent's report on a TaskRun's job, waiting in its
// workflow's inbox: a terminal one (Status) ends the job's attempt, a
// lease renewal (a non-terminal Status with LeaseUntil, from a JobLeaser)
// extends its lease. The workflow's next pass applies it to the TaskRun
// (or finds it stale: another attempt's, or a run already over) and takes
// it out in the same write. Reports are inserted, never locking a
// TaskRun, so agents' reports can be stored in batches across TaskRuns
// and workflows while passes write, and only passes (and approvals)
// write TaskRuns.
type TaskRunReport struct {
	// Seq orders a workflow's inbox; set by ReportsAdd.
	Seq        int64  `json:"seq"`
	WorkflowID string `json:"workflow_id"`
	TaskRunID  string `json:"task_run_id"`
	// JobID names the job and its attempt (engine/flow.JobID).
	JobID      string            `json:"job_id"`
	ExternalID string            `json:"external_id,omitempty"`
	Status     release.JobStatus `json:"status"`
	Message    string            `json:"message,omitempty"`
	// At is when the status was reached (the report's At, else the time
	// it was received).
	At      time.Time      `json:"at"`
	Outputs map[string]any `json:"outputs,omitempty"`
	// LeaseUntil is the end of the job's lease a renewal asks for (At
	// plus the report's Lease); zero on a terminal report.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

// Renewal reports whether r renews a job's lease rather than ending it.
func (r *TaskRunReport) Renewal() bool { return !r.Status.IsTerminal() }

// ValidateTaskRunReport checks what every store requires of a report;
// the store then refuses a NUL in its encoding (release.CheckTextJSON).
func ValidateTaskRunReport(r *TaskRunReport) error {
	if err := validateWorkflowID("workflow_id", r.WorkflowID); err != nil {
		return err
	}
	if err := validateWorkflowID("task_run_id", r.TaskRunID); err != nil {
		return err
	}
	if r.JobID == "" {
		return release.Invalid("job_id", "is required")
	}
	switch {
	case !r.Status.Valid():
		return release.Invalid("status", strconv.Quote(string(r.Status))+" is not a job status")
	case !r.Status.IsTerminal() && r.LeaseUntil.IsZero():
		return release.Invalid("status", strconv.Quote(string(r.Status))+" is not a terminal job status, and no lease is renewed")
	case r.Status.IsTerminal() && !r.LeaseUntil.IsZero():
		return release.Invalid("lease_until", "is set on a terminal report")
	}
	return nil
}

// ValidateNewWorkflow checks what every store requires of a workflow
// record to create: ValidateWorkflow's checks and a template.
func ValidateNewWorkflow(w *WorkflowRecord) error {
	if err := validateWorkflowID("id", w.ID); err != nil {
		return err
	}
	if len(w.Template) == 0 {
		return release.Invalid("template", "is required")
	}
	return ValidateWorkflow(w)
}

// ValidateWorkflow checks what every store requires of a workflow record
// to write (an update needs no template: the pinned one is kept); the
// store then refuses a NUL in its encoding (release.CheckTextJSON).
func ValidateWorkflow(w *WorkflowRecord) error {
	if err := validateWorkflowID("id", w.ID); err != nil {
		return err
	}
	switch w.Phase {
	case workflow.WorkflowPending, workflow.WorkflowRunning, workflow.WorkflowSucceeded, workflow.WorkflowFailed, workflow.WorkflowCancelled:
	default:
		return release.Invalid("phase", "unknown workflow phase "+strconv.Quote(string(w.Phase)))
	}
	return nil
}

// EncodedWorkflow is a workflow record encoded for a store: the record
// without its template and matrix, which the store keeps apart (see
// WorkflowStore), and those two.
type EncodedWorkflow struct {
	Doc, Template []byte
	// Matrix is nil when the workflow has none.
	Matrix []byte
}

// EncodeWorkflow encodes a workflow record for a store. A NUL in any part
// is invalid input naming its field (release.CheckTextJSON).
func EncodeWorkflow(w *WorkflowRecord) (EncodedWorkflow, error) {
	var enc EncodedWorkflow
	rest := *w
	rest.Template, rest.Matrix = nil, nil
	var err error
	if enc.Doc, err = release.EncodeText(&rest); err != nil {
		return enc, err
	}
	if enc.Template, err = encodePart("template", w.Template); err != nil {
		return enc, err
	}
	if len(w.Matrix) > 0 {
		enc.Matrix, err = encodePart("matrix", w.Matrix)
	}
	return enc, err
}

// encodePart is release.EncodeText of a record's field, a NUL's path
// under the field's name.
func encodePart(field string, v any) ([]byte, error) {
	b, err := release.EncodeText(v)
	if fe, ok := errors.AsType[*release.FieldError](err); ok {
		fe.Field = strings.TrimSuffix(release.Field(field, fe.Field), ".")
	}
	return b, err
}

// ValidateTaskRun checks what every store requires of a TaskRun record;
// the store then refuses a NUL in its encoding (release.CheckTextJSON).
func ValidateTaskRun(workflowID string, r *TaskRunRecord) error {
	if err := validateWorkflowID("id", r.ID); err != nil {
		return err
	}
	if r.WorkflowID != workflowID {
		return release.Invalid("workflow_id", "is "+strconv.Quote(r.WorkflowID)+", not the batch's "+strconv.Quote(workflowID))
	}
	if r.Version < 0 {
		return release.Invalid("version", "must not be negative")
	}
	return nil
}

// validateWorkflowID refuses empty ids and ids with "/" (job ids join
// workflow and TaskRun ids with it), white space or NUL.
func validateWorkflowID(field, id string) error {
	if id == "" {
		return release.Invalid(field, "is required")
	}
	if strings.ContainsAny(id, "/ \t\r\n\x00") {
		return release.Invalid(field, "must not contain '/', white space or NUL")
	}
	return nil
}
