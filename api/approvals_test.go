package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestApprovalResolvesWithinTheVersionsSystem: an approval names its
// environment by id or by name, resolved within the system of the
// version's deployment. An environment of another system is not found
// (404, never 201 "added" for an approval that can never count), a name
// of several environments is 409 listing them. (Issue 29, finding 2.)
func TestApprovalResolvesWithinTheVersionsSystem(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		put := func(path string, body map[string]any) {
			t.Helper()
			res := f.do(http.MethodPut, path, "admin", body)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
		}
		put("/api/v1/systems/other", map[string]any{"id": "other", "workspace_id": "ws", "name": "other"})
		put("/api/v1/environments/sys-qa", map[string]any{"id": "sys-qa", "system_id": "sys", "name": "qa", "resource_selector": "true"})
		put("/api/v1/environments/other-qa", map[string]any{"id": "other-qa", "system_id": "other", "name": "qa", "resource_selector": "true"})
		res := f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v2"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))

		res = f.do(http.MethodPost, "/api/v1/versions/web-v2/approvals", "approve", map[string]any{"environment_id": "qa"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		require.Equal(t, "sys-qa", res.json(t)["approval"].(map[string]any)["environment_id"], "the name resolves in web's system")

		p := f.do(http.MethodPost, "/api/v1/versions/web-v2/approvals", "approve", map[string]any{"environment_id": "other-qa"}).problem(t, http.StatusNotFound)
		require.Contains(t, p["detail"], "system sys")
		f.do(http.MethodPost, "/api/v1/versions/web-v2/approvals", "approve", map[string]any{"environment_id": "nowhere"}).problem(t, http.StatusNotFound)
		f.do(http.MethodPost, "/api/v1/versions/web-v2/force-deploys", "approve", map[string]any{"environment_id": "other-qa"}).problem(t, http.StatusNotFound)

		put("/api/v1/environments/sys-qa2", map[string]any{"id": "sys-qa2", "system_id": "sys", "name": "qa", "resource_selector": "true"})
		p = f.do(http.MethodPost, "/api/v1/versions/web-v2/approvals", "approve", map[string]any{"environment_id": "qa"}).problem(t, http.StatusConflict)
		require.Contains(t, p["detail"], "sys-qa, sys-qa2")

		res = f.do(http.MethodGet, "/api/v1/versions/web-v2/approvals", "read", nil)
		require.Equal(t, http.StatusOK, res.status)
		require.Len(t, res.jsonArray(t), 1, "only the resolved approval was stored")
	})
}
