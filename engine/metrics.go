package engine

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconcilerhq/reconciler/ports"
)

// Metrics counts passes by kind and outcome and times them, counts the
// leases the engine's renewals lost, and takes what the processors
// record: decisions by kind and action, release jobs by agent and status,
// verification measurements by provider and outcome. Every label value a
// processor passes is bounded: past MaxLabelValues distinct values of one
// label, new ones count as "other", so no input can grow the series
// without bound. A nil *Metrics records nothing.
type Metrics struct {
	passes        *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	leaseLoss     *prometheus.CounterVec
	decisions     *prometheus.CounterVec
	jobs          *prometheus.CounterVec
	verifications *prometheus.CounterVec
	renewals      *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	taken         *prometheus.CounterVec

	kinds, actions, agents, statuses, providers, outcomes boundedLabel
}

// MaxLabelValues is the most distinct values one label of the
// processors' metrics takes; later new values are recorded as
// OtherLabelValue.
const MaxLabelValues = 64

// OtherLabelValue stands for the values of a label past MaxLabelValues;
// NoneLabelValue for an empty one.
const (
	OtherLabelValue = "other"
	NoneLabelValue  = "none"
)

// boundedLabel admits at most MaxLabelValues distinct values.
type boundedLabel struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

func (b *boundedLabel) value(v string) string {
	if v == "" {
		return NoneLabelValue
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.seen[v]; ok {
		return v
	}
	if len(b.seen) >= MaxLabelValues {
		return OtherLabelValue
	}
	if b.seen == nil {
		b.seen = map[string]struct{}{}
	}
	b.seen[v] = struct{}{}
	return v
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
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_decisions_total",
			Help: "Decisions taken, by work kind and action: the release chain's controller decisions, each action a workflow pass applied, each run kind's action.",
		}, []string{"kind", "action"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_jobs_total",
			Help: "Release jobs that reached a status (created, handed over, reported), by job agent id (none: no agent) and status.",
		}, []string{"agent", "status"}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_verification_measurements_total",
			Help: "Verification measurements taken, by provider type and outcome: error (no answer), passed or failed (the metric's verdict after it), pending (more are needed).",
		}, []string{"provider", "outcome"}),
	}
	m.renewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconciler_lease_renewals_total",
		Help: "Lease renewals by kind (queue: work items' leases, renewed in batches; job: a job agent's lease on a job; liveness: the process's own liveness row) and result: ok, late (it took more than a third of the lease) or failed (the call failed; the leases were not renewed).",
	}, []string{"kind", "result"})
	m.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconciler_results_dropped_total",
		Help: "Pass results dropped because the pass's lease was gone when its ack arrived, by work kind (the item runs again).",
	}, []string{"kind"})
	m.taken = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconciler_leases_taken_total",
		Help: "Work item leases taken over from another holder, by work kind and whose: dead (counted by the taker: it reclaimed an expired lease of an owner whose liveness row lapsed or who had none) or live (counted by the holder, alive, that found its lease taken: a renewal or a completion refused).",
	}, []string{"kind", "from"})
	reg.MustRegister(m.passes, m.duration, m.leaseLoss, m.decisions, m.jobs, m.verifications, m.renewals, m.dropped, m.taken)
	return m
}

// Decision counts one decision of kind with action.
func (m *Metrics) Decision(kind, action string) {
	if m != nil {
		m.decisions.WithLabelValues(m.kinds.value(kind), m.actions.value(action)).Inc()
	}
}

// Job counts a release job of agent that reached status.
func (m *Metrics) Job(agent, status string) {
	if m != nil {
		m.jobs.WithLabelValues(m.agents.value(agent), m.statuses.value(status)).Inc()
	}
}

// Verification counts one measurement of provider with outcome.
func (m *Metrics) Verification(provider, outcome string) {
	if m != nil {
		m.verifications.WithLabelValues(m.providers.value(provider), m.outcomes.value(outcome)).Inc()
	}
}

// kindMetrics are the pass metrics of one kind, each series looked up once
// (on its first pass) rather than on every pass.
type kindMetrics struct {
	m        *Metrics
	kind     string
	duration sync.Once
	observer prometheus.Observer
	passes   [outcomeKinds]struct {
		once    sync.Once
		counter prometheus.Counter
	}
}

// forKind returns kind's pass metrics (nil when m is nil).
func (m *Metrics) forKind(kind string) *kindMetrics {
	if m == nil {
		return nil
	}
	return &kindMetrics{m: m, kind: kind}
}

// observe counts a pass of the kind that ended with out and records its
// duration d.
func (k *kindMetrics) observe(out Outcome, d time.Duration) {
	if k == nil {
		return
	}
	p := &k.passes[out.kind]
	p.once.Do(func() { p.counter = k.m.passes.WithLabelValues(k.kind, out.String()) })
	p.counter.Inc()
	k.duration.Do(func() { k.observer = k.m.duration.WithLabelValues(k.kind) })
	k.observer.Observe(d.Seconds())
}

// The kinds and results of Metrics.Renewal.
const (
	RenewalQueue    = "queue"
	RenewalJob      = "job"
	RenewalLiveness = "liveness"

	RenewalOK     = "ok"
	RenewalLate   = "late"
	RenewalFailed = "failed"
)

// Renewal counts n lease renewals of kind (RenewalQueue, RenewalJob) with
// result (RenewalOK, RenewalLate, RenewalFailed).
func (m *Metrics) Renewal(kind, result string, n int) {
	if m != nil && n > 0 {
		m.renewals.WithLabelValues(kind, result).Add(float64(n))
	}
}

func (m *Metrics) resultDropped(kind string) {
	if m != nil {
		m.dropped.WithLabelValues(kind).Inc()
	}
}

// The owners a lease is taken from (Metrics.taken).
const (
	TakenFromDead = "dead"
	TakenFromLive = "live"
)

// leaseTaken counts n leases of kind taken over from a dead or live
// owner (TakenFromDead, TakenFromLive).
func (m *Metrics) leaseTaken(kind, from string, n int) {
	if m != nil && n > 0 {
		m.taken.WithLabelValues(kind, from).Add(float64(n))
	}
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
