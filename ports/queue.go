package ports

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultMaxAttempts is how many leases a work item gets before it is
// dead-lettered when its enqueue did not say otherwise.
const DefaultMaxAttempts = 20

// ErrLeaseLost is returned when a lease holder acts on an item whose lease it
// no longer holds: the lease expired and another worker took it, or the item
// was completed by someone else. The caller must drop its work; it is not an
// internal error.
var ErrLeaseLost = errors.New("lease lost")

// ErrNotFound is returned when a named item, row or object does not exist.
var ErrNotFound = errors.New("not found")

// ErrInvalidWork is returned (wrapped, naming the field) when a queue call
// carries bad input: an empty key part, no kinds, a non-positive limit or
// duration, a negative MaxAttempts.
var ErrInvalidWork = errors.New("invalid work")

// DefaultDeadListLimit is the page size WorkDeadList uses when Limit is not
// positive.
const DefaultDeadListLimit = 100

// LeaseExpiredError is the LastError recorded when an item's lease expired
// without an ack or retry.
const LeaseExpiredError = "lease expired"

// WorkKey identifies one work item. The queue holds at most one item per key:
// enqueues of the same key coalesce.
type WorkKey struct {
	// Kind names the processor that handles the item (e.g. "repo",
	// "desired-release").
	Kind string `json:"kind"`
	// ScopeType names what ScopeID refers to (e.g. "run", "release-target").
	ScopeType string `json:"scope_type"`
	// ScopeID identifies the scope within its type.
	ScopeID string `json:"scope_id"`
}

// String renders the key as kind/scopeType/scopeID for logs and errors.
func (k WorkKey) String() string {
	return fmt.Sprintf("%s/%s/%s", k.Kind, k.ScopeType, k.ScopeID)
}

// WorkState is the visible state of a work item.
type WorkState string

// The states a work item can be in.
const (
	// WorkPending items wait for their not-before time and a worker.
	WorkPending WorkState = "pending"
	// WorkLeased items are held by a worker until the lease expires.
	WorkLeased WorkState = "leased"
	// WorkDead items exhausted their attempts or failed terminally; they stay
	// visible until re-driven.
	WorkDead WorkState = "dead"
)

// WorkItem is the stored view of one work item.
type WorkItem struct {
	Key WorkKey `json:"key"`
	// Workspace is the tenant the item belongs to, from its first enqueue
	// (see EnqueueParams.Workspace); empty is the shared workspace.
	Workspace string    `json:"workspace,omitempty"`
	State     WorkState `json:"state"`
	Priority  int       `json:"priority"`
	EventTime time.Time `json:"event_time"`
	// NotBefore is when a pending item becomes due. While the item is leased
	// it is when the current run became due, until an enqueue arrives: from
	// then on (Requeued) it is the earliest NotBefore of the enqueues that
	// arrived during the lease, which the item keeps when the lease ends.
	NotBefore time.Time `json:"not_before"`
	// Attempts counts leases since the item last completed; an expired lease
	// counts as an attempt. Ack, WorkRedrive and an enqueue onto a dead item
	// reset it.
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	LastError   string `json:"last_error,omitempty"`
	// LeaseOwner and LeaseExpiresAt are set while the item is leased.
	LeaseOwner     string    `json:"lease_owner,omitempty"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitempty"`
	// Requeued is true when an enqueue arrived while the item was leased: the
	// item runs again after the current lease ends, however it ends. Ack
	// makes it pending with attempts reset; retry makes it pending at the
	// earlier of the retry's and the enqueue's NotBefore; a retry or an
	// expiry that would dead-letter it makes it pending with attempts reset
	// instead (a new event gets a fresh budget, as on a dead item).
	Requeued bool `json:"requeued"`
}

// EnqueueParams asks for one item to run. Enqueues of an existing key
// coalesce: the earliest NotBefore, the highest Priority and the latest
// EventTime win, and so does the highest positive MaxAttempts (it never
// shrinks, so attempts never exceed it). An enqueue onto a leased item marks
// it Requeued (see WorkItem.Requeued); an enqueue onto a dead item revives
// it: pending at the enqueue's NotBefore, attempts reset, LastError kept for
// the record.
type EnqueueParams struct {
	Key WorkKey
	// Priority orders due items; higher runs first.
	Priority int
	// NotBefore delays the item; zero means now.
	NotBefore time.Time
	// EventTime is when the triggering event happened; zero means now.
	EventTime time.Time
	// MaxAttempts overrides DefaultMaxAttempts when positive; negative is
	// invalid.
	MaxAttempts int
	// Workspace names the tenant the item belongs to, so a lease shares a
	// kind's concurrency fairly between workspaces (see Queue.WorkLease).
	// Empty is one shared workspace. It is set by the item's first enqueue:
	// coalescing enqueues do not move an item to another workspace.
	Workspace string
	// Traceparent is the W3C trace context the enqueue was made under, ""
	// when untraced. The item keeps the latest non-empty one it was
	// enqueued with (an untraced enqueue keeps the one it has) and hands it
	// to its leases (Lease.Traceparent), so a pass in any process continues
	// the enqueuer's trace.
	Traceparent string
}

