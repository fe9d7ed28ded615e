package policy

import (
	"fmt"
	"hash/fnv"
	"sort"
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// stdOrder orders targets with the standard library's FNV-1a over
// key + version, the oracle for RolloutPosition.
func stdOrder(targets []release.ReleaseTarget, versionID string) []release.ReleaseTarget {
	hash := func(t release.ReleaseTarget) uint64 {
		h := fnv.New64a()
		h.Write([]byte(t.Key() + versionID))
		return h.Sum64()
	}
	out := append([]release.ReleaseTarget(nil), targets...)
	sort.SliceStable(out, func(i, j int) bool {
		hi, hj := hash(out[i]), hash(out[j])
		if hi != hj {
			return hi < hj
		}
		return out[i].Key() < out[j].Key()
	})
	return out
}

func rolloutTargets(n int) []release.ReleaseTarget {
	var ts []release.ReleaseTarget
	for i := range n {
		ts = append(ts, release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "prod", ResourceID: fmt.Sprintf("r%d", i+1)})
	}
	return ts
}

func TestRolloutHashIsFNV1a(t *testing.T) {
	t.Parallel()
	tg := release.ReleaseTarget{DeploymentID: "d", EnvironmentID: "e", ResourceID: "r"}
	h := fnv.New64a()
	h.Write([]byte(tg.Key() + "v1"))
	require.Equal(t, h.Sum64(), RolloutHash(tg, "v1"))
}

func TestGradualRollout(t *testing.T) {
	t.Parallel()
	targets := rolloutTargets(4)
	order := stdOrder(targets, "v2")
	// inputFor returns the input for the target at order position pos.
	inputFor := func(t *testing.T, pos int) Input {
		in := setup(t)
		in.Resource.ID = order[pos].ResourceID
		in.DeploymentTargets = targets
		return in
	}
	linear := GradualRollout{RolloutType: RolloutLinear, TimeScaleInterval: 600}
	normalized := GradualRollout{RolloutType: RolloutLinearNormalized, TimeScaleInterval: 600}
	tests := []struct {
		name   string
		rule   GradualRollout
		pos    int
		mutate func(*Input)
		want   Status
		until  time.Time
	}{
		{"first position deploys at the start", linear, 0, nil, Allowed, time.Time{}},
		{"linear: position p waits p intervals", linear, 2, nil, Pending, at(20 * time.Minute)},
		{"linear: allowed once the offset passed", linear, 2, func(in *Input) { in.Now = at(20 * time.Minute) }, Allowed, time.Time{}},
		{"linear-normalized: trunc(p/n × interval)", normalized, 3, nil, Pending, at(450 * time.Second)},
		{"linear-normalized: position 1 of 4", normalized, 1, nil, Pending, at(150 * time.Second)},
		{"a target already running the version is allowed", linear, 3, func(in *Input) {
			in.SuccessfulVersion = version("v2", t0)
		}, Allowed, time.Time{}},
		{"a target with an active job for the version is allowed", linear, 3, func(in *Input) {
			in.Jobs = []JobRecord{job("j", "v2", release.JobInProgress, t0)}
		}, Allowed, time.Time{}},
		{"start is the version's creation", linear, 1, func(in *Input) {
			in.Version.CreatedAt = at(time.Hour)
		}, Pending, at(time.Hour + 10*time.Minute)},
		{"start moves to the approval time", linear, 1, func(in *Input) {
			in.ApprovalSatisfiedAt = at(2 * time.Hour)
		}, Pending, at(2*time.Hour + 10*time.Minute)},
		{"start moves to the progression time", linear, 1, func(in *Input) {
			in.ApprovalSatisfiedAt = at(time.Hour)
			in.ProgressionSatisfiedAt = at(3 * time.Hour)
		}, Pending, at(3*time.Hour + 10*time.Minute)},
		{"zero interval deploys everywhere at once", GradualRollout{RolloutType: RolloutLinear}, 3, nil, Allowed, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := inputFor(t, tt.pos)
			if tt.mutate != nil {
				tt.mutate(&in)
			}
			v := tt.rule.Evaluate(&in)
			require.Equal(t, tt.want, v.Status, v.Message)
			require.Equal(t, tt.until, v.Until, v.Message)
		})
	}
}

func TestGradualRolloutWaitsForGates(t *testing.T) {
	t.Parallel()
	in := setup(t)
	in.Resource.ID = "r1"
	in.DeploymentTargets = rolloutTargets(3)
	policies := []Policy{{ID: "p", Name: "p", Enabled: true, Rules: []Rule{
		{ID: "approve", Spec: AnyApproval{MinApprovals: 1}},
		{ID: "rollout", Spec: GradualRollout{RolloutType: RolloutLinear, TimeScaleInterval: 60}},
	}}}
	ex := Explain(policies, in)
	require.Len(t, ex, 2)
	require.Equal(t, Pending, ex[1].Status)
	require.True(t, ex[1].Until.IsZero(), "the rollout has not started while approval is pending")

	// Once approved, the rollout starts at the approval.
	in.Approvals = []release.Approval{{VersionID: "v2", EnvironmentID: "prod", User: "a", ApprovedAt: at(time.Hour)}}
	pos, _ := RolloutPosition(in.Target(), "v2", in.DeploymentTargets)
	d := Evaluate(policies, in)
	if pos == 0 {
		require.Equal(t, Pending, d.Status) // Now is before the approval time + 0
		require.Equal(t, at(time.Hour), d.Until)
	} else {
		require.Equal(t, Pending, d.Status)
		require.Equal(t, at(time.Hour+time.Duration(pos)*time.Minute), d.Until)
	}
}

// TestGradualRolloutProperty: targets become allowed in hash order and the
// allowed set only grows with Now.
func TestGradualRolloutProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "n")
		targets := rolloutTargets(n)
		versionID := rapid.StringMatching(`v[0-9a-f]{1,6}`).Draw(t, "version")
		rule := GradualRollout{
			RolloutType:       rapid.SampledFrom([]RolloutType{RolloutLinear, RolloutLinearNormalized}).Draw(t, "type"),
			TimeScaleInterval: rapid.Int64Range(0, 3600).Draw(t, "interval"),
		}
		created := t0.Add(time.Duration(rapid.IntRange(0, 1000).Draw(t, "created")) * time.Second)
		order := stdOrder(targets, versionID)
		times := rapid.SliceOfN(rapid.Int64Range(-3600, 4*3600*int64(n)), 2, 8).Draw(t, "times")
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		prev := -1
		for _, sec := range times {
			now := t0.Add(time.Duration(sec) * time.Second)
			count := 0
			for i, tg := range order {
				in := Input{Now: now, Deployment: release.Deployment{ID: tg.DeploymentID}, Environment: release.Environment{ID: tg.EnvironmentID},
					Resource: release.Resource{ID: tg.ResourceID}, Version: release.DeploymentVersion{ID: versionID, CreatedAt: created},
					DeploymentTargets: targets}
				v := rule.Evaluate(&in)
				if v.Status == Allowed {
					require.Equal(t, i, count, "allowed targets form a prefix of the hash order")
					count++
				} else {
					require.Equal(t, Pending, v.Status)
					require.True(t, v.Until.After(now), "pending until a later time")
				}
			}
			require.GreaterOrEqual(t, count, prev, "the allowed set never shrinks as Now advances")
			prev = count
		}
	})
}
