package policy

import (
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Concurrency caps active jobs (pending, queued, inProgress,
// actionRequired).
//
//   - Active jobs of the target (Input.Jobs) >= MaxActivePerTarget
//     (default 1): Pending with no Until (a job completion re-evaluates).
//   - MaxActivePerEnvironment > 0 and Input.EnvironmentActiveJobs >= it:
//     Pending.
//   - Otherwise Allowed.
//
// Without any concurrency rule, EvaluateJob still applies the default of one
// active job per target.
type Concurrency struct {
	// MaxActivePerTarget caps the target's active jobs (default 1).
	MaxActivePerTarget int `json:"max_active_per_target,omitempty"`
	// MaxActivePerEnvironment caps the active jobs of the deployment in the environment (0: no cap).
	MaxActivePerEnvironment int `json:"max_active_per_environment,omitempty"`
}

// Type is TypeConcurrency.
func (Concurrency) Type() RuleType { return TypeConcurrency }

func (r Concurrency) validate(path string) error {
	if r.MaxActivePerTarget < 0 {
		return release.Invalid(release.Field(path, "max_active_per_target"), "must not be negative")
	}
	if r.MaxActivePerEnvironment < 0 {
		return release.Invalid(release.Field(path, "max_active_per_environment"), "must not be negative")
	}
	return nil
}

// Evaluate applies the rule to in.
func (r Concurrency) Evaluate(in *Input) Verdict { return r.evaluate(in, nil) }

func (r Concurrency) evaluate(in *Input, _ *evalContext) Verdict {
	limit := r.MaxActivePerTarget
	if limit <= 0 {
		limit = 1
	}
	active := 0
	for i := range in.Jobs {
		if in.Jobs[i].Status.IsActive() {
			active++
		}
	}
	if active >= limit {
		return pending(strconv.Itoa(active)+" active jobs on the target (limit "+strconv.Itoa(limit)+")", timeZero)
	}
	if r.MaxActivePerEnvironment > 0 && in.EnvironmentActiveJobs >= r.MaxActivePerEnvironment {
		return pending(strconv.Itoa(in.EnvironmentActiveJobs)+" active jobs in environment "+in.Environment.Name+
			" (limit "+strconv.Itoa(r.MaxActivePerEnvironment)+")", timeZero)
	}
	return allowed("under the concurrency limit")
}

// BackoffStrategy is how the retry delay grows.
type BackoffStrategy string

// The backoff strategies.
const (
	// BackoffLinear waits BackoffSeconds before every retry.
	BackoffLinear BackoffStrategy = "linear"
	// BackoffExponential waits BackoffSeconds × 2^(attempts-1).
	BackoffExponential BackoffStrategy = "exponential"
)

// DefaultRetryStatuses are the statuses retried when RetryOnStatuses is
// empty.
var DefaultRetryStatuses = []release.JobStatus{release.JobFailure, release.JobInvalidIntegration, release.JobInvalidJobAgent}

// Retry lets a release get more than one job in a row. Attempts = the
// newest-first streak of the target's jobs that are this release's
// (Input.ReleaseID) and whose status is in RetryOnStatuses (default
// DefaultRetryStatuses); a job of another release ends the streak, so a
// release wanted again after another one ran starts a fresh budget. See
// MayCreateJob.
type Retry struct {
	// MaxRetries is how many jobs may follow a release's first one.
	MaxRetries int `json:"max_retries"`
	// RetryOnStatuses are the job statuses retried (default DefaultRetryStatuses).
	RetryOnStatuses []release.JobStatus `json:"retry_on_statuses,omitempty"`
	// BackoffSeconds is the wait before a retry (0: none).
	BackoffSeconds int64 `json:"backoff_seconds,omitempty"`
	// BackoffStrategy is linear (the default) or exponential.
	BackoffStrategy BackoffStrategy `json:"backoff_strategy,omitempty"`
	// MaxBackoffSeconds caps an exponential backoff (0: no cap).
	MaxBackoffSeconds int64 `json:"max_backoff_seconds,omitempty"`
}

// Type is TypeRetry.
func (Retry) Type() RuleType { return TypeRetry }

func (r Retry) validate(path string) error {
	if r.MaxRetries < 0 {
		return release.Invalid(release.Field(path, "max_retries"), "must not be negative")
	}
	for i, s := range r.RetryOnStatuses {
		if !s.IsTerminal() {
			return release.Invalid(release.Index(release.Field(path, "retry_on_statuses"), i), "must be a terminal job status, not "+strconv.Quote(string(s)))
		}
	}
	if r.BackoffSeconds < 0 {
		return release.Invalid(release.Field(path, "backoff_seconds"), "must not be negative")
	}
	switch r.BackoffStrategy {
	case "", BackoffLinear, BackoffExponential:
	default:
		return release.Invalid(release.Field(path, "backoff_strategy"), "must be linear or exponential")
	}
	if r.MaxBackoffSeconds < 0 {
		return release.Invalid(release.Field(path, "max_backoff_seconds"), "must not be negative")
	}
	return nil
}

// Backoff is the delay before the retry that follows attempts failed jobs.
func (r Retry) Backoff(attempts int) time.Duration {
	secs := r.BackoffSeconds
	if r.BackoffStrategy == BackoffExponential && attempts > 1 {
		for i := 1; i < attempts && secs > 0 && secs < 1<<40; i++ {
			secs *= 2
		}
	}
	if r.MaxBackoffSeconds > 0 && secs > r.MaxBackoffSeconds {
		secs = r.MaxBackoffSeconds
	}
	return time.Duration(secs) * time.Second
}

// Evaluate applies the rule to in: MayCreateJob(&r, in).
func (r Retry) Evaluate(in *Input) Verdict { return MayCreateJob(&r, in) }

func (r Retry) evaluate(in *Input, _ *evalContext) Verdict { return MayCreateJob(&r, in) }

// MayCreateJob answers "may a new job be created for release
// Input.ReleaseID now?" under retry rule r (nil: no retry rule). It reads
// the release's run: the newest-first jobs of the target up to the first
// job of another release.
//
//   - The run is empty (the target has no job, or its newest job is of
//     another release): Allowed, so a release wanted again after another
//     one ran is deployed again.
//   - The run's newest job is active: Pending (no Until).
//   - It ended in a status that is not retried: Denied.
//   - No retry rule: Denied (a run has exactly one job).
//   - Attempts > MaxRetries: Denied (retries exhausted); so a run never has
//     more than MaxRetries+1 jobs.
//   - Now before the newest job's completion + Backoff(attempts): Pending
//     until then.
//   - Otherwise Allowed.
func MayCreateJob(r *Retry, in *Input) Verdict {
	var statuses []release.JobStatus
	if r != nil {
		statuses = r.RetryOnStatuses
	}
	var newest *JobRecord
	attempts := 0
	for i := range in.Jobs {
		j := &in.Jobs[i]
		if j.ReleaseID != in.ReleaseID {
			break
		}
		if newest == nil {
			newest = j
			if j.Status.IsActive() {
				return pending("job "+j.ID+" of this release is "+string(j.Status), timeZero)
			}
		}
		if !statusIn(j.Status, statuses, DefaultRetryStatuses...) {
			break
		}
		attempts++
	}
	if newest == nil {
		if len(in.Jobs) > 0 {
			return allowed("the target's newest job " + in.Jobs[0].ID + " is of another release")
		}
		return allowed("the release has no job yet")
	}
	if attempts == 0 {
		return denied("the release's job ended " + string(newest.Status) + ", which is not retried")
	}
	if r == nil {
		return denied("the release's job ended " + string(newest.Status) + " and no retry rule applies")
	}
	if attempts > r.MaxRetries {
		return denied("retries exhausted: " + strconv.Itoa(attempts) + " failed jobs, at most " + strconv.Itoa(r.MaxRetries) + " retries")
	}
	until := newest.FinishedAt().Add(r.Backoff(attempts))
	if in.Now.Before(until) {
		return pending("retry "+strconv.Itoa(attempts)+" of "+strconv.Itoa(r.MaxRetries)+" after backoff until "+until.UTC().Format(time.RFC3339), until)
	}
	return allowed("retry " + strconv.Itoa(attempts) + " of " + strconv.Itoa(r.MaxRetries))
}
