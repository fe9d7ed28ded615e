package policy

import "time"

// Status is a rule's or a decision's outcome.
type Status string

// The outcomes. The zero Status is not a valid outcome.
const (
	// Allowed: the rule lets the version deploy now.
	Allowed Status = "allowed"
	// Pending: not yet; the verdict may change with time (see
	// Verdict.Until) or with new facts (an approval, a finished job).
	Pending Status = "pending"
	// Denied: the rule refuses the version; time alone will not change it.
	Denied Status = "denied"
)

// Verdict is one rule's answer for one input.
type Verdict struct {
	Status Status `json:"status"`
	// Message says why, for humans.
	Message string `json:"message"`
	// Until is, for Pending, the earliest time the verdict may change by
	// the passage of time alone; zero when only an event can change it.
	Until time.Time `json:"until,omitzero"`
	// SatisfiedAt is, for Allowed, when the rule became satisfied (used as
	// the gradual rollout's start); zero when unknown or always.
	SatisfiedAt time.Time `json:"satisfied_at,omitzero"`
}

// RuleVerdict is a verdict with the rule it came from.
type RuleVerdict struct {
	PolicyID string   `json:"policy_id"`
	RuleID   string   `json:"rule_id,omitempty"`
	Type     RuleType `json:"type,omitempty"`
	// Skipped is set when a policy skip waived the rule.
	Skipped bool `json:"skipped,omitempty"`
	Verdict
}

// Decision is the merged outcome of every applicable rule.
type Decision struct {
	Status Status `json:"status"`
	// Until is, when Pending, the earliest Until among the pending
	// verdicts: the time to look again (zero when only events can help).
	Until time.Time `json:"until,omitzero"`
	// Blocking is the denying rule, or the first pending one; zero when
	// Allowed.
	Blocking RuleVerdict `json:"blocking,omitzero"`
	// Evaluated counts the rules evaluated.
	Evaluated int `json:"evaluated"`
}

// timeZero is the "unknown" Until.
var timeZero time.Time

func allowed(msg string) Verdict { return Verdict{Status: Allowed, Message: msg} }

func denied(msg string) Verdict { return Verdict{Status: Denied, Message: msg} }

func pending(msg string, until time.Time) Verdict {
	return Verdict{Status: Pending, Message: msg, Until: until}
}
