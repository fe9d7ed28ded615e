package api_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// activeJob returns the id of the target's active job, drained first.
func (f *fixture) activeJob(target string) string {
	f.t.Helper()
	f.drain()
	res := f.do(http.MethodGet, "/api/v1/targets/"+target, "read", nil)
	require.Equal(f.t, http.StatusOK, res.status, string(res.body))
	active, _ := res.json(f.t)["active"].(map[string]any)
	require.NotNil(f.t, active, "target %s has an active job: %s", target, res.body)
	return active["job"].(map[string]any)["id"].(string)
}

func TestJobReports(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		id := f.activeJob("web:dev:r1")
		res := f.do(http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), "read", nil)
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, "pending", res.json(t)["status"], "the api agent leaves the job for the outside agent")
		res = f.do(http.MethodGet, "/api/v1/jobs?target=web:dev:r1", "read", nil)
		require.Equal(t, http.StatusOK, res.status)
		require.Contains(t, string(res.body), id)
		f.do(http.MethodGet, "/api/v1/jobs?target=nonsense", "read", nil).problem(t, http.StatusBadRequest)
		f.do(http.MethodGet, "/api/v1/jobs?target=web:dev:nope", "read", nil).problem(t, http.StatusNotFound)

		path := "/api/v1/jobs/" + url.PathEscape(id) + "/report"
		// With a token of scope agent.
		f.do(http.MethodPost, path, "read", map[string]any{"status": "inProgress"}).problem(t, http.StatusForbidden)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, path, "agent", map[string]any{"status": "inProgress", "external_id": "run-7"}).status)
		p := f.do(http.MethodPost, path, "agent", map[string]any{"status": "done"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.status")
		// Links: added while the status stays, validated, kept on later reports.
		logs := "https://ci.example/run/7/logs"
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, path, "agent", map[string]any{"status": "inProgress", "links": map[string]any{"logs": logs}}).status)
		many := map[string]any{}
		for i := range release.MaxJobLinks {
			many[fmt.Sprintf("l%02d", i)] = "https://ci.example/" + strconv.Itoa(i)
		}
		for _, bad := range []struct {
			links map[string]any
			loc   string
		}{
			{map[string]any{"logs": "ftp://ci.example/x"}, "body.links.logs"},
			{map[string]any{"logs": "javascript:alert(1)"}, "body.links.logs"},
			{map[string]any{"logs": "/relative"}, "body.links.logs"},
			{map[string]any{"logs": "https://ci.example/" + strings.Repeat("x", release.MaxLinkURLLength)}, "body.links.logs"},
			{map[string]any{"": "https://ci.example/"}, "body.links"},
			{map[string]any{strings.Repeat("n", release.MaxLinkNameLength+1): "https://ci.example/"}, "body.links"},
			{many, "body.links"}, // with "logs" one over the bound
			{map[string]any{"logs": 7}, "body.links.logs"},
		} {
			p := f.do(http.MethodPost, path, "agent", map[string]any{"status": "successful", "links": bad.links}).problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, locations(p), bad.loc, "%v", bad.links)
		}
		job := f.do(http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), "read", nil).json(t)
		require.Equal(t, "inProgress", job["status"], "bad links change nothing")
		require.Equal(t, map[string]any{"logs": logs}, job["links"])
		f.do(http.MethodPost, "/api/v1/jobs/nope/report", "agent", map[string]any{"status": "successful"}).problem(t, http.StatusNotFound)

		// Signed by the agent's report secret: stale, bad, good, replayed.
		body, err := json.Marshal(map[string]any{"status": "successful", "message": "deployed"})
		require.NoError(t, err)
		now := f.clock.Now()
		stale := f.do(http.MethodPost, path, "", body, signed(http.MethodPost, path, agentSecret, id, now.Add(-6*time.Minute), body)...).problem(t, http.StatusUnauthorized)
		require.Contains(t, stale["detail"], "window")
		f.do(http.MethodPost, path, "", body, signed(http.MethodPost, path, "wrong", id, now, body)...).problem(t, http.StatusUnauthorized)
		f.do(http.MethodPost, "/api/v1/jobs/nope/report", "", body, signed(http.MethodPost, "/api/v1/jobs/nope/report", agentSecret, id, now, body)...).problem(t, http.StatusUnauthorized)
		tampered := []byte(`{"status":"failure","message":"deployed"}`)
		f.do(http.MethodPost, path, "", tampered, signed(http.MethodPost, path, agentSecret, id, now, body)...).problem(t, http.StatusUnauthorized)
		f.do(http.MethodPost, path, "", body, signed(http.MethodPost, path, agentSecret, "another-job", now, body)...).problem(t, http.StatusUnauthorized)
		// The header is taken exactly as written: the same MAC respelled
		// (a trailing no-break space, upper-case hex) is refused, and a
		// signature made for another path or method does not fit this one.
		good := signed(http.MethodPost, path, agentSecret, id, now, body)
		for _, variant := range []string{good[3] + "\u00a0", good[3] + "\u2003", "sha256=" + strings.ToUpper(strings.TrimPrefix(good[3], "sha256=")), "SHA256=" + strings.TrimPrefix(good[3], "sha256=")} {
			p := f.do(http.MethodPost, path, "", body, good[0], good[1], good[2], variant).problem(t, http.StatusUnauthorized)
			require.Contains(t, p["detail"], "64 lowercase hex", "%q", variant)
		}
		f.do(http.MethodPost, path, "", body, signed(http.MethodPost, "/api/v1/jobs/"+id+"/cancel", agentSecret, id, now, body)...).problem(t, http.StatusUnauthorized)
		f.do(http.MethodPost, path, "", body, signed(http.MethodPut, path, agentSecret, id, now, body)...).problem(t, http.StatusUnauthorized)
		res = f.do(http.MethodPost, path, "", body, good...)
		require.Equal(t, http.StatusNoContent, res.status, string(res.body))
		replay := f.do(http.MethodPost, path, "", body, signed(http.MethodPost, path, agentSecret, id, now, body)...).problem(t, http.StatusUnauthorized)
		require.Contains(t, replay["detail"], "already used")
		// HTTP drops spaces around a header value, so this is the same
		// signature, and refused as used.
		replay = f.do(http.MethodPost, path, "", body, good[0], good[1], good[2], " "+good[3]+" ").problem(t, http.StatusUnauthorized)
		require.Contains(t, replay["detail"], "already used")

		res = f.do(http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), "read", nil)
		job = res.json(t)
		require.Equal(t, "successful", job["status"])
		require.Equal(t, map[string]any{"logs": logs}, job["links"], "a report without links keeps them")
		require.Equal(t, "deployed", job["message"])
		require.Equal(t, id, job["external_id"], "the api agent's external id is kept")
		// A job that ended cannot be cancelled.
		f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(id)+"/cancel", "write", nil).problem(t, http.StatusUnprocessableEntity)
	})
}

