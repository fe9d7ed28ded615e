package catalog_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// setup returns a service over an empty in-memory catalog and the store.
func setup(t *testing.T, cfg catalog.Config) (*catalog.Service, ports.Catalog) {
	t.Helper()
	t.Parallel()
	store := memory.NewCatalog(ports.SystemClock)
	return catalog.New(store, cfg), store
}

// wt is the workflow-template object named name.
func wt(name string) revision.Object {
	return revision.Object{Kind: revision.KindWorkflowTemplate, Name: name}
}

// schemaOnly configures a service for the toy documents doc makes: an
// empty validator map leaves every kind the schema check alone.
var schemaOnly = catalog.Config{Validators: map[revision.Kind]func([]byte) error{}}

// doc is a small valid content document (not a valid template or policy).
func doc(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"spec":{"n":%d}}`, n)) }

// create opens a draft of obj with doc(n).
func create(t *testing.T, s *catalog.Service, obj revision.Object, n int) ports.Revision {
	t.Helper()
	r, err := s.Create(t.Context(), catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: doc(n)})
	require.NoError(t, err)
	return r
}

// at reads ref's current version as a Change.
func at(r ports.Revision) catalog.Change { return catalog.Change{Ref: r.Ref(), Version: r.Version} }

// publish creates, proposes and approves a revision of obj with doc(n).
func publish(t *testing.T, s *catalog.Service, obj revision.Object, n int) ports.Revision {
	t.Helper()
	ctx := t.Context()
	r := create(t, s, obj, n)
	r, err := s.Propose(ctx, at(r))
	require.NoError(t, err)
	r, err = s.Approve(ctx, catalog.ApproveParams{Ref: r.Ref(), Version: r.Version, Approver: "ana"})
	require.NoError(t, err)
	return r
}

// requireConflict checks err matches both conflict sentinels.
func requireConflict(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, revision.ErrConflict)
	require.ErrorIs(t, err, ports.ErrConflict)
}

// requireSame checks the stored revision still equals want.
func requireSame(t *testing.T, s *catalog.Service, want ports.Revision) {
	t.Helper()
	got, err := s.Get(t.Context(), want.Ref())
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestCreateIsDraftWithoutNumber(t *testing.T) {
	s, _ := setup(t, schemaOnly)
	r, err := s.Create(t.Context(), catalog.CreateParams{
		Kind: revision.KindPolicy, Name: "guard", Content: doc(1),
		Labels: map[string]string{"team": "infra"},
	})
	require.NoError(t, err)
	require.Equal(t, revision.Draft, r.Lifecycle)
	require.Zero(t, r.Revision)
	require.NotEmpty(t, r.ID)
	require.Equal(t, map[string]string{"team": "infra"}, r.Labels)
	requireSame(t, s, r)
}

// TestCreatorAndEditorAreRecorded: a draft records who created it and who
// last changed its content; a lifecycle change keeps both.
func TestCreatorAndEditorAreRecorded(t *testing.T) {
	s, _ := setup(t, schemaOnly)
	ctx := t.Context()
	r, err := s.Create(ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "authored", Content: doc(1), By: "ana"})
	require.NoError(t, err)
	require.Equal(t, "ana", r.CreatedBy)
	require.Empty(t, r.EditedBy)
	r, err = s.Edit(ctx, catalog.EditParams{Ref: r.Ref(), Version: r.Version, Content: doc(2), By: "bo"})
	require.NoError(t, err)
	require.Equal(t, "bo", r.EditedBy)
	r, err = s.Propose(ctx, at(r))
	require.NoError(t, err)
	require.Equal(t, "ana", r.CreatedBy)
	require.Equal(t, "bo", r.EditedBy)
	requireSame(t, s, r)
}

func TestCreateOneOpenDraft(t *testing.T) {
	s, _ := setup(t, schemaOnly)
	ctx := t.Context()
	d := create(t, s, wt("one"), 1)
	_, err := s.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "one", Content: doc(2)})
	requireConflict(t, err)
	require.Contains(t, err.Error(), d.ID)

	p, err := s.Propose(ctx, at(d))
	require.NoError(t, err)
	_, err = s.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "one", Content: doc(2)})
	requireConflict(t, err)

	_, err = s.Approve(ctx, catalog.ApproveParams{Ref: p.Ref(), Version: p.Version, Approver: "ana"})
	require.NoError(t, err)
	create(t, s, wt("one"), 2) // published: the object may open a new draft
}

func TestCreateFromPublished(t *testing.T) {
	s, _ := setup(t, schemaOnly)
	ctx := t.Context()
	v1 := publish(t, s, wt("copy"), 7)
	d, err := s.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "copy", From: 1})
	require.NoError(t, err)
	require.Equal(t, string(v1.Content), string(d.Content))
	require.Equal(t, revision.Draft, d.Lifecycle)
	require.NotEqual(t, v1.ID, d.ID)

	require.NoError(t, s.Delete(ctx, at(d)))
	_, err = s.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "copy", From: 9})
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func TestCreateRejectsBadInput(t *testing.T) {
	s, store := setup(t, schemaOnly)
	cases := []struct {
		name  string
		p     catalog.CreateParams
		field string
	}{
		{"unknown kind", catalog.CreateParams{Kind: "template", Name: "x", Content: doc(1)}, "kind"},
		{"bad name", catalog.CreateParams{Kind: revision.KindPolicy, Name: "X Y", Content: doc(1)}, "name"},
		{"content and from", catalog.CreateParams{Kind: revision.KindPolicy, Name: "x", Content: doc(1), From: 1}, "from"},
		{"no content", catalog.CreateParams{Kind: revision.KindPolicy, Name: "x"}, "content"},
		{"not an object", catalog.CreateParams{Kind: revision.KindPolicy, Name: "x", Content: json.RawMessage(`[]`)}, "content"},
		{"syntax", catalog.CreateParams{Kind: revision.KindPolicy, Name: "x", Content: json.RawMessage("{\n\"a\":,}")}, "line 2, column 5"},
		{"empty label key", catalog.CreateParams{Kind: revision.KindPolicy, Name: "x", Content: doc(1), Labels: map[string]string{"": "v"}}, "labels"},
	}
	for _, tc := range cases {
		_, err := s.Create(t.Context(), tc.p)
		require.ErrorIs(t, err, revision.ErrValidation, tc.name)
		require.Contains(t, err.Error(), tc.field, tc.name)
	}
	all, err := store.CatalogList(t.Context(), ports.CatalogListParams{})
	require.NoError(t, err)
	require.Empty(t, all, "a refused create stores nothing")
}

func TestValidatorsRunOnEveryContentChange(t *testing.T) {
	errTooBig := errors.New("n too big")
	limit := 10
	s, _ := setup(t, catalog.Config{Validators: map[revision.Kind]func([]byte) error{
		revision.KindWorkflowTemplate: func(content []byte) error {
			var v struct{ Spec struct{ N int } }
			if err := json.Unmarshal(content, &v); err != nil {
				return err
			}
			if v.Spec.N > limit {
				return fmt.Errorf("spec.n: %w", errTooBig)
			}
			return nil
		},
	}})
	ctx := t.Context()

	_, err := s.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "v", Content: doc(11)})
	require.ErrorIs(t, err, revision.ErrValidation)
	require.ErrorIs(t, err, errTooBig, "the validator's problem is wrapped")
	var ve *revision.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Problems, 1)

	d := create(t, s, wt("v"), 5)
	_, err = s.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: doc(12)})
	require.ErrorIs(t, err, errTooBig)
	requireSame(t, s, d)

	// Kinds without a validator get the schema check only.
	_, err = s.Create(ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "v", Content: doc(99)})
	require.NoError(t, err)
}

func TestNothingChangesOnFailure(t *testing.T) {
	// A validator that starts failing after the draft was written: propose
	// and approve re-validate, and a refusal leaves the revision as it was.
	fail := false
	s, _ := setup(t, catalog.Config{Validators: map[revision.Kind]func([]byte) error{
		revision.KindPolicy: func([]byte) error {
			if fail {
				return errors.New("policy does not compile")
			}
			return nil
		},
	}})
	ctx := t.Context()
	d, err := s.Create(ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "p", Content: doc(1)})
	require.NoError(t, err)
	fail = true
	_, err = s.Propose(ctx, at(d))
	require.ErrorIs(t, err, revision.ErrValidation)
	requireSame(t, s, d)

	fail = false
	p, err := s.Propose(ctx, at(d))
	require.NoError(t, err)
	fail = true
	_, err = s.Approve(ctx, catalog.ApproveParams{Ref: p.Ref(), Version: p.Version, Approver: "ana"})
	require.ErrorIs(t, err, revision.ErrValidation)
	requireSame(t, s, p)

	// Metadata changes do not re-run content validation.
	_, err = s.UpdateMetadata(ctx, catalog.MetadataParams{Ref: p.Ref(), Version: p.Version, Labels: map[string]string{"a": "b"}})
	require.NoError(t, err)
}

func TestStaleVersionConflicts(t *testing.T) {
	s, _ := setup(t, schemaOnly)
	ctx := t.Context()
	d := create(t, s, wt("stale"), 1)
	e, err := s.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: doc(2)})
	require.NoError(t, err)

	_, err = s.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: doc(3)})
	requireConflict(t, err)
	_, err = s.Propose(ctx, at(d))
	requireConflict(t, err)
	requireConflict(t, s.Delete(ctx, at(d)))
	requireSame(t, s, e)
}

func TestHeldLockConflictsAndReadsDoNotWait(t *testing.T) {
	s, store := setup(t, schemaOnly)
	ctx := t.Context()
	d := create(t, s, wt("locked"), 1)
	unlock, err := store.CatalogTryLock(ctx, catalog.LockKey(wt("locked")))
	require.NoError(t, err)

	_, err = s.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: doc(2)})
	requireConflict(t, err)
	require.Contains(t, err.Error(), "another change to catalog/workflow-template/locked is in progress")
	_, err = s.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "locked", Content: doc(2)})
	requireConflict(t, err)

	_, err = s.Get(ctx, d.Ref())
	require.NoError(t, err, "reads take no lock")
	_, err = s.List(ctx, ports.CatalogListParams{Name: "locked"})
	require.NoError(t, err)

	other := create(t, s, wt("other"), 1)
	_, err = s.Propose(ctx, at(other))
	require.NoError(t, err, "other objects are not locked")

	unlock()
	_, err = s.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: doc(2)})
	require.NoError(t, err)
}

func TestApproveAndReject(t *testing.T) {
	s, _ := setup(t, schemaOnly)
	ctx := t.Context()
	d := create(t, s, wt("review"), 1)
	p, err := s.Propose(ctx, at(d))
	require.NoError(t, err)

	_, err = s.Reject(ctx, catalog.RejectParams{Ref: p.Ref(), Version: p.Version})
	require.ErrorIs(t, err, revision.ErrValidation)
	require.Contains(t, err.Error(), "reason")
	_, err = s.Approve(ctx, catalog.ApproveParams{Ref: p.Ref(), Version: p.Version})
	require.ErrorIs(t, err, revision.ErrValidation)
	require.Contains(t, err.Error(), "approver")
	requireSame(t, s, p)

	r, err := s.Reject(ctx, catalog.RejectParams{Ref: p.Ref(), Version: p.Version, Reason: "needs a rollback step"})
	require.NoError(t, err)
	require.Equal(t, revision.Draft, r.Lifecycle)
	require.Equal(t, "needs a rollback step", r.Annotations[catalog.AnnotationRejectReason])

	p, err = s.Propose(ctx, at(r))
	require.NoError(t, err)
	a, err := s.Approve(ctx, catalog.ApproveParams{Ref: p.Ref(), Version: p.Version, Approver: "bo"})
	require.NoError(t, err)
	require.Equal(t, revision.Published, a.Lifecycle)
	require.Equal(t, 1, a.Revision)
	require.Equal(t, "bo", a.ApprovedBy)
	require.False(t, a.PublishedAt.IsZero())
	require.NotContains(t, a.Annotations, catalog.AnnotationRejectReason, "approval clears the rejection")
}

func TestPinnedRevisionsOutliveNewerOnes(t *testing.T) {
	s, _ := setup(t, schemaOnly)
	ctx := t.Context()
	obj := wt("pinned")
	v1 := publish(t, s, obj, 1)
	v2 := publish(t, s, obj, 2)
	require.Equal(t, []int{1, 2}, []int{v1.Revision, v2.Revision})

	got, err := s.GetRevision(ctx, obj, 1)
	require.NoError(t, err)
	require.Equal(t, v1, got, "an in-flight workflow keeps revision 1")
	latest, err := s.LatestPublished(ctx, obj)
	require.NoError(t, err)
	require.Equal(t, v2, latest)

	dp, err := s.ProposeDelete(ctx, at(v2))
	require.NoError(t, err)
	latest, err = s.LatestPublished(ctx, obj)
	require.NoError(t, err)
	require.Equal(t, v1.Ref(), latest.Ref(), "new work avoids a revision proposed for deletion")
	got, err = s.GetRevision(ctx, obj, 2)
	require.NoError(t, err)
	require.Equal(t, string(v2.Content), string(got.Content), "in-flight work still reads it")

	require.NoError(t, s.Delete(ctx, at(dp)))
	_, err = s.GetRevision(ctx, obj, 2)
	require.ErrorIs(t, err, ports.ErrNotFound)
	v3 := publish(t, s, obj, 3)
	require.Equal(t, 3, v3.Revision, "a deleted number is never reused")

	_, err = s.GetRevision(ctx, obj, 0)
	require.ErrorIs(t, err, revision.ErrValidation)
}

func TestUpdateMetadataInEveryState(t *testing.T) {
	s, _ := setup(t, schemaOnly)
	ctx := t.Context()
	for _, l := range revision.Lifecycles {
		r := reach(t, s, wt("meta-"+string(l)), l)
		got, err := s.UpdateMetadata(ctx, catalog.MetadataParams{
			Ref: r.Ref(), Version: r.Version,
			Labels: map[string]string{"tier": "gold"}, Annotations: map[string]string{"owner": "infra"},
		})
		require.NoError(t, err, l)
		require.Equal(t, l, got.Lifecycle)
		require.Equal(t, map[string]string{"tier": "gold"}, got.Labels)
		require.Equal(t, string(r.Content), string(got.Content))

		kept, err := s.UpdateMetadata(ctx, catalog.MetadataParams{Ref: r.Ref(), Version: got.Version, Labels: map[string]string{}})
		require.NoError(t, err, l)
		require.Empty(t, kept.Labels, "an empty map clears")
		require.Equal(t, got.Annotations, kept.Annotations, "a nil map keeps")
	}
}