// ValidateEnqueue checks that p names a full key and a usable MaxAttempts.
func ValidateEnqueue(p EnqueueParams) error {
	switch {
	case p.Key.Kind == "":
		return fmt.Errorf("%w: key.kind is empty", ErrInvalidWork)
	case p.Key.ScopeType == "":
		return fmt.Errorf("%w: key.scope_type of %s is empty", ErrInvalidWork, p.Key)
	case p.Key.ScopeID == "":
		return fmt.Errorf("%w: key.scope_id of %s is empty", ErrInvalidWork, p.Key)
	case p.MaxAttempts < 0:
		return fmt.Errorf("%w: max_attempts of %s is negative (%d)", ErrInvalidWork, p.Key, p.MaxAttempts)
	}
	return nil
}

// LeaseParams claims due items.
type LeaseParams struct {
	// Kinds restricts the claim to these kinds; it must not be empty.
	Kinds []string
	// Limit is the most items to claim.
	Limit int
	// Duration is how long the lease lasts unless renewed.
	Duration time.Duration
	// Owner names the worker, for visibility and debugging.
	Owner string
}

// ValidateLease checks that p names at least one non-empty kind and a
// positive limit and duration.
func ValidateLease(p LeaseParams) error {
	switch {
	case len(p.Kinds) == 0:
		return fmt.Errorf("%w: kinds is empty", ErrInvalidWork)
	case p.Limit <= 0:
		return fmt.Errorf("%w: limit must be positive, got %d", ErrInvalidWork, p.Limit)
	case p.Duration <= 0:
		return fmt.Errorf("%w: duration must be positive, got %s", ErrInvalidWork, p.Duration)
	}
	for i, k := range p.Kinds {
		if k == "" {
			return fmt.Errorf("%w: kinds[%d] is empty", ErrInvalidWork, i)
		}
	}
	return nil
}

// FairShare is how many items one of workspaces workspaces with due items
// may take of a lease of limit items while the others have due items left:
// limit divided by workspaces, rounded up (limit when workspaces < 2).
func FairShare(limit, workspaces int) int {
	if workspaces < 2 {
		return limit
	}
	return (limit + workspaces - 1) / workspaces
}

// Lease is one claimed item. Token fences the lease: every call that acts on
// the lease must present it, and a stale token gets ErrLeaseLost. Tokens
// only grow: every lease of a key, even one deleted and enqueued again, gets
// a larger token than any before it.
//
// A lease that expired is not yet lost: its holder's heartbeat, ack and
// retry still succeed until a WorkLease reclaims the item, by leasing it to
// someone else or, when its attempts are exhausted and no enqueue arrived
// during it, by dead-lettering it. Either way LastError becomes
// LeaseExpiredError; an expired item is due at once.
type Lease struct {
	Key       WorkKey
	Token     int64
	Attempt   int
	ExpiresAt time.Time
	EventTime time.Time
	// Reclaimed says the lease took the item over from an expired lease
	// of another (or the same) owner: one whose liveness row (Liveness)
	// had lapsed or who had none. A lease whose owner's row is fresh is
	// never taken over, however late its renewals.
	Reclaimed bool
	// Traceparent is the item's trace context (EnqueueParams.Traceparent),
	// "" when no traced enqueue made it.
	Traceparent string
	// Priority is the item's priority (the highest it was enqueued with
	// since it was last done), so that its processor can pass it on.
	Priority int
}

// LeaseRef names a held lease.
type LeaseRef struct {
	Key   WorkKey
	Token int64
}

// Ref returns the reference that acts on this lease.
func (l Lease) Ref() LeaseRef { return LeaseRef{Key: l.Key, Token: l.Token} }

// AckParams completes a leased item. When RequeueAt is set the item becomes
// pending again at that time in the same atomic step, so a crash can never
// lose the timer. An enqueue that arrived during the lease also keeps the item
// (pending at the earlier of RequeueAt and the enqueue's NotBefore). Either
// way the item starts over: attempts reset, LastError cleared.
type AckParams struct {
	Lease     LeaseRef
	RequeueAt time.Time
}

