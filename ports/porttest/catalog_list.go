package porttest

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

func catalogLatest(t *testing.T, ctx context.Context, s ports.Catalog) {
	d := catalogCreate(t, ctx, s, revision.KindPolicy, "latest")
	_, err := s.CatalogLatestPublished(ctx, revision.KindPolicy, "latest")
	require.ErrorIs(t, err, ports.ErrNotFound, "an open draft is not published")

	d = catalogMove(t, ctx, s, d, revision.Proposed)
	v1 := catalogMove(t, ctx, s, d, revision.Published)
	v2 := catalogPublish(t, ctx, s, revision.KindPolicy, "latest")
	catalogCreate(t, ctx, s, revision.KindPolicy, "latest")

	got, err := s.CatalogLatestPublished(ctx, revision.KindPolicy, "latest")
	require.NoError(t, err)
	require.Equal(t, v2, got)

	catalogMove(t, ctx, s, v2, revision.DeletionProposed)
	got, err = s.CatalogLatestPublished(ctx, revision.KindPolicy, "latest")
	require.NoError(t, err)
	require.Equal(t, v1, got, "a revision proposed for deletion is not the latest")

	_, err = s.CatalogLatestPublished(ctx, revision.KindWorkflowTemplate, "latest")
	require.ErrorIs(t, err, ports.ErrNotFound, "kinds are separate")
}

func catalogLatestAll(t *testing.T, ctx context.Context, s ports.Catalog) {
	all, err := s.CatalogLatestPublishedAll(ctx, revision.KindPolicy)
	require.NoError(t, err)
	require.Empty(t, all)

	// b: two published, the newer proposed for deletion; a: two published
	// and an open draft; c: only a draft; d: only proposed; a template.
	b1 := catalogPublish(t, ctx, s, revision.KindPolicy, "b")
	b2 := catalogPublish(t, ctx, s, revision.KindPolicy, "b")
	catalogMove(t, ctx, s, b2, revision.DeletionProposed)
	catalogPublish(t, ctx, s, revision.KindPolicy, "a")
	a2 := catalogPublish(t, ctx, s, revision.KindPolicy, "a")
	catalogCreate(t, ctx, s, revision.KindPolicy, "a")
	catalogCreate(t, ctx, s, revision.KindPolicy, "c")
	catalogMove(t, ctx, s, catalogCreate(t, ctx, s, revision.KindPolicy, "d"), revision.Proposed)
	catalogPublish(t, ctx, s, revision.KindWorkflowTemplate, "a")

	all, err = s.CatalogLatestPublishedAll(ctx, revision.KindPolicy)
	require.NoError(t, err)
	require.Equal(t, []ports.Revision{a2, b1}, all, "by name, each object's latest published revision, drafts and proposals never")
	for _, r := range all {
		one, err := s.CatalogLatestPublished(ctx, r.Kind, r.Name)
		require.NoError(t, err)
		require.Equal(t, one, r)
	}
}

func catalogListFilters(t *testing.T, ctx context.Context, s ports.Catalog) {
	var all []ports.Revision
	for _, kind := range revision.Kinds {
		for _, name := range []string{"beta", "alpha"} {
			v1 := catalogPublish(t, ctx, s, kind, name)
			v2 := catalogPublish(t, ctx, s, kind, name)
			v2 = catalogMove(t, ctx, s, v2, revision.DeletionProposed)
			d := catalogCreate(t, ctx, s, kind, name)
			if name == "alpha" {
				d = catalogMove(t, ctx, s, d, revision.Proposed)
			}
			all = append(all, v1, v2, d)
		}
	}
	// The documented order: kind, name, published by number, then drafts.
	slices.SortStableFunc(all, func(a, b ports.Revision) int {
		switch {
		case a.Kind != b.Kind:
			return compareStrings(string(a.Kind), string(b.Kind))
		case a.Name != b.Name:
			return compareStrings(a.Name, b.Name)
		case (a.Revision == 0) != (b.Revision == 0):
			if a.Revision == 0 {
				return 1
			}
			return -1
		}
		return a.Revision - b.Revision
	})
	keep := func(pred func(r ports.Revision) bool) []ports.Revision {
		var out []ports.Revision
		for _, r := range all {
			if pred(r) {
				out = append(out, r)
			}
		}
		return out
	}
	cases := []struct {
		name string
		p    ports.CatalogListParams
		want []ports.Revision
	}{
		{"everything", ports.CatalogListParams{}, all},
		{"kind", ports.CatalogListParams{Kind: revision.KindPolicy},
			keep(func(r ports.Revision) bool { return r.Kind == revision.KindPolicy })},
		{"name", ports.CatalogListParams{Name: "alpha"},
			keep(func(r ports.Revision) bool { return r.Name == "alpha" })},
		{"kind and name", ports.CatalogListParams{Kind: revision.KindWorkflowTemplate, Name: "beta"},
			keep(func(r ports.Revision) bool { return r.Kind == revision.KindWorkflowTemplate && r.Name == "beta" })},
		{"open drafts", ports.CatalogListParams{Lifecycles: []revision.Lifecycle{revision.Draft, revision.Proposed}},
			keep(func(r ports.Revision) bool { return r.Lifecycle.Open() })},
		{"published of a kind", ports.CatalogListParams{Kind: revision.KindPolicy, Lifecycles: []revision.Lifecycle{revision.Published}},
			keep(func(r ports.Revision) bool { return r.Kind == revision.KindPolicy && r.Lifecycle == revision.Published })},
		{"number", ports.CatalogListParams{Revision: 2},
			keep(func(r ports.Revision) bool { return r.Revision == 2 })},
		{"no match", ports.CatalogListParams{Name: "gamma"}, nil},
	}
	for _, tc := range cases {
		got, err := s.CatalogList(ctx, tc.p)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}

// compareStrings orders two strings byte-wise.
func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
