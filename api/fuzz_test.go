package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// fuzzRoute fuzzes the JSON body of one route on a server over the
// in-memory stores: whatever the body, no panic and no 500, and every
// refusal is a problem document. Seeds are valid bodies.
func fuzzRoute(f *testing.F, method, path string, seeds ...any) {
	fx := setup(f, "memory")
	fuzzOn(f, fx, method, path, seeds...)
}

func fuzzOn(f *testing.F, fx *fixture, method, path string, seeds ...any) {
	for _, s := range seeds {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"id":"x","\u0000":1}`))
	f.Add([]byte(`[]`))
	h := fx.server.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+fx.tokens["admin"])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, w.Code, w.Body)
		}
		if w.Code >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %s %q: %d without a problem document: %s", method, path, body, w.Code, w.Body)
		}
	})
}

func FuzzVersionCreate(f *testing.F) {
	fuzzRoute(f, http.MethodPost, "/api/v1/versions",
		map[string]any{"deployment_id": "web", "tag": "v1", "config": map[string]any{"image": "web:1"}, "metadata": map[string]any{"a": "b"}},
		map[string]any{"id": "web-x", "deployment_id": "web", "tag": "x", "status": "paused"})
}

func FuzzVersionStatus(f *testing.F) {
	fx := setup(f, "memory")
	fx.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"})
	fuzzOn(f, fx, http.MethodPost, "/api/v1/versions/web-v1/status", map[string]any{"status": "paused"})
}

func FuzzApproval(f *testing.F) {
	fx := setup(f, "memory")
	fx.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"})
	fuzzOn(f, fx, http.MethodPost, "/api/v1/versions/web-v1/approvals", map[string]any{"environment_id": "prod"})
}

func FuzzForceDeploy(f *testing.F) {
	fx := setup(f, "memory")
	fx.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"})
	fuzzOn(f, fx, http.MethodPost, "/api/v1/versions/web-v1/force-deploys", map[string]any{"environment_id": "prod", "reason": "r", "expires_in": "1h"})
}

func FuzzJobReport(f *testing.F) {
	fx := setup(f, "memory")
	fx.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"})
	job := fx.activeJob("web:dev:r1")
	fuzzOn(f, fx, http.MethodPost, "/api/v1/jobs/"+url.PathEscape(job)+"/report",
		map[string]any{"status": "inProgress", "message": "ok", "external_id": "x", "outputs": map[string]any{"url": "u"}},
		map[string]any{"status": "successful"})
}

func FuzzWorkflowRun(f *testing.F) {
	fx := setup(f, "memory")
	fx.publish("gated", gated)
	fuzzOn(f, fx, http.MethodPost, "/api/v1/workflows", map[string]any{"template": "gated", "parameters": map[string]any{"image": "x"}})
}

func FuzzRevisionCreate(f *testing.F) {
	fuzzRoute(f, http.MethodPost, "/api/v1/catalog/workflow-template/gated/revisions", map[string]any{"content": gated, "labels": map[string]any{"a": "b"}})
}

func FuzzRevisionEdit(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/catalog/policy/p/revisions/r1", map[string]any{"version": 1, "content": map[string]any{"id": "p"}})
}

func FuzzRevisionReject(f *testing.F) {
	fuzzRoute(f, http.MethodPost, "/api/v1/catalog/policy/p/revisions/r1/reject", map[string]any{"version": 1, "reason": "no"})
}

func FuzzRedrive(f *testing.F) {
	fuzzRoute(f, http.MethodPost, "/api/v1/operations/dead/redrive", map[string]any{"kind": "k", "scope_type": "s", "scope_id": "i"})
}

func FuzzDeploymentPut(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/deployments/api",
		map[string]any{"id": "api", "system_id": "sys", "name": "API", "slug": "api", "resource_selector": "true",
			"variables": []any{map[string]any{"key": "replicas", "default": map[string]any{"literal": 2}}}})
}

func FuzzPolicyPut(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/policies/p",
		map[string]any{"id": "p", "name": "p", "priority": 1, "enabled": true, "selector": "true",
			"rules": []any{map[string]any{"id": "r", "type": "anyApproval", "min_approvals": 1}}})
}

func FuzzSystemPut(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/systems/sys",
		map[string]any{"id": "sys", "workspace_id": "ws", "name": "shop"})
}

func FuzzVariableSetPut(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/variable-sets/vs",
		map[string]any{"id": "vs", "system_id": "sys", "name": "vs", "selector": "true", "priority": 1,
			"values": map[string]any{"k": map[string]any{"literal": "v"}}})
}

func FuzzTokenCreate(f *testing.F) {
	fuzzRoute(f, http.MethodPost, "/api/v1/tokens",
		map[string]any{"name": "ci", "scopes": []any{"read", "write"}, "expires_in": "720h"},
		map[string]any{"name": "agent", "scopes": []any{"agent"}})
}

func FuzzRevisionMetadata(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/catalog/policy/p/revisions/r1/metadata",
		map[string]any{"version": 1, "labels": map[string]any{"tier": "gold"}, "annotations": map[string]any{"note": "x"}})
}
