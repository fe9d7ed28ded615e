package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// batchProcessor runs one target-scoped controller over a batch of leased
// items (engine.BatchProcessor): Chain.runBatch.
type batchProcessor struct {
	c   *Chain
	one func(ctx context.Context, it engine.Item) engine.Outcome
}

// Process runs the controller on one item, as a batch of one.
func (p batchProcessor) Process(ctx context.Context, it engine.Item) engine.Outcome {
	return p.c.runBatch(ctx, []engine.Item{it}, p.one)[0]
}

// ProcessBatch runs the controller on items in one transaction.
func (p batchProcessor) ProcessBatch(ctx context.Context, items []engine.Item) []engine.Outcome {
	return p.c.runBatch(ctx, items, p.one)
}

// batch is what the items of one batch pass collect while they run in its
// transaction: the follow-up enqueues, stored in that transaction, and the
// jobs to hand to their agents once it has committed.
type batch struct {
	size      int // the items of the pass
	cur       int // the index of the item running
	enqueues  []ports.EnqueueParams
	handovers []handover
	// desired are the decisions the items deferred (setDesired), written
	// in one call once every item has run.
	desired []pendingDesired
	// creates are the jobs the items deferred (createJob), created in one
	// call once every item has run.
	creates []pendingCreate

	// facts are the items' targets' facts, read for them all in one
	// statement at the start of the transaction, each taken by the first
	// load of its target (a later load reads again); a prefetched target
	// missing from facts is not stored.
	facts      map[release.ReleaseTarget]ports.TargetFacts
	prefetched map[release.ReleaseTarget]bool
	// versions are the deployments' newest versions, read once per batch
	// (candidates).
	versions map[string]*versionPage
	// progression are the deployments' progression facts, read once per
	// batch (progressionOf).
	progression map[string]*progression
	// scopes are the scopes' targets and rollout orders, taken from the
	// chain's scope cache once per batch (scopeRollout).
	scopes map[ports.TargetScope]*scopeEntry
	// related are the workspaces' relationship rules and resources, read
	// once per batch (relationFacts).
	related map[string]*relationFacts
	// grants are the versions' approvals and skips, read once per batch
	// (versionGrants).
	grants map[string]grants
	// policies, when override is set, stand in for the stored enabled
	// policies of every target the batch loads: a plan's policy change
	// applied in memory (DecideManyWith).
	policies []ports.Stored[policy.Policy]
	override bool
	// jobStates are the job states of the targets in pass, read in one
	// call when a target first asks (jobState on a ports.JobStateBatcher);
	// a target's entry is its state, absent when not read or already
	// taken.
	jobStates map[release.ReleaseTarget]ports.TargetJobState
	// pass are the targets whose facts were read together (hold): the
	// pass's items', or a plan's chunk.
	pass []release.ReleaseTarget
	// matches memoizes the selector matches of the targets whose facts
	// were read together (prefetch, a plan's chunk).
	matches *policy.MatchMemo
	// enabled are the enabled policies, once enabledRead (enabledPolicies).
	enabled     []policy.Policy
	enabledRead bool
	// systems are deployments with their systems' environments, read once
	// per batch (deploymentSystem); nil for a deployment that is gone.
	systems map[string]*deploymentSystem
	// wakes are the ended jobs whose downstream wakes flush decides
	// (wakeDownstream).
	wakes []wakeCheck
}

// jobState is t's job state: read with its batch's, else alone; a
// batch's state is taken once (a later ask reads again). In a batch pass,
// the first target that asks reads the states of every target of the
// pass in one call when the store batches them (ports.JobStateBatcher):
// a pass of targets under policies asks for each.
func (c *Chain) jobState(ctx context.Context, t release.ReleaseTarget) (ports.TargetJobState, error) {
	if b := batchOf(ctx); b != nil {
		if js, ok := c.Store.(ports.JobStateBatcher); ok && b.jobStates == nil && len(b.pass) > 0 {
			states, err := js.TargetJobStateMany(ctx, b.pass)
			if err != nil {
				return ports.TargetJobState{}, fmt.Errorf("read the job states of %d targets: %w", len(b.pass), err)
			}
			b.jobStates = make(map[release.ReleaseTarget]ports.TargetJobState, len(b.pass))
			for _, pt := range b.pass {
				b.jobStates[pt] = states[pt]
			}
		}
		if st, ok := b.jobStates[t]; ok {
			delete(b.jobStates, t)
			return st, nil
		}
	}
	return c.Store.TargetJobState(ctx, t)
}

