package porttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// Catalog is the conformance suite of ports.Catalog. newCatalog is called
// once per subtest and must return an empty catalog; subtests run in
// parallel. The lifecycle checks are driven by revision.Edges, so the suite
// follows the table rather than restating it.
func Catalog(t *testing.T, newCatalog func(t *testing.T) ports.Catalog) {
	t.Helper()
	setup := func(t *testing.T) (*testing.T, context.Context, ports.Catalog) {
		t.Helper()
		t.Parallel()
		return t, t.Context(), newCatalog(t)
	}
	t.Run("CreateGetRoundTrip", func(t *testing.T) { catalogCreateGet(setup(t)) })
	t.Run("CreateOnlyDraft", func(t *testing.T) { catalogCreateOnlyDraft(setup(t)) })
	t.Run("CreateConflicts", func(t *testing.T) { catalogCreateConflicts(setup(t)) })
	t.Run("CreateRejectsInvalid", func(t *testing.T) { catalogCreateInvalid(setup(t)) })
	t.Run("GetMissingNotFound", func(t *testing.T) { catalogGetMissing(setup(t)) })
	t.Run("UpdateCompareAndSwap", func(t *testing.T) { catalogUpdateCAS(setup(t)) })
	t.Run("TransitionTable", func(t *testing.T) { catalogTransitionTable(setup(t)) })
	t.Run("DeleteTable", func(t *testing.T) { catalogDeleteTable(setup(t)) })
	t.Run("DeleteCompareAndSwap", func(t *testing.T) { catalogDeleteCAS(setup(t)) })
	t.Run("PublishAssignsNumbers", func(t *testing.T) { catalogPublishNumbers(setup(t)) })
	t.Run("PublishRequiresApprover", func(t *testing.T) { catalogPublishApprover(setup(t)) })
	t.Run("PublishedContentImmutable", func(t *testing.T) { catalogImmutable(setup(t)) })
	t.Run("OpenDraftEditable", func(t *testing.T) { catalogDraftEditable(setup(t)) })
	t.Run("Metadata", func(t *testing.T) { catalogMetadata(setup(t)) })
	t.Run("LatestPublished", func(t *testing.T) { catalogLatest(setup(t)) })
	t.Run("LatestPublishedAll", func(t *testing.T) { catalogLatestAll(setup(t)) })
	t.Run("ListFilters", func(t *testing.T) { catalogListFilters(setup(t)) })
	t.Run("RowsAreCopies", func(t *testing.T) { catalogCopies(setup(t)) })
	t.Run("TryLock", func(t *testing.T) { catalogTryLock(setup(t)) })
	t.Run("ConcurrentSameVersion", func(t *testing.T) { catalogConcurrentSameVersion(setup(t)) })
	t.Run("ConcurrentIncrements", func(t *testing.T) { catalogConcurrentIncrements(setup(t)) })
	t.Run("ConcurrentCreates", func(t *testing.T) { catalogConcurrentCreates(setup(t)) })
	t.Run("ConcurrentApproves", func(t *testing.T) { catalogConcurrentApproves(setup(t)) })
	t.Run("ConcurrentTryLock", func(t *testing.T) { catalogConcurrentTryLock(setup(t)) })
	t.Run("LifecycleProperty", func(t *testing.T) { catalogProperty(setup(t)) })
}

// catalogIDs hands out unique revision ids across the suite.
var catalogIDs atomic.Int64

// catalogID returns a fresh revision id.
func catalogID() string { return fmt.Sprintf("rev-%06d", catalogIDs.Add(1)) }

// catalogDraft is a valid new draft of kind/name.
func catalogDraft(kind revision.Kind, name string) ports.Revision {
	return ports.Revision{Kind: kind, Name: name, ID: catalogID(), Content: json.RawMessage(`{"spec":{"n":0}}`)}
}

// catalogCreate stores a draft of kind/name and fails the test on error.
func catalogCreate(t *testing.T, ctx context.Context, s ports.Catalog, kind revision.Kind, name string) ports.Revision {
	t.Helper()
	r, err := s.CatalogCreate(ctx, catalogDraft(kind, name))
	require.NoError(t, err)
	return r
}

// catalogMove writes lifecycle to on r (naming an approver) and fails the
// test on error.
func catalogMove(t *testing.T, ctx context.Context, s ports.Catalog, r ports.Revision, to revision.Lifecycle) ports.Revision {
	t.Helper()
	out, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: to, ApprovedBy: "approver"})
	require.NoError(t, err, "%s → %s", r.Lifecycle, to)
	return out
}

