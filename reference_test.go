package reconciler_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// TestCELReference: docs/cel.md names every CEL variable the code declares
// for selectors, verification conditions and workflows.
func TestCELReference(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("docs/cel.md")
	require.NoError(t, err)
	doc := string(raw)
	vars := append(release.SelectorEnv.Vars(), policy.ResultEnv.Vars()...)
	vars = append(vars, workflow.RootWorkflow, workflow.RootRelease, workflow.RootVariables, workflow.RootMatrix, workflow.RootTasks, workflow.RootEvent)
	for _, v := range vars {
		require.Contains(t, doc, "`"+v+"`", "docs/cel.md does not name the CEL variable %s", v)
	}
}
