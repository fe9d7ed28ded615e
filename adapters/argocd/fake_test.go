package argocd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/contract"
	"github.com/reconcilerhq/reconciler/internal/jobagent/jobagenttest"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
)

const token = "argocd-test-token"

// fakeArgoCD implements the Argo CD REST endpoints the agent uses: get,
// patch (merge) and sync an Application, terminate its operation. Each
// GET moves a sync one step: requested → Running → Succeeded with the
// app Progressing → Healthy (or the configured end).
type fakeArgoCD struct {
	*jobagenttest.Server
	// endHealth is the health after a sync (default Healthy); failSync
	// makes the operation fail.
	endHealth string
	failSync  bool
	malformed bool
	// statusLag is how many polls the app's sync status stays at the old
	// revision after a sync succeeded (Argo CD refreshes it later).
	statusLag int

	apps    map[string]*fakeApp
	syncs   []map[string]any
	patches []map[string]any
}

type fakeApp struct {
	revision   string
	namespace  string
	params     []any  // Helm parameters, kept whole (forceString)
	sources    []any  // spec.sources of a multi-source app (nil: spec.source)
	statusRev  string // the revision the status shows: the synced one once the sync succeeded and lag ran out
	lag        int    // polls the status stays at statusRev after a sync succeeded
	operation  *operation
	opState    *operation
	phase      string
	message    string
	sync       string
	health     string
	steps      int
	terminated bool
}

func newFakeArgoCD(t *testing.T, apps ...string) *fakeArgoCD {
	f := &fakeArgoCD{endHealth: "Healthy", apps: map[string]*fakeApp{}}
	for _, a := range apps {
		f.apps[a] = &fakeApp{revision: "v0", statusRev: "v0", namespace: "default", sync: "Synced", health: "Healthy",
			params: []any{map[string]any{"name": "replicas", "value": "1"}}}
	}
	f.Server = jobagenttest.NewServer(t, jobagenttest.ServerOptions{Authorized: jobagenttest.Bearer(token),
		Unauthorized: map[string]any{"error": "invalid session", "code": 16}, FaultBody: map[string]any{"error": "try later", "code": 14},
		Definition: "testdata/argo-cd.swagger.json"}, f.handle)
	return f
}

func (f *fakeArgoCD) config(app string) map[string]any {
	return map[string]any{"server": f.URL, "application": app, "revision": "v1.2.3",
		"parameters": map[string]any{"image.tag": "v1.2.3"}, "namespace": "shop", "tokenRef": "env:RECONCILER_SECRET_ARGOCD"}
}

// handle serves the Application endpoints (under f.Mu).
func (f *fakeArgoCD) handle(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/applications/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	name, sub, _ := strings.Cut(rest, "/")
	app, ok := f.apps[name]
	if !ok && r.URL.Query().Get("project") == "" {
		// Argo CD cannot tell a missing application from a forbidden one
		// without the project: it answers 403.
		writeError(w, http.StatusForbidden, `{"error":"permission denied","code":7}`)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf(`{"error":"applications.argoproj.io \"%s\" not found","code":5}`, name))
		return
	}
	var body map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPatch {
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil || body["name"] != name {
			writeError(w, http.StatusBadRequest, `{"error":"bad request","code":3}`)
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && sub == "":
		if f.malformed {
			f.malformed = false
			w.Header().Set(contract.OffContract, "malformed on purpose")
			_, _ = w.Write([]byte(`{"metadata": `))
			return
		}
		f.step(app)
		jobagenttest.WriteJSON(w, http.StatusOK, f.render(name, app))
	case r.Method == http.MethodPatch && sub == "":
		if body["patchType"] != "merge" {
			writeError(w, http.StatusBadRequest, `{"error":"unsupported patch type","code":3}`)
			return
		}
		var p struct {
			Spec struct {
				Source *struct {
					TargetRevision string `json:"targetRevision"`
					Helm           *struct {
						Parameters []any `json:"parameters"`
					} `json:"helm"`
				} `json:"source"`
				Sources     []any `json:"sources"`
				Destination *struct {
					Namespace string `json:"namespace"`
				} `json:"destination"`
			} `json:"spec"`
		}
		patch, _ := body["patch"].(string)
		if err := json.Unmarshal([]byte(patch), &p); err != nil {
			writeError(w, http.StatusBadRequest, `{"error":"bad patch","code":3}`)
			return
		}
		if s := p.Spec.Source; s != nil {
			if s.TargetRevision != "" {
				app.revision = s.TargetRevision
			}
			if s.Helm != nil {
				app.params = s.Helm.Parameters
			}
		}
		if p.Spec.Sources != nil {
			app.sources = p.Spec.Sources
			if rev, _ := p.Spec.Sources[0].(map[string]any)["targetRevision"].(string); rev != "" {
				app.revision = rev
			}
		}
		if d := p.Spec.Destination; d != nil {
			app.namespace = d.Namespace
		}
		var pm map[string]any
		_ = json.Unmarshal([]byte(patch), &pm)
		f.patches = append(f.patches, pm)
		jobagenttest.WriteJSON(w, http.StatusOK, f.render(name, app))
	case r.Method == http.MethodPost && sub == "sync":
		if app.operation != nil || app.phase == "Running" {
			writeError(w, http.StatusConflict, `{"error":"another operation is already in progress","code":9}`)
			return
		}
		var op operation
		b, _ := json.Marshal(body)
		_ = json.Unmarshal(b, &struct {
			Infos *[]info `json:"infos"`
		}{&op.Info})
		f.syncs = append(f.syncs, body)
		app.operation, app.steps, app.terminated = &op, 0, false
		jobagenttest.WriteJSON(w, http.StatusOK, f.render(name, app))
	case r.Method == http.MethodDelete && sub == "operation":
		if app.phase != "Running" && app.operation == nil {
			writeError(w, http.StatusConflict, `{"error":"Unable to terminate operation. No operation is in progress","code":9}`)
			return
		}
		app.terminated = true
		jobagenttest.WriteJSON(w, http.StatusOK, map[string]any{})
	default:
		http.NotFound(w, r)
	}
}

