package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// batchProc records the batches it was given and answers each item with
// answer(item).
type batchProc struct {
	mu      sync.Mutex
	batches [][]engine.Item
	answer  func(engine.Item) engine.Outcome
	done    chan struct{}
	want    int
	seen    int
}

func (p *batchProc) Process(ctx context.Context, it engine.Item) engine.Outcome {
	return p.ProcessBatch(ctx, []engine.Item{it})[0]
}

func (p *batchProc) ProcessBatch(_ context.Context, items []engine.Item) []engine.Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batches = append(p.batches, items)
	outs := make([]engine.Outcome, len(items))
	for i, it := range items {
		outs[i] = p.answer(it)
	}
	p.seen += len(items)
	if p.seen >= p.want && p.done != nil {
		close(p.done)
		p.done = nil
	}
	return outs
}

// A BatchProcessor gets the leased items in batches of at most Batch, and
// every item is completed with its own outcome: done items are acked,
// failed ones retried.
func TestBatchProcessorTakesBatches(t *testing.T) {
	b := setup(t, engine.Options{})
	const n = 40
	var keys []ports.WorkKey
	for i := range n {
		keys = append(keys, key(i))
	}
	enqueue(t, b.q, keys...)
	failOnce := map[string]bool{"7": true}
	var mu sync.Mutex
	p := &batchProc{want: n + 1, done: make(chan struct{}), answer: func(it engine.Item) engine.Outcome {
		mu.Lock()
		defer mu.Unlock()
		if failOnce[it.Key.ScopeID] {
			delete(failOnce, it.Key.ScopeID)
			return engine.Retry(errors.New("first attempt fails"))
		}
		return engine.Done()
	}}
	done := p.done
	b.eng.Register("k", p, engine.KindOptions{Concurrency: 32, Batch: 8})
	run(t, b.eng)
	waitFor(t, done, "every item and the retry")
	require.Eventually(t, func() bool {
		st, err := b.q.WorkStats(context.Background())
		return err == nil && st[ports.WorkPending] == 0 && st[ports.WorkLeased] == 0
	}, 5*time.Second, 5*time.Millisecond, "every item acked")
	p.mu.Lock()
	defer p.mu.Unlock()
	multi := false
	for _, batch := range p.batches {
		require.LessOrEqual(t, len(batch), 8, "at most Batch items per pass")
		multi = multi || len(batch) > 1
	}
	require.True(t, multi, "some pass took more than one item")
	require.Equal(t, n+1, p.seen, "each item once, the failed one twice")
}

// A panicking batch pass retries every item of the batch.
func TestBatchProcessorPanicRetriesAll(t *testing.T) {
	b := setup(t, engine.Options{})
	enqueue(t, b.q, key(1), key(2), key(3)) // enqueued before Run: leased in one batch
	var mu sync.Mutex
	attempts := map[string]int{}
	p := &batchProc{want: 3, done: make(chan struct{}), answer: func(it engine.Item) engine.Outcome {
		mu.Lock()
		defer mu.Unlock()
		attempts[it.Key.ScopeID] = it.Attempt
		if it.Attempt == 1 {
			panic("boom")
		}
		return engine.Done()
	}}
	done := p.done
	b.eng.Register("k", p, engine.KindOptions{Concurrency: 3, Batch: 3})
	run(t, b.eng)
	waitFor(t, done, "the retries")
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"1", "2", "3"} {
		require.Equal(t, 2, attempts[id], "item %s was retried after the panic and then done", id)
	}
}
