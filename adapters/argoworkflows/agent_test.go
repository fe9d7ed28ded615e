package argoworkflows

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/contract"
	"github.com/reconcilerhq/reconciler/internal/jobagent/jobagenttest"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
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
	*jobagenttest.Server
	end       string
	malformed bool
	wfs       map[string]*wf
	submits   []map[string]any
	stops     []string
	fields    []string // the fields parameter of each GET
	// stopRace makes a Workflow complete just before a stop reaches it.
	stopRace bool
}

func newFakeArgo(t *testing.T) *fakeArgo {
	f := &fakeArgo{end: "Succeeded", wfs: map[string]*wf{}}
	f.Server = jobagenttest.NewServer(t, jobagenttest.ServerOptions{Authorized: jobagenttest.Bearer(token),
		Unauthorized: map[string]any{"code": 16, "message": "token not valid"}, FaultBody: map[string]any{"code": 14, "message": "try later"}, Definition: "testdata/argo-workflows.swagger.json"}, f.handle)
	return f
}

func (f *fakeArgo) config() map[string]any {
	return map[string]any{"server": f.URL, "namespace": "ci", "workflowTemplate": "deploy",
		"parameters": map[string]any{"version": "v1.2.3", "replicas": 2.0}, "tokenRef": "env:RECONCILER_SECRET_ARGO"}
}

// handle serves the Workflow endpoints (under f.Mu).
func (f *fakeArgo) handle(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/workflows/ci/")
	if !ok {
		jobagenttest.WriteJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
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
			jobagenttest.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 3, "message": "bad request"})
			return
		}
		if body.ResourceName != "deploy" {
			jobagenttest.WriteJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": `workflowtemplates.argoproj.io "` + body.ResourceName + `" not found`})
			return
		}
		name := body.SubmitOptions.Name
		if _, exists := f.wfs[name]; exists {
			jobagenttest.WriteJSON(w, http.StatusConflict, map[string]any{"code": 6, "message": `workflows.argoproj.io "` + name + `" already exists`})
			return
		}
		f.submits = append(f.submits, raw)
		k, v, _ := strings.Cut(body.SubmitOptions.Labels, "=")
		x := &wf{}
		x.Metadata.Name, x.Metadata.Labels = name, map[string]string{k: v}
		f.wfs[name] = x
		jobagenttest.WriteJSON(w, http.StatusOK, render(x))
	case r.Method == http.MethodGet:
		x, ok := f.wfs[rest]
		if !ok {
			jobagenttest.WriteJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
			return
		}
		if f.malformed {
			f.malformed = false
			w.Header().Set(contract.OffContract, "malformed on purpose")
			_, _ = w.Write([]byte(`{"metadata":`))
			return
		}
		f.fields = append(f.fields, r.URL.Query().Get("fields"))
		switch x.Status.Phase {
		case "":
			x.Status.Phase = "Pending"
		case "Pending":
			x.Status.Phase, x.Status.Progress = "Running", "0/2"
		case "Running":
			x.Status.Phase, x.Status.Progress = f.end, "2/2"
		}
		jobagenttest.WriteJSON(w, http.StatusOK, render(x))
	case r.Method == http.MethodPut && strings.HasSuffix(rest, "/stop"):
		name := strings.TrimSuffix(rest, "/stop")
		x, ok := f.wfs[name]
		if !ok {
			jobagenttest.WriteJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
			return
		}
		if f.stopRace {
			x.Status.Phase = "Succeeded"
		}
		if x.Status.Phase == "Succeeded" || x.Status.Phase == "Failed" || x.Status.Phase == "Error" {
			// Argo Server's answer (it maps the error to Internal).
			jobagenttest.WriteJSON(w, http.StatusInternalServerError, map[string]any{"code": 2,
				"message": "cannot shutdown a completed workflow: workflow: " + name + ", namespace: ci"})
			return
		}
		f.stops = append(f.stops, name)
		x.Status.Phase, x.Status.Message = "Failed", "Stopped with strategy 'Stop'"
		jobagenttest.WriteJSON(w, http.StatusOK, render(x))
	default:
		jobagenttest.WriteJSON(w, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
	}
}

// render is a Workflow as Argo Server answers it: with its spec, which
// the definition requires.
func render(x *wf) map[string]any {
	return map[string]any{"metadata": x.Metadata, "status": x.Status,
		"spec": map[string]any{"workflowTemplateRef": map[string]any{"name": "deploy"}}}
}

func newAgent(t *testing.T, r ports.JobReporter, o Options) *Agent {
	a := New(r, testSecrets, o)
	t.Cleanup(a.Close)
	return a
}

// runsOf counts the Workflows submitted for job id (by the label carrying
// its correlation key).
func (f *fakeArgo) runsOf(_ *testing.T, id string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, s := range f.submits {
		if s["submitOptions"].(map[string]any)["labels"] == Label+"="+jobfollow.CorrelationKey(id) {
			n++
		}
	}
	return n
}

func TestConformance(t *testing.T) {
	f := newFakeArgo(t)
	porttest.JobAgent(t, func(t *testing.T, r ports.JobReporter) ports.JobAgent {
		return newAgent(t, r, jobagenttest.FastOptions())
	}, porttest.JobAgentOptions{Config: f.config(), Durable: true, RunsOf: f.runsOf})
}

