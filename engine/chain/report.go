package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/verify"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

var _ ports.JobReporter = (*Chain)(nil)

// ReportJob records an agent's report on a job and wakes what depends on
// it: a successful job with verification metrics starts its verification;
// any other ended job wakes desired-release of its target and of the
// targets whose policies read it. A report of the status the job already
// has changes nothing; one the job cannot move to is invalid input; one
// naming a pull agent's hand-out other than the job's current one is
// refused with ports.ErrConflict.
func (c *Chain) ReportJob(ctx context.Context, r ports.JobReport) error {
	op := "report job " + r.JobID
	if r.JobID == "" {
		op = "report job " + r.ExternalID + " of agent " + r.AgentID
	}
	if !r.Status.Valid() {
		return fmt.Errorf("%s: %w", op, release.Invalid("status", "unknown job status "+string(r.Status)))
	}
	for attempt := range 5 {
		row, err := c.reportedJob(ctx, r)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if r.HandOut > 0 {
			// A pull agent's taker reports under its hand-out: a taker
			// the job was handed out again from is fenced.
			if why := row.CheckHandOut(r.HandOut); why != "" {
				return fmt.Errorf("%s: %s: %w", op, why, ports.ErrConflict)
			}
		}
		links, added := mergeLinks(row.Links, r.Links)
		if err := release.ValidateLinks("links", links); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		same := row.Status == r.Status
		at := r.At
		if at.IsZero() {
			at = c.Clock.Now()
		}
		// A JobLeaser's non-terminal report with a lease renews the job's
		// lease (only a job that holds one, and only forward).
		renew := r.Lease > 0 && !r.Status.IsTerminal() && row.Status.IsActive() && !row.LeaseUntil.IsZero() &&
			at.Add(r.Lease).After(row.LeaseUntil)
		if attempt == 0 && r.Lease > 0 && !r.Status.IsTerminal() {
			c.Metrics.Renewal(engine.RenewalJob, jobRenewal(&row.Job, at, r.Lease), 1)
		}
		if same && !added && !renew {
			return nil
		}
		if !same && !row.Status.CanBecome(r.Status) {
			return fmt.Errorf("%s: %w", op, release.Invalid("status", "job "+row.ID+" cannot move from "+string(row.Status)+" to "+string(r.Status)))
		}
		next := row.Job
		next.Links = links
		if renew {
			next.LeaseUntil = at.Add(r.Lease)
		}
		if same {
			// Only links to add or a lease to renew: the status and its
			// times stay.
			if _, err := c.Store.JobUpdate(ctx, next, row.Version); errors.Is(err, ports.ErrConflict) {
				continue
			} else if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			return nil
		}
		next.Status = r.Status
		if r.Message != "" {
			next.Message = r.Message
		}
		if next.StartedAt.IsZero() && r.Status != release.JobQueued {
			next.StartedAt = at
		}
		if r.Status.IsTerminal() {
			next.CompletedAt = at
		}
		if _, err := c.Store.JobUpdate(ctx, next, row.Version); errors.Is(err, ports.ErrConflict) {
			continue // the job moved meanwhile: judge the report again
		} else if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		row.Job = next
		c.jobReached(&next)
		c.Logger.LogAttrs(ctx, slog.LevelInfo, "release.job", slog.String("job", row.ID), slog.String("target", row.TargetKey),
			slog.String("status", string(r.Status)), slog.String("message", r.Message))
		if r.Status.IsTerminal() {
			return c.followUp(ctx, &row)
		}
		return nil
	}
	return fmt.Errorf("%s: the job kept changing: %w", op, ports.ErrConflict)
}

// jobRenewal is the result of a job lease renewal at at (engine.Metrics.
// Renewal): failed when the job no longer holds a lease to renew (it ended,
// or its lease ran out), late when less than a third of the lease was
// left, else ok.
func jobRenewal(j *release.Job, at time.Time, lease time.Duration) string {
	switch {
	case !j.Status.IsActive() || j.LeaseUntil.IsZero() || at.After(j.LeaseUntil):
		return engine.RenewalFailed
	case at.After(j.LeaseUntil.Add(-lease / 3)):
		return engine.RenewalLate
	default:
		return engine.RenewalOK
	}
}

