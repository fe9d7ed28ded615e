package client_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestRequests checks the exact requests the client sends: method, path
// (ids escaped), auth header and body.
func TestRequests(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, auth, ts, sig, body string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get(api.TimestampHeader), r.Header.Get(api.SignatureHeader), string(b)}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "tok")
	require.NoError(t, err)
	ctx := t.Context()

	require.NoError(t, c.ReportJob(ctx, "wf/a/b/1", api.JobReport{Status: release.JobSuccessful, Message: "ok"}))
	s := <-got
	require.Equal(t, seen{http.MethodPost, "/api/v1/jobs/wf%2Fa%2Fb%2F1/report", "Bearer tok", "", "", `{"status":"successful","message":"ok"}`}, s)

	at := time.Unix(1_700_000_000, 0)
	require.NoError(t, c.ReportJobSigned(ctx, "j1", api.JobReport{Status: release.JobFailure}, "sec", at))
	s = <-got
	body := `{"status":"failure"}`
	require.Equal(t, seen{http.MethodPost, "/api/v1/jobs/j1/report", "", "1700000000", api.SignRequest("sec", at, http.MethodPost, "/api/v1/jobs/j1/report", "j1", []byte(body)), body}, s,
		"a signed report sends no token")

	require.NoError(t, c.EndForceDeploy(ctx, "v 1", "s1"))
	s = <-got
	require.Equal(t, seen{method: http.MethodDelete, path: "/api/v1/versions/v%201/force-deploys/s1", auth: "Bearer tok"}, s)

	// Runs: create, list with filters, get with decisions, intent, message.
	_, err = c.CreateRun(ctx, api.RunCreate{Kind: reconcile.KindRepo, ID: "t1", Repo: "acme/api"})
	require.NoError(t, err)
	require.Equal(t, seen{method: http.MethodPost, path: "/api/v1/runs", auth: "Bearer tok", body: `{"kind":"repo","id":"t1","repo":"acme/api"}`}, <-got)
	_, err = c.Runs(ctx, client.RunListParams{Kind: reconcile.KindRepo, State: reconcile.RepoRunning, Limit: 5, Cursor: "cg"})
	require.NoError(t, err)
	require.Equal(t, seen{method: http.MethodGet, path: "/api/v1/runs", auth: "Bearer tok"}, <-got)
	_, err = c.Run(ctx, reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "bot 1"}, 3)
	require.NoError(t, err)
	require.Equal(t, seen{method: http.MethodGet, path: "/api/v1/runs/persistent-agent/bot%201", auth: "Bearer tok"}, <-got)
	_, err = c.RunIntent(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "t1"}, reconcile.IntentCancel)
	require.NoError(t, err)
	require.Equal(t, seen{method: http.MethodPost, path: "/api/v1/runs/repo/t1/intents", auth: "Bearer tok", body: `{"intent":"cancel"}`}, <-got)
	_, err = c.RunMessage(ctx, reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "bot"}, "hi")
	require.NoError(t, err)
	require.Equal(t, seen{method: http.MethodPost, path: "/api/v1/runs/persistent-agent/bot/messages", auth: "Bearer tok", body: `{"text":"hi"}`}, <-got)
}

func TestProblems(t *testing.T) {
	t.Parallel()
	var answer atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		status := int(answer.Load())
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "title": http.StatusText(status), "detail": "nope",
			"errors": []any{map[string]any{"location": "body.tag", "message": "expected string"}}})
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "")
	require.NoError(t, err)
	for code, want := range map[int]error{404: ports.ErrNotFound, 409: ports.ErrConflict, 422: release.ErrInvalid, 413: release.ErrInvalid,
		400: release.ErrInvalid, 401: client.ErrUnauthorized, 403: client.ErrUnauthorized} {
		answer.Store(int32(code))
		_, err := c.GetVersion(t.Context(), "x")
		require.ErrorIs(t, err, want, code)
		if code == 422 {
			require.Contains(t, err.Error(), "body.tag: expected string")
		}
	}
	_, err = client.New("ftp://x", "")
	require.ErrorIs(t, err, release.ErrInvalid)
}

// TestApplyReadsEveryPageOfOnePlan: Apply of a dry run follows
// plan_next_cursor to the last page, sending each page's cursor, and
// gathers every target; a page of another plan (its digest differs: the
// store changed between pages) is an error.
func TestApplyReadsEveryPageOfOnePlan(t *testing.T) {
	t.Parallel()
	var digest2 atomic.Value
	digest2.Store("d1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		q := r.URL.Query()
		if q.Get("limit") != "1000" {
			http.Error(w, "want the largest pages", http.StatusBadRequest)
			return
		}
		resp := apply.Response{DryRun: true, PlanSummary: &plan.Summary{Targets: 2, Digest: "d1"}}
		switch q.Get("cursor") {
		case "":
			resp.Plan, resp.PlanNextCursor = &plan.Diff{Targets: []plan.Target{{Key: "a"}}}, "next"
		case "next":
			resp.Plan = &plan.Diff{Targets: []plan.Target{{Key: "b"}}}
			resp.PlanSummary.Digest = digest2.Load().(string)
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "tok")
	require.NoError(t, err)
	got, err := c.Apply(t.Context(), apply.Request{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, []plan.Target{{Key: "a"}, {Key: "b"}}, got.Plan.Targets)
	require.Empty(t, got.PlanNextCursor)

	digest2.Store("d2")
	_, err = c.Apply(t.Context(), apply.Request{DryRun: true})
	require.ErrorContains(t, err, "the plan changed while its pages were read")
}
