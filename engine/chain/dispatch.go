package chain

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// desired reads the target's facts and its desired release; rel is nil when
// the target has none (or is gone).
func (c *Chain) desired(ctx context.Context, t release.ReleaseTarget) (*facts, *release.Release, error) {
	f, err := c.load(ctx, t)
	if errors.Is(err, ports.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return f, f.Release, nil
}

// eligible runs the job gates (concurrency, retry) for a new job of rel and
// reports the environment's active-job cap (0: none) for the create. The
// environment's active jobs are counted only when a cap applies: the
// target's own come with its job history.
func (c *Chain) eligible(ctx context.Context, f *facts, rel *release.Release) (policy.Decision, int, error) {
	in := f.base
	in.ReleaseID = rel.ID
	limit := policy.EnvironmentJobCap(f.policies, in)
	if limit > 0 {
		counts, err := c.Store.JobsActiveCount(ctx, rel.Target)
		if err != nil {
			return policy.Decision{}, 0, err
		}
		in.EnvironmentActiveJobs = counts.Environment
	}
	return policy.EvaluateJob(f.policies, in), limit, nil
}

// jobEligibility is the job-eligibility controller: may a job for the
// target's desired release run now (concurrency, retry)? If so it hands
// off to job-dispatch; if not yet, it wakes itself when the gate may open
// (a finished job wakes the chain anyway). It also hands off when the
// target's newest job is a superseded one, for job-dispatch to cancel.
// Nothing enqueues it any more (desired-release hands off to job-dispatch,
// which runs the same gates): it runs the items older versions enqueued.
func (c *Chain) jobEligibility(ctx context.Context, it engine.Item) engine.Outcome {
	start := time.Now()
	t, err := targetOf(it)
	if err != nil {
		return engine.Terminal(err)
	}
	f, rel, err := c.desired(ctx, t)
	if err != nil {
		return engine.Retry(fmt.Errorf("job eligibility of %s: %w", t, err))
	}
	if rel == nil {
		return engine.Done()
	}
	dec, _, err := c.eligible(ctx, f, rel)
	if err != nil {
		return engine.Retry(fmt.Errorf("job eligibility of %s: %w", t, err))
	}
	if dec.Status != policy.Allowed && !superseded(f.Jobs, rel) {
		c.log(ctx, false, KindJobEligibility, t.Key(), "wait", dec.Blocking.Message, start, slog.String("status", string(dec.Status)))
		return wakeAt(dec.Until)
	}
	if err := c.enqueue(ctx, time.Time{}, TargetKey(KindJobDispatch, t)); err != nil {
		return engine.Retry(err)
	}
	c.log(ctx, false, KindJobEligibility, t.Key(), "eligible", "job-gates-allowed", start, slog.String("release", ShortID(rel.ID)))
	return engine.Done()
}

// run is the desired release's run on a target: its consecutive jobs at
// the head of the target's history (newest first). A release wanted again
// after another one ran starts a new run, so it is deployed again; retries
// count within the run (policy.MayCreateJob).
type run struct {
	releaseID string
	// n counts the run's jobs: f.Jobs[:n].
	n int
	// after is the id of the job the run follows ("" when the run starts
	// the target's history as read).
	after string
}

// runOf is release releaseID's run at the head of jobs (newest first).
func runOf(jobs []ports.JobRow, releaseID string) run {
	r := run{releaseID: releaseID}
	for r.n < len(jobs) && jobs[r.n].ReleaseID == releaseID {
		r.n++
	}
	if r.n < len(jobs) {
		r.after = jobs[r.n].ID
	}
	return r
}

// nextJob is the id and idempotency key of the run's next job (attempt
// n+1): derived from the release, the job the run follows and the attempt,
// so a retried create names the same job, and a new run of a release that
// ran before names a new one. A run that starts the history keeps the
// plain (release, attempt) key.
func (r run) nextJob() (id, key string) {
	attempt := r.n + 1
	id = r.releaseID[:min(len(r.releaseID), 16)] + "-"
	key = ports.JobKey(r.releaseID, attempt)
	if r.after != "" {
		h := fnv.New64a()
		h.Write([]byte(r.after))
		id += strconv.FormatUint(h.Sum64(), 16) + "-"
		key += "/after/" + r.after
	}
	return id + strconv.Itoa(attempt), key
}

// jobDispatch is the job-dispatch controller. Items are per target, so one
// target's dispatches never overlap: it re-checks the job gates, creates
// the desired release's next job once per (release, run, attempt) key (see
// run) with the agent configuration merged agent → deployment → version,
// hands it to the agent of its type and records the external id. A job
// whose deployment names no usable agent ends invalidJobAgent. A job
// created but not yet handed over (a crash in between) is handed over by
// the next pass, or cancelled when its release is no longer desired;
// agents dispatch once per job id.
func (c *Chain) jobDispatch(ctx context.Context, it engine.Item) engine.Outcome {
	start := time.Now()
	t, err := targetOf(it)
	if err != nil {
		return engine.Terminal(err)
	}
	f, rel, err := c.desired(ctx, t)
	if err != nil {
		return engine.Retry(fmt.Errorf("job dispatch of %s: %w", t, err))
	}
	if f == nil {
		return engine.Done()
	}
	next, ended, resumes, err := c.timeOut(ctx, f)
	if err != nil {
		return engine.Retry(fmt.Errorf("job dispatch of %s: %w", t, err))
	}
	if ended || len(resumes) > 0 {
		out := engine.RequeueAt(next)
		if ended {
			out = engine.RequeueAt(c.Clock.Now()) // recompute on the ended jobs
		}
		for _, h := range resumes {
			out = c.deferHandOver(ctx, h).NoLaterThan(out.At())
		}
		return out
	}
	return c.dispatch(ctx, t, f, rel, start).NoLaterThan(next)
}

// dispatch is jobDispatch on the target's facts and desired release.
func (c *Chain) dispatch(ctx context.Context, t release.ReleaseTarget, f *facts, rel *release.Release, start time.Time) engine.Outcome {
	if rel == nil {
		return engine.Done()
	}
	if superseded(f.Jobs, rel) {
		// Created for a release no longer desired and not handed over as
		// far as the store knows: it ends (its agent, which may have taken
		// it just before a crash, is asked to stop it) and the desired
		// release takes its place.
		j := &f.Jobs[0]
		msg := "superseded before dispatch by release " + rel.ID
		c.stopJob(ctx, f, j, msg)
		err := c.ReportJob(ctx, ports.JobReport{JobID: j.ID, Status: release.JobCancelled, Message: msg})
		if err != nil && !errors.Is(err, release.ErrInvalid) { // invalid: it moved meanwhile
			return engine.Retry(fmt.Errorf("job dispatch of %s: %w", t, err))
		}
		return engine.RequeueAt(c.Clock.Now())
	}
	r := runOf(f.Jobs, rel.ID)
	var row *ports.JobRow
	if r.n > 0 && undelivered(&f.Jobs[0]) {
		row = &f.Jobs[0]
	}
	envCap := 0
	if row == nil {
		dec, limit, err := c.eligible(ctx, f, rel)
		envCap = limit
		if err != nil {
			return engine.Retry(fmt.Errorf("job dispatch of %s: %w", t, err))
		}
		if dec.Status != policy.Allowed {
			c.log(ctx, false, KindJobDispatch, t.Key(), "wait", dec.Blocking.Message, start, slog.String("status", string(dec.Status)))
			return wakeAt(dec.Until)
		}
	}
	rt := c.routeOf(f)
	if row != nil {
		return c.handOverOrEnd(ctx, t, f, rel, row, rt, start)
	}
	return c.createJob(ctx, f, rel, r, rt, envCap, func(ctx context.Context, created ports.JobRow, err error) engine.Outcome {
		if errors.Is(err, ports.ErrLimitReached) {
			// Other targets filled the environment meanwhile; a finished
			// job there wakes this target again.
			c.log(ctx, false, KindJobDispatch, t.Key(), "wait", err.Error(), start, slog.String("status", string(policy.Pending)))
			return engine.Done()
		}
		if err != nil {
			return fail(fmt.Errorf("job dispatch of %s: %w", t, err))
		}
		return c.handOverOrEnd(ctx, t, f, rel, &created, rt, start)
	})
}

// handOverOrEnd hands a pending job to its agent (deferHandOver) or,
// when it ended at creation (invalidJobAgent), moves the chain on.
func (c *Chain) handOverOrEnd(ctx context.Context, t release.ReleaseTarget, f *facts, rel *release.Release, row *ports.JobRow, rt route, start time.Time) engine.Outcome {
	if row.Status != release.JobPending {
		// invalidJobAgent: nothing to hand over; the chain moves on.
		c.log(ctx, true, KindJobDispatch, t.Key(), "job-"+string(row.Status), row.Message, start, slog.String("job", row.ID))
		return c.afterJobEnded(ctx, row)
	}
	return c.deferHandOver(ctx, handover{f: f, rel: rel, row: row, rt: rt, start: start})
}

// route is where a release's jobs go: the deployment's agent record (nil
// when none is usable, why says so) and the release's version.
type route struct {
	agent   *release.JobAgent
	why     string
	version release.DeploymentVersion
}

// workflowAgent is the agent record of release-triggered workflows: a
// deployment with a WorkflowTemplate runs each release's job as a workflow
// through the JobAgent registered for release.WorkflowAgentType.
var workflowAgent = release.JobAgent{ID: release.WorkflowAgentType, Name: "workflow", Type: release.WorkflowAgentType}

// routeOf is the route of rel's jobs, from the facts: the workflow agent
// when the deployment names a workflow template, else the deployment's
// agent when an implementation of its type is registered; and the
// release's version.
func (c *Chain) routeOf(f *facts) route {
	dep := &f.Detail.Deployment
	if ref := dep.WorkflowTemplate; ref != nil {
		if _, ok := c.Agents[release.WorkflowAgentType]; !ok {
			return route{why: "deployment " + dep.ID + " runs workflow template " + strconv.Quote(ref.Name) + " but no workflow agent is registered"}
		}
		return route{agent: &workflowAgent, version: *f.Version}
	}
	switch {
	case dep.JobAgentID == "":
		return route{why: "deployment " + dep.ID + " names no job agent"}
	case f.Agent == nil:
		return route{why: "job agent " + dep.JobAgentID + " does not exist"}
	}
	if _, ok := c.Agents[f.Agent.Value.Type]; !ok {
		return route{why: "no agent of type " + strconv.Quote(f.Agent.Value.Type) + " is registered"}
	}
	return route{agent: &f.Agent.Value, version: *f.Version}
}

// undelivered reports whether a job was created but never handed to its
// agent. A pending job with a start time but no external id was claimed
// for a JobLeaser's dispatch (see handOver) and may have been sent: it is
// not sent again.
func undelivered(j *ports.JobRow) bool {
	return j.Status == release.JobPending && j.ExternalID == "" && j.StartedAt.IsZero()
}

// superseded reports whether the target's newest job was never handed over
// and is of a release other than rel: job-dispatch cancels it.
func superseded(jobs []ports.JobRow, rel *release.Release) bool {
	return len(jobs) > 0 && undelivered(&jobs[0]) && jobs[0].ReleaseID != rel.ID
}

// createJob creates run r's next job on route rt, or ended invalidJobAgent
// when it names no usable agent; envCap > 0 caps the environment's active
// jobs atomically (ports.ErrLimitReached). Its creation time is after the
// target's newest job's, so the history's order is the order of creation
// even when clocks step back or stand still. then continues the pass with
// the store's answer: now, or, for an uncapped create in a batch of
// several items, once the batch's creates are stored in one call
// (createJobs); the pass's outcome is then's.
func (c *Chain) createJob(ctx context.Context, f *facts, rel *release.Release, r run, rt route, envCap int,
	then func(ctx context.Context, row ports.JobRow, err error) engine.Outcome) engine.Outcome {
	dep := &f.Detail.Deployment
	id, key := r.nextJob()
	created := ports.StoredTime(c.Clock.Now())
	if len(f.Jobs) > 0 && !created.After(f.Jobs[0].CreatedAt) {
		created = f.Jobs[0].CreatedAt.Add(time.Microsecond)
	}
	job := release.Job{
		ID: id, ReleaseID: rel.ID, TargetKey: rel.Target.Key(), JobAgentID: dep.JobAgentID,
		Status: release.JobPending, CreatedAt: created,
		DispatchContext: map[string]any{"release_id": rel.ID, "version_id": rel.VersionID, "attempt": r.n + 1},
	}
	if rt.agent == nil {
		job.Status, job.Message, job.CompletedAt = release.JobInvalidJobAgent, rt.why, job.CreatedAt
	} else {
		job.JobAgentID = rt.agent.ID
		job.JobAgentConfig = release.MergeConfig(rt.agent.Config, dep.JobAgentConfig, rt.version.JobAgentConfig)
		job.DispatchContext["version_tag"] = rt.version.Tag
	}
	job.Traceparent = tracing.Traceparent(ctx)
	p := ports.JobCreateParams{Job: job, IdempotencyKey: key, MaxActiveInEnvironment: envCap}
	if b := batchOf(ctx); b != nil && b.size > 1 && envCap == 0 {
		b.creates = append(b.creates, pendingCreate{i: b.cur, params: p, then: then})
		return engine.Done()
	}
	row, isNew, err := c.Store.JobCreate(ctx, p)
	if err == nil && isNew {
		c.jobReached(&row.Job)
	}
	return then(ctx, row, err)
}
