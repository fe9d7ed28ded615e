package memory

import (
	"container/heap"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// workEntry is one stored work item plus its place in the kind's heaps.
type workEntry struct {
	item ports.WorkItem
	// token is the fencing token of the current or last lease.
	token int64
	// traceparent is the item's trace context (ports.EnqueueParams.Traceparent).
	traceparent string
	kind        *kindQueue
	// in names the heap holding the entry (inNone when dead) and index is
	// its position there, kept up to date by entryHeap.
	in    heapName
	index int
}

// heapName says which of its kind's heaps holds an entry.
type heapName uint8

// The heaps of a kind. An entry is in exactly one of them unless it is dead.
const (
	inNone    heapName = iota
	inReady            // due: pending with NotBefore <= now, or leased and expired
	inWaiting          // pending, NotBefore in the future at last look
	inLeased           // leased, expiry in the future at last look
)

// kindQueue holds the live items of one kind in one workspace in three heaps, so leasing
// touches only the items it claims or that changed state, never the backlog.
type kindQueue struct {
	// kind and workspace name the items the heaps hold.
	kind, workspace string

	ready   entryHeap
	waiting entryHeap
	leased  entryHeap
}

// newKindQueue returns empty heaps for one kind.
func newKindQueue() *kindQueue {
	return &kindQueue{
		ready:   entryHeap{name: inReady},
		waiting: entryHeap{name: inWaiting},
		leased:  entryHeap{name: inLeased},
	}
}

// heapOf returns the heap called name.
func (k *kindQueue) heapOf(name heapName) *entryHeap {
	switch name {
	case inReady:
		return &k.ready
	case inWaiting:
		return &k.waiting
	case inLeased:
		return &k.leased
	}
	return nil
}

// nextInstant is the earliest future time at which an item of the kind may
// become due: a not-before or a lease expiry. ok is false when there is none.
func (k *kindQueue) nextInstant() (t time.Time, ok bool) {
	if k.waiting.Len() > 0 {
		t, ok = k.waiting.es[0].item.NotBefore, true
	}
	if k.leased.Len() > 0 {
		if e := k.leased.es[0].item.LeaseExpiresAt; !ok || e.Before(t) {
			t, ok = e, true
		}
	}
	return t, ok
}

// entryHeap is a container/heap of entries; its order depends on name:
// ready by (priority desc, event time asc, key asc), waiting by not-before,
// leased by lease expiry.
type entryHeap struct {
	es   []*workEntry
	name heapName
}

// Len implements heap.Interface.
func (h *entryHeap) Len() int { return len(h.es) }

// Less implements heap.Interface.
func (h *entryHeap) Less(i, j int) bool {
	a, b := &h.es[i].item, &h.es[j].item
	switch h.name {
	case inWaiting:
		return a.NotBefore.Before(b.NotBefore)
	case inLeased:
		return a.LeaseExpiresAt.Before(b.LeaseExpiresAt)
	}
	return dueBefore(a, b)
}

// dueBefore orders due items: higher priority, then older event, then key.
func dueBefore(a, b *ports.WorkItem) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.EventTime.Equal(b.EventTime) {
		return a.EventTime.Before(b.EventTime)
	}
	return keyLess(a.Key, b.Key)
}

// keyLess orders keys by kind, scope type, scope id.
func keyLess(a, b ports.WorkKey) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.ScopeType != b.ScopeType {
		return a.ScopeType < b.ScopeType
	}
	return a.ScopeID < b.ScopeID
}

// Swap implements heap.Interface.
func (h *entryHeap) Swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.es[i].index = i
	h.es[j].index = j
}

// Push implements heap.Interface; use heap.Push.
func (h *entryHeap) Push(x any) {
	e := x.(*workEntry)
	e.in, e.index = h.name, len(h.es)
	h.es = append(h.es, e)
}

// Pop implements heap.Interface; use heap.Pop.
func (h *entryHeap) Pop() any {
	n := len(h.es) - 1
	e := h.es[n]
	h.es[n] = nil
	h.es = h.es[:n]
	e.in, e.index = inNone, -1
	return e
}

// top returns the first entry or nil.
func (h *entryHeap) top() *workEntry {
	if len(h.es) == 0 {
		return nil
	}
	return h.es[0]
}

// unplace takes e out of whichever heap holds it.
func unplace(e *workEntry) {
	if h := e.kind.heapOf(e.in); h != nil {
		heap.Remove(h, e.index)
	}
}

// refix restores e's heap order after its sort fields changed in place.
func refix(e *workEntry) {
	if h := e.kind.heapOf(e.in); h != nil {
		heap.Fix(h, e.index)
	}
}