// prefetch reads the facts of the items' targets in one statement; for
// job-dispatch items, only those of the targets whose facts were not
// handed off current (handedOff).
func (c *Chain) prefetch(ctx context.Context, b *batch, items []engine.Item) error {
	ts := make([]release.ReleaseTarget, 0, len(items))
	for _, it := range items {
		if t, err := targetOf(it); err == nil {
			ts = append(ts, t)
		}
	}
	b.hold(ts, map[release.ReleaseTarget]ports.TargetFacts{})
	rest := ts
	if takesHandOff(items) {
		held, err := c.handedOff(ctx, ts)
		if err != nil {
			return err
		}
		b.facts, rest = held, slices.DeleteFunc(slices.Clone(ts), func(t release.ReleaseTarget) bool { _, ok := held[t]; return ok })
	}
	if len(rest) == 0 {
		return nil
	}
	facts, err := c.Store.TargetFactsGetMany(ctx, rest, historyLimit)
	if err != nil {
		return err
	}
	for t, f := range facts {
		b.facts[t] = f
	}
	return nil
}

// hold makes facts, read together for ts, the batch's prefetched facts:
// each taken once by its target's load, with the selector matches kept
// over them and, when a target first asks, the job states of ts read in
// one call (jobState).
func (b *batch) hold(ts []release.ReleaseTarget, facts map[release.ReleaseTarget]ports.TargetFacts) {
	b.facts, b.pass, b.jobStates, b.matches = facts, ts, nil, policy.NewMatchMemo()
	b.prefetched = make(map[release.ReleaseTarget]bool, len(ts))
	for _, t := range ts {
		b.prefetched[t] = true
	}
}

// takesHandOff reports whether items are job-dispatch's, which take the
// facts desired-release handed off (handedOff).
func takesHandOff(items []engine.Item) bool {
	return len(items) > 0 && items[0].Key.Kind == KindJobDispatch
}

// takeFacts is t's prefetched facts (ErrNotFound when it is not stored),
// once; ok is false when the batch holds none for t.
func (b *batch) takeFacts(t release.ReleaseTarget) (ports.TargetFacts, bool, error) {
	if b == nil || !b.prefetched[t] {
		return ports.TargetFacts{}, false, nil
	}
	delete(b.prefetched, t)
	f, found := b.facts[t]
	delete(b.facts, t)
	if !found {
		return f, true, fmt.Errorf("get facts of target %s: %w", t.Key(), ports.ErrNotFound)
	}
	return f, true, nil
}

type batchKey struct{}

// batchOf is the batch ctx's pass collects into, or nil.
func batchOf(ctx context.Context) *batch {
	b, _ := ctx.Value(batchKey{}).(*batch)
	return b
}

// errItemFailed rolls a batch's transaction back when one of its items
// failed, so that each item runs again alone.
var errItemFailed = errors.New("an item of the batch failed")

// failed reports whether out is a retry or a dead letter.
func failed(out engine.Outcome) bool {
	return out.Err() != nil || out.String() == "retry" || out.String() == "terminal"
}

// inTx runs fn in one transaction of the store when it has them
// (ports.Transactor), else as it is.
// The transaction is one span, "chain.tx", under the pass's.
func (c *Chain) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	tx, ok := c.Store.(ports.Transactor)
	if !ok {
		return fn(ctx)
	}
	ctx, span := tracing.Start(ctx, "chain.tx")
	defer span.End()
	err := tx.InTx(ctx, fn)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// runBatch runs one controller over items in one transaction, in target
