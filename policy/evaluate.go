package policy

import "errors"

// maxStackPolicies is how many matching policies Evaluate tracks without a
// heap allocation.
const maxStackPolicies = 16

// Evaluate decides whether in.Version may deploy to in's target now.
//
// It merges the rules of every enabled policy whose selector matches the
// target, and runs the version gates cheapest first (VersionGates order;
// rules of one type in policy priority order). It stops at the first
// Denied verdict. Otherwise the decision is Pending if any verdict is
// Pending, with Until the earliest non-zero Until among them, and Allowed
// when all allow. A rule waived by a policy skip counts as Allowed. A policy
// whose selector fails to evaluate denies (fail closed), naming the policy.
//
// Evaluate is pure and deterministic; in is copied, so the caller's Input is
// never modified.
func Evaluate(policies []Policy, in Input) Decision {
	if !anyEnabled(policies) {
		return Decision{Status: Allowed}
	}
	cx := evalContext{in: in}
	var buf [maxStackPolicies]int
	matched, bad := matchPolicies(policies, &cx, buf[:0])
	if bad.Status == Denied {
		return Decision{Status: Denied, Blocking: bad}
	}
	dec := Decision{Status: Allowed}
	for _, t := range VersionGates {
		for _, pi := range matched {
			p := &policies[pi]
			for ri := range p.Rules {
				rule := &p.Rules[ri]
				if rule.Spec == nil || rule.Spec.Type() != t {
					continue
				}
				if !dec.merge(cx.run(p, rule)) {
					return dec
				}
			}
		}
	}
	return dec
}

// Explain evaluates every version gate of the matching policies, without
// stopping at a denial, in the order Evaluate uses: the answer to "why is
// this version not deploying?". A policy whose selector fails to evaluate
// appears as a Denied entry without a rule.
func Explain(policies []Policy, in Input) []RuleVerdict {
	cx := evalContext{in: in}
	var out []RuleVerdict
	matched, bad := matchPolicies(policies, &cx, nil)
	if bad.Status == Denied {
		out = append(out, bad)
	}
	for _, t := range VersionGates {
		for _, pi := range matched {
			p := &policies[pi]
			for ri := range p.Rules {
				rule := &p.Rules[ri]
				if rule.Spec != nil && rule.Spec.Type() == t {
					out = append(out, cx.run(p, rule))
				}
			}
		}
	}
	return out
}

// EvaluateJob decides whether a new job may be created for release
// in.ReleaseID on in's target now (job eligibility). It runs the
// concurrency rules (none: at most one active job per target) and the retry
// rules (none: MayCreateJob with no retry rule, so each release gets exactly
// one job) of the matching policies, concurrency first, and merges them as
// Evaluate does.
func EvaluateJob(policies []Policy, in Input) Decision {
	cx := evalContext{in: in}
	var buf [maxStackPolicies]int
	matched, bad := matchPolicies(policies, &cx, buf[:0])
	if bad.Status == Denied {
		return Decision{Status: Denied, Blocking: bad}
	}
	dec := Decision{Status: Allowed}
	for _, t := range JobGates {
		found := false
		for _, pi := range matched {
			p := &policies[pi]
			for ri := range p.Rules {
				rule := &p.Rules[ri]
				if rule.Spec == nil || rule.Spec.Type() != t {
					continue
				}
				found = true
				if !dec.merge(cx.run(p, rule)) {
					return dec
				}
			}
		}
		if found {
			continue
		}
		var v Verdict
		switch t {
		case TypeConcurrency:
			v = Concurrency{}.evaluate(&cx.in, &cx)
		case TypeRetry:
			v = MayCreateJob(nil, &cx.in)
		}
		if !dec.merge(RuleVerdict{Type: t, Verdict: v}) {
			return dec
		}
	}
	return dec
}

// merge folds one verdict into the decision: a denial ends it (merge
// reports false), a pending verdict makes it pending (the first one
// blocking) and lowers Until to the earliest non-zero one.
func (dec *Decision) merge(rv RuleVerdict) bool {
	dec.Evaluated++
	switch rv.Status {
	case Denied:
		dec.Status, dec.Until, dec.Blocking = Denied, timeZero, rv
		return false
	case Pending:
		if dec.Status != Pending {
			dec.Status, dec.Blocking = Pending, rv
		}
		if !rv.Until.IsZero() && (dec.Until.IsZero() || rv.Until.Before(dec.Until)) {
			dec.Until = rv.Until
		}
	}
	return true
}

