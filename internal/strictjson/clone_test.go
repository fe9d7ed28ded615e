package strictjson_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
)

// TestClone: the copy equals the value and shares no object or array with
// it at any depth; nil objects and arrays stay nil, scalars pass.
func TestClone(t *testing.T) {
	t.Parallel()
	v := map[string]any{"a": []any{map[string]any{"b": 1.0}, "s", nil}, "n": map[string]any(nil), "l": []any(nil), "t": true}
	c := strictjson.Clone(v).(map[string]any)
	require.Equal(t, v, c)
	c["a"].([]any)[0].(map[string]any)["b"] = 2.0
	c["a"].([]any)[1] = "changed"
	c["x"] = "new"
	require.Equal(t, 1.0, v["a"].([]any)[0].(map[string]any)["b"], "nested objects are copies")
	require.Equal(t, "s", v["a"].([]any)[1], "arrays are copies")
	require.NotContains(t, v, "x")
	require.Nil(t, c["n"])
	require.Nil(t, c["l"])
	require.Nil(t, strictjson.CloneObject(nil))
	require.Equal(t, "scalar", strictjson.Clone("scalar"))
}
