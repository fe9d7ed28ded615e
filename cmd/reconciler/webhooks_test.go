package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/envsecret"
	"github.com/reconcilerhq/reconciler/adapters/github"
	"github.com/reconcilerhq/reconciler/adapters/githubactions"
	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestGitHubActionsWebhookOnServeListener: serve's listener takes GitHub's
// workflow_run deliveries at /api/v1/webhooks/github-actions/<agent>, verified
// with the secret the github-actions agent record's webhookSecretRef
// names, and reports the run's status by (agent, run id); an unknown
// agent, one of another type or one without a secret reference is
// answered exactly as a bad signature (401, same body: agent ids cannot be
// enumerated, issue 28), and nothing is reported for either.
func TestGitHubActionsWebhookOnServeListener(t *testing.T) {
	t.Setenv("RECONCILER_SECRET_GHA_HOOK", "hook-secret")
	ctx := t.Context()
	store := memory.NewReleaseStore(ports.SystemClock)
	for _, a := range []release.JobAgent{
		{ID: "gha", Name: "gha", Type: githubactions.Type, Config: map[string]any{"webhookSecretRef": "env:RECONCILER_SECRET_GHA_HOOK"}},
		{ID: "gha-nohook", Name: "gha", Type: githubactions.Type},
		{ID: "runner", Name: "runner", Type: "test-runner"},
	} {
		_, err := store.JobAgents().Put(ctx, a, 0)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var reports []ports.JobReport
	report := ports.JobReporterFunc(func(_ context.Context, r ports.JobReport) error {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, r)
		return nil
	})
	// Mounted as serve mounts them, beside the API (which would want a
	// bearer token) and the console at /.
	extra := map[string]http.Handler{
		api.Prefix + "/": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }),
		"/":              http.NotFoundHandler(),
	}
	hook := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mountWebhooks(extra, githubActionsWebhooks{agents: store.JobAgents(), secrets: envsecret.Resolver{}, report: report}, hook)
	mux := http.NewServeMux()
	for path, h := range extra {
		mux.Handle(path, h)
	}
	deliver := func(path string) int {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{}`))
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w.Code
	}
	require.Equal(t, http.StatusNoContent, deliver("/api/v1/webhooks/github"), "the GitHub webhook, without a bearer token")
	require.Equal(t, http.StatusNotFound, deliver("/webhooks/github"), "one path per webhook: the old one is gone")
	require.Equal(t, http.StatusNotFound, deliver("/webhooks/github-actions/gha"))
	require.Equal(t, http.StatusUnauthorized, deliver("/api/v1/webhooks"), "anything else under /api/v1 is the API's")
	body := []byte(`{"action":"completed","workflow_run":{"id":42,"status":"completed","conclusion":"success","html_url":"https://github.example/r/42"}}`)
	sendFull := func(agent, sig string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/webhooks/github-actions/"+agent, bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", "workflow_run")
		req.Header.Set("X-Hub-Signature-256", sig)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w
	}
	send := func(agent, sig string) int { return sendFull(agent, sig).Code }
	good := githubactions.Sign([]byte("hook-secret"), body)
	bad := sendFull("gha", githubactions.Sign([]byte("wrong"), body))
	require.Equal(t, http.StatusUnauthorized, bad.Code)
	for agent, why := range map[string]string{"nope": "unknown", "runner": "not a github-actions agent", "gha-nohook": "no webhookSecretRef"} {
		w := sendFull(agent, good)
		require.Equal(t, bad.Code, w.Code, why)
		require.Equal(t, bad.Body.String(), w.Body.String(), why)
		require.Equal(t, bad.Header(), w.Header(), why)
	}
	require.Empty(t, reports)
	require.Equal(t, http.StatusAccepted, send("gha", good))
	require.Len(t, reports, 1)
	require.Equal(t, "gha", reports[0].AgentID)
	require.Equal(t, "42", reports[0].ExternalID)
	require.Equal(t, release.JobSuccessful, reports[0].Status)

	full := map[string]any{"owner": "acme", "repo": "api", "workflowFile": "deploy.yml", "tokenRef": "env:RECONCILER_SECRET_GH",
		"webhookSecretRef": "hook-secret"}
	require.ErrorContains(t, agentConfigValidator()(githubactions.Type, full), "job_agent_config.webhookSecretRef",
		"a secret itself where its reference belongs is refused at apply time")
	full["webhookSecretRef"] = "env:RECONCILER_SECRET_GHA_HOOK"
	require.NoError(t, agentConfigValidator()(githubactions.Type, full))
}

// TestGitHubDeliveriesTakenOnce: on both GitHub webhooks a verified
// delivery is taken once by its X-GitHub-Delivery id, across processes
// sharing the store: a replay is answered 200 and changes nothing, and a
// delivery without an id is refused (issue 28).
func TestGitHubDeliveriesTakenOnce(t *testing.T) {
	t.Setenv("RECONCILER_SECRET_GHA_HOOK", "hook-secret")
	ctx := t.Context()
	store := memory.NewReleaseStore(ports.SystemClock)
	_, err := store.JobAgents().Put(ctx, release.JobAgent{ID: "gha", Name: "gha", Type: githubactions.Type,
		Config: map[string]any{"webhookSecretRef": "env:RECONCILER_SECRET_GHA_HOOK"}}, 0)
	require.NoError(t, err)
	var reports, wakes int
	report := ports.JobReporterFunc(func(context.Context, ports.JobReport) error { reports++; return nil })
	tokens := memory.NewTokens() // shared by both "processes"
	serve := func() *http.ServeMux {
		extra := map[string]http.Handler{}
		hook := github.Webhook{Secret: []byte("gh-secret"), OnPR: func(context.Context, github.PREvent) { wakes++ }}
		mountWebhooks(extra, githubActionsWebhooks{agents: store.JobAgents(), secrets: envsecret.Resolver{}, report: report,
			deliveries: deliveryClaims(tokens, ports.SystemClock)}, hook)
		mux := http.NewServeMux()
		for path, h := range extra {
			mux.Handle(path, h)
		}
		return mux
	}
	one, two := serve(), serve()
	send := func(mux *http.ServeMux, path, event, id string, body []byte, sig string) int {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-Hub-Signature-256", sig)
		if id != "" {
			req.Header.Set("X-GitHub-Delivery", id)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w.Code
	}
	run := []byte(`{"action":"completed","workflow_run":{"id":42,"status":"completed","conclusion":"success"}}`)
	runSig := githubactions.Sign([]byte("hook-secret"), run)
	actions := "/api/v1/webhooks/github-actions/gha"
	require.Equal(t, http.StatusBadRequest, send(one, actions, "workflow_run", "", run, runSig), "no delivery id")
	require.Equal(t, http.StatusUnauthorized, send(one, actions, "workflow_run", "d-1", run, "sha256=00"), "a bad signature claims nothing")
	require.Equal(t, http.StatusAccepted, send(one, actions, "workflow_run", "d-1", run, runSig))
	require.Equal(t, http.StatusOK, send(one, actions, "workflow_run", "d-1", run, runSig), "replayed")
	require.Equal(t, http.StatusOK, send(two, actions, "workflow_run", "d-1", run, runSig), "replayed to another process")
	require.Equal(t, 1, reports)

	pr := []byte(`{"repository":{"full_name":"o/r"},"pull_request":{"number":1,"html_url":"https://github.example/o/r/pull/1"}}`)
	prSig := github.Sign([]byte("gh-secret"), pr)
	require.Equal(t, http.StatusBadRequest, send(one, "/api/v1/webhooks/github", "pull_request", "", pr, prSig))
	require.Equal(t, http.StatusNoContent, send(one, "/api/v1/webhooks/github", "pull_request", "d-2", pr, prSig))
	require.Equal(t, http.StatusOK, send(two, "/api/v1/webhooks/github", "pull_request", "d-2", pr, prSig))
	require.Equal(t, 1, wakes)
}

// TestEmptyHMACKeyRefusedAtApply: a job agent whose report_secret or
// webhookSecretRef resolves to an empty key is refused when applied
// (issue 28); one that resolves to a key passes.
func TestEmptyHMACKeyRefusedAtApply(t *testing.T) {
	t.Setenv("RECONCILER_SECRET_EMPTY", "")
	t.Setenv("RECONCILER_SECRET_KEY", "k")
	v := withHMACKeys(agentConfigValidator(), envsecret.Resolver{})
	for typ, key := range map[string]string{release.PullAgentType: "report_secret", githubactions.Type: "webhookSecretRef"} {
		cfg := map[string]any{key: "env:RECONCILER_SECRET_EMPTY"}
		if typ == githubactions.Type {
			cfg = map[string]any{"owner": "acme", "repo": "api", "workflowFile": "deploy.yml", "tokenRef": "env:RECONCILER_SECRET_GH", key: "env:RECONCILER_SECRET_EMPTY"}
		}
		require.ErrorContains(t, v(typ, cfg), "job_agent_config."+key, typ)
		cfg[key] = "env:RECONCILER_SECRET_KEY"
		require.NoError(t, v(typ, cfg), typ)
	}
}
