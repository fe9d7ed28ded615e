package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// The work kinds of the release chain, and the scope types of their items.
const (
	KindDesiredRelease  = "desired-release"
	KindJobEligibility  = "job-eligibility"
	KindJobDispatch     = "job-dispatch"
	KindJobVerification = "job-verification-metric"
	// KindEnvironmentWake wakes the targets of one deployment in one
	// environment after a job ended that their verdicts may read.
	KindEnvironmentWake = "environment-wake"

	// ScopeTarget scopes desired-release, job-eligibility and job-dispatch
	// items: the scope id is the release target's key, so the queue never
	// runs two passes of one kind for one target at once.
	ScopeTarget = "release-target"
	// ScopeJob scopes job-verification-metric items: the scope id is the
	// job's id.
	ScopeJob = "job"
	// ScopeEnvironment scopes environment-wake items: the scope id is
	// "deployment:environment".
	ScopeEnvironment = "deployment-environment"
)

// Kinds lists the chain's work kinds in chain order, each swept by the
// resync; KindEnvironmentWake, only a fan-out of desired-release (which
// the resync sweeps), is not among them.
var Kinds = []string{KindDesiredRelease, KindJobEligibility, KindJobDispatch, KindJobVerification}

// historyLimit is how many of a target's newest jobs a pass reads: enough
// for retry streaks, rollback and progression, never the whole history.
const historyLimit = 50

// Chain is the release chain: stateless controllers that move a release
// target from "a version exists" to "a job ran and was verified", each
// handing off to the next by enqueueing work (insert-then-lease), and the
// services that start it (versions, approvals, agents' reports). The
// target-scoped controllers run in batches (runBatch): one transaction per
// batch holds their writes and hand-offs.
//
// Every pass re-reads what it needs through the store port and recomputes
// its answer, so a repeated or retried item changes nothing that was
// already done: releases are content-addressed, jobs are created once per
// (release, run, attempt) key and agents dispatch once per job id. A run is
// a release's consecutive jobs at the head of the target's history, so a
// desired release that is not the newest job's gets a job whatever ran
// before.
type Chain struct {
	// Store is the release store. The chain uses every one of its ports:
	// the objects (SyncTargets, policies), Targets, Versions (the desired
	// release's candidates), Releases, Jobs, and TargetFactsReader (the one
	// read of each pass).
	Store ports.ReleaseStore
	Queue ports.Queue
	// Agents serve jobs by release.JobAgent.Type.
	Agents map[string]ports.JobAgent
	// Verifiers take measurements by policy.Provider.Type.
	Verifiers map[string]ports.Verifier
	Clock     ports.Clock
	Logger    *slog.Logger
	// Metrics counts decisions, jobs and measurements (nil: none);
	// Register takes the engine's when unset.
	Metrics *engine.Metrics
	// Owner names this process in Liveness: it is the LeaseOwner of the
	// jobs its in-process agents run.
	Owner string
	// Liveness tells live processes from gone ones (nil: only job leases
	// tell). A job whose owner is alive is never ended as lost; one whose
	// owner's row lapsed is ended at once (timeOut).
	Liveness ports.Liveness

	batchOnce sync.Once
	batcher   *engine.EnqueueBatcher
	spaces    workspaces
	handoff   handoff
	// scopes keeps the scopes' targets and rollout orders across batches.
	scopes scopeCache
}

// Register registers the five controllers on eng, each with concurrency
// passes at once; a pass of a target-scoped kind takes up to BatchSize
// items.
func (c *Chain) Register(eng *engine.Engine, concurrency int) {
	opts := engine.KindOptions{Concurrency: concurrency * BatchSize, Batch: BatchSize}
	if c.Metrics == nil {
		c.Metrics = eng.Metrics()
	}
	eng.Register(KindDesiredRelease, batchProcessor{c, c.desiredRelease}, opts)
	eng.Register(KindJobEligibility, batchProcessor{c, c.jobEligibility}, opts)
	eng.Register(KindJobDispatch, batchProcessor{c, c.jobDispatch}, opts)
	eng.Register(KindJobVerification, engine.ProcessorFunc(c.jobVerification), engine.KindOptions{Concurrency: concurrency})
	eng.Register(KindEnvironmentWake, engine.ProcessorFunc(c.environmentWake), engine.KindOptions{Concurrency: concurrency})
}

// BatchSize is the most items of a target-scoped kind one pass takes. A
// pass costs a few statements and one commit whatever its size, so larger
// passes cost less per target (bench release --targets 10000 on a
// stock-durability PostgreSQL, batches of 32 / 96 / 160: 0.184 / 0.069 /
// 0.049 commits and 493 / 382 / 336 µs of server CPU per target); the
// price is a longer transaction and, when an item fails, each item of the
// pass run again alone.
const BatchSize = 128

// TargetKey is the work key of a chain kind for a release target.
func TargetKey(kind string, t release.ReleaseTarget) ports.WorkKey {
	return ports.WorkKey{Kind: kind, ScopeType: ScopeTarget, ScopeID: t.Key()}
}

