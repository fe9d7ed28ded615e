package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/live"
	"github.com/reconcilerhq/reconciler/ports"
)

// backend is the set of adapters a command runs on: in memory, or Postgres
// when a DSN is configured. cmd/ is the only package that knows them all.
type backend struct {
	name  string
	queue ports.Queue
	runs  ports.RunStore
	// releases stores the release chain: workspaces to jobs.
	releases ports.ReleaseStore
	// catalog stores workflow templates and policies; it is the release
	// store's own (the chain evaluates its published policies). In memory
	// it lives only as long as the process.
	catalog ports.Catalog
	// workflows stores workflow instances and their TaskRuns.
	workflows ports.WorkflowStore
	// tokens stores the API's tokens (hashed) and signed reports' nonces.
	tokens ports.Tokens
	// audit records every write the API accepts.
	audit ports.AuditLog
	// tx makes writes of the release store and queue enqueues
	// all-or-nothing (ports.Transactor).
	tx ports.Transactor
	// changes is the event stream, once startChanges has run.
	changes ports.ChangeStream
	db      *postgres.DB
	close   func()
}

// Defaults of the event stream's retention (serve --events-keep,
// --events-retention).
const (
	defaultEventsKeep      = 10_000
	defaultEventsRetention = 24 * time.Hour
)

// startChanges starts the backend's event stream, keeping the newest keep
// changes and none older than retention: in memory a ring the stores
// publish to; on PostgreSQL the publisher of migration 0024's retention
// table, stopped by close. Call it before the stores are written.
func (be *backend) startChanges(keep int, retention time.Duration, clock ports.Clock, log *slog.Logger) ports.ChangeStream {
	if be.changes != nil {
		return be.changes
	}
	if be.db == nil {
		c := memory.NewChanges(clock, keep, retention)
		if s, ok := be.releases.(*memory.ReleaseStore); ok {
			s.SetChanges(c)
		}
		if s, ok := be.workflows.(*memory.WorkflowStore); ok {
			s.SetChanges(c)
		}
		if s, ok := be.runs.(*memory.RunStore); ok {
			s.SetChanges(c)
		}
		be.changes = c
		return c
	}
	c := postgres.NewChanges(be.db, keep, retention, 0, log)
	closeDB := be.close
	be.close = func() { c.Close(); closeDB() }
	be.changes = c
	return c
}

// openBackend opens Postgres (migrating it when migrate is set) or builds
// the in-memory adapters; opts tune the Postgres connection.
func openBackend(ctx context.Context, dsn string, migrate bool, clock ports.Clock, opts ...postgres.Option) (*backend, error) {
	if dsn == "" {
		q, releases := memory.NewQueue(clock), memory.NewReleaseStore(clock)
		return &backend{
			name:      "memory",
			queue:     q,
			runs:      memory.NewRunStore(clock),
			releases:  releases,
			tx:        memory.NewTransactor(releases, q),
			catalog:   releases.Catalog,
			workflows: memory.NewWorkflowStore(),
			tokens:    memory.NewTokens(),
			audit:     memory.NewAuditLog(),
			close:     func() {},
		}, nil
	}
	db, err := postgres.Open(ctx, dsn, opts...)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if migrate {
		if err := db.MigrateUp(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	q := postgres.NewQueue(db, clock)
	rs := postgres.NewReleaseStore(db, clock)
	cat := rs.Catalog
	return &backend{
		name:      "postgres",
		queue:     q,
		runs:      postgres.NewRunStore(db, clock),
		releases:  rs,
		catalog:   cat,
		workflows: postgres.NewWorkflowStore(db),
		tokens:    postgres.NewTokens(db),
		audit:     postgres.NewAuditLog(db),
		tx:        db,
		db:        db,
		// The release store (its catalog lock pool, its take listener) closes before the DB.
		close: func() { q.Close(); rs.Close(); db.Close() },
	}, nil
}

// catalogConfig is the catalog service's configuration on this backend: a
// write that changes a policy's latest published revision enqueues, in its
// transaction, desired-release of the targets the policy applies to
// (engine/live).
// liveness is the backend's process liveness rows (ports.Liveness).
func (be *backend) liveness() ports.Liveness {
	if be.db != nil {
		return postgres.NewLiveness(be.db)
	}
	return memory.NewLiveness()
}

func (be *backend) catalogConfig() catalog.Config {
	return catalog.Config{Validators: catalogValidators(), Tx: be.tx,
		PolicyChanged: live.New(be.releases, be.queue, be.tx).PolicyChanged}
}

// dsnFlag binds --dsn with RECONCILER_DSN as its fallback.
func dsnFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "dsn", "", "PostgreSQL connection string (env RECONCILER_DSN)")
}

// connectTimeoutFlag binds --connect-timeout (env RECONCILER_CONNECT_TIMEOUT).
func connectTimeoutFlag(fs *pflag.FlagSet, p *time.Duration) {
	durationRangeVar(fs, p, "connect-timeout", 0, 0, 10*time.Minute,
		"longest wait for PostgreSQL to accept a connection and answer; 0: the DSN's connect_timeout, else "+
			fmtDuration(postgres.DefaultConnectTimeout))
}

// exitNotMigrated is the exit status of a command that needs a migrated
// database and found one lacking migrations.
const exitNotMigrated = 6

// notMigratedError is a database that lacks migrations a command needs.
type notMigratedError struct{ msg string }

func (e *notMigratedError) Error() string { return e.msg }

// ExitCode is exitNotMigrated.
func (e *notMigratedError) ExitCode() int { return exitNotMigrated }

// openForRead opens dsn for a command that only reads: it never migrates
// (a read creates no tables) and refuses a database that lacks migrations.
func openForRead(ctx context.Context, dsn string) (*backend, error) {
	be, err := openBackend(ctx, dsn, false, ports.SystemClock)
	if err != nil {
		return nil, err
	}
	if err := requireMigrated(ctx, be, "run `reconciler migrate up` first"); err != nil {
		be.close()
		return nil, err
	}
	return be, nil
}

// requireMigrated refuses to run on a database that lacks migrations; hint
// says what to do.
func requireMigrated(ctx context.Context, be *backend, hint string) error {
	st, err := be.db.MigrateStatus(ctx)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	for _, m := range st {
		if !m.Applied {
			return &notMigratedError{fmt.Sprintf("database not migrated (it lacks migration %04d_%s): %s", m.Version, m.Name, hint)}
		}
	}
	return nil
}

// envFallback fills every flag the user did not set from its RECONCILER_*
// variable: flag > environment > default. The variable is RECONCILER_ plus
// the flag name upper-cased with dashes as underscores.
func envFallback(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := "RECONCILER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && v != "" {
			if e := f.Value.Set(v); e != nil {
				err = usagef("%s=%q: %v", name, v, e)
			}
		}
	})
	return err
}

// newLogger builds the process logger.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level: want debug, info, warn or error, got %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format: want text or json, got %q", format)
}
