package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
)

// newMigrateCmd administers the Postgres schema: up, down and status.
func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate up|down|status",
		Short: "Apply, revert or list the PostgreSQL migrations",
		Long: `migrate administers the database schema with the migrations built into this binary.

  up      apply every migration the database lacks (serve does this at start)
  down    revert the newest applied migration (--steps N for more)
  status  list every migration and whether it is applied

The database comes from --dsn or RECONCILER_DSN; a server that does not answer
fails the command after --connect-timeout. Concurrent migrations of one
schema are safe: they take turns under an advisory lock, and one that has
to wait says so.`,
		// Arguments reach RunE, which turns a wrong subcommand into a usage error.
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("migrate: want a subcommand: up, down or status")
			}
			return usagef("migrate: unknown subcommand %q: want up, down or status", args[0])
		},
	}
	cmd.AddCommand(
		newMigrateSubCmd("up", "Apply every migration the database lacks", nil,
			func(ctx context.Context, db *postgres.DB, cmd *cobra.Command) error {
				if err := db.MigrateUp(ctx); err != nil {
					return err
				}
				return printMigrateStatus(ctx, db, cmd)
			}),
		newMigrateDownCmd(),
		newMigrateSubCmd("status", "List every migration and whether it is applied", nil,
			func(ctx context.Context, db *postgres.DB, cmd *cobra.Command) error {
				return printMigrateStatus(ctx, db, cmd)
			}),
	)
	return cmd
}

// newMigrateDownCmd reverts the newest --steps migrations.
func newMigrateDownCmd() *cobra.Command {
	var steps int
	return newMigrateSubCmd("down", "Revert the newest applied migrations (--steps, default 1)",
		func(cmd *cobra.Command) func() error {
			intRangeVar(cmd.Flags(), &steps, "steps", 1, 1, 10_000, "how many applied migrations to revert, newest first")
			return nil
		},
		func(ctx context.Context, db *postgres.DB, cmd *cobra.Command) error {
			if err := db.MigrateDown(ctx, steps); err != nil {
				return err
			}
			return printMigrateStatus(ctx, db, cmd)
		})
}

// newMigrateSubCmd builds one migrate subcommand: it takes no arguments,
// binds --dsn (env RECONCILER_DSN, required) plus whatever flags adds, checks
// them with the function flags returns, and runs run on the opened
// database.
func newMigrateSubCmd(name, short string, flags func(*cobra.Command) func() error,
	run func(context.Context, *postgres.DB, *cobra.Command) error,
) *cobra.Command {
	var (
		dsn            string
		connectTimeout time.Duration
		check          func() error
	)
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("migrate %s: takes no arguments, got %q", name, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envFallback(cmd); err != nil {
				return err
			}
			if check != nil {
				if err := check(); err != nil {
					return err
				}
			}
			if dsn == "" {
				return usagef("migrate %s: no database: set --dsn or RECONCILER_DSN (migrate has no --server: a running `reconciler serve --dsn` migrates its own database)", name)
			}
			ctx := cmd.Context()
			errOut := cmd.ErrOrStderr()
			db, err := postgres.Open(ctx, dsn, postgres.WithConnectTimeout(connectTimeout),
				postgres.WithLockWaitNotice(func(pid int) {
					fmt.Fprintf(errOut, "migrate %s: waiting for the migration lock held by another process (pid %d)\n", name, pid)
				}))
			if err != nil {
				return fmt.Errorf("migrate %s: open postgres: %w", name, err)
			}
			defer db.Close()
			return run(ctx, db, cmd)
		},
	}
	cmd.Flags().StringVar(&dsn, "dsn", "", "PostgreSQL connection string (env RECONCILER_DSN); required")
	connectTimeoutFlag(cmd.Flags(), &connectTimeout)
	if flags != nil {
		check = flags(cmd)
	}
	return cmd
}

// printMigrateStatus writes the status table to the command's output.
func printMigrateStatus(ctx context.Context, db *postgres.DB, cmd *cobra.Command) error {
	st, err := db.MigrateStatus(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VERSION\tNAME\tSTATUS\tAPPLIED AT")
	for _, s := range st {
		state, at := "pending", ""
		if s.Applied {
			state, at = "applied", s.AppliedAt.UTC().Format(time.RFC3339)
		}
		if s.Unknown {
			state += " (unknown to this binary)"
		}
		fmt.Fprintf(w, "%04d\t%s\t%s\t%s\n", s.Version, s.Name, state, at)
	}
	return w.Flush()
}
