package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// metricValue gathers reg and returns the value of the series name with
// exactly labels; the test fails when there is none.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := findMetric(t, reg, name, labels)
	require.True(t, ok, "no series %s%v", name, labels)
	return v
}

func findMetric(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// TestMetricsAfterDrain: after a small drain on the memory store the
// registry exports passes by outcome, the queue's items by kind and state,
// dead letters by kind and the oldest due item's age by kind.
func TestMetricsAfterDrain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := porttest.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	q := memory.NewQueue(clock)
	reg := prometheus.NewRegistry()
	reg.MustRegister(&engine.QueueCollector{Queue: q, Clock: clock})
	eng := engine.New(q, engine.Options{Clock: clock, Logger: quietLogger(), Owner: "test", Metrics: engine.NewMetrics(reg)})
	eng.Register("ok", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome { return engine.Done() }), engine.KindOptions{Concurrency: 1})
	eng.Register("bad", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome {
		return engine.Terminal(errors.New("never valid"))
	}), engine.KindOptions{Concurrency: 1})
	wk := func(kind, id string) ports.EnqueueParams {
		return ports.EnqueueParams{Key: ports.WorkKey{Kind: kind, ScopeType: "t", ScopeID: id}}
	}
	// "idle" has no processor: its items stay pending and age.
	require.NoError(t, q.WorkEnqueue(ctx, wk("ok", "1"), wk("ok", "2"), wk("bad", "1"), wk("idle", "1")))
	later := wk("idle", "later")
	later.NotBefore = clock.Now().Add(time.Hour)
	require.NoError(t, q.WorkEnqueue(ctx, later))
	_, err := eng.Drain(ctx)
	require.NoError(t, err)
	clock.Advance(90 * time.Second)

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"reconciler_passes_total", map[string]string{"kind": "ok", "outcome": "done"}, 2},
		{"reconciler_passes_total", map[string]string{"kind": "bad", "outcome": "terminal"}, 1},
		{"reconciler_pass_duration_seconds", map[string]string{"kind": "ok"}, 2},
		{"reconciler_queue_items", map[string]string{"kind": "bad", "state": "dead"}, 1},
		{"reconciler_queue_items", map[string]string{"kind": "idle", "state": "pending"}, 2},
		{"reconciler_dead_letters", map[string]string{"kind": "bad"}, 1},
		{"reconciler_queue_oldest_age_seconds", map[string]string{"kind": "idle"}, 90},
		{"reconciler_queue_oldest_age_seconds", map[string]string{"kind": "bad"}, 0},
		{"reconciler_queue_stats_up", map[string]string{}, 1},
	} {
		require.Equal(t, c.want, metricValue(t, reg, c.name, c.labels), "%s%v", c.name, c.labels)
	}
	_, ok := findMetric(t, reg, "reconciler_queue_items", map[string]string{"kind": "ok", "state": "pending"})
	require.False(t, ok, "drained kinds have no items")
	_, ok = findMetric(t, reg, "reconciler_dead_letters", map[string]string{"kind": "idle"})
	require.False(t, ok, "only kinds with dead letters")
}

// TestMetricsLabelsBounded: the processors' label values are bounded
// per label: past MaxLabelValues distinct values, new ones count as
// "other"; an empty value is "none"; nil Metrics records nothing.
func TestMetricsLabelsBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := engine.NewMetrics(reg)
	extra := 10
	for i := range engine.MaxLabelValues + extra {
		m.Decision("k", fmt.Sprintf("action-%d", i))
	}
	m.Decision("k", "action-0") // an admitted value stays itself
	m.Job("", "pending")
	m.Verification("scripted", "passed")

	require.Equal(t, 2.0, metricValue(t, reg, "reconciler_decisions_total", map[string]string{"kind": "k", "action": "action-0"}))
	require.Equal(t, float64(extra), metricValue(t, reg, "reconciler_decisions_total", map[string]string{"kind": "k", "action": engine.OtherLabelValue}))
	_, ok := findMetric(t, reg, "reconciler_decisions_total", map[string]string{"kind": "k", "action": fmt.Sprintf("action-%d", engine.MaxLabelValues)})
	require.False(t, ok, "the value past the cap has no series of its own")
	require.Equal(t, 1.0, metricValue(t, reg, "reconciler_jobs_total", map[string]string{"agent": engine.NoneLabelValue, "status": "pending"}))
	require.Equal(t, 1.0, metricValue(t, reg, "reconciler_verification_measurements_total", map[string]string{"provider": "scripted", "outcome": "passed"}))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == "reconciler_decisions_total" {
			require.Len(t, f.GetMetric(), engine.MaxLabelValues+1)
		}
	}
	var none *engine.Metrics
	none.Decision("k", "a") // no panic
	none.Job("a", "b")
	none.Verification("p", "o")
}

// TestLeaseTakenFromDeadOwnerIsCounted: an item whose lease is held by an
// owner whose liveness row lapsed is reclaimed at once, long before its
// lease runs out, and counted as taken from a dead owner; an item of a
// live owner is not taken.
func TestLeaseTakenFromDeadOwnerIsCounted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, live := memory.NewQueue(ports.SystemClock), memory.NewLiveness()
	q.UseLiveness(live)
	now := ports.SystemClock.Now()
	require.NoError(t, live.LivenessBeat(ctx, "alive", now.Add(time.Hour)))
	enqueue(t, q, key(2))
	_, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 1, Duration: time.Millisecond, Owner: "alive"})
	require.NoError(t, err)
	require.NoError(t, live.LivenessBeat(ctx, "gone", now.Add(-time.Second)))
	enqueue(t, q, key(1))
	_, err = q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 1, Duration: time.Hour, Owner: "gone"})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	eng := engine.New(q, engine.Options{Logger: quietLogger(), Owner: "taker", Metrics: engine.NewMetrics(reg), PollInterval: 5 * time.Millisecond})
	done := make(chan struct{})
	eng.Register("k", engine.ProcessorFunc(func(_ context.Context, it engine.Item) engine.Outcome {
		require.Equal(t, key(1), it.Key, "the live owner's item is not taken")
		close(done)
		return engine.Done()
	}), engine.KindOptions{Concurrency: 1})
	stop := run(t, eng)
	waitFor(t, done, "the dead owner's item")
	stop()
	require.Equal(t, 1.0, metricValue(t, reg, "reconciler_leases_taken_total", map[string]string{"kind": "k", "from": engine.TakenFromDead}))
	_, ok := findMetric(t, reg, "reconciler_leases_taken_total", map[string]string{"kind": "k", "from": engine.TakenFromLive})
	require.False(t, ok)
	it, err := q.WorkGet(ctx, key(2))
	require.NoError(t, err)
	require.Equal(t, "alive", it.LeaseOwner)
}
