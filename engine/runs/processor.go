package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// Scope is the scope type of run work items: (kind, "run", id).
const Scope = "run"

// Key is the work key of a run.
func Key(ref reconcile.RunRef) ports.WorkKey {
	return ports.WorkKey{Kind: string(ref.Kind), ScopeType: Scope, ScopeID: ref.ID}
}

// Decision outcomes logged on reconcile.decision.
const (
	OutcomeApplied  = "applied"
	OutcomeStale    = "stale"
	OutcomeDeferred = "deferred"
	OutcomeError    = "error"
)

// Processor reconciles the runs of one kind: build the snapshot through
// the store port, take the pure decision, apply the one action under
// compare-and-swap.
type Processor struct {
	Kind   reconcile.RunKind
	Store  ports.RunStore
	Queue  ports.Queue
	Agents ports.AgentRuntime
	Code   ports.CodeHost
	Config reconcile.Config
	Clock  ports.Clock
	Logger *slog.Logger
	// GlobalSlots and RepoSlots limit concurrent agents (0 = unlimited).
	GlobalSlots, RepoSlots int
	// Metrics counts the decisions by kind and action (nil: none).
	Metrics *engine.Metrics
}

// Process implements engine.Processor.
func (p *Processor) Process(ctx context.Context, it engine.Item) engine.Outcome {
	start := time.Now()
	ref := reconcile.RunRef{Kind: p.Kind, ID: it.Key.ScopeID}
	snap, row, err := p.Snapshot(ctx, ref)
	if errors.Is(err, ports.ErrNotFound) {
		return engine.Done() // deleted: nothing to reconcile
	}
	if err != nil {
		p.log(ctx, slog.LevelError, ref, nil, OutcomeError, start, err)
		return engine.Retry(err)
	}
	if p.Logger.Enabled(ctx, slog.LevelDebug) {
		if b, err := reconcile.EncodeSnapshot(snap); err == nil {
			p.Logger.Debug("reconcile.snapshot", "kind", ref.Kind, "id", ref.ID, "snapshot", json.RawMessage(b))
		}
	}
	action := reconcile.Decide(snap)
	p.Metrics.Decision(string(p.Kind), string(action.Type()))
	outcome, out, err := p.Apply(ctx, row, snap, action)
	lvl := slog.LevelInfo
	if err != nil {
		lvl = slog.LevelError
		p.noteWaiting(ctx, row, action, err)
	}
	p.log(ctx, lvl, ref, action, outcome, start, err)
	return out
}

// DecisionWaiting is the decision-history action of a decision that could
// not be applied (no agent runtime, a failed launch): its Reason says why
// the run waits, so runs get and the console show it, not only the ERROR
// log line.
const DecisionWaiting = "waiting"

// maxWaitReason bounds the recorded reason.
const maxWaitReason = 300

// noteWaiting records why the decided action a could not be applied to
// row, in the run's decision history, unless the newest entry already
// says so (a retry loop records it once). A lost race changes nothing:
// the next pass decides again.
func (p *Processor) noteWaiting(ctx context.Context, row ports.RunRow, a reconcile.Action, cause error) {
	reason := strings.ReplaceAll(fmt.Sprintf("%s could not be applied: %v", a.Type(), cause), "\x00", "")
	if len(reason) > maxWaitReason {
		reason = strings.ToValidUTF8(reason[:maxWaitReason], "") + "…"
	}
	if last, err := p.Store.RunDecisions(ctx, row.Ref, 1); err != nil ||
		(len(last) == 1 && last[0].Action == DecisionWaiting && last[0].Reason == reason) {
		return
	}
	_, err := p.Store.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: row.Version, State: row.State, Body: row.Body,
		Decision: &ports.RunDecision{Action: DecisionWaiting, Reason: reason}})
	if err != nil && !errors.Is(err, ports.ErrConflict) {
		p.Logger.LogAttrs(ctx, slog.LevelWarn, "runs.note_waiting_failed", slog.String("run", row.Ref.String()), slog.String("error", err.Error()))
	}
}

func (p *Processor) log(ctx context.Context, lvl slog.Level, ref reconcile.RunRef, a reconcile.Action, outcome string, start time.Time, err error) {
	attrs := []slog.Attr{slog.String("kind", string(ref.Kind)), slog.String("id", ref.ID)}
	if a != nil {
		attrs = append(attrs, slog.String("action", string(a.Type())), slog.String("reason", a.Why()))
		if m, ok := a.(reconcile.Moving); ok {
			e := m.Move()
			attrs = append(attrs, slog.String("from", string(e.From)), slog.String("to", string(e.To)))
		}
	}
	attrs = append(attrs, slog.String("outcome", outcome), slog.Duration("duration", time.Since(start)))
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	p.Logger.LogAttrs(ctx, lvl, "reconcile.decision", attrs...)
}

