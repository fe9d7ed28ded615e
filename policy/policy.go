package policy

import (
	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Policy is a named, prioritised set of rules applying to the release
// targets of its workspace that its selector matches.
type Policy struct {
	// ID names the policy (metadata.name in a document).
	ID string `json:"id"`
	// WorkspaceID is the workspace the policy belongs to (metadata.workspace
	// in a document), required in every write: the policy applies only to
	// the release targets of this workspace, whatever its selector matches.
	WorkspaceID string `json:"workspace_id"`
	// Name is the policy's display name.
	Name string `json:"name"`
	// Description says what the policy is for.
	Description string `json:"description,omitempty"`
	// Selector is a CEL expression over deployment, environment and
	// resource choosing the targets the policy applies to. Unlike resource
	// selectors, an empty Selector applies to EVERY target of the
	// workspace: a policy only
	// restricts, so applying it broadly is the safe default.
	Selector string `json:"selector,omitempty"`
	// Priority orders policies: higher first (ties by ID); absent is 0. Rules of the
	// same type run in policy priority order.
	Priority int `json:"priority" required:"false"`
	// Enabled policies apply; a disabled one is kept but ignored.
	Enabled bool `json:"enabled"`
	// Rules are the policy's rules, each {"id", "type", ...its fields}.
	Rules []Rule `json:"rules"`
}

// Decode strictly decodes a policy from JSON and validates it.
func Decode(data []byte) (Policy, error) {
	var p Policy
	if err := strictjson.Decode(data, &p); err != nil {
		return Policy{}, err
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// Validate reports the first invalid field as a *release.FieldError with
// its path (e.g. "rules[2].rrule") and, for CEL, the line and column. A
// policy with an invalid CEL expression or RRULE is refused, never saved
// with the rule dropped.
func (p *Policy) Validate() error {
	if err := p.validateFields(); err != nil {
		return err
	}
	return release.CheckText(p)
}

func (p *Policy) validateFields() error {
	if err := release.CheckObjectID("id", p.ID); err != nil {
		return err
	}
	if err := release.CheckObjectID("workspace_id", p.WorkspaceID); err != nil {
		return err
	}
	if p.Name == "" {
		return release.Invalid("name", "is required")
	}
	if err := release.CheckSelector("selector", p.Selector, true); err != nil {
		return err
	}
	seen := make(map[string]bool, len(p.Rules))
	for i := range p.Rules {
		path := release.Index("rules", i)
		if err := p.Rules[i].validate(path); err != nil {
			return err
		}
		if seen[p.Rules[i].ID] {
			return release.Invalid(release.Field(path, "id"), "duplicate rule id "+p.Rules[i].ID)
		}
		seen[p.Rules[i].ID] = true
	}
	return nil
}

// matches reports whether the policy applies to the target in cx: the
// target is in the policy's workspace (that of the target's resource) and
// the selector matches it. An empty selector matches every target of the
// workspace; an evaluation error is returned. A policy without a workspace
// (only ever built in code: Validate refuses one) is not limited to one.
func (p *Policy) matches(cx *evalContext) (bool, error) {
	if p.WorkspaceID != "" && p.WorkspaceID != cx.in.Resource.WorkspaceID {
		return false, nil
	}
	if p.Selector == "" || p.Selector == "true" {
		return true, nil
	}
	prg, err := release.SelectorEnv.Compile(p.Selector)
	if err != nil {
		return false, err
	}
	return cx.in.Matches.eval(prg, cx)
}