func TestJobCancel(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		id := f.activeJob("web:dev:r1")
		f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(id)+"/cancel", "read", nil).problem(t, http.StatusForbidden)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(id)+"/cancel", "write", nil).status)
		job := f.do(http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), "read", nil).json(t)
		require.Equal(t, "cancelled", job["status"])
		require.Equal(t, "cancelled by user-write", job["message"], "the principal is recorded")
		f.do(http.MethodPost, "/api/v1/jobs/nope/cancel", "write", nil).problem(t, http.StatusNotFound)
	})
}

func TestTargets(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		f.drain()
		res := f.do(http.MethodGet, "/api/v1/targets?deployment_id=web&limit=1", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		m := res.json(t)
		items := m["items"].([]any)
		require.Len(t, items, 1)
		require.NotEmpty(t, m["next_cursor"])
		res = f.do(http.MethodGet, "/api/v1/targets?deployment_id=web&limit=1&cursor="+m["next_cursor"].(string), "read", nil)
		m2 := res.json(t)
		require.Len(t, m2["items"].([]any), 1)
		require.Empty(t, m2["next_cursor"])
		require.NotEqual(t, items[0].(map[string]any)["target"], m2["items"].([]any)[0].(map[string]any)["target"])
		// A page's statuses (job states read for the page at once) are
		// each target's own.
		page := f.do(http.MethodGet, "/api/v1/targets?deployment_id=web&limit=50", "read", nil).json(t)
		ran := 0
		for _, it := range page["items"].([]any) {
			st := it.(map[string]any)
			tg := st["target"].(map[string]any)
			key := tg["deployment_id"].(string) + ":" + tg["environment_id"].(string) + ":" + tg["resource_id"].(string)
			require.Equal(t, f.do(http.MethodGet, "/api/v1/targets/"+key, "read", nil).json(t), st, key)
			if st["current"] != nil || st["active"] != nil {
				ran++
			}
		}
		require.Positive(t, ran, "some target on the page has a job of v1")
		f.do(http.MethodGet, "/api/v1/targets/web:dev:nope", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodGet, "/api/v1/targets/nonsense", "read", nil).problem(t, http.StatusBadRequest)
		f.do(http.MethodGet, "/api/v1/targets/web:dev:nope/explain", "read", nil).problem(t, http.StatusNotFound)
	})
}