// Snapshot reads the run and what it depends on into a frozen snapshot.
// Reads of secondary sources that fail are recorded as read errors in the
// snapshot (the decision defers); a failed read of the run itself is an error.
func (p *Processor) Snapshot(ctx context.Context, ref reconcile.RunRef) (reconcile.Snapshot, ports.RunRow, error) {
	row, err := p.Store.RunGet(ctx, ref)
	if err != nil {
		return nil, row, fmt.Errorf("snapshot %s: %w", ref, err)
	}
	w := reconcile.World{
		Now: p.Clock.Now(),
		// Seeds stay below 2^53 so every JSON tool keeps them exact and a
		// logged snapshot replays to the same decision.
		JitterSeed: rand.Uint64() >> 11,
		Pod:        row.Pod,
		Heartbeat:  row.Heartbeat,
		Settings:   row.Settings,
	}
	p.Config.ApplyDefaults(&w.Settings)
	counts, err := p.Store.RunCounts(ctx, row.Repo)
	if err != nil {
		w.ReadErrors = append(w.ReadErrors, reconcile.ReadError{Source: "capacity", Message: err.Error()})
	}
	w.Capacity = reconcile.Capacity{GlobalActive: counts.GlobalActive, GlobalLimit: p.GlobalSlots, RepoActive: counts.RepoActive, RepoLimit: p.RepoSlots}
	var deps []reconcile.Dependency
	if len(row.DependsOn) > 0 {
		states, err := p.Store.RunStates(ctx, ref.Kind, row.DependsOn)
		if err != nil {
			w.ReadErrors = append(w.ReadErrors, reconcile.ReadError{Source: "dependencies", Message: err.Error()})
		}
		for _, id := range row.DependsOn {
			st, ok := states[id]
			if !ok && err == nil {
				st = reconcile.RepoFailed // a vanished dependency can never complete
			}
			deps = append(deps, reconcile.Dependency{ID: id, State: st})
		}
	}
	if len(row.Subtasks) > 0 {
		ids := make([]string, len(row.Subtasks))
		for i, st := range row.Subtasks {
			ids[i] = st.ID
		}
		states, err := p.Store.RunStates(ctx, reconcile.KindRepo, ids)
		if err != nil {
			w.ReadErrors = append(w.ReadErrors, reconcile.ReadError{Source: "subtasks", Message: err.Error()})
		}
		row.Subtasks = slices.Clone(row.Subtasks)
		for i := range row.Subtasks {
			st, ok := states[row.Subtasks[i].ID]
			if !ok && err == nil {
				st = reconcile.RepoFailed // a vanished subtask never completes
			}
			row.Subtasks[i].State = st
		}
	}
	snap, err := snapshotOf(row, w, deps)
	return snap, row, err
}

// snapshotOf decodes the row body into the kind's snapshot; the row's
// columns (id, state, version) are authoritative over the body.
func snapshotOf(row ports.RunRow, w reconcile.World, deps []reconcile.Dependency) (reconcile.Snapshot, error) {
	dec := func(v any) error {
		if len(row.Body) == 0 {
			return nil
		}
		if err := json.Unmarshal(row.Body, v); err != nil {
			return fmt.Errorf("decode %s body: %w", row.Ref, err)
		}
		return nil
	}
	switch row.Ref.Kind {
	case reconcile.KindRepo:
		s := &reconcile.RepoSnapshot{World: w, PR: row.PR, Dependencies: deps, Subtasks: row.Subtasks}
		if err := dec(&s.Run); err != nil {
			return nil, err
		}
		s.Run.ID, s.Run.State, s.Run.Version, s.Run.Repo = row.Ref.ID, row.State, row.Version, row.Repo
		return s, nil
	case reconcile.KindStandalone:
		s := &reconcile.StandaloneSnapshot{World: w}
		if err := dec(&s.Run); err != nil {
			return nil, err
		}
		s.Run.ID, s.Run.State, s.Run.Version = row.Ref.ID, row.State, row.Version
		return s, nil
	case reconcile.KindPRReview:
		s := &reconcile.PRReviewSnapshot{World: w, PR: row.PR}
		if err := dec(&s.Run); err != nil {
			return nil, err
		}
		s.Run.ID, s.Run.State, s.Run.Version = row.Ref.ID, row.State, row.Version
		return s, nil
	case reconcile.KindPersistentAgent:
		s := &reconcile.AgentSnapshot{World: w}
		if err := dec(&s.Run); err != nil {
			return nil, err
		}
		s.Run.ID, s.Run.State, s.Run.Version = row.Ref.ID, row.State, row.Version
		return s, nil
	}
	return nil, fmt.Errorf("snapshot: unknown kind %q", row.Ref.Kind)
}

