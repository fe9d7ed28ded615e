package policy

import (
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func envState(id, system string, targets ...[]JobRecord) EnvironmentState {
	es := EnvironmentState{Environment: release.Environment{ID: id, SystemID: system, Name: id}}
	for i, jobs := range targets {
		es.Targets = append(es.Targets, TargetState{
			Target: release.ReleaseTarget{DeploymentID: "api", EnvironmentID: id, ResourceID: string(rune('a' + i))},
			Jobs:   jobs,
		})
	}
	return es
}

func jobs(js ...JobRecord) []JobRecord { return js }

func TestEnvironmentProgression(t *testing.T) {
	t.Parallel()
	ok := func(d time.Duration) JobRecord { return job("j", "v2", release.JobSuccessful, at(d)) }
	fail := func(d time.Duration) JobRecord { return job("j", "v2", release.JobFailure, at(d)) }
	staging := `environment.name == "staging"`
	tests := []struct {
		name      string
		rule      EnvironmentProgression
		envs      []EnvironmentState
		now       time.Time
		want      Status
		until     time.Time
		satisfied time.Time
	}{
		{"no environment matches: denied", EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "nope"`},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(0)))}, t0, Denied, time.Time{}, time.Time{}},
		{"the target's own environment is not upstream", EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "prod"`},
			[]EnvironmentState{envState("prod", "sys", jobs(ok(0)))}, t0, Denied, time.Time{}, time.Time{}},
		{"environments of other systems are not upstream", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "other", jobs(ok(0)))}, t0, Denied, time.Time{}, time.Time{}},
		{"selector error on every environment: denied", EnvironmentProgression{DependsOnEnvironmentSelector: `environment.metadata.missing == "x"`},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(0)))}, t0, Denied, time.Time{}, time.Time{}},
		{"upstream success allows, satisfied at the success", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(-time.Hour)))}, t0, Allowed, time.Time{}, at(-time.Hour)},
		{"upstream without targets passes", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys")}, t0, Allowed, time.Time{}, time.Time{}},
		{"upstream targets without jobs fail", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys", nil, nil)}, t0, Pending, time.Time{}, time.Time{}},
		{"jobs for another version do not count", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys", jobs(job("j", "v1", release.JobSuccessful, t0)))}, t0, Pending, time.Time{}, time.Time{}},
		{"one passing upstream is enough", EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name in ["staging", "qa"]`},
			[]EnvironmentState{envState("staging", "sys", jobs(fail(0))), envState("qa", "sys", jobs(ok(-time.Minute)))}, t0, Allowed, time.Time{}, at(-time.Minute)},
		{"earliest satisfaction among passing upstreams", EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name in ["staging", "qa"]`},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(-time.Minute))), envState("qa", "sys", jobs(ok(-time.Hour)))}, t0, Allowed, time.Time{}, at(-time.Hour)},
		{"percentage reached", EnvironmentProgression{DependsOnEnvironmentSelector: staging, MinimumSuccessPercentage: 50},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(-2*time.Minute)), jobs(fail(0)))}, t0, Allowed, time.Time{}, at(-2 * time.Minute)},
		{"percentage not reached", EnvironmentProgression{DependsOnEnvironmentSelector: staging, MinimumSuccessPercentage: 60},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(0)), jobs(fail(0)))}, t0, Pending, time.Time{}, time.Time{}},
		{"minimum 0 still needs one success", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys", jobs(fail(0)))}, t0, Pending, time.Time{}, time.Time{}},
		{"the newest completed job for the version decides", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys", jobs(fail(0), ok(-time.Hour)))}, t0, Pending, time.Time{}, time.Time{}},
		{"an active job does not hide the last completed one", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys", jobs(job("j2", "v2", release.JobInProgress, t0), ok(-time.Hour)))}, t0, Allowed, time.Time{}, at(-time.Hour)},
		{"failed verification does not count", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys", jobs(verified(ok(0), release.VerificationFailed)))}, t0, Pending, time.Time{}, time.Time{}},
		{"running verification does not count", EnvironmentProgression{DependsOnEnvironmentSelector: staging},
			[]EnvironmentState{envState("staging", "sys", jobs(verified(ok(0), release.VerificationRunning)))}, t0, Pending, time.Time{}, time.Time{}},
		{"passed verification counts", EnvironmentProgression{DependsOnEnvironmentSelector: staging, RequireVerificationPassed: true},
			[]EnvironmentState{envState("staging", "sys", jobs(verified(ok(0), release.VerificationPassed)))}, t0, Allowed, time.Time{}, t0},
		{"absent verification fails when passed is required", EnvironmentProgression{DependsOnEnvironmentSelector: staging, RequireVerificationPassed: true},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(0)))}, t0, Pending, time.Time{}, time.Time{}},
		{"custom success statuses", EnvironmentProgression{DependsOnEnvironmentSelector: staging, SuccessStatuses: []release.JobStatus{release.JobSkipped}},
			[]EnvironmentState{envState("staging", "sys", jobs(job("j", "v2", release.JobSkipped, t0)))}, t0, Allowed, time.Time{}, t0},
		{"successful is not a success when not listed", EnvironmentProgression{DependsOnEnvironmentSelector: staging, SuccessStatuses: []release.JobStatus{release.JobSkipped}},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(0)))}, t0, Pending, time.Time{}, time.Time{}},
		{"soaking: pending until the latest success plus soak", EnvironmentProgression{DependsOnEnvironmentSelector: staging, MinimumSoakTime: reconcile.Duration(time.Hour)},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(-50*time.Minute)), jobs(ok(-10*time.Minute)))}, t0, Pending, at(50 * time.Minute), time.Time{}},
		{"soaked: satisfied at the latest success plus soak", EnvironmentProgression{DependsOnEnvironmentSelector: staging, MinimumSoakTime: reconcile.Duration(time.Hour)},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(-3*time.Hour)), jobs(ok(-2*time.Hour)))}, t0, Allowed, time.Time{}, at(-time.Hour)},
		{"earliest soak end among upstreams", EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name in ["staging", "qa"]`, MinimumSoakTime: reconcile.Duration(time.Hour)},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(-10*time.Minute))), envState("qa", "sys", jobs(ok(-30*time.Minute)))}, t0, Pending, at(30 * time.Minute), time.Time{}},
		{"older than the maximum age", EnvironmentProgression{DependsOnEnvironmentSelector: staging, MaximumAge: reconcile.Duration(time.Hour)},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(-2*time.Hour)))}, t0, Pending, time.Time{}, time.Time{}},
		{"within the maximum age", EnvironmentProgression{DependsOnEnvironmentSelector: staging, MaximumAge: reconcile.Duration(time.Hour)},
			[]EnvironmentState{envState("staging", "sys", jobs(ok(-30*time.Minute)))}, t0, Allowed, time.Time{}, at(-30 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := setup(t)
			in.Now = tt.now
			in.SystemEnvironments = tt.envs
			require.NoError(t, Rule{ID: "r", Spec: tt.rule}.Validate())
			v := tt.rule.Evaluate(&in)
			require.Equal(t, tt.want, v.Status, v.Message)
			require.Equal(t, tt.until, v.Until, v.Message)
			require.Equal(t, tt.satisfied, v.SatisfiedAt, v.Message)
			require.NotEmpty(t, v.Message)
			// The same verdict from states whose counts are shared, on the
			// first evaluation and on the next, which reads the count.
			shared := make([]EnvironmentState, len(tt.envs))
			for i, es := range tt.envs {
				shared[i] = NewEnvironmentState(es.Environment, es.Targets)
			}
			in.SystemEnvironments = shared
			for range 2 {
				require.Equal(t, v, tt.rule.Evaluate(&in))
			}
			// The same verdict from the states' summaries alone.
			in.SystemEnvironments = summarized(in.Version.ID, tt.envs)
			require.Equal(t, v, tt.rule.Evaluate(&in))
		})
	}
}

// summarized is envs with each state's targets replaced by its summary
// for versionID.
func summarized(versionID string, envs []EnvironmentState) []EnvironmentState {
	out := make([]EnvironmentState, len(envs))
	for i, es := range envs {
		sum := SummarizeProgression(versionID, es.Targets)
		out[i] = EnvironmentState{Environment: es.Environment, Progression: &sum}
	}
	return out
}

// TestProgressionSummaryDecidesAsTargets: for any targets' jobs and any
// rule, an upstream state carrying only its summary decides as the state
// carrying every target; a summary of another version is ignored.
func TestProgressionSummaryDecidesAsTargets(t *testing.T) {
	t.Parallel()
	statuses := release.JobStatuses
	verifications := []release.VerificationStatus{"", release.VerificationNone, release.VerificationRunning, release.VerificationPassed, release.VerificationFailed}
	rapid.Check(t, func(rt *rapid.T) {
		var targets [][]JobRecord
		for range rapid.IntRange(0, 6).Draw(rt, "targets") {
			var js []JobRecord
			for range rapid.IntRange(0, 3).Draw(rt, "jobs") {
				j := job("j", rapid.SampledFrom([]string{"v1", "v2"}).Draw(rt, "version"), rapid.SampledFrom(statuses).Draw(rt, "status"),
					at(time.Duration(rapid.IntRange(-180, 0).Draw(rt, "minutes"))*time.Minute))
				j.Verification = rapid.SampledFrom(verifications).Draw(rt, "verification")
				js = append(js, j)
			}
			targets = append(targets, js)
		}
		rule := EnvironmentProgression{
			DependsOnEnvironmentSelector: `environment.name == "staging"`,
			MinimumSuccessPercentage:     float64(rapid.IntRange(0, 100).Draw(rt, "percentage")),
			MinimumSoakTime:              reconcile.Duration(time.Duration(rapid.IntRange(0, 120).Draw(rt, "soak")) * time.Minute),
			MaximumAge:                   reconcile.Duration(time.Duration(rapid.IntRange(0, 120).Draw(rt, "age")) * time.Minute),
			RequireVerificationPassed:    rapid.Bool().Draw(rt, "verified"),
		}
		if rapid.Bool().Draw(rt, "custom statuses") {
			rule.SuccessStatuses = []release.JobStatus{rapid.SampledFrom(statuses[4:]).Draw(rt, "success status")}
		}
		in := setup(t)
		in.Now = t0
		envs := []EnvironmentState{envState("staging", "sys", targets...)}
		in.SystemEnvironments = envs
		want := rule.Evaluate(&in)
		in.SystemEnvironments = summarized(in.Version.ID, envs)
		require.Equal(rt, want, rule.Evaluate(&in))
		other := summarized("v-other", envs)
		other[0].Targets = envs[0].Targets
		in.SystemEnvironments = other
		require.Equal(rt, want, rule.Evaluate(&in), "a summary of another version is not read")
	})
}

// TestProgressionCountsSharedPerVersionAndRule: one shared state serves
// rules that judge successes differently, and versions, each with its own
// count.
func TestProgressionCountsSharedPerVersionAndRule(t *testing.T) {
	t.Parallel()
	staging := `environment.name == "staging"`
	es := NewEnvironmentState(release.Environment{ID: "staging", SystemID: "sys", Name: "staging"}, []TargetState{
		{Target: release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "staging", ResourceID: "a"},
			Jobs: jobs(job("j1", "v2", release.JobSkipped, t0), job("j0", "v1", release.JobSuccessful, t0))},
	})
	in := setup(t)
	in.Now, in.SystemEnvironments = t0, []EnvironmentState{es}
	plain := EnvironmentProgression{DependsOnEnvironmentSelector: staging}
	skipped := EnvironmentProgression{DependsOnEnvironmentSelector: staging, SuccessStatuses: []release.JobStatus{release.JobSkipped}}
	for range 2 {
		in.Version.ID = "v2"
		require.Equal(t, Pending, plain.Evaluate(&in).Status, "v2 was skipped, not successful")
		require.Equal(t, Allowed, skipped.Evaluate(&in).Status, "counted apart for the other rule")
		in.Version.ID = "v1"
		require.Equal(t, Allowed, plain.Evaluate(&in).Status, "counted apart for the other version")
		require.Equal(t, Pending, skipped.Evaluate(&in).Status)
	}
}

// TestProgressionMayPass: a job's end in an upstream environment needs a
// downstream wake only when a progression rule reading it passes on its
// state, or waits only for soak.
func TestProgressionMayPass(t *testing.T) {
	t.Parallel()
	d := release.Deployment{ID: "api", SystemID: "sys"}
	dev := release.Environment{ID: "dev", SystemID: "sys", Name: "dev"}
	after := func(pct float64, soak time.Duration) []Policy {
		return []Policy{{ID: "p", Enabled: true, Selector: `environment.name == "staging"`, Rules: []Rule{{ID: "r", Spec: EnvironmentProgression{
			DependsOnEnvironmentSelector: `environment.name == "dev"`, MinimumSuccessPercentage: pct, MinimumSoakTime: reconcile.Duration(soak)}}}}}
	}
	state := func(targets, successes int) EnvironmentState {
		sum := ProgressionSummary{VersionID: "v1", Targets: targets}
		if successes > 0 {
			sum.Outcomes = []ProgressionOutcome{{Status: release.JobSuccessful, Targets: successes, LatestAt: at(-time.Minute)}}
		}
		return EnvironmentState{Environment: dev, Progression: &sum}
	}
	disabled := after(0, 0)
	disabled[0].Enabled = false
	other := after(0, 0)
	other[0].Rules[0].Spec = EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "qa"`}
	for _, c := range []struct {
		name     string
		policies []Policy
		state    EnvironmentState
		want     bool
	}{
		{"1 of 2 under 100%: no wake", after(100, 0), state(2, 1), false},
		{"2 of 2 under 100%: wake", after(100, 0), state(2, 2), true},
		{"1 of 2 under 50%: wake", after(50, 0), state(2, 1), true},
		{"no success: no wake", after(0, 0), state(2, 0), false},
		{"soaking: wake (the soak's end)", after(100, time.Hour), state(1, 1), true},
		{"no targets upstream: wake", after(100, 0), state(0, 0), true},
		{"disabled policy: no wake", disabled, state(1, 1), false},
		{"a rule reading another environment: no wake", other, state(1, 1), false},
	} {
		require.Equal(t, c.want, ProgressionMayPass(c.policies, d, c.state, "v1", t0), c.name)
	}
}
