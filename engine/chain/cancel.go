package chain

import (
	"context"
	"errors"
	"fmt"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// CancelJob ends an active job as cancelled on a user's request: its agent
// is asked to stop it when it can (ports.JobCanceler), then the job is
// reported cancelled, which wakes what depends on it. Cancelling a job
// that already ended is invalid input (release.ErrInvalid).
func (c *Chain) CancelJob(ctx context.Context, jobID, by string) error {
	op := "cancel job " + jobID
	j, err := c.Store.JobGet(ctx, jobID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if j.Status.IsTerminal() {
		return fmt.Errorf("%s: %w", op, release.Invalid("status", "job is "+string(j.Status)+", already ended"))
	}
	msg := "cancelled by " + by
	f := &facts{}
	if j.JobAgentID != "" && j.JobAgentID != workflowAgent.ID {
		a, err := c.Store.JobAgents().Get(ctx, j.JobAgentID)
		if err != nil && !errors.Is(err, ports.ErrNotFound) {
			return fmt.Errorf("%s: %w", op, err)
		}
		if err == nil {
			f.Agent = &a
		}
	}
	c.stopJob(ctx, f, &j, msg)
	return c.ReportJob(ctx, ports.JobReport{JobID: j.ID, Status: release.JobCancelled, Message: msg})
}

// EndForceDeploy deletes a force-deploy skip of a version and re-evaluates
// the version's targets, so the policies decide again. A skip that is not
// a force-deploy of that version is ErrNotFound.
func (c *Chain) EndForceDeploy(ctx context.Context, versionID, skipID string) error {
	op := "end force-deploy " + skipID
	v, err := c.Store.VersionGet(ctx, versionID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	skips, err := c.Store.PolicySkipList(ctx, versionID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var found *release.PolicySkip
	for i := range skips {
		if skips[i].ID == skipID && skips[i].RuleID == release.ForceDeployRule {
			found = &skips[i]
		}
	}
	if found == nil {
		return fmt.Errorf("%s: no force-deploy %s of version %s: %w", op, skipID, versionID, ports.ErrNotFound)
	}
	if err := c.Store.PolicySkipDelete(ctx, skipID); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return c.evaluateDeployment(ctx, ports.TargetScope{DeploymentID: v.DeploymentID, EnvironmentID: found.EnvironmentID, ResourceID: found.ResourceID})
}
