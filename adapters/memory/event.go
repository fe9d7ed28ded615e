package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/reconcilerhq/reconciler/ports"
)

// eventOutbox is the release store's event outbox (ports.Events). It is
// guarded by the store's mutex, so an event is recorded in the same
// critical section as the change that causes it.
type eventOutbox struct {
	seq     int64
	pending []ports.Event // by Seq
}

// record appends events, numbering them; the caller holds the store's
// write lock.
func (o *eventOutbox) record(events ...ports.Event) {
	for _, e := range events {
		o.seq++
		e.Seq = o.seq
		o.pending = append(o.pending, e)
	}
}

// recordEvents records events of a write just made; inside a transaction
// (ports.Transactor) an undo takes them back with the write.
func (s *ReleaseStore) recordEvents(ctx context.Context, events ...ports.Event) {
	if len(events) == 0 {
		return
	}
	last := s.events.seq
	s.events.record(events...)
	s.onUndo(ctx, func() {
		s.events.pending = slices.DeleteFunc(s.events.pending, func(e ports.Event) bool { return e.Seq > last })
	})
	s.changes.wakeAfterCommit(ctx)
}

// EventsPending lists up to limit unprocessed events, oldest first.
func (s *ReleaseStore) EventsPending(_ context.Context, limit int) ([]ports.Event, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pending events: limit must be positive")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := slices.Clone(s.events.pending[:min(limit, len(s.events.pending))])
	for i := range out {
		out[i].Metrics = slices.Clone(out[i].Metrics)
	}
	return out, nil
}

// EventsDone marks events processed: they leave the outbox.
func (s *ReleaseStore) EventsDone(_ context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events.pending = slices.DeleteFunc(s.events.pending, func(e ports.Event) bool { return slices.Contains(seqs, e.Seq) })
	return nil
}
