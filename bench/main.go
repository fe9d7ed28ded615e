// Command bench runs the burn-down of `reconciler bench queue` on other
// queues of the same PostgreSQL, for comparison: River
// (github.com/riverqueue/river, pgx v5 driver) and the bare FOR UPDATE SKIP
// LOCKED loop that is the ceiling of any queue over one table. Each run
// pre-inserts --items no-op jobs, then times their processing until the
// last completion has committed, and prints one JSON line with the fields
// of `reconciler bench queue` (bench, store, items, completions, drained,
// seconds, items_per_sec, and what the server counted: see
// internal/benchstat).
//
// It is a module of its own so that the reconciler module does not depend
// on River.
//
//	go run . --system river --dsn postgres://...
//	go run . --system skiplocked --dsn postgres://...
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reconcilerhq/reconciler/internal/benchstat"
)

// options are the command's flags.
type options struct {
	system     string
	dsn        string
	items      int
	workers    int
	maxWorkers int
	conns      int
	lease      int
	timeout    time.Duration
}

// system is one queue under comparison.
type system interface {
	// setup creates the queue's tables and inserts n no-op jobs.
	setup(ctx context.Context, pool *pgxpool.Pool, n int) error
	// burn processes the jobs until n are done and committed or ctx ends,
	// and returns how many passes ran and whether all n were committed.
	burn(ctx context.Context, pool *pgxpool.Pool, n int) (passes int64, drained bool, err error)
	// figures are the system's settings for the JSON line.
	figures() map[string]any
}

func main() {
	o := options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.system, "system", "river", "queue to run: river or skiplocked")
	fs.StringVar(&o.dsn, "dsn", os.Getenv("RECONCILER_DSN"), "PostgreSQL connection string (env RECONCILER_DSN)")
	fs.IntVar(&o.items, "items", 100000, "no-op jobs to pre-insert and process")
	fs.IntVar(&o.workers, "workers", 2, "river: clients (like separate processes)")
	fs.IntVar(&o.maxWorkers, "max-workers", 256, "river: MaxWorkers of each client's queue")
	fs.IntVar(&o.conns, "conns", 4, "skiplocked: connections, each leasing and acking in a loop")
	fs.IntVar(&o.lease, "lease", 100, "skiplocked: rows leased per UPDATE ... RETURNING")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "longest the timed phase may run")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	switch {
	case o.system != "river" && o.system != "skiplocked":
		return fmt.Errorf("--system: want river or skiplocked, got %q", o.system)
	case o.dsn == "":
		return fmt.Errorf("--dsn (or RECONCILER_DSN) is required")
	case o.items <= 0 || o.workers <= 0 || o.maxWorkers <= 0 || o.conns <= 0 || o.lease <= 0 || o.timeout <= 0:
		return fmt.Errorf("--items, --workers, --max-workers, --conns, --lease and --timeout must be positive")
	}
	return nil
}

// run sets the system up in a fresh schema, times its burn-down and prints
// the JSON line. The pool is closed before each reading of the server's
// counters, so they hold everything its connections did.
func run(ctx context.Context, o options) error {
	stamp := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	schema, app := "cmp_"+stamp, "bench-"+o.system+"-"+stamp
	// Parsed as a pool's DSN, like reconciler's, so pool settings
	// (pool_max_conns) do not reach the server as run-time parameters.
	cfg, err := pgxpool.ParseConfig(o.dsn)
	if err != nil {
		return fmt.Errorf("parse dsn: %w", err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") }()
	meter, err := benchstat.NewMeter(ctx, admin, app)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.MaxConns = int32(max(o.conns+1, 4*o.workers+4))

	var sys system = &skipLocked{conns: o.conns, lease: o.lease}
	if o.system == "river" {
		sys = &riverQueue{clients: o.workers, maxWorkers: o.maxWorkers}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench %s: inserting %d jobs\n", o.system, o.items)
	err = sys.setup(ctx, pool, o.items)
	pool.Close()
	if err != nil {
		return err
	}
	if err := meter.Start(ctx); err != nil {
		return err
	}
	if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, o.timeout)
	start := time.Now()
	passes, drained, err := sys.burn(tctx, pool, o.items)
	elapsed := time.Since(start)
	cancel()
	pool.Close()
	if err != nil {
		return err
	}
	perSec := float64(passes) / elapsed.Seconds()
	fmt.Fprintf(os.Stderr, "bench %s: %d passes, every completion committed %v, in %s = %.0f items/s\n",
		o.system, passes, drained, elapsed.Round(time.Millisecond), perSec)
	figures, err := meter.Stop(ctx, "item", passes)
	if err != nil {
		return err
	}
	line := map[string]any{
		"bench": "queue", "store": o.system, "items": o.items, "completions": passes, "drained": drained,
		"seconds": round(elapsed.Seconds(), 1000), "items_per_sec": round(perSec, 10),
	}
	maps.Copy(line, sys.figures())
	maps.Copy(line, figures)
	if err := json.NewEncoder(os.Stdout).Encode(line); err != nil {
		return err
	}
	if !drained {
		return fmt.Errorf("%d passes of %d jobs, not all committed within %s", passes, o.items, o.timeout)
	}
	return nil
}

// round rounds x to 1/per.
func round(x, per float64) float64 { return float64(int64(x*per+0.5)) / per }

// waitZero polls count every 2 ms until it is 0 (true) or ctx ends.
func waitZero(ctx context.Context, pool *pgxpool.Pool, count string) (bool, error) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int64
		if err := pool.QueryRow(ctx, count).Scan(&n); err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, fmt.Errorf("count: %w", err)
		}
		if n == 0 {
			return true, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false, nil
		}
	}
}
