package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/argocd"
	"github.com/reconcilerhq/reconciler/adapters/githubactions"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// Credentials the fakes require; serve reads them from its environment
// through the secret resolver.
const (
	e2eGitHubToken = "gh-e2e-token"
	e2eArgoToken   = "argocd-e2e-token"
	e2eDDAPIKey    = "dd-e2e-api"
	e2eDDAppKey    = "dd-e2e-app"
)

// e2eWorld is the outside world of the end-to-end test: GitHub Actions,
// Argo CD and Datadog as httptest servers implementing the endpoints the
// agents use, recording what was asked of them.
type e2eWorld struct {
	t         *testing.T
	mu        sync.Mutex
	errorRate float64
	runs      map[int64]string // GitHub run id → display title
	syncs     map[string]string
	queries   []string
	github    *httptest.Server
	argo      *httptest.Server
	datadog   *httptest.Server
}

func newE2EWorld(t *testing.T, errorRate float64) *e2eWorld {
	w := &e2eWorld{t: t, errorRate: errorRate, runs: map[int64]string{}, syncs: map[string]string{}}
	w.github = httptest.NewServer(http.HandlerFunc(w.serveGitHub))
	w.argo = httptest.NewServer(http.HandlerFunc(w.serveArgo))
	w.datadog = httptest.NewServer(http.HandlerFunc(w.serveDatadog))
	t.Cleanup(func() { w.github.Close(); w.argo.Close(); w.datadog.Close() })
	return w
}

func e2eJSON(rw http.ResponseWriter, code int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(v)
}

