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
