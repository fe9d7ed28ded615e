package memory

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

func TestCatalogConformance(t *testing.T) {
	t.Parallel()
	porttest.Catalog(t, func(*testing.T) ports.Catalog { return NewCatalog(ports.SystemClock) })
}

// setupCatalog returns a catalog on a fake clock.
func setupCatalog(t *testing.T) (*Catalog, *porttest.FakeClock) {
	t.Helper()
	t.Parallel()
	clock := porttest.NewFakeClock(time.Date(2026, 2, 3, 4, 5, 6, 7008009, time.FixedZone("X", 3*3600)))
	return NewCatalog(clock), clock
}

func TestCatalogStampsWithItsClock(t *testing.T) {
	c, clock := setupCatalog(t)
	ctx := t.Context()
	r, err := c.CatalogCreate(ctx, ports.Revision{Kind: revision.KindPolicy, Name: "p", ID: "r1", Content: json.RawMessage(`{}`)})
	require.NoError(t, err)
	want0 := time.Date(2026, 2, 3, 1, 5, 6, 7008000, time.UTC)
	require.Equal(t, want0, r.CreatedAt, "UTC at microsecond precision, like Postgres")

	t1 := clock.Advance(time.Hour)
	r, err = c.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Proposed})
	require.NoError(t, err)
	require.Equal(t, t1.UTC().Truncate(time.Microsecond), r.UpdatedAt)

	t2 := clock.Advance(time.Hour)
	r, err = c.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Published, ApprovedBy: "ana"})
	require.NoError(t, err)
	require.Equal(t, t2.UTC().Truncate(time.Microsecond), r.PublishedAt)
	require.Equal(t, want0, r.CreatedAt)
}

func TestCatalogLockTableDoesNotGrow(t *testing.T) {
	c, _ := setupCatalog(t)
	for i := range 1000 {
		unlock, err := c.CatalogTryLock(t.Context(), fmt.Sprintf("policy/p%d", i))
		require.NoError(t, err)
		require.Equal(t, 1, c.heldLocks())
		unlock()
		unlock()
	}
	require.Zero(t, c.heldLocks(), "unlock deletes the entry")
}

// benchCatalog returns a catalog holding one object with published
// revisions 1..n and an open draft.
func benchCatalog(b *testing.B, n int) (*Catalog, ports.Revision) {
	b.Helper()
	ctx := b.Context()
	c := NewCatalog(ports.SystemClock)
	var draft ports.Revision
	for i := range n + 1 {
		r, err := c.CatalogCreate(ctx, ports.Revision{Kind: revision.KindWorkflowTemplate, Name: "deploy", ID: fmt.Sprintf("r%d", i), Content: json.RawMessage(`{"spec":{"tasks":[]}}`)})
		require.NoError(b, err)
		draft = r
		if i == n {
			break
		}
		r, err = c.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Proposed})
		require.NoError(b, err)
		_, err = c.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Published, ApprovedBy: "ana"})
		require.NoError(b, err)
	}
	return c, draft
}

func BenchmarkCatalogLatestPublished(b *testing.B) {
	c, _ := benchCatalog(b, 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.CatalogLatestPublished(b.Context(), revision.KindWorkflowTemplate, "deploy"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCatalogGet(b *testing.B) {
	c, d := benchCatalog(b, 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.CatalogGet(b.Context(), d.Ref()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCatalogUpdate(b *testing.B) {
	c, d := benchCatalog(b, 20)
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
	c := NewCatalog(ports.SystemClock)
	b.ReportAllocs()
	for b.Loop() {
		unlock, err := c.CatalogTryLock(b.Context(), "workflow-template/deploy")
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
}
