package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// Liveness is the in-memory ports.Liveness: one process's rows, lost with
// it (every process sharing a memory store is this one).
type Liveness struct {
	mu    sync.Mutex
	until map[string]time.Time
}

var _ ports.Liveness = (*Liveness)(nil)

// NewLiveness returns an empty Liveness.
func NewLiveness() *Liveness { return &Liveness{until: map[string]time.Time{}} }

// LivenessBeat records owner alive until until, never moving it back.
func (l *Liveness) LivenessBeat(_ context.Context, owner string, until time.Time) error {
	if err := ports.ValidateOwner(owner); err != nil {
		return fmt.Errorf("liveness beat: %w", err)
	}
	until = ports.StoredTime(until)
	l.mu.Lock()
	defer l.mu.Unlock()
	if until.After(l.until[owner]) {
		l.until[owner] = until
	}
	return nil
}

// LivenessGet is until when owner is alive; zero without a row.
func (l *Liveness) LivenessGet(_ context.Context, owner string) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until[owner], nil
}

// LivenessEnd removes owner's row.
func (l *Liveness) LivenessEnd(_ context.Context, owner string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.until, owner)
	return nil
}
