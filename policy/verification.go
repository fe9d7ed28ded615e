package policy

import (
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/expr"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ResultEnv is the CEL environment of verification conditions: the
// variable `result` is one measurement's provider result.
var ResultEnv = expr.MustEnv("result")

// Verification describes post-deploy checks run after a job succeeds. It is
// not a gate: the verification step measures each metric and judges it with
// EvaluateMeasurements.
type Verification struct {
	// Metrics are measured after each successful job; all must pass.
	Metrics []MetricSpec `json:"metrics"`
}

// Type is TypeVerification.
func (Verification) Type() RuleType { return TypeVerification }

func (r Verification) validate(path string) error {
	if len(r.Metrics) == 0 {
		return release.Invalid(release.Field(path, "metrics"), "at least one metric is required")
	}
	seen := map[string]bool{}
	for i := range r.Metrics {
		p := release.Index(release.Field(path, "metrics"), i)
		if err := r.Metrics[i].validate(p); err != nil {
			return err
		}
		if seen[r.Metrics[i].Name] {
			return release.Invalid(release.Field(p, "name"), "duplicate metric name "+r.Metrics[i].Name)
		}
		seen[r.Metrics[i].Name] = true
	}
	return nil
}

// MetricSpec is one verification metric: measured Count times, every
// IntervalSeconds, through Provider; each result judged by the conditions.
type MetricSpec struct {
	// Name names the metric in the job's measurements.
	Name string `json:"name"`
	// Provider is where the measurements come from.
	Provider Provider `json:"provider"`
	// IntervalSeconds is the time between measurements.
	IntervalSeconds int64 `json:"interval_seconds"`
	// Count is how many measurements are taken.
	Count int `json:"count"`
	// SuccessCondition is CEL over `result`; true marks a success.
	SuccessCondition string `json:"success_condition"`
	// FailureCondition is CEL over `result`; true marks a failure. Without
	// one, a result that is not a success is a failure; with one, a result
	// that is neither is inconclusive.
	FailureCondition string `json:"failure_condition,omitempty"`
	// SuccessThreshold > 0 passes the metric early once that many
	// consecutive measurements succeed, and fails it at Count without such
	// a streak.
	SuccessThreshold int `json:"success_threshold,omitempty"`
	// FailureLimit is how many failed measurements are tolerated; one more
	// fails the metric.
	FailureLimit int `json:"failure_limit,omitempty"`
}

// Provider names a measurement source (datadog, http, terraformCloud, ...)
// and its configuration.
type Provider struct {
	// Type is the provider (datadog, prometheus, http, terraformCloud; docs/agents.md lists their configs).
	Type string `json:"type"`
	// Config is the provider's configuration.
	Config map[string]any `json:"config,omitempty"`
}

func (m *MetricSpec) validate(path string) error {
	if m.Name == "" {
		return release.Invalid(release.Field(path, "name"), "is required")
	}
	if m.Provider.Type == "" {
		return release.Invalid(release.Field(path, "provider.type"), "is required")
	}
	if m.IntervalSeconds <= 0 {
		return release.Invalid(release.Field(path, "interval_seconds"), "must be positive")
	}
	if m.Count <= 0 {
		return release.Invalid(release.Field(path, "count"), "must be positive")
	}
	if m.SuccessCondition == "" {
		return release.Invalid(release.Field(path, "success_condition"), "is required")
	}
	if err := release.CheckExpr(ResultEnv, release.Field(path, "success_condition"), m.SuccessCondition); err != nil {
		return err
	}
	if m.FailureCondition != "" {
		if err := release.CheckExpr(ResultEnv, release.Field(path, "failure_condition"), m.FailureCondition); err != nil {
			return err
		}
	}
	if m.SuccessThreshold < 0 || m.SuccessThreshold > m.Count {
		return release.Invalid(release.Field(path, "success_threshold"), "must be between 0 and count")
	}
	if m.FailureLimit < 0 {
		return release.Invalid(release.Field(path, "failure_limit"), "must not be negative")
	}
	return nil
}

// Measurement is one provider reading; jobs keep theirs (release.Job's
// Measurements), so it is the domain type.
type Measurement = release.Measurement

// outcome of one measurement.
type outcome int

const (
	outcomeInconclusive outcome = iota
	outcomeSuccess
	outcomeFailure
)

func (m *MetricSpec) judge(ms *Measurement) (outcome, string) {
	if ms.Error != "" {
		return outcomeFailure, "provider error: " + ms.Error
	}
	vars := map[string]any{"result": ms.Result}
	if m.FailureCondition != "" {
		p, err := ResultEnv.Compile(m.FailureCondition)
		if err != nil {
			return outcomeFailure, err.Error()
		}
		bad, err := p.EvalBool(vars)
		if err != nil {
			return outcomeFailure, err.Error()
		}
		if bad {
			return outcomeFailure, "failure condition met"
		}
	}
	p, err := ResultEnv.Compile(m.SuccessCondition)
	if err != nil {
		return outcomeFailure, err.Error()
	}
	ok, err := p.EvalBool(vars)
	if err != nil {
		return outcomeFailure, err.Error()
	}
	switch {
	case ok:
		return outcomeSuccess, ""
	case m.FailureCondition == "":
		return outcomeFailure, "success condition not met"
	}
	return outcomeInconclusive, ""
}

// EvaluateMeasurements judges a metric from its measurements, oldest first:
//
//   - More than FailureLimit failed measurements: failed.
//   - SuccessThreshold > 0 and the latest SuccessThreshold measurements all
//     succeeded: passed.
//   - Count measurements taken: passed when SuccessThreshold is 0 and at
//     least one measurement succeeded; failed otherwise.
//   - Otherwise: running.
//
// Measurements beyond Count are ignored.
func EvaluateMeasurements(spec MetricSpec, measurements []Measurement) (release.VerificationStatus, string) {
	if len(measurements) > spec.Count && spec.Count > 0 {
		measurements = measurements[:spec.Count]
	}
	failures, successes, streak := 0, 0, 0
	lastFailure := ""
	for i := range measurements {
		o, msg := spec.judge(&measurements[i])
		switch o {
		case outcomeFailure:
			failures++
			streak = 0
			lastFailure = msg
			if failures > spec.FailureLimit {
				return release.VerificationFailed, spec.Name + ": " + strconv.Itoa(failures) + " failed measurements (limit " +
					strconv.Itoa(spec.FailureLimit) + "); last: " + lastFailure
			}
		case outcomeSuccess:
			successes++
			streak++
			if spec.SuccessThreshold > 0 && streak >= spec.SuccessThreshold {
				return release.VerificationPassed, spec.Name + ": " + strconv.Itoa(streak) + " consecutive successful measurements"
			}
		default:
			streak = 0
		}
	}
	if len(measurements) < spec.Count {
		return release.VerificationRunning, spec.Name + ": " + strconv.Itoa(len(measurements)) + " of " + strconv.Itoa(spec.Count) + " measurements taken"
	}
	if spec.SuccessThreshold > 0 {
		return release.VerificationFailed, spec.Name + ": never reached " + strconv.Itoa(spec.SuccessThreshold) + " consecutive successes"
	}
	if successes == 0 {
		return release.VerificationFailed, spec.Name + ": no successful measurement"
	}
	return release.VerificationPassed, spec.Name + ": " + strconv.Itoa(successes) + " of " + strconv.Itoa(len(measurements)) + " measurements succeeded"
}

// NextMeasurementAt is when the next measurement is due: at start for the
// first, then IntervalSeconds after the latest. ok is false once Count
// measurements were taken.
func (m MetricSpec) NextMeasurementAt(start time.Time, measurements []Measurement) (time.Time, bool) {
	if len(measurements) >= m.Count {
		return time.Time{}, false
	}
	if len(measurements) == 0 {
		return start, true
	}
	return measurements[len(measurements)-1].At.Add(time.Duration(m.IntervalSeconds) * time.Second), true
}

// AggregateVerification merges metric statuses: failed if any failed,
// else running if any is running, else passed if any passed, else none.
func AggregateVerification(statuses ...release.VerificationStatus) release.VerificationStatus {
	out := release.VerificationNone
	for _, s := range statuses {
		switch s {
		case release.VerificationFailed:
			return release.VerificationFailed
		case release.VerificationRunning:
			out = release.VerificationRunning
		case release.VerificationPassed:
			if out == release.VerificationNone {
				out = release.VerificationPassed
			}
		}
	}
	return out
}
