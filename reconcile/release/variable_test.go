package release

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVariableResolve(t *testing.T) {
	t.Parallel()
	def := Value{Literal: "default"}
	v := DeploymentVariable{Key: "k", Default: &def, Values: []VariableValue{
		{Selector: `resource.kind == "a"`, Priority: 1, Value: Value{Literal: "a-low"}},
		{Selector: `resource.kind == "a"`, Priority: 5, Value: Value{Literal: "a-high"}},
		{Selector: `resource.kind == "a"`, Priority: 5, Value: Value{Literal: "a-high-later"}},
		{Selector: `resource.kind == "b"`, Priority: 0, Value: Value{Literal: "b"}},
		{Selector: "", Priority: 100, Value: Value{Literal: "empty selector"}},
		{Selector: `resource.metadata.missing == "x"`, Priority: 50, Value: Value{Literal: "errors"}},
	}}
	tests := []struct {
		name    string
		kind    string
		want    any
		wantErr bool
	}{
		{"highest priority wins, list order among equals", "a", "a-high", true},
		{"lower-priority match when it is the only one", "b", "b", true},
		{"default when nothing matches", "c", "default", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok, err := v.Resolve(&Subject{Resource: &Resource{Kind: tt.kind}}, CEL{})
			require.True(t, ok)
			require.Equal(t, tt.want, got.Literal)
			if tt.wantErr {
				require.Error(t, err, "the failing selector is reported")
			}
		})
	}
	noDefault := DeploymentVariable{Key: "k"}
	_, ok, err := noDefault.Resolve(&Subject{Resource: &Resource{}}, CEL{})
	require.False(t, ok)
	require.NoError(t, err)
}

func TestValueJSON(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{"literal":false}`, `{"literal":0}`, `{"literal":{"a":[1,2]}}`, `{}`,
		`{"reference":{"relation":"vpc","path":["id"]}}`, `{"sensitive":{"ref":"vault:x"}}`,
	} {
		var v Value
		require.NoError(t, json.Unmarshal([]byte(src), &v), src)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		require.JSONEq(t, src, string(b))
	}
	var v Value
	require.NoError(t, json.Unmarshal([]byte(`{"literal":false}`), &v))
	require.Equal(t, ValueLiteral, v.Kind())
	require.Equal(t, false, v.Literal)
}
