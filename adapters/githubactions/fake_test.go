package githubactions

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/adapters/github/githubtest"
	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/contract"
	"github.com/reconcilerhq/reconciler/internal/jobagent/jobagenttest"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// token is the test token the fake requires.
const token = "ghp_test_token"

// fakeGitHub implements the documented Actions endpoints the agent uses:
// list a workflow's runs (newest first, filtered by event and created,
// paged by per_page and page), create a workflow_dispatch event, get a
// run and cancel it. Each GET of a run moves it one step: queued →
// in_progress → completed with the configured conclusion. Runs are
// created a second apart from the suite's job creation time on.
type fakeGitHub struct {
	*jobagenttest.Server
	t *testing.T
	// conclusion every run ends with (default success).
	conclusion string
	// noDetails answers dispatches 204 without the run's details (the
	// API's behaviour without return_run_details).
	noDetails bool
	// malformed answers the next GET of a run with a body that is not JSON.
	malformed bool

	runs       map[int64]*fakeRun
	order      []int64
	nextID     int64
	clock      time.Time        // the next run's creation time
	dispatches []map[string]any // request bodies
	cancels    []int64
	lists      []string // the run lists' queries, decoded
}

type fakeRun struct {
	run
	CreatedAt time.Time `json:"created_at"`
	steps     int
}

// epoch is when the suite's jobs are created (porttest.JobAgentDispatch).
var epoch = porttest.JobAgentDispatch(Type, "x", nil).Job.CreatedAt

func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{t: t, conclusion: "success", runs: map[int64]*fakeRun{}, nextID: 1000, clock: epoch}
	f.Server = jobagenttest.NewServer(t, jobagenttest.ServerOptions{
		Authorized: func(r *http.Request) bool {
			return r.Header.Get("Authorization") == "Bearer "+token && r.Header.Get("Accept") == "application/vnd.github+json" &&
				r.Header.Get("X-GitHub-Api-Version") == "2022-11-28"
		},
		Unauthorized: map[string]any{"message": "Bad credentials"}, FaultBody: map[string]any{"message": "try later"},
		Definition: "../github/githubtest/api.github.com.json", Fill: true, AllowStatus: githubtest.AnyRoute,
		// The description types created as a date-time, though GitHub
		// takes (and documents) search syntax: ">=2026-01-02T15:04:05Z";
		// the fake checks that form itself.
		WaiveQuery: map[string][]string{"/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs": {"created"}}}, f.handle)
	return f
}

func (f *fakeGitHub) config() map[string]any {
	return map[string]any{"baseURL": f.URL, "owner": "acme", "repo": "app", "workflowFile": "deploy.yml",
		"tokenRef": "env:RECONCILER_SECRET_GH", "inputs": map[string]any{"environment": "prod", "dry": false}}
}

