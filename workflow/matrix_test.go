package workflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

func resources() []map[string]any {
	return []map[string]any{
		{"id": "r3", "name": "eu-prod", "kind": "Kubernetes", "identifier": "k8s/eu", "metadata": map[string]any{"tier": "prod"}},
		{"id": "r1", "name": "us-prod", "kind": "Kubernetes", "identifier": "k8s/us", "metadata": map[string]any{"tier": "prod"}},
		{"id": "r2", "name": "us-dev", "kind": "Kubernetes", "identifier": "k8s/dev", "metadata": map[string]any{}},
		{"id": "r4", "name": "vm-1", "kind": "VM", "identifier": "vm/1"},
	}
}

// names lists the matrix items' resource names in order.
func names(t *testing.T, items []any, key string) []string {
	t.Helper()
	out := make([]string, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)[key].(map[string]any)
		require.True(t, ok, "item %d is wrapped under %q: %v", i, key, it)
		out[i] = m["name"].(string)
	}
	return out
}

func TestExpandMatrixSelectors(t *testing.T) {
	t.Parallel()
	cond := func(c workflow.Condition) *workflow.Selector { return &workflow.Selector{Condition: &c} }
	cases := []struct {
		name string
		sel  *workflow.Selector
		want []string
	}{
		{"structured kind equals", cond(workflow.Condition{Type: "kind", Operator: "equals", Value: "Kubernetes"}), []string{"us-prod", "us-dev", "eu-prod"}},
		{"CEL string", &workflow.Selector{Expr: `resource.kind == "Kubernetes" && resource.name.startsWith("us")`}, []string{"us-prod", "us-dev"}},
		{"name not-equals", cond(workflow.Condition{Type: "name", Operator: "not-equals", Value: "vm-1"}), []string{"us-prod", "us-dev", "eu-prod"}},
		{"identifier contains", cond(workflow.Condition{Type: "identifier", Operator: "contains", Value: "/us"}), []string{"us-prod"}},
		{"name ends-with", cond(workflow.Condition{Type: "name", Operator: "ends-with", Value: "-prod"}), []string{"us-prod", "eu-prod"}},
		{"regex", cond(workflow.Condition{Type: "name", Operator: "regex", Value: `^(eu|vm)-`}), []string{"eu-prod", "vm-1"}},
		{"metadata, missing on some", cond(workflow.Condition{Type: "metadata", Key: "tier", Operator: "equals", Value: "prod"}), []string{"us-prod", "eu-prod"}},
		{"and with not", cond(workflow.Condition{Type: "comparison", Operator: "and", Conditions: []workflow.Condition{
			{Type: "kind", Operator: "equals", Value: "Kubernetes"},
			{Type: "metadata", Key: "tier", Operator: "equals", Value: "prod", Not: true},
		}}), []string{"us-dev"}},
		{"or", cond(workflow.Condition{Type: "comparison", Operator: "or", Conditions: []workflow.Condition{
			{Type: "kind", Operator: "equals", Value: "VM"},
			{Type: "name", Operator: "starts-with", Value: "eu"},
		}}), []string{"eu-prod", "vm-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &workflow.Parameter{Name: "targets", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{Kind: workflow.SourceResource, Selector: tc.sel}}
			items, err := workflow.ExpandMatrix(p, workflow.Inputs{Resources: resources()})
			require.NoError(t, err)
			require.Equal(t, tc.want, names(t, items, "resource"), "sorted by id")
		})
	}
}

func TestExpandMatrixSources(t *testing.T) {
	t.Parallel()
	envs := []map[string]any{{"id": "e2", "name": "prod"}, {"id": "e1", "name": "staging"}}
	items, err := workflow.ExpandMatrix(&workflow.Parameter{Name: "e", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{
		Kind: workflow.SourceEnvironment, Selector: &workflow.Selector{Expr: "true"}}}, workflow.Inputs{Environments: envs})
	require.NoError(t, err)
	require.Equal(t, []string{"staging", "prod"}, names(t, items, "environment"))

	rts := []map[string]any{
		{"id": "t1", "name": "a", "deploymentId": "api"},
		{"id": "t0", "name": "b", "deployment": map[string]any{"id": "d9", "name": "api"}},
		{"id": "t2", "name": "c", "deploymentId": "web"},
	}
	items, err = workflow.ExpandMatrix(&workflow.Parameter{Name: "r", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{
		Kind: workflow.SourceReleaseTarget, Deployment: "api"}}, workflow.Inputs{ReleaseTargets: rts})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, names(t, items, "releaseTarget"), "release targets keep input order")

	items, err = workflow.ExpandMatrix(&workflow.Parameter{Name: "l", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{
		Kind: workflow.SourceList, Items: []any{"b", float64(2), map[string]any{"x": "y"}}}}, workflow.Inputs{})
	require.NoError(t, err)
	require.Equal(t, []any{"b", int64(2), map[string]any{"x": "y"}}, items, "list items are the listed values")
}

func TestExpandMatrixErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		p    workflow.Parameter
		in   workflow.Inputs
		want string
	}{
		{"not a matrix", workflow.Parameter{Name: "v", Type: workflow.TypeString}, workflow.Inputs{}, "not a matrix parameter"},
		{"bad selector", workflow.Parameter{Name: "m", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{Kind: workflow.SourceResource, Selector: &workflow.Selector{Expr: "resource.kind =="}}}, workflow.Inputs{}, "selector"},
		{"selector not boolean", workflow.Parameter{Name: "m", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{Kind: workflow.SourceResource, Selector: &workflow.Selector{Expr: "resource.name"}}}, workflow.Inputs{Resources: resources()}, `resource "r3"`},
		{"missing field in CEL", workflow.Parameter{Name: "m", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{Kind: workflow.SourceResource, Selector: &workflow.Selector{Expr: "resource.owner == 'x'"}}}, workflow.Inputs{Resources: resources()}, "no such key"},
		{"release target without deployment", workflow.Parameter{Name: "m", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{Kind: workflow.SourceReleaseTarget}}, workflow.Inputs{}, "needs a deployment"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.ExpandMatrix(&tc.p, tc.in)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
