package chain

import (
	"context"
	"errors"
	"fmt"
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
// asking their agent to stop them when it can (ports.JobCanceler). A job
// whose lease ran out but whose agent resumes jobs (ports.JobResumer: its
// run lives on an external system) is not lost: it is claimed anew and
// returned, for the pass to hand to its agent's ResumeJob once the claim
// is stored. It returns the earliest deadline still ahead, for the pass
// to run again then, and whether it ended any.
func (c *Chain) timeOut(ctx context.Context, f *facts) (time.Time, bool, []handover, error) {
	limit := f.Detail.Deployment.JobTimeout()
	now := c.Clock.Now()
	var next time.Time
	ahead := func(d time.Time) {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	ended := false
	var resumes []handover
	for i := range f.Jobs {
		j := &f.Jobs[i]
		if !j.Status.IsActive() {
			continue
		}
		// A pull agent's job whose lease ran out with hand-outs left is not
		// lost: it waits for its next taker (release.Job.LeaseLost).
		lost, alive, err := c.leaseLost(ctx, j, now)
		if err != nil {
			return next, ended, resumes, err
		}
		if !alive.IsZero() {
			ahead(alive) // its owner is alive: judge it again once that may change
		}
		d := j.Deadline(limit)
		timedOut := !d.IsZero() && !now.Before(d)
		if lost != "" && !timedOut && j.Take == nil {
			h, err := c.reclaim(ctx, f, j, now)
			switch {
			case errors.Is(err, ports.ErrConflict):
				ahead(now) // it moved meanwhile: judge it again
				continue
			case err != nil:
				return next, ended, resumes, err
			case h != nil:
				resumes = append(resumes, *h)
				ahead(h.row.LeaseUntil)
				continue
			}
		}
		var msg string
		switch {
		case timedOut:
			msg = "timed out after " + limit.String()
		case lost != "":
			msg = lost
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
		err = c.ReportJob(ctx, ports.JobReport{JobID: j.ID, Status: release.JobFailure, Message: msg, At: now})
		if err != nil && !errors.Is(err, release.ErrInvalid) { // invalid: it ended meanwhile
			return next, ended, resumes, err
		}
		ended = true
	}
	return next, ended, resumes, nil
}

// leaseLost says why active job j is lost at now, or "" when it is not
// (release.Job.LeaseLost), judged by its owner's liveness when it has one
// (Chain.Liveness): a job whose owner process is alive is never lost,
// however late its lease renewals (alive is then until when the owner is
// known alive), and one whose owner's liveness row lapsed is lost at once,
// before its lease runs out. Without a liveness row (an owner that never
// beat, or stopped cleanly) the lease alone tells.
func (c *Chain) leaseLost(ctx context.Context, j *ports.JobRow, now time.Time) (lost string, alive time.Time, err error) {
	lost = j.LeaseLost(now)
	if c.Liveness == nil || j.LeaseOwner == "" || j.Take != nil || !j.Status.IsActive() || j.LeaseUntil.IsZero() {
		return lost, time.Time{}, nil
	}
	until, err := c.Liveness.LivenessGet(ctx, j.LeaseOwner)
	switch {
	case err != nil:
		return "", time.Time{}, fmt.Errorf("liveness of job %s's owner: %w", j.ID, err)
	case until.IsZero():
		return lost, time.Time{}, nil
	case now.Before(until):
		return "", until, nil
	}
	return "lost: the process running it (" + j.LeaseOwner + ") stopped: its liveness lapsed at " + until.UTC().Format(time.RFC3339Nano), time.Time{}, nil
}

// reclaim claims job j, whose lease ran out, for its agent to resume
// (ports.JobResumer), renewing its lease by a compare-and-swap write so
// that one pass of all the processes wins; it returns the handover to
// make once the claim is stored, or nil when the agent cannot resume it
// (the job is lost). A conflict (ports.ErrConflict) means the job moved.
func (c *Chain) reclaim(ctx context.Context, f *facts, j *ports.JobRow, now time.Time) (*handover, error) {
	agent, ok := agentOfJob(f, j)
	if !ok || ports.ResumerOf(c.Agents[agent.Type]) == nil {
		return nil, nil
	}
	var rel release.Release
	var ver release.DeploymentVersion
	if f.Release != nil && f.Version != nil && f.Release.ID == j.ReleaseID {
		rel, ver = *f.Release, *f.Version
	} else {
		var err error
		if rel, err = c.Store.ReleaseGet(ctx, j.ReleaseID); err == nil {
			ver, err = c.Store.VersionGet(ctx, rel.VersionID)
		}
		if errors.Is(err, ports.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("resume job %s: %w", j.ID, err)
		}
	}
	claim := j.Job
	claim.LeaseUntil = now.Add(ports.JobLeaseOf(c.Agents[agent.Type]))
	claim.LeaseOwner = c.Owner
	v, err := c.Store.JobUpdate(ctx, claim, j.Version)
	if err != nil {
		return nil, fmt.Errorf("claim job %s to resume: %w", j.ID, err)
	}
	row := *j
	row.Job, row.Version = claim, v
	return &handover{f: f, rel: &rel, row: &row, rt: route{agent: &agent, version: ver}, start: time.Now(), resume: true}, nil
}

// agentOfJob is the agent record of an active job: the workflow agent's,
// or the target's agent when it is the job's (a record gone or replaced
// has nobody to tell).
func agentOfJob(f *facts, j *ports.JobRow) (release.JobAgent, bool) {
	switch {
	case j.JobAgentID == workflowAgent.ID:
		return workflowAgent, true
	case f.Agent != nil && f.Agent.Value.ID == j.JobAgentID:
		return f.Agent.Value, true
	}
	return release.JobAgent{}, false
}

// stopJob asks the agent of an active job to stop it, when the agent can;
// a failure is logged: the job is ended either way.
func (c *Chain) stopJob(ctx context.Context, f *facts, j *ports.JobRow, why string) {
	agent, ok := agentOfJob(f, j)
	if !ok {
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
