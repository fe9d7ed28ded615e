package engine

import (
	"context"
	"sync"
)

// Coalescer runs concurrent calls in batches: while one batch is in
// flight, the calls that arrive meanwhile wait and then go out together in
// the next batch, run by the first of them. Every caller returns only once
// its item was run, with the error run gave for it. It has no goroutine of
// its own and needs no closing. A batch runs under the context of the
// caller that runs it, without its cancellation (the waiters' items ride
// on it).
type Coalescer[T any] struct {
	run     func(ctx context.Context, items []T) []error
	mu      sync.Mutex
	busy    bool
	pending []*coalesceReq[T]
}

type coalesceReq[T any] struct {
	item T
	done chan error
	lead chan struct{}
}

// NewCoalescer batches calls onto run, which returns one error per item,
// in order.
func NewCoalescer[T any](run func(ctx context.Context, items []T) []error) *Coalescer[T] {
	return &Coalescer[T]{run: run}
}

// Do runs item, in a batch with whatever other calls are waiting, and
// returns its error.
func (c *Coalescer[T]) Do(ctx context.Context, item T) error {
	req := &coalesceReq[T]{item: item}
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		c.mu.Unlock()
		return c.flush(ctx, req)
	}
	req.done, req.lead = make(chan error, 1), make(chan struct{}, 1)
	c.pending = append(c.pending, req)
	c.mu.Unlock()
	select {
	case err := <-req.done:
		return err
	case <-req.lead:
		return c.flush(ctx, req)
	}
}

// flush runs own's item with every waiting one, answers the waiters, and
// passes the lead to the next waiter if more arrived.
func (c *Coalescer[T]) flush(ctx context.Context, own *coalesceReq[T]) error {
	c.mu.Lock()
	batch := c.pending
	c.pending = nil
	c.mu.Unlock()
	items := make([]T, 0, 1+len(batch))
	items = append(items, own.item)
	for _, r := range batch {
		items = append(items, r.item)
	}
	errs := c.run(context.WithoutCancel(ctx), items)
	for i, r := range batch {
		r.done <- errs[i+1]
	}
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.busy = false
		c.mu.Unlock()
		return errs[0]
	}
	next := c.pending[0]
	c.pending = c.pending[1:]
	c.mu.Unlock()
	next.lead <- struct{}{}
	return errs[0]
}
