package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func pol(id string, priority int, rules ...Rule) Policy {
	return Policy{ID: id, Name: id, Priority: priority, Enabled: true, Rules: rules}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	approve := Rule{ID: "approve", Spec: AnyApproval{MinApprovals: 1}}
	denyTag := Rule{ID: "tag", Spec: VersionSelector{Selector: `version.tag == "nope"`}}
	cooldown := Rule{ID: "cool", Spec: VersionCooldown{IntervalSeconds: 3600}}
	rollout := Rule{ID: "roll", Spec: GradualRollout{RolloutType: RolloutLinear, TimeScaleInterval: 60}}
	tests := []struct {
		name      string
		policies  []Policy
		mutate    func(*Input)
		want      Status
		until     time.Time
		blocking  string
		evaluated int
	}{
		{"no policies allow", nil, nil, Allowed, time.Time{}, "", 0},
		{"disabled policies are ignored", []Policy{func() Policy { p := pol("p", 0, denyTag); p.Enabled = false; return p }()}, nil, Allowed, time.Time{}, "", 0},
		{"policies whose selector does not match are ignored", []Policy{func() Policy {
			p := pol("p", 0, denyTag)
			p.Selector = `environment.name == "staging"`
			return p
		}()}, nil, Allowed, time.Time{}, "", 0},
		{"a matching selector applies the policy", []Policy{func() Policy {
			p := pol("p", 0, denyTag)
			p.Selector = `environment.metadata.tier == "prod" && resource.kind == "cluster"`
			return p
		}()}, nil, Denied, time.Time{}, "tag", 1},
		{"a failing selector fails closed", []Policy{func() Policy {
			p := pol("broken", 0, approve)
			p.Selector = `resource.metadata.team == "x"`
			return p
		}()}, nil, Denied, time.Time{}, "", 0},
		{"cheapest first, stop at the first denial", []Policy{pol("p", 0, rollout, approve, denyTag)}, nil, Denied, time.Time{}, "tag", 1},
		{"pending rules keep evaluating; the first pending blocks", []Policy{pol("p", 0, approve, cooldown)}, func(in *Input) {
			in.SuccessfulVersion = version("v1", at(-30*time.Minute))
		}, Pending, at(30 * time.Minute), "cool", 2},
		{"earliest until among pending", []Policy{pol("p", 0, cooldown, rollout)}, func(in *Input) {
			in.SuccessfulVersion = version("v1", at(-30*time.Minute))
			in.DeploymentTargets = rolloutTargets(40)
			in.Resource.ID = stdOrder(rolloutTargets(40), "v2")[39].ResourceID
		}, Pending, at(30 * time.Minute), "cool", 2},
		{"all allowing", []Policy{pol("p", 0, approve, cooldown)}, func(in *Input) {
			in.Approvals = []release.Approval{{VersionID: "v2", EnvironmentID: "prod", User: "u", ApprovedAt: t0}}
		}, Allowed, time.Time{}, "", 2},
		{"a skip waives a rule", []Policy{pol("p", 0, approve)}, func(in *Input) {
			in.Skips = []release.PolicySkip{{VersionID: "v2", RuleID: "approve", EnvironmentID: "prod", ExpiresAt: at(time.Hour)}}
		}, Allowed, time.Time{}, "", 1},
		{"an expired skip does not", []Policy{pol("p", 0, approve)}, func(in *Input) {
			in.Skips = []release.PolicySkip{{VersionID: "v2", RuleID: "approve", ExpiresAt: t0}}
		}, Pending, time.Time{}, "approve", 1},
		{"a skip for another resource does not", []Policy{pol("p", 0, approve)}, func(in *Input) {
			in.Skips = []release.PolicySkip{{VersionID: "v2", RuleID: "approve", ResourceID: "r9"}}
		}, Pending, time.Time{}, "approve", 1},
		{"a skip for another version does not", []Policy{pol("p", 0, approve)}, func(in *Input) {
			in.Skips = []release.PolicySkip{{VersionID: "v1", RuleID: "approve"}}
		}, Pending, time.Time{}, "approve", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := setup(t)
			if tt.mutate != nil {
				tt.mutate(&in)
			}
			d := Evaluate(tt.policies, in)
			require.Equal(t, tt.want, d.Status, d.Blocking.Message)
			require.Equal(t, tt.until, d.Until)
			require.Equal(t, tt.blocking, d.Blocking.RuleID)
			require.Equal(t, tt.evaluated, d.Evaluated)
			if d.Status != Allowed {
				require.NotEmpty(t, d.Blocking.Message)
			}
		})
	}
}

