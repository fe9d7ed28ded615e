package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// TestChangeStreamConformance runs the suite with a second process's
// stream (a second DB on the same schema) beside the writer's, so a change
// made through one is listed by, and wakes, the other.
func TestChangeStreamConformance(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t)
	porttest.ChangeStream(t, func(t *testing.T, clock ports.Clock, keep int) porttest.ChangeWorld {
		dsn, _ := pgtest.Schema(t)
		open := func() *postgres.DB {
			db, err := postgres.Open(context.Background(), dsn, postgres.WithMaxConns(4))
			require.NoError(t, err)
			t.Cleanup(db.Close)
			return db
		}
		db, other := open(), open()
		require.NoError(t, db.MigrateUp(t.Context()))
		// An interval longer than any test: the suite publishes and prunes itself.
		changes := postgres.NewChanges(db, keep, 0, time.Hour, nil)
		t.Cleanup(changes.Close)
		otherChanges := postgres.NewChanges(other, keep, 0, time.Hour, nil)
		t.Cleanup(otherChanges.Close)
		store := postgres.NewReleaseStore(db, clock)
		t.Cleanup(store.Close)
		return porttest.ChangeWorld{Changes: changes, Other: otherChanges, Store: store, Tx: db,
			Workflows: postgres.NewWorkflowStore(db), Runs: postgres.NewRunStore(db, clock), Catalog: store.Catalog,
			Publish: changes.Publish, Prune: changes.Prune}
	})
}
