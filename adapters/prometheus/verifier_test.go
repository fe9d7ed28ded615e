package prometheus

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

var now = time.UnixMilli(1_800_000_000_500)

type fixedClock struct{}

func (fixedClock) Now() time.Time { return now }

// fakePrometheus implements GET /api/v1/query with canned data.
type fakePrometheus struct {
	mu       sync.Mutex
	status   int
	body     string
	faults   []int
	requests []*http.Request
	srv      *httptest.Server
}

const vector = `{"status":"success","data":{"resultType":"vector","result":[
 {"metric":{"__name__":"up","job":"web","instance":"a:80"},"value":[1800000000.5,"1"]},
 {"metric":{"__name__":"up","job":"web","instance":"b:80"},"value":[1800000000.5,"0"]}]}}`

func newFake(t *testing.T, body string) *fakePrometheus {
	f := &fakePrometheus{status: http.StatusOK, body: body}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests = append(f.requests, r)
		if len(f.faults) > 0 {
			code := f.faults[0]
			f.faults = f.faults[1:]
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(code)
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(f.body))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func newVerifier(f *fakePrometheus) *Verifier {
	return New(nil, Options{Clock: fixedClock{}, HTTP: outbound.Options{Guard: netguard.Loopback, Backoff: time.Millisecond}, Address: f.srv.URL})
}

func TestConformance(t *testing.T) {
	f := newFake(t, vector)
	porttest.Verifier(t, func(t *testing.T) ports.Verifier { return newVerifier(f) }, porttest.VerifierOptions{
		Measurable: []ports.MeasureRequest{porttest.MeasureRequestFor(Type, map[string]any{"query": "up"}, 1),
			porttest.MeasureRequestFor(Type, map[string]any{"query": "up", "address": f.srv.URL}, 2)},
		Failing:       []ports.MeasureRequest{porttest.MeasureRequestFor(Type, map[string]any{"address": f.srv.URL}, 1)},
		Deterministic: true,
	})
}

func TestMeasureSendsTheDocumentedRequestAndKeepsWhatWasMeasured(t *testing.T) {
	t.Parallel()
	f := newFake(t, vector)
	got, err := newVerifier(f).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": `up{job="web"}`}, 1))
	require.NoError(t, err)
	require.Len(t, f.requests, 1)
	require.Equal(t, map[string][]string{"query": {`up{job="web"}`}, "time": {"1800000000.500"}}, map[string][]string(f.requests[0].URL.Query()))
	require.Empty(t, f.requests[0].Header.Get("Authorization"))
	require.Equal(t, map[string]any{"query": `up{job="web"}`, "time": 1800000000.5, "resultType": "vector", "value": 1.0,
		"values": []any{1.0, 0.0},
		"samples": []any{
			map[string]any{"metric": map[string]any{"__name__": "up", "job": "web", "instance": "a:80"}, "value": 1.0},
			map[string]any{"metric": map[string]any{"__name__": "up", "job": "web", "instance": "b:80"}, "value": 0.0}}}, got)

	spec := policy.MetricSpec{Name: "all-up", Count: 1, SuccessCondition: "result.values.all(v, v == 1.0)",
		Provider: policy.Provider{Type: Type, Config: map[string]any{"query": "up"}}}
	status, msg := policy.EvaluateMeasurements(spec, []release.Measurement{{At: now, Result: got}})
	require.Equal(t, release.VerificationFailed, status, "one target is down: %s", msg)
}

func TestBearerTokenFromSecrets(t *testing.T) {
	t.Parallel()
	f := newFake(t, `{"status":"success","data":{"resultType":"scalar","result":[1800000000.5,"42"]}}`)
	v := New(configmap.Secrets{"env:RECONCILER_SECRET_PROM": "prom-token"}, Options{Address: f.srv.URL, Clock: fixedClock{}, HTTP: outbound.Options{Guard: netguard.Loopback}})
	got, err := v.Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": "42", "tokenRef": "env:RECONCILER_SECRET_PROM"}, 1))
	require.NoError(t, err)
	require.Equal(t, "Bearer prom-token", f.requests[0].Header.Get("Authorization"))
	require.Equal(t, 42.0, got.(map[string]any)["value"])
}

func TestRetriesAndErrors(t *testing.T) {
	t.Parallel()
	f := newFake(t, vector)
	f.faults = []int{429, 503}
	_, err := newVerifier(f).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": "up"}, 1))
	require.NoError(t, err)
	require.Len(t, f.requests, 3)

	bad := newFake(t, `{"status":"error","errorType":"bad_data","error":"1:3: parse error: unexpected <op:{>"}`)
	bad.status = http.StatusBadRequest
	_, err = newVerifier(bad).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": "up{"}, 1))
	require.ErrorContains(t, err, "prometheus: instant query: status 400")
	require.ErrorContains(t, err, "parse error")

	for body, want := range map[string]string{
		`<html>`:               "malformed response",
		`{"status":"success"}`: "malformed response",
		`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"x"]}]}}`:         "not a number",
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`:                          "matrix",
		`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"NaN"]}]}}`:       "",
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}`: "malformed response",
	} {
		f := newFake(t, body)
		got, err := newVerifier(f).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": "up"}, 1))
		if want == "" {
			require.NoError(t, err)
			b, err := json.Marshal(got)
			require.NoError(t, err, "NaN is kept as null: the result stays JSON")
			require.Contains(t, string(b), `"value":null`)
			continue
		}
		require.ErrorContains(t, err, want, body)
	}
	require.ErrorContains(t, ValidateConfig(map[string]any{"query": "up"}), "provider.config.address")
	require.ErrorContains(t, ValidateConfig(map[string]any{"query": "up", "address": "http://p", "tokenRef": "raw"}), "provider.config.tokenRef")
	require.NoError(t, ValidateConfig(map[string]any{"query": "up", "address": "http://p:9090"}))
}

