package api_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
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

func FuzzJobTake(f *testing.F) {
	fx := setup(f, "memory")
	fx.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"})
	fx.drain()
	fuzzOn(f, fx, http.MethodPost, "/api/v1/job-agents/ext/jobs/next?wait=0s", map[string]any{"taker": "host-1"})
}

// takenJob is a fixture whose web:dev:r1 job pull agent ext took (hand-out 1).
func takenJob(f *testing.F) (*fixture, string) {
	fx := setup(f, "memory")
	fx.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"})
	job := fx.activeJob("web:dev:r1")
	fx.take("ext", "host-1")
	return fx, job
}

func FuzzJobHeartbeat(f *testing.F) {
	fx, job := takenJob(f)
	fuzzOn(f, fx, http.MethodPost, "/api/v1/job-agents/ext/jobs/"+url.PathEscape(job)+"/heartbeat", map[string]any{"hand_out": 1})
}

func FuzzTakenJobReport(f *testing.F) {
	fx, job := takenJob(f)
	fuzzOn(f, fx, http.MethodPost, "/api/v1/job-agents/ext/jobs/"+url.PathEscape(job)+"/report",
		map[string]any{"hand_out": 1, "status": "inProgress", "message": "ok", "links": map[string]any{"logs": "https://ci.example/1"}},
		map[string]any{"hand_out": 2, "status": "successful"})
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
		map[string]any{"id": "p", "workspace_id": "ws", "name": "p", "priority": 1, "enabled": true, "selector": "true",
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

func FuzzRunCreate(f *testing.F) {
	fuzzRoute(f, http.MethodPost, "/api/v1/runs",
		map[string]any{"kind": "repo", "id": "task-1", "repo": "acme/api", "max_retries": 1, "depends_on": []any{"task-0"},
			"settings": map[string]any{"auto_merge": true, "stall_threshold": "20m", "off_peak": map[string]any{"only": true, "start_hour": 22, "end_hour": 6}}},
		map[string]any{"kind": "standalone", "id": "nightly-1", "workflow": "nightly"},
		map[string]any{"kind": "pr-review", "id": "review-1", "pr_url": "https://example.test/acme/api/pull/7", "settings": map[string]any{"review_trigger": "on_ci_pass"}},
		map[string]any{"kind": "persistent-agent", "id": "bot", "settings": map[string]any{"pod_lifecycle": "sticky", "keep_warm": "10m", "max_turn_duration": "1h"}})
}

func FuzzRunIntent(f *testing.F) {
	fx := setup(f, "memory")
	fx.createRuns()
	fuzzOn(f, fx, http.MethodPost, "/api/v1/runs/repo/task-1/intents", map[string]any{"intent": "cancel"}, map[string]any{"intent": "retry"})
}

func FuzzRunMessage(f *testing.F) {
	fx := setup(f, "memory")
	fx.createRuns()
	fuzzOn(f, fx, http.MethodPost, "/api/v1/runs/persistent-agent/bot/messages", map[string]any{"text": "triage issue 42"})
}

func FuzzApply(f *testing.F) {
	doc := func(kind, name string, meta, spec map[string]any) map[string]any {
		m := map[string]any{"name": name}
		for k, v := range meta {
			m[k] = v
		}
		return map[string]any{"apiVersion": "reconciler.dev/v1", "kind": kind, "metadata": m, "spec": spec}
	}
	fuzzRoute(f, http.MethodPost, "/api/v1/apply",
		map[string]any{"dry_run": true, "documents": []any{
			doc("Workspace", "ws", nil, map[string]any{"name": "acme"}),
			doc("Environment", "staging", map[string]any{"system": "sys"}, map[string]any{"name": "staging", "resource_selector": `resource.kind == "cluster"`}),
			doc("Resource", "r2", map[string]any{"workspace": "ws"}, map[string]any{"kind": "cluster", "identifier": "k8s/r2", "metadata": map[string]any{"region": "eu-1"}}),
			doc("Deployment", "api", map[string]any{"system": "sys"}, map[string]any{"name": "API", "slug": "api", "job_agent_id": "ext", "resource_selector": "true"}),
			doc("VariableSet", "defaults", map[string]any{"system": "sys"}, map[string]any{"name": "defaults", "priority": 1, "values": map[string]any{"region": map[string]any{"literal": "eu"}}}),
		}},
		map[string]any{"prune": true, "documents": []any{
			doc("System", "sys", map[string]any{"workspace": "ws"}, map[string]any{"name": "shop"}),
			doc("Policy", "after-dev", map[string]any{"workspace": "ws"}, map[string]any{"name": "after dev", "selector": `environment.name == "prod"`, "enabled": true,
				"rules": []any{map[string]any{"id": "w", "type": "deploymentWindow", "rrule": "FREQ=WEEKLY;BYDAY=MO", "duration_minutes": 60}}}),
		}})
}

func FuzzEnvironmentPut(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/environments/staging",
		map[string]any{"id": "staging", "system_id": "sys", "name": "staging", "resource_selector": `resource.kind == "cluster"`})
}

func FuzzResourcePut(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/resources/r2",
		map[string]any{"id": "r2", "workspace_id": "ws", "kind": "cluster", "identifier": "k8s/r2", "name": "r2", "metadata": map[string]any{"region": "eu-1"}})
}

