package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestObjects(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		// Create: a new deployment's targets appear.
		api := map[string]any{"id": "api", "system_id": "sys", "name": "API", "slug": "api", "job_agent_id": "ext", "resource_selector": "true"}
		res := f.do(http.MethodPut, "/api/v1/deployments/api", "write", api)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, `"1"`, res.header.Get("ETag"))
		require.EqualValues(t, 1, res.json(t)["object_version"])
		require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/api/v1/targets/api:prod:r1", "read", nil).status, "targets recomputed")

		// Idempotent: the same content changes nothing.
		res = f.do(http.MethodPut, "/api/v1/deployments/api", "write", api)
		require.Equal(t, `"1"`, res.header.Get("ETag"))
		// Replace at the version read; a stale one is 412.
		api["name"] = "API v2"
		f.do(http.MethodPut, "/api/v1/deployments/api", "write", api, "If-Match", `"7"`).problem(t, http.StatusPreconditionFailed)
		res = f.do(http.MethodPut, "/api/v1/deployments/api", "write", api, "If-Match", `"1"`)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, `"2"`, res.header.Get("ETag"))
		res = f.do(http.MethodGet, "/api/v1/deployments/api", "read", nil)
		require.Equal(t, `"2"`, res.header.Get("ETag"))
		require.Equal(t, "API v2", res.json(t)["name"])

		// Bad input names the field and changes nothing.
		api["colour"] = "red"
		require.Contains(t, locations(f.do(http.MethodPut, "/api/v1/deployments/api", "write", api).problem(t, http.StatusUnprocessableEntity)), "body.colour")
		delete(api, "colour")
		api["resource_selector"] = "resource.kind =="
		require.Contains(t, locations(f.do(http.MethodPut, "/api/v1/deployments/api", "write", api).problem(t, http.StatusUnprocessableEntity)), "body.resource_selector")
		api["resource_selector"] = "true"
		require.Contains(t, locations(f.do(http.MethodPut, "/api/v1/deployments/other", "write", api).problem(t, http.StatusUnprocessableEntity)), "body.id")
		f.do(http.MethodPut, "/api/v1/deployments/api", "write", `{"id": "api",`).problem(t, http.StatusBadRequest)
		f.do(http.MethodPut, "/api/v1/deployments/api", "write", api, "If-Match", "soon").problem(t, http.StatusBadRequest)
		api["system_id"] = "nope"
		f.do(http.MethodPut, "/api/v1/deployments/api", "write", api).problem(t, http.StatusNotFound)
		f.do(http.MethodPut, "/api/v1/deployments/api", "read", api).problem(t, http.StatusForbidden)
		require.Equal(t, `"2"`, f.do(http.MethodGet, "/api/v1/deployments/api", "read", nil).header.Get("ETag"))

		// Policies decode their rules strictly. A write publishes a catalog
		// revision approved by the caller, so it needs the approve scope.
		pol := map[string]any{"id": "p2", "workspace_id": "ws", "name": "p2", "priority": 1, "enabled": true, "selector": "true",
			"rules": []any{map[string]any{"id": "r", "type": "anyApproval", "min_approvals": 2}}}
		f.do(http.MethodPut, "/api/v1/policies/p2", "write", pol).problem(t, http.StatusForbidden)
		res = f.do(http.MethodPut, "/api/v1/policies/p2", "approve", pol)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, `"1"`, res.header.Get("ETag"), "the revision number")
		revs := f.do(http.MethodGet, "/api/v1/catalog/policy/p2/revisions", "read", nil)
		require.Equal(t, http.StatusOK, revs.status, string(revs.body))
		require.Contains(t, string(revs.body), `"lifecycle":"published"`)
		require.Contains(t, string(revs.body), `"approved_by":"user-approve"`)
		pol["rules"] = []any{map[string]any{"id": "r", "type": "anyApproval", "min_aprovals": 2}}
		p := f.do(http.MethodPut, "/api/v1/policies/p2", "approve", pol).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.rules[0]")
		require.Contains(t, p["detail"], "min_aprovals")

		// Lists page by id; parents filter.
		res = f.do(http.MethodGet, "/api/v1/deployments?parent=sys&limit=1", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		m := res.json(t)
		require.Len(t, m["items"], 1)
		require.Equal(t, "api", m["items"].([]any)[0].(map[string]any)["id"])
		res = f.do(http.MethodGet, "/api/v1/deployments?parent=sys&limit=1&cursor="+m["next_cursor"].(string), "read", nil)
		m = res.json(t)
		require.Equal(t, "web", m["items"].([]any)[0].(map[string]any)["id"])
		require.Empty(t, m["next_cursor"])
		f.do(http.MethodGet, "/api/v1/deployments?cursor=zzz", "read", nil).problem(t, http.StatusBadRequest)
		f.do(http.MethodGet, "/api/v1/job-agents?parent=x", "read", nil).problem(t, http.StatusBadRequest)
		require.Contains(t, locations(f.do(http.MethodGet, "/api/v1/job-agents?workspace=ws", "read", nil).problem(t, http.StatusBadRequest)), "query.workspace")
		res = f.do(http.MethodGet, "/api/v1/deployments?workspace=ws", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Len(t, res.json(t)["items"], 2, "the workspace's deployments, through their system")
		res = f.do(http.MethodGet, "/api/v1/deployments?workspace=elsewhere", "read", nil)
		require.Empty(t, res.json(t)["items"])
		res = f.do(http.MethodGet, "/api/v1/job-agents", "read", nil)
		require.Contains(t, string(res.body), `"ext"`)

		// Delete: refused while others depend on it, else gone.
		f.do(http.MethodDelete, "/api/v1/job-agents/ext", "write", nil).problem(t, http.StatusConflict)
		f.do(http.MethodDelete, "/api/v1/policies/p2", "approve", nil, "If-Match", `"9"`).problem(t, http.StatusPreconditionFailed)
		f.do(http.MethodDelete, "/api/v1/policies/p2", "write", nil).problem(t, http.StatusForbidden)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodDelete, "/api/v1/policies/p2", "approve", nil).status)
		f.do(http.MethodDelete, "/api/v1/policies/p2", "approve", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodGet, "/api/v1/policies/p2", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodDelete, "/api/v1/workspaces/ws", "write", nil).problem(t, http.StatusConflict)
	})
}

