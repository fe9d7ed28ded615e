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
func (c *Changes) publish(changes ...ports.Change) {
	if c == nil || len(changes) == 0 {
		return
	}
	c.mu.Lock()
	for _, ch := range changes {
		c.last++
		ch.ID = c.last
		ch.Data = slices.Clone(ch.Data)
		c.ring = append(c.ring, ch)
	}
	c.prune()
	c.mu.Unlock()
	c.watchers.wake()
}

// prune drops the changes beyond keep or older than retention; the caller
// holds mu.
func (c *Changes) prune() {
	drop := max(len(c.ring)-c.keep, 0)
	if c.retention > 0 {
		cutoff := c.clock.Now().Add(-c.retention)
		for drop < len(c.ring) && c.ring[drop].At.Before(cutoff) {
			drop++
		}
	}
	if drop == 0 {
		return
	}
	c.pruned = c.ring[drop-1].ID
	c.ring = slices.Delete(c.ring, 0, drop)
}

// ChangesAfter lists retained changes with ID > after, oldest first.
func (c *Changes) ChangesAfter(_ context.Context, after int64, limit int) ([]ports.Change, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("changes after %d: limit must be positive", after)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune()
	if after < c.pruned {
		return nil, fmt.Errorf("changes after %d (pruned through %d): %w", after, c.pruned, ports.ErrChangesExpired)
	}
	i, _ := slices.BinarySearchFunc(c.ring, after+1, func(ch ports.Change, id int64) int { return cmp.Compare(ch.ID, id) })
	out := slices.Clone(c.ring[i:min(len(c.ring), i+limit)])
	for k := range out {
		out[k].Data = slices.Clone(out[k].Data)
	}
	return out, nil
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
