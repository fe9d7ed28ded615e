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

// TestGradualRolloutProperty: an environment's targets become allowed in
// hash order, whatever other environments hold, and the allowed set only
// grows with Now.
func TestGradualRolloutProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "n")
		targets := rolloutTargets(n)
		// Targets of another environment do not take positions in prod's.
		all := append([]release.ReleaseTarget(nil), targets...)
		for i := range rapid.IntRange(0, 6).Draw(t, "staging") {
			all = append(all, release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "staging", ResourceID: fmt.Sprintf("r%d", i+1)})
		}
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
					DeploymentTargets: all}
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

// TestGradualRolloutStart: the rollout starts at the latest of the
// version's creation, the approval and progression satisfaction, and the
// next opening of an allow window (closing of a deny window) that applies
// to the target; each position is offset from that start.
func TestGradualRolloutStart(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday
	hm := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	allowNine := Rule{ID: "allow", Spec: DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9", DurationMinutes: 480}}
	denyNight := Rule{ID: "deny", Spec: DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=0", DurationMinutes: 360, AllowWindow: ptr(false)}}
	denyMondayMorning := Rule{ID: "freeze", Spec: DeploymentWindow{RRule: "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9", DurationMinutes: 180, AllowWindow: ptr(false)}}
	approve := Rule{ID: "approve", Spec: AnyApproval{MinApprovals: 1}}
	rollout := Rule{ID: "roll", Spec: GradualRollout{RolloutType: RolloutLinear, TimeScaleInterval: 60}}
	targets := rolloutTargets(5)
	order := stdOrder(targets, "v2")
	tests := []struct {
		name    string
		rules   []Rule
		created time.Time
		mutate  func(*Input)
		start   time.Time
	}{
		{"no window: the version's creation", []Rule{rollout}, hm(0, 0), nil, hm(0, 0)},
		{"created before an allow window: its opening", []Rule{allowNine, rollout}, hm(0, 0), nil, hm(9, 0)},
		{"created inside an allow window: the creation", []Rule{allowNine, rollout}, hm(10, 0), nil, hm(10, 0)},
		{"created after the window closed: the next day's opening", []Rule{allowNine, rollout}, hm(18, 0), nil, hm(24+9, 0)},
		{"created inside a deny window: its closing", []Rule{denyNight, rollout}, hm(1, 0), nil, hm(6, 0)},
		{"created outside a deny window: the creation", []Rule{denyNight, rollout}, hm(7, 0), nil, hm(7, 0)},
		{"approval inside the allow window: the approval", []Rule{approve, allowNine, rollout}, hm(0, 0), func(in *Input) {
			in.Approvals = []release.Approval{{VersionID: "v2", EnvironmentID: "prod", User: "u", ApprovedAt: hm(12, 0)}}
		}, hm(12, 0)},
		{"approval after the window closed: the next opening", []Rule{approve, allowNine, rollout}, hm(0, 0), func(in *Input) {
			in.Approvals = []release.Approval{{VersionID: "v2", EnvironmentID: "prod", User: "u", ApprovedAt: hm(18, 0)}}
		}, hm(24+9, 0)},
		{"progression satisfied late: the next opening after it", []Rule{allowNine, rollout}, hm(0, 0), func(in *Input) {
			in.ProgressionSatisfiedAt = hm(20, 0)
		}, hm(24+9, 0)},
		{"an allow window and a deny window inside it: the deny window's closing", []Rule{allowNine, denyMondayMorning, rollout}, hm(0, 0), nil, hm(12, 0)},
		{"a skipped window does not move the start", []Rule{allowNine, rollout}, hm(0, 0), func(in *Input) {
			in.Skips = []release.PolicySkip{{VersionID: "v2", RuleID: "allow"}}
		}, hm(0, 0)},
		{"a first deployment ignores windows, so does its start", []Rule{allowNine, rollout}, hm(0, 0), func(in *Input) {
			in.Jobs = nil
		}, hm(0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for pos, tg := range order {
				in := setup(t)
				in.Resource.ID = tg.ResourceID
				in.DeploymentTargets = targets
				in.Version.CreatedAt = tt.created
				in.Jobs = []JobRecord{job("j0", "v1", release.JobSuccessful, tt.created.Add(-48*time.Hour))}
				if tt.mutate != nil {
					tt.mutate(&in)
				}
				policies := []Policy{pol("p", 0, tt.rules...)}
				deploysAt := tt.start.Add(time.Duration(pos) * time.Minute)
				in.Now = deploysAt.Add(-time.Second)
				ex := Explain(policies, in)
				roll := ex[len(ex)-1]
				require.Equal(t, TypeGradualRollout, roll.Type)
				require.Equal(t, Pending, roll.Status, "position %d a second before %s: %s", pos, deploysAt, roll.Message)
				require.True(t, deploysAt.Equal(roll.Until), "position %d deploys at %s, not %s", pos, deploysAt, roll.Until)
				in.Now = deploysAt
				roll = Explain(policies, in)[len(ex)-1]
				require.Equal(t, Allowed, roll.Status, "position %d at %s: %s", pos, deploysAt, roll.Message)
			}
		})
	}
}

// TestGradualRolloutWindowIssueExample: created 00:00 with a daily 09:00
// allow window, at 09:00:30 one of five targets is allowed, not all five.
func TestGradualRolloutWindowIssueExample(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	policies := []Policy{pol("p", 0,
		Rule{ID: "w", Spec: DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9", DurationMinutes: 480}},
		Rule{ID: "r", Spec: GradualRollout{RolloutType: RolloutLinear, TimeScaleInterval: 60}})}
	allowed := 0
	for _, tg := range rolloutTargets(5) {
		in := setup(t)
		in.Resource.ID = tg.ResourceID
		in.DeploymentTargets = rolloutTargets(5)
		in.Version.CreatedAt = day
		in.Jobs = []JobRecord{job("j0", "v1", release.JobSuccessful, day.Add(-48*time.Hour))}
		in.Now = day.Add(9*time.Hour + 30*time.Second)
		if Evaluate(policies, in).Status == Allowed {
			allowed++
		}
	}
	require.Equal(t, 1, allowed)
}

// TestRolloutPositionPerEnvironment: positions count only the targets of
// the target's deployment and environment.
func TestRolloutPositionPerEnvironment(t *testing.T) {
	t.Parallel()
	var targets []release.ReleaseTarget
	for i := range 4 {
		targets = append(targets, release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "staging", ResourceID: fmt.Sprintf("s%d", i)})
	}
	prod := []release.ReleaseTarget{{DeploymentID: "api", EnvironmentID: "prod", ResourceID: "p0"}, {DeploymentID: "api", EnvironmentID: "prod", ResourceID: "p1"}}
	targets = append(targets, prod...)
	targets = append(targets, release.ReleaseTarget{DeploymentID: "web", EnvironmentID: "prod", ResourceID: "p0"})
	order := stdOrder(prod, "v2")
	for want, tg := range order {
		pos, n := RolloutPosition(tg, "v2", targets)
		require.Equal(t, 2, n, "two targets in prod")
		require.Equal(t, want, pos)
	}
	rule := GradualRollout{RolloutType: RolloutLinearNormalized, TimeScaleInterval: 600}
	in := setup(t)
	in.Resource.ID = order[1].ResourceID
	in.DeploymentTargets = targets
	v := rule.Evaluate(&in)
	require.Equal(t, Pending, v.Status)
	require.Contains(t, v.Message, "position 2 of 2")
	require.Equal(t, at(300*time.Second), v.Until, "half an interval: position 1 of 2")
}
