package policy

import (
	"fmt"
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// EnvironmentProgression requires the version to have succeeded in an
// upstream environment first.
//
//   - Upstream environments are the entries of Input.SystemEnvironments in
//     the deployment's system, other than the target's environment, that
//     match DependsOnEnvironmentSelector (CEL over `environment`, with
//     `deployment` bound too). None match: Denied.
//   - One passing upstream environment is enough: Allowed, SatisfiedAt =
//     the earliest satisfaction among passing environments.
//   - An upstream environment with no release targets passes (SatisfiedAt
//     zero). One with targets but no completed job for this version fails.
//   - An environment state carrying a ProgressionSummary of the version is
//     judged by it alone, which counts the same as its targets.
//   - A target succeeded when its newest terminal job for this version has
//     a status in SuccessStatuses (default [successful]) and verification
//     passed or was absent (passed only, with RequireVerificationPassed).
//   - Success percentage = succeeded targets / targets × 100 must reach
//     MinimumSuccessPercentage; a minimum of 0 still needs one success.
//   - MaximumAge > 0: the latest success must be at most that old.
//   - Soak: Now must be at least latest success + MinimumSoakTime; the
//     environment's SatisfiedAt is that time.
//   - No upstream passes: Pending; Until is the earliest soak end among
//     environments that only wait for soak, zero when none.
type EnvironmentProgression struct {
	// DependsOnEnvironmentSelector is CEL over `environment` (and `deployment`) choosing the upstream environments.
	DependsOnEnvironmentSelector string `json:"depends_on_environment_selector"`
	// MinimumSuccessPercentage is the share of an upstream environment's targets that must have succeeded (0 still needs one).
	MinimumSuccessPercentage float64 `json:"minimum_success_percentage,omitempty"`
	// SuccessStatuses are the job statuses that count as success (default [successful]).
	SuccessStatuses []release.JobStatus `json:"success_statuses,omitempty"`
	// MinimumSoakTime is how long after the latest upstream success the version may proceed (e.g. "30m").
	MinimumSoakTime reconcile.Duration `json:"minimum_soak_time,omitempty"`
	// MaximumAge, when set, is how old the latest upstream success may be.
	MaximumAge reconcile.Duration `json:"maximum_age,omitempty"`
	// RequireVerificationPassed counts a success only when its verification passed (not merely absent).
	RequireVerificationPassed bool `json:"require_verification_passed,omitempty"`
}

// Type is TypeEnvironmentProgression.
func (EnvironmentProgression) Type() RuleType { return TypeEnvironmentProgression }

func (r EnvironmentProgression) validate(path string) error {
	if err := release.CheckSelector(release.Field(path, "depends_on_environment_selector"), r.DependsOnEnvironmentSelector, false); err != nil {
		return err
	}
	if r.MinimumSuccessPercentage < 0 || r.MinimumSuccessPercentage > 100 {
		return release.Invalid(release.Field(path, "minimum_success_percentage"), "must be between 0 and 100")
	}
	for i, s := range r.SuccessStatuses {
		if !s.IsTerminal() {
			return release.Invalid(release.Index(release.Field(path, "success_statuses"), i), "must be a terminal job status, not "+strconv.Quote(string(s)))
		}
	}
	if r.MinimumSoakTime < 0 {
		return release.Invalid(release.Field(path, "minimum_soak_time"), "must not be negative")
	}
	if r.MaximumAge < 0 {
		return release.Invalid(release.Field(path, "maximum_age"), "must not be negative")
	}
	return nil
}

// Evaluate applies the rule to in.
func (r EnvironmentProgression) Evaluate(in *Input) Verdict { return r.evaluate(in, nil) }

func (r EnvironmentProgression) evaluate(in *Input, _ *evalContext) Verdict {
	prg, err := release.SelectorEnv.Compile(r.DependsOnEnvironmentSelector)
	if err != nil {
		return denied("environment progression: " + err.Error())
	}
	matched := 0
	passed := false
	var satisfiedAt, until time.Time
	var firstFail string
	var firstErr error
	for i := range in.SystemEnvironments {
		es := &in.SystemEnvironments[i]
		env := &es.Environment
		if env.ID == in.Environment.ID || env.SystemID != in.Deployment.SystemID {
			continue
		}
		s := release.Subject{Environment: env, Deployment: &in.Deployment}
		ok, err := prg.EvalBool(s.Vars())
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !ok {
			continue
		}
		matched++
		pass, at, next, msg := r.check(in, es)
		if pass {
			if !passed || at.Before(satisfiedAt) {
				satisfiedAt = at
			}
			passed = true
			continue
		}
		if !next.IsZero() && (until.IsZero() || next.Before(until)) {
			until = next
		}
		if firstFail == "" {
			firstFail = msg
		}
	}
	if matched == 0 {
		msg := "no environment matches the progression selector"
		if firstErr != nil {
			msg += " (" + firstErr.Error() + ")"
		}
		return denied(msg)
	}
	if passed {
		return Verdict{Status: Allowed, Message: "an upstream environment passed", SatisfiedAt: satisfiedAt}
	}
	if matched > 1 {
		firstFail += " (and " + strconv.Itoa(matched-1) + " more upstream environments not passing)"
	}
	return pending(firstFail, until)
}

// check evaluates one upstream environment: whether it passes, since when,
// and otherwise when it may pass by time alone and why not.
func (r EnvironmentProgression) check(in *Input, es *EnvironmentState) (pass bool, satisfiedAt, next time.Time, msg string) {
	total := len(es.Targets)
	var c tallied
	if sum := es.Progression; sum != nil && sum.VersionID == in.Version.ID {
		total, c = sum.Targets, r.tallySummary(sum)
	} else {
		key := tallyKey{version: in.Version.ID, statuses: fmt.Sprint(r.SuccessStatuses), requireVerification: r.RequireVerificationPassed}
		c = es.tally.count(key, func() (c tallied) {
			for i := range es.Targets {
				j := newestTerminal(es.Targets[i].Jobs, in.Version.ID)
				if j == nil || !r.succeeded(j.Status, j.Verification) {
					continue
				}
				c.successes++
				c.latest = later(c.latest, j.FinishedAt())
			}
			return c
		})
	}
	if total == 0 {
		return true, time.Time{}, time.Time{}, ""
	}
	name := es.Environment.Name
	successes, latest := c.successes, c.latest
	if successes == 0 {
		return false, time.Time{}, time.Time{}, "version " + in.Version.Tag + " has not succeeded in " + name
	}
	if float64(successes)*100 < r.MinimumSuccessPercentage*float64(total) {
		return false, time.Time{}, time.Time{}, strconv.Itoa(successes) + " of " + strconv.Itoa(total) +
			" targets succeeded in " + name + "; need " + strconv.FormatFloat(r.MinimumSuccessPercentage, 'f', -1, 64) + "%"
	}
	if r.MaximumAge > 0 && in.Now.Sub(latest) > r.MaximumAge.D() {
		return false, time.Time{}, time.Time{}, "the latest success in " + name + " is older than the maximum age " + r.MaximumAge.D().String()
	}
	soakEnd := latest.Add(r.MinimumSoakTime.D())
	if in.Now.Before(soakEnd) {
		return false, time.Time{}, soakEnd, "soaking in " + name + " until " + soakEnd.UTC().Format(time.RFC3339)
	}
	return true, soakEnd, time.Time{}, ""
}

// succeeded reports whether a newest terminal job that ended with status
// and verification counts as a success.
func (r EnvironmentProgression) succeeded(status release.JobStatus, verification release.VerificationStatus) bool {
	if !statusIn(status, r.SuccessStatuses, release.JobSuccessful) {
		return false
	}
	if verification == release.VerificationPassed {
		return true
	}
	return !r.RequireVerificationPassed && verification.IsNone()
}

// tallySummary counts the successes of a summary's outcomes and the latest
// of them: the same count as over the targets' newest terminal jobs, since
// whether a job succeeded depends only on its status and verification.
func (r EnvironmentProgression) tallySummary(sum *ProgressionSummary) (c tallied) {
	for _, o := range sum.Outcomes {
		if o.Targets <= 0 || !r.succeeded(o.Status, o.Verification) {
			continue
		}
		c.successes += o.Targets
		c.latest = later(c.latest, o.LatestAt)
	}
	return c
}

// newestTerminal is the newest terminal job for versionID in newest-first
// jobs, or nil.
func newestTerminal(jobs []JobRecord, versionID string) *JobRecord {
	for i := range jobs {
		if jobs[i].VersionID == versionID && jobs[i].Status.IsTerminal() {
			return &jobs[i]
		}
	}
	return nil
}

// statusIn reports whether s is in set, or equals def when set is empty.
func statusIn(s release.JobStatus, set []release.JobStatus, def ...release.JobStatus) bool {
	if len(set) == 0 {
		set = def
	}
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}
