package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/contract"
)

// fillSchema has one property of each kind Fill synthesizes.
const fillSchema = `{
  "type": "object",
  "required": ["id", "name", "when", "url", "state", "count", "ok", "tags", "owner", "closed_at", "either", "merged"],
  "properties": {
    "id": {"type": "integer", "minimum": 1},
    "name": {"type": "string"},
    "when": {"type": "string", "format": "date-time"},
    "url": {"type": "string", "format": "uri"},
    "state": {"type": "string", "enum": ["open", "closed"]},
    "count": {"type": "number"},
    "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "owner": {"type": "object", "required": ["login"], "properties": {"login": {"type": "string"}}},
    "closed_at": {"type": "string", "nullable": true},
    "either": {"oneOf": [{"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}, "additionalProperties": false},
                         {"type": "object", "required": ["b"], "properties": {"b": {"type": "string"}}, "additionalProperties": false}]},
    "merged": {"allOf": [{"type": "object", "required": ["x"], "properties": {"x": {"type": "string"}}},
                         {"type": "object", "required": ["y"], "properties": {"y": {"type": "integer"}}}]},
    "items": {"type": "array", "items": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}}
  }
}`

// TestFillCompletesToTheSchema: each case's value, filled, is an
// instance of the schema and keeps every value the case set.
func TestFillCompletesToTheSchema(t *testing.T) {
	t.Parallel()
	var s openapi3.Schema
	require.NoError(t, json.Unmarshal([]byte(fillSchema), &s))
	for name, tc := range map[string]struct {
		in   string
		keep map[string]any
	}{
		"empty":           {in: `{}`},
		"values kept":     {in: `{"name":"n","state":"closed","id":7}`, keep: map[string]any{"name": "n", "state": "closed", "id": float64(7)}},
		"nested filled":   {in: `{"owner":{}}`},
		"items filled":    {in: `{"items":[{},{"n":2}]}`},
		"oneOf picks fit": {in: `{"either":{"b":"z"}}`, keep: map[string]any{"either": map[string]any{"b": "z"}}},
		"allOf merged":    {in: `{"merged":{"x":"k"}}`},
	} {
		var v any
		require.NoError(t, json.Unmarshal([]byte(tc.in), &v), name)
		out := contract.Fill(&s, v).(map[string]any)
		require.NoError(t, s.VisitJSON(out), name)
		for k, want := range tc.keep {
			require.Equal(t, want, out[k], name)
		}
		require.Nil(t, out["closed_at"], name)
		if _, set := tc.keep["state"]; !set {
			require.Equal(t, "open", out["state"], "%s: the first enum value", name)
		}
	}
}

// TestFillKeepsWrongValues: a value the schema refuses stays, so the
// checker still reports it.
func TestFillKeepsWrongValues(t *testing.T) {
	t.Parallel()
	var s openapi3.Schema
	require.NoError(t, json.Unmarshal([]byte(fillSchema), &s))
	out := contract.Fill(&s, map[string]any{"id": "seven", "state": "merged"}).(map[string]any)
	require.Equal(t, "seven", out["id"])
	require.Equal(t, "merged", out["state"])
	require.Error(t, s.VisitJSON(out))
}
