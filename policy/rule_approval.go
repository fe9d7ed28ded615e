package policy

import (
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// AnyApproval requires MinApprovals approvals of the version, by distinct
// users, for the target's environment.
//
//   - MinApprovals <= 0: Allowed.
//   - At least MinApprovals distinct users approved the version for the
//     environment: Allowed, SatisfiedAt = the time of the MinApprovals-th
//     approval (each user counts once, at their earliest approval).
//   - Otherwise: Pending with no Until (a new approval re-evaluates).
type AnyApproval struct {
	// MinApprovals is how many distinct users must approve the version for the environment (0: none).
	MinApprovals int `json:"min_approvals"`
}

// Type is TypeAnyApproval.
func (AnyApproval) Type() RuleType { return TypeAnyApproval }

func (r AnyApproval) validate(path string) error {
	if r.MinApprovals < 0 {
		return release.Invalid(release.Field(path, "min_approvals"), "must not be negative")
	}
	return nil
}

// Evaluate applies the rule to in.
func (r AnyApproval) Evaluate(in *Input) Verdict { return r.evaluate(in, nil) }

func (r AnyApproval) evaluate(in *Input, _ *evalContext) Verdict {
	if r.MinApprovals <= 0 {
		return allowed("no approvals required")
	}
	var buf [16]time.Time
	times := buf[:0]
	for i := range in.Approvals {
		a := &in.Approvals[i]
		if !approvalCounts(in, a) || !firstOfUser(in, i) {
			continue
		}
		times = insertSorted(times, a.ApprovedAt)
	}
	if len(times) < r.MinApprovals {
		return pending(strconv.Itoa(len(times))+" of "+strconv.Itoa(r.MinApprovals)+" required approvals for environment "+in.Environment.Name, time.Time{})
	}
	return Verdict{Status: Allowed, Message: "required approvals received", SatisfiedAt: times[r.MinApprovals-1]}
}

func approvalCounts(in *Input, a *release.Approval) bool {
	return a.VersionID == in.Version.ID && a.EnvironmentID == in.Environment.ID && a.User != ""
}

// firstOfUser reports whether approval i is its user's earliest counting
// approval (the first in list order among equal times).
func firstOfUser(in *Input, i int) bool {
	a := &in.Approvals[i]
	for j := range in.Approvals {
		b := &in.Approvals[j]
		if j == i || b.User != a.User || !approvalCounts(in, b) {
			continue
		}
		if b.ApprovedAt.Before(a.ApprovedAt) || (b.ApprovedAt.Equal(a.ApprovedAt) && j < i) {
			return false
		}
	}
	return true
}

// insertSorted inserts t into the ascending slice ts.
func insertSorted(ts []time.Time, t time.Time) []time.Time {
	ts = append(ts, t)
	for i := len(ts) - 1; i > 0 && ts[i].Before(ts[i-1]); i-- {
		ts[i], ts[i-1] = ts[i-1], ts[i]
	}
	return ts
}