func FuzzJobAgentPut(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/job-agents/gha",
		map[string]any{"id": "gha", "name": "gha", "type": "api", "config": map[string]any{api.ReportSecretKey: agentSecretRef}},
		map[string]any{"id": "gha", "name": "gha", "type": "github-actions", "config": map[string]any{"owner": "acme", "repo": "api", "workflow": "deploy.yaml", "ref": "main"}})
}

func FuzzWorkspacePut(f *testing.F) {
	fuzzRoute(f, http.MethodPut, "/api/v1/workspaces/ws2", map[string]any{"id": "ws2", "name": "second"})
}

// FuzzParseSignature: a signature header is accepted only in its one
// canonical spelling, so no two accepted headers carry the same MAC (a
// replay cannot respell a used signature), and parsing never panics.
func FuzzParseSignature(f *testing.F) {
	good := api.SignRequest("secret", time.Unix(1_700_000_000, 0), http.MethodPost, "/api/v1/jobs/j/report", "j", []byte(`{}`))
	for _, seed := range []string{good, good + "\u00a0", " " + good, strings.ToUpper(good), "sha256=", "sha256=zz", good[:len(good)-1], good + "0"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, h string) {
		mac, ok := api.ParseSignature(h)
		if !ok {
			return
		}
		require.Len(t, mac, 32)
		require.Equal(t, "sha256="+hex.EncodeToString(mac), h, "only the canonical spelling is accepted")
	})
}

// FuzzRequestTarget: whatever the path and query of a GET (ids and filters
// with NUL, control characters, invalid UTF-8, broken escapes), the API
// answers no 5xx and refuses with a problem document.
func FuzzRequestTarget(f *testing.F) {
	fx := setup(f, "memory")
	for _, seed := range []string{"/api/v1/deployments/web", "/api/v1/deployments/a%00b", "/api/v1/jobs?status=a%00",
		"/api/v1/targets/web:prod:r1/explain", "/api/v1/targets?cursor=%ff", "/api/v1/versions/v%0a1", "/api/v1/audit?cursor=-1",
		"/api/v1/catalog/policy/%00/revisions", "/api/v1/jobs?x=%zz", "/api/v1/workflows/%c3%28"} {
		f.Add(seed)
	}
	h := fx.server.Handler()
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(u.Path, "/api/v1/") {
			return
		}
		req := httptest.NewRequest(http.MethodGet, "http://x/", nil)
		req.URL, req.RequestURI = u, target
		req.Header.Set("Authorization", "Bearer "+fx.tokens["admin"])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("GET %q: %d %s", target, w.Code, w.Body)
		}
		if w.Code >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("GET %q: %d without a problem document", target, w.Code)
		}
	})
}
