package memory_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile"
)

func TestRunStoreConformance(t *testing.T) {
	t.Parallel()
	porttest.RunStore(t, func(*testing.T) ports.RunStore { return memory.NewRunStore(ports.SystemClock) })
}

func TestRunStoreStampsWithItsClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// A time with nanoseconds in a non-UTC zone: stored at microsecond
	// precision in UTC, like Postgres.
	zone := time.FixedZone("X", 3*3600)
	t0 := time.Date(2026, 2, 3, 4, 5, 6, 7008009, zone)
	clock := porttest.NewFakeClock(t0)
	s := memory.NewRunStore(clock)

	row, err := s.RunCreate(ctx, ports.RunRow{Ref: reconcile.RunRef{Kind: reconcile.KindRepo, ID: "r"}, State: reconcile.RepoPending})
	require.NoError(t, err)
	want0 := time.Date(2026, 2, 3, 1, 5, 6, 7008000, time.UTC)
	require.Equal(t, want0, row.CreatedAt)
	require.Equal(t, want0, row.UpdatedAt)

	t1 := t0.Add(time.Minute)
	clock.Set(t1)
	v, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: 1, State: reconcile.RepoQueued, Body: json.RawMessage(`{}`)})
	require.NoError(t, err)
	got, err := s.RunGet(ctx, row.Ref)
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
	require.Equal(t, want0.Add(time.Minute), got.Heartbeat, "heartbeat kept at microsecond precision in UTC")
}

func BenchmarkRunStoreUpdate(b *testing.B) {
	ctx := b.Context()
	s := memory.NewRunStore(ports.SystemClock)
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
