package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPolicyLifecycleNeedsApprove: a write token cannot lift a policy's
// gate through the catalog: proposing the deletion of the published prod
// gate (or any other lifecycle change of a policy) is 403 and changes
// nothing; the change needs the route's write and approve (admin has both).
// (Issue 28, finding 2: propose-delete needed only write.)
func TestPolicyLifecycleNeedsApprove(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		base := "/api/v1/catalog/policy/prod-gate/revisions"
		res := f.do(http.MethodGet, base, "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var items []map[string]any
		require.NoError(t, json.Unmarshal(res.body, &items))
		require.Len(t, items, 1)
		pub := items[0]
		id, version := pub["id"].(string), pub["version"]
		for _, verb := range []string{"propose-delete", "propose", "unpropose", "undo-propose-delete"} {
			p := f.do(http.MethodPost, base+"/"+id+"/"+verb, "write", map[string]any{"version": version}).problem(t, http.StatusForbidden)
			require.Contains(t, p["detail"], "needs scope approve", verb)
		}
		f.do(http.MethodDelete, base+"/"+id+"?version=1", "write", nil).problem(t, http.StatusForbidden)
		res = f.do(http.MethodGet, base+"/"+id, "read", nil)
		require.Equal(t, "published", res.json(t)["lifecycle"], "nothing changed")

		f.do(http.MethodPost, base+"/"+id+"/propose-delete", "approve", map[string]any{"version": version}).problem(t, http.StatusForbidden)
		res = f.do(http.MethodPost, base+"/"+id+"/propose-delete", "admin", map[string]any{"version": version})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "deletion-proposed", res.json(t)["lifecycle"])
	})
}
