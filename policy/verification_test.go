package policy

import (
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
)

func TestEvaluateMeasurements(t *testing.T) {
	t.Parallel()
	m := func(v any) Measurement { return Measurement{At: t0, Result: map[string]any{"rate": v}} }
	base := MetricSpec{Name: "errors", Provider: Provider{Type: "http"}, IntervalSeconds: 60, Count: 3, SuccessCondition: "result.rate < 0.05"}
	with := func(f func(*MetricSpec)) MetricSpec { s := base; f(&s); return s }
	tests := []struct {
		name string
		spec MetricSpec
		ms   []Measurement
		want release.VerificationStatus
	}{
		{"no measurements: running", base, nil, release.VerificationRunning},
		{"some successes: running", base, []Measurement{m(0.01), m(0.02)}, release.VerificationRunning},
		{"all count measurements succeed: passed", base, []Measurement{m(0.01), m(0.02), m(0.0)}, release.VerificationPassed},
		{"a failure over the limit: failed", base, []Measurement{m(0.01), m(0.5)}, release.VerificationFailed},
		{"failures within the limit: passed", with(func(s *MetricSpec) { s.FailureLimit = 1 }), []Measurement{m(0.5), m(0.01), m(0.02)}, release.VerificationPassed},
		{"provider error is a failure", base, []Measurement{{At: t0, Error: "timeout"}}, release.VerificationFailed},
		{"evaluation error is a failure", base, []Measurement{{At: t0, Result: map[string]any{}}}, release.VerificationFailed},
		{"failure condition marks failures", with(func(s *MetricSpec) { s.FailureCondition = "result.rate > 0.2" }), []Measurement{m(0.3)}, release.VerificationFailed},
		{"neither condition is inconclusive", with(func(s *MetricSpec) { s.FailureCondition = "result.rate > 0.2" }), []Measurement{m(0.1), m(0.1)}, release.VerificationRunning},
		{"only inconclusive at count: failed", with(func(s *MetricSpec) { s.FailureCondition = "result.rate > 0.2" }), []Measurement{m(0.1), m(0.1), m(0.1)}, release.VerificationFailed},
		{"success threshold passes early", with(func(s *MetricSpec) { s.SuccessThreshold = 2; s.FailureLimit = 1 }), []Measurement{m(0.5), m(0.01), m(0.01)}, release.VerificationPassed},
		{"success threshold needs a streak", with(func(s *MetricSpec) { s.SuccessThreshold = 2; s.FailureLimit = 2 }), []Measurement{m(0.01), m(0.5), m(0.01)}, release.VerificationFailed},
		{"measurements beyond count are ignored", base, []Measurement{m(0.01), m(0.01), m(0.01), m(0.9)}, release.VerificationPassed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, Rule{ID: "v", Spec: Verification{Metrics: []MetricSpec{tt.spec}}}.Validate())
			got, msg := EvaluateMeasurements(tt.spec, tt.ms)
			require.Equal(t, tt.want, got, msg)
			require.Contains(t, msg, "errors")
		})
	}
}

func TestNextMeasurementAt(t *testing.T) {
	t.Parallel()
	spec := MetricSpec{IntervalSeconds: 30, Count: 2}
	next, ok := spec.NextMeasurementAt(t0, nil)
	require.True(t, ok)
	require.Equal(t, t0, next)
	next, ok = spec.NextMeasurementAt(t0, []Measurement{{At: at(time.Minute)}})
	require.True(t, ok)
	require.Equal(t, at(90*time.Second), next)
	_, ok = spec.NextMeasurementAt(t0, []Measurement{{}, {}})
	require.False(t, ok)
}

func TestAggregateVerification(t *testing.T) {
	t.Parallel()
	p, r, f, n := release.VerificationPassed, release.VerificationRunning, release.VerificationFailed, release.VerificationNone
	require.Equal(t, n, AggregateVerification())
	require.Equal(t, p, AggregateVerification(p, p, n))
	require.Equal(t, r, AggregateVerification(p, r))
	require.Equal(t, f, AggregateVerification(r, f, p))
}

func TestVerificationValidation(t *testing.T) {
	t.Parallel()
	spec := MetricSpec{Name: "m", Provider: Provider{Type: "http"}, IntervalSeconds: 60, Count: 3, SuccessCondition: "result.ok =="}
	err := Rule{ID: "v", Spec: Verification{Metrics: []MetricSpec{spec}}}.Validate()
	var fe *release.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "metrics[0].success_condition", fe.Field)
	require.Equal(t, 1, fe.Line)
	require.Positive(t, fe.Column)
}