func TestEvaluatePolicyOrder(t *testing.T) {
	t.Parallel()
	in := setup(t)
	policies := []Policy{
		pol("low", 1, Rule{ID: "low-approve", Spec: AnyApproval{MinApprovals: 1}}),
		pol("high", 10, Rule{ID: "high-approve", Spec: AnyApproval{MinApprovals: 2}}, Rule{ID: "high-tag", Spec: VersionSelector{Selector: "true"}}),
		pol("mid-b", 5, Rule{ID: "b-approve", Spec: AnyApproval{}}),
		pol("mid-a", 5, Rule{ID: "a-approve", Spec: AnyApproval{}}),
	}
	var ids []string
	for _, rv := range Explain(policies, in) {
		ids = append(ids, rv.RuleID)
	}
	require.Equal(t, []string{"high-tag", "high-approve", "a-approve", "b-approve", "low-approve"}, ids,
		"by cost, then by policy priority (higher first, ties by id)")
	d := Evaluate(policies, in)
	require.Equal(t, "high-approve", d.Blocking.RuleID)
}

func TestExplainDoesNotShortCircuit(t *testing.T) {
	t.Parallel()
	in := setup(t)
	in.Skips = []release.PolicySkip{{VersionID: "v2", RuleID: "approve"}}
	policies := []Policy{pol("p", 0,
		Rule{ID: "approve", Spec: AnyApproval{MinApprovals: 3}},
		Rule{ID: "tag", Spec: VersionSelector{Selector: "false"}},
		Rule{ID: "roll", Spec: GradualRollout{RolloutType: RolloutLinear}},
	)}
	ex := Explain(policies, in)
	require.Len(t, ex, 3)
	require.Equal(t, Denied, ex[0].Status)
	require.True(t, ex[1].Skipped)
	require.Equal(t, Allowed, ex[1].Status)
	require.Contains(t, ex[1].Message, "skipped")
	require.Equal(t, Allowed, ex[2].Status)
	require.Equal(t, Denied, Evaluate(policies, in).Status)
}

func TestEvaluateDoesNotModifyInput(t *testing.T) {
	t.Parallel()
	in := setup(t)
	in.Approvals = []release.Approval{{VersionID: "v2", EnvironmentID: "prod", User: "u", ApprovedAt: at(time.Hour)}}
	before := in
	Evaluate([]Policy{pol("p", 0, Rule{ID: "a", Spec: AnyApproval{MinApprovals: 1}}, Rule{ID: "r", Spec: GradualRollout{RolloutType: RolloutLinear}})}, in)
	require.Equal(t, before, in)
	require.True(t, in.ApprovalSatisfiedAt.IsZero())
}

