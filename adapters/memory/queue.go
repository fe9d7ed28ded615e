package memory

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// Queue is the in-memory ports.Queue. It is goroutine-safe (one mutex) and
// keeps each kind's items in three heaps (due, waiting for not-before, leased
// by expiry), so every operation costs O(log n) per item it touches, however
// large the backlog. It also implements ports.WorkNotifier.
type Queue struct {
	clock ports.Clock

	mu    sync.Mutex
	items map[ports.WorkKey]*workEntry
	// kinds holds the heaps of each kind, one kindQueue per workspace with
	// live items of the kind, so a lease can share a kind fairly.
	kinds map[laneKey]*kindQueue
	lanes map[string][]*kindQueue
	dead  map[ports.WorkKey]*workEntry
	// counts holds the number of items per state, indexed by stateIndex.
	counts [3]int
	// token is the last fencing token handed out; tokens are queue-wide so
	// they never repeat for a key, even across delete and re-enqueue.
	token int64
	wake  waker

	// live, when set (UseLiveness), tells which owners are alive: their
	// expired leases are not taken over, and the leases of an owner whose
	// row lapsed are reclaimed at once.
	live *Liveness
}

// UseLiveness makes the queue judge leases by their owners' liveness
// rows in l (ports.Lease.Reclaimed): an expired lease whose owner is alive
// is extended to when the owner is known alive instead of taken over, and
// the leases of an owner whose row lapsed are due at once.
func (q *Queue) UseLiveness(l *Liveness) {
	q.mu.Lock()
	defer q.unlock()
	q.live = l
}

// aliveUntil is until when owner's liveness row says it is alive, zero
// without one (or without UseLiveness).
func (q *Queue) aliveUntil(owner string) time.Time {
	if q.live == nil {
		return time.Time{}
	}
	q.live.mu.Lock()
	defer q.live.mu.Unlock()
	return q.live.until[owner]
}

// reap makes the unexpired leases of owners whose liveness row lapsed by
// now due at once.
func (q *Queue) reap(now time.Time) {
	if q.live == nil {
		return
	}
	lapsed := map[string]bool{}
	q.live.mu.Lock()
	for owner, until := range q.live.until {
		if !until.After(now) {
			lapsed[owner] = true
		}
	}
	q.live.mu.Unlock()
	if len(lapsed) == 0 {
		return
	}
	for _, e := range q.items {
		if e.in == inLeased && lapsed[e.item.LeaseOwner] {
			e.item.LeaseExpiresAt = now
			unplace(e)
			heap.Push(&e.kind.ready, e)
			q.wake.kick = true
		}
	}
}

var (
	_ ports.Queue        = (*Queue)(nil)
	_ ports.WorkNotifier = (*Queue)(nil)
)

// NewQueue returns an empty queue that reads "now" from clock.
func NewQueue(clock ports.Clock) *Queue {
	return &Queue{
		clock: clock,
		items: map[ports.WorkKey]*workEntry{},
		kinds: map[laneKey]*kindQueue{},
		lanes: map[string][]*kindQueue{},
		dead:  map[ports.WorkKey]*workEntry{},
	}
}

// now reads the clock at the precision every adapter keeps.
func (q *Queue) now() time.Time { return ports.StoredTime(q.clock.Now()) }

// WorkEnqueue inserts or coalesces items. The batch is validated first, so
// bad input stores nothing. Inside a Transactor's transaction the items are
// held back until its commit.
func (q *Queue) WorkEnqueue(ctx context.Context, items ...ports.EnqueueParams) error {
	for i := range items {
		if err := ports.ValidateEnqueue(items[i]); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
	}
	if q.holdEnqueues(ctx, items) {
		return nil
	}
	q.mu.Lock()
	defer q.unlock()
	now := q.now()
	for i := range items {
		q.enqueue(&items[i], now)
	}
	return nil
}

