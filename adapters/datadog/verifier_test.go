package datadog

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/contract"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/internal/secretdest"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

var secrets = configmap.Secrets{DefaultAPIKeyRef: "dd-api", DefaultAppKeyRef: "dd-app"}

// now is the fixed clock of the tests.
var now = time.Unix(1_800_000_000, 0)

type fixedClock struct{}

func (fixedClock) Now() time.Time { return now }

// fakeDatadog implements GET /api/v1/query: it answers each query with
// the configured rate as a series of three points.
type fakeDatadog struct {
	t      *testing.T
	mu     sync.Mutex
	rate   float64
	faults []int
	body   string // answered as is when set
	// offContract: body is outside Datadog's definition on purpose.
	offContract bool
	requests    []*http.Request
	srv         *httptest.Server
}

// newFake starts the fake behind Datadog's published definition of the
// call: each request and answer is checked against it (5xx, which Datadog
// answers on any route, excepted).
func newFake(t *testing.T, rate float64) *fakeDatadog {
	f := &fakeDatadog{t: t, rate: rate}
	c, err := contract.Load("testdata/datadog-v1.openapi.json")
	require.NoError(t, err)
	c.AllowStatus(http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable).FailOnViolations(t)
	f.srv = httptest.NewServer(c.Wrap(f))
	t.Cleanup(f.srv.Close)
	return f
}

// writeJSON answers code with body, a JSON document.
func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

func (f *fakeDatadog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
	if len(f.faults) > 0 {
		code := f.faults[0]
		f.faults = f.faults[1:]
		w.Header().Set("Retry-After", "0")
		writeJSON(w, code, `{"errors":["Rate limit exceeded"]}`)
		return
	}
	if r.Header.Get("DD-API-KEY") != "dd-api" || r.Header.Get("DD-APPLICATION-KEY") != "dd-app" {
		writeJSON(w, http.StatusForbidden, `{"errors":["Forbidden"]}`)
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if f.body != "" {
		if f.offContract {
			w.Header().Set(contract.OffContract, "a malformed answer on purpose")
		}
		writeJSON(w, http.StatusOK, f.body)
		return
	}
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status": "ok", "res_type": "time_series", "query": q.Get("query"), "from_date": 0, "to_date": 0,
		"series": []any{map[string]any{"metric": "errors", "scope": "service:web", "expression": "sum:errors{service:web}.as_rate()",
			"pointlist": []any{[]any{1.7999997e12, 0.0}, []any{1.7999998e12, f.rate}, []any{1.7999999e12, nil}}}},
	})
}

func newVerifier() *Verifier {
	return New(secrets, Options{Clock: fixedClock{}, HTTP: outbound.Options{Guard: netguard.Loopback, Backoff: time.Millisecond}})
}

// request is the measurement of query on f's site.
func (f *fakeDatadog) request(query string) ports.MeasureRequest {
	return porttest.MeasureRequestFor(Type, map[string]any{"query": query, "address": f.srv.URL}, 1)
}

func TestConformance(t *testing.T) {
	f := newFake(t, 0.002)
	porttest.Verifier(t, func(t *testing.T) ports.Verifier { return newVerifier() }, porttest.VerifierOptions{
		Measurable:    []ports.MeasureRequest{f.request("sum:errors{service:web}.as_rate()")},
		Failing:       []ports.MeasureRequest{porttest.MeasureRequestFor(Type, map[string]any{}, 1), porttest.MeasureRequestFor(Type, map[string]any{"query": "q", "address": f.srv.URL, "appKeyRef": "env:RECONCILER_SECRET_NONE"}, 1)},
		Deterministic: true,
	})
}

func TestMeasureSendsTheDocumentedRequestAndKeepsWhatWasMeasured(t *testing.T) {
	t.Parallel()
	f := newFake(t, 0.002)
	got, err := newVerifier().Measure(t.Context(), f.request("sum:errors{service:web}.as_rate()"))
	require.NoError(t, err)
	require.Len(t, f.requests, 1)
	r := f.requests[0]
	require.Equal(t, http.MethodGet, r.Method)
	require.Equal(t, "/api/v1/query", r.URL.Path)
	require.Equal(t, map[string][]string{"from": {"1799999700"}, "to": {"1800000000"}, "query": {"sum:errors{service:web}.as_rate()"}}, map[string][]string(r.URL.Query()))
	require.Equal(t, map[string]any{
		"query": "sum:errors{service:web}.as_rate()", "from": 1799999700.0, "to": 1800000000.0, "value": 0.002,
		"series": []any{map[string]any{"metric": "errors", "scope": "service:web", "expression": "sum:errors{service:web}.as_rate()",
			"points": []any{[]any{1.7999997e12, 0.0}, []any{1.7999998e12, 0.002}, []any{1.7999999e12, nil}}}},
	}, got)
}

func TestConditionsJudgeTheResult(t *testing.T) {
	t.Parallel()
	spec := policy.MetricSpec{Name: "error-rate", Count: 1, SuccessCondition: "result.value < 0.01",
		Provider: policy.Provider{Type: Type}}
	for rate, want := range map[float64]release.VerificationStatus{0.002: release.VerificationPassed, 0.2: release.VerificationFailed} {
		spec.Provider.Config = map[string]any{"query": "q", "address": newFake(t, rate).srv.URL}
		got, err := newVerifier().Measure(t.Context(), ports.MeasureRequest{Metric: spec, Attempt: 1})
		require.NoError(t, err)
		status, msg := policy.EvaluateMeasurements(spec, []release.Measurement{{At: now, Result: got}})
		require.Equal(t, want, status, msg)
	}
}

