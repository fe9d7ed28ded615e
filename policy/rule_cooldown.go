package policy

import (
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// VersionCooldown spaces out releases to a target. The reference version
// is the version of the target's active job, else of its latest successful
// job (Input.ActiveVersion, Input.SuccessfulVersion).
//
//   - No reference version, or the candidate is the reference: Allowed.
//   - Now is before reference.created_at + IntervalSeconds: Pending until
//     then. (The issue calls this "denied until"; it is Pending with Until
//     so the engine wakes up when the cooldown ends.)
//   - Otherwise: Allowed.
type VersionCooldown struct {
	// IntervalSeconds is the least time between the reference version's creation and the next version's release.
	IntervalSeconds int64 `json:"interval_seconds"`
}

// Type is TypeVersionCooldown.
func (VersionCooldown) Type() RuleType { return TypeVersionCooldown }

func (r VersionCooldown) validate(path string) error {
	if r.IntervalSeconds < 0 {
		return release.Invalid(release.Field(path, "interval_seconds"), "must not be negative")
	}
	return nil
}

// Evaluate applies the rule to in.
func (r VersionCooldown) Evaluate(in *Input) Verdict { return r.evaluate(in, nil) }

func (r VersionCooldown) evaluate(in *Input, _ *evalContext) Verdict {
	ref := in.ActiveVersion
	if ref == nil {
		ref = in.SuccessfulVersion
	}
	if ref == nil {
		return allowed("no deployed version to cool down from")
	}
	if ref.ID == in.Version.ID {
		return allowed("the candidate is the deployed version")
	}
	until := ref.CreatedAt.Add(time.Duration(r.IntervalSeconds) * time.Second)
	if in.Now.Before(until) {
		return pending("cooling down after version "+ref.Tag+" until "+until.UTC().Format(time.RFC3339), until)
	}
	return Verdict{Status: Allowed, Message: "cooldown elapsed", SatisfiedAt: until}
}