// Apply executes one action against the row the snapshot was built from. It
// returns the logged outcome, the work outcome and any error.
func (p *Processor) Apply(ctx context.Context, row ports.RunRow, snap reconcile.Snapshot, a reconcile.Action) (string, engine.Outcome, error) {
	now := p.Clock.Now()
	ref := row.Ref
	key := fmt.Sprintf("%s:%d:%s", ref, row.Version, a.Type())
	state := row.State
	resetPod := false
	var patch reconcile.Patch
	switch a := a.(type) {
	case reconcile.Noop:
		if !a.WakeAt.IsZero() {
			return OutcomeApplied, engine.RequeueAt(a.WakeAt), nil
		}
		return OutcomeApplied, engine.Done(), nil
	case reconcile.RequeueSoon:
		return OutcomeDeferred, engine.RequeueAt(a.At), nil
	case reconcile.DeferWithBackoff:
		ctl := snap.Controls()
		ctl.BackoffUntil, ctl.Attempts = a.Until, a.Attempts
		switch _, err := p.write(ctx, row, snap, state, nil, &ctl, false, a); {
		case errors.Is(err, ports.ErrConflict):
			return OutcomeStale, engine.RequeueAt(now), nil
		case err != nil:
			return OutcomeError, engine.Retry(err), err
		}
		return OutcomeDeferred, engine.RequeueAt(a.Until), nil
	case reconcile.AutoMergePR:
		if err := p.Code.PRMerge(ctx, ports.PRMergeParams{URL: a.PRURL, HeadSHA: a.HeadSHA, IdempotencyKey: key}); err != nil {
			return OutcomeError, engine.Retry(err), err
		}
		return OutcomeApplied, engine.Done(), nil
	case reconcile.LaunchReview:
		if err := p.launchReview(ctx, row, a, now); err != nil {
			return OutcomeError, engine.Retry(err), err
		}
		t := true
		patch.ReviewRunning = &t
	case reconcile.PatchStatus:
		patch = a.Patch
	case reconcile.ClearControlIntent:
		patch.ClearIntent = true
	case reconcile.ReleasePod:
		if err := p.Agents.AgentRelease(ctx, ref, key); err != nil {
			return OutcomeError, engine.Retry(err), err
		}
		f := false
		patch.PodHeld = &f
	case reconcile.Moving:
		edge := a.Move()
		m := reconcile.MachineFor(ref.Kind)
		if edge.From != row.State || !m.Allowed(edge.From, edge.To) {
			err := fmt.Errorf("decision %s %s→%s is not an edge from %s", a.Type(), edge.From, edge.To, row.State)
			return OutcomeError, engine.Terminal(err), err
		}
		if reconcile.ReleasesPod(snap, a) {
			// Release before the write: a lost write re-decides and
			// releases again (idempotent), while a release lost after the
			// write would leave the pod running for good.
			if err := p.Agents.AgentRelease(ctx, ref, key+":release"); err != nil {
				return OutcomeError, engine.Retry(err), err
			}
			if ref.Kind == reconcile.KindPersistentAgent {
				f := false
				patch.PodHeld = &f
			}
		}
		if err := p.sideEffect(ctx, snap, a, key, &patch); err != nil {
			return OutcomeError, engine.Retry(err), err
		}
		if tp := transitionPatch(a); tp != nil {
			mergePatch(&patch, tp)
		}
		state = edge.To
		resetPod = launches(a)
	default:
		err := fmt.Errorf("no executor for action %s", a.Type())
		return OutcomeError, engine.Terminal(err), err
	}
	// Any applied write clears the reconcile backoff.
	ctl := snap.Controls()
	ctl.BackoffUntil, ctl.Attempts = time.Time{}, 0
	switch _, err := p.write(ctx, row, snap, state, &patch, &ctl, resetPod, a); {
	case errors.Is(err, ports.ErrConflict):
		return OutcomeStale, engine.RequeueAt(now), nil
	case err != nil:
		return OutcomeError, engine.Retry(err), err
	}
	if reconcile.MachineFor(ref.Kind).IsTerminal(state) {
		p.wakeDependents(ctx, ref, now)
		return OutcomeApplied, engine.Done(), nil
	}
	return OutcomeApplied, engine.RequeueAt(now), nil // the new state gets its own pass
}

// wakeDependents enqueues the runs waiting on ref, which just finished
// (ports.RunStore.RunDependents), so they see it at once instead of at the
// next resync. A failure is logged: the resync sweep wakes them later.
func (p *Processor) wakeDependents(ctx context.Context, ref reconcile.RunRef, now time.Time) {
	ids, err := p.Store.RunDependents(ctx, ref.Kind, ref.ID)
	if err == nil && len(ids) > 0 {
		items := make([]ports.EnqueueParams, len(ids))
		for i, id := range ids {
			items[i] = ports.EnqueueParams{Key: Key(reconcile.RunRef{Kind: ref.Kind, ID: id}), EventTime: now}
		}
		err = p.Queue.WorkEnqueue(ctx, items...)
	}
	if err != nil {
		p.Logger.LogAttrs(ctx, slog.LevelWarn, "runs.wake_dependents_failed", slog.String("run", ref.String()), slog.String("error", err.Error()))
	}
}

