package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// catalogDBs opens n separate pools on one fresh, migrated schema: like n
// processes sharing the database.
func catalogDBs(tb testing.TB, n int) []*postgres.DB {
	tb.Helper()
	_, dbs := catalogSchemaDBs(tb, n)
	return dbs
}

// catalogSchemaDBs is catalogDBs that also returns the schema's DSN.
func catalogSchemaDBs(tb testing.TB, n int) (string, []*postgres.DB) {
	tb.Helper()
	dsn, _ := pgtest.Schema(tb)
	ctx := context.Background()
	dbs := make([]*postgres.DB, n)
	for i := range dbs {
		db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(4))
		require.NoError(tb, err)
		tb.Cleanup(db.Close)
		dbs[i] = db
	}
	require.NoError(tb, dbs[0].MigrateUp(ctx))
	return dsn, dbs
}

// newCatalog returns a catalog over db, closed when the test ends.
func newCatalog(tb testing.TB, db *postgres.DB, clock ports.Clock) *postgres.Catalog {
	c := postgres.NewCatalog(db, clock)
	tb.Cleanup(c.Close)
	return c
}

func TestCatalogConformance(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t) // skip up front rather than in every subtest
	porttest.Catalog(t, func(t *testing.T) ports.Catalog { return newCatalog(t, catalogDBs(t, 1)[0], ports.SystemClock) })
}

func TestCatalogStampsWithItsClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t0 := time.Date(2026, 2, 3, 4, 5, 6, 7008009, time.FixedZone("X", 3*3600))
	clock := porttest.NewFakeClock(t0)
	c := newCatalog(t, catalogDBs(t, 1)[0], clock)

	r, err := c.CatalogCreate(ctx, ports.Revision{Kind: revision.KindPolicy, Name: "p", ID: "r1", Content: json.RawMessage(`{ "a" : 1 }`)})
	require.NoError(t, err)
	want0 := time.Date(2026, 2, 3, 1, 5, 6, 7008000, time.UTC)
	require.Equal(t, want0, r.CreatedAt)

	clock.Advance(time.Hour)
	r, err = c.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Proposed})
	require.NoError(t, err)
	t2 := clock.Advance(time.Hour)
	r, err = c.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Published, ApprovedBy: "ana"})
	require.NoError(t, err)
	require.Equal(t, t2.UTC().Truncate(time.Microsecond), r.PublishedAt)

	got, err := c.CatalogGet(ctx, r.Ref())
	require.NoError(t, err)
	require.Equal(t, r, got, "read back at microsecond precision in UTC")
	require.Equal(t, `{ "a" : 1 }`, string(got.Content), "content is kept byte for byte")
}

// TestCatalogTryLockAcrossPools: a lock taken through one pool excludes
// another pool on the same schema (another process), and releasing it frees
// the key; other schemas are not affected.
func TestCatalogTryLockAcrossPools(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbs := catalogDBs(t, 2)
	a, b := newCatalog(t, dbs[0], ports.SystemClock), newCatalog(t, dbs[1], ports.SystemClock)

	unlock, err := a.CatalogTryLock(ctx, "catalog/policy/guard")
	require.NoError(t, err)
	_, err = b.CatalogTryLock(ctx, "catalog/policy/guard")
	require.ErrorIs(t, err, ports.ErrConflict)
	require.ErrorIs(t, err, revision.ErrConflict)
	require.Contains(t, err.Error(), "another change to catalog/policy/guard is in progress")

	elsewhere := newCatalog(t, catalogDBs(t, 1)[0], ports.SystemClock)
	u, err := elsewhere.CatalogTryLock(ctx, "catalog/policy/guard")
	require.NoError(t, err, "another schema locks independently")
	u()

	unlock()
	u, err = b.CatalogTryLock(ctx, "catalog/policy/guard")
	require.NoError(t, err)
	u()
}

