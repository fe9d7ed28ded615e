package catalog_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

func init() {
	storeFactories["postgres"] = func(t *testing.T) ports.Catalog {
		return newPostgresCatalog(t, openPostgres(t, 8))
	}
	// A pool of two: concurrent changes of different objects must not
	// starve each other of connections while they hold their locks.
	storeFactories["postgres-small-pool"] = func(t *testing.T) ports.Catalog {
		return newPostgresCatalog(t, openPostgres(t, 2))
	}
}

// newPostgresCatalog returns a catalog over db, closed when the test ends.
func newPostgresCatalog(tb testing.TB, db *postgres.DB) *postgres.Catalog {
	c := postgres.NewCatalog(db, ports.SystemClock)
	tb.Cleanup(c.Close)
	return c
}

// openPostgres opens a migrated database with a pool of maxConns in a fresh
// schema; the test skips when no server is configured.
func openPostgres(tb testing.TB, maxConns int32) *postgres.DB {
	tb.Helper()
	dsn, _ := pgtest.Schema(tb)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(maxConns))
	require.NoError(tb, err)
	tb.Cleanup(db.Close)
	require.NoError(tb, db.MigrateUp(ctx))
	return db
}

// TestServicesOnSeparatePools: two services on separate pools of one schema
// (as two processes would be) race the same change; exactly one wins and the
// other gets a conflict, from the cross-process try-lock or the CAS.
func TestServicesOnSeparatePools(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	ctx := t.Context()
	var svcs []*catalog.Service
	for range 2 {
		db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(4))
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.NoError(t, db.MigrateUp(ctx))
		svcs = append(svcs, catalog.New(newPostgresCatalog(t, db), schemaOnly))
	}
	for round := range 10 {
		obj := wt("pools")
		d, err := svcs[0].Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: doc(round)})
		require.NoError(t, err)
		errs := race(2, func(i int) error {
			_, err := svcs[i].Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: doc(100 + i)})
			return err
		})
		w := oneWinner(t, errs)
		got, err := svcs[1-w].Get(ctx, d.Ref())
		require.NoError(t, err)
		require.Equal(t, string(doc(100+w)), string(got.Content))
		require.NoError(t, svcs[w].Delete(ctx, at(got)))
	}
}
