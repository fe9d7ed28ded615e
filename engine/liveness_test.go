package engine_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// TestKeepAlive: the row is created at once, alive ttl past the clock,
// and removed when the context ends.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	l := memory.NewLiveness()
	clock := porttest.NewFakeClock(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		engine.KeepAlive(ctx, l, "p1", time.Hour, clock, slog.New(slog.DiscardHandler), nil)
	}()
	require.Eventually(t, func() bool {
		until, err := l.LivenessGet(t.Context(), "p1")
		return err == nil && until.Equal(clock.Now().Add(time.Hour))
	}, 10*time.Second, time.Millisecond, "beats at once")
	cancel()
	<-done
	until, err := l.LivenessGet(t.Context(), "p1")
	require.NoError(t, err)
	require.True(t, until.IsZero(), "removed on a clean stop")
}

// TestOwnLiveness: OwnLiveness keeps the Liveness contract, and reads an
// owner beaten through it without asking the wrapped store.
func TestOwnLiveness(t *testing.T) {
	t.Parallel()
	porttest.Liveness(t, func(*testing.T) ports.Liveness { return &engine.OwnLiveness{Liveness: memory.NewLiveness()} })
	t.Run("OwnOwnerReadWithoutTheStore", func(t *testing.T) {
		t.Parallel()
		ctx, store := t.Context(), &countingLiveness{Liveness: memory.NewLiveness()}
		own := &engine.OwnLiveness{Liveness: store}
		at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		require.NoError(t, own.LivenessBeat(ctx, "me", at))
		require.NoError(t, store.LivenessBeat(ctx, "other", at))
		got, err := own.LivenessGet(ctx, "me")
		require.NoError(t, err)
		require.Equal(t, at, got)
		require.Zero(t, store.gets, "its own owner is not read from the store")
		got, err = own.LivenessGet(ctx, "other")
		require.NoError(t, err)
		require.Equal(t, at, got)
		require.Equal(t, 1, store.gets)
	})
}

// countingLiveness counts the reads of the Liveness it wraps.
type countingLiveness struct {
	ports.Liveness
	gets int
}

func (c *countingLiveness) LivenessGet(ctx context.Context, owner string) (time.Time, error) {
	c.gets++
	return c.Liveness.LivenessGet(ctx, owner)
}
