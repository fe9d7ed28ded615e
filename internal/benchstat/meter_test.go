package benchstat_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/benchstat"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// TestFields: deltas, per-unit ratios (0 for no units) and settings.
func TestFields(t *testing.T) {
	t.Parallel()
	s := benchstat.Settings{Fsync: "on", SynchronousCommit: "off", FullPageWrites: "on"}
	before := benchstat.Counters{Commits: 100, RowsWritten: 1000, XIDs: 50}
	after := benchstat.Counters{Commits: 130, RowsWritten: 1400, XIDs: 70}
	f := benchstat.Fields("item", 200, before, after, s)
	require.Equal(t, map[string]any{
		"unit": "item", "commits": int64(30), "commits_per_unit": 0.15, "xids": int64(20),
		"rows_written": int64(400), "rows_per_unit": 2.0,
		"fsync": "on", "synchronous_commit": "off", "full_page_writes": "on",
	}, f)
	require.Equal(t, 0.0, benchstat.Fields("item", 0, before, after, s)["commits_per_unit"])
}

// TestMeter: in a database of its own, the meter counts every row the
// measured connections wrote and every transaction they committed, although
// their backends flush their statistics late.
func TestMeter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.DSN(t)
	server, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer server.Close(ctx)
	db := fmt.Sprintf("benchstat_%d", time.Now().UnixNano())
	_, err = server.Exec(ctx, "CREATE DATABASE "+db)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = server.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)") })

	cfg, err := pgx.ParseConfig(base)
	require.NoError(t, err)
	cfg.Database = db
	admin, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE TABLE t (n int)")
	require.NoError(t, err)

	const app = "benchstat-test"
	m, err := benchstat.NewMeter(ctx, admin, app)
	require.NoError(t, err)
	require.NotEmpty(t, m.Settings().Fsync)
	require.NoError(t, m.Start(ctx))

	pcfg, err := pgxpool.ParseConfig(base)
	require.NoError(t, err)
	pcfg.ConnConfig.Database = db
	pcfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	const txs = 20
	for i := range txs {
		_, err := pool.Exec(ctx, "INSERT INTO t VALUES ($1), ($1)", i)
		require.NoError(t, err)
	}
	pool.Close()

	f, err := m.Stop(ctx, "tx", txs)
	require.NoError(t, err)
	require.EqualValues(t, 2*txs, f["rows_written"], "every row counted")
	require.GreaterOrEqual(t, f["commits"], int64(txs), "every transaction counted")
	// The meter's own reads commit too, but only a few.
	require.LessOrEqual(t, f["commits"], int64(txs+10))
	require.GreaterOrEqual(t, f["xids"], int64(txs))
	require.Greater(t, f["max_rss_mb"], 0.0)
}

// TestCPU: the process's CPU time grows with work it does, and the
// server's, when the server runs on this host and its data directory can be
// read (as in CI, where scripts/with-postgres.sh starts it as root's
// child), with work the server does; the meter reports both per unit.
func TestCPU(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer conn.Close(ctx)

	// Work until the meter has seen 20 ms of CPU: on a loaded machine a
	// fixed wall-clock loop gets too little of it to judge. The deadline
	// only stops a meter that never moves.
	before := benchstat.ProcessCPU()
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; benchstat.ProcessCPU()-before < 20*time.Millisecond; n++ {
		for i := range 1000 {
			_ = fmt.Sprint(n, i)
		}
		require.True(t, time.Now().Before(deadline), "30 s of busy work and the process's CPU time did not grow by 20 ms")
	}

	s0, ok := benchstat.ServerCPU(ctx, conn)
	if !ok {
		require.Empty(t, os.Getenv("CI"), "CI's server runs on this host: its CPU must be readable")
		t.Skip("the server's CPU cannot be read from here (not on this host, or its data directory is not readable)")
	}
	var n int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 5000000)`).Scan(&n))
	s1, ok := benchstat.ServerCPU(ctx, conn)
	require.True(t, ok)
	require.Greater(t, s1-s0, 100*time.Millisecond, "five million rows counted by the server")

	m, err := benchstat.NewMeter(ctx, conn, "benchstat-cpu-test")
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 5000000)`).Scan(&n))
	f, err := m.Stop(ctx, "query", 1)
	require.NoError(t, err)
	require.Greater(t, f["server_cpu_us_per_unit"], 100_000.0)
	require.Contains(t, f, "cpu_us_per_unit")
}
