package api_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestVersions(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		res := f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1", "config": map[string]any{"image": "web:1"}})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		v := res.json(t)
		require.Equal(t, "web-v1", v["id"])
		require.Equal(t, "ready", v["status"])

		// Every error class of the body, each naming its location.
		p := f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v9", "colour": "red"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.colour", "unknown fields are refused")
		p = f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"tag": "v9"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.deployment_id")
		p = f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v9", "status": "shipped"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.status")
		f.do(http.MethodPost, "/api/v1/versions", "write", `{"deployment_id": "web",`).problem(t, http.StatusBadRequest)
		f.do(http.MethodPost, "/api/v1/versions", "write", `{"deployment_id": "web", "tag": "`+strings.Repeat("x", 70<<10)+`"}`).problem(t, http.StatusRequestEntityTooLarge)
		f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "nope", "tag": "v1"}).problem(t, http.StatusNotFound)
		f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).problem(t, http.StatusConflict)
		p = f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"id": "bad id", "deployment_id": "web", "tag": "v1"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.id")
		f.do(http.MethodGet, "/api/v1/versions/nope", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodGet, "/api/v1/versions?deployment_id=web&colour=red", "read", nil).problem(t, http.StatusUnprocessableEntity)

		// Status changes: only ready, paused and rejected.
		res = f.do(http.MethodPost, "/api/v1/versions/web-v1/status", "write", map[string]any{"status": "paused"})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "paused", res.json(t)["status"])
		f.do(http.MethodPost, "/api/v1/versions/web-v1/status", "write", map[string]any{"status": "building"}).problem(t, http.StatusUnprocessableEntity)
		f.do(http.MethodPost, "/api/v1/versions/nope/status", "write", map[string]any{"status": "ready"}).problem(t, http.StatusNotFound)
	})
}

func TestVersionsPagination(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		for _, tag := range []string{"v1", "v2", "v3", "v4", "v5"} {
			f.clock.Advance(1e9)
			require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": tag}).status)
		}
		var got []string
		path := "/api/v1/versions?deployment_id=web&limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 4)
			res := f.do(http.MethodGet, path, "read", nil)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			m := res.json(t)
			for _, it := range m["items"].([]any) {
				got = append(got, it.(map[string]any)["tag"].(string))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			path = "/api/v1/versions?deployment_id=web&limit=2&cursor=" + next
		}
		require.Equal(t, []string{"v5", "v4", "v3", "v2", "v1"}, got, "newest first, each once")

		// Keyset pages: versions created at the same instant are ordered by
		// id at every page boundary, and a version created between two pages
		// above the cursor is not on the next page (one below it is).
		f.clock.Advance(1e9)
		for _, tag := range []string{"t-b", "t-d", "t-a", "t-c"} {
			require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": tag}).status)
		}
		walk := func(limit int, between func()) []string {
			var got []string
			path := "/api/v1/versions?deployment_id=web&limit=" + strconv.Itoa(limit)
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20)
				res := f.do(http.MethodGet, path, "read", nil)
				require.Equal(t, http.StatusOK, res.status, string(res.body))
				var p api.Page[release.DeploymentVersion]
				require.NoError(t, json.Unmarshal(res.body, &p))
				require.LessOrEqual(t, len(p.Items), limit)
				for _, v := range p.Items {
					got = append(got, v.Tag)
				}
				if p.NextCursor == "" {
					return got
				}
				if pages == 0 && between != nil {
					between()
				}
				path = "/api/v1/versions?deployment_id=web&limit=" + strconv.Itoa(limit) + "&cursor=" + p.NextCursor
			}
		}
		all := []string{"t-d", "t-c", "t-b", "t-a", "v5", "v4", "v3", "v2", "v1"}
		for _, limit := range []int{1, 2, 3, 1000} {
			require.Equal(t, all, walk(limit, nil), "limit %d", limit)
		}
		require.Equal(t, []string{"t-d", "t-c", "t-b", "t-a", "v5", "v4", "v3", "v2", "v1"}, walk(2, func() {
			f.clock.Advance(1e9) // newer than every version: above the cursor
			require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "t-new"}).status)
		}))
		junk := base64.RawURLEncoding.EncodeToString([]byte("web-v3"))
		p := f.do(http.MethodGet, "/api/v1/versions?deployment_id=web&cursor="+junk, "read", nil).problem(t, http.StatusBadRequest)
		require.Contains(t, locations(p), "query.cursor")
		f.do(http.MethodGet, "/api/v1/versions?deployment_id=web", "", nil).problem(t, http.StatusUnauthorized)
		f.do(http.MethodGet, "/api/v1/versions?deployment_id=web", "agent", nil).problem(t, http.StatusForbidden)
		p = f.do(http.MethodGet, "/api/v1/versions?deployment_id=web&cursor=!!", "read", nil).problem(t, http.StatusBadRequest)
		require.Contains(t, locations(p), "query.cursor")
		f.do(http.MethodGet, "/api/v1/versions?deployment_id=web&limit=0", "read", nil).problem(t, http.StatusUnprocessableEntity)
		f.do(http.MethodGet, "/api/v1/versions?deployment_id=nope", "read", nil).problem(t, http.StatusNotFound)
	})
}

