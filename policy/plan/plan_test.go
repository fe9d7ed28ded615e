package plan_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// facts is system sys with dev and prod, resource r1 and deployment web,
// and policy gate (approval on environment.name == "prod") at revision 1.
func facts() plan.Facts {
	return plan.Facts{
		Systems:     []release.System{{ID: "sys", WorkspaceID: "ws", Name: "shop"}},
		Deployments: []release.Deployment{{ID: "web", SystemID: "sys", Name: "web", Slug: "web", ResourceSelector: "true"}},
		Environments: []release.Environment{
			{ID: "dev", SystemID: "sys", Name: "dev", ResourceSelector: "true"},
			{ID: "prod", SystemID: "sys", Name: "prod", ResourceSelector: "true"},
		},
		Resources: []release.Resource{{ID: "r1", WorkspaceID: "ws", Kind: "cluster", Identifier: "k8s/r1", Name: "r1"}},
		Policies: []plan.Policy{{Revision: 1, Policy: policy.Policy{ID: "gate", Name: "gate", Selector: `environment.name == "prod"`, Enabled: true,
			Rules: []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}, {ID: "retry", Spec: policy.Retry{}}}}}},
	}
}

// TestCompute: one row per documented rule of the diff.
func TestCompute(t *testing.T) {
	approval := func(rev int) plan.Rule {
		return plan.Rule{Policy: "gate", Revision: rev, Rule: "approval", Type: policy.TypeAnyApproval}
	}
	for _, tc := range []struct {
		name    string
		change  func(f *plan.Facts)
		targets []plan.Target
		lifted  []plan.Lift
	}{
		{name: "no change: empty diff", change: func(*plan.Facts) {}},
		{name: "renaming the environment the selector reads lifts the approval",
			change:  func(f *plan.Facts) { f.Environments[1].Name = "prod " },
			targets: []plan.Target{{Key: "web:prod:r1", Stops: []plan.Rule{approval(1)}}},
			lifted:  []plan.Lift{{Target: "web:prod:r1", Rule: approval(1)}}},
		{name: "renaming dev into the selector starts the approval there",
			change:  func(f *plan.Facts) { f.Environments[0].Name = "prod" },
			targets: []plan.Target{{Key: "web:dev:r1", Starts: []plan.Rule{approval(1)}}}},
		{name: "a new revision of the same rule lifts nothing",
			change:  func(f *plan.Facts) { f.Policies[0].Revision = 2 },
			targets: []plan.Target{{Key: "web:prod:r1", Starts: []plan.Rule{approval(2)}, Stops: []plan.Rule{approval(1)}}}},
		{name: "a removed target lifts nothing",
			change:  func(f *plan.Facts) { f.Environments = f.Environments[:1] },
			targets: []plan.Target{{Key: "web:prod:r1", Removed: true, Stops: []plan.Rule{approval(1)}}}},
		{name: "a created target lists its rules",
			change: func(f *plan.Facts) {
				f.Resources = append(f.Resources, release.Resource{ID: "r2", WorkspaceID: "ws", Kind: "cluster", Identifier: "k8s/r2", Name: "r2"})
			},
			targets: []plan.Target{{Key: "web:dev:r2", Created: true}, {Key: "web:prod:r2", Created: true, Starts: []plan.Rule{approval(1)}}}},
		{name: "a disabled policy gates nothing",
			change:  func(f *plan.Facts) { f.Policies = nil },
			targets: []plan.Target{{Key: "web:prod:r1", Stops: []plan.Rule{approval(1)}}},
			lifted:  []plan.Lift{{Target: "web:prod:r1", Rule: approval(1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := facts(), facts()
			tc.change(&after)
			d, err := plan.Compute(before, after)
			require.NoError(t, err)
			for i := range d.Targets {
				d.Targets[i].Target = release.ReleaseTarget{} // compared by key
			}
			require.Equal(t, tc.targets, d.Targets)
			require.Equal(t, tc.lifted, d.Lifted())
		})
	}
}