func TestRetriesAndErrors(t *testing.T) {
	t.Parallel()
	f := newFake(t, 0.002)
	f.faults = []int{429, 502, 503}
	_, err := newVerifier().Measure(t.Context(), f.request("q"))
	require.NoError(t, err)
	require.Len(t, f.requests, 4)

	f = newFake(t, 0)
	f.faults = []int{500, 500, 500, 500}
	_, err = newVerifier().Measure(t.Context(), f.request("q"))
	require.ErrorContains(t, err, "datadog: query metrics: status 500")

	for body, tc := range map[string]struct {
		want        string
		offContract bool // else the body is one Datadog's definition allows
	}{
		`{"status":"error","error":"Rule 'foo' not parsed"}`: {want: "Rule 'foo' not parsed"},
		`{"status":"ok"}`: {want: "malformed response"},
		`{"status":"ok","series":[{"pointlist":[[1]]}]}`: {want: "malformed response", offContract: true},
		`<html>`: {want: "malformed response", offContract: true},
	} {
		want := tc.want
		f := newFake(t, 0)
		f.body, f.offContract = body, tc.offContract
		_, err := newVerifier().Measure(t.Context(), f.request("q"))
		require.ErrorContains(t, err, want, body)
	}
}

func TestKeysNeverAppearInErrorsOrResults(t *testing.T) {
	t.Parallel()
	f := newFake(t, 0)
	f.faults = []int{500, 500, 500, 500}
	_, err := newVerifier().Measure(t.Context(), f.request("q"))
	require.NotContains(t, err.Error(), "dd-api")
	require.NotContains(t, err.Error(), "dd-app")
	require.ErrorContains(t, ValidateConfig(map[string]any{"query": "q", "window": "-1m"}), "provider.config.window")
	require.ErrorContains(t, ValidateConfig(map[string]any{"query": "q", "apiKeyRef": "abc123"}), "provider.config.apiKeyRef")
	require.ErrorContains(t, ValidateConfig(map[string]any{}), "provider.config.query")
	require.NoError(t, ValidateConfig(map[string]any{"query": "q"}))
}

// TestAddressIsTheMetricsProviderConfig: the site is the metric's
// provider.config.address, validated naming the field, DefaultAddress
// when absent; nothing else sets it.
func TestAddressIsTheMetricsProviderConfig(t *testing.T) {
	t.Parallel()
	c, err := newVerifier().parse(map[string]any{"query": "q"})
	require.NoError(t, err)
	require.Equal(t, DefaultAddress, c.address)
	require.Equal(t, "https://api.datadoghq.com", c.address, "the documented default")
	c, err = newVerifier().parse(map[string]any{"query": "q", "address": "https://api.datadoghq.eu/"})
	require.NoError(t, err)
	require.Equal(t, "https://api.datadoghq.eu", c.address)
	for _, bad := range []any{"api.datadoghq.eu", "ftp://api.datadoghq.eu", "https://api.datadoghq.eu/api/v1", "https://api.datadoghq.eu?x=1", 7.0, "https://key@api.datadoghq.eu"} {
		err := ValidateConfig(map[string]any{"query": "q", "address": bad})
		require.ErrorContains(t, err, "provider.config.address", "%v", bad)
		_, err = newVerifier().Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": "q", "address": bad}, 1))
		require.ErrorContains(t, err, "provider.config.address", "%v", bad)
	}

	// Two sites: each metric's query goes to its own.
	eu, us := newFake(t, 0.5), newFake(t, 0.001)
	got, err := newVerifier().Measure(t.Context(), eu.request("q"))
	require.NoError(t, err)
	require.Equal(t, 0.5, got.(map[string]any)["value"])
	got, err = newVerifier().Measure(t.Context(), us.request("q"))
	require.NoError(t, err)
	require.Equal(t, 0.001, got.(map[string]any)["value"])
	require.Len(t, eu.requests, 1)
	require.Len(t, us.requests, 1)
}

// TestKeysGoOnlyToABoundSite: finding 5 of issue 28 — an approve token
// could send the Datadog keys to an address of its choosing. Behind serve's
// binding resolver (default: Datadog's own sites) a metric whose address is
// elsewhere is refused naming the reference and the flag, and nothing is
// sent.
func TestKeysGoOnlyToABoundSite(t *testing.T) {
	t.Parallel()
	f := newFake(t, 0.5)
	policy, err := secretdest.Parse()
	require.NoError(t, err)
	v := New(secretdest.Resolver{Next: secrets, Policy: policy}, Options{Clock: fixedClock{}, HTTP: outbound.Options{Guard: netguard.Loopback}})
	_, err = v.Measure(t.Context(), f.request("q"))
	require.ErrorIs(t, err, secretdest.ErrRefused)
	require.ErrorContains(t, err, "provider.config.apiKeyRef")
	require.ErrorContains(t, err, "--secret-destination")
	require.NotContains(t, err.Error(), "dd-api")
	f.mu.Lock()
	require.Empty(t, f.requests, "no request reached the address")
	f.mu.Unlock()

	bound, err := secretdest.Parse(DefaultAPIKeyRef+"="+f.srv.URL, DefaultAppKeyRef+"="+f.srv.URL)
	require.NoError(t, err)
	v = New(secretdest.Resolver{Next: secrets, Policy: bound}, Options{Clock: fixedClock{}, HTTP: outbound.Options{Guard: netguard.Loopback}})
	got, err := v.Measure(t.Context(), f.request("q"))
	require.NoError(t, err, "bound by the operator")
	require.Equal(t, 0.5, got.(map[string]any)["value"])
}