// serveGitHub: workflow_dispatch of migrate.yml starts a run that is
// completed successfully when first read.
func (w *e2eWorld) serveGitHub(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+e2eGitHubToken {
		e2eJSON(rw, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return
	}
	const wf = "/repos/acme/shop/actions/workflows/migrate.yml"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == wf+"/runs":
		runs := []any{}
		for id, title := range w.runs {
			runs = append(runs, map[string]any{"id": id, "display_title": title, "status": "queued"})
		}
		e2eJSON(rw, http.StatusOK, map[string]any{"total_count": len(runs), "workflow_runs": runs})
	case r.Method == http.MethodPost && r.URL.Path == wf+"/dispatches":
		var body struct {
			Ref    string            `json:"ref"`
			Inputs map[string]string `json:"inputs"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &body) != nil || body.Ref != "main" || body.Inputs["reconciler_job"] == "" {
			e2eJSON(rw, http.StatusUnprocessableEntity, map[string]any{"message": "bad dispatch " + string(b)})
			return
		}
		id := int64(5000 + len(w.runs))
		w.runs[id] = "migrate " + body.Inputs["reconciler_job"]
		e2eJSON(rw, http.StatusOK, map[string]any{"workflow_run_id": id, "html_url": fmt.Sprintf("https://github.example/runs/%d", id)})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/repos/acme/shop/actions/runs/"):
		var id int64
		_, _ = fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/repos/acme/shop/actions/runs/"), &id)
		if _, ok := w.runs[id]; !ok {
			e2eJSON(rw, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
		e2eJSON(rw, http.StatusOK, map[string]any{"id": id, "status": "completed", "conclusion": "success",
			"html_url": fmt.Sprintf("https://github.example/runs/%d", id)})
	default:
		e2eJSON(rw, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
}

// serveArgo: Applications app-eu and app-us; a sync succeeds at once and
// the app is Synced and Healthy.
func (w *e2eWorld) serveArgo(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+e2eArgoToken {
		e2eJSON(rw, http.StatusUnauthorized, map[string]any{"error": "invalid session"})
		return
	}
	rest, _ := strings.CutPrefix(r.URL.Path, "/api/v1/applications/")
	name, sub, _ := strings.Cut(rest, "/")
	if name != "app-eu" && name != "app-us" {
		e2eJSON(rw, http.StatusNotFound, map[string]any{"error": "not found", "code": 5})
		return
	}
	app := map[string]any{"metadata": map[string]any{"name": name}, "spec": map[string]any{"source": map[string]any{"targetRevision": "v0"}}}
	switch {
	case r.Method == http.MethodGet && sub == "":
		if key, ok := w.syncs[name]; ok {
			app["status"] = map[string]any{"sync": map[string]any{"status": "Synced", "revision": "v1.2.3"}, "health": map[string]any{"status": "Healthy"},
				"operationState": map[string]any{"phase": "Succeeded", "operation": map[string]any{"info": []any{map[string]any{"name": argocd.InfoName, "value": key}}}}}
		}
		e2eJSON(rw, http.StatusOK, app)
	case r.Method == http.MethodPatch && sub == "":
		e2eJSON(rw, http.StatusOK, app)
	case r.Method == http.MethodPost && sub == "sync":
		var body struct {
			Revision string `json:"revision"`
			Infos    []struct{ Name, Value string }
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &body) != nil || body.Revision != "v1.2.3" || len(body.Infos) != 1 {
			e2eJSON(rw, http.StatusBadRequest, map[string]any{"error": "bad sync " + string(b)})
			return
		}
		w.syncs[name] = body.Infos[0].Value
		e2eJSON(rw, http.StatusOK, app)
	default:
		e2eJSON(rw, http.StatusNotFound, map[string]any{"error": "not found"})
	}
}

// serveDatadog answers every metrics query with the world's error rate.
func (w *e2eWorld) serveDatadog(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Header.Get("DD-API-KEY") != e2eDDAPIKey || r.Header.Get("DD-APPLICATION-KEY") != e2eDDAppKey || r.URL.Path != "/api/v1/query" {
		e2eJSON(rw, http.StatusForbidden, map[string]any{"errors": []string{"Forbidden"}})
		return
	}
	q := r.URL.Query().Get("query")
	w.queries = append(w.queries, q)
	e2eJSON(rw, http.StatusOK, map[string]any{"status": "ok", "query": q,
		"series": []any{map[string]any{"metric": "errors", "pointlist": []any{[]any{1.7e12, w.errorRate}}}}})
}

// TestServeRunsMultiClusterDeploymentAgainstExternalSystems runs the
// repository's example workflow under a real `reconciler serve` process
// whose github-actions and argo-cd agent records and datadog metric (its
// provider's address) point at local fakes: with a low error rate the
// workflow succeeds; with a bad one the verification fails the workflow,
// and the stored measurement says what Datadog returned.
func TestServeRunsMultiClusterDeploymentAgainstExternalSystems(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	bin, err := buildBinary()
	require.NoError(t, err)
	template, err := os.ReadFile("../../testdata/workflows/multi-cluster-deployment.yaml")
	require.NoError(t, err)
	const datadogProvider = "              type: datadog\n"
	require.Contains(t, string(template), datadogProvider)

	for _, tc := range []struct {
		name      string
		errorRate float64
		want      workflow.WorkflowPhase
	}{
		{"healthy", 0.001, workflow.WorkflowSucceeded},
		{"bad-error-rate", 0.25, workflow.WorkflowFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			world := newE2EWorld(t, tc.errorRate)
			// The example's datadog metric, on the fake's site.
			file := t.TempDir() + "/multi-cluster-deployment.yaml"
			site := strings.Replace(string(template), datadogProvider, datadogProvider+"              address: "+world.datadog.URL+"\n", 1)
			require.NoError(t, os.WriteFile(file, []byte(site), 0o600))
			dsn, _ := pgtest.Schema(t)
			ctx := t.Context()
			be, err := openBackend(ctx, dsn, true, ports.SystemClock)
			require.NoError(t, err)
			defer be.close()
			s := be.releases
			_, err = s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "WS"}, 0)
			require.NoError(t, err)
			for _, r := range []release.Resource{
				{ID: "eu", WorkspaceID: "ws", Kind: "Kubernetes", Identifier: "k8s/eu", Name: "eu", Config: map[string]any{"namespace": "shop-eu"}},
				{ID: "us", WorkspaceID: "ws", Kind: "Kubernetes", Identifier: "k8s/us", Name: "us", Config: map[string]any{"namespace": "shop-us"}},
				{ID: "vm", WorkspaceID: "ws", Kind: "VM", Identifier: "vm/1", Name: "vm"},
			} {
				_, err = s.Resources().Put(ctx, r, 0)
				require.NoError(t, err)
			}
			for _, a := range []release.JobAgent{
				{ID: "github-actions", Name: "GitHub", Type: githubactions.Type, Config: map[string]any{"baseURL": world.github.URL,
					"owner": "acme", "repo": "shop", "tokenRef": "env:RECONCILER_SECRET_GITHUB_TOKEN"}},
				{ID: "argocd", Name: "Argo CD", Type: argocd.Type, Config: map[string]any{"server": world.argo.URL,
					"tokenRef": "env:RECONCILER_SECRET_ARGOCD_TOKEN"}},
			} {
				_, err = s.JobAgents().Put(ctx, a, 0)
				require.NoError(t, err)
			}
			cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "", "--lock", "2s", "--outbound-allow", "127.0.0.0/8",
				"--secret-destination", "env:RECONCILER_SECRET_GITHUB_TOKEN="+world.github.URL,
				"--secret-destination", "env:RECONCILER_SECRET_ARGOCD_TOKEN="+world.argo.URL,
				"--secret-destination", "env:RECONCILER_SECRET_DATADOG_*="+world.datadog.URL)
			cmd.Env = append(os.Environ(), "RECONCILER_DSN=",
				"RECONCILER_SECRET_GITHUB_TOKEN="+e2eGitHubToken, "RECONCILER_SECRET_ARGOCD_TOKEN="+e2eArgoToken,
				"RECONCILER_SECRET_DATADOG_API_KEY="+e2eDDAPIKey, "RECONCILER_SECRET_DATADOG_APP_KEY="+e2eDDAppKey)
			startProcess(t, cmd, "engine starting", "serve")

			id := "mcd-" + tc.name
			_, err = runRoot(t, "workflow", "run", file, "--id", id, "--dsn", dsn, "--workspace", "ws",
				"--param", "version=v1.2.3", "--param", "runMigrations=true")
			require.NoError(t, err)
			var st flow.Status
			waitUntil(t, 60*time.Second, func() bool {
				st, err = (&flow.Controller{Store: be.workflows}).Status(ctx, id)
				return err == nil && st.Workflow.Phase.Terminal()
			})
			require.Equal(t, tc.want, st.Workflow.Phase, st.Workflow.Message)

			runs := map[string]ports.TaskRunRecord{}
			for _, r := range st.TaskRuns {
				runs[r.ID] = r
			}
			require.Equal(t, workflow.TaskSucceeded, runs["migrate-db"].Phase, runs["migrate-db"].Message)
			require.Equal(t, "5000", runs["migrate-db"].ExternalID)
			for _, r := range []string{"deploy.0", "deploy.1"} {
				require.Equal(t, workflow.TaskSucceeded, runs[r].Phase, "%s: %s", r, runs[r].Message)
			}
			world.mu.Lock()
			require.Len(t, world.runs, 1, "one GitHub run")
			require.Len(t, world.syncs, 2, "one sync per cluster")
			require.ElementsMatch(t, []string{"sum:errors{service:app-eu}.as_rate()", "sum:errors{service:app-us}.as_rate()"}, world.queries)
			world.mu.Unlock()

			for _, r := range []string{"verify.0", "verify.1"} {
				v := runs[r]
				ms, _ := v.Outputs["measurements"].(map[string]any)
				taken, _ := ms["error-rate"].([]any)
				require.Len(t, taken, 1, "%s: %+v", r, v.Outputs)
				result := taken[0].(map[string]any)["result"].(map[string]any)
				require.Equal(t, tc.errorRate, result["value"], "the measurement keeps what Datadog returned")
				require.Contains(t, result["query"], "sum:errors{service:app-")
				if tc.want == workflow.WorkflowFailed {
					out, err := runRoot(t, "workflow", "status", id, "--dsn", dsn)
					require.NoError(t, err)
					require.Contains(t, out, `error-rate (1 measured): last result {"from":`, "the status says what was measured")
					require.Contains(t, out, fmt.Sprintf(`"value":%v}`, tc.errorRate))
					require.Equal(t, workflow.TaskFailed, v.Phase)
					require.Contains(t, v.Message, "error-rate")
				} else {
					require.Equal(t, workflow.TaskSucceeded, v.Phase, v.Message)
				}
			}
		})
	}
}
