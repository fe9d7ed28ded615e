package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// Tests of what the conformance suite cannot see: SQL quoting, row locks
// held by open transactions, and lock order across processes.

// TestQueueKeysNeedNoEscaping: keys travel through array literals; quotes,
// separators, braces, backslashes and the word NULL come back unchanged.
func TestQueueKeysNeedNoEscaping(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _ := openDB(t)
	q := newQueue(t, db, ports.SystemClock)
	ids := []string{`it's`, `say "hi"`, `a,b`, `{x}`, `back\slash`, `NULL`, ` spaced `, `ünïcødé`, `?0`, `$1`}
	kind := `k'"{,}\`
	ps := make([]ports.EnqueueParams, len(ids))
	for i, id := range ids {
		ps[i] = ports.EnqueueParams{Key: ports.WorkKey{Kind: kind, ScopeType: `type "q"`, ScopeID: id}, MaxAttempts: 2}
	}
	require.NoError(t, q.WorkEnqueue(ctx, ps...))
	for _, p := range ps {
		it, err := q.WorkGet(ctx, p.Key)
		require.NoError(t, err, "%q", p.Key.ScopeID)
		require.Equal(t, p.Key, it.Key)
	}
	ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{kind}, Limit: 100, Duration: time.Minute, Owner: `o'wner`})
	require.NoError(t, err)
	require.Len(t, ls, len(ids))
	acks := make([]ports.AckParams, len(ls))
	for i, l := range ls {
		acks[i] = ports.AckParams{Lease: l.Ref()}
	}
	res, err := q.WorkHeartbeat(ctx, time.Minute, ports.LeaseRef{Key: ls[0].Key, Token: ls[0].Token})
	require.NoError(t, err)
	require.NoError(t, res[0])
	require.NoError(t, q.WorkRetry(ctx, ports.RetryParams{Lease: ls[0].Ref(), Err: `it's "broken"`, Terminal: true}))
	it, err := q.WorkGet(ctx, ls[0].Key)
	require.NoError(t, err)
	require.Equal(t, `it's "broken"`, it.LastError)
	res, err = q.WorkAck(ctx, acks[1:]...)
	require.NoError(t, err)
	for i, r := range res {
		require.NoError(t, r, "%q", acks[i+1].Lease.Key.ScopeID)
	}
	require.NoError(t, q.WorkRedrive(ctx, ls[0].Key))
}

// TestQueueLeaseSkipsLockedRows: an item locked by an open transaction (an
// enqueue not yet committed) is skipped, never waited for; it is leasable
// once the transaction ends.
func TestQueueLeaseSkipsLockedRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _ := openDB(t)
	q := newQueue(t, db, ports.SystemClock)
	key := func(id string) ports.WorkKey { return ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: id} }
	require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("locked"), Priority: 9}, ports.EnqueueParams{Key: key("free")}))
	lease := func(ctx context.Context) []ports.WorkKey {
		ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 10, Duration: time.Minute, Owner: "w"})
		require.NoError(t, err)
		keys := make([]ports.WorkKey, len(ls))
		for i, l := range ls {
			keys[i] = l.Key
		}
		return keys
	}
	require.NoError(t, db.InTx(ctx, func(txCtx context.Context) error {
		// The coalescing enqueue holds the row lock until commit.
		require.NoError(t, q.WorkEnqueue(txCtx, ports.EnqueueParams{Key: key("locked")}))
		got := make(chan []ports.WorkKey, 1)
		go func() {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got <- lease(lctx) // outside the transaction
		}()
		require.Equal(t, []ports.WorkKey{key("free")}, <-got, "the locked item is skipped, not waited for")
		return nil
	}))
	require.Equal(t, []ports.WorkKey{key("locked")}, lease(ctx))
}

