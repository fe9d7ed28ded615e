package httpprobe

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Version", "v1.2.3")
	_, _ = w.Write([]byte(`{"status":"ok","checks":{"db":"up"}}`))
}

func TestConformance(t *testing.T) {
	srv := newServer(t, health)
	porttest.Verifier(t, func(t *testing.T) ports.Verifier { return New(outbound.Options{Guard: netguard.Loopback}) }, porttest.VerifierOptions{
		Measurable:    []ports.MeasureRequest{porttest.MeasureRequestFor(Type, map[string]any{"url": srv.URL + "/healthz"}, 1)},
		Failing:       []ports.MeasureRequest{porttest.MeasureRequestFor(Type, map[string]any{"url": "http://127.0.0.1:1/"}, 1)},
		Deterministic: false, // the Date header changes
	})
}

func TestProbeSendsTheRequestAndConditionsReadStatusHeadersAndBody(t *testing.T) {
	t.Parallel()
	var got *http.Request
	var body []byte
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got, body = r, nil
		body, _ = io.ReadAll(r.Body)
		health(w, r)
	})
	cfg := map[string]any{"url": srv.URL + "/healthz?deep=1", "method": "post", "headers": map[string]any{"Authorization": "Bearer t0k"}, "body": `{"probe":true}`}
	res, err := New(outbound.Options{Guard: netguard.Loopback}).Measure(t.Context(), porttest.MeasureRequestFor(Type, cfg, 1))
	require.NoError(t, err)
	require.Equal(t, http.MethodPost, got.Method)
	require.Equal(t, "/healthz", got.URL.Path)
	require.Equal(t, "deep=1", got.URL.RawQuery)
	require.Equal(t, "Bearer t0k", got.Header.Get("Authorization"))
	require.Equal(t, `{"probe":true}`, string(body))
	m := res.(map[string]any)
	require.Equal(t, 200.0, m["status"])
	require.Equal(t, map[string]any{"status": "ok", "checks": map[string]any{"db": "up"}}, m["body"])
	require.Equal(t, "v1.2.3", m["headers"].(map[string]any)["x-version"])
	require.NotContains(t, m, "request_headers", "the request's credentials are not kept")

	spec := policy.MetricSpec{Name: "healthy", Count: 1, Provider: policy.Provider{Type: Type, Config: cfg},
		SuccessCondition: `result.status == 200 && result.body.checks.db == "up" && result.headers["x-version"] == "v1.2.3"`}
	status, msg := policy.EvaluateMeasurements(spec, []release.Measurement{{Result: res}})
	require.Equal(t, release.VerificationPassed, status, msg)
}

func TestAnyResponseIsAResultAndIsTriedOnce(t *testing.T) {
	t.Parallel()
	n := 0
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n++
		http.Error(w, "boom", http.StatusBadGateway)
	})
	res, err := New(outbound.Options{Guard: netguard.Loopback}).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"url": srv.URL}, 1))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 502.0, res.(map[string]any)["status"])
	require.Equal(t, "boom\n", res.(map[string]any)["body"])
}

func TestBadConfigNamesTheField(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, ValidateConfig(map[string]any{}), "provider.config.url")
	require.ErrorContains(t, ValidateConfig(map[string]any{"url": "http://x", "method": "BREW"}), "provider.config.method")
	require.ErrorContains(t, ValidateConfig(map[string]any{"url": "http://x", "headers": []any{}}), "provider.config.headers")
	require.ErrorContains(t, ValidateConfig(map[string]any{"url": "http://user:pw@x"}), "provider.config.url")
	require.NoError(t, ValidateConfig(map[string]any{"url": "https://x/healthz"}))
	_, err := New(outbound.Options{Guard: netguard.Loopback}).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"url": 3.0}, 1))
	require.ErrorContains(t, err, "provider.config.url")
}

func TestBodyOverTheCapIsAnError(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(make([]byte, 2048)) })
	_, err := New(outbound.Options{Guard: netguard.Loopback, MaxBody: 1024}).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"url": srv.URL}, 1))
	require.ErrorIs(t, err, outbound.ErrTooLarge)
}

// TestStoredBodyIsCapped: finding 5 of issue 28 stored a whole page
// (`db_password=…`) in the measurement, readable with the read scope; a
// measurement keeps at most MaxStoredBody bytes of it, marked.
func TestStoredBodyIsCapped(t *testing.T) {
	t.Parallel()
	long := "db_password=hunter2\n" + strings.Repeat("x", 10_000) + "SECRET_AT_THE_END"
	jsonLong := `{"pad":"` + strings.Repeat("y", 5_000) + `","secret":"s3"}`
	utf := strings.Repeat("a", MaxStoredBody-1) + "é" + strings.Repeat("b", 10)
	for _, tc := range []struct {
		name, page string
		want       any
	}{
		{"short text kept", "ok", "ok"},
		{"short JSON decoded", `{"a":1}`, map[string]any{"a": 1.0}},
		{"exactly the cap kept", strings.Repeat("z", MaxStoredBody), strings.Repeat("z", MaxStoredBody)},
		{"long text cut", long, long[:MaxStoredBody] + TruncatedMarker + strconv.Itoa(len(long)) + " bytes]"},
		{"long JSON cut, not decoded", jsonLong, jsonLong[:MaxStoredBody] + TruncatedMarker + strconv.Itoa(len(jsonLong)) + " bytes]"},
		{"cut on a character boundary", utf, strings.Repeat("a", MaxStoredBody-1) + TruncatedMarker + strconv.Itoa(len(utf)) + " bytes]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tc.page)) })
			res, err := New(outbound.Options{Guard: netguard.Loopback}).Measure(t.Context(), porttest.MeasureRequestFor(Type, map[string]any{"url": srv.URL}, 1))
			require.NoError(t, err)
			body := res.(map[string]any)["body"]
			require.Equal(t, tc.want, body)
			if s, ok := body.(string); ok {
				require.LessOrEqual(t, len(s), MaxStoredBody+len(TruncatedMarker)+20)
				require.NotContains(t, s, "SECRET_AT_THE_END")
			}
		})
	}
}
