package porttest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// objRelationshipRules: a relationship rule keeps every field, lists by
// its workspace, and holds its workspace (a workspace delete is refused
// naming it while it exists).
func objRelationshipRules(t *testing.T, e *relEnv) {
	t.Helper()
	relWorld(t, e)
	ctx, s := e.ctx, e.s
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws-rules", Name: "Rules only"}, 0)
	must(t, err)
	rule := release.RelationshipRule{ID: "cluster-vpc", WorkspaceID: "ws-rules", Name: "vpc", Description: "a cluster's VPC",
		FromSelector: `resource.kind == "Cluster"`, ToSelector: `resource.kind == "VPC"`, Match: `from.metadata.vpc == to.id`}
	_, err = s.RelationshipRules().Put(ctx, rule, 0)
	must(t, err)
	_, err = s.RelationshipRules().Put(ctx, release.RelationshipRule{ID: "other", WorkspaceID: relWS, Name: "db", Match: "true"}, 0)
	must(t, err)

	got, err := s.RelationshipRules().Get(ctx, rule.ID)
	must(t, err)
	require.Equal(t, rule, got.Value, "every field round-trips")
	page, err := s.RelationshipRules().List(ctx, ports.ListParams{Workspace: "ws-rules"})
	must(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, rule.ID, page.Items[0].Value.ID, "listed by its workspace only")

	requireInUse(t, s.Workspaces().Delete(ctx, "ws-rules", 1), "relationship rule cluster-vpc",
		func() error { _, err := s.Workspaces().Get(ctx, "ws-rules"); return err })
	must(t, s.RelationshipRules().Delete(ctx, rule.ID, 1))
	must(t, s.Workspaces().Delete(ctx, "ws-rules", 1), "the workspace goes once its rules have")
}
