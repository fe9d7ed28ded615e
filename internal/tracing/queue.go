package tracing

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/reconcilerhq/reconciler/ports"
)

// DefaultCarried is how many work keys' trace contexts Queue remembers.
const DefaultCarried = 1 << 16

// Carrier knows the trace context the work of a key was last enqueued
// under; the engine parents a pass's span on it.
type Carrier interface {
	// Carried is the traceparent of key's last traced enqueue, or "".
	Carried(key ports.WorkKey) string
}

// Queue returns q decorated to remember, per work key, the trace context
// of its last enqueue made under a valid span context (at most
// DefaultCarried keys, the least recently enqueued forgotten first), so
// the pass that takes the item continues the enqueuer's trace. The queue
// has no column for it: the memory is the process's, and a pass in another
// process starts a trace of its own. The result is a Carrier, and a
// ports.WorkNotifier when q is one.
func Queue(q ports.Queue) ports.Queue {
	c, _ := lru.New[ports.WorkKey, string](DefaultCarried) // size > 0: never fails
	cq := &carryingQueue{Queue: q, carried: c}
	if n, ok := q.(ports.WorkNotifier); ok {
		return notifyingQueue{cq, n}
	}
	return cq
}

type carryingQueue struct {
	ports.Queue
	carried *lru.Cache[ports.WorkKey, string]
}

// WorkEnqueue remembers ctx's trace context for each item, then enqueues.
func (q *carryingQueue) WorkEnqueue(ctx context.Context, items ...ports.EnqueueParams) error {
	q.remember(Traceparent(ctx), items)
	return q.Queue.WorkEnqueue(ctx, items...)
}

func (q *carryingQueue) remember(tp string, items []ports.EnqueueParams) {
	if tp == "" {
		return
	}
	for _, it := range items {
		q.carried.Add(it.Key, tp)
	}
}

// Carry remembers ctx's trace context for items when q is a Queue
// decorator, and returns ctx without its span: an enqueue that a batcher
// makes later on several callers' behalf (engine.EnqueueBatcher) then
// carries each caller's trace, not its own caller's. Otherwise it returns
// ctx.
func Carry(ctx context.Context, q ports.Queue, items []ports.EnqueueParams) context.Context {
	r, ok := q.(interface {
		remember(string, []ports.EnqueueParams)
	})
	if !ok {
		return ctx
	}
	tp := Traceparent(ctx)
	if tp == "" {
		return ctx
	}
	r.remember(tp, items)
	return trace.ContextWithSpanContext(ctx, trace.SpanContext{})
}

// Carried implements Carrier.
func (q *carryingQueue) Carried(key ports.WorkKey) string {
	tp, _ := q.carried.Get(key)
	return tp
}

type notifyingQueue struct {
	*carryingQueue
	n ports.WorkNotifier
}

// WorkNotify is the decorated queue's.
func (q notifyingQueue) WorkNotify() <-chan struct{} { return q.n.WorkNotify() }
