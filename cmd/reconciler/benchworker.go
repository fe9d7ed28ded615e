package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// newBenchWorkerCmd runs one engine process that drains bench-noop items and
// records every completed pass in the table bench_completions (key, owner,
// attempt).
// The crash tests start several of these and kill one.
func newBenchWorkerCmd() *cobra.Command {
	var dsn, owner string
	var lease time.Duration
	var batch int
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "Drain bench-noop items on Postgres, recording each pass (used by the crash tests)",
		Hidden: true,
		Args:   argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envFallback(cmd); err != nil {
				return err
			}
			if dsn == "" {
				return usagef("--dsn is required")
			}
			ctx := cmd.Context()
			be, err := openBackend(ctx, dsn, false, ports.SystemClock)
			if err != nil {
				return err
			}
			defer be.close()
			rec, err := sql.Open("pgx", dsn)
			if err != nil {
				return err
			}
			defer rec.Close()
			if _, err := rec.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_completions (key text NOT NULL, owner text NOT NULL, attempt int NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return fmt.Errorf("create bench_completions: %w", err)
			}
			if owner == "" {
				owner = fmt.Sprintf("worker-%d", os.Getpid())
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			e := engine.New(be.queue, engine.Options{Owner: owner, Logger: log, LeaseDuration: lease, PollInterval: 100 * time.Millisecond})
			e.Register(benchKind, engine.ProcessorFunc(func(ctx context.Context, it engine.Item) engine.Outcome {
				if _, err := rec.ExecContext(ctx, `INSERT INTO bench_completions (key, owner, attempt) VALUES ($1, $2, $3)`, it.Key.ScopeID, owner, it.Attempt); err != nil {
					return engine.Retry(err)
				}
				return engine.Done()
			}), engine.KindOptions{Concurrency: batch})
			fmt.Fprintf(cmd.ErrOrStderr(), "worker %s ready\n", owner)
			return e.Run(ctx)
		},
	}
	f := cmd.Flags()
	dsnFlag(f, &dsn)
	f.StringVar(&owner, "owner", "", "lease owner name (default worker-PID)")
	durationRangeVar(f, &lease, "lock", 2*time.Second, time.Second, time.Hour, "lease duration")
	intRangeVar(f, &batch, "batch", 64, 1, 10_000, "passes in flight")
	return cmd
}