// EnvironmentKey is the work key of the environment-wake of a deployment's
// targets in an environment.
func EnvironmentKey(deploymentID, environmentID string) ports.WorkKey {
	return ports.WorkKey{Kind: KindEnvironmentWake, ScopeType: ScopeEnvironment, ScopeID: deploymentID + ":" + environmentID}
}

// JobKey is the work key of a job's verification.
func JobKey(jobID string) ports.WorkKey {
	return ports.WorkKey{Kind: KindJobVerification, ScopeType: ScopeJob, ScopeID: jobID}
}

// enqueue adds items now, or at notBefore when it is set, each in the
// workspace of its deployment (workspaceOf); concurrent
// passes' enqueues share queue calls (engine.EnqueueBatcher).
func (c *Chain) enqueue(ctx context.Context, notBefore time.Time, keys ...ports.WorkKey) error {
	return c.enqueueAt(ctx, notBefore, 0, keys...)
}

// enqueueAt is enqueue with a priority: higher runs first among the due
// items of a kind.
func (c *Chain) enqueueAt(ctx context.Context, notBefore time.Time, priority int, keys ...ports.WorkKey) error {
	if len(keys) == 0 {
		return nil
	}
	items := make([]ports.EnqueueParams, len(keys))
	for i, k := range keys {
		items[i] = ports.EnqueueParams{Key: k, NotBefore: notBefore, Priority: priority, Workspace: c.workspaceOf(ctx, k.ScopeType, k.ScopeID)}
	}
	if b := batchOf(ctx); b != nil {
		// In a batch pass: stored in its transaction, with its writes.
		b.enqueues = append(b.enqueues, items...)
		return nil
	}
	c.batchOnce.Do(func() { c.batcher = engine.NewEnqueueBatcher(c.Queue) })
	if err := c.batcher.WorkEnqueue(ctx, items...); err != nil {
		return fmt.Errorf("enqueue %s: %w", keys[0], err)
	}
	return nil
}

// EvaluateTargets enqueues desired-release for each target: the entry point
// of the chain after anything a decision reads has changed.
func (c *Chain) EvaluateTargets(ctx context.Context, targets ...release.ReleaseTarget) error {
	return c.evaluateTargetsAt(ctx, 0, targets...)
}

// ProgressionPriority is the queue priority of the desired-release items
// an environment wake enqueues (environmentWake): its targets may now
// deploy a version already on its way, so they run before the due items of
// new versions and other changes (priority 0), and a rollout in flight
// finishes before the next starts. Each wake follows a job that ended, so
// these items cannot keep the others waiting for long.
const ProgressionPriority = 1

// evaluateTargetsAt is EvaluateTargets at a queue priority.
func (c *Chain) evaluateTargetsAt(ctx context.Context, priority int, targets ...release.ReleaseTarget) error {
	keys := make([]ports.WorkKey, len(targets))
	for i, t := range targets {
		keys[i] = TargetKey(KindDesiredRelease, t)
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := c.enqueueAt(ctx, time.Time{}, priority, keys[:n]...); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// targetOf parses a target-scoped item; a malformed key can never succeed.
func targetOf(it engine.Item) (release.ReleaseTarget, error) {
	t, err := release.ParseTargetKey(it.Key.ScopeID)
	if err != nil {
		return t, fmt.Errorf("%s item %s: %w", it.Key.Kind, it.Key.ScopeID, err)
	}
	return t, nil
}

// records converts job rows to the policy's job records.
func records(rows []ports.JobRow) []policy.JobRecord {
	out := make([]policy.JobRecord, len(rows))
	for i := range rows {
		out[i] = rows[i].Record()
	}
	return out
}

// retryable reports whether err may pass on a later attempt: everything but
// invalid input.
func retryable(err error) bool { return !errors.Is(err, release.ErrInvalid) }

// fail turns an error into the outcome of a pass: a retry, or terminal for
// input that can never be valid.
func fail(err error) engine.Outcome {
	if retryable(err) {
		return engine.Retry(err)
	}
	return engine.Terminal(err)
}

// jobReached counts a job that a write of the chain moved to its status.
func (c *Chain) jobReached(j *release.Job) {
	c.Metrics.Job(j.JobAgentID, string(j.Status))
}

// ShortID is the first 16 characters of a release id (a SHA-256 in hex):
// what logs show, and the prefix of the release's job ids.
func ShortID(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// log records one controller decision with the chain's stable keys: at
// info level when it changed something, at debug level when a pass only
// confirmed what was already so (level-based passes repeat a lot).
func (c *Chain) log(ctx context.Context, changed bool, kind, id, decision, reason string, start time.Time, attrs ...slog.Attr) {
	c.Metrics.Decision(kind, decision)
	lvl := slog.LevelDebug
	if changed {
		lvl = slog.LevelInfo
	}
	if !c.Logger.Enabled(ctx, lvl) {
		return
	}
	base := []slog.Attr{slog.String("kind", kind), slog.String("id", id), slog.String("action", decision),
		slog.String("reason", reason), slog.Duration("duration", time.Since(start))}
	c.Logger.LogAttrs(ctx, lvl, "release.decision", append(base, attrs...)...)
}
