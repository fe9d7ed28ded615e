package catalog_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// TestPoliciesView: the object-store view of the catalog's policies reads
// the latest published revisions, publishes each write as the next
// revision approved by the writer, compare-and-swap on the revision
// number, and deletes by proposing every published revision for deletion.
func TestPoliciesView(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cat := memory.NewCatalog(ports.SystemClock)
	svc := catalog.New(cat, catalog.Config{})
	pols := svc.Policies("alice")
	p := policy.Policy{ID: "gate", WorkspaceID: "ws", Name: "gate", Selector: "true", Enabled: true,
		Rules: []policy.Rule{{ID: "a", Spec: policy.AnyApproval{MinApprovals: 1}}}}

	n, err := pols.Put(ctx, p, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	got, err := pols.Get(ctx, "gate")
	require.NoError(t, err)
	require.Equal(t, p, got.Value)
	require.Equal(t, int64(1), got.Version)
	latest, err := cat.CatalogLatestPublished(ctx, revision.KindPolicy, "gate")
	require.NoError(t, err)
	require.Equal(t, "alice", latest.ApprovedBy)

	_, err = pols.Put(ctx, p, 0)
	require.ErrorIs(t, err, ports.ErrConflict, "0 creates only")
	_, err = pols.Put(ctx, p, 7)
	require.ErrorIs(t, err, ports.ErrConflict, "stale revision")
	_, err = pols.Put(ctx, policy.Policy{ID: "nope", WorkspaceID: "ws", Name: "n"}, 3)
	require.ErrorIs(t, err, ports.ErrNotFound)
	p.Priority = 3
	n, err = pols.Put(ctx, p, 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)

	// Bad input names the field and publishes nothing.
	_, err = pols.Put(ctx, policy.Policy{ID: "Upper", WorkspaceID: "ws", Name: "u"}, 0)
	requireField(t, err, "id")
	_, err = pols.Put(ctx, policy.Policy{ID: "nows", Name: "n"}, 0)
	requireField(t, err, "workspace_id")
	_, err = pols.Put(ctx, policy.Policy{ID: "bad", WorkspaceID: "ws", Name: "b", Selector: "1 +"}, 0)
	requireField(t, err, "selector")
	_, err = svc.Policies("").Put(ctx, policy.Policy{ID: "anon", WorkspaceID: "ws", Name: "a"}, 0)
	requireField(t, err, "approver")
	all, err := cat.CatalogList(ctx, ports.CatalogListParams{Kind: revision.KindPolicy})
	require.NoError(t, err)
	require.Len(t, all, 2, "only gate's two revisions")

	// An open draft (from the catalog commands) makes a write a conflict.
	other := policy.Policy{ID: "other", WorkspaceID: "ws", Name: "other", Enabled: true}
	content, err := json.Marshal(other)
	require.NoError(t, err)
	draft, err := svc.Create(ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "gate", Content: mustJSON(t, p)})
	require.NoError(t, err)
	_, err = pols.Put(ctx, p, 2)
	require.ErrorIs(t, err, ports.ErrConflict)
	require.NoError(t, svc.Delete(ctx, catalog.Change{Ref: draft.Ref(), Version: draft.Version}))

	// A draft never shows.
	_, err = svc.Create(ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "other", Content: content})
	require.NoError(t, err)
	page, err := pols.List(ctx, ports.ListParams{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, "gate", page.Items[0].Value.ID)
	require.Equal(t, int64(2), page.Items[0].Version)

	// Pages continue by id.
	for _, id := range []string{"b", "c"} {
		_, err := pols.Put(ctx, policy.Policy{ID: id, WorkspaceID: "ws", Name: id}, 0)
		require.NoError(t, err)
	}
	page, err = pols.List(ctx, ports.ListParams{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, []string{page.Items[0].Value.ID, page.Items[1].Value.ID})
	page, err = pols.List(ctx, ports.ListParams{Limit: 2, Continue: page.Continue})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Empty(t, page.Continue)

	// A listing by workspace (parent or workspace) keeps that workspace's
	// policies.
	_, err = pols.Put(ctx, policy.Policy{ID: "d", WorkspaceID: "ws-b", Name: "d"}, 0)
	require.NoError(t, err)
	for _, lp := range []ports.ListParams{{Parent: "ws-b"}, {Workspace: "ws-b"}} {
		page, err = pols.List(ctx, lp)
		require.NoError(t, err)
		require.Len(t, page.Items, 1, "%+v", lp)
		require.Equal(t, "d", page.Items[0].Value.ID)
	}
	page, err = pols.List(ctx, ports.ListParams{Workspace: "ws", Limit: 3})
	require.NoError(t, err)
	require.Len(t, page.Items, 3)
	require.Empty(t, page.Continue)

	// Delete: CAS on the revision; afterwards no revision applies, and a
	// new write starts after the highest number.
	require.ErrorIs(t, pols.Delete(ctx, "gate", 1), ports.ErrConflict)
	require.NoError(t, pols.Delete(ctx, "gate", 2))
	_, err = pols.Get(ctx, "gate")
	require.ErrorIs(t, err, ports.ErrNotFound)
	enabled, err := ports.EnabledPolicies(ctx, cat)
	require.NoError(t, err)
	require.Empty(t, enabled)
	n, err = pols.Put(ctx, p, 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
}

func requireField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *release.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, field, fe.Field)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