// enqueue applies one valid enqueue.
func (q *Queue) enqueue(p *ports.EnqueueParams, now time.Time) {
	nb := orNow(p.NotBefore, now)
	et := orNow(p.EventTime, now)
	e, ok := q.items[p.Key]
	if !ok {
		kq := q.lane(p.Key.Kind, p.Workspace)
		e = &workEntry{kind: kq, index: -1, traceparent: p.Traceparent, item: ports.WorkItem{
			Key:         p.Key,
			Workspace:   p.Workspace,
			State:       ports.WorkPending,
			Priority:    p.Priority,
			EventTime:   et,
			NotBefore:   nb,
			MaxAttempts: cmp.Or(p.MaxAttempts, ports.DefaultMaxAttempts),
		}}
		q.items[p.Key] = e
		q.counts[stateIndex(ports.WorkPending)]++
		q.place(e, now)
		return
	}
	if p.Traceparent != "" {
		e.traceparent = p.Traceparent
	}
	it := &e.item
	it.Priority = max(it.Priority, p.Priority)
	if et.After(it.EventTime) {
		it.EventTime = et
	}
	it.MaxAttempts = max(it.MaxAttempts, p.MaxAttempts)
	switch it.State {
	case ports.WorkPending:
		if nb.Before(it.NotBefore) {
			it.NotBefore = nb
		}
		if e.in == inReady || (e.in == inWaiting && it.NotBefore.After(now)) {
			refix(e)
			q.wake.kick = q.wake.kick || e.in == inReady
			return
		}
		unplace(e)
		q.place(e, now)
	case ports.WorkLeased:
		// The enqueue waits for the lease to end; NotBefore now tracks it.
		if !it.Requeued || nb.Before(it.NotBefore) {
			it.NotBefore = nb
		}
		it.Requeued = true
		if e.in == inReady { // expired lease: priority and event time order it
			refix(e)
			q.wake.kick = true
		}
	case ports.WorkDead:
		// A new event revives a dead item with a fresh budget.
		it.NotBefore = nb
		it.Attempts = 0
		q.setState(e, ports.WorkPending)
		q.place(e, now)
	}
}

// WorkLease claims up to p.Limit due items of p.Kinds: highest priority, then
// oldest event, then key, each workspace with due items taking at most its
// fair share (ports.FairShare) while another still has some. An expired lease is reclaimed here: leased again,
// or dead-lettered when its attempts are exhausted and no enqueue arrived
// during it.
func (q *Queue) WorkLease(_ context.Context, p ports.LeaseParams) ([]ports.Lease, error) {
	if err := ports.ValidateLease(p); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	q.mu.Lock()
	defer q.unlock()
	now := q.now()
	q.reap(now)
	var kqs []*kindQueue
	for i, k := range p.Kinds {
		if slices.Contains(p.Kinds[:i], k) {
			continue
		}
		for _, kq := range q.lanes[k] {
			advance(kq, now)
			kqs = append(kqs, kq)
		}
	}
	avail, active := 0, map[string]bool{}
	for _, kq := range kqs {
		if n := kq.ready.Len(); n > 0 {
			avail += n
			active[kq.workspace] = true
		}
	}
	if avail == 0 {
		return nil, nil
	}
	share := ports.FairShare(p.Limit, len(active))
	taken := map[string]int{}
	out := make([]ports.Lease, 0, min(p.Limit, avail))
	exp := ports.StoredTime(now.Add(p.Duration))
	for len(out) < p.Limit {
		best := bestLane(kqs, func(kq *kindQueue) bool { return taken[kq.workspace] < share })
		if best == nil { // no other workspace has due items left
			best = bestLane(kqs, func(*kindQueue) bool { return true })
		}
		if best == nil {
			break
		}
		e := heap.Pop(&best.ready).(*workEntry)
		if until := q.aliveUntil(e.item.LeaseOwner); e.item.State == ports.WorkLeased && until.After(now) {
			e.item.LeaseExpiresAt = until // its owner is alive: not lost
			heap.Push(&e.kind.leased, e)
			q.wakeAt(until)
			continue
		}
		if l, ok := q.claim(e, exp, p.Owner); ok {
			out = append(out, l)
			taken[best.workspace]++
		}
	}
	return out, nil
}

