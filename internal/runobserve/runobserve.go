// Package runobserve is what the agent runtimes (process, kubernetes)
// share to write their observations through the run store at the right
// moment: an observation waits until the run is in the state it belongs
// to (the launch's own move landed; the run is running before its exit is
// written), so it never races the executor's compare-and-swap of the
// launch, and an exit 0 carries the kind's "work done" fact.
//
// Invariants: An observation is written only once the run is in the state it
// belongs to, or dropped after the wait (logged); a write to a run that is
// gone ends its observer; `Keys` holds at most its size (`DefaultKeys`),
// newest kept, and of concurrent claims of one key one wins
package runobserve

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// DefaultPoll is how often Await re-reads the run. The wait is short: the
// executor writes the launch's move right after the launch returns.
const DefaultPoll = 20 * time.Millisecond

// Lander waits for runs to reach the state an observation belongs to.
type Lander struct {
	Store ports.RunStore
	// Wait bounds one Await; after it the observation is dropped (logged
	// as agent.observation_dropped) and the heartbeat staleness rule
	// catches the run.
	Wait time.Duration
	// Poll is the re-read interval (DefaultPoll when zero).
	Poll   time.Duration
	Logger *slog.Logger
}

// Await re-reads run ref until ready(state) holds and reports whether it
// did. It gives up (false) when pending(state) no longer holds, when stop
// is closed, when the run is gone, or after Wait.
func (l Lander) Await(ctx context.Context, ref reconcile.RunRef, stop <-chan struct{}, check func(reconcile.State) (ready, pending bool)) bool {
	deadline := time.NewTimer(l.Wait)
	defer deadline.Stop()
	every := l.Poll
	if every <= 0 {
		every = DefaultPoll
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	for {
		row, err := l.Store.RunGet(ctx, ref)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			return false
		case err == nil:
			ready, pending := check(row.State)
			if ready {
				return true
			}
			if !pending {
				return false
			}
		}
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		case <-deadline.C:
			if l.Logger != nil {
				l.Logger.Warn("agent.observation_dropped", "kind", ref.Kind, "id", ref.ID, "state", row.State)
			}
			return false
		case <-poll.C:
		}
	}
}

// Launched is Await's check for the first observation of an agent: ready
// once the run is in a state where its agent runs, pending while it is
// still queued.
func Launched(k reconcile.RunKind) func(reconcile.State) (bool, bool) {
	m := reconcile.MachineFor(k)
	return func(st reconcile.State) (bool, bool) { return m.RunsAgent(st), st == reconcile.RepoQueued }
}

// Running is Await's check for an exit: ready once the run is in its
// running state (the last agent state), pending while it is in another
// agent state. A provisioning run must see its pod up first, or a fast
// agent's success would read as a dead pod.
func Running(k reconcile.RunKind) func(reconcile.State) (bool, bool) {
	m := reconcile.MachineFor(k)
	running := m.Agent[len(m.Agent)-1]
	return func(st reconcile.State) (bool, bool) { return st == running, m.RunsAgent(st) }
}

// DonePatch is what an exit 0 reports besides the pod: the kind's "work
// done" field (review_done for a review, turn_done for a persistent agent's
// turn; the turn's end, not the agent, counts its messages as read); nil for
// the other kinds.
func DonePatch(k reconcile.RunKind) map[string]any {
	switch k {
	case reconcile.KindPRReview:
		return map[string]any{"review_done": true}
	case reconcile.KindPersistentAgent:
		return map[string]any{"turn_done": true}
	}
	return nil
}