// handle serves the Actions endpoints (under f.Mu).
func (f *fakeGitHub) handle(w http.ResponseWriter, r *http.Request) {
	const prefix = "/repos/acme/app/actions/"
	path, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	switch {
	case r.Method == http.MethodGet && path == "workflows/deploy.yml/runs":
		q := r.URL.Query()
		f.lists = append(f.lists, q.Encode())
		if q.Get("event") != "workflow_dispatch" {
			f.t.Errorf("list runs without event=workflow_dispatch: %s", r.URL.RawQuery)
		}
		perPage, page := 30, 1
		if v := q.Get("per_page"); v != "" {
			perPage, _ = strconv.Atoi(v)
		}
		if v := q.Get("page"); v != "" {
			page, _ = strconv.Atoi(v)
		}
		var since time.Time
		if v := q.Get("created"); v != "" {
			var err error
			since, err = time.Parse(time.RFC3339, strings.TrimPrefix(v, ">="))
			if err != nil || !strings.HasPrefix(v, ">=") {
				jobagenttest.WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid created filter"})
				return
			}
		}
		if perPage < 1 || perPage > 100 || page < 1 {
			jobagenttest.WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid page"})
			return
		}
		runs := []fakeRun{}
		for i := len(f.order) - 1; i >= 0; i-- { // newest first
			if fr := f.runs[f.order[i]]; !fr.CreatedAt.Before(since) {
				runs = append(runs, *fr)
			}
		}
		total := len(runs)
		runs = runs[min((page-1)*perPage, total):min(page*perPage, total)]
		jobagenttest.WriteJSON(w, http.StatusOK, map[string]any{"total_count": total, "workflow_runs": runs})
	case r.Method == http.MethodPost && path == "workflows/deploy.yml/dispatches":
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil || r.Header.Get("Content-Type") != "application/json" {
			jobagenttest.WriteJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
			return
		}
		inputs, _ := body["inputs"].(map[string]any)
		key, _ := inputs["reconciler_job"].(string)
		if body["ref"] == nil || key == "" {
			jobagenttest.WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Required input 'reconciler_job' not provided"})
			return
		}
		f.dispatches = append(f.dispatches, body)
		id := f.addRun("deploy " + key)
		if f.noDetails || body["return_run_details"] != true {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		jobagenttest.WriteJSON(w, http.StatusOK, map[string]any{"workflow_run_id": id,
			"run_url":  fmt.Sprintf("%s/repos/acme/app/actions/runs/%d", f.URL, id),
			"html_url": f.runs[id].HTMLURL})
	case r.Method == http.MethodGet && strings.HasPrefix(path, "runs/"):
		id, err := strconv.ParseInt(strings.TrimPrefix(path, "runs/"), 10, 64)
		fr, ok := f.runs[id]
		if err != nil || !ok {
			jobagenttest.WriteJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
		if f.malformed {
			f.malformed = false
			w.Header().Set(contract.OffContract, "malformed on purpose")
			_, _ = w.Write([]byte(`<html>oops`))
			return
		}
		fr.steps++
		switch {
		case fr.Status == "completed":
		case fr.steps == 1:
			fr.Status = "in_progress"
		default:
			fr.Status, fr.Conclusion = "completed", f.conclusion
		}
		jobagenttest.WriteJSON(w, http.StatusOK, fr)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "runs/") && strings.HasSuffix(path, "/cancel"):
		id, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(path, "runs/"), "/cancel"), 10, 64)
		fr, ok := f.runs[id]
		switch {
		case !ok:
			jobagenttest.WriteJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		case fr.Status == "completed":
			jobagenttest.WriteJSON(w, http.StatusConflict, map[string]any{"message": "Cannot cancel a workflow run that is completed."})
		default:
			f.cancels = append(f.cancels, id)
			fr.Status, fr.Conclusion = "completed", "cancelled"
			jobagenttest.WriteJSON(w, http.StatusAccepted, map[string]any{})
		}
	default:
		http.NotFound(w, r)
	}
}

// addRun adds a queued workflow_dispatch run titled title, created a
// second after the one before, and returns its id.
func (f *fakeGitHub) addRun(title string) int64 {
	f.nextID++
	id := f.nextID
	f.runs[id] = &fakeRun{run: run{ID: id, Name: "deploy", DisplayTitle: title, Status: "queued",
		Event: "workflow_dispatch", HTMLURL: fmt.Sprintf("https://github.example/acme/app/actions/runs/%d", id)}, CreatedAt: f.clock}
	f.order = append(f.order, id)
	f.clock = f.clock.Add(time.Second)
	return id
}

// runsOf counts the runs dispatched for job id (by its correlation key).
func (f *fakeGitHub) runsOf(_ *testing.T, id string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, d := range f.dispatches {
		if d["inputs"].(map[string]any)["reconciler_job"] == jobfollow.CorrelationKey(id) {
			n++
		}
	}
	return n
}

// dispatchCount is how many workflow_dispatch events were created.
func (f *fakeGitHub) dispatchCount() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.dispatches)
}

var testSecrets = configmap.Secrets{"env:RECONCILER_SECRET_GH": token, "env:RECONCILER_SECRET_HOOK": "hook-secret"}
