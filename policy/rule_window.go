package policy

import (
	"errors"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// maxWindowMinutes bounds DurationMinutes (one year).
const maxWindowMinutes = 366 * 24 * 60

// DeploymentWindow restricts deployments by a recurring window: RRule (RFC
// 5545, e.g. "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH;BYHOUR=9", optionally with a
// DTSTART line; without one the rule is anchored at Monday 2001-01-01
// 00:00:00) opens a window of DurationMinutes at each occurrence, on the
// wall clock of Timezone (IANA; UTC when empty).
//
//   - The target's first deployment (no successful job yet) ignores
//     windows: Allowed.
//   - Allow window (AllowWindow true or absent): inside a window Allowed;
//     outside Pending until the next window opens; no further window:
//     Denied.
//   - Deny window (AllowWindow false): inside Pending until the window
//     (merged with overlapping ones) ends; outside Allowed.
//
// An invalid RRULE or time zone is refused by validation, never ignored.
type DeploymentWindow struct {
	// RRule is the RFC 5545 recurrence whose occurrences open a window (a DTSTART line optional).
	RRule string `json:"rrule"`
	// DurationMinutes is how long each window lasts (1 to 527040).
	DurationMinutes int `json:"duration_minutes"`
	// Timezone is the IANA zone of the recurrence's wall clock (UTC when empty).
	Timezone string `json:"timezone,omitempty"`
	// AllowWindow selects allow (true, the default) or deny semantics.
	AllowWindow *bool `json:"allow_window,omitempty"`
}

// Type is TypeDeploymentWindow.
func (DeploymentWindow) Type() RuleType { return TypeDeploymentWindow }

// IsAllow reports whether the window allows (rather than denies).
func (r DeploymentWindow) IsAllow() bool { return r.AllowWindow == nil || *r.AllowWindow }

func (r DeploymentWindow) validate(path string) error {
	if _, err := compileWindow(r.RRule, r.Timezone); err != nil {
		field := "rrule"
		var fe *errField
		if errors.As(err, &fe) {
			field = fe.field
		}
		return &release.FieldError{Field: release.Field(path, field), Msg: err.Error(), Err: err}
	}
	if r.DurationMinutes <= 0 || r.DurationMinutes > maxWindowMinutes {
		return release.Invalid(release.Field(path, "duration_minutes"), "must be between 1 and 527040 (one year)")
	}
	return nil
}

// Evaluate applies the rule to in.
func (r DeploymentWindow) Evaluate(in *Input) Verdict { return r.evaluate(in, nil) }

func (r DeploymentWindow) evaluate(in *Input, _ *evalContext) Verdict {
	if in.successfulVersionID() == "" {
		return allowed("first deployment to the target ignores deployment windows")
	}
	w, err := compileWindow(r.RRule, r.Timezone)
	if err != nil {
		return denied("deployment window: " + err.Error())
	}
	st := w.at(in.Now, time.Duration(r.DurationMinutes)*time.Minute)
	if r.IsAllow() {
		switch {
		case st.inside:
			return Verdict{Status: Allowed, Message: "inside a deployment window", SatisfiedAt: st.opened}
		case st.next.IsZero():
			return denied("the deployment window recurrence has no further occurrences")
		}
		return pending("outside the deployment window; next opens at "+st.next.UTC().Format(time.RFC3339), st.next)
	}
	if st.inside {
		return pending("inside a deny window until "+st.closes.UTC().Format(time.RFC3339), st.closes)
	}
	return allowed("outside the deny windows")
}