// RetryParams fails a leased item. The error and the attempt are recorded;
// the item runs again at NotBefore (zero means now) unless Terminal is set or
// its attempts are exhausted, in which case it is dead-lettered.
type RetryParams struct {
	Lease     LeaseRef
	Err       string
	NotBefore time.Time
	Terminal  bool
}

// DeadListParams pages through dead-lettered items.
type DeadListParams struct {
	// Kind filters by kind when set.
	Kind string
	// Limit is the most items to return; DefaultDeadListLimit when not
	// positive.
	Limit int
}

// Queue is the leased work queue: one item per key, leased by kind.
//
// Invariants every adapter keeps (checked by porttest.Queue):
//   - two live leases never cover one item;
//   - an enqueue is never lost, including one that arrives while leased;
//   - an acked or retried item is acted on only by its current lease holder;
//   - an item is never deleted except by a successful ack with nothing
//     pending; failures end in the visible dead state.
type Queue interface {
	// WorkEnqueue inserts or coalesces items.
	WorkEnqueue(ctx context.Context, items ...EnqueueParams) error
	// WorkLease claims up to Limit due items of the given kinds, highest
	// priority first, then oldest event, then key. An item is due when it is
	// pending with NotBefore at or before now, or leased with an expired
	// lease; each lease counts an attempt. Bad params are ErrInvalidWork.
	//
	// The lease is fair between workspaces: of the workspaces with due
	// items it can take, each gets at most FairShare(Limit, workspaces)
	// items, its first ones in lease order, unless no other workspace has
	// due items left; then the rest of Limit goes in lease order. So a
	// workspace with a huge backlog cannot hold a kind's whole concurrency
	// while a small one waits.
	WorkLease(ctx context.Context, p LeaseParams) ([]Lease, error)
	// WorkHeartbeat extends leases by d from now. The result has one entry per
	// ref: nil, or ErrLeaseLost.
	WorkHeartbeat(ctx context.Context, d time.Duration, refs ...LeaseRef) ([]error, error)
	// WorkAck completes leased items in one batch. The result has one entry
	// per param: nil, or ErrLeaseLost.
	WorkAck(ctx context.Context, acks ...AckParams) ([]error, error)
	// WorkRetry records a failure; see RetryParams. A stale lease is
	// ErrLeaseLost.
	WorkRetry(ctx context.Context, p RetryParams) error
	// WorkGet returns the stored item, or ErrNotFound.
	WorkGet(ctx context.Context, key WorkKey) (WorkItem, error)
	// WorkDeadList lists dead-lettered items, oldest event first, then by
	// key.
	WorkDeadList(ctx context.Context, p DeadListParams) ([]WorkItem, error)
	// WorkRedrive makes a dead item pending again, due now, with its attempts
	// reset. A missing item is ErrNotFound; one that is not dead is
	// ErrConflict.
	WorkRedrive(ctx context.Context, key WorkKey) error
	// WorkStats counts items by state, for health and metrics; every state
	// has an entry, zero included.
	WorkStats(ctx context.Context) (map[WorkState]int, error)
	// WorkKindStats counts items by kind and state, for metrics: one entry
	// per kind and state that has items, sorted by kind then state.
	WorkKindStats(ctx context.Context) ([]KindStats, error)
}

// KindStats counts one kind's items in one state.
type KindStats struct {
	Kind  string    `json:"kind"`
	State WorkState `json:"state"`
	Count int       `json:"count"`
	// OldestDue is the earliest not-before of the pending items already
	// due (how long the oldest has waited for a worker); zero for other
	// states and when none is due.
	OldestDue time.Time `json:"oldest_due,omitzero"`
}

// Clock is the time source for adapters that need "now". Tests pass a fake.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock reads the wall clock.
var SystemClock Clock = ClockFunc(time.Now)

// Sleep waits d, or until ctx ends (then its error): the one wait on a
// timer that a context cuts short.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WorkNotifier is implemented by queues that can wake idle workers when work
// may be due. The channel is buffered (capacity 1) and written without
// blocking, so a wake-up is never lost and never piles up; workers still poll
// as a fallback. Each call returns a new channel that receives every
// wake-up, so every waiting loop calls it once and keeps its own channel.
type WorkNotifier interface {
	WorkNotify() <-chan struct{}
}

// SortKindStats sorts stats by kind, then state.
func SortKindStats(s []KindStats) {
	slices.SortFunc(s, func(a, b KindStats) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(string(a.State), string(b.State))
	})
}
