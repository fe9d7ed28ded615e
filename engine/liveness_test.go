package engine_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
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
