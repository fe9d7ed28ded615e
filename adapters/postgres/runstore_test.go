package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// runStoreSetup opens a migrated database in a fresh schema.
func runStoreSetup(t testing.TB) *postgres.DB {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(4))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.MigrateUp(ctx))
	return db
}

func TestRunStoreConformance(t *testing.T) {
	t.Parallel()
	porttest.RunStore(t, func(t *testing.T) ports.RunStore {
		return postgres.NewRunStore(runStoreSetup(t), ports.SystemClock)
	})
}

func TestRunStoreStampsWithItsClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	zone := time.FixedZone("X", 3*3600)
	t0 := time.Date(2026, 2, 3, 4, 5, 6, 7008009, zone)
	clock := porttest.NewFakeClock(t0)
	s := postgres.NewRunStore(runStoreSetup(t), clock)

	row, err := s.RunCreate(ctx, ports.RunRow{Ref: reconcile.RunRef{Kind: reconcile.KindRepo, ID: "r"}, State: reconcile.RepoPending})
	require.NoError(t, err)
	want0 := time.Date(2026, 2, 3, 1, 5, 6, 7008000, time.UTC)
	require.Equal(t, want0, row.CreatedAt)
	require.Equal(t, want0, row.UpdatedAt)
	got, err := s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, want0, got.CreatedAt, "read back at microsecond precision in UTC")

	t1 := t0.Add(time.Minute)
	clock.Set(t1)
	v, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: 1, State: reconcile.RepoQueued, Body: json.RawMessage(`{}`)})
	require.NoError(t, err)
	got, err = s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, want0, got.CreatedAt, "created_at never changes")
	require.Equal(t, want0.Add(time.Minute), got.UpdatedAt)

	clock.Set(t1.Add(time.Hour))
	_, err = s.RunObserve(ctx, ports.RunObserveParams{Ref: row.Ref, Heartbeat: t1})
	require.NoError(t, err)
	got, err = s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, v+1, got.Version)
	require.Equal(t, want0.Add(time.Hour+time.Minute), got.UpdatedAt)
	require.Equal(t, want0.Add(time.Minute), got.Heartbeat)
}

func TestRunStoreJoinsTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := runStoreSetup(t)
	s := postgres.NewRunStore(db, ports.SystemClock)
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "tx"}
	errAbort := errors.New("abort")

	// Writes inside the transaction see each other and vanish on rollback.
	err := db.InTx(ctx, func(ctx context.Context) error {
		_, err := s.RunCreate(ctx, ports.RunRow{Ref: ref, State: reconcile.StandaloneQueued})
		require.NoError(t, err)
		v, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: 1, State: reconcile.StandaloneRunning})
		require.NoError(t, err)
		got, err := s.RunGet(ctx, ref)
		require.NoError(t, err)
		require.Equal(t, v, got.Version)
		c, err := s.RunCounts(ctx, "")
		require.NoError(t, err)
		require.Equal(t, 1, c.GlobalActive)
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	_, err = s.RunGet(ctx, ref)
	require.ErrorIs(t, err, ports.ErrNotFound, "the rolled-back create left nothing")

	// A duplicate create and a lost compare-and-swap are answers, not
	// failures: the transaction goes on and commits.
	_, err = s.RunCreate(ctx, ports.RunRow{Ref: ref, State: reconcile.StandaloneQueued})
	require.NoError(t, err)
	other := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "after"}
	err = db.InTx(ctx, func(ctx context.Context) error {
		_, err := s.RunCreate(ctx, ports.RunRow{Ref: ref, State: reconcile.StandaloneQueued})
		require.ErrorIs(t, err, ports.ErrConflict)
		_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: 7, State: reconcile.StandaloneRunning})
		require.ErrorIs(t, err, ports.ErrConflict)
		_, err = s.RunCreate(ctx, ports.RunRow{Ref: other, State: reconcile.StandaloneQueued})
		return err
	})
	require.NoError(t, err)
	got, err := s.RunStates(ctx, reconcile.KindStandalone, []string{ref.ID, other.ID})
	require.NoError(t, err)
	require.Equal(t, map[string]reconcile.State{ref.ID: reconcile.StandaloneQueued, other.ID: reconcile.StandaloneQueued}, got)
}

func BenchmarkRunStoreUpdate(b *testing.B) {
	ctx := b.Context()
	s := postgres.NewRunStore(runStoreSetup(b), ports.SystemClock)
	row, err := s.RunCreate(ctx, ports.RunRow{Ref: reconcile.RunRef{Kind: reconcile.KindRepo, ID: "bench"}, State: reconcile.RepoRunning, Repo: "acme/a"})
	require.NoError(b, err)
	body := json.RawMessage(`{"prompt":"fix the flaky test","attempts":1,"branch":"agent/bench"}`)
	v := row.Version
	b.ReportAllocs()
	for b.Loop() {
		v, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v, State: reconcile.RepoRunning, Body: body})
		if err != nil {
			b.Fatal(err)
		}
	}
}
