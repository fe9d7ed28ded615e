package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reconcilerhq/reconciler/internal/benchstat"
	"github.com/reconcilerhq/reconciler/ports"
)

// benchEnv is the backend a benchmark runs on and, on Postgres, the meter
// of its timed span. On Postgres it works in a fresh schema that cleanup
// drops, so a benchmark never touches real data, and its connections carry
// an application name of their own, so the meter can tell when they ended.
type benchEnv struct {
	be *backend
	// dsn opens the backend again: the schema and application name set.
	dsn   string
	meter *benchstat.Meter // nil in memory
}

// openBenchEnv opens the backend of a benchmark: in memory when dsn is
// empty, else a fresh schema on that server.
func openBenchEnv(ctx context.Context, dsn string) (*benchEnv, func(), error) {
	if dsn == "" {
		be, err := openBackend(ctx, "", false, ports.SystemClock)
		return &benchEnv{be: be}, func() {}, err
	}
	stamp := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	schema, app := "bench_"+stamp, "reconciler-bench-"+stamp
	// The DSN is serve's: parsed as a pool's, so that pool settings
	// (pool_max_conns) configure the benchmark's pool and do not reach the
	// server as run-time parameters.
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, usagef("--dsn: %v", err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("open postgres: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close(ctx)
		return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop := func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close(context.Background())
	}
	meter, err := benchstat.NewMeter(ctx, admin, app)
	if err != nil {
		drop()
		return nil, nil, err
	}
	e := &benchEnv{dsn: withParams(dsn, map[string]string{"search_path": schema, "application_name": app}), meter: meter}
	if e.be, err = openBackend(ctx, e.dsn, true, ports.SystemClock); err != nil {
		drop()
		return nil, nil, err
	}
	return e, func() {
		if e.be != nil {
			e.be.close()
		}
		drop()
	}, nil
}

// reopen closes the backend, ending its connections, runs between (when
// the server has counted all they did), and opens the backend again.
// Adapters taken from the old backend must not be used afterwards.
func (e *benchEnv) reopen(ctx context.Context, between func() error) error {
	e.be.close()
	e.be = nil
	if err := between(); err != nil {
		return err
	}
	be, err := openBackend(ctx, e.dsn, false, ports.SystemClock)
	if err != nil {
		return err
	}
	e.be = be
	return nil
}

// startTimed starts the timed span. On Postgres it reopens the backend to
// read the server's counters (the set-up's work excluded), so adapters
// must be taken from e.be after it.
func (e *benchEnv) startTimed(ctx context.Context) error {
	if e.meter == nil {
		return nil
	}
	return e.reopen(ctx, func() error { return e.meter.Start(ctx) })
}

// stopTimed ends the timed span of units units of work and returns its
// figures: the process's peak RSS and, on Postgres, the server's counters
// (benchstat.Fields), read after reopening the backend, so adapters must be
// taken from e.be again. Stop every engine before.
func (e *benchEnv) stopTimed(ctx context.Context, unit string, units int64) (map[string]any, error) {
	if e.meter == nil {
		return map[string]any{"max_rss_mb": benchstat.MaxRSSMB()}, nil
	}
	var f map[string]any
	err := e.reopen(ctx, func() (err error) {
		f, err = e.meter.Stop(ctx, unit, units)
		return err
	})
	return f, err
}

// withParams sets run-time parameters on a URL or keyword/value
// connection string.
func withParams(dsn string, params map[string]string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			for k, v := range params {
				q.Set(k, v)
			}
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	for k, v := range params {
		dsn += " " + k + "=" + v
	}
	return dsn
}
