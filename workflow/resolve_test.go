package workflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

func TestResolveMostSpecificScopeWins(t *testing.T) {
	t.Parallel()
	ws := workflow.TemplateRef{ID: "t-ws", Name: "deploy", Scope: workflow.ScopeWorkspace, ScopeID: "w1"}
	sys := workflow.TemplateRef{ID: "t-sys", Name: "deploy", Scope: workflow.ScopeSystem, ScopeID: "s1"}
	otherSys := workflow.TemplateRef{ID: "t-sys2", Name: "deploy", Scope: workflow.ScopeSystem, ScopeID: "s2"}
	dep := workflow.TemplateRef{ID: "t-dep", Name: "deploy", Scope: workflow.ScopeDeployment, ScopeID: "d1"}
	otherDep := workflow.TemplateRef{ID: "t-dep2", Name: "deploy", Scope: workflow.ScopeDeployment, ScopeID: "d2"}
	otherName := workflow.TemplateRef{ID: "t-x", Name: "rollback", Scope: workflow.ScopeDeployment, ScopeID: "d1"}
	cases := []struct {
		name       string
		candidates []workflow.TemplateRef
		want       string
	}{
		{"deployment over system and workspace", []workflow.TemplateRef{ws, sys, dep}, "t-dep"},
		{"system over workspace", []workflow.TemplateRef{ws, sys, otherDep}, "t-sys"},
		{"workspace when nothing closer", []workflow.TemplateRef{otherSys, ws, otherDep, otherName}, "t-ws"},
		{"order does not matter", []workflow.TemplateRef{dep, sys, ws}, "t-dep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := workflow.Resolve("deploy", "d1", "s1", tc.candidates...)
			require.NoError(t, err)
			require.Equal(t, tc.want, got.ID)
		})
	}
}

func TestResolveErrors(t *testing.T) {
	t.Parallel()
	_, err := workflow.Resolve("deploy", "d1", "s1", workflow.TemplateRef{ID: "a", Name: "deploy", Scope: workflow.ScopeSystem, ScopeID: "s9"})
	require.ErrorIs(t, err, workflow.ErrTemplateNotFound)
	_, err = workflow.Resolve("deploy", "d1", "s1",
		workflow.TemplateRef{ID: "a", Name: "deploy", Scope: workflow.ScopeSystem, ScopeID: "s1"},
		workflow.TemplateRef{ID: "b", Name: "deploy", Scope: workflow.ScopeSystem, ScopeID: "s1"})
	require.ErrorIs(t, err, workflow.ErrAmbiguousTemplate)
}

func TestStoredAsKeepsScopesApart(t *testing.T) {
	t.Parallel()
	ws := workflow.Metadata{Name: "deploy"}
	sys := workflow.Metadata{Name: "deploy", Scope: workflow.ScopeSystem}
	dep := workflow.Metadata{Name: "deploy", Scope: workflow.ScopeDeployment, ScopeID: "api"}
	for _, tc := range []struct {
		meta workflow.Metadata
		obj  string
		want string // "" when allowed
	}{
		{ws, "deploy", ""},
		{ws, "deploy.system.shop", `must be the catalog object's name`},
		{sys, "deploy.system.shop", ""},
		{sys, "deploy", "is stored as deploy.system.<system id>"},
		{sys, "deploy.system.", "is stored as"},
		{sys, "deploy.deployment.api", "is stored as"},
		{dep, "deploy.deployment.api", ""},
		{dep, "deploy.deployment.web", `scopeId "api" does not match`},
	} {
		err := tc.meta.StoredAs(tc.obj)
		if tc.want == "" {
			require.NoError(t, err, "%+v as %s", tc.meta, tc.obj)
		} else {
			require.ErrorContains(t, err, tc.want, "%+v as %s", tc.meta, tc.obj)
		}
	}
}

func TestLookupsFollowResolutionOrder(t *testing.T) {
	t.Parallel()
	names := func(from workflow.Scope) []string {
		refs, err := workflow.Lookups("deploy", "api", "shop", from)
		require.NoError(t, err)
		var out []string
		for _, r := range refs {
			out = append(out, r.ID)
			got, err := workflow.Resolve("deploy", "api", "shop", r)
			require.NoError(t, err, "each lookup is visible to the deployment")
			require.Equal(t, r, got)
		}
		return out
	}
	require.Equal(t, []string{"deploy.deployment.api", "deploy.system.shop", "deploy"}, names(""))
	require.Equal(t, []string{"deploy.deployment.api", "deploy.system.shop", "deploy"}, names(workflow.ScopeDeployment))
	require.Equal(t, []string{"deploy.system.shop", "deploy"}, names(workflow.ScopeSystem))
	require.Equal(t, []string{"deploy"}, names(workflow.ScopeWorkspace))
	_, err := workflow.Lookups("deploy", "api", "shop", "galaxy")
	require.ErrorContains(t, err, `unknown scope "galaxy"`)
}
