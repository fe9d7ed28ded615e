package postgres

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestLeaseReadsWhatItClaimsWhateverTheStatistics: a lease of 10 items from
// a backlog of ready items reads a few dozen heap blocks (its candidates in
// lease order from the ready index, each row then found by its tuple id,
// and their updates), far fewer than the backlog spans, whatever the
// table's statistics say:
//   - none yet, over 200,000 items: estimated from defaults, the kind seems
//     to have almost no ready items, and reading them all with a bitmap
//     scan and sorting them looked cheaper. Every lease did so until the
//     next ANALYZE: a backlog that grew faster than autovacuum looked made
//     each lease read the whole backlog (bench queue: 7,000 items/s at
//     200,000 items against 85,000 at 50,000);
//   - true ones, over 20,000 items: hashing the whole table to find the
//     candidates' rows looked cheaper than a lookup by tuple id for each of
//     the (assumed) thousand candidates a set-returning function yields.
func TestLeaseReadsWhatItClaimsWhateverTheStatistics(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		items   int
		analyze bool
	}{
		{"no statistics, 200,000 items", 200000, false},
		{"statistics, 20,000 items", 20000, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			read, pages := leaseHeapBlocks(t, c.items, c.analyze)
			require.Greater(t, pages, 2*int64(150), "the backlog spans far more blocks than the bound")
			require.Less(t, read, int64(150), "heap blocks a lease of 10 read, of the table's %d", pages)
		})
	}
}

// leaseHeapBlocks enqueues n ready items (ANALYZE after, if analyze) on a
// fresh schema, leases 10 and returns the heap blocks of the queue table
// the lease read and the blocks the table spans.
func leaseHeapBlocks(t *testing.T, n int, analyze bool) (read, pages int64) {
	ctx := t.Context()
	dsn, _ := pgtest.Schema(t)
	// One connection, so that the statistics reads below run in the session
	// that leased and see its counts once it flushed them.
	db, err := Open(ctx, dsn, WithMaxConns(1))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.MigrateUp(ctx))
	q := NewQueue(db, ports.SystemClock)
	t.Cleanup(q.Close)
	exec := func(sql string) {
		_, err := db.pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}

	for i := 0; i < n; i += 1000 {
		ps := make([]ports.EnqueueParams, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			ps = append(ps, ports.EnqueueParams{Key: ports.WorkKey{Kind: "k", ScopeType: "item", ScopeID: fmt.Sprintf("t%06d", j)}})
		}
		require.NoError(t, q.WorkEnqueue(ctx, ps...))
	}
	if analyze {
		exec(`ANALYZE reconcile_work_scope`)
	} else {
		var plan string
		require.NoError(t, db.pool.QueryRow(ctx, `EXPLAIN SELECT * FROM reconcile_work_scope WHERE kind = 'k' AND state = 'ready'`).Scan(&plan))
		m := regexp.MustCompile(`rows=(\d+)`).FindStringSubmatch(plan)
		require.NotNil(t, m, plan)
		est, _ := strconv.Atoi(m[1])
		require.Less(t, est, n/100, "the planner underestimates the ready items a hundredfold (the case under test): %s", plan)
	}

	exec(`SET stats_fetch_consistency = none`)
	heapBlocks := func() int64 {
		exec(`SELECT pg_stat_force_next_flush()`)
		var b int64
		require.NoError(t, db.pool.QueryRow(ctx, `SELECT coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
			FROM pg_statio_user_tables WHERE relid = 'reconcile_work_scope'::regclass`).Scan(&b))
		return b
	}
	before := heapBlocks()
	ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 10, Duration: time.Minute, Owner: "w"})
	require.NoError(t, err)
	read = heapBlocks() - before
	require.Len(t, ls, 10)
	for i, l := range ls {
		require.Equal(t, fmt.Sprintf("t%06d", i), l.Key.ScopeID, "in lease order")
	}
	require.NoError(t, db.pool.QueryRow(ctx, `SELECT pg_relation_size('reconcile_work_scope') / 8192`).Scan(&pages))
	t.Logf("a lease of 10 read %d heap blocks of %d", read, pages)
	return read, pages
}

// TestAckReadsWhatItDeletesWhateverTheStatistics: a plain ack of 10 leases
// reads a few dozen heap blocks, by tuple id (the Queue that leased) and
// by key (another Queue), though its connection planned it while the table
// was small and the table grew to 20,000 leased items since: planned then,
// the plain acks read the whole table once per ack (by tuple id) or once
// per acked row (by key) until the next ANALYZE (641 and 12,440 blocks of
// 621 before migration 0018).
func TestAckReadsWhatItDeletesWhateverTheStatistics(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"by tuple id", "by key"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dsn, _ := pgtest.Schema(t)
			// One connection each: it plans the acks, and the statistics
			// reads below run in its session.
			db, q, acker := ackQueues(t, dsn, how, WithMaxConns(1))
			enqueue := func(from, n int) {
				for i := from; i < from+n; i += 1000 {
					ps := make([]ports.EnqueueParams, 0, 1000)
					for j := i; j < min(i+1000, from+n); j++ {
						ps = append(ps, ports.EnqueueParams{Key: ports.WorkKey{Kind: "k", ScopeType: "item", ScopeID: fmt.Sprintf("t%06d", j)}})
					}
					require.NoError(t, q.WorkEnqueue(ctx, ps...))
				}
			}
			lease := func(n int) []ports.Lease {
				var ls []ports.Lease
				for len(ls) < n {
					l, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: min(1000, n-len(ls)), Duration: time.Minute, Owner: "w"})
					require.NoError(t, err)
					require.NotEmpty(t, l)
					ls = append(ls, l...)
				}
				return ls
			}
			ack := func(ls []ports.Lease) {
				acks := make([]ports.AckParams, len(ls))
				for i := range ls {
					acks[i] = ports.AckParams{Lease: ls[i].Ref()}
				}
				res, err := acker.WorkAck(ctx, acks...)
				require.NoError(t, err)
				for _, e := range res {
					require.NoError(t, e)
				}
			}

			// A small table, analyzed, and the acks planned on it.
			enqueue(0, 20)
			small := lease(20)
			_, err := db.pool.Exec(ctx, "ANALYZE reconcile_work_scope")
			require.NoError(t, err)
			ack(small[:2])
			// Then it grows, with no ANALYZE.
			enqueue(20, 20000)
			big := lease(20000)

			heapBlocks := func() int64 {
				_, err := acker.db.pool.Exec(ctx, `SET stats_fetch_consistency = none`)
				require.NoError(t, err)
				_, err = acker.db.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
				require.NoError(t, err)
				var b int64
				require.NoError(t, acker.db.pool.QueryRow(ctx, `SELECT coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
					FROM pg_statio_user_tables WHERE relid = 'reconcile_work_scope'::regclass`).Scan(&b))
				return b
			}
			before := heapBlocks()
			ack(big[:10])
			read := heapBlocks() - before
			var pages int64
			require.NoError(t, db.pool.QueryRow(ctx, `SELECT pg_relation_size('reconcile_work_scope') / 8192`).Scan(&pages))
			t.Logf("an ack of 10 read %d heap blocks of %d", read, pages)
			require.Greater(t, pages, 2*int64(150), "the table spans far more blocks than the bound")
			require.Less(t, read, int64(150), "heap blocks an ack of 10 read, of the table's %d", pages)
			for _, l := range big[:10] {
				_, err := q.WorkGet(ctx, l.Key)
				require.ErrorIs(t, err, ports.ErrNotFound, "%s is acked", l.Key.ScopeID)
			}
		})
	}
}