// key order (so concurrent batches take the rows and locks they share, the
// environment cap's among them, in one order): their reads, their writes
// and their follow-up enqueues (the queue joins the store's transaction)
// commit together, once. When an item fails the transaction rolls back
// and every item runs again alone, so one failure costs the others
// nothing. The jobs the items created are handed to their agents after
// the commit (handOverAll): an agent never sees a job that might not be
// stored, and no transaction waits on an agent.
func (c *Chain) runBatch(ctx context.Context, items []engine.Item, one func(context.Context, engine.Item) engine.Outcome) []engine.Outcome {
	outs := make([]engine.Outcome, len(items))
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(items[a].Key.ScopeID, items[b].Key.ScopeID) })
	var b *batch
	err := c.inTx(ctx, func(ctx context.Context) error {
		b = &batch{size: len(items)}
		bctx := context.WithValue(ctx, batchKey{}, b)
		if len(items) > 1 || takesHandOff(items) {
			if err := c.prefetch(ctx, b, items); err != nil {
				return fmt.Errorf("read the batch's facts: %w", err)
			}
		}
		for _, i := range order {
			b.cur = i
			outs[i] = one(bctx, items[i])
			if failed(outs[i]) && len(items) > 1 {
				return errItemFailed
			}
		}
		if err := c.createJobs(bctx, b, outs); err != nil {
			return err
		}
		if err := c.writeDesired(ctx, b, outs); err != nil {
			return err
		}
		return c.flush(ctx, b)
	})
	switch {
	case errors.Is(err, errItemFailed):
		for i := range items {
			outs[i] = c.runBatch(ctx, items[i:i+1], one)[0]
		}
		return outs
	case err != nil:
		for i := range outs {
			if !failed(outs[i]) {
				outs[i] = engine.Retry(err)
			}
		}
		return outs
	}
	c.handOverAll(ctx, b.handovers, outs)
	return outs
}

// pendingDesired is a decision an item of a batch deferred (setDesired).
type pendingDesired struct {
	i     int // the item's index in the batch
	write ports.DesiredWrite
	then  func(changed bool) error
}

// writeDesired writes the decisions the batch's items deferred in one
// store call (ports.DesiredBatcher) and runs what each item does after
// its write. A failed write (or what follows it) is its item's retry and
// fails the batch, so that each item runs again alone.
func (c *Chain) writeDesired(ctx context.Context, b *batch, outs []engine.Outcome) error {
	if len(b.desired) == 0 {
		return nil
	}
	writes := make([]ports.DesiredWrite, len(b.desired))
	for i, p := range b.desired {
		writes[i] = p.write
	}
	res := c.Store.(ports.DesiredBatcher).DesiredSetMany(ctx, writes)
	for i, p := range b.desired {
		var err error
		switch {
		case i >= len(res):
			err = errors.New("the store returned no result for this write")
		case res[i].Err != nil:
			err = res[i].Err
		default:
			err = p.then(res[i].Changed)
		}
		if err != nil {
			outs[p.i] = engine.Retry(fmt.Errorf("desired release of %s: %w", p.write.Desired.Target, err))
			return errItemFailed
		}
	}
	b.desired = b.desired[:0]
	return nil
}

// pendingCreate is a job an item of a batch deferred (createJob).
type pendingCreate struct {
	i      int // the item's index in the batch
	params ports.JobCreateParams
	then   func(ctx context.Context, row ports.JobRow, err error) engine.Outcome
}