// catalogPath finds the shortest chain of edges of revision.Edges from
// Absent to l.
func catalogPath(l revision.Lifecycle) []revision.Edge {
	type node struct {
		at   revision.Lifecycle
		path []revision.Edge
	}
	seen := map[revision.Lifecycle]bool{revision.Absent: true}
	queue := []node{{at: revision.Absent}}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n.at == l && len(n.path) > 0 {
			return n.path
		}
		for _, e := range revision.Edges {
			if e.From == n.at && !seen[e.To] {
				seen[e.To] = true
				queue = append(queue, node{at: e.To, path: append(slices.Clone(n.path), e)})
			}
		}
	}
	return nil
}

// catalogReach creates a revision of kind/name and walks it along the table
// to l.
func catalogReach(t *testing.T, ctx context.Context, s ports.Catalog, name string, l revision.Lifecycle) ports.Revision {
	t.Helper()
	path := catalogPath(l)
	require.NotEmpty(t, path, "no path to %s in revision.Edges", l)
	r := catalogCreate(t, ctx, s, revision.KindWorkflowTemplate, name)
	for _, e := range path[1:] {
		r = catalogMove(t, ctx, s, r, e.To)
	}
	require.Equal(t, l, r.Lifecycle)
	return r
}

// requireCatalogConflict checks err is a catalog conflict in both senses.
func requireCatalogConflict(t require.TestingT, err error) {
	require.ErrorIs(t, err, ports.ErrConflict)
	require.ErrorIs(t, err, revision.ErrConflict)
	var ce *revision.ConflictError
	require.ErrorAs(t, err, &ce)
	require.NotEmpty(t, ce.Message)
}