// mergeLinks adds a report's links to a job's: a new map, and whether any
// name is new or takes a different URL.
func mergeLinks(have, add map[string]string) (map[string]string, bool) {
	if len(add) == 0 {
		return have, false
	}
	out := make(map[string]string, len(have)+len(add))
	maps.Copy(out, have)
	changed := false
	for k, v := range add {
		if cur, ok := out[k]; !ok || cur != v {
			changed = true
		}
		out[k] = v
	}
	return out, changed
}

// reportedJob finds the job a report is about.
func (c *Chain) reportedJob(ctx context.Context, r ports.JobReport) (ports.JobRow, error) {
	if r.JobID != "" {
		return c.Store.JobGet(ctx, r.JobID)
	}
	return c.Store.JobByExternalID(ctx, r.AgentID, r.ExternalID)
}

// followUp enqueues what an ended job wakes: its verification when it
// succeeded and metrics apply, else desired-release of its target and of
// the targets that read it.
func (c *Chain) followUp(ctx context.Context, row *ports.JobRow) error {
	policies, err := c.enabledPolicies(ctx)
	if err != nil {
		return err
	}
	if row.Status == release.JobSuccessful {
		metrics, err := c.metricsFor(ctx, row.Target(), policies)
		if err != nil {
			return err
		}
		if len(metrics) > 0 {
			return c.enqueue(ctx, time.Time{}, JobKey(row.ID))
		}
	}
	return c.wakeDependents(ctx, row, policies)
}

// afterJobEnded is the outcome of a pass that saw a job end: the follow-up
// is enqueued, or the pass retries.
func (c *Chain) afterJobEnded(ctx context.Context, row *ports.JobRow) engine.Outcome {
	if err := c.followUp(ctx, row); err != nil {
		return engine.Retry(err)
	}
	return engine.Done()
}

// wakeDependents enqueues desired-release for t and for the other
// deployments' targets on t's resource when a dependency rule may read t;
// and one environment-wake item (environmentWake) for each environment of
// t's deployment whose targets' verdict the end of t's job may change: the
// environments whose progression rules may read t's environment
// (policy.Downstream) when its state for the job's version may let a
// target through (policy.ProgressionMayPass), and t's own when a per-environment concurrency cap
// may be waiting on t's job. The queue keeps one item per key, so the jobs
// ending in an environment meanwhile share one wake of its targets.
func (c *Chain) wakeDependents(ctx context.Context, row *ports.JobRow, policies []policy.Policy) error {
	t := row.Target()
	targets := []release.ReleaseTarget{t}
	var envs []string
	if policy.HasRule(policies, policy.TypeEnvironmentProgression) {
		if b := batchOf(ctx); b != nil {
			// Decided once the batch's jobs are all written (wakeDownstream).
			b.wakes = append(b.wakes, wakeCheck{row: *row, policies: policies})
		} else {
			down, err := c.downstream(ctx, row, policies)
			if err != nil {
				return err
			}
			envs = append(envs, down...)
		}
	}
	if envCapped(policies) {
		envs = append(envs, t.EnvironmentID)
	}
	if policy.HasRule(policies, policy.TypeDeploymentDependency) {
		more, err := c.Store.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{ResourceID: t.ResourceID}})
		if err != nil {
			return err
		}
		targets = append(targets, more...)
	}
	if err := c.EvaluateTargets(ctx, targets...); err != nil {
		return err
	}
	keys := make([]ports.WorkKey, len(envs))
	for i, e := range envs {
		keys[i] = EnvironmentKey(t.DeploymentID, e)
	}
	return c.enqueue(ctx, time.Time{}, keys...)
}

// wakeCheck is an ended job whose downstream environments' wake a batch
// decides once its jobs are all written (wakeDownstream), with the enabled
// policies of its pass.
type wakeCheck struct {
	row      ports.JobRow
	policies []policy.Policy
}

