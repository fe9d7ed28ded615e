package chain_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/gate"
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

// proposeProdApproval proposes, in a catalog over h's store, a policy
// that asks prod targets for an approval.
func proposeProdApproval(t *testing.T, h *harness) (*catalog.Service, policy.Policy, ports.Revision) {
	t.Helper()
	svc := catalog.New(h.store, catalog.Config{})
	p := policy.Policy{ID: "prod-approval", WorkspaceID: "ws", Name: "prod approval", Selector: `environment.name == "prod"`, Enabled: true,
		Rules: []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}}
	content, err := json.Marshal(p)
	require.NoError(t, err)
	d, err := svc.Create(h.ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: p.ID, Content: content})
	require.NoError(t, err)
	d, err = svc.Propose(h.ctx, catalog.Change{Ref: d.Ref(), Version: d.Version})
	require.NoError(t, err)
	return svc, p, d
}

// TestScenarioPolicyFromCatalog: the chain evaluates the latest published
// revision of each catalog policy. A draft or proposed policy changes
// nothing; publishing it (catalog approve) blocks prod; a release keeps the
// policy revisions it was decided with and Explain names them; publishing
// a revision that disables the policy lets prod move on.
func TestScenarioPolicyFromCatalog(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		svc, gate, d := proposeProdApproval(t, h)

		h.version("v1")
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			v, rel := h.desiredRelease(env, "c1")
			require.Equal(t, "v1", v, "%s: a proposed policy changes nothing", env)
			require.Empty(t, rel.Policies)
		}

		_, err := svc.Approve(h.ctx, catalog.ApproveParams{Ref: d.Ref(), Version: d.Version, Approver: "alice"})
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

// TestPublishingPlanEqualsApproved: the plan of publishing a proposed
// policy revision (gate.Publishing with the chain's DecideManyWith) gives
// each target it affects its desired release before (as stored) and after,
// and the after is what the chain decides once the revision is approved
// and the targets drained; a target it does not affect is not listed.
func TestPublishingPlanEqualsApproved(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		svc, p, d := proposeProdApproval(t, h)
		h.version("v1")
		h.drain()
		before := h.desiredReleases(allTargets())

		decide := func(ps []ports.Stored[policy.Policy]) gate.Decider { return h.chain.DecideManyWith(ps) }
		diff, err := gate.Publishing(h.ctx, nil, h.store, p, decide)
		require.NoError(t, err)
		require.Len(t, diff.Targets, 2, "the prod targets: %+v", diff.Targets)
		for _, tg := range diff.Targets {
			require.Equal(t, "prod", tg.Target.EnvironmentID)
			require.NotNil(t, tg.Desired, tg.Key)
			require.NotNil(t, tg.Desired.Before, tg.Key)
			require.NotNil(t, tg.Desired.After, tg.Key)
			require.Equal(t, before[tg.Key], tg.Desired.Before.ReleaseID, "%s: before is the stored decision", tg.Key)
			require.NotEmpty(t, tg.Desired.Before.ReleaseID)
			require.Empty(t, tg.Desired.After.ReleaseID, "%s: the approval gate holds v1 back", tg.Key)
			require.True(t, tg.Desired.Changed())
		}
		require.Equal(t, before, h.desiredReleases(allTargets()), "the plan writes nothing")

		_, err = svc.Approve(h.ctx, catalog.ApproveParams{Ref: d.Ref(), Version: d.Version, Approver: "alice"})
		require.NoError(t, err)
		require.NoError(t, h.chain.EvaluateTargets(h.ctx, allTargets()...))
		h.drain()
		got := h.desiredReleases(allTargets())
		for _, tg := range diff.Targets {
			require.Equal(t, tg.Desired.After.ReleaseID, got[tg.Key], "%s: the plan's after is the drained decision", tg.Key)
		}

		// Planning the published revision itself (no draft open) changes
		// nothing: no rule starts or stops, no release moves.
		again, err := gate.Publishing(h.ctx, nil, h.store, p, decide)
		require.NoError(t, err)
		for _, tg := range again.Targets {
			require.Empty(t, tg.Starts, "%s", tg.Key)
			require.Empty(t, tg.Stops, "%s", tg.Key)
			require.False(t, tg.Desired != nil && tg.Desired.Changed(), "%s", tg.Key)
		}
	})
}