// bestLane is the lane of kqs that ok accepts whose first due item comes
// first in lease order; nil when none has a due item.
func bestLane(kqs []*kindQueue, ok func(*kindQueue) bool) *kindQueue {
	var best *kindQueue
	for _, kq := range kqs {
		if e := kq.ready.top(); e != nil && ok(kq) && (best == nil || dueBefore(&e.item, &best.ready.es[0].item)) {
			best = kq
		}
	}
	return best
}

// laneKey names the heaps of one kind's items in one workspace.
type laneKey struct{ kind, workspace string }

// lane returns the heaps of kind's items in workspace, made on first use.
func (q *Queue) lane(kind, workspace string) *kindQueue {
	k := laneKey{kind, workspace}
	kq := q.kinds[k]
	if kq == nil {
		kq = newKindQueue()
		kq.kind, kq.workspace = kind, workspace
		q.kinds[k] = kq
		q.lanes[kind] = append(q.lanes[kind], kq)
	}
	return kq
}

// advance moves the kind's items whose not-before or lease expiry has passed
// into the due heap. It changes no item's state, so it is safe at any time.
func advance(kq *kindQueue, now time.Time) {
	for e := kq.waiting.top(); e != nil && !e.item.NotBefore.After(now); e = kq.waiting.top() {
		heap.Pop(&kq.waiting)
		heap.Push(&kq.ready, e)
	}
	for e := kq.leased.top(); e != nil && !e.item.LeaseExpiresAt.After(now); e = kq.leased.top() {
		heap.Pop(&kq.leased)
		heap.Push(&kq.ready, e)
	}
}

// claim leases e, just popped from the due heap, until exp. An expired lease
// at its attempt limit is dead-lettered instead (ok false), unless an
// enqueue arrived during it, which earns a fresh budget.
func (q *Queue) claim(e *workEntry, exp time.Time, owner string) (l ports.Lease, ok bool) {
	it := &e.item
	reclaimed := it.State == ports.WorkLeased
	if reclaimed {
		it.LastError = ports.LeaseExpiredError
		if it.Attempts >= it.MaxAttempts {
			if !it.Requeued {
				q.toDead(e)
				return ports.Lease{}, false
			}
			it.Attempts = 0
		}
		if it.NotBefore.After(it.LeaseExpiresAt) {
			it.NotBefore = it.LeaseExpiresAt
		}
	} else {
		q.setState(e, ports.WorkLeased)
	}
	it.Attempts++
	it.Requeued = false
	it.LeaseOwner = owner
	it.LeaseExpiresAt = exp
	q.token++
	e.token = q.token
	heap.Push(&e.kind.leased, e)
	q.wakeAt(exp)
	return ports.Lease{Key: it.Key, Token: e.token, Attempt: it.Attempts, ExpiresAt: exp, EventTime: it.EventTime, Reclaimed: reclaimed,
		Traceparent: e.traceparent, Priority: it.Priority}, true
}

// WorkHeartbeat sets each held lease to expire d from now.
func (q *Queue) WorkHeartbeat(_ context.Context, d time.Duration, refs ...ports.LeaseRef) ([]error, error) {
	if d <= 0 {
		return nil, fmt.Errorf("heartbeat: %w: duration must be positive, got %s", ports.ErrInvalidWork, d)
	}
	q.mu.Lock()
	defer q.unlock()
	exp := ports.StoredTime(q.now().Add(d))
	res := make([]error, len(refs))
	for i, r := range refs {
		e := q.held(r)
		if e == nil {
			res[i] = fmt.Errorf("heartbeat %s: %w", r.Key, ports.ErrLeaseLost)
			continue
		}
		e.item.LeaseExpiresAt = exp
		if e.in == inLeased {
			refix(e)
		} else { // expired and waiting in the due heap
			unplace(e)
			heap.Push(&e.kind.leased, e)
		}
		q.wakeAt(exp)
	}
	return res, nil
}

