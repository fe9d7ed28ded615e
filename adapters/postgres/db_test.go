package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
)

// setupTx is a migrated database with a queue over it and a key helper.
func setupTx(t *testing.T) (*postgres.DB, *postgres.Queue, func(string) ports.WorkKey) {
	t.Helper()
	db, _ := openDB(t)
	return db, newQueue(t, db, ports.SystemClock), func(id string) ports.WorkKey {
		return ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: id}
	}
}

// TestInTxNestedJoins: an InTx inside another joins it, so the inner write
// rolls back with the outer transaction even though the inner returned nil.
func TestInTxNestedJoins(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, q, key := setupTx(t)
	boom := errors.New("outer fails")
	err := db.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, db.InTx(ctx, func(ctx context.Context) error {
			return q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("inner")})
		}))
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = q.WorkGet(ctx, key("inner"))
	require.ErrorIs(t, err, ports.ErrNotFound)
}

// TestInTxPanicRollsBack: a panic in fn rolls back and goes on.
func TestInTxPanicRollsBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, q, key := setupTx(t)
	require.PanicsWithValue(t, "kaboom", func() {
		_ = db.InTx(ctx, func(ctx context.Context) error {
			require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("panicked")}))
			panic("kaboom")
		})
	})
	_, err := q.WorkGet(ctx, key("panicked"))
	require.ErrorIs(t, err, ports.ErrNotFound)
}

// TestInTxOtherDB: a transaction of one DB is not joined by another DB's
// adapters: their writes commit on their own.
func TestInTxOtherDB(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, key := setupTx(t)
	other, _ := openDB(t)
	q2 := newQueue(t, other, ports.SystemClock)
	boom := errors.New("boom")
	require.ErrorIs(t, db.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, q2.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("elsewhere")}))
		return boom
	}), boom)
	_, err := q2.WorkGet(ctx, key("elsewhere"))
	require.NoError(t, err, "the other DB's write did not join the rolled-back transaction")
}

func TestOpenBadDSN(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(t.Context(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	require.ErrorContains(t, err, "connect 127.0.0.1:1")
	_, err = postgres.Open(t.Context(), "postgres://%zz")
	require.ErrorContains(t, err, "parse dsn")
}
