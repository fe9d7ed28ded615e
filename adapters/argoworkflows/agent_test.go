package argoworkflows

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

const token = "argo-test-token"

var testSecrets = configmap.Secrets{"env:RECONCILER_SECRET_ARGO": token}

// fakeArgo implements Argo Server's submit, get and stop endpoints for
// namespace "ci" and the WorkflowTemplate "deploy". Each GET moves a
// Workflow one step: Pending → Running → the end phase.
type fakeArgo struct {
	mu        sync.Mutex
	end       string
	faults    []int
	malformed bool
	wfs       map[string]*wf
	submits   []map[string]any
	stops     []string
	requests  []string
	srv       *httptest.Server
}

func newFakeArgo(t *testing.T) *fakeArgo {
	f := &fakeArgo{end: "Succeeded", wfs: map[string]*wf{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeArgo) config() map[string]any {
	return map[string]any{"server": f.srv.URL, "namespace": "ci", "workflowTemplate": "deploy",
		"parameters": map[string]any{"version": "v1.2.3", "replicas": 2.0}, "tokenRef": "env:RECONCILER_SECRET_ARGO"}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeArgo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	if len(f.faults) > 0 {
		code := f.faults[0]
		f.faults = f.faults[1:]
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(code)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 16, "message": "token not valid"})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/workflows/ci/")
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
		return
	}
	switch {
	case r.Method == http.MethodPost && rest == "submit":
		var body struct {
			Namespace     string `json:"namespace"`
			ResourceKind  string `json:"resourceKind"`
			ResourceName  string `json:"resourceName"`
			SubmitOptions struct {
				Name       string   `json:"name"`
				Parameters []string `json:"parameters"`
				Labels     string   `json:"labels"`
			} `json:"submitOptions"`
		}
		b, _ := io.ReadAll(r.Body)
		var raw map[string]any
		if json.Unmarshal(b, &body) != nil || json.Unmarshal(b, &raw) != nil || body.ResourceKind != "WorkflowTemplate" || body.Namespace != "ci" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"code": 3, "message": "bad request"})
			return
		}
		if body.ResourceName != "deploy" {
			writeJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": `workflowtemplates.argoproj.io "` + body.ResourceName + `" not found`})
			return
		}
		name := body.SubmitOptions.Name
		if _, exists := f.wfs[name]; exists {
			writeJSON(w, http.StatusConflict, map[string]any{"code": 6, "message": `workflows.argoproj.io "` + name + `" already exists`})
			return
		}
		f.submits = append(f.submits, raw)
		k, v, _ := strings.Cut(body.SubmitOptions.Labels, "=")
		x := &wf{}
		x.Metadata.Name, x.Metadata.Labels = name, map[string]string{k: v}
		f.wfs[name] = x
		writeJSON(w, http.StatusOK, x)
	case r.Method == http.MethodGet:
		x, ok := f.wfs[rest]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
			return
		}
		if f.malformed {
			f.malformed = false
			_, _ = w.Write([]byte(`{"metadata":`))
			return
		}
		switch x.Status.Phase {
		case "":
			x.Status.Phase = "Pending"
		case "Pending":
			x.Status.Phase, x.Status.Progress = "Running", "0/2"
		case "Running":
			x.Status.Phase, x.Status.Progress = f.end, "2/2"
		}
		writeJSON(w, http.StatusOK, x)
	case r.Method == http.MethodPut && strings.HasSuffix(rest, "/stop"):
		name := strings.TrimSuffix(rest, "/stop")
		x, ok := f.wfs[name]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
			return
		}
		f.stops = append(f.stops, name)
		x.Status.Phase, x.Status.Message = "Failed", "Stopped with strategy 'Stop'"
		writeJSON(w, http.StatusOK, x)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
	}
}

func fastOptions() Options {
	return Options{MinPoll: 5 * time.Millisecond, MaxPoll: 20 * time.Millisecond, HTTP: outbound.Options{Backoff: time.Millisecond}}
}

func newAgent(t *testing.T, r ports.JobReporter, o Options) *Agent {
	a := New(r, testSecrets, o)
	t.Cleanup(a.Close)
	return a
}

type reports struct{ ch chan ports.JobReport }

