package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
)

// Calls that arrive while a batch is in flight go out together in the
// next one, and each caller gets the error run gave for its own item.
func TestCoalescerBatchesAndAnswersEach(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	first := true
	c := engine.NewCoalescer(func(_ context.Context, items []int) []error {
		mu.Lock()
		batches = append(batches, append([]int(nil), items...))
		wait := first
		first = false
		mu.Unlock()
		if wait {
			<-release // hold the first batch until the others queued up
		}
		errs := make([]error, len(items))
		for i, it := range items {
			if it%2 == 1 {
				errs[i] = errors.New("odd")
			}
		}
		return errs
	})
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- c.Do(ctx, 0) }()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 1 }, 5*time.Second, time.Millisecond)
	const n = 10
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.Do(ctx, i) }()
	}
	// Every later call waits behind the first batch.
	require.Never(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) > 1 }, 50*time.Millisecond, 5*time.Millisecond)
	close(release)
	require.NoError(t, <-done)
	wg.Wait()
	for i := 1; i <= n; i++ {
		if i%2 == 1 {
			require.EqualError(t, errs[i], "odd", "item %d", i)
		} else {
			require.NoError(t, errs[i], "item %d", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Less(t, len(batches), n+1, "the waiting calls shared batches")
	seen := 0
	for _, b := range batches {
		seen += len(b)
	}
	require.Equal(t, n+1, seen, "every item ran once")
}
