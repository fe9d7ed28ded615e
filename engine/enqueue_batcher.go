package engine

import (
	"context"
	"sync"

	"github.com/reconcilerhq/reconciler/ports"
)

// EnqueueBatcher coalesces concurrent enqueues into one queue call: while
// one WorkEnqueue call is in flight, the enqueues that arrive meanwhile
// wait and then go out together in the next call, made by the first of
// them. Every caller still returns only after its items are stored (or with
// the error of the call that carried them), so a pass that hands off work
// before acking its own item keeps insert-then-lease: the batcher saves
// round trips, never a guarantee.
//
// It has no goroutine of its own and needs no closing. Do not use it for an
// enqueue that must join the caller's transaction (the batch runs outside
// it).
type EnqueueBatcher struct {
	q       ports.Queue
	mu      sync.Mutex
	busy    bool
	pending []*enqueueReq
}

type enqueueReq struct {
	items []ports.EnqueueParams
	done  chan error
	lead  chan struct{}
}

// NewEnqueueBatcher batches the enqueues made through it onto q.
func NewEnqueueBatcher(q ports.Queue) *EnqueueBatcher { return &EnqueueBatcher{q: q} }

// WorkEnqueue stores items, in a batch with whatever other enqueues are
// waiting, and returns that batch's result.
func (b *EnqueueBatcher) WorkEnqueue(ctx context.Context, items ...ports.EnqueueParams) error {
	if len(items) == 0 {
		return nil
	}
	req := &enqueueReq{items: items}
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		return b.flush(ctx, req)
	}
	req.done, req.lead = make(chan error, 1), make(chan struct{}, 1)
	b.pending = append(b.pending, req)
	b.mu.Unlock()
	select {
	case err := <-req.done:
		return err
	case <-req.lead:
		return b.flush(ctx, req)
	}
}

// flush sends own's items with every waiting request's, answers the
// waiters, and passes the lead to the next waiter if more arrived.
func (b *EnqueueBatcher) flush(ctx context.Context, own *enqueueReq) error {
	b.mu.Lock()
	batch := b.pending
	b.pending = nil
	b.mu.Unlock()
	items := own.items
	if len(batch) > 0 {
		items = make([]ports.EnqueueParams, 0, len(own.items)+len(batch)*len(own.items))
		items = append(items, own.items...)
		for _, r := range batch {
			items = append(items, r.items...)
		}
	}
	// The waiters' items ride on this call: a cancelled leader must not
	// fail them.
	err := b.q.WorkEnqueue(context.WithoutCancel(ctx), items...)
	for _, r := range batch {
		r.done <- err
	}
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.busy = false
		b.mu.Unlock()
		return err
	}
	next := b.pending[0]
	b.pending = b.pending[1:]
	b.mu.Unlock()
	next.lead <- struct{}{}
	return err
}