// matchPolicies appends to idx the indexes of the enabled policies matching
// the target, by priority (higher first) then ID. A selector that fails to
// evaluate yields a Denied verdict naming the policy.
func matchPolicies(policies []Policy, cx *evalContext, idx []int) ([]int, RuleVerdict) {
	for i := range policies {
		p := &policies[i]
		if !p.Enabled {
			continue
		}
		ok, err := p.matches(cx)
		if err != nil {
			return nil, RuleVerdict{PolicyID: p.ID, Verdict: denied("policy " + p.Name + " selector failed: " + err.Error())}
		}
		if !ok {
			continue
		}
		idx = append(idx, i)
		for j := len(idx) - 1; j > 0 && policyBefore(&policies[idx[j]], &policies[idx[j-1]]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	return idx, RuleVerdict{}
}

// anyEnabled reports whether any of policies is enabled: with none,
// nothing is evaluated (and no evaluation context is built).
func anyEnabled(policies []Policy) bool {
	for i := range policies {
		if policies[i].Enabled {
			return true
		}
	}
	return false
}

func policyBefore(a, b *Policy) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.ID < b.ID
}

// run evaluates one rule, honouring skips, and records what approval,
// progression and window rules found for the gradual rollout.
func (cx *evalContext) run(p *Policy, rule *Rule) RuleVerdict {
	in := &cx.in
	rv := RuleVerdict{PolicyID: p.ID, RuleID: rule.ID, Type: rule.Spec.Type()}
	if skipped(in, rule.ID) {
		rv.Skipped = true
		rv.Verdict = allowed("skipped by a policy skip")
		return rv
	}
	g, ok := rule.Spec.(Gate)
	if !ok {
		rv.Verdict = allowed("not a gate")
		return rv
	}
	rv.Verdict = g.evaluate(in, cx)
	switch rv.Type {
	case TypeDeploymentWindow:
		switch w := rule.Spec.(type) {
		case DeploymentWindow:
			cx.windows = append(cx.windows, w)
		case *DeploymentWindow:
			cx.windows = append(cx.windows, *w)
		}
	case TypeAnyApproval:
		if rv.Status == Allowed {
			cx.approvalAt = later(cx.approvalAt, rv.SatisfiedAt)
		} else {
			cx.gatesBlocked = true
		}
	case TypeEnvironmentProgression:
		if rv.Status == Allowed {
			cx.progressionAt = later(cx.progressionAt, rv.SatisfiedAt)
		} else {
			cx.gatesBlocked = true
		}
	}
	return rv
}

// skipped reports whether a policy skip waives ruleID for the input's
// version and target at Now.
func skipped(in *Input, ruleID string) bool {
	if len(in.Skips) == 0 {
		return false
	}
	t := in.Target()
	for i := range in.Skips {
		if in.Skips[i].Applies(in.Version.ID, ruleID, t, in.Now) {
			return true
		}
	}
	return false
}

// MatchingRules returns the rules of type t in the enabled policies whose
// selector matches in's target, in Evaluate's order (policy priority, then
// ID, then rule order). A policy whose selector fails to evaluate is left
// out and its error returned, so callers fail closed as Evaluate does.
func MatchingRules(policies []Policy, in Input, t RuleType) ([]Rule, error) {
	cx := evalContext{in: in}
	var buf [maxStackPolicies]int
	matched, bad := matchPolicies(policies, &cx, buf[:0])
	var err error
	if bad.Status == Denied {
		err = errors.New(bad.Message)
	}
	var out []Rule
	for _, pi := range matched {
		for _, r := range policies[pi].Rules {
			if r.Spec != nil && r.Spec.Type() == t {
				out = append(out, r)
			}
		}
	}
	return out, err
}

// Matching returns the indexes of the enabled policies that take part in
// deciding in's target, in Evaluate's order: those whose selector matches,
// and those whose selector fails to evaluate (they deny).
func Matching(policies []Policy, in Input) []int {
	cx := evalContext{in: in}
	var idx []int
	for i := range policies {
		p := &policies[i]
		if !p.Enabled {
			continue
		}
		if ok, err := p.matches(&cx); !ok && err == nil {
			continue
		}
		idx = append(idx, i)
		for j := len(idx) - 1; j > 0 && policyBefore(&policies[idx[j]], &policies[idx[j-1]]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	return idx
}

// AppliesTo reports whether p's selector matches in's target (an empty
// selector matches every target), enabled or not; an evaluation error is
// returned.
func (p *Policy) AppliesTo(in Input) (bool, error) {
	return p.matches(&evalContext{in: in})
}

// HasRule reports whether any enabled policy has a rule of type t, whatever
// its selector: a cheap test of whether a caller needs to load what that
// rule reads.
func HasRule(policies []Policy, t RuleType) bool {
	for i := range policies {
		if !policies[i].Enabled {
			continue
		}
		for _, r := range policies[i].Rules {
			if r.Spec != nil && r.Spec.Type() == t {
				return true
			}
		}
	}
	return false
}

// EnvironmentJobCap is the per-environment cap on active jobs that applies
// to a new job on in's target: the smallest positive
// Concurrency.MaxActivePerEnvironment among the matching policies' rules
// that no policy skip waives, or 0 when nothing caps the environment. The
// caller enforces it where jobs are created (ports.JobCreateParams), since
// one target's evaluation cannot see concurrent creates on other targets.
func EnvironmentJobCap(policies []Policy, in Input) int {
	cx := evalContext{in: in}
	var buf [maxStackPolicies]int
	matched, _ := matchPolicies(policies, &cx, buf[:0])
	limit := 0
	for _, pi := range matched {
		for ri := range policies[pi].Rules {
			rule := &policies[pi].Rules[ri]
			c, ok := rule.Spec.(Concurrency)
			if !ok || c.MaxActivePerEnvironment <= 0 || skipped(&cx.in, rule.ID) {
				continue
			}
			if limit == 0 || c.MaxActivePerEnvironment < limit {
				limit = c.MaxActivePerEnvironment
			}
		}
	}
	return limit
}