func TestOperations(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		key := ports.WorkKey{Kind: "desired-release", ScopeType: "release-target", ScopeID: "web:dev:r1"}
		require.NoError(t, f.st.queue.WorkEnqueue(f.ctx, ports.EnqueueParams{Key: key, MaxAttempts: 1}))
		leases, err := f.st.queue.WorkLease(f.ctx, ports.LeaseParams{Kinds: []string{key.Kind}, Limit: 1, Owner: "t", Duration: time.Minute})
		require.NoError(t, err)
		require.Len(t, leases, 1)
		require.NoError(t, f.st.queue.WorkRetry(f.ctx, ports.RetryParams{Lease: leases[0].Ref(), Err: "boom", Terminal: true}))

		res := f.do(http.MethodGet, "/api/v1/operations/dead?kind=desired-release", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Contains(t, string(res.body), "boom")
		res = f.do(http.MethodGet, "/api/v1/operations/queue", "read", nil)
		require.Equal(t, http.StatusOK, res.status)
		require.EqualValues(t, 1, res.json(t)["dead"])

		// Depth per kind: kind "other" has one leased item, one due for
		// 30s and one not due yet (it does not count towards the age).
		due := f.clock.Now()
		require.NoError(t, f.st.queue.WorkEnqueue(f.ctx,
			ports.EnqueueParams{Key: ports.WorkKey{Kind: "other", ScopeType: "s", ScopeID: "a"}, NotBefore: due},
			ports.EnqueueParams{Key: ports.WorkKey{Kind: "other", ScopeType: "s", ScopeID: "b"}, NotBefore: due},
			ports.EnqueueParams{Key: ports.WorkKey{Kind: "other", ScopeType: "s", ScopeID: "c"}, NotBefore: due.Add(time.Hour)}))
		leases, err = f.st.queue.WorkLease(f.ctx, ports.LeaseParams{Kinds: []string{"other"}, Limit: 1, Owner: "t", Duration: time.Hour})
		require.NoError(t, err)
		require.Len(t, leases, 1)
		f.clock.Advance(30 * time.Second)
		res = f.do(http.MethodGet, "/api/v1/operations/queue/kinds", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var kinds []api.KindDepth
		require.NoError(t, json.Unmarshal(res.body, &kinds), string(res.body))
		byKind := map[string]api.KindDepth{}
		for i, k := range kinds {
			if i > 0 {
				require.Less(t, kinds[i-1].Kind, k.Kind, "sorted by kind, one entry each")
			}
			byKind[k.Kind] = k
		}
		require.Equal(t, 1, byKind["desired-release"].Dead)
		require.Equal(t, api.KindDepth{Kind: "other", Pending: 2, Leased: 1, OldestDue: due, OldestAgeSeconds: 30}, byKind["other"])
		f.do(http.MethodGet, "/api/v1/operations/queue/kinds", "", nil).problem(t, http.StatusUnauthorized)
		reader, err := client.New(f.http.URL, f.tokens["read"])
		require.NoError(t, err)
		fromClient, err := reader.QueueKinds(f.ctx)
		require.NoError(t, err)
		require.Equal(t, kinds, fromClient)

		body := map[string]any{"kind": key.Kind, "scope_type": key.ScopeType, "scope_id": key.ScopeID}
		f.do(http.MethodPost, "/api/v1/operations/dead/redrive", "write", body).problem(t, http.StatusForbidden)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, "/api/v1/operations/dead/redrive", "admin", body).status)
		f.do(http.MethodPost, "/api/v1/operations/dead/redrive", "admin", body).problem(t, http.StatusConflict)
		body["scope_id"] = "nope"
		f.do(http.MethodPost, "/api/v1/operations/dead/redrive", "admin", body).problem(t, http.StatusNotFound)
		require.Equal(t, "[]\n", string(f.do(http.MethodGet, "/api/v1/operations/dead", "read", nil).body))
	})
}

