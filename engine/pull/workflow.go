package pull

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// WorkflowAgent is the JobAgent of pull agents for the workflow
// controller: dispatching a workflow task's job stores it in Jobs
// (ports.WorkflowJobs) for a taker, with its workflow, task and, when the
// workflow runs a release, the release's target, version and workspace,
// and leaves it pending. Its takers take, heartbeat and report it through
// the Service as they do release jobs.
type WorkflowAgent struct {
	Agent
	// Jobs stores the jobs; Workflows and Releases are read for their
	// context.
	Jobs      ports.WorkflowJobs
	Workflows ports.WorkflowStore
	Releases  ports.ReleaseStore
	Clock     ports.Clock
}

var (
	_ ports.JobAgent       = (*WorkflowAgent)(nil)
	_ ports.JobCanceler    = (*WorkflowAgent)(nil)
	_ ports.JobLossChecker = (*WorkflowAgent)(nil)
)

// NewWorkflowAgent returns the workflow controller's agent serving typ
// (release.PullAgentType or release.APIAgentType).
func NewWorkflowAgent(typ string, jobs ports.WorkflowJobs, workflows ports.WorkflowStore, releases ports.ReleaseStore, clock ports.Clock) *WorkflowAgent {
	return &WorkflowAgent{Agent: NewAgent(typ), Jobs: jobs, Workflows: workflows, Releases: releases, Clock: clock}
}

// Dispatch stores the job for a taker (once per job id: a repeated
// dispatch finds it stored) and leaves it pending.
func (a *WorkflowAgent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	res, err := a.Agent.Dispatch(ctx, d)
	if err != nil {
		return res, err
	}
	row, err := a.row(ctx, d)
	if err != nil {
		return ports.JobDispatchResult{}, fmt.Errorf("workflow job %s: %w", d.Job.ID, err)
	}
	if _, _, err := a.Jobs.WorkflowJobCreate(ctx, row); err != nil {
		return ports.JobDispatchResult{}, fmt.Errorf("workflow job %s: %w", d.Job.ID, err)
	}
	return res, nil
}

// row is the stored job of d: its workflow from the dispatch context, the
// release's target, version and workspace when the workflow runs one.
func (a *WorkflowAgent) row(ctx context.Context, d ports.JobDispatch) (ports.JobRow, error) {
	dc := d.Job.DispatchContext
	wfID, _ := dc["workflow_id"].(string)
	runID, _ := dc["task_run_id"].(string)
	task, _ := dc["task"].(string)
	attempt, _ := dc["attempt"].(int)
	row := ports.JobRow{Job: d.Job, Workflow: &ports.WorkflowJobRef{ID: wfID, Task: task, TaskRunID: runID, Attempt: attempt}}
	row.Status, row.ExternalID = release.JobPending, d.Job.ID
	w, err := a.Workflows.WorkflowGet(ctx, wfID)
	if err != nil || w.ReleaseID == "" {
		return row, err
	}
	row.ReleaseID, row.TargetKey = w.ReleaseID, w.TargetKey
	rel, err := a.Releases.ReleaseGet(ctx, w.ReleaseID)
	if err != nil {
		return row, err
	}
	row.VersionID = rel.VersionID
	dep, err := a.Releases.Deployments().Get(ctx, rel.Target.DeploymentID)
	if err != nil {
		return row, err
	}
	sys, err := a.Releases.Systems().Get(ctx, dep.Value.SystemID)
	if err != nil {
		return row, err
	}
	row.Workflow.WorkspaceID = sys.Value.WorkspaceID
	return row, nil
}

// CancelJob ends a stored job cancelled, so no taker gets it and its
// taker's heartbeats are refused.
func (a *WorkflowAgent) CancelJob(ctx context.Context, c ports.JobCancel) error {
	return EndWorkflowJob(ctx, a.Jobs, c.JobID, release.JobCancelled, "cancelled: "+c.Reason, a.Clock.Now())
}

// JobLost reports a job whose last hand-out's lease ran out (ending it
// failed in the store), and otherwise when its lease runs out next.
func (a *WorkflowAgent) JobLost(ctx context.Context, jobID string, now time.Time) (string, time.Time, error) {
	row, err := a.Jobs.WorkflowJobGet(ctx, jobID)
	if errors.Is(err, ports.ErrNotFound) {
		return "", time.Time{}, nil // dispatched before workflow jobs were stored
	}
	if err != nil {
		return "", time.Time{}, err
	}
	why := row.LeaseLost(now)
	if why == "" {
		if row.Status.IsActive() && !row.LeaseUntil.IsZero() && now.Before(row.LeaseUntil) {
			return "", row.LeaseUntil, nil
		}
		return "", time.Time{}, nil
	}
	return why, time.Time{}, EndWorkflowJob(ctx, a.Jobs, jobID, release.JobFailure, why, now)
}

// EndWorkflowJob ends workflow job jobID in jobs with status and msg at
// now unless it ended already (or is not stored: a job dispatched before
// workflow jobs were stored): a report that reached the workflow
// controller by another way than its taker (an operator's, an agent's
// report by job id) ends the stored job too.
func EndWorkflowJob(ctx context.Context, jobs ports.WorkflowJobs, jobID string, status release.JobStatus, msg string, now time.Time) error {
	for range 5 {
		row, err := jobs.WorkflowJobGet(ctx, jobID)
		if errors.Is(err, ports.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !row.Status.IsActive() {
			return nil
		}
		next := row.Job
		next.Status, next.Message, next.CompletedAt = status, strings.TrimSpace(msg), now
		_, err = jobs.WorkflowJobUpdate(ctx, next, row.Version, now)
		if !errors.Is(err, ports.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("end workflow job %s: it kept changing: %w", jobID, ports.ErrConflict)
}
