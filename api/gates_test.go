package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy/plan"
)

// TestGateLiftNeedsApprove: renaming the environment the prod gate's
// selector reads ("prod" -> "prod ") would take the approval rule off
// web:prod:r1 (issue 28, finding 2): with write it is 403 naming the target
// and the rule and changes nothing, through PUT and through apply; a dry
// run shows the plan; with approve (admin) it goes through.
func TestGateLiftNeedsApprove(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		renamed := map[string]any{"id": "prod", "system_id": "sys", "name": "prod ", "resource_selector": "true"}
		p := f.do(http.MethodPut, "/api/v1/environments/prod", "write", renamed).problem(t, http.StatusForbidden)
		require.Contains(t, p["detail"], "web:prod:r1")
		require.Contains(t, p["detail"], "prod-gate/approval")
		require.Contains(t, locations(p), "target web:prod:r1")
		res := f.do(http.MethodGet, "/api/v1/environments/prod", "read", nil)
		require.Equal(t, "prod", res.json(t)["name"], "the gate still holds")

		doc := map[string]any{"apiVersion": "reconciler.dev/v1", "kind": "Environment", "metadata": map[string]any{"name": "prod", "system": "sys"},
			"spec": map[string]any{"name": "prod ", "resource_selector": "true"}}
		res = f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": []any{doc}, "dry_run": true})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var dry struct {
			Plan struct {
				Targets []struct {
					Key   string `json:"key"`
					Stops []struct {
						Policy, Rule string
					} `json:"stops"`
				} `json:"targets"`
			} `json:"plan"`
		}
		require.NoError(t, json.Unmarshal(res.body, &dry))
		require.Len(t, dry.Plan.Targets, 1, string(res.body))
		require.Equal(t, "web:prod:r1", dry.Plan.Targets[0].Key)
		require.Equal(t, "prod-gate", dry.Plan.Targets[0].Stops[0].Policy)
		require.Equal(t, "approval", dry.Plan.Targets[0].Stops[0].Rule)
		f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": []any{doc}}).problem(t, http.StatusForbidden)
		res = f.do(http.MethodGet, "/api/v1/environments/prod", "read", nil)
		require.Equal(t, "prod", res.json(t)["name"])

		// A write that lifts nothing needs only write.
		res = f.do(http.MethodPut, "/api/v1/environments/dev", "write", map[string]any{"id": "dev", "system_id": "sys", "name": "dev", "resource_selector": "resource.kind == \"cluster\""})
		require.Equal(t, http.StatusOK, res.status, string(res.body))

		res = f.do(http.MethodPut, "/api/v1/environments/prod", "admin", renamed)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "prod ", res.json(t)["name"])
	})
}

// TestPolicyRevisionPlan: a draft of prod-gate that selects dev instead of
// prod shows, before anyone approves it, that publishing it would move the
// approval from web:prod:r1 to web:dev:r1: with v1 out, dev would go from
// v1 to no release and prod from no release to v1.
func TestPolicyRevisionPlan(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		f.drain()
		res := f.do(http.MethodPost, "/api/v1/catalog/policy/prod-gate/revisions", "write", map[string]any{"content": map[string]any{
			"id": "prod-gate", "workspace_id": "ws", "name": "prod gate", "selector": `environment.name == "dev"`, "priority": 0, "enabled": true,
			"rules": []any{map[string]any{"id": "approval", "type": "anyApproval", "min_approvals": 1}}}})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		id := res.json(t)["id"].(string)
		res = f.do(http.MethodGet, "/api/v1/catalog/policy/prod-gate/revisions/"+id+"/plan", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var d struct {
			Targets []struct {
				Key           string
				Starts, Stops []struct{ Policy, Rule string }
				Desired       *plan.DesiredChange
			}
		}
		require.NoError(t, json.Unmarshal(res.body, &d))
		require.Len(t, d.Targets, 2, string(res.body))
		require.Equal(t, "web:dev:r1", d.Targets[0].Key)
		require.Equal(t, "approval", d.Targets[0].Starts[0].Rule)
		require.Equal(t, "web:prod:r1", d.Targets[1].Key)
		require.Equal(t, "prod-gate", d.Targets[1].Stops[0].Policy)
		dev, prod := d.Targets[0].Desired, d.Targets[1].Desired
		require.NotNil(t, dev, string(res.body))
		require.Equal(t, "web-v1", dev.Before.VersionID, "dev runs v1 now")
		require.Empty(t, dev.After.ReleaseID, "the approval would hold dev back")
		require.NotNil(t, prod, string(res.body))
		require.Empty(t, prod.Before.ReleaseID, "prod waits for its approval now")
		require.Equal(t, "web-v1", prod.After.VersionID, "without it prod would get v1")
		f.do(http.MethodGet, "/api/v1/catalog/policy/prod-gate/revisions/nope/plan", "read", nil).problem(t, http.StatusNotFound)
	})
}
