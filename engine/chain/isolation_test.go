package chain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestScenarioPolicyStaysInItsWorkspace: two workspaces each have an
// environment named staging; a policy of workspace ws selecting
// environment.name == "staging" gates ws's staging only. Workspace B's
// staging target releases at once, and its explain shows no rule of the
// policy (issue 29: the demo's staging policy blocked another workspace's
// staging forever).
func TestScenarioPolicyStaysInItsWorkspace(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		ctx, s, r := h.ctx, h.store, require.New(t)
		_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws-b", Name: "other"}, 0)
		r.NoError(err)
		_, err = s.Systems().Put(ctx, release.System{ID: "sys-b", WorkspaceID: "ws-b", Name: "shop"}, 0)
		r.NoError(err)
		_, err = s.Environments().Put(ctx, release.Environment{ID: "staging-b", SystemID: "sys-b", Name: "staging", ResourceSelector: "true"}, 0)
		r.NoError(err)
		_, err = s.Resources().Put(ctx, release.Resource{ID: "cb", WorkspaceID: "ws-b", Kind: "cluster", Identifier: "cb", Name: "cb"}, 0)
		r.NoError(err)
		_, err = s.Deployments().Put(ctx, release.Deployment{ID: "api-b", SystemID: "sys-b", Name: "api", Slug: "api",
			JobAgentID: "fake-agent", ResourceSelector: `resource.kind == "cluster"`}, 0)
		r.NoError(err)
		diff, err := h.chain.SyncTargets(ctx, "sys-b")
		r.NoError(err)
		r.Len(diff.Added, 1)

		h.policy(policy.Policy{ID: "staging-approval", WorkspaceID: "ws", Selector: `environment.name == "staging"`,
			Rules: []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}})
		h.drain()
		h.version("v1")
		r.NoError(h.chain.CreateVersion(ctx, release.DeploymentVersion{ID: "b1", DeploymentID: "api-b", Tag: "b1"}))
		h.drain()

		h.requireRunning("", "staging")
		b := release.ReleaseTarget{DeploymentID: "api-b", EnvironmentID: "staging-b", ResourceID: "cb"}
		rows, err := s.JobsByTarget(ctx, b, 0)
		r.NoError(err)
		r.Len(rows, 1, "workspace B's staging is not gated by workspace ws's policy")
		r.Equal("b1", rows[0].VersionID)

		ex, err := h.chain.Explain(ctx, b, 0)
		r.NoError(err)
		r.NotEmpty(ex.Versions)
		for _, v := range ex.Versions {
			r.Empty(v.Verdicts, "no rule of another workspace's policy on %s", v.Version.ID)
		}
		ex, err = h.chain.Explain(ctx, target("staging", "c1"), 0)
		r.NoError(err)
		r.NotEmpty(ex.Versions)
		r.Len(ex.Versions[0].Verdicts, 1, "the policy gates its own workspace's staging")
	})
}
