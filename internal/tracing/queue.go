package tracing

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"

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
	if tp := Traceparent(ctx); tp != "" {
		for _, it := range items {
			q.carried.Add(it.Key, tp)
		}
	}
	return q.Queue.WorkEnqueue(ctx, items...)
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
