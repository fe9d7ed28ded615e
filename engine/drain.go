package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// drainLease is how long Drain holds each item: far longer than any pass it
// runs, since nobody renews it.
const drainLease = 5 * time.Minute

// Drain runs the due items of the registered kinds one at a time, in lease
// order, through the same processors and completions as Run, until none is
// due at the clock's now, and returns how many passes it ran. It is for
// tests, tools and embedders that step the engine deterministically (with a
// fake clock, an item requeued for later waits until the clock reaches
// it); it must not run alongside Run on the same engine. Acks are sent one
// by one, not batched.
func (e *Engine) Drain(ctx context.Context) (int, error) {
	if e.invalid != nil {
		return 0, e.invalid
	}
	kinds := e.Kinds()
	regs := make(map[string]registration, len(e.regs))
	for _, r := range e.regs {
		regs[r.kind] = r
	}
	passes := 0
	for {
		leases, err := e.q.WorkLease(ctx, ports.LeaseParams{Kinds: kinds, Limit: 1, Duration: drainLease, Owner: e.opts.Owner})
		if err != nil {
			return passes, fmt.Errorf("drain: %w", err)
		}
		if len(leases) == 0 {
			return passes, nil
		}
		l := leases[0]
		r := regs[l.Key.Kind]
		start := time.Now()
		out := e.safeProcess(ctx, r, []Item{itemOf(l)})[0]
		r.metrics.observe(out, time.Since(start))
		passes++
		if err := e.completeNow(ctx, l, out); err != nil {
			return passes, fmt.Errorf("drain %s: %w", l.Key, err)
		}
	}
}

// completeNow is complete with an unbatched ack.
func (e *Engine) completeNow(ctx context.Context, l ports.Lease, out Outcome) error {
	switch out.kind {
	case outcomeDone, outcomeRequeue:
		res, err := e.q.WorkAck(ctx, ports.AckParams{Lease: l.Ref(), RequeueAt: out.at})
		if err != nil {
			return err
		}
		return res[0]
	}
	return e.complete(ctx, l, out)
}

// DrainBatches is Drain with the batches of Run: for each registered kind
// in turn it leases up to the kind's KindOptions.Batch due items and hands
// them to its processor at once (ProcessBatch for a BatchProcessor), until
// no kind has a due item; it returns the passes run (one per batch). For
// tests that step the batched paths deterministically.
func (e *Engine) DrainBatches(ctx context.Context) (int, error) {
	if e.invalid != nil {
		return 0, e.invalid
	}
	passes := 0
	for {
		leased := 0
		for _, r := range e.regs {
			leases, err := e.q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{r.kind}, Limit: max(r.opts.Batch, 1),
				Duration: drainLease, Owner: e.opts.Owner})
			if err != nil {
				return passes, fmt.Errorf("drain: %w", err)
			}
			if len(leases) == 0 {
				continue
			}
			leased += len(leases)
			items := make([]Item, len(leases))
			for i, l := range leases {
				items[i] = itemOf(l)
			}
			start := time.Now()
			outs := e.safeProcess(ctx, r, items)
			passes++
			for i, l := range leases {
				r.metrics.observe(outs[i], time.Since(start))
				if err := e.completeNow(ctx, l, outs[i]); err != nil {
					return passes, fmt.Errorf("drain %s: %w", l.Key, err)
				}
			}
		}
		if leased == 0 {
			return passes, nil
		}
	}
}