// writeError answers code with Argo CD's JSON error body.
func writeError(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// step moves a sync one step.
func (f *fakeArgoCD) step(app *fakeApp) {
	if app.lag > 0 {
		if app.lag--; app.lag == 0 {
			app.statusRev = app.revision
		}
	}
	switch {
	case app.operation != nil:
		app.opState, app.operation, app.phase, app.sync = app.operation, nil, "Running", "OutOfSync"
	case app.phase == "Running" && app.terminated:
		app.phase, app.message = "Failed", "Operation terminated"
	case app.phase == "Running" && f.failSync:
		app.phase, app.message = "Failed", "one or more objects failed to apply"
	case app.phase == "Running":
		app.phase, app.sync, app.health = "Succeeded", "Synced", "Progressing"
		app.lag = f.statusLag
		if app.lag == 0 {
			app.statusRev = app.revision
		}
	case app.phase == "Succeeded" && app.health == "Progressing":
		app.health = f.endHealth
	}
}

func (f *fakeArgoCD) render(name string, app *fakeApp) map[string]any {
	rev := app.statusRev
	status := map[string]any{
		"sync":   map[string]any{"status": app.sync, "revision": rev},
		"health": map[string]any{"status": app.health},
	}
	if app.opState != nil {
		status["operationState"] = map[string]any{"operation": map[string]any{"info": app.opState.Info, "sync": map[string]any{"revision": app.revision}},
			"phase": app.phase, "message": app.message, "startedAt": "2026-11-23T10:00:00Z"}
		if app.phase == "Succeeded" {
			status["operationState"].(map[string]any)["syncResult"] = map[string]any{"revision": app.revision}
		}
	}
	if app.sources != nil {
		status["sync"].(map[string]any)["revisions"] = []any{rev, "main"}
		if st, ok := status["operationState"].(map[string]any); ok && app.phase == "Succeeded" {
			st["syncResult"] = map[string]any{"revisions": []any{app.revision, "main"}}
		}
	}
	out := map[string]any{
		"metadata": map[string]any{"name": name, "namespace": "argocd"},
		"spec": map[string]any{"source": map[string]any{"repoURL": "https://git.example/app.git", "targetRevision": app.revision,
			"helm": map[string]any{"parameters": app.params}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": app.namespace}},
		"status": status,
	}
	if app.sources != nil {
		spec := out["spec"].(map[string]any)
		delete(spec, "source")
		spec["sources"] = app.sources
	}
	if app.operation != nil {
		out["operation"] = map[string]any{"info": app.operation.Info, "sync": map[string]any{"revision": app.revision}}
	}
	return out
}

// syncsOf counts the syncs started for job id (by the info carrying its
// correlation key).
func (f *fakeArgoCD) syncsOf(id string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, s := range f.syncs {
		for _, i := range s["infos"].([]any) {
			if i.(map[string]any)["value"] == jobfollow.CorrelationKey(id) {
				n++
			}
		}
	}
	return n
}

func (f *fakeArgoCD) syncCount() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.syncs)
}

var testSecrets = configmap.Secrets{"env:RECONCILER_SECRET_ARGOCD": token}
