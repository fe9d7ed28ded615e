package verifiers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/verifiers"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// sleepReq is a Sleep request with config cfg.
func sleepReq(cfg map[string]any) ports.MeasureRequest {
	return porttest.MeasureRequestFor(verifiers.SleepType, cfg, 1)
}

// scriptReq is a Scripted request for attempt with the given results.
func scriptReq(attempt int, results ...any) ports.MeasureRequest {
	return porttest.MeasureRequestFor(verifiers.ScriptedType, map[string]any{"results": results}, attempt)
}

func TestSleepConformance(t *testing.T) {
	t.Parallel()
	porttest.Verifier(t, func(*testing.T) ports.Verifier { return verifiers.Sleep{} }, porttest.VerifierOptions{
		Measurable: []ports.MeasureRequest{
			sleepReq(map[string]any{"duration": "0s"}),
			sleepReq(map[string]any{"duration": "1ms", "result": map[string]any{"p99": 0.25, "codes": []any{200.0, 503.0}}}),
			sleepReq(map[string]any{"duration": "1ms", "result": nil}),
		},
		Failing: []ports.MeasureRequest{
			sleepReq(nil),
			sleepReq(map[string]any{"duration": "later"}),
		},
		Deterministic: true,
	})
}

func TestScriptedConformance(t *testing.T) {
	t.Parallel()
	porttest.Verifier(t, func(*testing.T) ports.Verifier { return verifiers.Scripted{} }, porttest.VerifierOptions{
		Measurable: []ports.MeasureRequest{
			scriptReq(1, map[string]any{"ok": true}),
			scriptReq(2, map[string]any{"error": "x"}, map[string]any{"rate": 0.5, "tags": []any{"a"}}),
			scriptReq(7, "first", "last"),
		},
		Failing: []ports.MeasureRequest{
			scriptReq(1, map[string]any{"error": "scripted failure"}),
			scriptReq(1),
			porttest.MeasureRequestFor(verifiers.ScriptedType, nil, 1),
		},
		Deterministic: true,
	})
}

func TestTypes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "sleep", verifiers.Sleep{}.Type())
	require.Equal(t, "scripted", verifiers.Scripted{}.Type())
}

func TestScriptedPlaysResultsInOrder(t *testing.T) {
	t.Parallel()
	results := []any{
		map[string]any{"step": 1.0},
		map[string]any{"error": "probe timed out"},
		map[string]any{"step": 3.0},
		map[string]any{"error": "not an error entry", "extra": true},
	}
	tests := []struct {
		attempt int
		want    any
		err     string
	}{
		{1, map[string]any{"step": 1.0}, ""},
		{2, nil, "probe timed out"},
		{3, map[string]any{"step": 3.0}, ""},
		{4, map[string]any{"error": "not an error entry", "extra": true}, ""},
		{5, map[string]any{"error": "not an error entry", "extra": true}, ""},
		{100, map[string]any{"error": "not an error entry", "extra": true}, ""},
	}
	for _, tt := range tests {
		got, err := verifiers.Scripted{}.Measure(t.Context(), scriptReq(tt.attempt, results...))
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "attempt %d", tt.attempt)
			require.NotErrorIs(t, err, release.ErrInvalid, "a scripted failure is not a config error")
			require.Nil(t, got)
			continue
		}
		require.NoError(t, err, "attempt %d", tt.attempt)
		require.Equal(t, tt.want, got, "attempt %d", tt.attempt)
	}
}

func TestScriptedLastErrorRepeats(t *testing.T) {
	t.Parallel()
	for _, attempt := range []int{2, 3, 50} {
		_, err := verifiers.Scripted{}.Measure(t.Context(), scriptReq(attempt, "ok", map[string]any{"error": "down"}))
		require.ErrorContains(t, err, "down")
	}
}

func TestScriptedResultIsACopy(t *testing.T) {
	t.Parallel()
	entry := map[string]any{"n": 1.0}
	got, err := verifiers.Scripted{}.Measure(t.Context(), scriptReq(1, entry))
	require.NoError(t, err)
	got.(map[string]any)["n"] = 2.0
	require.Equal(t, 1.0, entry["n"], "changing a result leaves the config alone")
}

func TestBadConfigNamesTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		v     ports.Verifier
		req   ports.MeasureRequest
		field string
	}{
		{"scripted results missing", verifiers.Scripted{}, porttest.MeasureRequestFor("scripted", nil, 1), "provider.config.results"},
		{"scripted results empty", verifiers.Scripted{}, scriptReq(1), "provider.config.results"},
		{"scripted results not a list", verifiers.Scripted{}, porttest.MeasureRequestFor("scripted", map[string]any{"results": "ok"}, 1), "provider.config.results"},
		{"scripted error not a string", verifiers.Scripted{}, scriptReq(2, "ok", map[string]any{"error": 5.0}), "provider.config.results[1].error"},
		{"scripted result not JSON", verifiers.Scripted{}, scriptReq(1, func() {}), "provider.config.results[0]"},
		{"scripted attempt zero", verifiers.Scripted{}, scriptReq(0, "ok"), "attempt"},
		{"sleep duration missing", verifiers.Sleep{}, sleepReq(map[string]any{"result": 1.0}), "provider.config.duration"},
		{"sleep duration not a string", verifiers.Sleep{}, sleepReq(map[string]any{"duration": 3.0}), "provider.config.duration"},
		{"sleep duration invalid", verifiers.Sleep{}, sleepReq(map[string]any{"duration": "3 seconds"}), "provider.config.duration"},
		{"sleep duration negative", verifiers.Sleep{}, sleepReq(map[string]any{"duration": "-1s"}), "provider.config.duration"},
		{"sleep result not JSON", verifiers.Sleep{}, sleepReq(map[string]any{"duration": "0s", "result": make(chan int)}), "provider.config.result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.v.Measure(t.Context(), tt.req)
			require.ErrorIs(t, err, release.ErrInvalid)
			var fe *release.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.field, fe.Field)
			require.ErrorContains(t, err, `metric "conformance"`, "the error names the metric")
		})
	}
}

func TestSleepReturnsResult(t *testing.T) {
	t.Parallel()
	got, err := verifiers.Sleep{}.Measure(t.Context(), sleepReq(map[string]any{"duration": "1ms"}))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"ok": true}, got, "default result")

	got, err = verifiers.Sleep{}.Measure(t.Context(), sleepReq(map[string]any{"duration": "0s", "result": map[string]any{"latency_ms": 12}}))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"latency_ms": 12.0}, got, "numbers come back as float64, like any JSON")
}

func TestSleepHonoursCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := verifiers.Sleep{}.Measure(ctx, sleepReq(map[string]any{"duration": "1h"}))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, ctx.Err(), err, "Measure returns ctx.Err() itself")
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep did not return after its context was cancelled")
	}
}

func TestSleepHonoursDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	_, err := verifiers.Sleep{}.Measure(ctx, sleepReq(map[string]any{"duration": "1h"}))
	require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
}