// createJobs creates the jobs the batch's items deferred in one store call
// (ports.Jobs.JobCreateMany) and continues each item's pass with its
// answer, in the batch (ctx is the batch's): the item's outcome is its
// continuation's, kept no later than the wake-up the pass had asked for. A
// failed continuation fails the batch, so that each item runs again alone.
func (c *Chain) createJobs(ctx context.Context, b *batch, outs []engine.Outcome) error {
	if len(b.creates) == 0 {
		return nil
	}
	creates := b.creates
	b.creates = nil
	ps := make([]ports.JobCreateParams, len(creates))
	for k, p := range creates {
		ps[k] = p.params
	}
	res := c.Store.JobCreateMany(ctx, ps)
	for k, p := range creates {
		r := ports.JobCreated{Err: errors.New("the store returned no result for this create")}
		if k < len(res) {
			r = res[k]
		}
		if r.Err == nil && r.Created {
			c.jobReached(&r.Row.Job)
		}
		b.cur = p.i
		outs[p.i] = p.then(ctx, r.Row, r.Err).NoLaterThan(outs[p.i].At())
		if failed(outs[p.i]) {
			return errItemFailed
		}
	}
	return nil
}

// flush decides the batch's deferred wakes (wakeDownstream) and stores
// its enqueues in one queue call.
func (c *Chain) flush(ctx context.Context, b *batch) error {
	if err := c.wakeDownstream(context.WithValue(ctx, batchKey{}, b), b); err != nil {
		return err
	}
	if len(b.enqueues) == 0 {
		return nil
	}
	if err := c.Queue.WorkEnqueue(ctx, b.enqueues...); err != nil {
		return fmt.Errorf("enqueue %d follow-ups: %w", len(b.enqueues), err)
	}
	b.enqueues = b.enqueues[:0]
	return nil
}

// handover is a pending job of a batch's item to hand to its agent.
type handover struct {
	i     int // the item's index in the batch
	f     *facts
	rel   *release.Release
	row   *ports.JobRow
	rt    route
	start time.Time

	// resume marks a claimed job to hand to its agent's ResumeJob
	// (ports.JobResumer) instead of Dispatch.
	resume bool

	skip bool // its outcome is decided already
	res  ports.JobDispatchResult
	err  error
}

// deferHandOver hands row to its agent after the batch's commit, or now
// when ctx is not in a batch; out is the pass's outcome until then.
func (c *Chain) deferHandOver(ctx context.Context, h handover) engine.Outcome {
	if b := batchOf(ctx); b != nil {
		h.i = b.cur
		b.handovers = append(b.handovers, h)
		return engine.Done()
	}
	outs := []engine.Outcome{engine.Done()}
	c.handOverAll(ctx, []handover{h}, outs)
	return outs[0]
}

// handOverParallel bounds the agent calls of one batch in flight at once.
const handOverParallel = 16

