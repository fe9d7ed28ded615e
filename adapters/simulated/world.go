package simulated

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// World is a ports.AgentRuntime and ports.CodeHost that plays the outside
// world for the demo daemon: every launched agent gets a pod that
// becomes ready one step later and finishes its work two steps after that
// (a repo run opens an approved pull request with passing checks, a
// standalone run exits 0, an agent turn and a review report done), and a
// merge lands one step after it was asked for. Each observation is written
// through the run store, as a pod watcher or PR poller would, and then
// wake is called so the engine reconciles the run at once.
//
// Launches, releases, merges and submissions are idempotent by key. Close
// stops every pending step.
type World struct {
	store ports.RunStore
	clock ports.Clock
	step  time.Duration
	wake  func(context.Context, reconcile.RunRef)

	mu     sync.Mutex
	seen   map[string]bool
	prs    map[string]reconcile.RunRef // PR URL → the repo run that opened it
	timers []*time.Timer
	closed bool
	stop   chan struct{} // closed by Close
	// last is, per run, the done signal of the observation scheduled last:
	// each waits for the one before, so a slow goroutine can never let a
	// pod's "ready" land after its "terminated".
	last map[reconcile.RunRef]chan struct{}
}

var (
	_ ports.AgentRuntime = (*World)(nil)
	_ ports.CodeHost     = (*World)(nil)
)

// NewWorld returns a simulated world that writes observations to store,
// stamped by clock, one step apart, calling wake after each.
func NewWorld(store ports.RunStore, clock ports.Clock, step time.Duration, wake func(context.Context, reconcile.RunRef)) *World {
	return &World{store: store, clock: clock, step: step, wake: wake, stop: make(chan struct{}),
		seen: map[string]bool{}, prs: map[string]reconcile.RunRef{}, last: map[reconcile.RunRef]chan struct{}{}}
}

// Close stops the steps not yet taken; later calls schedule nothing.
func (s *World) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		close(s.stop)
	}
	s.closed = true
	for _, t := range s.timers {
		t.Stop()
	}
	s.timers = nil
}

// first reports whether key is new, and records it.
func (s *World) first(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[key] {
		return false
	}
	s.seen[key] = true
	return true
}

// after observes o on ref after n steps, then wakes the run. With states
// given, the observation waits (a step at a time) until the run is in one
// of them: an agent's outcome only arrives once the engine has the run
// running, however slow the engine is. A run's observations are written
// in the order they were scheduled.
func (s *World) after(n int, o ports.RunObserveParams, states ...reconcile.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	prev, done := s.last[o.Ref], make(chan struct{})
	s.last[o.Ref] = done
	s.timers = append(s.timers, time.AfterFunc(time.Duration(n)*s.step, func() {
		defer close(done)
		if prev != nil {
			select {
			case <-prev:
			case <-s.stop:
				return
			}
		}
		ctx := context.Background()
		if len(states) > 0 {
			row, err := s.store.RunGet(ctx, o.Ref)
			if err != nil {
				return // the run is gone: nothing to observe
			}
			if !slices.Contains(states, row.State) {
				if !reconcile.MachineFor(o.Ref.Kind).IsTerminal(row.State) {
					s.after(1, o, states...)
				}
				return
			}
		}
		o.Heartbeat = s.clock.Now()
		if _, err := s.store.RunObserve(ctx, o); err != nil {
			return // the run is gone: nothing to observe
		}
		s.wake(ctx, o.Ref)
	}))
}

// AgentLaunch starts the simulated pod of the run and scripts what the
// agent in it does.
func (s *World) AgentLaunch(_ context.Context, p ports.AgentLaunchParams) error {
	if !s.first(p.IdempotencyKey) {
		return nil
	}
	ref := p.Ref
	pod := "sim-" + strings.ReplaceAll(p.IdempotencyKey, "/", "-")
	s.after(1, ports.RunObserveParams{Ref: ref, Pod: &reconcile.Pod{Name: pod, Phase: reconcile.PodReady}})
	switch ref.Kind {
	case reconcile.KindRepo:
		url := "https://git.example.com/demo/" + ref.ID + "/pull/1"
		s.mu.Lock()
		s.prs[url] = ref
		s.mu.Unlock()
		s.after(3, ports.RunObserveParams{Ref: ref, PR: &reconcile.PullRequest{
			URL: url, Number: 1, State: reconcile.PROpen, Mergeable: true,
			Checks: reconcile.ChecksPassing, Review: reconcile.ReviewApproved,
			HeadSHA: fmt.Sprintf("%040x", len(p.IdempotencyKey)),
		}}, reconcile.RepoRunning)
	case reconcile.KindStandalone:
		zero := 0
		s.after(3, ports.RunObserveParams{Ref: ref, Pod: &reconcile.Pod{Name: pod, Phase: reconcile.PodTerminated, ExitCode: &zero}}, reconcile.StandaloneRunning)
	case reconcile.KindPersistentAgent:
		s.after(3, ports.RunObserveParams{Ref: ref, Patch: map[string]any{"turn_done": true}}, reconcile.AgentRunning)
	case reconcile.KindPRReview:
		s.after(3, ports.RunObserveParams{Ref: ref, Patch: map[string]any{"review_done": true}}, reconcile.ReviewRunning)
	}
	return nil
}

// AgentRelease lets the simulated pod go.
func (s *World) AgentRelease(_ context.Context, ref reconcile.RunRef, key string) error {
	if s.first(key) {
		s.after(1, ports.RunObserveParams{Ref: ref, Pod: &reconcile.Pod{Phase: reconcile.PodTerminated}})
	}
	return nil
}

// PRMerge merges a pull request a simulated repo run opened, one step
// later.
func (s *World) PRMerge(ctx context.Context, p ports.PRMergeParams) error {
	s.mu.Lock()
	ref, ok := s.prs[p.URL]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("merge %s: %w", p.URL, ports.ErrNotFound)
	}
	if !s.first(p.IdempotencyKey) {
		return nil
	}
	row, err := s.store.RunGet(ctx, ref)
	if err != nil {
		return fmt.Errorf("merge %s: %w", p.URL, err)
	}
	if row.PR == nil {
		return fmt.Errorf("merge %s: run %s has no pull request", p.URL, ref)
	}
	pr := *row.PR
	pr.State, pr.Merged = reconcile.PRMerged, true
	s.after(1, ports.RunObserveParams{Ref: ref, PR: &pr})
	return nil
}

// PRSubmitReview accepts the review; a submitted review needs nothing more
// from the outside world.
func (s *World) PRSubmitReview(_ context.Context, p ports.PRSubmitParams) error {
	s.first(p.IdempotencyKey)
	return nil
}
