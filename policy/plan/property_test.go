package plan_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

var envNames = []string{"dev", "staging", "prod", "prod "}

// genFacts is a small workspace: one system, up to three environments and
// resources, one or two deployments, up to three policies gating on an
// environment name.
func genFacts(t *rapid.T, label string) plan.Facts {
	f := plan.Facts{Systems: []release.System{{ID: "sys", WorkspaceID: "ws", Name: "shop"}}}
	for i := range rapid.IntRange(1, 2).Draw(t, label+"deployments") {
		f.Deployments = append(f.Deployments, release.Deployment{ID: fmt.Sprintf("d%d", i), SystemID: "sys", Name: "d", Slug: fmt.Sprintf("d%d", i), ResourceSelector: "true"})
	}
	for i := range rapid.IntRange(0, 3).Draw(t, label+"environments") {
		f.Environments = append(f.Environments, release.Environment{ID: fmt.Sprintf("e%d", i), SystemID: "sys",
			Name: rapid.SampledFrom(envNames).Draw(t, label+"envname"), ResourceSelector: "true"})
	}
	for i := range rapid.IntRange(0, 3).Draw(t, label+"resources") {
		f.Resources = append(f.Resources, release.Resource{ID: fmt.Sprintf("r%d", i), WorkspaceID: "ws", Kind: "cluster", Identifier: fmt.Sprintf("k/r%d", i), Name: "r"})
	}
	types := []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}, {ID: "retry", Spec: policy.Retry{}}}
	for i := range rapid.IntRange(0, 3).Draw(t, label+"policies") {
		f.Policies = append(f.Policies, plan.Policy{Revision: rapid.IntRange(1, 2).Draw(t, label+"revision"), Policy: policy.Policy{
			ID: fmt.Sprintf("p%d", i), Name: "p", Enabled: true,
			Selector: fmt.Sprintf("environment.name == %q", rapid.SampledFrom(envNames).Draw(t, label+"selects")),
			Rules:    []policy.Rule{rapid.SampledFrom(types).Draw(t, label+"rule")}}})
	}
	return f
}

// TestComputeProperties: the diff of a change and of its inverse are
// mirror images; every lift is a stopping rule of a target that stays; and
// the rules of each target after the change are exactly the gating rules
// policy.MatchingRules gives for it.
func TestComputeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before, after := genFacts(t, "before."), genFacts(t, "after.")
		d, err := plan.Compute(before, after)
		require.NoError(t, err)
		back, err := plan.Compute(after, before)
		require.NoError(t, err)
		require.Len(t, back.Targets, len(d.Targets))
		for i, x := range d.Targets {
			y := back.Targets[i]
			require.Equal(t, x.Key, y.Key)
			require.Equal(t, x.Created, y.Removed)
			require.Equal(t, x.Starts, y.Stops)
			require.Equal(t, x.Stops, y.Starts)
		}
		for _, l := range d.Lifted() {
			i := slices.IndexFunc(d.Targets, func(x plan.Target) bool { return x.Key == l.Target })
			require.GreaterOrEqual(t, i, 0)
			require.False(t, d.Targets[i].Created || d.Targets[i].Removed)
			require.Contains(t, d.Targets[i].Stops, l.Rule)
		}
		same, err := plan.Compute(after, after)
		require.NoError(t, err)
		require.Empty(t, same.Targets)

		// Against policy.MatchingRules, target by target.
		empty := plan.Facts{Systems: after.Systems, Deployments: after.Deployments, Environments: after.Environments, Resources: after.Resources}
		all, err := plan.Compute(empty, after)
		require.NoError(t, err)
		ps := make([]policy.Policy, len(after.Policies))
		for i := range after.Policies {
			ps[i] = after.Policies[i].Policy
		}
		for _, x := range all.Targets {
			in := policy.Input{Deployment: find(after.Deployments, x.Target.DeploymentID, func(d release.Deployment) string { return d.ID }),
				Environment: find(after.Environments, x.Target.EnvironmentID, func(e release.Environment) string { return e.ID }),
				Resource:    find(after.Resources, x.Target.ResourceID, func(r release.Resource) string { return r.ID })}
			var want []string
			for _, typ := range plan.GatingTypes {
				rules, err := policy.MatchingRules(ps, in, typ)
				require.NoError(t, err)
				for _, r := range rules {
					want = append(want, r.ID)
				}
			}
			var got []string
			for _, r := range x.Starts {
				got = append(got, r.Rule)
			}
			require.ElementsMatch(t, want, got, x.Key)
		}
	})
}

func find[T any](s []T, id string, key func(T) string) T {
	i := slices.IndexFunc(s, func(v T) bool { return key(v) == id })
	return s[i]
}