// handOverAll dispatches the pending jobs hs to their agents and records
// what each agent said, setting their items' outcomes (kept no later than
// the wake-up the pass had asked for): the jobs of in-process agents
// (ports.JobLeaser) are claimed first, in one transaction, so that no
// pass sends them again; the agents are called outside any transaction;
// their answers, and the follow-ups of jobs that ended at once, are
// stored in one more transaction. An agent that already reported (a fast
// one) wins: only the external id is added then.
func (c *Chain) handOverAll(ctx context.Context, hs []handover, outs []engine.Outcome) {
	if len(hs) == 0 {
		return
	}
	now := c.Clock.Now()
	var claims []*handover
	for k := range hs {
		h := &hs[k]
		if h.rt.agent == nil {
			h.skip, outs[h.i] = true, engine.Retry(fmt.Errorf("job %s: its agent went away; retrying", h.row.ID))
			continue
		}
		if ports.JobLeaseOf(c.Agents[h.rt.agent.Type]) > 0 && !h.resume { // a resumed job was claimed by its pass
			claims = append(claims, h)
		}
	}
	if len(claims) > 0 {
		// An in-process agent cannot tell a job it was sent from a new one
		// in another process: the job is claimed (its start time recorded)
		// before it is sent, so no pass sends it again; if the process dies
		// with it, its lease runs out (timeOut ends it as lost).
		err := c.inTx(ctx, func(ctx context.Context) error {
			for _, h := range claims {
				claim := h.row.Job
				claim.StartedAt = now
				claim.LeaseUntil = now.Add(ports.JobLeaseOf(c.Agents[h.rt.agent.Type]))
				claim.LeaseOwner = c.Owner
				v, err := c.Store.JobUpdate(ctx, claim, h.row.Version)
				if errors.Is(err, ports.ErrConflict) {
					h.skip, outs[h.i] = true, engine.RequeueAt(now) // it moved: recompute
					continue
				}
				if err != nil {
					return fmt.Errorf("claim job %s: %w", h.row.ID, err)
				}
				claimed := *h.row
				claimed.Job, claimed.Version = claim, v
				h.row = &claimed
			}
			return nil
		})
		if err != nil {
			for _, h := range claims {
				h.skip, outs[h.i] = true, engine.Retry(err)
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, handOverParallel)
	for k := range hs {
		h := &hs[k]
		if h.skip {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			h.res, h.err = c.send(ctx, h)
		}()
	}
	wg.Wait()
	wants := make([]engine.Outcome, len(hs))
	for k := range hs {
		wants[k] = outs[hs[k].i]
	}
	err := c.inTx(ctx, func(ctx context.Context) error {
		rb := &batch{}
		bctx := context.WithValue(ctx, batchKey{}, rb)
		// What every agent said is written in one call; record handles
		// each result (and writes again what lost its compare-and-swap).
		var ups []ports.JobUpdateParams
		var ks []int
		for k := range hs {
			if h := &hs[k]; !h.skip && h.err == nil {
				ups = append(ups, ports.JobUpdateParams{Job: c.dispatched(h, h.row), ExpectedVersion: h.row.Version})
				ks = append(ks, k)
			}
		}
		_, errs := c.Store.JobUpdateMany(ctx, ups)
		first := make(map[int]error, len(ks))
		for n, k := range ks {
			first[k] = errs[n]
		}
		for k := range hs {
			h := &hs[k]
			if h.skip {
				continue
			}
			rb.cur = h.i
			if h.err != nil {
				outs[h.i] = engine.Retry(fmt.Errorf("dispatch job %s to %s: %w", h.row.ID, h.rt.agent.ID, h.err))
				continue
			}
			outs[h.i] = c.record(bctx, h, first[k]).NoLaterThan(wants[k].At())
		}
		return c.flush(ctx, rb)
	})
	if err != nil {
		for k := range hs {
			if h := &hs[k]; !h.skip && h.err == nil {
				outs[h.i] = engine.Retry(err)
			}
		}
	}
}

// send hands one claimed or pending job to its agent. A configuration no
// retry can fix ends the job invalidIntegration; any other error releases
// the claim (nothing started) so that the next pass sends it.
func (c *Chain) send(ctx context.Context, h *handover) (res ports.JobDispatchResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("agent %s panicked: %v", h.rt.agent.ID, p)
		}
	}()
	row, rel, f := h.row, h.rel, h.f
	d := ports.JobDispatch{Job: row.Job, Agent: *h.rt.agent, Release: *rel, Version: h.rt.version,
		Deployment: f.Detail.Deployment, Environment: f.Detail.Environment, Resource: f.Detail.Resource}
	if h.resume {
		res, err = ports.ResumerOf(c.Agents[h.rt.agent.Type]).ResumeJob(ctx, d)
	} else {
		res, err = c.Agents[h.rt.agent.Type].Dispatch(ctx, d)
	}
	if errors.Is(err, release.ErrInvalid) {
		return ports.JobDispatchResult{Status: release.JobInvalidIntegration, Message: err.Error()}, nil
	}
	if err != nil {
		if !h.resume && !row.StartedAt.IsZero() && row.ExternalID == "" {
			unclaim := row.Job
			unclaim.StartedAt = time.Time{}
			_, _ = c.Store.JobUpdate(ctx, unclaim, row.Version)
		}
		return res, err
	}
	if res.Status == "" {
		res.Status = release.JobInProgress
	}
	return res, nil
}

