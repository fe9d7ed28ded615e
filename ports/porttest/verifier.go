package porttest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
)

// VerifierOptions tells the Verifier suite how to drive one implementation.
type VerifierOptions struct {
	// Measurable are requests the verifier must answer with a result (at
	// least one). They should be quick: each is measured several times.
	Measurable []ports.MeasureRequest
	// Failing are requests the verifier must answer with an error (a bad
	// config, a scripted failure).
	Failing []ports.MeasureRequest
	// Deterministic marks a verifier whose result depends only on the
	// request: the suite then also requires equal results for equal
	// requests, and results that do not share memory between calls.
	Deterministic bool
	// Timeout bounds each measurement of the malformed requests the suite
	// makes up; default 5s.
	Timeout time.Duration
}

// Verifier is the conformance suite of ports.Verifier. newVerifier is
// called once per subtest; subtests run in parallel.
//
// It checks that Type is set; that measurable requests return JSON-like
// data (maps, slices, strings, float64, bool, nil) that encodes with
// encoding/json and survives a round trip unchanged; that failing requests
// return errors; that malformed requests (no config, wrong types, attempts
// out of range) return errors or results but never panic; and that
// concurrent Measure calls are safe (run it with -race).
func Verifier(t *testing.T, newVerifier func(t *testing.T) ports.Verifier, opts VerifierOptions) {
	t.Helper()
	require.NotEmpty(t, opts.Measurable, "VerifierOptions.Measurable needs at least one request")
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	setup := func(t *testing.T) *verifierFixture {
		t.Helper()
		t.Parallel()
		v := newVerifier(t)
		require.NotNil(t, v, "newVerifier returned nil")
		return &verifierFixture{t: t, ctx: t.Context(), opts: opts, v: v}
	}
	t.Run("TypeIsSet", func(t *testing.T) { verifierType(setup(t)) })
	t.Run("ResultsAreJSON", func(t *testing.T) { verifierResultsJSON(setup(t)) })
	t.Run("FailuresAreErrors", func(t *testing.T) { verifierFailures(setup(t)) })
	t.Run("MalformedRequestsDoNotPanic", func(t *testing.T) { verifierMalformed(setup(t)) })
	t.Run("ConcurrentMeasure", func(t *testing.T) { verifierConcurrent(setup(t)) })
}

// verifierFixture is one subtest's verifier.
type verifierFixture struct {
	t    *testing.T
	ctx  context.Context
	opts VerifierOptions
	v    ports.Verifier
}

// measure calls Measure and turns a panic into a test error (safe from any
// goroutine); ok is false when it panicked.
func (f *verifierFixture) measure(ctx context.Context, r ports.MeasureRequest) (res any, err error, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			f.t.Errorf("Measure(%s) panicked: %v\n%s", describeRequest(r), p, debug.Stack())
			ok = false
		}
	}()
	res, err = f.v.Measure(ctx, r)
	return res, err, true
}

// checkJSON reports (with Errorf) a result that is not JSON-like or does
// not survive an encoding/json round trip unchanged.
func (f *verifierFixture) checkJSON(r ports.MeasureRequest, res any) {
	if path, bad := notJSONLike("result", res); bad != "" {
		f.t.Errorf("Measure(%s): %s is %s, want JSON-like data (maps, slices, strings, float64, bool, nil)", describeRequest(r), path, bad)
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		f.t.Errorf("Measure(%s): result does not encode: %v", describeRequest(r), err)
		return
	}
	var back any
	if err := json.Unmarshal(b, &back); err != nil {
		f.t.Errorf("Measure(%s): result does not decode: %v", describeRequest(r), err)
		return
	}
	if !reflect.DeepEqual(res, back) {
		f.t.Errorf("Measure(%s): the result changes through a JSON round trip: %#v became %#v", describeRequest(r), res, back)
	}
}

func verifierType(f *verifierFixture) {
	require.NotEmpty(f.t, strings.TrimSpace(f.v.Type()), "Type must name the policy.Provider.Type served")
}

func verifierResultsJSON(f *verifierFixture) {
	for _, r := range f.opts.Measurable {
		res, err, ok := f.measure(f.ctx, r)
		require.True(f.t, ok)
		require.NoError(f.t, err, "Measure(%s)", describeRequest(r))
		f.checkJSON(r, res)
		if !f.opts.Deterministic {
			continue
		}
		// A caller changing its result changes nothing for the next one.
		want, err := json.Marshal(res)
		require.NoError(f.t, err)
		scribble(res)
		again, err, ok := f.measure(f.ctx, r)
		require.True(f.t, ok)
		require.NoError(f.t, err)
		got, err := json.Marshal(again)
		require.NoError(f.t, err)
		require.JSONEq(f.t, string(want), string(got), "Measure(%s): results share memory between calls", describeRequest(r))
	}
}

