package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

type bundle struct {
	q   *memory.Queue
	eng *engine.Engine
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func setup(t *testing.T, opts engine.Options) bundle {
	t.Helper()
	q := memory.NewQueue(ports.SystemClock)
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	if opts.RetryBase == 0 {
		opts.RetryBase = time.Millisecond
		opts.RetryMax = 5 * time.Millisecond
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	return bundle{q: q, eng: engine.New(q, opts)}
}

// run starts the engine and returns a stop function that waits for Run.
func run(t *testing.T, eng *engine.Engine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("engine did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func key(i int) ports.WorkKey {
	return ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: fmt.Sprint(i)}
}

func enqueue(t *testing.T, q ports.Queue, keys ...ports.WorkKey) {
	t.Helper()
	ps := make([]ports.EnqueueParams, len(keys))
	for i, k := range keys {
		ps[i] = ports.EnqueueParams{Key: k}
	}
	require.NoError(t, q.WorkEnqueue(context.Background(), ps...))
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func requireEmpty(t *testing.T, q ports.Queue) {
	t.Helper()
	stats, err := q.WorkStats(context.Background())
	require.NoError(t, err)
	require.Zero(t, stats[ports.WorkPending]+stats[ports.WorkLeased]+stats[ports.WorkDead], "queue not empty: %v", stats)
}

func TestEngineProcessesEveryItemOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	const n = 500
	var mu sync.Mutex
	seen := map[string]int{}
	all := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(_ context.Context, it engine.Item) engine.Outcome {
		mu.Lock()
		defer mu.Unlock()
		seen[it.Key.ScopeID]++
		if len(seen) == n {
			close(all)
		}
		return engine.Done()
	}), engine.KindOptions{Concurrency: 8})
	keys := make([]ports.WorkKey, n)
	for i := range keys {
		keys[i] = key(i)
	}
	enqueue(t, b.q, keys...)
	stop := run(t, b.eng)
	waitFor(t, all, "all items")
	stop()
	mu.Lock()
	defer mu.Unlock()
	for id, c := range seen {
		require.Equal(t, 1, c, "item %s ran %d times", id, c)
	}
	requireEmpty(t, b.q)
}

func TestEngineRetryThenSucceed(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	var calls atomic.Int32
	done := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(_ context.Context, it engine.Item) engine.Outcome {
		c := calls.Add(1)
		require.Equal(t, int(c), it.Attempt, "attempt counts leases")
		if c < 3 {
			return engine.Retry(errors.New("transient"))
		}
		close(done)
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	stop := run(t, b.eng)
	waitFor(t, done, "third attempt")
	stop()
	requireEmpty(t, b.q)
}

func TestEnginePanicBecomesRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	var calls atomic.Int32
	done := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		close(done)
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	stop := run(t, b.eng)
	waitFor(t, done, "retry after panic")
	stop()
	requireEmpty(t, b.q)
}

func TestEngineTerminalDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	done := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome {
		defer close(done)
		return engine.Terminal(errors.New("bad input"))
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	stop := run(t, b.eng)
	waitFor(t, done, "pass")
	stop()
	dead, err := b.q.WorkDeadList(context.Background(), ports.DeadListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, key(1), dead[0].Key)
	require.Contains(t, dead[0].LastError, "bad input")
}

func TestEngineRequeueAtRunsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	var calls atomic.Int32
	done := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome {
		if calls.Add(1) == 1 {
			return engine.RequeueAt(time.Now().Add(30 * time.Millisecond))
		}
		close(done)
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	stop := run(t, b.eng)
	waitFor(t, done, "requeued pass")
	stop()
	require.Equal(t, int32(2), calls.Load())
}