// requireCatalogUnchanged checks the stored revision still equals want.
func requireCatalogUnchanged(t *testing.T, ctx context.Context, s ports.Catalog, want ports.Revision) {
	t.Helper()
	got, err := s.CatalogGet(ctx, want.Ref())
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func catalogCreateGet(t *testing.T, ctx context.Context, s ports.Catalog) {
	in := ports.Revision{
		Kind: revision.KindPolicy, Name: "deploy-guard", ID: catalogID(),
		Content:     json.RawMessage(`{"rules":[{"expr":"x > 1"}],  "b": {"c": null}}`),
		Labels:      map[string]string{"team": "infra"},
		Annotations: map[string]string{"note": "first cut"},
		CreatedBy:   "ana",
		// Ignored by the store:
		Revision: 7, Version: 9, ApprovedBy: "mallory", EditedBy: "mallory",
	}
	got, err := s.CatalogCreate(ctx, in)
	require.NoError(t, err)
	require.Equal(t, in.Ref(), got.Ref())
	require.Equal(t, revision.Draft, got.Lifecycle)
	require.Equal(t, 0, got.Revision, "a draft has no number")
	require.Equal(t, int64(1), got.Version)
	require.Empty(t, got.ApprovedBy)
	require.Equal(t, "ana", got.CreatedBy, "the creator is kept")
	require.Empty(t, got.EditedBy, "nobody edited it yet")
	require.JSONEq(t, string(in.Content), string(got.Content))
	require.Equal(t, string(in.Content), string(got.Content), "content is kept byte for byte")
	require.Equal(t, in.Labels, got.Labels)
	require.Equal(t, in.Annotations, got.Annotations)
	require.False(t, got.CreatedAt.IsZero())
	require.Equal(t, got.CreatedAt, got.UpdatedAt)
	require.True(t, got.PublishedAt.IsZero())

	read, err := s.CatalogGet(ctx, in.Ref())
	require.NoError(t, err)
	require.Equal(t, got, read)
}

func catalogCreateOnlyDraft(t *testing.T, ctx context.Context, s ports.Catalog) {
	for _, l := range revision.Lifecycles {
		rev := catalogDraft(revision.KindWorkflowTemplate, "only-draft-"+string(l))
		rev.Lifecycle = l
		got, err := s.CatalogCreate(ctx, rev)
		if revision.Allowed(revision.Absent, l) {
			require.NoError(t, err, l)
			require.Equal(t, l, got.Lifecycle)
			continue
		}
		require.ErrorIs(t, err, revision.ErrInvalidTransition, l)
		_, err = s.CatalogGet(ctx, rev.Ref())
		require.ErrorIs(t, err, ports.ErrNotFound, "a refused create stores nothing")
	}
	got, err := s.CatalogCreate(ctx, catalogDraft(revision.KindPolicy, "no-lifecycle"))
	require.NoError(t, err)
	require.Equal(t, revision.Draft, got.Lifecycle, "an empty lifecycle means draft")
}

func catalogCreateConflicts(t *testing.T, ctx context.Context, s ports.Catalog) {
	first := catalogCreate(t, ctx, s, revision.KindWorkflowTemplate, "dup")

	same := catalogDraft(revision.KindWorkflowTemplate, "dup")
	same.ID = first.ID
	_, err := s.CatalogCreate(ctx, same)
	requireCatalogConflict(t, err)

	_, err = s.CatalogCreate(ctx, catalogDraft(revision.KindWorkflowTemplate, "dup"))
	requireCatalogConflict(t, err)
	require.Contains(t, err.Error(), "open draft")

	// The second open draft is refused while the first is Proposed too.
	catalogMove(t, ctx, s, first, revision.Proposed)
	_, err = s.CatalogCreate(ctx, catalogDraft(revision.KindWorkflowTemplate, "dup"))
	requireCatalogConflict(t, err)

	// Other objects are independent: another name, or the same name of
	// another kind.
	catalogCreate(t, ctx, s, revision.KindWorkflowTemplate, "dup2")
	catalogCreate(t, ctx, s, revision.KindPolicy, "dup")

	all, err := s.CatalogList(ctx, ports.CatalogListParams{Kind: revision.KindWorkflowTemplate, Name: "dup"})
	require.NoError(t, err)
	require.Len(t, all, 1, "refused creates stored nothing")
}

func catalogCreateInvalid(t *testing.T, ctx context.Context, s ports.Catalog) {
	cases := []struct {
		name  string
		edit  func(r *ports.Revision)
		field string
	}{
		{"unknown kind", func(r *ports.Revision) { r.Kind = "template" }, "kind"},
		{"empty name", func(r *ports.Revision) { r.Name = "" }, "name"},
		{"bad name", func(r *ports.Revision) { r.Name = "Bad Name" }, "name"},
		{"empty id", func(r *ports.Revision) { r.ID = "" }, "id"},
		{"bad id", func(r *ports.Revision) { r.ID = "a/b" }, "id"},
		{"no content", func(r *ports.Revision) { r.Content = nil }, "content"},
		{"array content", func(r *ports.Revision) { r.Content = json.RawMessage(`[1]`) }, "content"},
		{"null content", func(r *ports.Revision) { r.Content = json.RawMessage(`null`) }, "content"},
		{"invalid utf-8", func(r *ports.Revision) { r.Content = json.RawMessage("{\"a\":\"\xff\"}") }, "UTF-8"},
		{"syntax error", func(r *ports.Revision) { r.Content = json.RawMessage("{\n  \"a\": }") }, "line 2"},
	}
	for _, tc := range cases {
		rev := catalogDraft(revision.KindPolicy, "invalid")
		tc.edit(&rev)
		_, err := s.CatalogCreate(ctx, rev)
		require.ErrorIs(t, err, revision.ErrValidation, tc.name)
		require.Contains(t, err.Error(), tc.field, tc.name)
	}
	all, err := s.CatalogList(ctx, ports.CatalogListParams{})
	require.NoError(t, err)
	require.Empty(t, all)
}

func catalogGetMissing(t *testing.T, ctx context.Context, s ports.Catalog) {
	_, err := s.CatalogGet(ctx, ports.RevisionRef{Kind: revision.KindPolicy, Name: "nope", ID: "x"})
	require.ErrorIs(t, err, ports.ErrNotFound)
	_, err = s.CatalogLatestPublished(ctx, revision.KindPolicy, "nope")
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func catalogUpdateCAS(t *testing.T, ctx context.Context, s ports.Catalog) {
	r := catalogCreate(t, ctx, s, revision.KindWorkflowTemplate, "cas")
	up, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
		Ref: r.Ref(), ExpectedVersion: r.Version, Content: json.RawMessage(`{"spec":{"n":1}}`),
	})
	require.NoError(t, err)
	require.Equal(t, r.Version+1, up.Version)
	require.Equal(t, `{"spec":{"n":1}}`, string(up.Content))
	require.False(t, up.UpdatedAt.Before(r.UpdatedAt))
	require.Equal(t, r.CreatedAt, up.CreatedAt)

	_, err = s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
		Ref: r.Ref(), ExpectedVersion: r.Version, Content: json.RawMessage(`{"spec":{"n":2}}`),
	})
	requireCatalogConflict(t, err)
	requireCatalogUnchanged(t, ctx, s, up)

	missing := r.Ref()
	missing.ID = "missing"
	_, err = s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: missing, ExpectedVersion: 1, Lifecycle: revision.Proposed})
	require.ErrorIs(t, err, ports.ErrNotFound)

	_, err = s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: up.Version, Content: json.RawMessage(`"x"`)})
	require.ErrorIs(t, err, revision.ErrValidation)
	requireCatalogUnchanged(t, ctx, s, up)
}

