package verify

import (
	"context"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Step is the outcome of one verification pass over some metrics.
type Step struct {
	// Status aggregates the metrics (policy.AggregateVerification): none
	// without metrics, running while any needs more measurements.
	Status release.VerificationStatus
	// FailMessage is the first failed metric's message.
	FailMessage string
	// Wake is when the next measurement is due while Status is running.
	Wake time.Time
	// Changed reports that a measurement was taken (taken was modified).
	Changed bool
	// Measured lists the measurements this step took, for metrics.
	Measured []Measured
}

// Measured is one measurement a step took: its provider type and its
// outcome, one of the Outcome constants.
type Measured struct {
	Provider, Outcome string
}

// The outcomes of a measurement: the provider gave no answer (an error or
// no verifier), or the metric's verdict after it.
const (
	OutcomeError   = "error"
	OutcomePassed  = "passed"
	OutcomeFailed  = "failed"
	OutcomePending = "pending"
)

// Run takes each metric's measurements that are due at now (counted
// from start) through the verifier of its provider type, appends them to
// taken[metric name], and judges every metric (policy.EvaluateMeasurements).
// A missing verifier or a provider error is a failed measurement. The
// release chain verifies jobs with it and workflows their verification
// tasks.
func Run(ctx context.Context, verifiers map[string]ports.Verifier, clock ports.Clock, metrics []policy.MetricSpec,
	taken map[string][]release.Measurement, job *release.Job, start, now time.Time) Step {
	var step Step
	statuses := make([]release.VerificationStatus, 0, len(metrics))
	for _, m := range metrics {
		ms := taken[m.Name]
		status, msg := policy.EvaluateMeasurements(m, ms)
		if status == release.VerificationRunning || status.IsNone() {
			if due, ok := m.NextMeasurementAt(start, ms); ok && !due.After(now) {
				ms = append(ms, measure(ctx, verifiers, clock, m, job, len(ms)+1))
				taken[m.Name], step.Changed = ms, true
				status, msg = policy.EvaluateMeasurements(m, ms)
				step.Measured = append(step.Measured, Measured{Provider: m.Provider.Type, Outcome: outcome(ms[len(ms)-1], status)})
			}
		}
		if status == release.VerificationFailed && step.FailMessage == "" {
			step.FailMessage = msg
		}
		if status != release.VerificationPassed && status != release.VerificationFailed {
			status = release.VerificationRunning
			if due, ok := m.NextMeasurementAt(start, ms); ok && (step.Wake.IsZero() || due.Before(step.Wake)) {
				step.Wake = due
			}
		}
		statuses = append(statuses, status)
	}
	step.Status = policy.AggregateVerification(statuses...)
	return step
}

// outcome names a new measurement's outcome from its error and the
// metric's status after it.
func outcome(ms release.Measurement, status release.VerificationStatus) string {
	switch {
	case ms.Error != "":
		return OutcomeError
	case status == release.VerificationPassed:
		return OutcomePassed
	case status == release.VerificationFailed:
		return OutcomeFailed
	}
	return OutcomePending
}

// measure takes one measurement; a missing verifier or a provider error is
// a failed measurement.
func measure(ctx context.Context, verifiers map[string]ports.Verifier, clock ports.Clock, m policy.MetricSpec, job *release.Job, attempt int) release.Measurement {
	ms := release.Measurement{At: clock.Now()}
	v, ok := verifiers[m.Provider.Type]
	if !ok {
		ms.Error = "no verifier of type " + m.Provider.Type + " is registered"
		return ms
	}
	res, err := v.Measure(ctx, ports.MeasureRequest{Metric: m, Job: *job, Attempt: attempt})
	if err != nil {
		ms.Error = err.Error()
		return ms
	}
	ms.Result = res
	return ms
}
