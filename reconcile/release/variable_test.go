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

// TestResolveVariablesOrder: resource value → deployment value → variable
// set (priority, then list order) → default; undeclared keys are ignored.
func TestResolveVariablesOrder(t *testing.T) {
	t.Parallel()
	secret := Value{Sensitive: &SecretRef{Ref: "vault://db"}}
	dep := Deployment{ID: "d", Variables: []DeploymentVariable{
		{Key: "from-resource", Values: []VariableValue{{Selector: "true", Value: Value{Literal: "deployment"}}}, Default: &Value{Literal: "default"}},
		{Key: "from-deployment", Values: []VariableValue{{Selector: `environment.name == "prod"`, Value: Value{Literal: "deployment"}}},
			Default: &Value{Literal: "default"}},
		{Key: "from-set", Values: []VariableValue{{Selector: `environment.name == "dev"`, Value: Value{Literal: "deployment"}}},
			Default: &Value{Literal: "default"}},
		{Key: "from-default", Default: &Value{Literal: "default"}},
		{Key: "secret"},
		{Key: "missing"},
	}}
	res := Resource{ID: "r", Kind: "cluster", Variables: map[string]Value{"from-resource": {Literal: "resource"}, "undeclared": {Literal: "x"}}}
	sets := []VariableSet{
		{Name: "low", Priority: 1, Values: map[string]Value{"from-set": {Literal: "low-set"}, "secret": secret}},
		{Name: "other-env", Selector: `environment.name == "dev"`, Priority: 9, Values: map[string]Value{"from-set": {Literal: "dev-set"}}},
		{Name: "high", Selector: `resource.kind == "cluster"`, Priority: 5, Values: map[string]Value{"from-set": {Literal: "high-set"}}},
		{Name: "high-later", Priority: 5, Values: map[string]Value{"from-set": {Literal: "later"}, "from-default": {Literal: "set"}}},
	}
	// from-default is in a set, so the default only applies without sets.
	env := Environment{ID: "e", Name: "prod"}
	s := Subject{Deployment: &dep, Environment: &env, Resource: &res}
	vals, srcs, err := ResolveVariables(&s, sets, CEL{})
	require.NoError(t, err)
	require.Equal(t, map[string]Value{
		"from-resource":   {Literal: "resource"},
		"from-deployment": {Literal: "deployment"},
		"from-set":        {Literal: "high-set"},
		"from-default":    {Literal: "set"},
		"secret":          secret,
	}, vals)
	require.Equal(t, map[string]VariableSource{
		"from-resource": SourceResource, "from-deployment": SourceDeployment, "from-set": SourceVariableSet,
		"from-default": SourceVariableSet, "secret": SourceVariableSet,
	}, srcs)

	vals, srcs, err = ResolveVariables(&s, nil, CEL{})
	require.NoError(t, err)
	require.Equal(t, Value{Literal: "default"}, vals["from-default"], "no sets: the default")
	require.Equal(t, SourceDefault, srcs["from-set"])
	require.NotContains(t, vals, "missing", "a variable no source has is left out")
	require.NotContains(t, vals, "undeclared", "only declared variables resolve")
}

// TestResolveVariablesSelectorErrors name the failing field.
func TestResolveVariablesSelectorErrors(t *testing.T) {
	t.Parallel()
	dep := Deployment{ID: "d", Variables: []DeploymentVariable{{Key: "k"}}}
	sets := []VariableSet{{ID: "ok", Name: "ok", Values: map[string]Value{}},
		{ID: "bad", Name: "bad", Selector: `resource.metadata.missing == "x"`, Values: map[string]Value{"k": {Literal: 1}}}}
	s := Subject{Deployment: &dep, Environment: &Environment{}, Resource: &Resource{}}
	_, _, err := ResolveVariables(&s, sets, CEL{})
	requireField(t, err, "variable_set bad.selector")

	dep.Variables[0].Values = []VariableValue{{Selector: `resource.metadata.missing == "x"`, Value: Value{Literal: 1}}}
	_, _, err = ResolveVariables(&s, sets, CEL{})
	requireField(t, err, "variables[0].values")
}

// TestVariableSetAndResourceVariablesValidate: bad sets and values are
// refused with their field.
func TestVariableSetAndResourceVariablesValidate(t *testing.T) {
	t.Parallel()
	ok := VariableSet{ID: "vs", SystemID: "s", Name: "x", Values: map[string]Value{"k": {Literal: 1}}}
	require.NoError(t, ok.Validate())
	for field, edit := range map[string]func(v *VariableSet){
		"id":        func(v *VariableSet) { v.ID = "" },
		"system_id": func(v *VariableSet) { v.SystemID = "" },
		"name":      func(v *VariableSet) { v.Name = "" },
		"selector":  func(v *VariableSet) { v.Selector = "resource.name ==" },
		"values.k": func(v *VariableSet) {
			v.Values = map[string]Value{"k": {Literal: 1, Reference: &Reference{Relation: "a", Path: []string{"b"}}}}
		},
	} {
		bad := ok
		edit(&bad)
		requireField(t, bad.Validate(), field)
	}
	r := Resource{ID: "r", WorkspaceID: "w", Kind: "k", Identifier: "i", Name: "n", Variables: map[string]Value{"v": {Reference: &Reference{}}}}
	requireField(t, r.Validate(), "variables.v.reference.relation")
}

// requireField requires err to be a *FieldError naming field.
func requireField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, field, fe.Field, err.Error())
}
