package chain_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// desiredRelease is the version of the target's desired release ("" for
// no release) and the release.
func (h *harness) desiredRelease(env, res string) (string, release.Release) {
	h.t.Helper()
	d, err := h.store.DesiredGet(h.ctx, target(env, res))
	require.NoError(h.t, err)
	if d.ReleaseID == "" {
		return "", release.Release{}
	}
	rel, err := h.store.ReleaseGet(h.ctx, d.ReleaseID)
	require.NoError(h.t, err)
	return rel.VersionID, rel
}

// allTargets are the harness's six targets.
func allTargets() []release.ReleaseTarget {
	var all []release.ReleaseTarget
	for _, env := range []string{"dev", "staging", "prod"} {
		all = append(all, target(env, "c1"), target(env, "c2"))
	}
	return all
}

// TestScenarioPolicyFromCatalog: the chain evaluates the latest published
// revision of each catalog policy. A draft or proposed policy changes
// nothing; publishing it (catalog approve) blocks prod; a release keeps the
// policy revisions it was decided with and Explain names them; publishing
// a revision that disables the policy lets prod move on.
func TestScenarioPolicyFromCatalog(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		svc := catalog.New(h.store, catalog.Config{})
		gate := policy.Policy{ID: "prod-approval", WorkspaceID: "ws", Name: "prod approval", Selector: `environment.name == "prod"`, Enabled: true,
			Rules: []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}}
		content, err := json.Marshal(gate)
		require.NoError(t, err)
		d, err := svc.Create(h.ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: gate.ID, Content: content})
		require.NoError(t, err)
		d, err = svc.Propose(h.ctx, catalog.Change{Ref: d.Ref(), Version: d.Version})
		require.NoError(t, err)

		h.version("v1")
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			v, rel := h.desiredRelease(env, "c1")
			require.Equal(t, "v1", v, "%s: a proposed policy changes nothing", env)
			require.Empty(t, rel.Policies)
		}

		_, err = svc.Approve(h.ctx, catalog.ApproveParams{Ref: d.Ref(), Version: d.Version, Approver: "alice"})
		require.NoError(t, err)
		require.NoError(t, h.chain.EvaluateTargets(h.ctx, allTargets()...))
		h.drain()
		v, _ := h.desiredRelease("prod", "c1")
		require.Empty(t, v, "the published policy blocks prod")
		v, _ = h.desiredRelease("dev", "c1")
		require.Equal(t, "v1", v, "and not dev")

		h.version("v2")
		h.drain()
		_, err = h.chain.Approve(h.ctx, release.Approval{VersionID: "v2", EnvironmentID: "prod", User: "bob"})
		require.NoError(t, err)
		h.drain()
		v, rel := h.desiredRelease("prod", "c1")
		require.Equal(t, "v2", v)
		r1 := []release.PolicyRevision{{ID: "prod-approval", Revision: 1}}
		require.Equal(t, r1, rel.Policies, "the release keeps the revision it was decided with")
		ex, err := h.chain.Explain(h.ctx, target("prod", "c1"), 1)
		require.NoError(t, err)
		require.Equal(t, r1, ex.DecidedWith)
		require.Equal(t, r1, ex.Policies)

		h.version("v3")
		h.drain()
		v, _ = h.desiredRelease("prod", "c1")
		require.Equal(t, "v2", v, "v3 is not approved for prod")

		// A new revision disables the policy: prod moves to v3.
		gate.Enabled = false
		n, err := svc.Policies("carol").Put(h.ctx, gate, 1)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		require.NoError(t, h.chain.EvaluateTargets(h.ctx, allTargets()...))
		h.drain()
		v, rel = h.desiredRelease("prod", "c1")
		require.Equal(t, "v3", v, "the disabled policy no longer applies")
		require.Empty(t, rel.Policies)
		ex, err = h.chain.Explain(h.ctx, target("prod", "c1"), 1)
		require.NoError(t, err)
		require.Empty(t, ex.Policies)
		pols, err := ports.EnabledPolicies(h.ctx, h.store)
		require.NoError(t, err)
		require.Empty(t, pols)
	})
}