func TestEngineEnqueueDuringPassIsNotLost(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	var calls atomic.Int32
	inPass := make(chan struct{})
	release := make(chan struct{})
	second := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome {
		switch calls.Add(1) {
		case 1:
			close(inPass)
			<-release
		case 2:
			close(second)
		}
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	stop := run(t, b.eng)
	waitFor(t, inPass, "first pass")
	enqueue(t, b.q, key(1)) // arrives while leased
	close(release)
	waitFor(t, second, "second pass")
	stop()
	requireEmpty(t, b.q)
}

func TestEngineRenewsLeaseDuringLongPass(t *testing.T) {
	t.Parallel()
	q := memory.NewQueue(ports.SystemClock)
	mk := func() *engine.Engine {
		// Leases long enough that a loaded machine still renews them in time.
		return engine.New(q, engine.Options{Logger: quietLogger(), LeaseDuration: time.Second, PollInterval: 5 * time.Millisecond})
	}
	var calls atomic.Int32
	done := make(chan struct{})
	proc := engine.ProcessorFunc(func(ctx context.Context, _ engine.Item) engine.Outcome {
		if calls.Add(1) == 1 {
			// Several lease periods; the heartbeat must keep the lease.
			select {
			case <-time.After(2500 * time.Millisecond):
			case <-ctx.Done():
				return engine.Retry(ctx.Err())
			}
			close(done)
		}
		return engine.Done()
	})
	a, c := mk(), mk()
	a.Register("k", proc, engine.KindOptions{Concurrency: 1})
	c.Register("k", proc, engine.KindOptions{Concurrency: 1})
	enqueue(t, q, key(1))
	stopA := run(t, a)
	stopC := run(t, c)
	waitFor(t, done, "long pass")
	stopA()
	stopC()
	require.Equal(t, int32(1), calls.Load(), "a renewed lease must not be taken by the other engine")
	requireEmpty(t, q)
}

func TestEngineGracefulShutdownFinishesInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{ShutdownTimeout: 5 * time.Second})
	inPass := make(chan struct{})
	finished := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(ctx context.Context, _ engine.Item) engine.Outcome {
		close(inPass)
		time.Sleep(100 * time.Millisecond) // work that outlives the stop signal
		require.NoError(t, ctx.Err(), "a graceful stop does not cancel in-flight passes")
		close(finished)
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	stop := run(t, b.eng)
	waitFor(t, inPass, "pass")
	stop()
	waitFor(t, finished, "finish")
	requireEmpty(t, b.q)
}