func newReports() *reports { return &reports{ch: make(chan ports.JobReport, 64)} }

func (r *reports) ReportJob(_ context.Context, rep ports.JobReport) error { r.ch <- rep; return nil }

func (r *reports) terminal(t *testing.T) ports.JobReport {
	t.Helper()
	for {
		select {
		case rep := <-r.ch:
			if rep.Status.IsTerminal() {
				return rep
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no terminal report")
		}
	}
}

func TestConformance(t *testing.T) {
	f := newFakeArgo(t)
	porttest.JobAgent(t, func(t *testing.T, r ports.JobReporter) ports.JobAgent { return newAgent(t, r, fastOptions()) },
		porttest.JobAgentOptions{Config: f.config(), Durable: true})
}

func TestSubmitSendsTheDocumentedRequestAndFollowsToSucceeded(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	rep := newReports()
	res, err := newAgent(t, rep, fastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	key := jobfollow.CorrelationKey("job-1")
	name := "deploy-" + key[len(key)-12:]
	require.Equal(t, "ci/"+name, res.ExternalID)
	f.mu.Lock()
	require.Equal(t, map[string]any{"namespace": "ci", "resourceKind": "WorkflowTemplate", "resourceName": "deploy",
		"submitOptions": map[string]any{"name": name, "parameters": []any{"replicas=2", "version=v1.2.3"}, "labels": Label + "=" + key}}, f.submits[0])
	f.mu.Unlock()
	got := rep.terminal(t)
	require.Equal(t, release.JobSuccessful, got.Status)
	require.Equal(t, f.srv.URL+"/workflows/ci/"+name, got.Outputs["url"])
}

func TestFailedWorkflowFailsTheJob(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	f.end = "Error"
	rep := newReports()
	_, err := newAgent(t, rep, fastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobFailure, rep.terminal(t).Status)
}

func TestSubmitRetriedAfterACrashFollowsTheSameWorkflow(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	o := fastOptions()
	o.MinPoll = time.Hour
	first := newAgent(t, newReports(), o)
	r1, err := first.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	first.Close()
	r2, err := newAgent(t, newReports(), o).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, r1, r2)
	f.mu.Lock()
	require.Len(t, f.submits, 1)
	f.mu.Unlock()
}

func TestCancelStopsTheWorkflow(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	o := fastOptions()
	o.MinPoll = time.Hour
	a := newAgent(t, newReports(), o)
	d := porttest.JobAgentDispatch(Type, "job-1", f.config())
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent, Reason: "timed out"}))
	f.mu.Lock()
	require.Len(t, f.stops, 1)
	require.Contains(t, f.requests, "PUT /api/v1/workflows/"+res.ExternalID+"/stop")
	f.mu.Unlock()
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-x", ExternalID: "ci/other", Agent: d.Agent}))
}

func TestRetriesMalformedAndBadConfig(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	f.faults = []int{http.StatusTooManyRequests}
	f.malformed = true
	rep := newReports()
	_, err := newAgent(t, rep, fastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobSuccessful, rep.terminal(t).Status)

	g := newFakeArgo(t)
	g.faults = []int{502}
	_, err = newAgent(t, newReports(), fastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", g.config()))
	require.ErrorContains(t, err, "argo-workflows: submit workflow: status 502", "a submit is not retried on 5xx; the work item's retry is")

	for field, mutate := range map[string]func(map[string]any){
		"job_agent_config.namespace":        func(c map[string]any) { delete(c, "namespace") },
		"job_agent_config.workflowTemplate": func(c map[string]any) { c["workflowTemplate"] = "Deploy_It" },
		"job_agent_config.parameters":       func(c map[string]any) { c["parameters"] = "x" },
	} {
		cfg := f.config()
		mutate(cfg)
		require.ErrorContains(t, ValidateConfig(cfg), field)
	}
	cfg := f.config()
	cfg["workflowTemplate"] = "missing"
	res, err := newAgent(t, newReports(), fastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-2", cfg))
	require.NoError(t, err)
	require.Equal(t, release.JobInvalidJobAgent, res.Status)
	require.Contains(t, res.Message, "job_agent_config.workflowTemplate")
}
