package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInputsAreCapped: every command that reads a file or stdin stops at
// maxInputBytes, so an endless input (/dev/zero) or a huge one is refused
// at once with exit status 2 and the input named.
func TestInputsAreCapped(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	huge := filepath.Join(t.TempDir(), "huge.yaml")
	require.NoError(t, os.WriteFile(huge, []byte("a: "+strings.Repeat("x", maxInputBytes)+"\n"), 0o600))
	for _, args := range [][]string{
		{"decide", "/dev/zero"},
		{"decide", huge},
		{"workflow", "validate", "/dev/zero"},
		{"workflow", "validate", huge},
		{"workflow", "run", "/dev/zero", "--dsn", "postgres://127.0.0.1:1/none"},
		{"catalog", "create", "workflow-template/x", "-f", "/dev/zero", "--dsn", "postgres://127.0.0.1:1/none"},
		{"serve", "--demo-dir", filepath.Dir(huge) + "/zero"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			if args[0] == "serve" {
				dir := filepath.Join(t.TempDir(), "zero")
				require.NoError(t, os.Mkdir(dir, 0o700))
				require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, demoReleaseFile)))
				args = []string{"serve", "--listen", "", "--demo-dir", dir}
			}
			res := runCLI(t, "", args...)
			require.Equal(t, 2, res.code, "%v", res.err)
			require.ErrorContains(t, res.err, "larger than 4194304 bytes")
		})
	}
	t.Run("stdin", func(t *testing.T) {
		res := runCLI(t, strings.Repeat(" ", maxInputBytes+1), "workflow", "validate", "-")
		require.Equal(t, 2, res.code, "%v", res.err)
		require.ErrorContains(t, res.err, "stdin: larger than")
	})
}

// TestOneYAMLDocument: workflow validate refuses a second YAML document as
// catalog create does, naming where it starts.
func TestOneYAMLDocument(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	src := "apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: x}\nspec:\n" +
		"  tasks:\n    - {name: a, type: wait, wait: {duration: 1s}}\n---\nkind: Other\n"
	res := runCLI(t, src, "workflow", "validate", "-")
	require.Equal(t, 2, res.code, "%v", res.err)
	require.Contains(t, res.stdout, "want exactly one YAML document, got 2 (the second starts at line 8)")
	res = runCLI(t, src, "catalog", "create", "workflow-template/x", "-f", "-", "--dsn", "postgres://127.0.0.1:1/none")
	require.Equal(t, 2, res.code, "%v", res.err)
	require.ErrorContains(t, res.err, "want exactly one YAML document, got 2 (the second starts at line 8)")
}