// sideEffect performs the port call a moving action needs, under the
// action's idempotency key, and adds the fields the launch sets.
func (p *Processor) sideEffect(ctx context.Context, snap reconcile.Snapshot, a reconcile.Action, key string, patch *reconcile.Patch) error {
	ref := snap.Ref()
	launch := func(purpose ports.AgentPurpose, trigger string) error {
		return p.Agents.AgentLaunch(ctx, ports.AgentLaunchParams{Ref: ref, Purpose: purpose, Trigger: trigger, IdempotencyKey: key})
	}
	switch a := a.(type) {
	case reconcile.RequeueForAgent:
		if a.Trigger != "" {
			return launch(ports.PurposeResume, a.Trigger)
		}
		return launch(ports.PurposeRun, "")
	case reconcile.EnqueueAgent:
		return launch(ports.PurposeRun, "")
	case reconcile.LaunchReviewRun:
		sha, done := a.HeadSHA, false
		patch.ReviewedSHA, patch.ReviewDone = &sha, &done
		return launch(ports.PurposeReview, "")
	case reconcile.EnqueueTurn:
		done := false
		patch.TurnDone = &done
		return launch(ports.PurposeTurn, "")
	case reconcile.SubmitReview:
		var url string
		if s, ok := snap.(*reconcile.PRReviewSnapshot); ok {
			url = s.Run.PRURL
		}
		return p.Code.PRSubmitReview(ctx, ports.PRSubmitParams{Ref: ref, URL: url, IdempotencyKey: key})
	}
	return nil
}

// launchReview creates the review run for a repo run's open PR (idempotent:
// one review run per PR head) and enqueues it.
func (p *Processor) launchReview(ctx context.Context, row ports.RunRow, a reconcile.LaunchReview, now time.Time) error {
	head := ""
	if row.PR != nil {
		head = row.PR.HeadSHA
	}
	id := row.Ref.ID + "-review"
	if head != "" {
		id += "-" + head[:min(len(head), 12)]
	}
	body, err := json.Marshal(reconcile.PRReviewRun{PRURL: a.PRURL})
	if err != nil {
		return err
	}
	rv := ports.RunRow{Ref: reconcile.RunRef{Kind: reconcile.KindPRReview, ID: id}, State: reconcile.ReviewQueued,
		Repo: row.Repo, Body: body, PR: row.PR, Settings: row.Settings}
	if _, err := p.Store.RunCreate(ctx, rv); err != nil && !errors.Is(err, ports.ErrConflict) {
		return fmt.Errorf("launch review %s: %w", id, err)
	}
	return p.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: Key(rv.Ref), EventTime: now})
}

// decisionOf is the history entry of a kernel decision: its action type,
// reason and, for a move, its edge.
func decisionOf(a reconcile.Action) *ports.RunDecision {
	d := &ports.RunDecision{Action: string(a.Type()), Reason: a.Why()}
	if m, ok := a.(reconcile.Moving); ok {
		e := m.Move()
		d.From, d.To = e.From, e.To
	}
	return d
}

// launches reports whether the action starts a new agent pod, so the
// previous attempt's observed pod must be forgotten.
func launches(a reconcile.Action) bool {
	switch a.(type) {
	case reconcile.RequeueForAgent, reconcile.EnqueueAgent, reconcile.LaunchReviewRun, reconcile.EnqueueTurn:
		return true
	}
	return false
}

func transitionPatch(a reconcile.Action) *reconcile.Patch {
	switch a := a.(type) {
	case reconcile.Transition:
		return a.Patch
	case reconcile.ResumeAgent:
		return a.Patch
	case reconcile.EnqueueTurn:
		return a.Patch
	}
	return nil
}

// write applies the patch and reconcile columns to the row body and writes
// state and body in one compare-and-swap, recording the decision a in the
// run's history with it.
func (p *Processor) write(ctx context.Context, row ports.RunRow, snap reconcile.Snapshot, state reconcile.State, patch *reconcile.Patch, ctl *reconcile.Reconcile, resetPod bool, a reconcile.Action) (int64, error) {
	body, err := patchedBody(snap, patch, ctl)
	if err != nil {
		return 0, err
	}
	v, err := p.Store.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: row.Version, State: state, Body: body, ResetPod: resetPod,
		Decision: decisionOf(a)})
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", row.Ref, err)
	}
	return v, nil
}