// dispatched is row's job as the agent's answer to its dispatch leaves it:
// the external id, the lease from now, and the status the agent gave when
// the job was still pending (an agent that already reported wins), or,
// for a resumed job, the status its run reached meanwhile.
func (c *Chain) dispatched(h *handover, row *ports.JobRow) release.Job {
	res := h.res
	next := row.Job
	if next.ExternalID == "" {
		next.ExternalID = res.ExternalID
	}
	if lease := ports.JobLeaseOf(c.Agents[h.rt.agent.Type]); lease > 0 && !next.LeaseUntil.IsZero() {
		// The lease runs from the agent's acceptance: a send slower
		// than the lease must not end the job it started as lost.
		if until := c.Clock.Now().Add(lease); until.After(next.LeaseUntil) {
			next.LeaseUntil = until
		}
	}
	switch {
	case next.Status == release.JobPending && res.Status != release.JobPending:
		next.Status, next.Message = res.Status, res.Message
		if next.StartedAt.IsZero() {
			next.StartedAt = c.Clock.Now()
		}
		if next.Status.IsTerminal() {
			next.CompletedAt = next.StartedAt
		}
	case h.resume && res.Status != next.Status && next.Status.CanBecome(res.Status):
		// What the run did while nobody followed it (ResumeJob).
		next.Status, next.Message = res.Status, res.Message
		if next.Status.IsTerminal() {
			next.CompletedAt = c.Clock.Now()
		}
	}
	return next
}

// record stores what the agent said of a dispatched job (compare-and-swap,
// re-read on a conflict) and ends the pass: the follow-up of a job that
// ended at once, or a wake-up at its timeout. firstErr is the result of
// the first write, already made (JobUpdateMany).
func (c *Chain) record(ctx context.Context, h *handover, firstErr error) engine.Outcome {
	row, res := h.row, h.res
	var err error
	for attempt := range 5 {
		next := c.dispatched(h, row)
		if attempt == 0 {
			err = firstErr
		} else {
			_, err = c.Store.JobUpdate(ctx, next, row.Version)
		}
		if err == nil && next.Status != row.Status {
			c.jobReached(&next)
		}
		if !errors.Is(err, ports.ErrConflict) {
			break
		}
		fresh, gerr := c.Store.JobGet(ctx, row.ID)
		if gerr != nil {
			return engine.Retry(gerr)
		}
		row = &fresh
	}
	if err != nil {
		return engine.Retry(fmt.Errorf("record dispatch of job %s: %w", row.ID, err))
	}
	agent := h.rt.agent
	action, reason := "dispatched", "job-created"
	if h.resume {
		action, reason = "resumed", "job-lease-ran-out"
	}
	c.log(ctx, true, KindJobDispatch, h.rel.Target.Key(), action, reason, h.start, slog.String("job", row.ID),
		slog.String("agent", agent.ID), slog.String("external_id", res.ExternalID), slog.String("status", string(res.Status)))
	if res.Status.IsTerminal() {
		return c.afterJobEnded(ctx, row)
	}
	out := engine.Done()
	if limit := h.f.Detail.Deployment.JobTimeout(); limit > 0 {
		out = engine.RequeueAt(c.Clock.Now().Add(limit)) // time it out then, unless it ended
	}
	if lease := ports.JobLeaseOf(c.Agents[agent.Type]); lease > 0 {
		// Look at its lease when it would run out: renewed, the pass
		// looks again at the new end; else it ends the job as lost.
		out = out.NoLaterThan(c.Clock.Now().Add(lease))
		// And when its owner's liveness may lapse: a lapsed owner's job
		// is lost at once, not when its lease runs out.
		if c.Liveness != nil && row.LeaseOwner != "" {
			if until, err := c.Liveness.LivenessGet(ctx, row.LeaseOwner); err == nil && !until.IsZero() {
				out = out.NoLaterThan(until)
			}
		}
	}
	return out
}
