package catalog_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
)

// benchService returns a service over memory with an object holding 20
// published revisions and an open draft.
func benchService(b *testing.B) (*catalog.Service, ports.Revision) {
	b.Helper()
	ctx := context.Background()
	s := catalog.New(memory.NewCatalog(ports.SystemClock), schemaOnly)
	obj := wt("bench")
	for n := range 20 {
		r, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: doc(n)})
		require.NoError(b, err)
		r, err = s.Propose(ctx, at(r))
		require.NoError(b, err)
		_, err = s.Approve(ctx, catalog.ApproveParams{Ref: r.Ref(), Version: r.Version, Approver: "ana"})
		require.NoError(b, err)
	}
	d, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: doc(99)})
	require.NoError(b, err)
	return s, d
}

// BenchmarkEdit is one draft-commit: lock, read, validate, CAS write.
func BenchmarkEdit(b *testing.B) {
	s, d := benchService(b)
	ctx := context.Background()
	content := doc(7)
	b.ReportAllocs()
	for b.Loop() {
		r, err := s.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: content})
		if err != nil {
			b.Fatal(err)
		}
		d = r
	}
}

// BenchmarkGetRevision is the read in-flight work does to load its pinned
// revision.
func BenchmarkGetRevision(b *testing.B) {
	s, _ := benchService(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetRevision(ctx, wt("bench"), 10); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLatestPublished is the read new work does to pick its revision.
func BenchmarkLatestPublished(b *testing.B) {
	s, _ := benchService(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.LatestPublished(ctx, wt("bench")); err != nil {
			b.Fatal(err)
		}
	}
}
