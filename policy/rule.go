package policy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// RuleType names a rule kind; it is the "type" field of a rule's JSON.
type RuleType string

// The rule types.
const (
	TypeVersionSelector        RuleType = "versionSelector"
	TypeVersionCooldown        RuleType = "versionCooldown"
	TypeAnyApproval            RuleType = "anyApproval"
	TypeDeploymentWindow       RuleType = "deploymentWindow"
	TypeDeploymentDependency   RuleType = "deploymentDependency"
	TypeEnvironmentProgression RuleType = "environmentProgression"
	TypeGradualRollout         RuleType = "gradualRollout"
	TypeConcurrency            RuleType = "concurrency"
	TypeRetry                  RuleType = "retry"
	TypeRollback               RuleType = "rollback"
	TypeVerification           RuleType = "verification"
)

// VersionGates lists the rule types that gate a version for a target, in
// evaluation order: cheapest first. Evaluate and Explain run them in this
// order.
var VersionGates = []RuleType{
	TypeVersionSelector, TypeVersionCooldown, TypeAnyApproval, TypeDeploymentWindow,
	TypeDeploymentDependency, TypeEnvironmentProgression, TypeGradualRollout,
}

// JobGates lists the rule types that gate creating a job for a release,
// cheapest first (EvaluateJob).
var JobGates = []RuleType{TypeConcurrency, TypeRetry}

// Cost is the relative evaluation cost of a rule type: its position in
// VersionGates or JobGates (times 10), or 0 for rules that are not gates
// (rollback, verification).
func (t RuleType) Cost() int {
	for i, g := range VersionGates {
		if g == t {
			return (i + 1) * 10
		}
	}
	for i, g := range JobGates {
		if g == t {
			return (i + 1) * 10
		}
	}
	return 0
}

// Spec is a rule's parameters; its dynamic type is one of the rule structs
// (AnyApproval, EnvironmentProgression, ...). The set is closed.
type Spec interface {
	// Type is the rule's type.
	Type() RuleType
	validate(path string) error
}

// Gate is a Spec that evaluates to a Verdict.
type Gate interface {
	Spec
	// Evaluate is the rule's pure verdict for in.
	Evaluate(in *Input) Verdict
	evaluate(in *Input, cx *evalContext) Verdict
}

// Rule is one rule of a policy: an ID (the target of policy skips) and its
// typed parameters. JSON: {"id": "...", "type": "anyApproval", ...params}.
type Rule struct {
	ID   string
	Spec Spec
}

// Type is the rule's type, or "" without a Spec.
func (r Rule) Type() RuleType {
	if r.Spec == nil {
		return ""
	}
	return r.Spec.Type()
}

type ruleHeader struct {
	ID   string   `json:"id"`
	Type RuleType `json:"type"`
}

// MarshalJSON writes {"id", "type", ...params}.
func (r Rule) MarshalJSON() ([]byte, error) {
	if r.Spec == nil {
		return nil, fmt.Errorf("rule %q has no type", r.ID)
	}
	head, err := json.Marshal(ruleHeader{ID: r.ID, Type: r.Spec.Type()})
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(r.Spec)
	if err != nil {
		return nil, fmt.Errorf("rule %q: %w", r.ID, err)
	}
	params = bytes.TrimSpace(params)
	if len(params) <= 2 { // "{}"
		return head, nil
	}
	out := make([]byte, 0, len(head)+len(params))
	out = append(out, head[:len(head)-1]...)
	out = append(out, ',')
	return append(out, params[1:]...), nil
}

// specDecoders builds, per rule type, a strict decoding target holding the
// header and the parameters, and a function extracting the Spec.
var specDecoders = map[RuleType]func() (any, func() Spec){
	TypeVersionSelector: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			VersionSelector
		}
		return &w, func() Spec { return w.VersionSelector }
	},
	TypeVersionCooldown: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			VersionCooldown
		}
		return &w, func() Spec { return w.VersionCooldown }
	},
	TypeAnyApproval: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			AnyApproval
		}
		return &w, func() Spec { return w.AnyApproval }
	},
	TypeDeploymentWindow: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			DeploymentWindow
		}
		return &w, func() Spec { return w.DeploymentWindow }
	},
	TypeDeploymentDependency: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			DeploymentDependency
		}
		return &w, func() Spec { return w.DeploymentDependency }
	},
	TypeEnvironmentProgression: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			EnvironmentProgression
		}
		return &w, func() Spec { return w.EnvironmentProgression }
	},
	TypeGradualRollout: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			GradualRollout
		}
		return &w, func() Spec { return w.GradualRollout }
	},
	TypeConcurrency: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			Concurrency
		}
		return &w, func() Spec { return w.Concurrency }
	},
	TypeRetry: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			Retry
		}
		return &w, func() Spec { return w.Retry }
	},
	TypeRollback: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			Rollback
		}
		return &w, func() Spec { return w.Rollback }
	},
	TypeVerification: func() (any, func() Spec) {
		var w struct {
			ruleHeader
			Verification
		}
		return &w, func() Spec { return w.Verification }
	},
}

// UnmarshalJSON decodes a rule strictly: the type must be known and every
// other field must be a parameter of that type. Errors name the field and
// its line and column within the rule.
func (r *Rule) UnmarshalJSON(b []byte) error {
	var head ruleHeader
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	if head.Type == "" {
		return &strictjson.Error{Path: "type", Msg: "rule type is required"}
	}
	mk, ok := specDecoders[head.Type]
	if !ok {
		return &strictjson.Error{Path: "type", Msg: fmt.Sprintf("unknown rule type %q", head.Type)}
	}
	target, spec := mk()
	if err := strictjson.Decode(b, target); err != nil {
		return err
	}
	*r = Rule{ID: head.ID, Spec: spec()}
	return nil
}

// Validate checks the rule's ID and parameters; errors are
// *release.FieldError naming the parameter.
func (r Rule) Validate() error { return r.validate("") }

func (r Rule) validate(path string) error {
	if r.ID == "" {
		return release.Invalid(release.Field(path, "id"), "is required")
	}
	if r.Spec == nil {
		return release.Invalid(release.Field(path, "type"), "is required")
	}
	if _, ok := specDecoders[r.Spec.Type()]; !ok {
		return release.Invalid(release.Field(path, "type"), "unknown rule type "+string(r.Spec.Type()))
	}
	return r.Spec.validate(path)
}