// catalogTransitionTable drives a revision into every lifecycle and tries an
// update to every lifecycle: allowed exactly when the table has the edge.
func catalogTransitionTable(t *testing.T, ctx context.Context, s ports.Catalog) {
	for _, from := range revision.Lifecycles {
		for _, to := range revision.Lifecycles {
			name := fmt.Sprintf("tt-%s-to-%s", from, to)
			r := catalogReach(t, ctx, s, name, from)
			got, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
				Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: to, ApprovedBy: "approver",
			})
			if from == to || revision.Allowed(from, to) {
				require.NoError(t, err, "%s → %s", from, to)
				require.Equal(t, to, got.Lifecycle)
				require.Equal(t, r.Version+1, got.Version)
				continue
			}
			require.ErrorIs(t, err, revision.ErrInvalidTransition, "%s → %s", from, to)
			requireCatalogUnchanged(t, ctx, s, r)
		}
	}
}

// catalogDeleteTable deletes a revision in every lifecycle: allowed exactly
// when the table has an edge to Absent.
func catalogDeleteTable(t *testing.T, ctx context.Context, s ports.Catalog) {
	for _, l := range revision.Lifecycles {
		r := catalogReach(t, ctx, s, "del-"+string(l), l)
		err := s.CatalogDelete(ctx, r.Ref(), r.Version)
		if revision.Allowed(l, revision.Absent) {
			require.NoError(t, err, l)
			_, err = s.CatalogGet(ctx, r.Ref())
			require.ErrorIs(t, err, ports.ErrNotFound, l)
			continue
		}
		require.ErrorIs(t, err, revision.ErrInvalidTransition, l)
		requireCatalogUnchanged(t, ctx, s, r)
	}
}

func catalogDeleteCAS(t *testing.T, ctx context.Context, s ports.Catalog) {
	r := catalogCreate(t, ctx, s, revision.KindPolicy, "del-cas")
	moved := catalogMove(t, ctx, s, r, revision.Proposed)
	requireCatalogConflict(t, s.CatalogDelete(ctx, r.Ref(), r.Version))
	requireCatalogUnchanged(t, ctx, s, moved)
	require.NoError(t, s.CatalogDelete(ctx, r.Ref(), moved.Version))
	require.ErrorIs(t, s.CatalogDelete(ctx, r.Ref(), moved.Version), ports.ErrNotFound)

	// Deleting the open draft frees the object for a new one.
	catalogCreate(t, ctx, s, revision.KindPolicy, "del-cas")
}

// catalogPublish creates a draft of name and approves it.
func catalogPublish(t *testing.T, ctx context.Context, s ports.Catalog, kind revision.Kind, name string) ports.Revision {
	t.Helper()
	r := catalogCreate(t, ctx, s, kind, name)
	r = catalogMove(t, ctx, s, r, revision.Proposed)
	return catalogMove(t, ctx, s, r, revision.Published)
}

func catalogPublishNumbers(t *testing.T, ctx context.Context, s ports.Catalog) {
	v1 := catalogPublish(t, ctx, s, revision.KindWorkflowTemplate, "num")
	require.Equal(t, 1, v1.Revision)
	require.Equal(t, "approver", v1.ApprovedBy)
	require.False(t, v1.PublishedAt.IsZero())
	require.Equal(t, v1.UpdatedAt, v1.PublishedAt)

	v2 := catalogPublish(t, ctx, s, revision.KindWorkflowTemplate, "num")
	require.Equal(t, 2, v2.Revision)

	// Moving to DeletionProposed and back keeps the number and approval.
	dp := catalogMove(t, ctx, s, v2, revision.DeletionProposed)
	back := catalogMove(t, ctx, s, dp, revision.Published)
	require.Equal(t, 2, back.Revision)
	require.Equal(t, v2.PublishedAt, back.PublishedAt)
	require.Equal(t, v2.ApprovedBy, back.ApprovedBy)

	// Deleting the highest number does not free it for reuse.
	dp = catalogMove(t, ctx, s, back, revision.DeletionProposed)
	require.NoError(t, s.CatalogDelete(ctx, dp.Ref(), dp.Version))
	v3 := catalogPublish(t, ctx, s, revision.KindWorkflowTemplate, "num")
	require.Equal(t, 3, v3.Revision, "numbers are never reused")

	// Numbering is per object.
	other := catalogPublish(t, ctx, s, revision.KindPolicy, "num")
	require.Equal(t, 1, other.Revision)

	got, err := s.CatalogList(ctx, ports.CatalogListParams{Kind: revision.KindWorkflowTemplate, Name: "num", Revision: 3})
	require.NoError(t, err)
	require.Equal(t, []ports.Revision{v3}, got)
}

