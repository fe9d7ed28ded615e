package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// createRuns creates one run of each kind over the API.
func (f *fixture) createRuns() {
	f.t.Helper()
	for _, body := range []map[string]any{
		{"kind": "repo", "id": "task-1", "repo": "acme/api", "max_retries": 1, "settings": map[string]any{"auto_merge": true, "stall_threshold": "20m"}},
		{"kind": "standalone", "id": "nightly-1", "workflow": "nightly"},
		{"kind": "pr-review", "id": "review-1", "pr_url": "https://example.test/acme/api/pull/7"},
		{"kind": "persistent-agent", "id": "bot"},
	} {
		res := f.do(http.MethodPost, "/api/v1/runs", "write", body)
		require.Equal(f.t, http.StatusCreated, res.status, string(res.body))
	}
}

// ids lists the runs of a list page as KIND/ID.
func ids(t *testing.T, page map[string]any) []string {
	t.Helper()
	var out []string
	for _, it := range page["items"].([]any) {
		ref := it.(map[string]any)["ref"].(map[string]any)
		out = append(out, ref["kind"].(string)+"/"+ref["id"].(string))
	}
	return out
}

func TestRunsCreateListGet(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.createRuns()
		res := f.do(http.MethodGet, "/api/v1/runs/repo/task-1", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		run := res.json(t)
		require.Equal(t, "pending", run["state"], "a repo run starts pending")
		require.Equal(t, "acme/api", run["repo"])
		require.Equal(t, "20m0s", run["settings"].(map[string]any)["stall_threshold"])
		require.Empty(t, run["decisions"])

		// Create: auth, scope, invalid input naming the field, a taken id.
		f.do(http.MethodPost, "/api/v1/runs", "", map[string]any{"kind": "persistent-agent", "id": "x"}).problem(t, http.StatusUnauthorized)
		f.do(http.MethodPost, "/api/v1/runs", "revoked", map[string]any{"kind": "persistent-agent", "id": "x"}).problem(t, http.StatusUnauthorized)
		f.do(http.MethodPost, "/api/v1/runs", "read", map[string]any{"kind": "persistent-agent", "id": "x"}).problem(t, http.StatusForbidden)
		for _, tc := range []struct {
			body any
			loc  string
		}{
			{map[string]any{"kind": "repo", "id": "t2"}, "body.repo"},
			{map[string]any{"kind": "cron", "id": "t2"}, "body.kind"},
			{map[string]any{"kind": "repo", "id": "a/b", "repo": "r"}, "body.id"},
			{map[string]any{"kind": "persistent-agent", "id": "t2", "workflow": "w"}, "body.workflow"},
			{map[string]any{"kind": "persistent-agent", "id": "t2", "bogus": 1}, "body.bogus"},
			{map[string]any{"kind": "repo", "id": "t2", "repo": "r", "depends_on": []any{"t2"}}, "body.depends_on[0]"},
		} {
			p := f.do(http.MethodPost, "/api/v1/runs", "write", tc.body).problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, locations(p), tc.loc, "%v", tc.body)
		}
		f.do(http.MethodGet, "/api/v1/runs/repo/t2", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodPost, "/api/v1/runs", "write", map[string]any{"kind": "persistent-agent", "id": "bot"}).problem(t, http.StatusConflict)

		// List: every kind in order, paged across kinds by cursor.
		var all []string
		cursor := ""
		for range 10 {
			res := f.do(http.MethodGet, "/api/v1/runs?limit=3&cursor="+cursor, "read", nil)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			page := res.json(t)
			all = append(all, ids(t, page)...)
			next, _ := page["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		require.Equal(t, []string{"repo/task-1", "standalone/nightly-1", "pr-review/review-1", "persistent-agent/bot"}, all)
		res = f.do(http.MethodGet, "/api/v1/runs?kind=pr-review", "read", nil)
		require.Equal(t, []string{"pr-review/review-1"}, ids(t, res.json(t)))
		res = f.do(http.MethodGet, "/api/v1/runs?state=queued", "read", nil)
		require.Equal(t, []string{"standalone/nightly-1", "pr-review/review-1"}, ids(t, res.json(t)))
		res = f.do(http.MethodGet, "/api/v1/runs?kind=persistent-agent&state=queued", "read", nil)
		require.Empty(t, ids(t, res.json(t)))
		p := f.do(http.MethodGet, "/api/v1/runs?kind=repo&state=reviewing", "read", nil).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "query.state")
		f.do(http.MethodGet, "/api/v1/runs?kind=job", "read", nil).problem(t, http.StatusUnprocessableEntity)
		f.do(http.MethodGet, "/api/v1/runs?cursor=!!", "read", nil).problem(t, http.StatusBadRequest)
		f.do(http.MethodGet, "/api/v1/runs", "", nil).problem(t, http.StatusUnauthorized)

		// A pass moves the repo run on; get shows the decision.
		f.drain()
		res = f.do(http.MethodGet, "/api/v1/runs/repo/task-1?decisions=5", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		run = res.json(t)
		require.NotEqual(t, "pending", run["state"])
		ds := run["decisions"].([]any)
		require.NotEmpty(t, ds)
		last := ds[len(ds)-1].(map[string]any)
		require.Equal(t, "transition", last["action"])
		require.Equal(t, "no-dependencies", last["reason"])
		require.Equal(t, "pending", last["from"])
		require.Equal(t, "queued", last["to"])
		require.NotEmpty(t, last["at"])
		f.do(http.MethodGet, "/api/v1/runs/repo/task-1?decisions=51", "read", nil).problem(t, http.StatusUnprocessableEntity)
	})
}