// genCase generates policies and an input over a small shared vocabulary
// so rules interact.
func genCase(t *rapid.T) ([]Policy, Input) {
	ruleGens := []func(i int) Rule{
		func(i int) Rule {
			return Rule{ID: fmt.Sprint("a", i), Spec: AnyApproval{MinApprovals: rapid.IntRange(0, 3).Draw(t, "min")}}
		},
		func(i int) Rule {
			return Rule{ID: fmt.Sprint("s", i), Spec: VersionSelector{Selector: rapid.SampledFrom([]string{"true", "false", `version.tag != "x"`}).Draw(t, "sel")}}
		},
		func(i int) Rule {
			return Rule{ID: fmt.Sprint("c", i), Spec: VersionCooldown{IntervalSeconds: rapid.Int64Range(0, 7200).Draw(t, "cool")}}
		},
		func(i int) Rule {
			return Rule{ID: fmt.Sprint("w", i), Spec: DeploymentWindow{
				RRule:           rapid.SampledFrom([]string{"FREQ=DAILY;BYHOUR=9", "FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=10", "FREQ=HOURLY;INTERVAL=3"}).Draw(t, "rrule"),
				DurationMinutes: rapid.IntRange(1, 600).Draw(t, "dur"),
				Timezone:        rapid.SampledFrom([]string{"", "Europe/Berlin"}).Draw(t, "tz"),
				AllowWindow:     ptr(rapid.Bool().Draw(t, "allow")),
			}}
		},
		func(i int) Rule {
			return Rule{ID: fmt.Sprint("e", i), Spec: EnvironmentProgression{
				DependsOnEnvironmentSelector: `environment.name == "staging"`,
				MinimumSuccessPercentage:     float64(rapid.IntRange(0, 100).Draw(t, "pct")),
				MinimumSoakTime:              reconcile.Duration(time.Duration(rapid.IntRange(0, 120).Draw(t, "soak")) * time.Minute),
			}}
		},
		func(i int) Rule {
			return Rule{ID: fmt.Sprint("g", i), Spec: GradualRollout{
				RolloutType:       rapid.SampledFrom([]RolloutType{RolloutLinear, RolloutLinearNormalized}).Draw(t, "rt"),
				TimeScaleInterval: rapid.Int64Range(0, 3600).Draw(t, "iv"),
			}}
		},
		func(i int) Rule {
			return Rule{ID: fmt.Sprint("d", i), Spec: DeploymentDependency{DependsOn: DependsOn{DeploymentSelector: `deployment.slug == "db"`}}}
		},
	}
	var policies []Policy
	n := 0
	for p := range rapid.IntRange(0, 3).Draw(t, "policies") {
		pl := pol(fmt.Sprint("p", p), rapid.IntRange(0, 3).Draw(t, "prio"))
		pl.Enabled = rapid.Float64Range(0, 1).Draw(t, "enabled") < 0.8
		pl.Selector = rapid.SampledFrom([]string{"", `environment.name == "prod"`, `resource.kind == "vm"`}).Draw(t, "psel")
		pl.WorkspaceID = rapid.SampledFrom([]string{"ws", "other"}).Draw(t, "pws")
		for range rapid.IntRange(0, 4).Draw(t, "rules") {
			pl.Rules = append(pl.Rules, ruleGens[rapid.IntRange(0, len(ruleGens)-1).Draw(t, "kind")](n))
			n++
		}
		policies = append(policies, pl)
	}
	in := Input{
		Now:         t0.Add(time.Duration(rapid.IntRange(0, 14*24*60).Draw(t, "now")) * time.Minute),
		Deployment:  release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api"},
		Environment: release.Environment{ID: "prod", SystemID: "sys", Name: "prod"},
		Resource:    release.Resource{ID: fmt.Sprint("r", rapid.IntRange(0, 5).Draw(t, "res")), WorkspaceID: "ws", Kind: "cluster", Name: "c"},
		Version:     release.DeploymentVersion{ID: "v2", Tag: "2", CreatedAt: t0},
	}
	in.DeploymentTargets = rolloutTargets(6)
	for i := range rapid.IntRange(0, 3).Draw(t, "approvals") {
		in.Approvals = append(in.Approvals, release.Approval{VersionID: "v2", EnvironmentID: rapid.SampledFrom([]string{"prod", "staging"}).Draw(t, "aenv"),
			User: fmt.Sprint("u", i%2), ApprovedAt: t0.Add(time.Duration(rapid.IntRange(0, 600).Draw(t, "aat")) * time.Minute)})
	}
	if rapid.Bool().Draw(t, "deployed") {
		in.Jobs = []JobRecord{job("j1", "v1", release.JobSuccessful, t0)}
		in.SuccessfulVersion = version("v1", t0.Add(-time.Hour))
	}
	staging := envState("staging", "sys")
	for range rapid.IntRange(0, 3).Draw(t, "stagingTargets") {
		status := rapid.SampledFrom([]release.JobStatus{release.JobSuccessful, release.JobFailure, release.JobInProgress}).Draw(t, "sjob")
		staging.Targets = append(staging.Targets, TargetState{Jobs: []JobRecord{job("s", "v2", status, t0.Add(time.Duration(rapid.IntRange(0, 600).Draw(t, "sat"))*time.Minute))}})
	}
	in.SystemEnvironments = []EnvironmentState{staging}
	if rapid.Bool().Draw(t, "dep") {
		in.Dependencies = []DependencyState{{Deployment: release.Deployment{ID: "db", Slug: "db"}, Version: version("d1", t0)}}
	}
	if rapid.Bool().Draw(t, "skip") && n > 0 {
		in.Skips = []release.PolicySkip{{VersionID: "v2", RuleID: fmt.Sprint(rapid.SampledFrom([]string{"a", "s", "c", "w", "e", "g", "d"}).Draw(t, "skipKind"), rapid.IntRange(0, n-1).Draw(t, "skipRule"))}}
	}
	return policies, in
}

