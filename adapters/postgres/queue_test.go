package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// openDB opens a migrated database in a fresh schema, closed when tb ends;
// it also returns the schema's DSN.
func openDB(tb testing.TB) (*postgres.DB, string) {
	tb.Helper()
	dsn, _ := pgtest.Schema(tb)
	return openDBAt(tb, dsn)
}

// openDBAt opens dsn (another "process" on the same schema) and migrates
// it, closed when tb ends.
func openDBAt(tb testing.TB, dsn string) (*postgres.DB, string) {
	tb.Helper()
	db, err := postgres.Open(context.Background(), dsn)
	require.NoError(tb, err)
	tb.Cleanup(db.Close)
	require.NoError(tb, db.MigrateUp(context.Background()))
	return db, dsn
}

// newQueue is a queue over db, closed when tb ends.
func newQueue(tb testing.TB, db *postgres.DB, clock ports.Clock) *postgres.Queue {
	tb.Helper()
	q := postgres.NewQueue(db, clock)
	tb.Cleanup(q.Close)
	return q
}

func TestQueueConformance(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t) // skip up front rather than in every subtest
	porttest.Queue(t, func(t *testing.T, clock ports.Clock) ports.Queue {
		db, _ := openDB(t)
		return newQueue(t, db, clock)
	})
}

func TestQueueLivenessConformance(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t)
	porttest.QueueLiveness(t, func(t *testing.T, clock ports.Clock) (ports.Queue, ports.Liveness) {
		db, _ := openDB(t)
		return newQueue(t, db, clock), postgres.NewLiveness(db)
	})
}

// TestQueueEnqueueJoinsTransaction: an enqueue made through InTx's context
// commits and rolls back with the transaction.
func TestQueueEnqueueJoinsTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _ := openDB(t)
	q := newQueue(t, db, ports.SystemClock)
	boom := errors.New("boom")
	key := func(id string) ports.WorkKey { return ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: id} }

	err := db.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("rolled-back")}))
		_, err := q.WorkGet(ctx, key("rolled-back"))
		require.NoError(t, err, "the transaction sees its own enqueue")
		return boom
	})
	require.ErrorIs(t, err, boom, "fn's error comes back as is")
	_, err = q.WorkGet(ctx, key("rolled-back"))
	require.ErrorIs(t, err, ports.ErrNotFound, "a rolled-back enqueue leaves nothing")

	require.NoError(t, db.InTx(ctx, func(ctx context.Context) error {
		return q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("committed")})
	}))
	it, err := q.WorkGet(ctx, key("committed"))
	require.NoError(t, err)
	require.Equal(t, ports.WorkPending, it.State)
	stats, err := q.WorkStats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, stats[ports.WorkPending])
}

// TestQueueNotifyAcrossConnections: an enqueue committed by another process
// (another pool) wakes a subscriber, and one inside a transaction only on
// commit.
func TestQueueNotifyAcrossConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, dsn := openDB(t)
	q := newQueue(t, db, ports.SystemClock)
	other, err := postgres.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(other.Close)
	producer := newQueue(t, other, ports.SystemClock)

	wake := q.WorkNotify()
	// The listener wakes everyone once it listens; anything later is a
	// notification. Other tests share the server and channel, so a stray
	// wake-up is possible: the rolled-back case below tolerates none of
	// ours but cannot rule theirs out, so it only checks the commit case.
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener never connected")
	}
	key := ports.WorkKey{Kind: "notify-test", ScopeType: "t", ScopeID: "x"}
	require.NoError(t, producer.WorkEnqueue(ctx, ports.EnqueueParams{Key: key}))
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after an enqueue from another connection")
	}
}

func BenchmarkPostgresQueueLeaseAck(b *testing.B) {
	const batch = 100
	db, _ := openDB(b)
	q := newQueue(b, db, ports.SystemClock)
	ctx := context.Background()
	items := make([]ports.EnqueueParams, batch)
	acks := make([]ports.AckParams, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for j := range items {
			items[j] = ports.EnqueueParams{Key: ports.WorkKey{Kind: "bench", ScopeType: "t", ScopeID: fmt.Sprintf("%d-%d", i, j)}}
		}
		require.NoError(b, q.WorkEnqueue(ctx, items...))
		b.StartTimer()
		ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"bench"}, Limit: batch, Duration: time.Minute, Owner: "bench"})
		if err != nil || len(ls) != batch {
			b.Fatalf("lease: %d items, %v", len(ls), err)
		}
		for j, l := range ls {
			acks[j] = ports.AckParams{Lease: l.Ref()}
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

// BenchmarkPostgresQueueAck times the plain ack of a batch of 10 and of
// 100 leases (by tuple id) on a queue table that starts empty and keeps
// its dead rows, as a queue's does between vacuums; the enqueue and the
// lease are not timed.
func BenchmarkPostgresQueueAck(b *testing.B) {
	for _, batch := range []int{10, 100} {
		b.Run(fmt.Sprint(batch), func(b *testing.B) {
			db, _ := openDB(b)
			q := newQueue(b, db, ports.SystemClock)
			ctx := context.Background()
			items := make([]ports.EnqueueParams, batch)
			acks := make([]ports.AckParams, batch)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				for j := range items {
					items[j] = ports.EnqueueParams{Key: ports.WorkKey{Kind: "bench", ScopeType: "t", ScopeID: fmt.Sprintf("%d-%d", i, j)}}
				}
				if err := q.WorkEnqueue(ctx, items...); err != nil {
					b.Fatal(err)
				}
				ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"bench"}, Limit: batch, Duration: time.Minute, Owner: "bench"})
				if err != nil || len(ls) != batch {
					b.Fatalf("lease: %d items, %v", len(ls), err)
				}
				for j, l := range ls {
					acks[j] = ports.AckParams{Lease: l.Ref()}
				}
				b.StartTimer()
				if _, err := q.WorkAck(ctx, acks...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPostgresQueueEnqueue(b *testing.B) {
	const batch = 100
	db, _ := openDB(b)
	q := newQueue(b, db, ports.SystemClock)
	ctx := context.Background()
	items := make([]ports.EnqueueParams, batch)
	for j := range items {
		items[j] = ports.EnqueueParams{Key: ports.WorkKey{Kind: "bench", ScopeType: "t", ScopeID: fmt.Sprint(j)}}
	}
	b.ReportAllocs()
	for b.Loop() {
		// Coalescing onto existing rows: the steady state of a busy queue.
		if err := q.WorkEnqueue(ctx, items...); err != nil {
			b.Fatal(err)
		}
	}
}
