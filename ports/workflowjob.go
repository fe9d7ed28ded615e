package ports

import (
	"context"
	"encoding/json"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// WorkflowJobRef says which workflow task a job runs (JobRow.Workflow):
// set on the jobs of workflow tasks, nil on the release chain's.
type WorkflowJobRef struct {
	// ID is the workflow's id.
	ID string `json:"id" doc:"the workflow's id"`
	// Task is the task's name; TaskRunID its TaskRun (the task's run of
	// one matrix item); Attempt the TaskRun's attempt the job runs.
	Task      string `json:"task" doc:"the task's name"`
	TaskRunID string `json:"task_run_id" doc:"the TaskRun's id (the task's run of one matrix item)"`
	Attempt   int    `json:"attempt" doc:"the TaskRun's attempt the job runs, from 0"`
	// WorkspaceID is the workspace of the release's deployment's system
	// when the workflow runs a release, for the workspace filter.
	WorkspaceID string `json:"workspace_id,omitempty" doc:"the workspace of the release's deployment, when the workflow runs a release"`
}

// WorkflowJobs holds the jobs of workflow tasks that pull agents take
// (release.PullAgentType): a pull agent's taker takes, heartbeats and
// reports them as it does release jobs, fenced the same way
// (release.JobTake: hand-outs, leases, the take token's hash). Implemented
// by the workflow stores. A row is a JobRow with Workflow set; when the
// workflow runs a release its ReleaseID, TargetKey and VersionID are the
// release's, else empty.
//
// Invariants (checked by porttest.WorkflowJobs):
//   - WorkflowJobCreate stores a new job at version 1 (created true); a
//     job of an id already stored is returned as stored (created false),
//     so a repeated dispatch of one attempt creates one job.
//   - WorkflowJobUpdate is compare-and-swap on Version (else ErrConflict,
//     ErrNotFound for an unknown id) and keeps the job's workflow, release
//     and creation time; it returns the new version.
//   - WorkflowJobTake hands out the oldest job, by (created_at, id), of
//     p.AgentID that is release.Job.Takeable at now, as release.Job.Taken
//     in one compare-and-swap write; ErrNotFound when there is none.
//     Concurrent takes never hand out the same hand-out of a job twice.
//   - WorkflowJobList lists jobs matching every filter given, newest first
//     by (created_at, id), below After (the workspace filter reads
//     Workflow.WorkspaceID).
type WorkflowJobs interface {
	// WorkflowJobCreate stores j (Version is set to 1) unless its id is
	// stored; it returns the stored job.
	WorkflowJobCreate(ctx context.Context, j JobRow) (JobRow, bool, error)
	// WorkflowJobGet reads one job.
	WorkflowJobGet(ctx context.Context, id string) (JobRow, error)
	// WorkflowJobUpdate writes j at the expected version, stamped now.
	WorkflowJobUpdate(ctx context.Context, j release.Job, expected int64, now time.Time) (int64, error)
	// WorkflowJobTake hands out the next takeable job of p.AgentID at now.
	WorkflowJobTake(ctx context.Context, p JobTakeParams, now time.Time) (JobRow, error)
	// WorkflowJobList lists jobs newest first; see JobListParams.
	WorkflowJobList(ctx context.Context, p JobListParams) ([]JobRow, error)
}

// ValidateWorkflowJob checks what every store requires of a workflow job.
func ValidateWorkflowJob(j *JobRow) error {
	if j.Workflow == nil {
		return release.Invalid("workflow", "is required on a workflow job")
	}
	if err := validateWorkflowID("workflow.id", j.Workflow.ID); err != nil {
		return err
	}
	if err := validateWorkflowID("workflow.task_run_id", j.Workflow.TaskRunID); err != nil {
		return err
	}
	switch {
	case j.ID == "":
		return release.Invalid("id", "is required")
	case j.JobAgentID == "":
		return release.Invalid("job_agent_id", "is required")
	case !j.Status.Valid():
		return release.Invalid("status", "unknown job status "+string(j.Status))
	}
	return nil
}

// MatchesJobList reports whether j passes p's filters (not its cursor).
func MatchesJobList(j *JobRow, p *JobListParams) bool {
	t := j.Target()
	ws := ""
	if j.Workflow != nil {
		ws = j.Workflow.WorkspaceID
	}
	for _, f := range []struct{ want, got string }{{p.JobAgentID, j.JobAgentID}, {p.DeploymentID, t.DeploymentID},
		{p.EnvironmentID, t.EnvironmentID}, {p.ResourceID, t.ResourceID}, {p.VersionID, j.VersionID}, {p.WorkspaceID, ws}} {
		if f.want != "" && f.want != f.got {
			return false
		}
	}
	if len(p.Statuses) == 0 {
		return true
	}
	for _, s := range p.Statuses {
		if s == j.Status {
			return true
		}
	}
	return false
}

// WorkflowJobChanges are the changes a workflow job write from old (nil:
// the job was just created) to next records: job.created, or job.status
// when the status moved, as JobChanges, with the workflow's id in the
// data; a workflow job never moves a target's current release. Memory
// and Postgres share this rule (Postgres in a trigger of migration 0029).
func WorkflowJobChanges(old, next *JobRow, at time.Time) []Change {
	ws := ""
	if next.Workflow != nil {
		ws = next.Workflow.WorkspaceID
	}
	var prev *release.Job
	if old != nil {
		prev = &old.Job
	}
	out := JobChanges(prev, &next.Job, ws, at)
	if len(out) == 0 {
		return nil
	}
	c := out[0]
	data := map[string]any{}
	_ = json.Unmarshal(c.Data, &data)
	if next.Workflow != nil {
		data["workflow_id"] = next.Workflow.ID
	}
	c.Data = changeData(data)
	return []Change{c}
}
