package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// setupMigrate opens an unmigrated database in a fresh schema and a plain
// pgx connection to inspect it.
func setupMigrate(t *testing.T) (db *postgres.DB, dsn, schema string, conn *pgx.Conn) {
	t.Helper()
	dsn, schema = pgtest.Schema(t)
	db, err := postgres.Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	conn, err = pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return db, dsn, schema, conn
}

// tableIn reports whether schema has the table.
func tableIn(t *testing.T, conn *pgx.Conn, schema, table string) bool {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(t.Context(),
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2", schema, table).Scan(&n))
	return n == 1
}

// migrateDownBefore migrates a fully migrated db down to just before
// migration version and returns how many steps that took (the steps to
// revert it again after migrating up).
func migrateDownBefore(t *testing.T, db *postgres.DB, version int) int {
	t.Helper()
	st, err := db.MigrateStatus(t.Context())
	require.NoError(t, err)
	steps := 0
	for _, s := range st {
		if s.Applied && s.Version >= version {
			steps++
		}
	}
	require.NoError(t, db.MigrateDown(t.Context(), steps), "back to before %04d", version)
	return steps
}

// appliedCount counts the applied migrations in the status.
func appliedCount(st []postgres.MigrationStatus) int {
	n := 0
	for _, s := range st {
		if s.Applied {
			n++
		}
	}
	return n
}

func TestMigrateConcurrentUp(t *testing.T) {
	t.Parallel()
	_, dsn, schema, conn := setupMigrate(t)
	const procs = 4
	dbs := make([]*postgres.DB, procs)
	for i := range dbs {
		db, err := postgres.Open(t.Context(), dsn)
		require.NoError(t, err)
		t.Cleanup(db.Close)
		dbs[i] = db
	}
	errs := make([]error, procs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, db := range dbs {
		wg.Go(func() {
			<-start
			errs[i] = db.MigrateUp(t.Context())
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "process %d", i)
	}
	st, err := dbs[0].MigrateStatus(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, st)
	require.Equal(t, len(st), appliedCount(st), "every migration applied")
	var rows int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM reconciler_migrations").Scan(&rows))
	require.Equal(t, len(st), rows, "each migration recorded once")
	require.True(t, tableIn(t, conn, schema, "reconcile_work_scope"), "tables land in the connection's schema")
}

func TestMigrateDownUpStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, schema, conn := setupMigrate(t)

	st, err := db.MigrateStatus(ctx)
	require.NoError(t, err, "status works before any migration")
	require.NotEmpty(t, st)
	require.Zero(t, appliedCount(st))
	for i := 1; i < len(st); i++ {
		require.Less(t, st[i-1].Version, st[i].Version, "status is ordered by version")
	}
	total := len(st)

	require.NoError(t, db.MigrateUp(ctx))
	require.NoError(t, db.MigrateUp(ctx), "up is idempotent")
	st, err = db.MigrateStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, total, appliedCount(st))
	for _, s := range st {
		require.False(t, s.AppliedAt.IsZero(), "%d has an applied time", s.Version)
		require.False(t, s.Unknown)
	}

	require.NoError(t, db.MigrateDown(ctx, 1))
	st, err = db.MigrateStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, total-1, appliedCount(st))
	require.False(t, st[len(st)-1].Applied, "down reverts the newest first")

	require.NoError(t, db.MigrateDown(ctx, 1000), "more steps than applied reverts all")
	st, err = db.MigrateStatus(ctx)
	require.NoError(t, err)
	require.Zero(t, appliedCount(st))
	require.False(t, tableIn(t, conn, schema, "reconcile_work_scope"), "down drops what up created")

	require.NoError(t, db.MigrateUp(ctx), "up again after a full down")
	require.True(t, tableIn(t, conn, schema, "reconcile_work_scope"))

	require.ErrorContains(t, db.MigrateDown(ctx, 0), "steps must be positive")
}

// TestMigrateUnknownVersion: a version applied by a newer binary shows in
// the status and cannot be reverted by this one; up ignores it.
func TestMigrateUnknownVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	_, err := conn.Exec(ctx, "INSERT INTO reconciler_migrations (version, name, applied_at) VALUES (9999, 'from_the_future', now())")
	require.NoError(t, err)
	require.NoError(t, db.MigrateUp(ctx))
	st, err := db.MigrateStatus(ctx)
	require.NoError(t, err)
	last := st[len(st)-1]
	require.Equal(t, 9999, last.Version)
	require.True(t, last.Unknown)
	require.True(t, last.Applied)
	require.Equal(t, "from_the_future", last.Name)
	err = db.MigrateDown(ctx, 1)
	require.ErrorContains(t, err, "9999_from_the_future")
	require.ErrorContains(t, err, "no such migration")
}