func TestVersionCreateConcurrentConflict(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		statuses := concurrently(8, func() int {
			return f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status
		})
		requireOneWins(t, statuses, http.StatusCreated)
	})
}

func TestApprovalsAndForceDeploys(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		f.drain()
		// prod waits for an approval: explain says so.
		res := f.do(http.MethodGet, "/api/v1/targets/web:prod:r1/explain", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Contains(t, string(res.body), "approval")
		res = f.do(http.MethodGet, "/api/v1/versions/web-v1/explain?environment_id=prod", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		items := res.json(t)["items"].([]any)
		require.Len(t, items, 1)
		require.Equal(t, "pending", items[0].(map[string]any)["decision"].(map[string]any)["status"], string(res.body))

		res = f.do(http.MethodPost, "/api/v1/versions/web-v1/approvals", "approve", map[string]any{"environment_id": "prod", "user": "mallory"})
		require.Contains(t, locations(res.problem(t, http.StatusUnprocessableEntity)), "body.user", "the approver is the caller, never a field")
		res = f.do(http.MethodPost, "/api/v1/versions/web-v1/approvals", "approve", map[string]any{"environment_id": "prod"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		m := res.json(t)
		require.Equal(t, true, m["added"])
		require.Equal(t, "user-approve", m["approval"].(map[string]any)["user"])
		res = f.do(http.MethodPost, "/api/v1/versions/web-v1/approvals", "approve", map[string]any{"environment_id": "prod"})
		require.Equal(t, false, res.json(t)["added"], "approving twice keeps the first")
		res = f.do(http.MethodGet, "/api/v1/versions/web-v1/approvals", "read", nil)
		require.Equal(t, http.StatusOK, res.status)
		require.Contains(t, string(res.body), `"user-approve"`)
		f.do(http.MethodPost, "/api/v1/versions/nope/approvals", "approve", map[string]any{"environment_id": "prod"}).problem(t, http.StatusNotFound)

		res = f.do(http.MethodPost, "/api/v1/versions/web-v1/force-deploys", "approve", map[string]any{"environment_id": "prod", "reason": "hotfix", "expires_in": "2h"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		skip := res.json(t)
		require.Equal(t, "user-approve", skip["created_by"])
		p := f.do(http.MethodPost, "/api/v1/versions/web-v1/force-deploys", "approve", map[string]any{"expires_in": "soon"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.expires_in")
		res = f.do(http.MethodGet, "/api/v1/versions/web-v1/force-deploys", "read", nil)
		require.Contains(t, string(res.body), skip["id"].(string))
		require.Equal(t, http.StatusNoContent, f.do(http.MethodDelete, "/api/v1/versions/web-v1/force-deploys/"+skip["id"].(string), "approve", nil).status)
		f.do(http.MethodDelete, "/api/v1/versions/web-v1/force-deploys/"+skip["id"].(string), "approve", nil).problem(t, http.StatusNotFound)
		require.Equal(t, "[]\n", string(f.do(http.MethodGet, "/api/v1/versions/web-v1/force-deploys", "read", nil).body))
	})
}