// WorkAck completes held leases: the item is deleted, or pending again when
// RequeueAt is set or an enqueue arrived during the lease.
func (q *Queue) WorkAck(_ context.Context, acks ...ports.AckParams) ([]error, error) {
	q.mu.Lock()
	defer q.unlock()
	now := q.now()
	res := make([]error, len(acks))
	for i := range acks {
		a := &acks[i]
		e := q.held(a.Lease)
		if e == nil {
			res[i] = fmt.Errorf("ack %s: %w", a.Lease.Key, ports.ErrLeaseLost)
			continue
		}
		unplace(e)
		it := &e.item
		at := ports.StoredTime(a.RequeueAt)
		switch {
		case it.Requeued:
			if !at.IsZero() && at.Before(it.NotBefore) {
				it.NotBefore = at
			}
		case !at.IsZero():
			it.NotBefore = at
		default:
			delete(q.items, it.Key)
			q.counts[stateIndex(ports.WorkLeased)]--
			continue
		}
		it.Attempts = 0
		it.LastError = ""
		q.toPending(e, now)
	}
	return res, nil
}

// WorkRetry records a failure of a held lease and reschedules or
// dead-letters the item.
func (q *Queue) WorkRetry(_ context.Context, p ports.RetryParams) error {
	q.mu.Lock()
	defer q.unlock()
	now := q.now()
	e := q.held(p.Lease)
	if e == nil {
		return fmt.Errorf("retry %s: %w", p.Lease.Key, ports.ErrLeaseLost)
	}
	unplace(e)
	it := &e.item
	it.LastError = p.Err
	nb := orNow(p.NotBefore, now)
	exhausted := p.Terminal || it.Attempts >= it.MaxAttempts
	switch {
	case it.Requeued && exhausted: // the enqueue during the lease revives it
		it.Attempts = 0
	case it.Requeued:
		if nb.Before(it.NotBefore) {
			it.NotBefore = nb
		}
	case exhausted:
		q.toDead(e)
		return nil
	default:
		it.NotBefore = nb
	}
	q.toPending(e, now)
	return nil
}

// WorkGet returns a copy of the stored item.
func (q *Queue) WorkGet(_ context.Context, key ports.WorkKey) (ports.WorkItem, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.items[key]
	if !ok {
		return ports.WorkItem{}, fmt.Errorf("work %s: %w", key, ports.ErrNotFound)
	}
	return e.item, nil
}

// WorkDeadList lists dead items, oldest event first. Dead items are few and
// kept in their own map, so this sorts only them.
func (q *Queue) WorkDeadList(_ context.Context, p ports.DeadListParams) ([]ports.WorkItem, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = ports.DefaultDeadListLimit
	}
	q.mu.Lock()
	out := make([]ports.WorkItem, 0, len(q.dead))
	for _, e := range q.dead {
		if p.Kind == "" || e.item.Key.Kind == p.Kind {
			out = append(out, e.item)
		}
	}
	q.mu.Unlock()
	slices.SortFunc(out, func(a, b ports.WorkItem) int {
		if c := a.EventTime.Compare(b.EventTime); c != 0 {
			return c
		}
		if keyLess(a.Key, b.Key) {
			return -1
		}
		return 1
	})
	return out[:min(limit, len(out))], nil
}

// WorkRedrive makes a dead item pending and due now with attempts reset.
func (q *Queue) WorkRedrive(_ context.Context, key ports.WorkKey) error {
	q.mu.Lock()
	defer q.unlock()
	e, ok := q.items[key]
	if !ok {
		return fmt.Errorf("redrive %s: %w", key, ports.ErrNotFound)
	}
	if e.item.State != ports.WorkDead {
		return fmt.Errorf("redrive %s: item is %s, not dead: %w", key, e.item.State, ports.ErrConflict)
	}
	now := q.now()
	e.item.Attempts = 0
	e.item.NotBefore = now
	q.setState(e, ports.WorkPending)
	q.place(e, now)
	return nil
}