func TestEngineShutdownTimeoutReleasesLease(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{ShutdownTimeout: 50 * time.Millisecond})
	inPass := make(chan struct{})
	b.eng.Register("k", engine.ProcessorFunc(func(ctx context.Context, _ engine.Item) engine.Outcome {
		close(inPass)
		<-ctx.Done() // stuck until cancelled
		return engine.Retry(ctx.Err())
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	stop := run(t, b.eng)
	waitFor(t, inPass, "pass")
	stop()
	it, err := b.q.WorkGet(context.Background(), key(1))
	require.NoError(t, err)
	require.Equal(t, ports.WorkPending, it.State, "the lease is released, not left to expire")
	require.Contains(t, it.LastError, "shutdown")
}

// TestEngineConcurrencyPerKind: each kind runs at most its Concurrency
// passes at once, and reaches it, independently of the other kinds.
func TestEngineConcurrencyPerKind(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	limits := map[string]int{"wide": 3, "narrow": 1}
	var mu sync.Mutex
	running, peak := map[string]int{}, map[string]int{}
	full := make(chan struct{})
	gate := make(chan struct{})
	var finished sync.WaitGroup
	proc := engine.ProcessorFunc(func(_ context.Context, it engine.Item) engine.Outcome {
		defer finished.Done()
		k := it.Key.Kind
		mu.Lock()
		running[k]++
		peak[k] = max(peak[k], running[k])
		if running["wide"] == limits["wide"] && running["narrow"] == limits["narrow"] {
			select {
			case <-full:
			default:
				close(full)
			}
		}
		mu.Unlock()
		<-gate
		mu.Lock()
		running[k]--
		mu.Unlock()
		return engine.Done()
	})
	const perKind = 8
	finished.Add(2 * perKind)
	for k, n := range limits {
		b.eng.Register(k, proc, engine.KindOptions{Concurrency: n})
		for i := range perKind {
			enqueue(t, b.q, ports.WorkKey{Kind: k, ScopeType: "t", ScopeID: fmt.Sprint(i)})
		}
	}
	run(t, b.eng)
	waitFor(t, full, "both kinds at their concurrency")
	close(gate)
	done := make(chan struct{})
	go func() { finished.Wait(); close(done) }()
	waitFor(t, done, "every pass")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, limits, peak, "peak passes in flight per kind")
}

// TestNextPassOverlapsAcks: a kind's slot is free once its pass returned,
// so with Concurrency 1 the next item runs while the first one's ack is
// still being sent; and every item is acked in the end.
func TestNextPassOverlapsAcks(t *testing.T) {
	t.Parallel()
	mem := memory.NewQueue(ports.SystemClock)
	q := &lateAcks{Queue: mem, acking: make(chan struct{}), release: make(chan struct{})}
	eng := engine.New(q, engine.Options{Logger: quietLogger(), PollInterval: 20 * time.Millisecond})
	second := make(chan struct{})
	var n atomic.Int32
	eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome {
		if n.Add(1) == 2 {
			close(second)
		}
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, mem, key(1), key(2))
	stop := run(t, eng)
	defer stop()
	waitFor(t, q.acking, "the first ack")
	waitFor(t, second, "the second pass while the first ack waits")
	close(q.release)
	stop()
	requireEmpty(t, mem)
}

// lateAcks is a queue whose acks wait until release is closed, and which
// records whether an ack went through after Run had returned (and can
// answer every ack with ErrLeaseLost).
type lateAcks struct {
	ports.Queue
	acking      chan struct{} // closed at the first ack
	once        sync.Once
	release     chan struct{}
	runReturned atomic.Bool
	afterRun    atomic.Bool
	lost        bool // answer every ack with ErrLeaseLost
}

func (q *lateAcks) WorkAck(ctx context.Context, ps ...ports.AckParams) ([]error, error) {
	q.once.Do(func() { close(q.acking) })
	<-q.release
	if q.runReturned.Load() {
		q.afterRun.Store(true)
	}
	if q.lost {
		out := make([]error, len(ps))
		for i := range out {
			out[i] = ports.ErrLeaseLost
		}
		return out, nil
	}
	return q.Queue.WorkAck(ctx, ps...)
}

// TestShutdownSendsPendingAcks: a pass does not wait for its ack, but Run
// does: when it returns, every ack of a finished pass has been sent.
func TestShutdownSendsPendingAcks(t *testing.T) {
	t.Parallel()
	mem := memory.NewQueue(ports.SystemClock)
	q := &lateAcks{Queue: mem, acking: make(chan struct{}), release: make(chan struct{})}
	eng := engine.New(q, engine.Options{Logger: quietLogger(), PollInterval: 20 * time.Millisecond})
	eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome { return engine.Done() }),
		engine.KindOptions{Concurrency: 4})
	enqueue(t, mem, key(1), key(2), key(3))
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		err := eng.Run(ctx)
		q.runReturned.Store(true)
		returned <- err
	}()
	waitFor(t, q.acking, "the first ack")
	cancel() // shut down while the acks wait
	close(q.release)
	select {
	case err := <-returned:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("engine did not stop")
	}
	require.False(t, q.afterRun.Load(), "no ack was sent after Run returned")
	requireEmpty(t, mem)
}

// TestLostAckIsWarned: an ack that finds its lease gone (another engine
// reclaimed it) is warned about, though the pass no longer waits for it.
func TestLostAckIsWarned(t *testing.T) {
	t.Parallel()
	mem := memory.NewQueue(ports.SystemClock)
	q := &lateAcks{Queue: mem, acking: make(chan struct{}), release: make(chan struct{}), lost: true}
	close(q.release)
	h := &countingHandler{}
	eng := engine.New(q, engine.Options{Logger: slog.New(h), PollInterval: 20 * time.Millisecond})
	eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome { return engine.Done() }),
		engine.KindOptions{Concurrency: 1})
	enqueue(t, mem, key(1))
	run(t, eng)
	require.Eventually(t, func() bool { return h.count() >= 1 }, 5*time.Second, 5*time.Millisecond, "the lost ack is warned about")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, "lease lost before completion; result dropped", h.lost[0])
}
