package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestRenewalLaneNeverWaitsBehindWork: with every connection of the main
// pool held by a transaction, a lease renewal on ports.LaneRenewal still
// answers (its lane has connections of its own), while one on the work
// lane waits for a connection until its context ends.
func TestRenewalLaneNeverWaitsBehindWork(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, _ := pgtest.Schema(t)
	db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(1))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.MigrateUp(ctx))
	q := newQueue(t, db, ports.SystemClock)
	key := ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: "1"}
	require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key}))
	leases, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 1, Duration: time.Minute, Owner: "me"})
	require.NoError(t, err)
	require.Len(t, leases, 1)

	held, release := make(chan struct{}), make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- db.InTx(ctx, func(ctx context.Context) error {
			_, err := q.WorkGet(ctx, key) // takes the pool's one connection
			close(held)
			<-release
			return err
		})
	}()
	<-held
	defer func() {
		close(release)
		require.NoError(t, <-txDone)
	}()

	res, err := q.WorkHeartbeat(ports.WithLane(ctx, ports.LaneRenewal), time.Minute, leases[0].Ref())
	require.NoError(t, err)
	require.NoError(t, res[0])

	// The renewal lane's pool counts its acquires apart from the main pool's.
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(&postgres.PoolCollector{DB: db}))
	families, err := reg.Gather()
	require.NoError(t, err)
	acquires := map[string]float64{}
	for _, f := range families {
		if f.GetName() == "reconciler_pool_acquires_total" {
			for _, m := range f.GetMetric() {
				acquires[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	require.GreaterOrEqual(t, acquires["renewal"], 1.0, "%v", acquires)
	require.GreaterOrEqual(t, acquires["work"], 1.0, "%v", acquires)
	require.Contains(t, acquires, "read")

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = q.WorkHeartbeat(short, time.Minute, leases[0].Ref())
	require.ErrorIs(t, err, context.DeadlineExceeded, "the work lane waits behind the transaction")
}
