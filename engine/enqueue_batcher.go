package engine

import (
	"context"

	"github.com/reconcilerhq/reconciler/internal/tracing"
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
	c *Coalescer[[]ports.EnqueueParams]
	q ports.Queue
}

// NewEnqueueBatcher batches the enqueues made through it onto q.
func NewEnqueueBatcher(q ports.Queue) *EnqueueBatcher {
	return &EnqueueBatcher{q: q, c: NewCoalescer(func(ctx context.Context, calls [][]ports.EnqueueParams) []error {
		var items []ports.EnqueueParams
		for _, c := range calls {
			items = append(items, c...)
		}
		err := q.WorkEnqueue(ctx, items...)
		errs := make([]error, len(calls))
		for i := range errs {
			errs[i] = err
		}
		return errs
	})}
}

// WorkEnqueue stores items, in a batch with whatever other enqueues are
// waiting, and returns that batch's result.
func (b *EnqueueBatcher) WorkEnqueue(ctx context.Context, items ...ports.EnqueueParams) error {
	if len(items) == 0 {
		return nil
	}
	ctx, items = tracing.Carry(ctx, items) // each caller's trace, not the batch's
	return b.c.Do(ctx, items)
}
