package policy

import (
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// VersionSelector admits only versions for which Selector, a CEL expression
// over version, deployment, environment and resource, is true.
//
//   - true: Allowed.
//   - false: Denied.
//   - The expression fails to evaluate: Denied, with the error.
type VersionSelector struct {
	// Selector is the CEL condition a version must meet (over version, deployment, environment and resource).
	Selector string `json:"selector"`
}

// Type is TypeVersionSelector.
func (VersionSelector) Type() RuleType { return TypeVersionSelector }

func (r VersionSelector) validate(path string) error {
	return release.CheckSelector(release.Field(path, "selector"), r.Selector, false)
}

// Evaluate applies the rule to in.
func (r VersionSelector) Evaluate(in *Input) Verdict {
	return r.evaluate(in, &evalContext{in: *in})
}

func (r VersionSelector) evaluate(in *Input, cx *evalContext) Verdict {
	prg, err := release.SelectorEnv.Compile(r.Selector)
	if err != nil {
		return denied("version selector: " + err.Error())
	}
	ok, err := prg.EvalBool(cx.targetVars())
	if err != nil {
		return denied("version selector: " + err.Error())
	}
	if !ok {
		return denied("version " + in.Version.Tag + " does not match the version selector")
	}
	return allowed("version matches the version selector")
}
