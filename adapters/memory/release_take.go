package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/reconcilerhq/reconciler/ports"
)

var _ ports.JobTaker = (*ReleaseStore)(nil)

// JobTake hands out the oldest takeable job of p.AgentID under the store's
// write lock.
func (s *ReleaseStore) JobTake(ctx context.Context, p ports.JobTakeParams) (ports.JobRow, error) {
	op := "take a job of agent " + p.AgentID
	if err := ports.ValidateJobTake(p); err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	defer s.lock(ctx)()
	now := s.now()
	var best *ports.JobRow
	for j := range s.jobs.activeByAgent[p.AgentID] {
		if j.Takeable(now) && (best == nil || jobOrder(j, best) < 0) {
			best = j
		}
	}
	if best == nil {
		return ports.JobRow{}, fmt.Errorf("%s: none to take: %w", op, ports.ErrNotFound)
	}
	next, err := normJob(best.Taken(now, p.Settings, p.Taker))
	if err == nil {
		err = next.Validate()
	}
	if err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	before := *best
	s.jobs.replace(best, func() { best.Job = next; best.Version++; best.UpdatedAt = now })
	s.refreshProgression(best.Target(), best.VersionID)
	s.onUndo(ctx, func() {
		s.jobs.replace(best, func() { *best = before })
		s.refreshProgression(best.Target(), best.VersionID)
	})
	return copyJob(best), nil
}

// JobTakeNotify returns a channel woken when a pending job is created,
// until ctx ends.
func (s *ReleaseStore) JobTakeNotify(ctx context.Context) <-chan struct{} {
	return s.takers.subscribe(ctx)
}

// wakeSet is a set of wake-up channels (capacity 1), each dropped when
// the context it was subscribed with ends.
type wakeSet struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// subscribe adds a channel until ctx ends.
func (w *wakeSet) subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	if ctx.Err() != nil {
		return ch
	}
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[chan struct{}]struct{}{}
	}
	w.subs[ch] = struct{}{}
	w.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		delete(w.subs, ch)
		w.mu.Unlock()
	})
	return ch
}

// wake sends every channel a wake-up without blocking.
func (w *wakeSet) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