// wakeDownstream enqueues the environment wakes of the ended jobs batch b
// deferred (wakeDependents): downstream, once per deployment, environment
// and version, when every job write of the batch is done, so that the
// progression summary each reads holds them all and is read once for the
// batch's jobs of one environment, not once per job.
func (c *Chain) wakeDownstream(ctx context.Context, b *batch) error {
	checks := b.wakes
	b.wakes = nil
	type scope struct{ deployment, environment, version string }
	seen := make(map[scope]bool, len(checks))
	for i := range checks {
		row := &checks[i].row
		t := row.Target()
		k := scope{t.DeploymentID, t.EnvironmentID, row.VersionID}
		if seen[k] {
			continue
		}
		seen[k] = true
		down, err := c.downstream(ctx, row, checks[i].policies)
		if err != nil {
			return fmt.Errorf("wake the environments after job %s: %w", row.ID, err)
		}
		keys := make([]ports.WorkKey, len(down))
		for j, e := range down {
			keys[j] = EnvironmentKey(t.DeploymentID, e)
		}
		if err := c.enqueue(ctx, time.Time{}, keys...); err != nil {
			return err
		}
	}
	return nil
}

// downstream is policy.Downstream of the ended job's environment in its
// deployment, or none when that environment's state for the job's version
// lets no target through a progression rule (policy.ProgressionMayPass,
// one summary read): with a 100% rule, only the job that completes an
// environment wakes the next, not each of the jobs before it.
func (c *Chain) downstream(ctx context.Context, row *ports.JobRow, policies []policy.Policy) ([]string, error) {
	t := row.Target()
	sys, err := c.deploymentSystem(ctx, t.DeploymentID)
	if err != nil || sys == nil {
		return nil, err
	}
	var upstream *release.Environment
	for i := range sys.envs {
		if sys.envs[i].ID == t.EnvironmentID {
			upstream = &sys.envs[i]
		}
	}
	if upstream == nil {
		return nil, nil // the environment is gone: its jobs gate nothing
	}
	down := policy.Downstream(policies, sys.deployment, *upstream, sys.envs)
	if len(down) == 0 || row.VersionID == "" {
		return down, nil
	}
	sum, err := c.Store.ProgressionSummary(ctx, ports.ProgressionSummaryParams{DeploymentID: t.DeploymentID,
		EnvironmentID: t.EnvironmentID, VersionID: row.VersionID})
	if err != nil {
		return nil, err
	}
	if !policy.ProgressionMayPass(policies, sys.deployment, policy.EnvironmentState{Environment: *upstream, Progression: &sum}, row.VersionID, c.Clock.Now()) {
		return nil, nil
	}
	return down, nil
}

// deploymentSystem is a deployment and the environments of its system.
type deploymentSystem struct {
	deployment release.Deployment
	envs       []release.Environment
}

// deploymentSystem reads deployment id and its system's environments, once
// per batch; nil when the deployment is gone.
func (c *Chain) deploymentSystem(ctx context.Context, id string) (*deploymentSystem, error) {
	b := batchOf(ctx)
	if b != nil {
		if ds, ok := b.systems[id]; ok {
			return ds, nil
		}
	}
	var ds *deploymentSystem
	d, err := c.Store.Deployments().Get(ctx, id)
	switch {
	case errors.Is(err, ports.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		stored, err := ports.ListAll(ctx, c.Store.Environments(), d.Value.SystemID)
		if err != nil {
			return nil, err
		}
		ds = &deploymentSystem{deployment: d.Value, envs: values(stored)}
	}
	if b != nil {
		if b.systems == nil {
			b.systems = map[string]*deploymentSystem{}
		}
		b.systems[id] = ds
	}
	return ds, nil
}

// environmentWake is the environment-wake controller: it enqueues
// desired-release for every target of the item's deployment in its
// environment, after a job ended that their verdicts may read, at
// ProgressionPriority.
func (c *Chain) environmentWake(ctx context.Context, it engine.Item) engine.Outcome {
	depID, envID, ok := strings.Cut(it.Key.ScopeID, ":")
	if !ok || depID == "" || envID == "" || strings.Contains(envID, ":") {
		return engine.Terminal(fmt.Errorf("%s item %s: want \"deployment:environment\"", it.Key.Kind, it.Key.ScopeID))
	}
	targets, err := c.Store.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: depID, EnvironmentID: envID}})
	if err != nil {
		return engine.Retry(fmt.Errorf("wake %s: %w", it.Key.ScopeID, err))
	}
	if err := c.evaluateTargetsAt(ctx, ProgressionPriority, targets...); err != nil {
		return engine.Retry(fmt.Errorf("wake %s: %w", it.Key.ScopeID, err))
	}
	return engine.Done()
}

