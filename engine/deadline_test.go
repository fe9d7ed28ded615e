package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestHangingPassIsCancelledAndRetried: a pass that blocks until its
// context ends is cancelled at its deadline instead of renewing its lease
// forever, and the item is retried; the retry completes it.
func TestHangingPassIsCancelledAndRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{LeaseDuration: 30 * time.Millisecond})
	var mu sync.Mutex
	var attempts []int
	var causes []error
	done := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(ctx context.Context, it engine.Item) engine.Outcome {
		mu.Lock()
		attempts = append(attempts, it.Attempt)
		first := len(attempts) == 1
		mu.Unlock()
		if !first {
			close(done)
			return engine.Done()
		}
		<-ctx.Done() // hangs until cancelled
		mu.Lock()
		causes = append(causes, context.Cause(ctx))
		mu.Unlock()
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	run(t, b.eng)
	waitFor(t, done, "the retry")
	require.Equal(t, []int{1, 2}, attempts, "retried after the deadline")
	require.Len(t, causes, 1)
	require.ErrorIs(t, causes[0], engine.ErrPassDeadline)
	require.Eventually(t, func() bool {
		st, err := b.q.WorkStats(context.Background())
		require.NoError(t, err)
		return st[ports.WorkPending]+st[ports.WorkLeased]+st[ports.WorkDead] == 0
	}, 5*time.Second, 5*time.Millisecond)
}

// TestPassTimeoutDefaultsToTenLeases: with no PassTimeout a pass gets
// PassTimeoutLeases lease durations.
func TestPassTimeoutDefaultsToTenLeases(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{LeaseDuration: 80 * time.Millisecond})
	got := make(chan time.Duration, 1)
	require.Equal(t, 10, engine.PassTimeoutLeases)
	b.eng.Register("k", engine.ProcessorFunc(func(ctx context.Context, _ engine.Item) engine.Outcome {
		d, ok := ctx.Deadline()
		require.True(t, ok, "a pass has a deadline")
		got <- time.Until(d)
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	run(t, b.eng)
	select {
	case d := <-got:
		require.LessOrEqual(t, d, 800*time.Millisecond)
		require.Greater(t, d, 400*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("no pass")
	}
}
