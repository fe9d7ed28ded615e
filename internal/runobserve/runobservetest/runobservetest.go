// Package runobservetest is what the agent runtimes' tests share: a run
// store that hands every observation to the test, and a log that records
// what a runtime says it did (agent.start, agent.release, ...) by run.
package runobservetest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// Wait bounds every wait for an observation.
const Wait = 20 * time.Second

// Store is the part of a run store a runtime uses: runs by ref (each of
// repository Repo), and every observation handed to the test on Observed.
type Store struct {
	ports.RunStore
	// Repo is every run's repository.
	Repo string
	// Every makes every run exist, in no state an observation waits for,
	// so observers end at once and write nothing.
	Every bool
	// Observed receives every observation written.
	Observed chan ports.RunObserveParams

	mu     sync.Mutex
	states map[reconcile.RunRef]reconcile.State
}

// NewStore returns a store of no run whose runs belong to repo.
func NewStore(repo string) *Store {
	return &Store{Repo: repo, Observed: make(chan ports.RunObserveParams, 64), states: map[reconcile.RunRef]reconcile.State{}}
}

// RunGet returns the run's state.
func (s *Store) RunGet(_ context.Context, ref reconcile.RunRef) (ports.RunRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[ref]
	if !ok && !s.Every {
		return ports.RunRow{}, ports.ErrNotFound
	}
	return ports.RunRow{Ref: ref, State: st, Repo: s.Repo}, nil
}

// RunObserve hands o to the test.
func (s *Store) RunObserve(_ context.Context, o ports.RunObserveParams) (int64, error) {
	s.Observed <- o
	return 1, nil
}

// Set puts run ref in state st (creating it).
func (s *Store) Set(ref reconcile.RunRef, st reconcile.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[ref] = st
}

// Delete removes run ref.
func (s *Store) Delete(ref reconcile.RunRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.states, ref)
}

// Next returns the next observation, failing the test after Wait.
func (s *Store) Next(t testing.TB) ports.RunObserveParams {
	t.Helper()
	select {
	case o := <-s.Observed:
		return o
	case <-time.After(Wait):
		t.Fatal("no observation")
		return ports.RunObserveParams{}
	}
}

// Event is one log record of a runtime: its message, run and pid (zero
// when it names none).
type Event struct {
	Msg string
	Ref reconcile.RunRef
	Pid int
}

// Events is a slog.Handler keeping every record as an Event.
type Events struct {
	mu  sync.Mutex
	all []Event
}

// Logger returns a logger writing to e.
func (e *Events) Logger() *slog.Logger { return slog.New(e) }

// Enabled is true at every level.
func (e *Events) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs returns e: records keep only their own attributes.
func (e *Events) WithAttrs([]slog.Attr) slog.Handler { return e }

// WithGroup returns e.
func (e *Events) WithGroup(string) slog.Handler { return e }

// Handle keeps r's message and its kind, id and pid attributes.
func (e *Events) Handle(_ context.Context, r slog.Record) error {
	ev := Event{Msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "kind":
			ev.Ref.Kind = reconcile.RunKind(a.Value.String())
		case "id":
			ev.Ref.ID = a.Value.String()
		case "pid":
			ev.Pid = int(a.Value.Int64())
		}
		return true
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
	return nil
}

// Of returns the events with message msg about ref, oldest first.
func (e *Events) Of(msg string, ref reconcile.RunRef) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, ev := range e.all {
		if ev.Msg == msg && ev.Ref == ref {
			out = append(out, ev)
		}
	}
	return out
}

// Count is the number of events with message msg about ref.
func (e *Events) Count(msg string, ref reconcile.RunRef) int { return len(e.Of(msg, ref)) }