func verifierFailures(f *verifierFixture) {
	for _, r := range f.opts.Failing {
		res, err, ok := f.measure(f.ctx, r)
		require.True(f.t, ok)
		require.Error(f.t, err, "Measure(%s) returned %v, want an error", describeRequest(r), res)
		require.NotEmpty(f.t, err.Error(), "an error says what failed")
	}
}

func verifierMalformed(f *verifierFixture) {
	for _, r := range malformedRequests(append(append([]ports.MeasureRequest{}, f.opts.Measurable...), f.opts.Failing...)) {
		ctx, cancel := context.WithTimeout(f.ctx, f.opts.Timeout)
		res, err, ok := f.measure(ctx, r)
		cancel()
		if ok && err == nil {
			f.checkJSON(r, res)
		}
	}
}

func verifierConcurrent(f *verifierFixture) {
	const n = 8
	reqs := f.opts.Measurable
	var want []string
	if f.opts.Deterministic {
		for _, r := range reqs {
			res, err, ok := f.measure(f.ctx, r)
			require.True(f.t, ok)
			require.NoError(f.t, err)
			b, err := json.Marshal(res)
			require.NoError(f.t, err)
			want = append(want, string(b))
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		for i, r := range reqs {
			wg.Go(func() {
				<-start
				res, err, ok := f.measure(f.ctx, r)
				if !ok {
					return
				}
				if err != nil {
					f.t.Errorf("concurrent Measure(%s): %v", describeRequest(r), err)
					return
				}
				f.checkJSON(r, res)
				if want != nil {
					if b, err := json.Marshal(res); err == nil && string(b) != want[i] {
						f.t.Errorf("concurrent Measure(%s) = %s, want %s", describeRequest(r), b, want[i])
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
}

// malformedRequests derives broken variants of the given requests: no
// config, each config key removed or set to a value of another JSON type,
// and attempts out of range.
func malformedRequests(base []ports.MeasureRequest) []ports.MeasureRequest {
	odd := []any{nil, "x", float64(-1), true, []any{}, map[string]any{}, []any{map[string]any{"error": 1}}}
	out := []ports.MeasureRequest{{}, {Attempt: 1}}
	for _, r := range base {
		for _, a := range []int{0, -1, 1 << 30} {
			v := r
			v.Attempt = a
			out = append(out, v)
		}
		v := r
		v.Metric.Provider.Config = nil
		out = append(out, v)
		for k := range r.Metric.Provider.Config {
			v := r
			v.Metric.Provider.Config = maps.Clone(r.Metric.Provider.Config)
			delete(v.Metric.Provider.Config, k)
			out = append(out, v)
			for _, x := range odd {
				v := r
				v.Metric.Provider.Config = maps.Clone(r.Metric.Provider.Config)
				v.Metric.Provider.Config[k] = x
				out = append(out, v)
			}
		}
	}
	return out
}

// notJSONLike returns the path and type of the first value in v that is
// not a JSON value as encoding/json decodes it into any.
func notJSONLike(path string, v any) (string, string) {
	switch x := v.(type) {
	case nil, string, float64, bool:
		return "", ""
	case []any:
		for i, e := range x {
			if p, bad := notJSONLike(fmt.Sprintf("%s[%d]", path, i), e); bad != "" {
				return p, bad
			}
		}
		return "", ""
	case map[string]any:
		for k, e := range x {
			if p, bad := notJSONLike(path+"."+k, e); bad != "" {
				return p, bad
			}
		}
		return "", ""
	}
	return path, fmt.Sprintf("%T", v)
}

// scribble changes a JSON-like value in place where it can: it adds a key
// to every map and overwrites every slice element.
func scribble(v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			scribble(e)
		}
		x["porttest-scribbled"] = true
	case []any:
		for i, e := range x {
			scribble(e)
			x[i] = "porttest-scribbled"
		}
	}
}

// describeRequest names a request in failure messages.
func describeRequest(r ports.MeasureRequest) string {
	cfg, err := json.Marshal(r.Metric.Provider.Config)
	if err != nil {
		cfg = []byte(fmt.Sprintf("%v", r.Metric.Provider.Config))
	}
	return fmt.Sprintf("metric %q, provider %q, config %s, attempt %d", r.Metric.Name, r.Metric.Provider.Type, cfg, r.Attempt)
}

// MeasureRequestFor builds a valid request for the given attempt of a
// metric whose provider has type providerType and the given config, for
// use in VerifierOptions.
func MeasureRequestFor(providerType string, config map[string]any, attempt int) ports.MeasureRequest {
	return ports.MeasureRequest{
		Metric: policy.MetricSpec{
			Name:             "conformance",
			Provider:         policy.Provider{Type: providerType, Config: config},
			IntervalSeconds:  1,
			Count:            3,
			SuccessCondition: "true",
		},
		Attempt: attempt,
		Job:     JobAgentDispatch("conformance", "job-1", nil).Job,
	}
}