// TestBasicAuthAndTenant: username and passwordRef send HTTP basic
// authentication, tenant sends X-Scope-OrgID; bad combinations are
// refused naming the field.
func TestBasicAuthAndTenant(t *testing.T) {
	t.Parallel()
	f := newFake(t, `{"status":"success","data":{"resultType":"scalar","result":[1800000000.5,"1"]}}`)
	v := New(configmap.Secrets{"env:RECONCILER_SECRET_PROM_PW": "s3cret"}, Options{Address: f.srv.URL, Clock: fixedClock{}, HTTP: outbound.Options{Guard: netguard.Loopback}})
	_, err := v.Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": "1", "username": "grafana",
		"passwordRef": "env:RECONCILER_SECRET_PROM_PW", "tenant": "team-a|team-b"}, 1))
	require.NoError(t, err)
	user, pw, ok := f.requests[0].BasicAuth()
	require.True(t, ok)
	require.Equal(t, "grafana", user)
	require.Equal(t, "s3cret", pw)
	require.Equal(t, "team-a|team-b", f.requests[0].Header.Get("X-Scope-OrgID"))

	for field, cfg := range map[string]map[string]any{
		"provider.config.passwordRef": {"query": "1", "username": "u"},
		"provider.config.tokenRef":    {"query": "1", "username": "u", "passwordRef": "env:RECONCILER_SECRET_P", "tokenRef": "env:RECONCILER_SECRET_T"},
		"provider.config.username":    {"query": "1", "username": "a:b", "passwordRef": "env:RECONCILER_SECRET_P"},
		"provider.config.tenant":      {"query": "1", "tenant": "a\r\nX-Injected: 1"},
	} {
		err := ValidateConfig(map[string]any{"address": "http://prom:9090", "query": cfg["query"]})
		require.NoError(t, err)
		cfg["address"] = "http://prom:9090"
		require.ErrorContains(t, ValidateConfig(cfg), field)
	}
}

// nativeHistogram is how Prometheus's query API documents an instant
// vector sample of a native histogram: "histogram" instead of "value"
// (TestAgainstARealPrometheus queries a real one).
const nativeHistogram = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"reconciler_test_latency_seconds","instance":"127.0.0.1:9","job":"reconciler-test"},"histogram":[1800000000.5,{"count":"3","sum":"0.75","buckets":[[0,"0.1767766952966369","0.25","2"],[0,"0.5","0.7071067811865476","1"]]}]}]}}`

// TestNativeHistogramSample: a native histogram sample is kept as
// {count, sum} with value null, not refused as malformed.
func TestNativeHistogramSample(t *testing.T) {
	t.Parallel()
	f := newFake(t, nativeHistogram)
	got, err := newVerifier(f).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": "reconciler_test_latency_seconds"}, 1))
	require.NoError(t, err)
	m := got.(map[string]any)
	require.Nil(t, m["value"])
	sample := m["samples"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"count": 3.0, "sum": 0.75}, sample["histogram"])
	spec := policy.MetricSpec{Name: "few", Count: 1, SuccessCondition: "result.samples[0].histogram.count < 10.0",
		Provider: policy.Provider{Type: Type, Config: map[string]any{"query": "x"}}}
	status, msg := policy.EvaluateMeasurements(spec, []release.Measurement{{At: now, Result: got}})
	require.Equal(t, release.VerificationPassed, status, msg)
}

// TestCapturedAnswers: the verifier reads the answers a real Prometheus
// (2.42, native histograms on) gave, kept in testdata/captured.json by
// TestAgainstARealPrometheus (RECONCILER_CAPTURE_PROMETHEUS=1): Prometheus
// publishes no API definition, so its own answers are the reference.
func TestCapturedAnswers(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/captured.json")
	require.NoError(t, err)
	var answers map[string]struct {
		Query  string          `json:"query"`
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	require.NoError(t, json.Unmarshal(b, &answers))
	measure := func(name string) (map[string]any, error) {
		a, ok := answers[name]
		require.True(t, ok, name)
		f := newFake(t, string(a.Body))
		f.status = a.Status
		got, err := newVerifier(f).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": a.Query}, 1))
		m, _ := got.(map[string]any)
		return m, err
	}
	got, err := measure("vector")
	require.NoError(t, err)
	require.Equal(t, 0.3, got["value"])
	require.Equal(t, "reconciler-test", got["samples"].([]any)[0].(map[string]any)["metric"].(map[string]any)["job"])
	got, err = measure("scalar")
	require.NoError(t, err)
	require.InDelta(t, 0.6, got["value"], 1e-9)
	got, err = measure("histogram")
	require.NoError(t, err)
	require.Nil(t, got["value"])
	require.Equal(t, map[string]any{"count": 3.0, "sum": 0.75}, got["samples"].([]any)[0].(map[string]any)["histogram"])
	got, err = measure("empty")
	require.NoError(t, err)
	require.Nil(t, got["value"])
	require.Empty(t, got["values"])
	_, err = measure("bad_data")
	require.ErrorContains(t, err, "status 400")
	require.ErrorContains(t, err, "bad_data")
	_, err = measure("matrix")
	require.ErrorContains(t, err, "matrix")
}
