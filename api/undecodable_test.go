package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUndecodableInputIs400: a NUL, another control character, invalid
// UTF-8, a broken escape or an id "..", in any id or query parameter, is
// a 400
// problem+json naming where, on every route the OpenAPI document lists
// (each path parameter replaced by "a%00b"), never a 500.
func TestUndecodableInputIs400(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		res := f.do(http.MethodGet, "/api/v1/openapi.json", "read", nil)
		var doc struct {
			Paths map[string]map[string]any `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(res.body, &doc))
		routes := 0
		for path, ops := range doc.Paths {
			if !strings.Contains(path, "{") {
				continue
			}
			bad := path
			for strings.Contains(bad, "{") {
				i, j := strings.Index(bad, "{"), strings.Index(bad, "}")
				bad = bad[:i] + "a%00b" + bad[j+1:]
			}
			for method := range ops {
				m := strings.ToUpper(method)
				p := f.do(m, bad, "admin", nil).problem(t, http.StatusBadRequest)
				require.Contains(t, p["detail"], "control character", "%s %s", m, bad)
				dots := strings.ReplaceAll(bad, "a%00b", "..")
				p = f.do(m, dots, "admin", nil).problem(t, http.StatusBadRequest)
				require.Contains(t, p["detail"], `segment ".."`, "%s %s", m, dots)
				routes++
			}
		}
		require.Greater(t, routes, 40)
		for _, q := range []string{"?cursor=%00", "?environment_id=a%00", "?limit=1&x=%ff", "?x=%zz", "?a%00=1"} {
			f.do(http.MethodGet, "/api/v1/jobs"+q, "read", nil).problem(t, http.StatusBadRequest)
		}
		f.do(http.MethodGet, "/api/v1/deployments/web%09x", "read", nil).problem(t, http.StatusBadRequest)
	})
}
