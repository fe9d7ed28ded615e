package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/reconcilerhq/reconciler/ports"
)

// Queue returns q decorated to stamp every item enqueued under a valid
// span context, and not stamped already, with that context's traceparent
// (ports.EnqueueParams.Traceparent). The queue stores it with the item and
// hands it to the item's lease, so the pass that takes the item, in this
// process or another, continues the enqueuer's trace. The result is a
// ports.WorkNotifier when q is one.
func Queue(q ports.Queue) ports.Queue {
	sq := stampingQueue{q}
	if n, ok := q.(ports.WorkNotifier); ok {
		return notifyingQueue{sq, n}
	}
	return sq
}

type stampingQueue struct {
	ports.Queue
}

// WorkEnqueue stamps items with ctx's trace context, then enqueues.
func (q stampingQueue) WorkEnqueue(ctx context.Context, items ...ports.EnqueueParams) error {
	return q.Queue.WorkEnqueue(ctx, Stamp(Traceparent(ctx), items)...)
}

// Stamp returns items with traceparent set on those that have none: items
// itself when there is nothing to set, a copy otherwise.
func Stamp(traceparent string, items []ports.EnqueueParams) []ports.EnqueueParams {
	if traceparent == "" {
		return items
	}
	var out []ports.EnqueueParams
	for i := range items {
		if items[i].Traceparent != "" {
			continue
		}
		if out == nil {
			out = append([]ports.EnqueueParams(nil), items...)
		}
		out[i].Traceparent = traceparent
	}
	if out == nil {
		return items
	}
	return out
}

// Carry stamps items with ctx's trace context (see Stamp) and returns ctx
// without its span: an enqueue that a batcher makes later on several
// callers' behalf (engine.EnqueueBatcher) then carries each caller's trace,
// not its own caller's.
func Carry(ctx context.Context, items []ports.EnqueueParams) (context.Context, []ports.EnqueueParams) {
	tp := Traceparent(ctx)
	if tp == "" {
		return ctx, items
	}
	return trace.ContextWithSpanContext(ctx, trace.SpanContext{}), Stamp(tp, items)
}

type notifyingQueue struct {
	stampingQueue
	n ports.WorkNotifier
}

// WorkNotify is the decorated queue's.
func (q notifyingQueue) WorkNotify() <-chan struct{} { return q.n.WorkNotify() }
