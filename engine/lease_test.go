package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// countingHandler counts the records whose message contains "lease lost".
type countingHandler struct {
	mu   sync.Mutex
	lost []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "lease lost") {
		h.mu.Lock()
		h.lost = append(h.lost, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.lost)
}

// ackRacingQueue holds every heartbeat until the acks of the passes it
// renews are through, as a heartbeat that races a just-completed ack
// does: the queue then answers ErrLeaseLost for leases that were not lost
// but ended.
type ackRacingQueue struct {
	ports.Queue
	heartbeats chan struct{} // a heartbeat is waiting
	acked      chan struct{} // an ack went through
}

func (q *ackRacingQueue) WorkHeartbeat(ctx context.Context, d time.Duration, refs ...ports.LeaseRef) ([]error, error) {
	select {
	case q.heartbeats <- struct{}{}:
	default:
	}
	select {
	case <-q.acked:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return q.Queue.WorkHeartbeat(ctx, d, refs...)
}

func (q *ackRacingQueue) WorkAck(ctx context.Context, ps ...ports.AckParams) ([]error, error) {
	res, err := q.Queue.WorkAck(ctx, ps...)
	select {
	case q.acked <- struct{}{}:
	default:
	}
	return res, err
}

// TestHeartbeatRacingAnAckLogsNoLeaseLost: a heartbeat that renews a pass
// whose ack completes first gets ErrLeaseLost from the queue; that is not
// a lost lease and logs no warning. The items all complete once.
func TestHeartbeatRacingAnAckLogsNoLeaseLost(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	h := &countingHandler{}
	q := &ackRacingQueue{Queue: b.q, heartbeats: make(chan struct{}, 1), acked: make(chan struct{}, 1)}
	eng := engine.New(q, engine.Options{Logger: slog.New(h), LeaseDuration: 30 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	const n = 5
	var mu sync.Mutex
	passes := map[ports.WorkKey]int{}
	eng.Register("k", engine.ProcessorFunc(func(ctx context.Context, it engine.Item) engine.Outcome {
		select {
		case <-q.heartbeats: // a heartbeat of this pass is under way
		case <-ctx.Done():
			return engine.Retry(ctx.Err())
		}
		mu.Lock()
		passes[it.Key]++
		mu.Unlock()
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	keys := make([]ports.WorkKey, n)
	for i := range keys {
		keys[i] = key(i)
	}
	enqueue(t, b.q, keys...)
	stop := run(t, eng)
	require.Eventually(t, func() bool {
		st, err := b.q.WorkStats(context.Background())
		require.NoError(t, err)
		return st[ports.WorkPending]+st[ports.WorkLeased] == 0
	}, 10*time.Second, 5*time.Millisecond)
	stop()
	for _, k := range keys {
		require.Equal(t, 1, passes[k], "%v ran once", k)
	}
	require.Zero(t, h.count(), "false lease-lost warnings: %v", h.lost)
}

// losingQueue answers every heartbeat with ErrLeaseLost, as when another
// engine took the item over.
type losingQueue struct{ ports.Queue }

func (losingQueue) WorkHeartbeat(_ context.Context, _ time.Duration, refs ...ports.LeaseRef) ([]error, error) {
	out := make([]error, len(refs))
	for i := range out {
		out[i] = ports.ErrLeaseLost
	}
	return out, nil
}

// TestLostLeaseCancelsThePassAndWarns: a running pass whose lease is
// really lost is cancelled, and that is warned about.
func TestLostLeaseCancelsThePassAndWarns(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	h := &countingHandler{}
	reg := prometheus.NewRegistry()
	eng := engine.New(losingQueue{b.q}, engine.Options{Logger: slog.New(h), LeaseDuration: 30 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		Metrics: engine.NewMetrics(reg)})
	cancelled := make(chan struct{})
	eng.Register("k", engine.ProcessorFunc(func(ctx context.Context, _ engine.Item) engine.Outcome {
		<-ctx.Done()
		close(cancelled)
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	enqueue(t, b.q, key(1))
	run(t, eng)
	waitFor(t, cancelled, "the pass is cancelled")
	require.Eventually(t, func() bool { return h.count() >= 1 }, 5*time.Second, 5*time.Millisecond, "a lost lease is warned about")
	require.GreaterOrEqual(t, metricValue(t, reg, "reconciler_lease_renewals_lost_total", map[string]string{"kind": "k"}), 1.0,
		"and counted by kind")
}
