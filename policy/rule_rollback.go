package policy

import (
	"strconv"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Rollback returns a target to its last good version when a release goes
// bad. It is not a gate; the desired-release step consults Decide.
type Rollback struct {
	// OnJobStatuses are the job statuses that trigger a rollback.
	OnJobStatuses []release.JobStatus `json:"on_job_statuses,omitempty"`
	// OnVerificationFailure triggers a rollback when verification fails.
	OnVerificationFailure bool `json:"on_verification_failure,omitempty"`
}

// Type is TypeRollback.
func (Rollback) Type() RuleType { return TypeRollback }

func (r Rollback) validate(path string) error {
	if len(r.OnJobStatuses) == 0 && !r.OnVerificationFailure {
		return release.Invalid(path, "set on_job_statuses or on_verification_failure")
	}
	for i, s := range r.OnJobStatuses {
		if !s.IsTerminal() || s == release.JobSuccessful {
			return release.Invalid(release.Index(release.Field(path, "on_job_statuses"), i), "must be a terminal, unsuccessful job status, not "+strconv.Quote(string(s)))
		}
	}
	return nil
}

// RollbackDecision is the outcome of Rollback.Decide.
type RollbackDecision struct {
	// Rollback is set when the desired version returns to VersionID.
	Rollback bool `json:"rollback"`
	// VersionID is the version to return to.
	VersionID string `json:"version_id,omitempty"`
	// FromVersionID is the version whose job triggered the rollback.
	FromVersionID string `json:"from_version_id,omitempty"`
	Reason        string `json:"reason"`
}

// Triggered reports whether job j triggers the rule.
func (r Rollback) Triggered(j *JobRecord) bool {
	if !j.Status.IsTerminal() {
		return false
	}
	if r.OnVerificationFailure && j.Verification == release.VerificationFailed {
		return true
	}
	return statusIn(j.Status, r.OnJobStatuses)
}

// Decide looks at the target's job history (newest first):
//
//   - No jobs, or the newest is still active, or it does not trigger the
//     rule: no rollback.
//   - It triggers: roll back to the version of the newest successful job
//     (whose verification did not fail) for a different version; none: no
//     rollback, with a reason.
//
// The caller should also keep the failed version from being chosen again
// for the target (Triggered on that version's newest job says so).
func (r Rollback) Decide(jobs []JobRecord) RollbackDecision {
	if len(jobs) == 0 {
		return RollbackDecision{Reason: "no jobs"}
	}
	j := &jobs[0]
	if !r.Triggered(j) {
		return RollbackDecision{Reason: "the latest job does not trigger a rollback"}
	}
	for i := 1; i < len(jobs); i++ {
		k := &jobs[i]
		if k.Status == release.JobSuccessful && k.Verification != release.VerificationFailed && k.VersionID != j.VersionID {
			return RollbackDecision{Rollback: true, VersionID: k.VersionID, FromVersionID: j.VersionID,
				Reason: "job " + j.ID + " ended " + string(j.Status) + verificationNote(j) + "; returning to the last successful version"}
		}
	}
	return RollbackDecision{FromVersionID: j.VersionID, Reason: "no earlier successful version to roll back to"}
}

func verificationNote(j *JobRecord) string {
	if j.Verification == release.VerificationFailed {
		return " with failed verification"
	}
	return ""
}
