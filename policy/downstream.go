package policy

import (
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Downstream returns the ids of the environments among envs whose
// targets of deployment d may read the jobs of environment upstream
// through an environment-progression rule: those, other than upstream and
// in d's system, where an enabled policy with such a rule may apply and
// the rule's DependsOnEnvironmentSelector may match upstream. It is what a
// job ending in upstream can change, so only their targets are woken.
//
// A selector is evaluated without the resource and the version: one that
// needs them to decide fails to evaluate, and a failure counts as "may
// match", so the answer never leaves out an environment that a target's
// own evaluation would include.
func Downstream(policies []Policy, d release.Deployment, upstream release.Environment, envs []release.Environment) []string {
	var from []int // the policies with a rule that may read upstream
	for i := range policies {
		if !policies[i].Enabled {
			continue
		}
		for _, r := range policies[i].Rules {
			if p, ok := r.Spec.(EnvironmentProgression); ok && mayMatch(p.DependsOnEnvironmentSelector, release.Subject{Environment: &upstream, Deployment: &d}) {
				from = append(from, i)
				break
			}
		}
	}
	if len(from) == 0 {
		return nil
	}
	var out []string
	for k := range envs {
		e := &envs[k]
		if e.ID == upstream.ID || e.SystemID != d.SystemID {
			continue
		}
		for _, i := range from {
			if mayMatch(policies[i].Selector, release.Subject{Environment: e, Deployment: &d}) {
				out = append(out, e.ID)
				break
			}
		}
	}
	return out
}

// mayMatch reports whether selector src may match s: it does, or it cannot
// be decided from what s binds (an error). An empty selector matches.
func mayMatch(src string, s release.Subject) bool {
	if src == "" || src == "true" {
		return true
	}
	prg, err := release.SelectorEnv.Compile(src)
	if err != nil {
		return true // the policy denies every target: waking changes nothing, but is harmless
	}
	ok, err := prg.EvalBool(s.Vars())
	return ok || err != nil
}

// Upstream returns the ids of the environments among envs that in's
// target's environment-progression rules read: those, other than the
// target's own and in its deployment's system, that the
// DependsOnEnvironmentSelector of a rule of a policy matching the target
// matches, as the rule evaluates it (environment and deployment bound; a
// selector that fails to evaluate reads none). The states of the others
// never reach a verdict, so their facts need not be read.
func Upstream(policies []Policy, in Input, envs []release.Environment) []string {
	rules, _ := MatchingRules(policies, in, TypeEnvironmentProgression)
	var out []string
	for k := range envs {
		e := &envs[k]
		if e.ID == in.Environment.ID || e.SystemID != in.Deployment.SystemID {
			continue
		}
		for _, r := range rules {
			prg, err := release.SelectorEnv.Compile(r.Spec.(EnvironmentProgression).DependsOnEnvironmentSelector)
			if err != nil {
				continue
			}
			s := release.Subject{Environment: e, Deployment: &in.Deployment}
			if ok, err := prg.EvalBool(s.Vars()); err == nil && ok {
				out = append(out, e.ID)
				break
			}
		}
	}
	return out
}

// ProgressionMayPass reports whether the state of environment upstream for
// versionID may let a target of deployment d through an
// environment-progression rule: whether a rule of an enabled policy that
// may read upstream (as Downstream decides, whatever the policies'
// selectors) passes on it, or waits only for its soak. When none does, a
// job of the version ending in upstream cannot have turned any target's
// progression verdict Allowed (nor set a soak's end), so the downstream
// environments need no wake: their targets keep their verdicts, and the
// counts in their pending reasons are brought up to date by their next
// pass. A selector that cannot be decided counts as passing.
func ProgressionMayPass(policies []Policy, d release.Deployment, upstream EnvironmentState, versionID string, now time.Time) bool {
	in := Input{Now: now, Deployment: d, Version: release.DeploymentVersion{ID: versionID}}
	for i := range policies {
		if !policies[i].Enabled {
			continue
		}
		for _, r := range policies[i].Rules {
			p, ok := r.Spec.(EnvironmentProgression)
			if !ok || !mayMatch(p.DependsOnEnvironmentSelector, release.Subject{Environment: &upstream.Environment, Deployment: &d}) {
				continue
			}
			if pass, _, next, _ := p.check(&in, &upstream); pass || !next.IsZero() {
				return true
			}
		}
	}
	return false
}
