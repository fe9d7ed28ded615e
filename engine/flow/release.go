package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// ReleaseWorkflowID is the id of the workflow that runs a release's job:
// one workflow per job, so a re-dispatched job finds the workflow it
// started.
func ReleaseWorkflowID(jobID string) string { return "release-" + jobID }

// ReleaseAgent returns the built-in job agent of release-triggered
// workflows (type release.WorkflowAgentType). The chain hands it the job
// of each release whose deployment names a WorkflowTemplate; it starts
// one workflow for that job from the latest published revision of the
// template the deployment sees (deployment → system → workspace), pinned
// for the workflow's life. When the workflow ends, the controller reports
// the job to Jobs: Succeeded is successful, Failed a failure, Cancelled
// cancelled.
//
// Parameters come from the version's config and the release's variables
// (explicit ones have no source here); release.* holds the release with
// its version, deployment, environment and resource; matrix sources read
// the release's workspace and system.
func (c *Controller) ReleaseAgent() ports.JobAgent { return releaseAgent{c} }

type releaseAgent struct{ c *Controller }

func (releaseAgent) Type() string { return release.WorkflowAgentType }

// Dispatch starts the job's workflow once; a second dispatch of the job
// returns the workflow's state. A missing template or parameters the
// template refuses are invalid (no retry helps): the chain ends the job.
func (a releaseAgent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	c := a.c
	id := ReleaseWorkflowID(d.Job.ID)
	if w, err := c.Store.WorkflowGet(ctx, id); err == nil {
		return dispatched(&w), nil
	} else if !errors.Is(err, ports.ErrNotFound) {
		return ports.JobDispatchResult{}, fmt.Errorf("workflow of job %s: %w", d.Job.ID, err)
	}
	rev, err := c.releaseTemplate(ctx, &d.Deployment)
	if err != nil {
		return ports.JobDispatchResult{}, err
	}
	w, err := c.Start(ctx, StartParams{ID: id, Template: rev.Content, TemplateRevision: rev.Revision, TemplateName: rev.Name,
		VersionConfig: d.Version.Config, Variables: d.Release.Variables, Release: releaseContext(&d),
		ReleaseID: d.Release.ID, TargetKey: d.Release.Target.Key(), JobID: d.Job.ID,
		Scope: InputScope{WorkspaceID: d.Resource.WorkspaceID, SystemID: d.Deployment.SystemID}})
	var invalid *workflow.InvalidError
	var field *release.FieldError
	switch {
	case errors.As(err, &invalid), errors.As(err, &field):
		return ports.JobDispatchResult{}, release.Invalid("workflow_template", rev.Name+" revision "+fmt.Sprint(rev.Revision)+": "+err.Error())
	case errors.Is(err, ports.ErrConflict):
		// A concurrent dispatch of the same job started it.
		if w, err = c.Store.WorkflowGet(ctx, id); err != nil {
			return ports.JobDispatchResult{}, fmt.Errorf("workflow of job %s: %w", d.Job.ID, err)
		}
	case err != nil:
		return ports.JobDispatchResult{}, err
	}
	return dispatched(&w), nil
}

var _ ports.JobCanceler = releaseAgent{}

// CancelJob cancels the job's workflow (the chain timed the job out);
// a job without a workflow has nothing to cancel.
func (a releaseAgent) CancelJob(ctx context.Context, c ports.JobCancel) error {
	err := a.c.Cancel(ctx, ReleaseWorkflowID(c.JobID))
	if errors.Is(err, ports.ErrNotFound) {
		return nil
	}
	return err
}

// dispatched is the job's state as its workflow's.
func dispatched(w *ports.WorkflowRecord) ports.JobDispatchResult {
	res := ports.JobDispatchResult{ExternalID: w.ID, Status: release.JobInProgress,
		Message: "workflow " + w.ID + " from " + w.TemplateName + " revision " + fmt.Sprint(w.TemplateRevision)}
	if w.Phase.Terminal() {
		res.Status, res.Message = jobStatus(w.Phase), "workflow "+w.ID+" "+string(w.Phase)+": "+w.Message
	}
	return res
}

// releaseTemplate is the latest published revision of the template the
// deployment names, from the most specific scope that has one.
func (c *Controller) releaseTemplate(ctx context.Context, dep *release.Deployment) (ports.Revision, error) {
	ref := dep.WorkflowTemplate
	if ref == nil {
		return ports.Revision{}, release.Invalid("workflow_template", "deployment "+dep.ID+" names no workflow template")
	}
	if c.Catalog == nil {
		return ports.Revision{}, release.Invalid("workflow_template", "no template catalog is configured")
	}
	lookups, err := workflow.Lookups(ref.Name, dep.ID, dep.SystemID, workflow.Scope(ref.Scope))
	if err != nil {
		return ports.Revision{}, release.Invalid("workflow_template.scope", err.Error())
	}
	var found []workflow.TemplateRef
	revs := map[string]ports.Revision{}
	for _, l := range lookups {
		rev, err := c.Catalog.CatalogLatestPublished(ctx, revision.KindWorkflowTemplate, l.ID)
		if errors.Is(err, ports.ErrNotFound) {
			continue
		}
		if err != nil {
			return ports.Revision{}, fmt.Errorf("workflow template %s: %w", l.ID, err)
		}
		found, revs[l.ID] = append(found, l), rev
	}
	pick, err := workflow.Resolve(ref.Name, dep.ID, dep.SystemID, found...)
	if err != nil {
		return ports.Revision{}, release.Invalid("workflow_template", err.Error()+" (no published revision)")
	}
	return revs[pick.ID], nil
}

// releaseContext is what a release-triggered workflow reads as release.*.
func releaseContext(d *ports.JobDispatch) map[string]any {
	return map[string]any{
		"id": d.Release.ID, "target": d.Release.Target.Key(), "jobId": d.Job.ID,
		"version":     plainObject(d.Version),
		"deployment":  plainObject(d.Deployment, "variables"),
		"environment": plainObject(d.Environment),
		"resource":    plainObject(d.Resource, "variables"),
	}
}

// jobStatus maps a terminal workflow phase to its job's status.
func jobStatus(p workflow.WorkflowPhase) release.JobStatus {
	switch p {
	case workflow.WorkflowSucceeded:
		return release.JobSuccessful
	case workflow.WorkflowCancelled:
		return release.JobCancelled
	}
	return release.JobFailure
}

// reportRelease tells the chain how a release-triggered workflow ended.
// It runs on every pass that finds the workflow finished, so a crash
// between the end and the report only delays it; the chain takes a
// repeated report as a no-op, and one its job can no longer take (the job
// was ended meanwhile) is logged and dropped.
func (c *Controller) reportRelease(ctx context.Context, w *ports.WorkflowRecord) error {
	if w.JobID == "" || c.Jobs == nil {
		return nil
	}
	msg := "workflow " + w.ID + " " + string(w.Phase)
	if w.Message != "" {
		msg += ": " + w.Message
	}
	err := c.Jobs.ReportJob(ctx, ports.JobReport{JobID: w.JobID, Status: jobStatus(w.Phase), Message: msg, At: w.FinishedAt})
	if errors.Is(err, release.ErrInvalid) || errors.Is(err, ports.ErrNotFound) {
		c.Logger.LogAttrs(ctx, slog.LevelWarn, "workflow.report_dropped", slog.String("workflow", w.ID),
			slog.String("job", w.JobID), slog.String("error", err.Error()))
		return nil
	}
	if err != nil {
		return fmt.Errorf("report workflow %s to job %s: %w", w.ID, w.JobID, err)
	}
	return nil
}
