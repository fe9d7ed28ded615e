package workflow_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow/scenario"
)

// TestScenarios runs every scripted scenario in testdata/workflows/scenarios
// through the pure scheduler with the simulated executor.
func TestScenarios(t *testing.T) {
	t.Parallel()
	scs, err := scenario.LoadAll(os.DirFS("../testdata/workflows"), "scenarios")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(scs), 5)
	for _, sc := range scs {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			sim, err := sc.Run()
			require.NoError(t, err)
			require.Empty(t, sc.Check(sim), "scenario %s: %s", sc.Name, sc.Description)
		})
	}
}
