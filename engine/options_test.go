package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// TestLeaseBelowMinimumIsAnError: a library caller's lease too short to
// renew (below MinLeaseDuration; under 3 ns it used to panic in the
// renewal ticker during the first pass) makes Run and Drain return an
// error naming the option, and no item is leased.
func TestLeaseBelowMinimumIsAnError(t *testing.T) {
	t.Parallel()
	for _, lease := range []time.Duration{time.Nanosecond, 2 * time.Nanosecond, engine.MinLeaseDuration - 1} {
		clock := porttest.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
		q := memory.NewQueue(clock)
		key := ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: "1"}
		require.NoError(t, q.WorkEnqueue(t.Context(), ports.EnqueueParams{Key: key}))
		ran := false
		eng := engine.New(q, engine.Options{Clock: clock, Logger: quietLogger(), LeaseDuration: lease})
		eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome {
			ran = true
			return engine.Done()
		}), engine.KindOptions{Concurrency: 1})
		err := eng.Run(t.Context())
		require.ErrorContains(t, err, "LeaseDuration", "lease %v", lease)
		_, err = eng.Drain(t.Context())
		require.ErrorContains(t, err, "LeaseDuration")
		require.False(t, ran)
		stats, err := q.WorkKindStats(t.Context())
		require.NoError(t, err)
		require.Equal(t, []ports.KindStats{{Kind: "k", State: ports.WorkPending, Count: 1, OldestDue: stats[0].OldestDue}}, stats, "still pending, never leased")
	}
	// The minimum itself runs.
	clock := porttest.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	eng := engine.New(memory.NewQueue(clock), engine.Options{Clock: clock, Logger: quietLogger(), LeaseDuration: engine.MinLeaseDuration})
	eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome { return engine.Done() }), engine.KindOptions{})
	_, err := eng.Drain(t.Context())
	require.NoError(t, err)
}
