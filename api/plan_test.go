package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersionPlan: POST /versions?dry_run=true stores nothing and answers,
// for each target of the deployment, what the version would do: dev (no
// policy) would get it at once, prod waits for its approval with no time
// that alone brings it. Then the version is created for real and the chain
// decides exactly what the plan said.
func TestVersionPlan(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		body := map[string]any{"deployment_id": "web", "tag": "v9"}
		res := f.do(http.MethodPost, "/api/v1/versions?dry_run=true", "write", body)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		got := res.json(t)
		require.Equal(t, true, got["dry_run"])
		require.Equal(t, "web-v9", got["id"])
		plan := map[string]map[string]any{}
		for _, p := range got["plan"].([]any) {
			pt := p.(map[string]any)
			plan[pt["target"].(map[string]any)["environment_id"].(string)] = pt
		}
		require.Len(t, plan, 2, string(res.body))
		require.Equal(t, true, plan["dev"]["chosen"])
		require.NotEmpty(t, plan["dev"]["earliest"])
		require.Equal(t, false, plan["prod"]["chosen"])
		require.Equal(t, "pending", plan["prod"]["decision"].(map[string]any)["status"])
		require.Contains(t, plan["prod"]["waits_for"], "approval")
		require.NotContains(t, plan["prod"], "earliest", "only an approval can bring it")

		// Nothing was stored, nothing was enqueued, nothing audited.
		f.do(http.MethodGet, "/api/v1/versions/web-v9", "read", nil).problem(t, http.StatusNotFound)
		res = f.do(http.MethodGet, "/api/v1/audit?kind=versions", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Empty(t, res.json(t)["items"], "a dry run leaves no audit record")
		// Bad input is refused as a real create would be.
		f.do(http.MethodPost, "/api/v1/versions?dry_run=true", "write", map[string]any{"deployment_id": "nope", "tag": "v1"}).problem(t, http.StatusNotFound)
		f.do(http.MethodPost, "/api/v1/versions?dry_run=true", "read", body).problem(t, http.StatusForbidden)

		// What happens matches the plan.
		res = f.do(http.MethodPost, "/api/v1/versions", "write", body)
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		f.drain()
		for env, pt := range plan {
			x := f.do(http.MethodGet, "/api/v1/versions/web-v9/explain?environment_id="+env, "read", nil).json(t)["items"].([]any)
			require.Len(t, x, 1)
			require.Equal(t, pt["decision"].(map[string]any)["status"], x[0].(map[string]any)["decision"].(map[string]any)["status"], env)
			target := f.do(http.MethodGet, "/api/v1/targets/web:"+env+":r1", "read", nil).json(t)
			desired, _ := target["desired"].(map[string]any)
			wantsV9 := desired != nil && desired["release_id"] != nil && desired["release_id"] != ""
			if pt["chosen"] == true {
				require.True(t, wantsV9, "%s: the plan said chosen: %v", env, target)
			}
		}
	})
}