// WorkStats counts items by state in O(1).
func (q *Queue) WorkStats(context.Context) (map[ports.WorkState]int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return map[ports.WorkState]int{
		ports.WorkPending: q.counts[stateIndex(ports.WorkPending)],
		ports.WorkLeased:  q.counts[stateIndex(ports.WorkLeased)],
		ports.WorkDead:    q.counts[stateIndex(ports.WorkDead)],
	}, nil
}

// WorkKindStats counts items by kind and state; see ports.Queue.
func (q *Queue) WorkKindStats(context.Context) ([]ports.KindStats, error) {
	now := q.clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	type key struct {
		kind  string
		state ports.WorkState
	}
	byKey := map[key]*ports.KindStats{}
	for _, e := range q.items {
		k := key{e.item.Key.Kind, e.item.State}
		st := byKey[k]
		if st == nil {
			st = &ports.KindStats{Kind: k.kind, State: k.state}
			byKey[k] = st
		}
		st.Count++
		if k.state == ports.WorkPending && !e.item.NotBefore.After(now) && (st.OldestDue.IsZero() || e.item.NotBefore.Before(st.OldestDue)) {
			st.OldestDue = e.item.NotBefore
		}
	}
	out := make([]ports.KindStats, 0, len(byKey))
	for _, st := range byKey {
		out = append(out, *st)
	}
	ports.SortKindStats(out)
	return out, nil
}

// held returns the entry r still holds (leased, same token), or nil.
func (q *Queue) held(r ports.LeaseRef) *workEntry {
	e := q.items[r.Key]
	if e == nil || e.item.State != ports.WorkLeased || e.token != r.Token {
		return nil
	}
	return e
}

// place puts a live entry, out of every heap, into the heap its state and
// times call for.
func (q *Queue) place(e *workEntry, now time.Time) {
	switch e.item.State {
	case ports.WorkPending:
		if e.item.NotBefore.After(now) {
			heap.Push(&e.kind.waiting, e)
			q.wakeAt(e.item.NotBefore)
			return
		}
		heap.Push(&e.kind.ready, e)
		q.wake.kick = true
	case ports.WorkLeased:
		heap.Push(&e.kind.leased, e)
		q.wakeAt(e.item.LeaseExpiresAt)
	}
}

// toPending ends the lease of an unplaced entry and places it as pending.
func (q *Queue) toPending(e *workEntry, now time.Time) {
	q.endLease(e)
	q.setState(e, ports.WorkPending)
	q.place(e, now)
}

// toDead ends the lease of an unplaced entry and dead-letters it.
func (q *Queue) toDead(e *workEntry) {
	q.endLease(e)
	q.setState(e, ports.WorkDead)
}

// endLease clears the lease fields and the Requeued flag.
func (q *Queue) endLease(e *workEntry) {
	e.item.LeaseOwner = ""
	e.item.LeaseExpiresAt = time.Time{}
	e.item.Requeued = false
}

// setState moves e to state s, keeping the counts and the dead index.
func (q *Queue) setState(e *workEntry, s ports.WorkState) {
	from := e.item.State
	if from == s {
		return
	}
	q.counts[stateIndex(from)]--
	q.counts[stateIndex(s)]++
	e.item.State = s
	switch {
	case s == ports.WorkDead:
		q.dead[e.item.Key] = e
	case from == ports.WorkDead:
		delete(q.dead, e.item.Key)
	}
}

// stateIndex maps a state to its slot in Queue.counts.
func stateIndex(s ports.WorkState) int {
	switch s {
	case ports.WorkLeased:
		return 1
	case ports.WorkDead:
		return 2
	}
	return 0
}

// orNow normalizes t, with zero meaning now.
func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return ports.StoredTime(t)
}
