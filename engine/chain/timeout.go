package chain

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// timeOut ends the target's active jobs that outlived the deployment's job
// timeout, or whose in-process agent's lease ran out unrenewed (the
// process running them died: ports.JobLeaser) or whose pull agent's last
// taker's did (release.Job.LeaseLost), as failures, as a report
// would (the chain then moves on: a retry policy may try again), after
// asking their agent to stop them when it can (ports.JobCanceler). It
// returns the earliest deadline still ahead, for the pass to run again
// then, and whether it ended any.
func (c *Chain) timeOut(ctx context.Context, f *facts) (time.Time, bool, error) {
	limit := f.Detail.Deployment.JobTimeout()
	now := c.Clock.Now()
	var next time.Time
	ahead := func(d time.Time) {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	ended := false
	for i := range f.Jobs {
		j := &f.Jobs[i]
		if !j.Status.IsActive() {
			continue
		}
		// A pull agent's job whose lease ran out with hand-outs left is not
		// lost: it waits for its next taker (release.Job.LeaseLost).
		msg := j.LeaseLost(now)
		switch d := j.Deadline(limit); {
		case msg != "":
		case !d.IsZero() && !now.Before(d):
			msg = "timed out after " + limit.String()
		default:
			if now.Before(j.LeaseUntil) {
				ahead(j.LeaseUntil)
			}
			if !d.IsZero() {
				ahead(d)
			}
			continue
		}
		c.stopJob(ctx, f, j, msg)
		err := c.ReportJob(ctx, ports.JobReport{JobID: j.ID, Status: release.JobFailure, Message: msg, At: now})
		if err != nil && !errors.Is(err, release.ErrInvalid) { // invalid: it ended meanwhile
			return next, ended, err
		}
		ended = true
	}
	return next, ended, nil
}

// stopJob asks the agent of an active job to stop it, when the agent can;
// a failure is logged: the job is ended either way.
func (c *Chain) stopJob(ctx context.Context, f *facts, j *ports.JobRow, why string) {
	var agent release.JobAgent
	switch {
	case j.JobAgentID == workflowAgent.ID:
		agent = workflowAgent
	case f.Agent != nil && f.Agent.Value.ID == j.JobAgentID:
		agent = f.Agent.Value
	default:
		return // the agent record is gone: nobody to tell
	}
	canceler, ok := c.Agents[agent.Type].(ports.JobCanceler)
	if !ok {
		return
	}
	err := canceler.CancelJob(ctx, ports.JobCancel{JobID: j.ID, ExternalID: j.ExternalID, Agent: agent, Reason: why})
	if err != nil {
		c.Logger.LogAttrs(ctx, slog.LevelWarn, "release.cancel_job_failed", slog.String("job", j.ID),
			slog.String("target", j.TargetKey), slog.String("error", err.Error()))
	}
}
