// Package plan is pure: the decision diff of a configuration change. Given
// the facts of one consistent read before a change and after it (the
// objects that make release targets, and the enabled policies), Compute
// tells, for every target the change affects, whether it is created or
// removed and which gating rules start or stop applying to it.
//
// Invariants:
//   - Targets are release.ComputeTargets' and the policies that apply to a
//     target are policy.Matching's: the same functions the release chain
//     decides with, never a second implementation of the rules.
//   - A target neither created, removed nor with a rule starting or
//     stopping is left out; targets are sorted by key, rules by policy,
//     rule id, revision.
//   - Lifted lists the rules that stop applying to a target that exists
//     before and after the change, unless the same policy's rule of the
//     same id still applies (a new revision of a rule lifts nothing).
package plan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// GatingTypes are the rule types that gate a release: the ones whose
// removal from a target lets a version through that would have waited.
var GatingTypes = []policy.RuleType{
	policy.TypeAnyApproval, policy.TypeDeploymentWindow, policy.TypeEnvironmentProgression,
	policy.TypeGradualRollout, policy.TypeVerification,
}

// Policy is an enabled policy with the catalog revision it was read at.
type Policy struct {
	Policy   policy.Policy
	Revision int
}

// Facts are what decides a workspace's targets and the gates on them, as
// one consistent read.
type Facts struct {
	Systems      []release.System
	Deployments  []release.Deployment
	Environments []release.Environment
	Resources    []release.Resource
	// Policies are the enabled policies (the latest published revision of
	// each).
	Policies []Policy
}

// Rule is one gating rule of a policy revision applying to a target.
type Rule struct {
	Policy   string          `json:"policy"`
	Revision int             `json:"revision"`
	Rule     string          `json:"rule"`
	Type     policy.RuleType `json:"type"`
}

// String renders the rule as "policy/rule (type, revision N)".
func (r Rule) String() string {
	return fmt.Sprintf("%s/%s (%s, revision %d)", r.Policy, r.Rule, r.Type, r.Revision)
}

// Target is what a change does to one release target.
type Target struct {
	Target release.ReleaseTarget `json:"target"`
	// Key is Target's key, "deployment:environment:resource".
	Key string `json:"key"`
	// Created and Removed: the target appears or disappears.
	Created bool `json:"created,omitempty"`
	Removed bool `json:"removed,omitempty"`
	// Starts and Stops are the gating rules that start or stop applying.
	Starts []Rule `json:"starts,omitempty"`
	Stops  []Rule `json:"stops,omitempty"`
	// Desired is the target's desired release before and after the
	// change, when the caller decided it (a dry run: engine/gate).
	Desired *DesiredChange `json:"desired,omitempty"`
}

// Diff is what a change does to every affected target, by key.
type Diff struct {
	Targets []Target `json:"targets"`
}

// Lift is a gating rule a change takes off a target that stays.
type Lift struct {
	Target string `json:"target"`
	Rule   Rule   `json:"rule"`
}

// Lifted lists the gating rules the change takes off targets that exist
// before and after it.
func (d Diff) Lifted() []Lift {
	var out []Lift
	for _, t := range d.Targets {
		if t.Created || t.Removed {
			continue
		}
		for _, s := range t.Stops {
			if !slices.ContainsFunc(t.Starts, func(r Rule) bool { return r.Policy == s.Policy && r.Rule == s.Rule }) {
				out = append(out, Lift{Target: t.Key, Rule: s})
			}
		}
	}
	return out
}

// Compute is the diff from before to after. A selector that fails to
// evaluate is treated as the chain treats it (the resource does not
// match; a policy selector that fails applies and denies); any other
// error is returned.
func Compute(before, after Facts) (Diff, error) {
	b, err := gates(before)
	if err != nil {
		return Diff{}, fmt.Errorf("plan: before: %w", err)
	}
	a, err := gates(after)
	if err != nil {
		return Diff{}, fmt.Errorf("plan: after: %w", err)
	}
	var d Diff
	for k, bt := range b {
		at, ok := a[k]
		if !ok {
			d.Targets = append(d.Targets, Target{Target: bt.target, Key: k, Removed: true, Stops: bt.rules})
			continue
		}
		starts, stops := minus(at.rules, bt.rules), minus(bt.rules, at.rules)
		if len(starts) > 0 || len(stops) > 0 {
			d.Targets = append(d.Targets, Target{Target: bt.target, Key: k, Starts: starts, Stops: stops})
		}
	}
	for k, at := range a {
		if _, ok := b[k]; !ok {
			d.Targets = append(d.Targets, Target{Target: at.target, Key: k, Created: true, Starts: at.rules})
		}
	}
	slices.SortFunc(d.Targets, func(x, y Target) int { return cmp.Compare(x.Key, y.Key) })
	return d, nil
}

// gated is a target with the gating rules applying to it.
type gated struct {
	target release.ReleaseTarget
	rules  []Rule
}

// gates computes every target of f with its gating rules, by key.
func gates(f Facts) (map[string]gated, error) {
	targets, err := release.ComputeTargets(f.Systems, f.Deployments, f.Environments, f.Resources, release.CEL{})
	var se *release.SelectorError
	if err != nil && !errors.As(err, &se) {
		return nil, err
	}
	deps := index(f.Deployments, func(d *release.Deployment) string { return d.ID })
	envs := index(f.Environments, func(e *release.Environment) string { return e.ID })
	res := index(f.Resources, func(r *release.Resource) string { return r.ID })
	policies := make([]policy.Policy, len(f.Policies))
	for i := range f.Policies {
		policies[i] = f.Policies[i].Policy
	}
	out := make(map[string]gated, len(targets))
	for _, t := range targets {
		in := policy.Input{Deployment: *deps[t.DeploymentID], Environment: *envs[t.EnvironmentID], Resource: *res[t.ResourceID]}
		var rules []Rule
		for _, pi := range policy.Matching(policies, in) {
			p := &f.Policies[pi]
			for _, r := range p.Policy.Rules {
				if slices.Contains(GatingTypes, r.Type()) {
					rules = append(rules, Rule{Policy: p.Policy.ID, Revision: p.Revision, Rule: r.ID, Type: r.Type()})
				}
			}
		}
		slices.SortFunc(rules, compareRules)
		out[t.Key()] = gated{target: t, rules: rules}
	}
	return out, nil
}

// index maps each element of s by key, pointing into s.
func index[T any](s []T, key func(*T) string) map[string]*T {
	m := make(map[string]*T, len(s))
	for i := range s {
		m[key(&s[i])] = &s[i]
	}
	return m
}

// minus is the rules of x not in y (both sorted).
func minus(x, y []Rule) []Rule {
	var out []Rule
	for _, r := range x {
		if _, found := slices.BinarySearchFunc(y, r, compareRules); !found {
			out = append(out, r)
		}
	}
	return out
}

func compareRules(a, b Rule) int {
	return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Revision, b.Revision), cmp.Compare(a.Type, b.Type))
}
