package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// Changes is the in-memory ports.ChangeStream: a ring of the last Keep
// changes, none older than Retention. The stores it is given to
// (ReleaseStore.SetChanges, WorkflowStore.SetChanges,
// RunStore.SetChanges) publish a write's changes once it has committed:
// at once outside a transaction, at the commit inside one (a rolled-back
// transaction publishes nothing).
type Changes struct {
	clock     ports.Clock
	keep      int
	retention time.Duration

	mu     sync.Mutex
	ring   []ports.Change // oldest first, at most keep
	last   int64          // the last id given
	pruned int64          // the highest id pruned
	// watchers are the waiters of ChangesNotify.
	watchers wakeSet
}

var _ ports.ChangeStream = (*Changes)(nil)

// NewChanges returns an empty stream that keeps at most keep changes
// (at least 1) and none older than retention (0: no age limit).
func NewChanges(clock ports.Clock, keep int, retention time.Duration) *Changes {
	return &Changes{clock: clock, keep: max(keep, 1), retention: retention}
}

// publish numbers changes, appends them, prunes and wakes the watchers.
// The ring only grows at its end and is pruned by reslicing its front, so
// a reader's snapshot of it (ChangesAfter) stays valid without the lock.
func (c *Changes) publish(changes ...ports.Change) {
	if c == nil || len(changes) == 0 {
		return
	}
	c.mu.Lock()
	for _, ch := range changes {
		c.last++
		ch.ID = c.last
		c.ring = append(c.ring, ch)
	}
	if drop := len(c.ring) - c.keep; drop > 0 {
		c.pruned = c.ring[drop-1].ID
		c.ring = c.ring[drop:]
	}
	c.mu.Unlock()
	c.watchers.wake()
}

// ChangesAfter lists retained changes with ID > after, oldest first. It
// holds the lock only to take a snapshot of the ring. A change's Data is
// shared, never copied: it must not be modified.
func (c *Changes) ChangesAfter(_ context.Context, after int64, limit int) ([]ports.Change, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("changes after %d: limit must be positive", after)
	}
	c.mu.Lock()
	ring, pruned := c.ring, c.pruned
	c.mu.Unlock()
	if c.retention > 0 {
		// Older than the retention counts as pruned.
		cutoff := c.clock.Now().Add(-c.retention)
		old, _ := slices.BinarySearchFunc(ring, cutoff, func(ch ports.Change, t time.Time) int { return ch.At.Compare(t) })
		if old > 0 {
			pruned = max(pruned, ring[old-1].ID)
			ring = ring[old:]
		}
	}
	if after < pruned {
		return nil, fmt.Errorf("changes after %d (pruned through %d): %w", after, pruned, ports.ErrChangesExpired)
	}
	i, _ := slices.BinarySearchFunc(ring, after+1, func(ch ports.Change, id int64) int { return cmp.Compare(ch.ID, id) })
	return slices.Clone(ring[i:min(len(ring), i+limit)]), nil
}

// ChangesLast returns the id of the newest published change.
func (c *Changes) ChangesLast(context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, nil
}

// ChangesNotify returns a channel woken after every publication, until
// ctx ends.
func (c *Changes) ChangesNotify(ctx context.Context) <-chan struct{} {
	return c.watchers.subscribe(ctx)
}

// wakeAfterCommit wakes the watchers once ctx's transaction, if any,
// commits, with no change published: the release store's hook events
// (ports.Events) wake the stream's watchers as PostgreSQL's publisher
// does, so a hook dispatcher that watches the stream hears of them.
func (c *Changes) wakeAfterCommit(ctx context.Context) {
	if c == nil {
		return
	}
	if t := txOf(ctx); t != nil {
		t.commits = append(t.commits, c.watchers.wake)
		return
	}
	c.watchers.wake()
}

// publishAfterCommit publishes changes when ctx's transaction (of any
// memory store) commits, or at once outside one.
func (c *Changes) publishAfterCommit(ctx context.Context, changes ...ports.Change) {
	if c == nil || len(changes) == 0 {
		return
	}
	if t := txOf(ctx); t != nil {
		t.commits = append(t.commits, func() { c.publish(changes...) })
		return
	}
	c.publish(changes...)
}
