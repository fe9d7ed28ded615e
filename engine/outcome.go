package engine

import (
	"context"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// Item is the work item a Processor is asked to handle.
type Item struct {
	Key ports.WorkKey
	// Attempt is 1 on the first lease of this item since it last completed.
	Attempt int
	// EventTime is when the triggering event happened.
	EventTime time.Time
	// Traceparent is the W3C trace context the item was last enqueued
	// under (ports.Lease.Traceparent), "" when untraced.
	Traceparent string
	// Priority is the item's queue priority (ports.Lease.Priority).
	Priority int
}

// itemOf is the item a lease hands to its processor.
func itemOf(l ports.Lease) Item {
	return Item{Key: l.Key, Attempt: l.Attempt, EventTime: l.EventTime, Traceparent: l.Traceparent, Priority: l.Priority}
}

type outcomeKind uint8

const (
	outcomeDone outcomeKind = iota
	outcomeRetry
	outcomeRequeue
	outcomeTerminal
	// outcomeKinds counts the kinds above.
	outcomeKinds
)

// Outcome is how a pass ends. There is one constructor per outcome and no
// other way to say it:
//
//	Done()             the item is complete
//	Retry(err)         the pass failed; run again after exponential backoff
//	RequeueAt(t)       the pass succeeded; run again at t (level-based wake-up)
//	Terminal(err)      the pass can never succeed; dead-letter the item
//
// The zero Outcome is Done.
type Outcome struct {
	kind outcomeKind
	at   time.Time
	err  error
}

// Done completes the item.
func Done() Outcome { return Outcome{kind: outcomeDone} }

// Retry records err and runs the item again after backoff; after the item's
// maximum attempts it is dead-lettered.
func Retry(err error) Outcome { return Outcome{kind: outcomeRetry, err: err} }

// RequeueAt completes this pass and runs the item again at t, atomically.
func RequeueAt(t time.Time) Outcome { return Outcome{kind: outcomeRequeue, at: t} }

// Terminal dead-letters the item with err; it stays visible and can be
// re-driven.
func Terminal(err error) Outcome { return Outcome{kind: outcomeTerminal, err: err} }

// NoLaterThan returns o with its next run moved up to t: Done, or a
// requeue after t, becomes RequeueAt(t). Retries and dead letters are
// kept, and so is everything when t is zero.
func (o Outcome) NoLaterThan(t time.Time) Outcome {
	switch {
	case t.IsZero():
		return o
	case o.kind == outcomeDone, o.kind == outcomeRequeue && o.at.After(t):
		return RequeueAt(t)
	}
	return o
}

// String names the outcome for logs.
func (o Outcome) String() string {
	switch o.kind {
	case outcomeRetry:
		return "retry"
	case outcomeRequeue:
		return "requeue"
	case outcomeTerminal:
		return "terminal"
	}
	return "done"
}

// Err returns the error of a Retry or Terminal outcome.
func (o Outcome) Err() error { return o.err }

// At returns the wake-up time of a RequeueAt outcome.
func (o Outcome) At() time.Time { return o.at }

// Processor handles the items of one kind. It must be safe for concurrent
// use and idempotent: running it twice on unchanged state changes nothing.
type Processor interface {
	Process(ctx context.Context, item Item) Outcome
}

// BatchProcessor is a Processor that can also handle many leased items of
// its kind in one pass (KindOptions.Batch), e.g. to read their state in one
// query and write their results in one transaction. The items are distinct
// and of one kind; it returns one outcome per item, in order, each item
// completed with its own. Process handles one item alone.
type BatchProcessor interface {
	Processor
	ProcessBatch(ctx context.Context, items []Item) []Outcome
}

// ProcessorFunc adapts a function to Processor.
type ProcessorFunc func(ctx context.Context, item Item) Outcome

// Process calls f.
func (f ProcessorFunc) Process(ctx context.Context, item Item) Outcome { return f(ctx, item) }