func TestObjectsConcurrentReplace(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		statuses := concurrently(6, func() int {
			env := map[string]any{"id": "dev", "system_id": "sys", "name": "dev", "resource_selector": "true", "metadata": map[string]any{"raced": "yes"}}
			return f.do(http.MethodPut, "/api/v1/environments/dev", "write", env, "If-Match", `"1"`).status
		})
		requireOneWins(t, statuses, http.StatusOK, http.StatusPreconditionFailed)
	})
}

// TestObjectGetEditPut: what a GET returns is the object itself (with
// object_version and updated_at beside its fields, the version also the
// ETag), and PUT takes it back edited, as it is: its object_version is the
// precondition, so a stale copy is 412 and changes nothing.
func TestObjectGetEditPut(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		res := f.do(http.MethodGet, "/api/v1/environments/dev", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		got := res.json(t)
		require.Equal(t, "dev", got["id"])
		require.Equal(t, res.header.Get("ETag"), fmt.Sprintf("%q", fmt.Sprint(got["object_version"])))
		require.NotEmpty(t, got["updated_at"])
		require.NotContains(t, got, "value")

		got["name"] = "development"
		put := f.do(http.MethodPut, "/api/v1/environments/dev", "write", got)
		require.Equal(t, http.StatusOK, put.status, string(put.body))
		require.Equal(t, "development", put.json(t)["name"])
		require.EqualValues(t, got["object_version"].(float64)+1, put.json(t)["object_version"])

		// The copy read before that write is stale now: 412 with its version
		// named, and nothing changes.
		got["name"] = "stale"
		f.do(http.MethodPut, "/api/v1/environments/dev", "write", got).problem(t, http.StatusPreconditionFailed)
		require.Equal(t, "development", f.do(http.MethodGet, "/api/v1/environments/dev", "read", nil).json(t)["name"])
		// A header wins over the body's version; a bad body version is 422.
		got["object_version"] = "soon"
		require.Contains(t, locations(f.do(http.MethodPut, "/api/v1/environments/dev", "write", got).problem(t, http.StatusUnprocessableEntity)), "body.object_version")
		// If-Match on what does not exist is 412, not a create.
		f.do(http.MethodPut, "/api/v1/environments/ghost", "write", map[string]any{"id": "ghost", "system_id": "sys", "name": "ghost"}, "If-Match", `"3"`).problem(t, http.StatusPreconditionFailed)
		f.do(http.MethodGet, "/api/v1/environments/ghost", "read", nil).problem(t, http.StatusNotFound)
	})
}

// TestVariableSets: variable sets are objects of their own under a system:
// created, read, listed by system, validated with their field, refused
// for a missing system, and deleted.
func TestVariableSets(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		vs := map[string]any{"id": "prod-vars", "system_id": "sys", "name": "prod", "selector": `environment.name == "prod"`, "priority": 2,
			"values": map[string]any{"region": map[string]any{"literal": "eu"}}}
		res := f.do(http.MethodPut, "/api/v1/variable-sets/prod-vars", "write", vs)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		res = f.do(http.MethodGet, "/api/v1/variable-sets?parent=sys", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		items := res.json(t)["items"].([]any)
		require.Len(t, items, 1)
		require.Equal(t, "eu", items[0].(map[string]any)["values"].(map[string]any)["region"].(map[string]any)["literal"])

		vs["selector"] = "environment.name =="
		require.Contains(t, locations(f.do(http.MethodPut, "/api/v1/variable-sets/prod-vars", "write", vs).problem(t, http.StatusUnprocessableEntity)), "body.selector")
		vs["selector"], vs["system_id"] = "true", "nope"
		f.do(http.MethodPut, "/api/v1/variable-sets/prod-vars", "write", vs).problem(t, http.StatusNotFound)
		require.Equal(t, `"1"`, f.do(http.MethodGet, "/api/v1/variable-sets/prod-vars", "read", nil).header.Get("ETag"), "refused writes change nothing")

		require.Equal(t, http.StatusNoContent, f.do(http.MethodDelete, "/api/v1/variable-sets/prod-vars", "write", nil).status)
		f.do(http.MethodGet, "/api/v1/variable-sets/prod-vars", "read", nil).problem(t, http.StatusNotFound)
	})
}
