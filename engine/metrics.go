package engine

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconcilerhq/reconciler/ports"
)

// Metrics counts passes by kind and outcome and times them, and counts
// the leases the engine's renewals lost. A nil *Metrics records nothing.
type Metrics struct {
	passes    *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	leaseLoss *prometheus.CounterVec
}

// NewMetrics registers the engine's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_passes_total",
			Help: "Processor passes by kind and outcome (done, retry, requeue, terminal).",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "reconciler_pass_duration_seconds",
			Help:    "Duration of processor passes by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"kind"}),
		leaseLoss: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_lease_renewals_lost_total",
			Help: "Leases of running passes that a renewal found taken away, by kind (the pass is cancelled and its result dropped).",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.passes, m.duration, m.leaseLoss)
	return m
}

func (m *Metrics) observe(kind string, out Outcome, d time.Duration) {
	if m == nil {
		return
	}
	m.passes.WithLabelValues(kind, out.String()).Inc()
	m.duration.WithLabelValues(kind).Observe(d.Seconds())
}

func (m *Metrics) leaseLost(kind string) {
	if m != nil {
		m.leaseLoss.WithLabelValues(kind).Inc()
	}
}

// QueueCollector exports the queue's state at each scrape, from
// ports.Queue.WorkKindStats: items by kind and state, dead letters by
// kind, and the age of each kind's oldest due pending item.
type QueueCollector struct {
	Queue ports.Queue
	Clock ports.Clock
	// Timeout bounds one scrape's query (default 5 s).
	Timeout time.Duration
}

var (
	queueItemsDesc = prometheus.NewDesc("reconciler_queue_items",
		"Work items by kind and state (pending, leased, dead).", []string{"kind", "state"}, nil)
	deadLettersDesc = prometheus.NewDesc("reconciler_dead_letters",
		"Dead-lettered work items by kind (redrive them with the queue's redrive).", []string{"kind"}, nil)
	oldestAgeDesc = prometheus.NewDesc("reconciler_queue_oldest_age_seconds",
		"How long the oldest due pending item of a kind has waited for a worker; 0 when none is due.", []string{"kind"}, nil)
	queueUpDesc = prometheus.NewDesc("reconciler_queue_stats_up",
		"1 when the last scrape read the queue's stats, 0 when the read failed.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueItemsDesc
	ch <- deadLettersDesc
	ch <- oldestAgeDesc
	ch <- queueUpDesc
}

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stats, err := c.Queue.WorkKindStats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(queueUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(queueUpDesc, prometheus.GaugeValue, 1)
	now := c.Clock.Now()
	age := map[string]float64{}
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(queueItemsDesc, prometheus.GaugeValue, float64(s.Count), s.Kind, string(s.State))
		switch s.State {
		case ports.WorkDead:
			ch <- prometheus.MustNewConstMetric(deadLettersDesc, prometheus.GaugeValue, float64(s.Count), s.Kind)
		case ports.WorkPending:
			if !s.OldestDue.IsZero() {
				age[s.Kind] = max(0, now.Sub(s.OldestDue).Seconds())
			}
		}
		if _, ok := age[s.Kind]; !ok {
			age[s.Kind] = 0
		}
	}
	for kind, a := range age {
		ch <- prometheus.MustNewConstMetric(oldestAgeDesc, prometheus.GaugeValue, a, kind)
	}
}
