package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTargetDecisions: a target's decision history reads newest first with
// scope read; a bad key is 400, an unknown target 404, a bad limit 422.
func TestTargetDecisions(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		f.drain()
		res := f.do(http.MethodGet, "/api/v1/targets/web:prod:r1/decisions", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		got := res.jsonArray(t)
		require.NotEmpty(t, got, string(res.body))
		first := got[0].(map[string]any)
		require.Equal(t, "no-release", first["how"], "prod waits for its approval")
		require.Contains(t, first["reasons"].([]any)[0], "approval")
		snap := first["snapshot"].(map[string]any)
		require.Equal(t, "release-target", snap["kind"])

		res = f.do(http.MethodGet, "/api/v1/targets/web:dev:r1/decisions?limit=1", "read", nil)
		got = res.jsonArray(t)
		require.Len(t, got, 1)
		require.Equal(t, "web-v1", got[0].(map[string]any)["version_id"])

		f.do(http.MethodGet, "/api/v1/targets/web:prod:r1/decisions", "", nil).problem(t, http.StatusUnauthorized)
		f.do(http.MethodGet, "/api/v1/targets/web:dev:nope/decisions", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodGet, "/api/v1/targets/bad/decisions", "read", nil).problem(t, http.StatusBadRequest)
		f.do(http.MethodGet, "/api/v1/targets/web:dev:r1/decisions?limit=99", "read", nil).problem(t, http.StatusUnprocessableEntity)
	})
}