// TestCatalogTryLockLeavesNothingHeld: after many lock/unlock cycles no
// advisory lock of these keys is held by any session.
func TestCatalogTryLockLeavesNothingHeld(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, dbs := catalogSchemaDBs(t, 1)
	c := newCatalog(t, dbs[0], ports.SystemClock)
	probe, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = probe.Close(context.Background()) })
	held := func() int {
		var n int
		require.NoError(t, probe.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND objsubid = 2
			AND objid = ((hashtext(current_schema() || '/k/' || $2)::bigint + 4294967296) % 4294967296)::oid`,
			0x63617461, "0").Scan(&n))
		return n
	}
	unlock, err := c.CatalogTryLock(ctx, "k/0")
	require.NoError(t, err)
	require.Equal(t, 1, held(), "the probe sees a held lock")
	unlock()
	require.Zero(t, held())
	for i := range 100 {
		u, err := c.CatalogTryLock(ctx, fmt.Sprintf("k/%d", i%3))
		require.NoError(t, err)
		u()
	}
	require.Zero(t, held())
}

// TestCatalogRacesAcrossPools: of simultaneous updates with one version
// through separate pools (parallel connections, as separate processes
// would) exactly one wins and the other conflicts.
func TestCatalogRacesAcrossPools(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbs := catalogDBs(t, 2)
	stores := []ports.Catalog{newCatalog(t, dbs[0], ports.SystemClock), newCatalog(t, dbs[1], ports.SystemClock)}
	for round := range 10 {
		r, err := stores[0].CatalogCreate(ctx, ports.Revision{Kind: revision.KindWorkflowTemplate, Name: fmt.Sprintf("race-%d", round), ID: "r", Content: json.RawMessage(`{}`)})
		require.NoError(t, err)
		start := make(chan struct{})
		errs := make(chan error, 2)
		for i, s := range stores {
			go func() {
				<-start
				_, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
					Ref: r.Ref(), ExpectedVersion: r.Version, Content: json.RawMessage(fmt.Sprintf(`{"w":%d}`, i)),
				})
				errs <- err
			}()
		}
		close(start)
		e1, e2 := <-errs, <-errs
		require.True(t, (e1 == nil) != (e2 == nil), "exactly one wins: %v / %v", e1, e2)
		lost := e1
		if lost == nil {
			lost = e2
		}
		require.ErrorIs(t, lost, ports.ErrConflict)
		got, err := stores[1].CatalogGet(ctx, r.Ref())
		require.NoError(t, err)
		require.Equal(t, r.Version+1, got.Version)
	}
}

// TestCatalogJoinsTransaction: a write inside DB.InTx rolls back with it.
func TestCatalogJoinsTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := catalogDBs(t, 1)[0]
	c := newCatalog(t, db, ports.SystemClock)
	errAbort := fmt.Errorf("abort")
	err := db.InTx(ctx, func(ctx context.Context) error {
		_, err := c.CatalogCreate(ctx, ports.Revision{Kind: revision.KindPolicy, Name: "tx", ID: "r", Content: json.RawMessage(`{}`)})
		require.NoError(t, err)
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	_, err = c.CatalogGet(ctx, ports.RevisionRef{Kind: revision.KindPolicy, Name: "tx", ID: "r"})
	require.ErrorIs(t, err, ports.ErrNotFound)
}

// benchCatalogPG returns a Postgres catalog with 20 published revisions of
// one object and its open draft.
func benchCatalogPG(b *testing.B) (*postgres.Catalog, ports.Revision) {
	b.Helper()
	ctx := context.Background()
	c := newCatalog(b, catalogDBs(b, 1)[0], ports.SystemClock)
	var d ports.Revision
	for i := range 21 {
		r, err := c.CatalogCreate(ctx, ports.Revision{Kind: revision.KindWorkflowTemplate, Name: "deploy", ID: fmt.Sprintf("r%d", i), Content: json.RawMessage(`{"spec":{"tasks":[]}}`)})
		require.NoError(b, err)
		d = r
		if i == 20 {
			break
		}
		r, err = c.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Proposed})
		require.NoError(b, err)
		_, err = c.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Published, ApprovedBy: "ana"})
		require.NoError(b, err)
	}
	return c, d
}

func BenchmarkCatalogLatestPublished(b *testing.B) {
	c, _ := benchCatalogPG(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.CatalogLatestPublished(b.Context(), revision.KindWorkflowTemplate, "deploy"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCatalogListRevision(b *testing.B) {
	c, _ := benchCatalogPG(b)
	p := ports.CatalogListParams{Kind: revision.KindWorkflowTemplate, Name: "deploy", Revision: 10}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.CatalogList(b.Context(), p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCatalogUpdate(b *testing.B) {
	c, d := benchCatalogPG(b)
	labels := map[string]string{"team": "infra"}
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.CatalogUpdate(b.Context(), ports.CatalogUpdateParams{Ref: d.Ref(), ExpectedVersion: d.Version, Labels: labels})
		if err != nil {
			b.Fatal(err)
		}
		d = r
	}
}

func BenchmarkCatalogTryLock(b *testing.B) {
	c, _ := benchCatalogPG(b)
	b.ReportAllocs()
	for b.Loop() {
		unlock, err := c.CatalogTryLock(b.Context(), "catalog/workflow-template/deploy")
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
}