func TestJobList(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		// Jobs: web-v1 on dev (reported successful), then on prod once
		// approved; web-v2 on dev.
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		dev1 := f.activeJob("web:dev:r1")
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(dev1)+"/report", "agent", map[string]any{"status": "successful"}).status)
		f.clock.Advance(time.Second)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions/web-v1/approvals", "approve", map[string]any{"environment_id": "prod"}).status)
		prod1 := f.activeJob("web:prod:r1")
		f.clock.Advance(time.Second)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v2"}).status)
		dev2 := f.activeJob("web:dev:r1")
		require.NotEqual(t, dev1, dev2)

		list := func(query string) []string {
			t.Helper()
			res := f.do(http.MethodGet, "/api/v1/jobs"+query, "read", nil)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			var p api.Page[ports.JobRow]
			require.NoError(t, json.Unmarshal(res.body, &p))
			ids := []string{}
			for _, j := range p.Items {
				ids = append(ids, j.ID)
			}
			return ids
		}
		all := []string{dev2, prod1, dev1}
		require.Equal(t, all, list(""), "newest first across targets")
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"?status=successful", []string{dev1}},
			{"?status=pending,successful", all},
			{"?status=pending&status=inProgress", []string{dev2, prod1}},
			{"?job_agent_id=ext", all},
			{"?job_agent_id=other", []string{}},
			{"?deployment_id=web&environment_id=dev", []string{dev2, dev1}},
			{"?environment_id=prod", []string{prod1}},
			{"?resource_id=r1", all},
			{"?version_id=web-v1", []string{prod1, dev1}},
			{"?workspace_id=ws", all},
			{"?workspace_id=nope", []string{}},
			{"?target=web:prod:r1", []string{prod1}},
			{"?target=web:dev:r1&status=pending", []string{dev2}},
		} {
			require.Equal(t, c.want, list(c.query), c.query)
		}
		// Pages of one, each continuing after the last: the same jobs.
		var walked []string
		path := "/api/v1/jobs?limit=1"
		for range 10 {
			res := f.do(http.MethodGet, path, "read", nil)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			var p api.Page[ports.JobRow]
			require.NoError(t, json.Unmarshal(res.body, &p))
			require.Len(t, p.Items, 1)
			walked = append(walked, p.Items[0].ID)
			if p.NextCursor == "" {
				break
			}
			path = "/api/v1/jobs?limit=1&cursor=" + p.NextCursor
		}
		require.Equal(t, all, walked)

		// The client sends the same filters.
		reader, err := client.New(f.http.URL, f.tokens["read"])
		require.NoError(t, err)
		p, err := reader.ListJobs(f.ctx, api.JobFilter{Status: []string{"pending", "inProgress"}, DeploymentID: "web"}, client.Page{Limit: 1})
		require.NoError(t, err)
		require.Equal(t, []string{dev2}, []string{p.Items[0].ID})
		p, err = reader.ListJobs(f.ctx, api.JobFilter{Status: []string{"pending", "inProgress"}, DeploymentID: "web"}, client.Page{Limit: 1, Cursor: p.NextCursor})
		require.NoError(t, err)
		require.Equal(t, prod1, p.Items[0].ID)
		require.Empty(t, p.NextCursor)

		// Bad input: each a problem naming the parameter.
		for _, c := range []struct {
			query  string
			status int
			loc    string
		}{
			{"?status=done", http.StatusUnprocessableEntity, "query.status"},
			{"?target=nonsense", http.StatusBadRequest, "query.target"},
			{"?target=web:dev:r1&environment_id=prod", http.StatusUnprocessableEntity, "query.environment_id"},
			{"?cursor=!!", http.StatusBadRequest, "query.cursor"},
			{"?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("not-a-key")), http.StatusBadRequest, "query.cursor"},
			{"?limit=0", http.StatusUnprocessableEntity, "query.limit"},
			{"?limit=1001", http.StatusUnprocessableEntity, "query.limit"},
			{"?bogus=1", http.StatusUnprocessableEntity, "query.bogus"},
		} {
			p := f.do(http.MethodGet, "/api/v1/jobs"+c.query, "read", nil).problem(t, c.status)
			require.Contains(t, locations(p), c.loc, c.query)
		}
		f.do(http.MethodGet, "/api/v1/jobs?target=web:dev:nope", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodGet, "/api/v1/jobs", "", nil).problem(t, http.StatusUnauthorized)
		f.do(http.MethodGet, "/api/v1/jobs", "revoked", nil).problem(t, http.StatusUnauthorized)
		f.do(http.MethodGet, "/api/v1/jobs", "agent", nil).problem(t, http.StatusForbidden)
	})
}