func TestSubmitSendsTheDocumentedRequestAndFollowsToSucceeded(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	rep := jobagenttest.NewReports()
	res, err := newAgent(t, rep, jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	key := jobfollow.CorrelationKey("job-1")
	name := "deploy-" + key[len(key)-12:]
	require.Equal(t, "ci/"+name, res.ExternalID)
	f.Mu.Lock()
	require.Equal(t, map[string]any{"namespace": "ci", "resourceKind": "WorkflowTemplate", "resourceName": "deploy",
		"submitOptions": map[string]any{"name": name, "parameters": []any{"replicas=2", "version=v1.2.3"}, "labels": Label + "=" + key}}, f.submits[0])
	f.Mu.Unlock()
	got := rep.Terminal(t)
	require.Equal(t, release.JobSuccessful, got.Status)
	require.Equal(t, f.URL+"/workflows/ci/"+name, got.Outputs["url"])
}

func TestFailedWorkflowFailsTheJob(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	f.end = "Error"
	rep := jobagenttest.NewReports()
	_, err := newAgent(t, rep, jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobFailure, rep.Terminal(t).Status)
}

func TestSubmitRetriedAfterACrashFollowsTheSameWorkflow(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	o := jobagenttest.FastOptions()
	o.MinPoll = time.Hour
	first := newAgent(t, jobagenttest.NewReports(), o)
	r1, err := first.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	first.Close()
	r2, err := newAgent(t, jobagenttest.NewReports(), o).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, r1, r2)
	f.Mu.Lock()
	require.Len(t, f.submits, 1)
	f.Mu.Unlock()
}

func TestCancelStopsTheWorkflow(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	o := jobagenttest.FastOptions()
	o.MinPoll = time.Hour
	a := newAgent(t, jobagenttest.NewReports(), o)
	d := porttest.JobAgentDispatch(Type, "job-1", f.config())
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent, Reason: "timed out"}))
	f.Mu.Lock()
	require.Len(t, f.stops, 1)
	require.Contains(t, f.Requests, "PUT /api/v1/workflows/"+res.ExternalID+"/stop")
	f.Mu.Unlock()
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-x", ExternalID: "ci/other", Agent: d.Agent}))
}

// Cancelling a completed Workflow is no error and makes one call: its
// phase is read first (issue 31, defect 6); polls ask only for the fields
// read.
func TestCancelOfACompletedWorkflowIsDoneInOneCall(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, jobagenttest.FastOptions())
	d := porttest.JobAgentDispatch(Type, "job-1", f.config())
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.Equal(t, release.JobSuccessful, rep.Terminal(t).Status)
	f.Mu.Lock()
	f.Requests = nil
	f.Mu.Unlock()
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent, Reason: "timed out"}))
	f.Mu.Lock()
	defer f.Mu.Unlock()
	require.Equal(t, []string{"GET /api/v1/workflows/" + res.ExternalID}, f.Requests)
	require.Empty(t, f.stops)
	require.NotEmpty(t, f.fields)
	for _, fl := range f.fields {
		require.Equal(t, "metadata.name,metadata.labels,status.phase,status.message,status.progress", fl)
	}
}

// A stop racing the Workflow's completion gets Argo Server's 500 "cannot
// shutdown a completed workflow": that is done, not an error retried.
func TestStopRefusedAsCompletedIsDone(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	o := jobagenttest.FastOptions()
	o.MinPoll = time.Hour
	a := newAgent(t, jobagenttest.NewReports(), o)
	d := porttest.JobAgentDispatch(Type, "job-1", f.config())
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	f.Mu.Lock()
	f.stopRace = true
	f.Requests = nil
	f.Mu.Unlock()
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent}))
	f.Mu.Lock()
	defer f.Mu.Unlock()
	require.Equal(t, []string{"GET /api/v1/workflows/" + res.ExternalID, "PUT /api/v1/workflows/" + res.ExternalID + "/stop"}, f.Requests)
}

func TestRetriesMalformedAndBadConfig(t *testing.T) {
	t.Parallel()
	f := newFakeArgo(t)
	f.Faults = []int{http.StatusTooManyRequests}
	f.malformed = true
	rep := jobagenttest.NewReports()
	_, err := newAgent(t, rep, jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobSuccessful, rep.Terminal(t).Status)

	g := newFakeArgo(t)
	g.Faults = []int{502}
	_, err = newAgent(t, jobagenttest.NewReports(), jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", g.config()))
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
	res, err := newAgent(t, jobagenttest.NewReports(), jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-2", cfg))
	require.NoError(t, err)
	require.Equal(t, release.JobInvalidJobAgent, res.Status)
	require.Contains(t, res.Message, "job_agent_config.workflowTemplate")
}

// The fake is checked against Argo Workflows' definition: a fake that
// answered outside it (a Workflow without its required spec, as this one
// did) or a request outside it (a submit without resourceKind's type, a
// path Argo Server does not have) is caught.
func TestFakeOutsideTheDefinitionIsCaught(t *testing.T) {
	t.Parallel()
	c, err := contract.Load("testdata/argo-workflows.swagger.json")
	require.NoError(t, err)
	srv := httptest.NewServer(c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jobagenttest.WriteJSON(w, http.StatusOK, map[string]any{"metadata": map[string]any{"name": "x"}})
	})))
	t.Cleanup(srv.Close)
	for _, req := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/workflows/ci/x", ""},
		{http.MethodPost, "/api/v1/workflows/ci/submit", `{"resourceKind":7}`},
		{http.MethodGet, "/api/v1/nothing", ""},
	} {
		r, err := http.NewRequest(req.method, srv.URL+req.path, strings.NewReader(req.body))
		require.NoError(t, err)
		r.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(r)
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	v := strings.Join(c.Violations(), "\n")
	require.Contains(t, v, `response 200 to GET /api/v1/workflows/ci/x`)
	require.Contains(t, v, `property "spec" is missing`)
	require.Contains(t, v, "request POST /api/v1/workflows/ci/submit")
	require.Contains(t, v, "GET /api/v1/nothing: not in the definition")
}
