package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestApply: the apply route creates, reports, round-trips with the
// documents routes, refuses a bad document with 422 naming its field
// (changing nothing), needs scope write, and deletes through the documents
// route.
func TestApply(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		docs := []any{
			map[string]any{"apiVersion": apply.APIVersion, "kind": "Environment", "metadata": map[string]any{"name": "staging", "system": "sys"},
				"spec": map[string]any{"resource_selector": "true"}},
			map[string]any{"apiVersion": apply.APIVersion, "kind": "Deployment", "metadata": map[string]any{"name": "api", "system": "sys"},
				"spec": map[string]any{"name": "API", "slug": "api", "job_agent_id": "ext", "resource_selector": "true"}},
		}
		res := f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": docs})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var out apply.Response
		require.NoError(t, json.Unmarshal(res.body, &out))
		require.Equal(t, []apply.Result{{Kind: "Environment", Name: "staging", Action: apply.Created}, {Kind: "Deployment", Name: "api", Action: apply.Created}}, out.Results)
		require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/api/v1/targets/api:staging:r1", "read", nil).status, "targets recomputed")

		// What the documents route prints, apply takes unchanged.
		res = f.do(http.MethodGet, "/api/v1/documents/deployments", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var list struct{ Items []apply.Document }
		require.NoError(t, json.Unmarshal(res.body, &list))
		require.NotEmpty(t, list.Items)
		res = f.do(http.MethodPost, "/api/v1/apply", "write", apply.Request{Documents: list.Items})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.NoError(t, json.Unmarshal(res.body, &out))
		for _, r := range out.Results {
			require.Equal(t, apply.Unchanged, r.Action, "%s/%s %v", r.Kind, r.Name, r.Changes)
		}
		res = f.do(http.MethodGet, "/api/v1/documents/Deployment/api", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		f.do(http.MethodGet, "/api/v1/documents/clusters", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodGet, "/api/v1/documents/deployment/nope", "read", nil).problem(t, http.StatusNotFound)

		// A bad document: 422 naming it, and nothing written.
		docs[0].(map[string]any)["spec"] = map[string]any{"resource_selector": `"dev"`}
		docs[1].(map[string]any)["spec"].(map[string]any)["name"] = "renamed"
		p := f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": docs}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.documents[0].spec.resource_selector")
		res = f.do(http.MethodGet, "/api/v1/documents/deployment/api", "read", nil)
		require.Contains(t, string(res.body), `"API"`, "the refused apply changed nothing")
		p = f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": docs, "colour": 1}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.colour")

		// Scope write.
		f.do(http.MethodPost, "/api/v1/apply", "read", map[string]any{"documents": docs}).problem(t, http.StatusForbidden)
		f.do(http.MethodDelete, "/api/v1/documents/deployment/api", "read", nil).problem(t, http.StatusForbidden)

		// A policy is published to the catalog approved by the caller: it
		// needs scope approve beside write.
		pol := []any{map[string]any{"apiVersion": apply.APIVersion, "kind": "Policy", "metadata": map[string]any{"name": "gate", "workspace": "ws"},
			"spec": map[string]any{"enabled": true, "selector": `environment.name == "staging"`,
				"rules": []any{map[string]any{"id": "a", "type": "anyApproval", "min_approvals": 1}}}}}
		f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": pol}).problem(t, http.StatusForbidden)
		res = f.do(http.MethodPost, "/api/v1/apply", "admin", map[string]any{"documents": pol})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		res = f.do(http.MethodGet, "/api/v1/policies/gate", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "gate", res.json(t)["name"])
		res = f.do(http.MethodPost, "/api/v1/apply", "admin", map[string]any{"documents": pol})
		require.NoError(t, json.Unmarshal(res.body, &out))
		require.Equal(t, []apply.Result{{Kind: "Policy", Name: "gate", Action: apply.Unchanged}}, out.Results, "the published revision reads back unchanged")

		// Delete with its targets; a system in use is a conflict.
		f.do(http.MethodDelete, "/api/v1/documents/system/sys", "write", nil).problem(t, http.StatusConflict)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodDelete, "/api/v1/documents/deployment/api", "write", nil).status)
		f.do(http.MethodGet, "/api/v1/targets/api:staging:r1", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodDelete, "/api/v1/documents/deployment/api", "write", nil).problem(t, http.StatusNotFound)
	})
}

// TestApplyEnqueuesWhatItAffects: an applied resource's new targets get
// their desired-release work in apply's own transaction (the live store),
// so the chain picks them up with no resync; a dry run enqueues nothing.
func TestApplyEnqueuesWhatItAffects(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		doc := map[string]any{"apiVersion": apply.APIVersion, "kind": "Resource", "metadata": map[string]any{"name": "r9", "workspace": "ws"},
			"spec": map[string]any{"kind": "cluster", "identifier": "r9", "name": "r9"}}
		target := release.ReleaseTarget{DeploymentID: "web", EnvironmentID: "prod", ResourceID: "r9"}
		key := chain.TargetKey(chain.KindDesiredRelease, target)

		res := f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": []any{doc}, "dry_run": true})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		_, err := f.st.queue.WorkGet(f.ctx, key)
		require.ErrorIs(t, err, ports.ErrNotFound, "a dry run enqueues nothing")

		res = f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": []any{doc}})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		_, err = f.st.queue.WorkGet(f.ctx, key)
		require.NoError(t, err, "the new target's desired release is enqueued by the apply")

		// Exactly: a variable set no deployment reads changes no target's
		// release, so it wakes none (a whole-system re-evaluation would).
		_, err = f.eng.Drain(f.ctx)
		require.NoError(t, err)
		vs := map[string]any{"apiVersion": apply.APIVersion, "kind": "VariableSet", "metadata": map[string]any{"name": "unread", "system": "sys"},
			"spec": map[string]any{"name": "unread", "values": map[string]any{"nobody-reads-this": map[string]any{"literal": 1}}}}
		res = f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": []any{vs}})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		for _, env := range []string{"dev", "prod"} {
			_, err = f.st.queue.WorkGet(f.ctx, chain.TargetKey(chain.KindDesiredRelease, release.ReleaseTarget{DeploymentID: "web", EnvironmentID: env, ResourceID: "r1"}))
			require.ErrorIs(t, err, ports.ErrNotFound, "web:%s:r1 reads nothing of the set: not woken", env)
		}
	})
}