func catalogPublishApprover(t *testing.T, ctx context.Context, s ports.Catalog) {
	r := catalogReach(t, ctx, s, "approver", revision.Proposed)
	_, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Published})
	require.ErrorIs(t, err, revision.ErrValidation)
	require.Contains(t, err.Error(), "approved_by")
	requireCatalogUnchanged(t, ctx, s, r)
}

func catalogImmutable(t *testing.T, ctx context.Context, s ports.Catalog) {
	for _, l := range revision.Lifecycles {
		if !l.IsPublished() {
			continue
		}
		r := catalogReach(t, ctx, s, "immutable-"+string(l), l)
		_, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
			Ref: r.Ref(), ExpectedVersion: r.Version, Content: json.RawMessage(`{"spec":{"n":99}}`),
		})
		require.ErrorIs(t, err, revision.ErrImmutable, l)
		requireCatalogUnchanged(t, ctx, s, r)

		// Resending the very same content is not a change.
		same, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Content: r.Content})
		require.NoError(t, err, l)
		require.Equal(t, string(r.Content), string(same.Content))

		// Metadata may change in every state.
		meta, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
			Ref: r.Ref(), ExpectedVersion: same.Version,
			Labels: map[string]string{"tier": "gold"}, Annotations: map[string]string{"why": "promoted"},
		})
		require.NoError(t, err, l)
		require.Equal(t, map[string]string{"tier": "gold"}, meta.Labels)
		require.Equal(t, map[string]string{"why": "promoted"}, meta.Annotations)
		require.Equal(t, string(r.Content), string(meta.Content))
		require.Equal(t, r.Revision, meta.Revision)
	}
}

func catalogDraftEditable(t *testing.T, ctx context.Context, s ports.Catalog) {
	for _, l := range []revision.Lifecycle{revision.Draft, revision.Proposed} {
		r := catalogReach(t, ctx, s, "editable-"+string(l), l)
		got, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
			Ref: r.Ref(), ExpectedVersion: r.Version, Content: json.RawMessage(`{"spec":{"n":5}}`), EditedBy: "bo",
		})
		require.NoError(t, err, l)
		require.Equal(t, `{"spec":{"n":5}}`, string(got.Content))
		require.Equal(t, l, got.Lifecycle)
		require.Equal(t, 0, got.Revision)
		require.Equal(t, "bo", got.EditedBy, "an edit records its author")
		// A write that leaves the content alone keeps the last editor.
		kept, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: got.Version,
			Labels: map[string]string{"x": "1"}, EditedBy: "cy"})
		require.NoError(t, err, l)
		require.Equal(t, "bo", kept.EditedBy)
	}
}

func catalogMetadata(t *testing.T, ctx context.Context, s ports.Catalog) {
	r := catalogCreate(t, ctx, s, revision.KindPolicy, "meta")
	r, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
		Ref: r.Ref(), ExpectedVersion: r.Version,
		Labels: map[string]string{"a": "1", "b": "2"}, Annotations: map[string]string{"x": "y"},
	})
	require.NoError(t, err)

	kept, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Proposed})
	require.NoError(t, err)
	require.Equal(t, r.Labels, kept.Labels, "nil labels keep the stored ones")
	require.Equal(t, r.Annotations, kept.Annotations)

	cleared, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
		Ref: r.Ref(), ExpectedVersion: kept.Version, Labels: map[string]string{},
	})
	require.NoError(t, err)
	require.Empty(t, cleared.Labels, "an empty map clears")
	require.Equal(t, r.Annotations, cleared.Annotations)
	requireCatalogUnchanged(t, ctx, s, cleared)
}

func catalogCopies(t *testing.T, ctx context.Context, s ports.Catalog) {
	in := catalogDraft(revision.KindPolicy, "copies")
	in.Labels = map[string]string{"a": "1"}
	got, err := s.CatalogCreate(ctx, in)
	require.NoError(t, err)
	in.Labels["a"] = "changed"
	in.Content[2] = 'X'
	got.Labels["a"] = "changed too"
	got.Content[2] = 'Y'

	read, err := s.CatalogGet(ctx, in.Ref())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "1"}, read.Labels)
	require.Equal(t, `{"spec":{"n":0}}`, string(read.Content))
}

// errorsIsConflict reports whether err is a catalog conflict.
func errorsIsConflict(err error) bool {
	return errors.Is(err, ports.ErrConflict) && errors.Is(err, revision.ErrConflict)
}
