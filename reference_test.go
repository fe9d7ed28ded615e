package reconciler_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// TestArchitectureIsAMap: ARCHITECTURE.md stays a map (at most 15 KB) and
// names every package of the module, so a new package gets its line.
func TestArchitectureIsAMap(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("ARCHITECTURE.md")
	require.NoError(t, err)
	require.LessOrEqual(t, len(raw), 15<<10, "ARCHITECTURE.md is a five-minute map; invariants go to each package's doc comment")
	var missing []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bench" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		files, _ := filepath.Glob(filepath.Join(path, "*.go"))
		hasPkg := false
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				hasPkg = true
			}
		}
		if hasPkg && path != "." && !strings.HasSuffix(path, "test") && !strings.Contains(string(raw), "`"+filepath.ToSlash(path)+"`") {
			missing = append(missing, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, missing, "ARCHITECTURE.md has no line for these packages")
}