// envCapped reports whether any policy caps active jobs per environment.
func envCapped(policies []policy.Policy) bool {
	for i := range policies {
		for _, r := range policies[i].Rules {
			if c, ok := r.Spec.(policy.Concurrency); ok && c.MaxActivePerEnvironment > 0 {
				return true
			}
		}
	}
	return false
}

// metricsFor returns the verification metrics of the policies matching t;
// without a verification rule among policies, none, and t is not read.
func (c *Chain) metricsFor(ctx context.Context, t release.ReleaseTarget, policies []policy.Policy) ([]policy.MetricSpec, error) {
	if !policy.HasRule(policies, policy.TypeVerification) {
		return nil, nil
	}
	det, err := c.Store.TargetGet(ctx, t)
	if errors.Is(err, ports.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rules, err := policy.MatchingRules(policies, targetInput(c.Clock.Now(), &det), policy.TypeVerification)
	if err != nil {
		return nil, err
	}
	var out []policy.MetricSpec
	for _, r := range rules {
		out = append(out, r.Spec.(policy.Verification).Metrics...)
	}
	return out, nil
}

// jobVerification is the job-verification-metric controller: for a
// successful job it takes each metric's due measurements through the
// verifier of its provider type, judges them (policy.EvaluateMeasurements)
// and stores them with the verdict on the job. While a metric runs it
// wakes itself at the next measurement; once the verdict is in it wakes
// desired-release, closing the loop.
func (c *Chain) jobVerification(ctx context.Context, it engine.Item) engine.Outcome {
	start := time.Now()
	row, err := c.Store.JobGet(ctx, it.Key.ScopeID)
	if errors.Is(err, ports.ErrNotFound) {
		return engine.Done()
	}
	if err != nil {
		return engine.Retry(err)
	}
	if row.Status != release.JobSuccessful || row.Verification == release.VerificationPassed || row.Verification == release.VerificationFailed {
		return engine.Done()
	}
	policies, err := c.enabledPolicies(ctx)
	if err != nil {
		return engine.Retry(err)
	}
	metrics, err := c.metricsFor(ctx, row.Target(), policies)
	if err != nil {
		return engine.Retry(err)
	}
	next := row.Job
	if next.Measurements == nil {
		next.Measurements = map[string][]release.Measurement{}
	}
	now := c.Clock.Now()
	step := verify.Run(ctx, c.Verifiers, c.Clock, metrics, next.Measurements, &row.Job, row.FinishedAt(), now)
	for _, m := range step.Measured {
		c.Metrics.Verification(m.Provider, m.Outcome)
	}
	next.Verification = step.Status
	if _, err := c.Store.JobUpdate(ctx, next, row.Version); err != nil {
		return engine.Retry(fmt.Errorf("verify job %s: %w", row.ID, err))
	}
	c.log(ctx, next.Verification != row.Verification, KindJobVerification, row.ID, "verification-"+string(next.Verification), step.FailMessage, start, slog.String("target", row.TargetKey))
	if next.Verification == release.VerificationRunning {
		wake := step.Wake
		if wake.IsZero() {
			wake = now.Add(time.Second)
		}
		return engine.RequeueAt(wake)
	}
	if err := c.wakeDependents(ctx, &row, policies); err != nil {
		return engine.Retry(err)
	}
	return engine.Done()
}
