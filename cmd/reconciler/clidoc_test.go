package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIReferenceIsCurrent: docs/cli.md is what the commands say of
// themselves now (UPDATE_DOCS=1, or make docs, rewrites it).
func TestCLIReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	require.NoError(t, writeCLIReference(&b, newRootCmd()))
	const path = "../../docs/cli.md"
	if os.Getenv("UPDATE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err, "run make docs to write it")
	require.Equal(t, string(committed), b.String(), "docs/cli.md is stale: run make docs")
	for _, cmd := range []string{"## reconciler serve\n", "## reconciler versions create\n", "## reconciler apply\n", "`--dsn`"} {
		require.Contains(t, b.String(), cmd)
	}
}
