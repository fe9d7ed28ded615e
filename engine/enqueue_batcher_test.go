package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// gatedQueue counts WorkEnqueue calls; the first call waits for release,
// so that the other callers pile up behind it. fail makes every call fail.
type gatedQueue struct {
	ports.Queue
	mu      sync.Mutex
	calls   int
	items   int
	entered chan struct{}
	release chan struct{}
	fail    error
}

func (g *gatedQueue) WorkEnqueue(ctx context.Context, items ...ports.EnqueueParams) error {
	g.mu.Lock()
	g.calls++
	first := g.calls == 1
	g.items += len(items)
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	if g.fail != nil {
		return g.fail
	}
	return g.Queue.WorkEnqueue(ctx, items...)
}

func batchKey(i int) ports.WorkKey {
	return ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: fmt.Sprintf("id-%03d", i)}
}

// runBatched makes n concurrent enqueues of one item each through a
// batcher whose first queue call is held until the rest are waiting.
func runBatched(t *testing.T, g *gatedQueue, n int) []error {
	t.Helper()
	b := engine.NewEnqueueBatcher(g)
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = b.WorkEnqueue(context.Background(), ports.EnqueueParams{Key: batchKey(0)})
	}()
	<-g.entered
	var waiting sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		waiting.Add(1)
		go func() {
			defer wg.Done()
			waiting.Done()
			errs[i] = b.WorkEnqueue(context.Background(), ports.EnqueueParams{Key: batchKey(i)})
		}()
	}
	waiting.Wait()
	close(g.release)
	wg.Wait()
	return errs
}

// TestEnqueueBatcherCoalesces: concurrent enqueues share queue calls, and
// each caller returns only once its item is stored.
func TestEnqueueBatcherCoalesces(t *testing.T) {
	t.Parallel()
	q := memory.NewQueue(ports.SystemClock)
	g := &gatedQueue{Queue: q, entered: make(chan struct{}), release: make(chan struct{})}
	const n = 50
	for i, err := range runBatched(t, g, n) {
		require.NoError(t, err, "enqueue %d", i)
		_, err := q.WorkGet(t.Context(), batchKey(i))
		require.NoError(t, err, "item %d is stored when its enqueue returns", i)
	}
	require.Equal(t, n, g.items)
	require.Less(t, g.calls, n, "calls were shared")
}

// TestEnqueueBatcherSharesErrors: a failed batch fails every caller in it.
func TestEnqueueBatcherSharesErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	g := &gatedQueue{Queue: memory.NewQueue(ports.SystemClock), entered: make(chan struct{}), release: make(chan struct{}), fail: boom}
	for i, err := range runBatched(t, g, 20) {
		require.ErrorIs(t, err, boom, "enqueue %d", i)
	}
}
