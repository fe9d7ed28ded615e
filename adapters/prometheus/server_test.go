package prometheus

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestAgainstARealPrometheus runs the verifier against the Prometheus
// server scripts/with-prometheus.sh starts (make test wraps every test in
// it), which scrapes a target this test serves. It skips without one
// outside CI and fails without one in CI.
func TestAgainstARealPrometheus(t *testing.T) {
	addr, target := os.Getenv("RECONCILER_TEST_PROMETHEUS"), os.Getenv("RECONCILER_TEST_PROMETHEUS_TARGET")
	if addr == "" || target == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("RECONCILER_TEST_PROMETHEUS is not set in CI: run the tests through scripts/with-prometheus.sh (make test does)")
		}
		t.Skip("no Prometheus server: run through scripts/with-prometheus.sh")
	}
	reg := promclient.NewRegistry()
	rate := promclient.NewGaugeVec(promclient.GaugeOpts{Name: "reconciler_test_error_rate", Help: "Errors per request."}, []string{"service"})
	reg.MustRegister(rate)
	rate.WithLabelValues("web").Set(0.002)
	latency := promclient.NewHistogram(promclient.HistogramOpts{Name: "reconciler_test_latency_seconds", Help: "A native histogram.",
		NativeHistogramBucketFactor: 1.1})
	reg.MustRegister(latency)
	for _, v := range []float64{0.2, 0.25, 0.3} {
		latency.Observe(v)
	}
	ln, err := net.Listen("tcp", target)
	require.NoError(t, err)
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })

	v := New(nil, Options{Address: addr, HTTP: outbound.Options{Guard: netguard.Loopback}})
	measure := func(query string) (map[string]any, error) {
		res, err := v.Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"query": query}, 1))
		m, _ := res.(map[string]any)
		return m, err
	}
	// awaitValue polls the server until query's value is want: Prometheus
	// scrapes every second and offers no signal to wait on.
	awaitValue := func(query string, want float64) map[string]any {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			m, err := measure(query)
			require.NoError(t, err)
			if m["value"] == want {
				return m
			}
			require.True(t, time.Now().Before(deadline), "%s never became %v; last result %v", query, want, m)
			time.Sleep(200 * time.Millisecond)
		}
	}
	awaitValue(`up{job="reconciler-test"}`, 1)
	got := awaitValue(`reconciler_test_error_rate{job="reconciler-test",service="web"}`, 0.002)
	require.Equal(t, "vector", got["resultType"])
	samples := got["samples"].([]any)
	require.Len(t, samples, 1)
	labels := samples[0].(map[string]any)["metric"].(map[string]any)
	require.Equal(t, "web", labels["service"])
	require.Equal(t, "reconciler-test", labels["job"])

	spec := policy.MetricSpec{Name: "error-rate", Count: 1, SuccessCondition: "result.value < 0.01",
		Provider: policy.Provider{Type: Type, Config: map[string]any{"query": "reconciler_test_error_rate"}}}
	status, msg := policy.EvaluateMeasurements(spec, []release.Measurement{{Result: got}})
	require.Equal(t, release.VerificationPassed, status, msg)

	rate.WithLabelValues("web").Set(0.3)
	got = awaitValue(`reconciler_test_error_rate{job="reconciler-test",service="web"}`, 0.3)
	status, msg = policy.EvaluateMeasurements(spec, []release.Measurement{{Result: got}})
	require.Equal(t, release.VerificationFailed, status, msg)

	scalar, err := measure(`scalar(reconciler_test_error_rate{job="reconciler-test"}) * 2`)
	require.NoError(t, err)
	require.Equal(t, "scalar", scalar["resultType"])
	require.InDelta(t, 0.6, scalar["value"], 1e-9)

	// A native histogram (Prometheus scrapes it with native histograms
	// on, as scripts/with-prometheus.sh starts it): its sample is kept as
	// {count, sum}, not refused as malformed.
	var hist map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for hist == nil {
		m, err := measure(`reconciler_test_latency_seconds{job="reconciler-test"}`)
		require.NoError(t, err)
		if s, _ := m["samples"].([]any); len(s) == 1 {
			hist, _ = s[0].(map[string]any)["histogram"].(map[string]any)
			require.NotNil(t, hist, "the sample is a native histogram: %v", m)
			require.Nil(t, m["value"])
			break
		}
		require.True(t, time.Now().Before(deadline), "the native histogram was never scraped; last result %v", m)
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, 3.0, hist["count"])
	require.InDelta(t, 0.75, hist["sum"], 1e-9)

	if os.Getenv("RECONCILER_CAPTURE_PROMETHEUS") == "1" {
		captureAnswers(t, addr)
	}

	_, err = measure(`reconciler_test_error_rate{`)
	require.ErrorContains(t, err, "prometheus: instant query: status 400")
	require.ErrorContains(t, err, "bad_data")
	_, err = measure(`reconciler_test_error_rate[1m]`)
	require.ErrorContains(t, err, "matrix")

}

// capturedQueries are the instant queries whose raw answers
// testdata/captured.json keeps, by name: what TestCapturedAnswers serves.
var capturedQueries = map[string]string{
	"vector":    `reconciler_test_error_rate{job="reconciler-test"}`,
	"scalar":    `scalar(reconciler_test_error_rate{job="reconciler-test"}) * 2`,
	"histogram": `reconciler_test_latency_seconds{job="reconciler-test"}`,
	"bad_data":  `reconciler_test_error_rate{`,
	"matrix":    `reconciler_test_error_rate[1m]`,
	"empty":     `reconciler_test_no_such_metric`,
}

// captured is one raw answer of the real server.
type captured struct {
	Query  string          `json:"query"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// captureAnswers rewrites testdata/captured.json with the real server's
// answers to capturedQueries (RECONCILER_CAPTURE_PROMETHEUS=1
// scripts/with-prometheus.sh go test ./adapters/prometheus -run Real).
func captureAnswers(t *testing.T, addr string) {
	out := map[string]captured{}
	for name, q := range capturedQueries {
		res, err := http.Get(addr + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
		require.NoError(t, err)
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		out[name] = captured{Query: q, Status: res.StatusCode, Body: b}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("testdata/captured.json", append(b, '\n'), 0o644))
}
