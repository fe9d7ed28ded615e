package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestAckLocksRowsInKeyOrder: a plain ack of several leases takes their
// rows in key order, whatever order the table holds them in and whatever
// join the planner picked from the table's statistics, as an enqueue does;
// an ack that took them in the table's order deadlocked with an enqueue of
// the same keys (seen under make soak). The rows are stored high key first
// and the statistics are those of a small table (the plan the ack by tuple
// id had then read the table in its physical order). With the high key's
// row locked elsewhere, the ack must already hold the low key's row while
// it waits: another session's NOWAIT lock on it fails. Both the ack by
// tuple id (the Queue that leased) and the ack by key (another Queue) are
// checked.
func TestAckLocksRowsInKeyOrder(t *testing.T) {
	for _, how := range []string{"by tuple id", "by key"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dsn, schema := pgtest.Schema(t)
			app := "ackorder-" + schema
			sep := " "
			if strings.Contains(dsn, "://") {
				sep = "&"
			}
			db, q, acker := ackQueues(t, dsn+sep+"application_name="+app, how)

			key := func(id string) ports.WorkKey { return ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: id} }
			var filler []ports.EnqueueParams
			for i := range 20 {
				filler = append(filler, ports.EnqueueParams{Key: ports.WorkKey{Kind: "other", ScopeType: "t", ScopeID: fmt.Sprint(i)}})
			}
			require.NoError(t, q.WorkEnqueue(ctx, filler...))
			// High key first, so the table's order is not the keys'.
			require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("b")}))
			require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("a")}))
			fill, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"other"}, Limit: 20, Duration: time.Minute, Owner: "w"})
			require.NoError(t, err)
			require.Len(t, fill, 20)
			ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 2, Duration: time.Minute, Owner: "w"})
			require.NoError(t, err)
			require.Len(t, ls, 2)
			// Statistics of a small table whose rows are leased.
			_, err = db.pool.Exec(ctx, "ANALYZE reconcile_work_scope")
			require.NoError(t, err)

			other, err := pgx.Connect(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = other.Close(ctx) })
			tx, err := other.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, "SELECT 1 FROM reconcile_work_scope WHERE kind = 'k' AND scope_id = 'b' FOR UPDATE")
			require.NoError(t, err)

			acked := make(chan error, 1)
			go func() {
				res, err := acker.WorkAck(ctx, ports.AckParams{Lease: ls[0].Ref()}, ports.AckParams{Lease: ls[1].Ref()})
				acked <- errors.Join(err, errors.Join(res...))
			}()
			// The ack waits for b's row.
			require.Eventually(t, func() bool {
				var n int
				err := other.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n)
				return err == nil && n == 1
			}, 30*time.Second, 5*time.Millisecond)
			_, err = tx.Exec(ctx, "SELECT 1 FROM reconcile_work_scope WHERE kind = 'k' AND scope_id = 'a' FOR UPDATE NOWAIT")
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr) && pgErr.Code == "55P03",
				"a's row is free while the ack waits for b's: the ack took b first (%v)", err)
			require.NoError(t, tx.Rollback(ctx))

			require.NoError(t, <-acked)
			for _, id := range []string{"a", "b"} {
				_, err := q.WorkGet(ctx, key(id))
				require.ErrorIs(t, err, ports.ErrNotFound, "%s is acked", id)
			}
		})
	}
}

// ackQueues opens a migrated DB on dsn with a Queue over it, and the Queue
// that acks its leases: the same one ("by tuple id": it knows the tuple
// ids its leases left), or one over a DB of its own ("by key").
func ackQueues(t *testing.T, dsn, how string, opts ...Option) (*DB, *Queue, *Queue) {
	t.Helper()
	open := func() *DB {
		db, err := Open(t.Context(), dsn, opts...)
		require.NoError(t, err)
		t.Cleanup(db.Close)
		return db
	}
	db := open()
	require.NoError(t, db.MigrateUp(t.Context()))
	q := NewQueue(db, ports.SystemClock)
	t.Cleanup(q.Close)
	if how == "by tuple id" {
		return db, q, q
	}
	acker := NewQueue(open(), ports.SystemClock)
	t.Cleanup(acker.Close)
	return db, q, acker
}
