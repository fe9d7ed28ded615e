package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestRolloutOrderIsRolloutPosition: for any list of targets (several
// deployments and environments, targets listed twice or not at all) and
// any target and version, a RolloutOrder over the list answers what
// RolloutPosition answers, also after it dropped the order of a version
// it built before the last rolloutOrderVersions; for another slice it does
// not answer, and the rule falls back.
func TestRolloutOrderIsRolloutPosition(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		target := func(label string) release.ReleaseTarget {
			return release.ReleaseTarget{
				DeploymentID:  rapid.SampledFrom([]string{"api", "web"}).Draw(rt, label+"-deployment"),
				EnvironmentID: rapid.SampledFrom([]string{"dev", "prod"}).Draw(rt, label+"-environment"),
				ResourceID:    rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g"}).Draw(rt, label+"-resource"),
			}
		}
		n := rapid.IntRange(0, 30).Draw(rt, "n")
		targets := make([]release.ReleaseTarget, n)
		for i := range targets {
			targets[i] = target("listed")
		}
		o := NewRolloutOrder(targets)
		versions := []string{"v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11"}
		for range 20 {
			q := target("query")
			version := rapid.SampledFrom(versions).Draw(rt, "version")
			pos, cnt, ok := o.position(q, version, targets)
			require.True(rt, ok)
			wantPos, wantN := RolloutPosition(q, version, targets)
			require.Equal(rt, wantPos, pos, "position of %s for %s", q, version)
			require.Equal(rt, wantN, cnt, "count for %s", q)
			require.LessOrEqual(rt, len(o.byVersion), rolloutOrderVersions, "versions kept")
		}
		if n > 0 {
			_, _, ok := o.position(targets[0], "v1", append([]release.ReleaseTarget(nil), targets...))
			require.False(rt, ok, "another slice")
		}
	})
}

// TestRolloutOrderKeepsTheVerdict: the gradual rollout rule gives the same
// verdict with and without an order, for every target of a scope.
func TestRolloutOrderKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	var targets []release.ReleaseTarget
	for _, r := range []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"} {
		targets = append(targets, release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "prod", ResourceID: r})
	}
	rule := GradualRollout{RolloutType: RolloutLinearNormalized, TimeScaleInterval: 600}
	o := NewRolloutOrder(targets)
	for _, tg := range targets {
		in := Input{Now: t0.Add(5 * time.Minute), Deployment: release.Deployment{ID: tg.DeploymentID}, Environment: release.Environment{ID: tg.EnvironmentID},
			Resource: release.Resource{ID: tg.ResourceID}, Version: release.DeploymentVersion{ID: "v1", CreatedAt: t0}, DeploymentTargets: targets}
		without := rule.Evaluate(&in)
		in.RolloutOrder = o
		require.Equal(t, without, rule.Evaluate(&in), tg.Key())
	}
}