// TestQueueBatchesNeverDeadlock: processes enqueue, heartbeat and ack
// overlapping batches in shuffled orders; rows are always locked in key
// order, so no statement fails with a deadlock.
func TestQueueBatchesNeverDeadlock(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stress test")
	}
	ctx := t.Context()
	db, dsn := openDB(t)
	const procs, rounds, nKeys = 4, 30, 24
	keys := make([]ports.WorkKey, nKeys)
	for i := range keys {
		keys[i] = ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: fmt.Sprintf("%02d", i)}
	}
	queues := []*postgres.Queue{newQueue(t, db, ports.SystemClock)}
	for range procs - 1 {
		other, _ := openDBAt(t, dsn)
		queues = append(queues, newQueue(t, other, ports.SystemClock))
	}
	errs := make(chan error, procs*rounds*3)
	var wg sync.WaitGroup
	for p, q := range queues {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			for range rounds {
				ps := make([]ports.EnqueueParams, nKeys)
				for i, k := range keys {
					ps[i] = ports.EnqueueParams{Key: k}
				}
				rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
				if err := q.WorkEnqueue(ctx, ps...); err != nil {
					errs <- fmt.Errorf("enqueue: %w", err)
					return
				}
				ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 8, Duration: time.Minute, Owner: "w"})
				if err != nil {
					errs <- fmt.Errorf("lease: %w", err)
					return
				}
				refs := make([]ports.LeaseRef, len(ls))
				for i, l := range ls {
					refs[i] = l.Ref()
				}
				rng.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
				if _, err := q.WorkHeartbeat(ctx, time.Minute, refs...); err != nil {
					errs <- fmt.Errorf("heartbeat: %w", err)
					return
				}
				slices.Reverse(refs)
				acks := make([]ports.AckParams, len(refs))
				for i, r := range refs {
					acks[i] = ports.AckParams{Lease: r}
				}
				if _, err := q.WorkAck(ctx, acks...); err != nil {
					errs <- fmt.Errorf("ack: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestQueueLeaseFindsSkippedExpiredLease: an expired lease that a lease
// skipped because another transaction held its row (here an enqueue onto it
// that commits later) lies below the floor that lease raised; it is still
// reclaimed, by the whole read due a quarter of the lease duration later.
func TestQueueLeaseFindsSkippedExpiredLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _ := openDB(t)
	clock := porttest.NewFakeClock(time.Now().UTC().Truncate(time.Second))
	q := newQueue(t, db, clock)
	const d = 4 * time.Second
	key := ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: "x"}
	lease := func(ctx context.Context) []ports.Lease {
		ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 10, Duration: d, Owner: "w"})
		require.NoError(t, err)
		return ls
	}
	require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key}))
	require.Len(t, lease(ctx), 1)
	clock.Advance(d + time.Second) // the lease expired a second ago

	require.NoError(t, db.InTx(ctx, func(txCtx context.Context) error {
		require.NoError(t, q.WorkEnqueue(txCtx, ports.EnqueueParams{Key: key}))
		got := make(chan []ports.Lease, 1)
		go func() { got <- lease(ctx) }() // outside the transaction
		require.Empty(t, <-got, "the locked row is skipped")
		return nil
	}))

	clock.Advance(d / 4)
	ls := lease(ctx)
	require.Len(t, ls, 1, "the skipped expired lease is reclaimed by the next whole read")
	require.Equal(t, key, ls[0].Key)
	require.Equal(t, 2, ls[0].Attempt)
}

// TestQueueAckRacingEnqueue: an ack whose row an open transaction is
// changing (an enqueue during the lease, not yet committed) waits for it
// and then sees the enqueue: the item is pending again, never deleted, and
// the ack succeeds; the other item of the batch is deleted. The ack's plain
// DELETE (by tuple id when the acking Queue made the lease, by key when
// another did) finds the row changed since its snapshot and leaves it to
// the full ack, which reads the committed row.
func TestQueueAckRacingEnqueue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, dsn := openDB(t)
	q := newQueue(t, db, ports.SystemClock)
	other, _ := openDBAt(t, dsn)
	probe, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = probe.Close(context.Background()) })
	for _, tc := range []struct {
		name  string
		acker *postgres.Queue
	}{
		{"by tuple id", q},
		{"by key", newQueue(t, other, ports.SystemClock)},
	} {
		kind := "k " + tc.name
		key := ports.WorkKey{Kind: kind, ScopeType: "t", ScopeID: "raced"}
		plain := ports.WorkKey{Kind: kind, ScopeType: "t", ScopeID: "plain"}
		require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key}, ports.EnqueueParams{Key: plain}))
		ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{kind}, Limit: 2, Duration: time.Minute, Owner: "w"})
		require.NoError(t, err)
		require.Len(t, ls, 2)

		type ackResult struct {
			res []error
			err error
		}
		acked := make(chan ackResult, 1)
		require.NoError(t, db.InTx(ctx, func(txCtx context.Context) error {
			// The coalescing enqueue holds the row lock until commit.
			require.NoError(t, q.WorkEnqueue(txCtx, ports.EnqueueParams{Key: key}))
			go func() {
				res, err := tc.acker.WorkAck(ctx, ports.AckParams{Lease: ls[0].Ref()}, ports.AckParams{Lease: ls[1].Ref()})
				acked <- ackResult{res, err}
			}()
			// Commit only once the ack waits for the row lock.
			require.Eventually(t, func() bool {
				var n int
				err := probe.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock'
						AND (query LIKE '%DELETE FROM reconcile_work_scope%' OR query LIKE '%reconcile_work_ack_delete%')`).Scan(&n)
				return err == nil && n > 0
			}, 10*time.Second, 5*time.Millisecond, "%s: the ack waits for the enqueue's row lock", tc.name)
			return nil
		}))
		r := <-acked
		require.NoError(t, r.err, tc.name)
		require.NoError(t, r.res[0], tc.name)
		require.NoError(t, r.res[1], tc.name)
		it, err := q.WorkGet(ctx, key)
		require.NoError(t, err, tc.name)
		require.Equal(t, ports.WorkPending, it.State, "%s: the enqueue during the lease is kept", tc.name)
		_, err = q.WorkGet(ctx, plain)
		require.ErrorIs(t, err, ports.ErrNotFound, "%s: the other item of the batch is deleted", tc.name)
	}
}