func TestRunIntents(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.createRuns()
		base := "/api/v1/runs/persistent-agent/bot/intents"
		// The kernel refuses resume on an idle agent: 409 with its reason.
		p := f.do(http.MethodPost, base, "write", map[string]any{"intent": "resume"}).problem(t, http.StatusConflict)
		require.Contains(t, p["detail"], "resume-not-applicable")
		f.do(http.MethodPost, base, "read", map[string]any{"intent": "pause"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, base, "", map[string]any{"intent": "pause"}).problem(t, http.StatusUnauthorized)
		p = f.do(http.MethodPost, base, "write", map[string]any{"intent": "explode"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.intent")
		f.do(http.MethodPost, "/api/v1/runs/persistent-agent/nobody/intents", "write", map[string]any{"intent": "pause"}).problem(t, http.StatusNotFound)

		res := f.do(http.MethodPost, base, "write", map[string]any{"intent": "pause"})
		require.Equal(t, http.StatusAccepted, res.status, string(res.body))
		next := res.json(t)["next"].(map[string]any)
		require.Equal(t, map[string]any{"action": "transition", "reason": "intent-pause", "from": "idle", "to": "paused"}, next)
		f.drain()
		res = f.do(http.MethodGet, "/api/v1/runs/persistent-agent/bot", "read", nil)
		run := res.json(t)
		require.Equal(t, "paused", run["state"])
		ds := run["decisions"].([]any)
		require.Len(t, ds, 2)
		applied, asked := ds[0].(map[string]any), ds[1].(map[string]any)
		require.Equal(t, "intent-pause", applied["reason"])
		require.Equal(t, "paused", applied["to"])
		require.Equal(t, "intent", asked["action"])
		require.Equal(t, "pause", asked["reason"])
		require.Equal(t, "user-write", asked["by"], "the intent records the caller")

		// Paused: pausing again is refused; a repo run cannot be paused.
		p = f.do(http.MethodPost, base, "write", map[string]any{"intent": "pause"}).problem(t, http.StatusConflict)
		require.Contains(t, p["detail"], "pause-not-applicable")
		p = f.do(http.MethodPost, "/api/v1/runs/repo/task-1/intents", "write", map[string]any{"intent": "pause"}).problem(t, http.StatusConflict)
		require.Contains(t, p["detail"], "intent-unsupported")
		res = f.do(http.MethodPost, "/api/v1/runs/repo/task-1/intents", "admin", map[string]any{"intent": "cancel"})
		require.Equal(t, http.StatusAccepted, res.status, string(res.body))
		f.drain()
		res = f.do(http.MethodGet, "/api/v1/runs/repo/task-1", "read", nil)
		require.Equal(t, "cancelled", res.json(t)["state"])
	})
}

func TestRunMessages(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.createRuns()
		base := "/api/v1/runs/persistent-agent/bot/messages"
		res := f.do(http.MethodPost, base, "write", map[string]any{"text": "triage issue 42"})
		require.Equal(t, http.StatusAccepted, res.status, string(res.body))
		run := res.json(t)
		body := run["body"].(map[string]any)
		require.EqualValues(t, 1, body["pending_messages"])
		inbox := body["inbox"].([]any)
		require.Equal(t, "triage issue 42", inbox[0].(map[string]any)["text"])
		require.Equal(t, "user-write", inbox[0].(map[string]any)["by"])
		f.drain()
		res = f.do(http.MethodGet, "/api/v1/runs/persistent-agent/bot", "read", nil)
		require.NotEqual(t, "idle", res.json(t)["state"], "the message started a turn")

		p := f.do(http.MethodPost, "/api/v1/runs/repo/task-1/messages", "write", map[string]any{"text": "hi"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "path.kind")
		p = f.do(http.MethodPost, base, "write", map[string]any{"text": ""}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.text")
		p = f.do(http.MethodPost, base, "write", map[string]any{"text": strings.Repeat("x", 4097)}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.text")
		f.do(http.MethodPost, base, "read", map[string]any{"text": "hi"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, "/api/v1/runs/persistent-agent/nobody/messages", "write", map[string]any{"text": "hi"}).problem(t, http.StatusNotFound)
		res = f.do(http.MethodPost, "/api/v1/runs/persistent-agent/bot/intents", "write", map[string]any{"intent": "archive"})
		require.Equal(t, http.StatusAccepted, res.status, string(res.body))
		f.drain()
		f.do(http.MethodPost, base, "write", map[string]any{"text": "hi"}).problem(t, http.StatusConflict)
	})
}

// TestRunsThroughClient drives the runs routes with the typed client.
func TestRunsThroughClient(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		ctx := f.ctx
		c, err := client.New(f.http.URL, f.tokens["admin"])
		require.NoError(t, err)
		row, err := c.CreateRun(ctx, api.RunCreate{Kind: reconcile.KindPersistentAgent, ID: "bot"})
		require.NoError(t, err)
		require.Equal(t, reconcile.AgentIdle, row.State)
		_, err = c.CreateRun(ctx, api.RunCreate{Kind: reconcile.KindRepo, ID: "t1"})
		require.ErrorIs(t, err, release.ErrInvalid)
		var pe *client.Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "body.repo", pe.Errors[0].Location)
		_, err = c.CreateRun(ctx, api.RunCreate{Kind: reconcile.KindStandalone, ID: "s1", Workflow: "w"})
		require.NoError(t, err)

		page, err := c.Runs(ctx, client.RunListParams{State: reconcile.AgentIdle, Limit: 1})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		require.Equal(t, "bot", page.Items[0].Ref.ID)
		page, err = c.Runs(ctx, client.RunListParams{Limit: 1})
		require.NoError(t, err)
		require.Equal(t, "s1", page.Items[0].Ref.ID)
		page, err = c.Runs(ctx, client.RunListParams{Limit: 1, Cursor: page.NextCursor})
		require.NoError(t, err)
		require.Equal(t, "bot", page.Items[0].Ref.ID)
		require.Empty(t, page.NextCursor)

		ref := reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "bot"}
		_, err = c.RunIntent(ctx, ref, reconcile.IntentResume)
		require.ErrorIs(t, err, ports.ErrConflict)
		require.Contains(t, err.Error(), "resume-not-applicable")
		res, err := c.RunIntent(ctx, ref, reconcile.IntentPause)
		require.NoError(t, err)
		require.Equal(t, reconcile.AgentPaused, res.Next.To)
		_, err = c.RunMessage(ctx, ref, "hello")
		require.NoError(t, err)
		v, err := c.Run(ctx, ref, 1)
		require.NoError(t, err)
		require.Len(t, v.Decisions, 1)
		require.Equal(t, "message", v.Decisions[0].Action)
		_, err = c.Run(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "none"}, 0)
		require.ErrorIs(t, err, ports.ErrNotFound)
	})
}
