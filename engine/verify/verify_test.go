package verify_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/verify"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// fakeVerifier answers every measurement with result or err and records
// the requests.
type fakeVerifier struct {
	result any
	err    error
	reqs   []ports.MeasureRequest
}

func (f *fakeVerifier) Type() string { return "fake" }

func (f *fakeVerifier) Measure(_ context.Context, r ports.MeasureRequest) (any, error) {
	f.reqs = append(f.reqs, r)
	return f.result, f.err
}

func metric(name, provider string, count int) policy.MetricSpec {
	return policy.MetricSpec{Name: name, Provider: policy.Provider{Type: provider}, IntervalSeconds: 60, Count: count,
		SuccessCondition: "result.ok == true"}
}

func TestRun(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	job := &release.Job{ID: "j1"}
	for _, c := range []struct {
		name        string
		verifier    *fakeVerifier
		metrics     []policy.MetricSpec
		taken       map[string][]release.Measurement
		want        release.VerificationStatus
		wantErrIn   string // a measurement error containing this
		wantChanged bool
		wantWake    time.Time
		wantReqs    int
		wantOutcome string // of the one measurement taken, if any
	}{
		{name: "no metrics", verifier: &fakeVerifier{}, want: release.VerificationNone},
		{name: "passes", verifier: &fakeVerifier{result: map[string]any{"ok": true}}, metrics: []policy.MetricSpec{metric("m", "fake", 1)},
			want: release.VerificationPassed, wantChanged: true, wantReqs: 1, wantOutcome: verify.OutcomePassed},
		{name: "first of two is running", verifier: &fakeVerifier{result: map[string]any{"ok": true}}, metrics: []policy.MetricSpec{metric("m", "fake", 2)},
			want: release.VerificationRunning, wantChanged: true, wantWake: start.Add(time.Minute), wantReqs: 1, wantOutcome: verify.OutcomePending},
		{name: "not due yet", verifier: &fakeVerifier{result: map[string]any{"ok": true}}, metrics: []policy.MetricSpec{metric("m", "fake", 2)},
			taken: map[string][]release.Measurement{"m": {{At: start.Add(-10 * time.Second), Result: map[string]any{"ok": true}}}},
			want:  release.VerificationRunning, wantWake: start.Add(50 * time.Second)},
		{name: "missing verifier fails the measurement", verifier: &fakeVerifier{}, metrics: []policy.MetricSpec{metric("m", "nope", 1)},
			want: release.VerificationFailed, wantErrIn: "no verifier of type nope", wantChanged: true, wantOutcome: verify.OutcomeError},
		{name: "provider error fails the measurement", verifier: &fakeVerifier{err: errors.New("provider down")}, metrics: []policy.MetricSpec{metric("m", "fake", 1)},
			want: release.VerificationFailed, wantErrIn: "provider down", wantChanged: true, wantReqs: 1, wantOutcome: verify.OutcomeError},
		{name: "a failed result", verifier: &fakeVerifier{result: map[string]any{"ok": false}}, metrics: []policy.MetricSpec{metric("m", "fake", 1)},
			want: release.VerificationFailed, wantChanged: true, wantReqs: 1, wantOutcome: verify.OutcomeFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			taken := c.taken
			if taken == nil {
				taken = map[string][]release.Measurement{}
			}
			step := verify.Run(t.Context(), map[string]ports.Verifier{"fake": c.verifier}, porttest.NewFakeClock(start),
				c.metrics, taken, job, start, start)
			require.Equal(t, c.want, step.Status)
			require.Equal(t, c.wantChanged, step.Changed)
			require.Equal(t, c.wantWake, step.Wake)
			require.Len(t, c.verifier.reqs, c.wantReqs)
			if c.wantOutcome == "" {
				require.Empty(t, step.Measured)
			} else {
				provider := c.metrics[0].Provider.Type
				require.Equal(t, []verify.Measured{{Provider: provider, Outcome: c.wantOutcome}}, step.Measured)
			}
			for i, r := range c.verifier.reqs {
				require.Equal(t, i+1, r.Attempt, "attempts count from 1")
				require.Equal(t, "j1", r.Job.ID)
			}
			if c.wantErrIn != "" {
				ms := taken["m"]
				require.Len(t, ms, 1)
				require.Contains(t, ms[0].Error, c.wantErrIn)
				require.NotEmpty(t, step.FailMessage)
			}
		})
	}
}
