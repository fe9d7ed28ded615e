package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestMetricsCountRoutePatterns: requests are counted on the pattern of
// the operation that served them (401s included), whatever the path's
// values; a path or method no operation serves is "unmatched".
func TestMetricsCountRoutePatterns(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	clock := ports.SystemClock
	srv := httptest.NewServer(api.New(api.Options{Releases: memory.NewReleaseStore(clock), Tokens: memory.NewTokens(),
		Clock: clock, Metrics: api.NewMetrics(reg)}).Handler())
	t.Cleanup(srv.Close)
	do := func(method, path string) int {
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res.StatusCode
	}
	for _, id := range []string{"a", "b", "c%2Fd"} {
		require.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/api/v1/jobs/"+id))
	}
	require.Equal(t, http.StatusNotFound, do(http.MethodGet, "/api/v1/nothing/here"))
	require.Equal(t, http.StatusNotFound, do(http.MethodPatch, "/api/v1/jobs/a/report"))

	require.Equal(t, map[string]float64{
		"GET /api/v1/jobs/{id} 401": 3,
		"unmatched 404":             2,
	}, requestCounts(t, reg), "one series per route and status, no raw path")
}

// requestCounts gathers reconciler_api_requests_total as "ROUTE STATUS"
// -> value.
func requestCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "reconciler_api_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["route"]+" "+l["status"]] = m.GetCounter().GetValue()
		}
	}
	return out
}
