package workflow_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

// TestLoadRefusesNUL: a template holding a NUL in a value or a key is
// invalid, naming where, as the catalog refuses it (issue 29).
func TestLoadRefusesNUL(t *testing.T) {
	for _, tc := range []struct{ src, path string }{
		{`{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"n"},"spec":{"tasks":[{"name":"a\u0000b","type":"approval"}]}}`, "spec.tasks[0].name"},
		{"apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: n}\nspec:\n  tasks:\n  - {name: a, type: approval, approval: {message: \"x\\0y\"}}\n", "spec.tasks[0].approval.message"},
	} {
		_, err := workflow.Load([]byte(tc.src))
		var inv *workflow.InvalidError
		require.True(t, errors.As(err, &inv), "%v", err)
		found := false
		for _, p := range inv.Problems {
			if p.Path == tc.path {
				require.Contains(t, p.String(), "NUL")
				found = true
			}
		}
		require.True(t, found, "%v", inv.Problems)
	}
}
