package terraformcloud

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/contract"
	"github.com/reconcilerhq/reconciler/internal/jobagent/jobagenttest"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
)

const token = "tfc-test-token"

var testSecrets = configmap.Secrets{"env:RECONCILER_SECRET_TFC": token}

// fakeTFC implements the API v2 endpoints the agent and verifier use:
// create a run, list a workspace's runs, read a run, cancel and discard
// it. Each read moves a run one step: pending → planning → planned
// (confirmable, when confirm is set) or → applying → the end status.
type fakeTFC struct {
	*jobagenttest.Server
	end       string // applied (default), errored
	confirm   bool   // stop at planned, waiting for confirmation
	malformed bool
	runs      map[string]*runData
	order     []string
	created   []map[string]any
	actions   []string
}

func newFakeTFC(t *testing.T) *fakeTFC {
	f := &fakeTFC{end: "applied", runs: map[string]*runData{}}
	f.Server = jobagenttest.NewServer(t, jobagenttest.ServerOptions{Authorized: jobagenttest.Bearer(token),
		Unauthorized: map[string]any{"errors": []any{map[string]any{"status": "401", "title": "unauthorized"}}}}, checkedByGoTFE(t, f.handle))
	return f
}

func (f *fakeTFC) config() map[string]any {
	return map[string]any{"address": f.URL, "workspaceId": "ws-abc123", "tokenRef": "env:RECONCILER_SECRET_TFC",
		"organization": "acme", "workspaceName": "prod", "variables": map[string]any{"image_tag": "v1.2.3", "replicas": 3.0}}
}

// handle serves the run endpoints (under f.Mu).
func (f *fakeTFC) handle(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v2/workspaces/ws-abc123/runs":
		// Newest first, search[basic] matching the message, one page of
		// page[size] (default 20) as HCP Terraform answers.
		list := []any{}
		size, err := strconv.Atoi(r.URL.Query().Get("page[size]"))
		if err != nil {
			size = 20
		}
		search := r.URL.Query().Get("search[basic]")
		for i := len(f.order) - 1; i >= 0 && len(list) < size; i-- {
			if run := f.runs[f.order[i]]; strings.Contains(run.Attributes.Message, search) {
				list = append(list, run)
			}
		}
		jsonAPI(w, http.StatusOK, map[string]any{"data": list})
	case r.Method == http.MethodPost && r.URL.Path == "/api/v2/runs":
		var doc map[string]any
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != mediaType || json.Unmarshal(b, &doc) != nil {
			jsonAPI(w, http.StatusUnsupportedMediaType, map[string]any{"errors": []any{}})
			return
		}
		f.created = append(f.created, doc)
		id := fmt.Sprintf("run-%d", 100+len(f.order))
		run := &runData{ID: id, Type: "runs"}
		run.Attributes.Status = "pending"
		run.Attributes.Message, _ = doc["data"].(map[string]any)["attributes"].(map[string]any)["message"].(string)
		run.Attributes.Actions.IsCancelable = true
		f.runs[id] = run
		f.order = append(f.order, id)
		jsonAPI(w, http.StatusCreated, map[string]any{"data": run})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v2/runs/"):
		run, ok := f.runs[strings.TrimPrefix(r.URL.Path, "/api/v2/runs/")]
		if !ok {
			jsonAPI(w, http.StatusNotFound, map[string]any{"errors": []any{map[string]any{"status": "404", "title": "not found"}}})
			return
		}
		if f.malformed {
			f.malformed = false
			w.Header().Set(contract.OffContract, "on purpose")
			_, _ = w.Write([]byte(`{"data":`))
			return
		}
		f.step(run)
		jsonAPI(w, http.StatusOK, map[string]any{"data": run})
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v2/runs/") && strings.Contains(r.URL.Path, "/actions/"):
		id, action, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/api/v2/runs/"), "/actions/")
		run, ok := f.runs[id]
		if !ok {
			jsonAPI(w, http.StatusNotFound, map[string]any{})
			return
		}
		a := run.Attributes.Actions
		switch {
		case action == "discard" && a.IsDiscardable:
			run.Attributes.Status = "discarded"
		case action == "cancel" && a.IsCancelable:
			run.Attributes.Status = "canceled"
		default:
			jsonAPI(w, http.StatusConflict, map[string]any{"errors": []any{map[string]any{"status": "409", "title": "transition not allowed"}}})
			return
		}
		run.Attributes.Actions.IsCancelable, run.Attributes.Actions.IsDiscardable, run.Attributes.Actions.IsConfirmable = false, false, false
		f.actions = append(f.actions, id+" "+action)
		w.WriteHeader(http.StatusAccepted)
	default:
		jsonAPI(w, http.StatusNotFound, map[string]any{})
	}
}

func (f *fakeTFC) step(run *runData) {
	a := &run.Attributes
	switch a.Status {
	case "pending":
		a.Status = "planning"
	case "planning":
		a.Status, a.HasChanges = "planned", true
		if f.confirm {
			a.Actions.IsConfirmable, a.Actions.IsDiscardable, a.Actions.IsCancelable = true, true, false
		}
	case "planned":
		if !f.confirm {
			a.Status = "applying"
		}
	case "applying":
		a.Status, a.Actions.IsCancelable = f.end, false
		if f.end == "post_plan_awaiting_decision" || f.end == "policy_override" {
			a.Actions.IsCancelable, a.Actions.IsDiscardable = true, true
		}
	}
}

func jsonAPI(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// runsOf counts the runs created for job id (by the correlation key in
// their message).
func (f *fakeTFC) runsOf(_ *testing.T, id string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, c := range f.created {
		msg, _ := c["data"].(map[string]any)["attributes"].(map[string]any)["message"].(string)
		if strings.Contains(msg, jobfollow.CorrelationKey(id)) {
			n++
		}
	}
	return n
}

func (f *fakeTFC) createdCount() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.created)
}
