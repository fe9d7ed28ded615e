package engine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts passes by kind and outcome and times them. A nil *Metrics
// records nothing.
type Metrics struct {
	passes   *prometheus.CounterVec
	duration *prometheus.HistogramVec
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
	}
	reg.MustRegister(m.passes, m.duration)
	return m
}

func (m *Metrics) observe(kind string, out Outcome, d time.Duration) {
	if m == nil {
		return
	}
	m.passes.WithLabelValues(kind, out.String()).Inc()
	m.duration.WithLabelValues(kind).Observe(d.Seconds())
}
