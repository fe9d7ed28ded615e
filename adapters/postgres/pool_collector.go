package postgres

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconcilerhq/reconciler/ports"
)

// PoolCollector exports, at each scrape, the connection pools' waits by
// lane (ports.Lane: work for passes, renewal for lease renewals, acks and
// job reports, read for API reads), from pgxpool's statistics: the time
// spent waiting for a connection, the acquires and those that had to
// wait, and the connections in use. A lane without connections of its own
// is counted under work, whose pool serves it.
type PoolCollector struct {
	DB *DB
}

var (
	poolWaitDesc = prometheus.NewDesc("reconciler_pool_acquire_seconds_total",
		"Time spent acquiring a database connection, by lane (work: passes; renewal: lease renewals, acks, job reports; read: API reads).", []string{"lane"}, nil)
	poolAcquiresDesc = prometheus.NewDesc("reconciler_pool_acquires_total",
		"Database connections acquired, by lane.", []string{"lane"}, nil)
	poolWaitedDesc = prometheus.NewDesc("reconciler_pool_waited_acquires_total",
		"Acquires that had to wait for a connection (none idle), by lane.", []string{"lane"}, nil)
	poolInUseDesc = prometheus.NewDesc("reconciler_pool_connections_in_use",
		"Database connections in use, by lane.", []string{"lane"}, nil)
)

// Describe sends the descriptors of the pool metrics.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolWaitDesc
	ch <- poolAcquiresDesc
	ch <- poolWaitedDesc
	ch <- poolInUseDesc
}

// Collect reads each lane's pool statistics; without a DB (a store in
// memory) there are none.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	if c.DB == nil {
		return
	}
	for _, l := range ports.Lanes {
		if l != ports.LaneWork && (int(l) >= len(c.DB.lanes) || c.DB.lanes[l] == nil) {
			continue // served by the work lane's pool
		}
		st := c.DB.LanePool(l).Stat()
		name := l.String()
		ch <- prometheus.MustNewConstMetric(poolWaitDesc, prometheus.CounterValue, st.AcquireDuration().Seconds(), name)
		ch <- prometheus.MustNewConstMetric(poolAcquiresDesc, prometheus.CounterValue, float64(st.AcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(poolWaitedDesc, prometheus.CounterValue, float64(st.EmptyAcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(poolInUseDesc, prometheus.GaugeValue, float64(st.AcquiredConns()), name)
	}
}