// TestEvaluateProperty: decisions are deterministic, and Evaluate agrees
// with the merge of Explain's verdicts.
func TestEvaluateProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		policies, in := genCase(t)
		for i := range policies {
			require.NoError(t, policies[i].Validate())
		}
		d1, d2 := Evaluate(policies, in), Evaluate(policies, in)
		require.Equal(t, d1, d2, "deterministic")
		ex := Explain(policies, in)
		require.Equal(t, ex, Explain(policies, in), "deterministic")

		// A policy of another workspace never takes part: the decision and
		// the verdicts are those of the target's workspace's policies alone.
		var own []Policy
		for _, p := range policies {
			if p.WorkspaceID == in.Resource.WorkspaceID {
				own = append(own, p)
			}
		}
		require.Equal(t, Evaluate(own, in), d1, "another workspace's policy changed the decision")
		require.Equal(t, Explain(own, in), ex, "another workspace's policy has a verdict")

		want, until := Allowed, time.Time{}
		for _, rv := range ex {
			switch rv.Status {
			case Denied:
				want = Denied
			case Pending:
				if want != Denied {
					want = Pending
				}
				if !rv.Until.IsZero() && (until.IsZero() || rv.Until.Before(until)) {
					until = rv.Until
				}
			}
		}
		require.Equal(t, want, d1.Status)
		if want == Pending {
			require.Equal(t, until, d1.Until)
			require.True(t, until.IsZero() || until.After(in.Now), "a pending verdict wakes in the future")
		}
	})
}

// TestEvaluationDoesNotCopyTheInputToTheHeap: the chain evaluates every
// target's input on every pass, so what reads no selector allocates
// nothing: the job cap and the matching rules of a type over policies
// with a "true" selector, and Evaluate over no enabled policy.
func TestEvaluationDoesNotCopyTheInputToTheHeap(t *testing.T) {
	in := setup(t)
	capped := []Policy{{ID: "p1", Name: "p1", Enabled: true, Selector: "true",
		Rules: []Rule{{ID: "cap", Spec: Concurrency{MaxActivePerEnvironment: 3}}}}}
	disabled := []Policy{{ID: "p2", Name: "p2", Selector: `environment.name == "prod"`,
		Rules: []Rule{{ID: "cap", Spec: Concurrency{MaxActivePerEnvironment: 1}}}}}
	for name, fn := range map[string]func(){
		"EnvironmentJobCap": func() {
			if EnvironmentJobCap(capped, in) != 3 {
				t.Fatal("EnvironmentJobCap: want 3")
			}
		},
		"MatchingRules": func() {
			if rules, err := MatchingRules(capped, in, TypeRollback); err != nil || len(rules) != 0 {
				t.Fatal("MatchingRules: want no rollback rule")
			}
		},
		"Evaluate, no enabled policy": func() {
			if Evaluate(disabled, in).Status != Allowed {
				t.Fatal("Evaluate: want allowed")
			}
		},
	} {
		if n := testing.AllocsPerRun(20, fn); n != 0 {
			t.Errorf("%s: %.0f allocations per run, want 0", name, n)
		}
	}
}
