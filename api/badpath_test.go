package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// badPathSeeds seed FuzzPathAndQuery with the reported cases: NUL and undecodable input in an id
// or a query parameter, each of which must be a 400 problem document.
var badPathSeeds = []string{
	"/api/v1/versions/%00",
	"/api/v1/versions/a%00b/approvals",
	"/api/v1/jobs/%00",
	"/api/v1/runs/%00",
	"/api/v1/workflows/%00",
	"/api/v1/systems/%00",
	"/api/v1/deployments/%00",
	"/api/v1/environments/%00",
	"/api/v1/job-agents/%00",
	"/api/v1/policies/%00",
	"/api/v1/runs?kind=%00",
	"/api/v1/versions?deployment_id=%00",
	"/api/v1/runs?cursor=%zz",
	"/api/v1/versions/%ff%fe",
}

// FuzzPathAndQuery sends arbitrary paths (under the API's prefix) and
// query strings to the API: no 5xx, and every refusal is a problem document.
func FuzzPathAndQuery(f *testing.F) {
	fx := setup(f, "memory")
	for _, p := range badPathSeeds {
		path, query, _ := strings.Cut(p, "?")
		f.Add(path, query)
	}
	f.Add("/api/v1/versions", "limit=2")
	h := fx.server.Handler()
	f.Fuzz(func(t *testing.T, path, query string) {
		path = "/api/v1/" + strings.TrimPrefix(strings.TrimPrefix(path, "/api/v1"), "/")
		req, err := http.NewRequest(http.MethodGet, "http://x", nil)
		require.NoError(t, err)
		req.URL.Path, req.URL.RawPath, req.URL.RawQuery = path, "", query
		if u, err := req.URL.Parse(path); err == nil {
			req.URL.Path, req.URL.RawPath = u.Path, u.RawPath
		}
		req.RequestURI = req.URL.RequestURI()
		req.Header.Set("Authorization", "Bearer "+fx.tokens["admin"])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("GET %q ? %q: %d %s", path, query, w.Code, w.Body)
		}
		if w.Code >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("GET %q ? %q: %d without a problem document: %s", path, query, w.Code, w.Body)
		}
	})
}
