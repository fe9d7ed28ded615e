package policy

import (
	"iter"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Candidate is one version offered to Choose, with the facts that depend on
// the version: its approvals, policy skips and, when an environment
// progression rule applies to the target, the upstream environments' state
// for this version (Environments; nil keeps Base.SystemEnvironments).
type Candidate struct {
	Version      release.DeploymentVersion
	Approvals    []release.Approval
	Skips        []release.PolicySkip
	Environments []EnvironmentState
}

// Input is base with c's per-version fields.
func (c *Candidate) Input(base Input) Input {
	base.Version, base.Approvals, base.Skips = c.Version, c.Approvals, c.Skips
	if c.Environments != nil {
		base.SystemEnvironments = c.Environments
	}
	return base
}

// ChooseParams is the input of Choose besides the candidates.
type ChooseParams struct {
	// Policies are every stored policy; Evaluate keeps the enabled ones
	// whose selector matches the target.
	Policies []Policy
	// Base is the target's Input without the per-version fields (Version,
	// Approvals, Skips, and SystemEnvironments when a candidate carries
	// them), which Choose fills from each candidate (Candidate.Input).
	Base Input
	// Exclude names versions never to choose for this target, with the
	// reason (a version whose job there triggered a rollback).
	Exclude map[string]string
}

// MaxChoiceReasons caps Choice.Reasons: the newest versions' reasons are
// the useful ones.
const MaxChoiceReasons = 5

// Choice is what Choose found.
type Choice struct {
	// Version is the newest version every rule allows; nil when none does.
	Version *release.DeploymentVersion `json:"version,omitempty"`
	// Reasons say why the newest versions examined were passed over,
	// newest first, at most MaxChoiceReasons ("v3: approvals: 0 of 1
	// approvals in prod").
	Reasons []string `json:"reasons,omitempty"`
	// NextCheckAt is the earliest time a pending verdict of a version newer
	// than the chosen one may change by time alone; zero when only events
	// can change the choice.
	NextCheckAt time.Time `json:"next_check_at,omitzero"`
	// Examined counts the versions evaluated.
	Examined int `json:"examined"`
}

// Choose streams candidates newest first and stops at the first version
// that Evaluate allows: the desired-release decision.
//
//   - Only ready versions are candidates, and a paused version where the
//     target already runs it (its newest successful or active job is for
//     it), so a pause stops a rollout without rolling anything back;
//     building, rejected and failed versions, and paused ones elsewhere,
//     are passed over without evaluation.
//   - An excluded version is passed over with its reason.
//   - A denied or pending version is passed over; its blocking verdict is
//     kept as a reason, and a pending one's Until lowers NextCheckAt.
//   - The first allowed version is chosen and the stream is not read
//     further.
//
// The stream's first error ends the choice and is returned. Choose does no
// I/O of its own: what the stream yields is all it reads.
func Choose(p ChooseParams, candidates iter.Seq2[Candidate, error]) (Choice, error) {
	var out Choice
	reason := func(v *release.DeploymentVersion, msg string) {
		if len(out.Reasons) < MaxChoiceReasons {
			out.Reasons = append(out.Reasons, v.Tag+": "+msg)
		}
	}
	for c, err := range candidates {
		if err != nil {
			return Choice{}, err
		}
		v := &c.Version
		in := c.Input(p.Base)
		if !in.IsCandidate() {
			reason(v, "version is "+string(v.Status))
			continue
		}
		if why, ok := p.Exclude[v.ID]; ok {
			reason(v, why)
			continue
		}
		out.Examined++
		d := Evaluate(p.Policies, in)
		switch d.Status {
		case Allowed:
			chosen := c.Version
			out.Version = &chosen
			return out, nil
		case Pending:
			if !d.Until.IsZero() && (out.NextCheckAt.IsZero() || d.Until.Before(out.NextCheckAt)) {
				out.NextCheckAt = d.Until
			}
		}
		reason(v, blockingText(&d.Blocking))
	}
	return out, nil
}

// blockingText renders a blocking verdict as "rule: message".
func blockingText(rv *RuleVerdict) string {
	name := rv.RuleID
	if name == "" {
		name = string(rv.Type)
	}
	if name == "" {
		name = "policy " + rv.PolicyID
	}
	return name + " " + string(rv.Status) + ": " + rv.Message
}
