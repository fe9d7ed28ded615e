package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// failingAudit is an audit log whose appends fail.
type failingAudit struct{ ports.AuditLog }

func (failingAudit) AuditAppend(context.Context, ports.AuditEntry) (ports.AuditEntry, error) {
	return ports.AuditEntry{}, errors.New("audit log unavailable")
}

// TestAuditInTheWritesTransaction: the audit entry is written in the
// write's own transaction, so a write whose entry cannot be recorded is
// not made (500 problem, the object absent), and one whose entry is
// recorded answers only after both committed.
func TestAuditInTheWritesTransaction(t *testing.T) {
	t.Parallel()
	for name := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, name, func(st *stores) { st.audit = failingAudit{st.audit} })
			env := map[string]any{"id": "qa", "system_id": "sys", "name": "qa", "resource_selector": "true"}
			f.do(http.MethodPut, "/api/v1/environments/qa", "write", env).problem(t, http.StatusInternalServerError)
			f.do(http.MethodGet, "/api/v1/environments/qa", "read", nil).problem(t, http.StatusNotFound)
			res := f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"id": "web-v9", "deployment_id": "web", "tag": "v9"})
			require.Equal(t, http.StatusInternalServerError, res.status, string(res.body))
			f.do(http.MethodGet, "/api/v1/versions/web-v9", "read", nil).problem(t, http.StatusNotFound)
		})
	}
}

// TestAuditRecordsWrites: every accepted write leaves an entry naming who,
// from where, what and which object, readable with the read scope, newest
// first and filtered; a refused write and a read leave none.
func TestAuditRecordsWrites(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		env := map[string]any{"id": "qa", "system_id": "sys", "name": "qa", "resource_selector": "true"}
		require.Equal(t, http.StatusOK, f.do(http.MethodPut, "/api/v1/environments/qa", "write", env).status)
		env["name"] = "quality"
		require.Equal(t, http.StatusOK, f.do(http.MethodPut, "/api/v1/environments/qa", "write", env).status)
		f.do(http.MethodPut, "/api/v1/environments/qa", "read", env).problem(t, http.StatusForbidden)
		f.do(http.MethodPut, "/api/v1/environments/qa", "write", map[string]any{"id": "qa", "colour": 1}).problem(t, http.StatusUnprocessableEntity)
		f.do(http.MethodGet, "/api/v1/environments/qa", "read", nil)

		f.do(http.MethodGet, "/api/v1/audit", "", nil).problem(t, http.StatusUnauthorized)
		res := f.do(http.MethodGet, "/api/v1/audit?kind=environments&id=qa", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		items := res.json(t)["items"].([]any)
		require.Len(t, items, 2, "the two accepted writes, not the refused ones nor the read: %s", res.body)
		newest, oldest := items[0].(map[string]any), items[1].(map[string]any)
		require.Equal(t, "putEnvironment", newest["action"])
		require.Equal(t, "user-write", newest["actor"])
		require.Equal(t, "PUT", newest["method"])
		require.Equal(t, "/api/v1/environments/qa", newest["path"])
		require.NotEmpty(t, newest["source"])
		require.EqualValues(t, 200, newest["status"])
		require.Contains(t, newest["summary"], "replaced environment qa")
		require.Contains(t, oldest["summary"], "created environment qa")
		require.Greater(t, newest["seq"].(float64), oldest["seq"].(float64))

		// An approval says what it approves.
		res = f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"id": "web-v2", "deployment_id": "web", "tag": "v2"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		res = f.do(http.MethodPost, "/api/v1/versions/web-v2/approvals", "approve", map[string]any{"environment_id": "prod"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		res = f.do(http.MethodGet, "/api/v1/audit?actor=user-approve&limit=1", "read", nil)
		items = res.json(t)["items"].([]any)
		require.Len(t, items, 1)
		require.Equal(t, "approveVersion", items[0].(map[string]any)["action"])
		require.Contains(t, items[0].(map[string]any)["summary"], "version web-v2 for environment prod")

		// Pages continue with the cursor.
		res = f.do(http.MethodGet, "/api/v1/audit?limit=1", "read", nil)
		next := res.json(t)["next_cursor"].(string)
		require.NotEmpty(t, next)
		res = f.do(http.MethodGet, "/api/v1/audit?limit=100&cursor="+next, "read", nil)
		require.Len(t, res.json(t)["items"], 3, "the environment's two writes and the version")
	})
}
