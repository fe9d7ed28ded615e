package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestQueueConformance(t *testing.T) {
	t.Parallel()
	porttest.Queue(t, func(_ *testing.T, clock ports.Clock) ports.Queue { return memory.NewQueue(clock) })
}

// TestQueueNotifyTimer checks the wall-clock wake-up for work that becomes
// due by time passing alone, with no call on the queue in between.
func TestQueueNotifyTimer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := memory.NewQueue(ports.SystemClock)
	wake := q.WorkNotify()
	key := ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: "later"}
	require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key, NotBefore: time.Now().Add(20 * time.Millisecond)}))
	// The enqueue itself made nothing due, so the first wake-up that finds
	// the item due comes from the timer.
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-wake:
		case <-deadline:
			t.Fatal("no wake-up when the not-before passed")
		}
		ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 1, Duration: 20 * time.Millisecond})
		require.NoError(t, err)
		if len(ls) == 1 {
			break
		}
	}
	// The lease expiring wakes the loop too.
	for {
		select {
		case <-wake:
		case <-deadline:
			t.Fatal("no wake-up when the lease expired")
		}
		ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 1, Duration: time.Minute})
		require.NoError(t, err)
		if len(ls) == 1 {
			require.Equal(t, 2, ls[0].Attempt)
			return
		}
	}
}

// benchKeys returns n distinct keys.
func benchKeys(n int) []ports.WorkKey {
	keys := make([]ports.WorkKey, n)
	for i := range keys {
		keys[i] = ports.WorkKey{Kind: "k", ScopeType: "target", ScopeID: fmt.Sprintf("id-%07d", i)}
	}
	return keys
}

// BenchmarkQueueEnqueue measures one enqueue: of a new key, and coalescing
// onto a pending key in a 10k backlog.
func BenchmarkQueueEnqueue(b *testing.B) {
	ctx := context.Background()
	b.Run("new", func(b *testing.B) {
		keys := benchKeys(b.N)
		q := memory.NewQueue(ports.SystemClock)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := q.WorkEnqueue(ctx, ports.EnqueueParams{Key: keys[i], Priority: i % 5}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("coalesce", func(b *testing.B) {
		const backlog = 10_000
		keys := benchKeys(backlog)
		q := memory.NewQueue(ports.SystemClock)
		for _, k := range keys {
			if err := q.WorkEnqueue(ctx, ports.EnqueueParams{Key: k}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := q.WorkEnqueue(ctx, ports.EnqueueParams{Key: keys[i%backlog], Priority: i % 5}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkQueueLeaseAck measures one batch of 100: lease from a 10k backlog
// of due items, then ack the batch with a requeue now, which keeps the
// backlog steady.
func BenchmarkQueueLeaseAck(b *testing.B) {
	const backlog, batch = 10_000, 100
	ctx := context.Background()
	q := memory.NewQueue(ports.SystemClock)
	for _, k := range benchKeys(backlog) {
		if err := q.WorkEnqueue(ctx, ports.EnqueueParams{Key: k}); err != nil {
			b.Fatal(err)
		}
	}
	acks := make([]ports.AckParams, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: batch, Duration: time.Minute, Owner: "bench"})
		if err != nil || len(ls) != batch {
			b.Fatalf("lease: %d items, %v", len(ls), err)
		}
		now := time.Now()
		for i, l := range ls {
			acks[i] = ports.AckParams{Lease: l.Ref(), RequeueAt: now}
		}
		res, err := q.WorkAck(ctx, acks...)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r != nil {
				b.Fatal(r)
			}
		}
	}
}

func TestQueueLivenessConformance(t *testing.T) {
	porttest.QueueLiveness(t, func(_ *testing.T, clock ports.Clock) (ports.Queue, ports.Liveness) {
		q, l := memory.NewQueue(clock), memory.NewLiveness()
		q.UseLiveness(l)
		return q, l
	})
}
