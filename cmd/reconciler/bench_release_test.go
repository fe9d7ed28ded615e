package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// benchReleaseLine runs bench release and decodes its last line.
func benchReleaseLine(t *testing.T, args ...string) map[string]any {
	t.Helper()
	res := runCLI(t, "", append([]string{"bench", "release"}, args...)...)
	require.NoError(t, res.err, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &got), "the last line is JSON: %q", res.stdout)
	return got
}

// TestBenchRelease: every target gets its job, on both stores, and the
// figures are in the final JSON line.
func TestBenchRelease(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"--targets", "200"}
			if name == "postgres" {
				args = append(args, "--dsn", pgtest.DSN(t))
			}
			got := benchReleaseLine(t, args...)
			require.Equal(t, "release", got["bench"])
			require.Equal(t, name, got["store"])
			require.EqualValues(t, 200, got["targets"])
			require.Greater(t, got["seconds"], 0.0)
			require.Greater(t, got["targets_per_sec"], 0.0)
		})
	}
}

// TestBenchReleaseBadFlags: non-positive sizes are usage errors.
func TestBenchReleaseBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--targets", "0"}, {"--workers", "-1"}, {"--timeout", "0s"}} {
		res := runCLI(t, "", append([]string{"bench", "release"}, args...)...)
		require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
	}
}

// TestBenchWorkflow: the workflow runs to Succeeded on both stores and the
// figures are in the final JSON line.
func TestBenchWorkflow(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"bench", "workflow", "--items", "300", "--max-parallel", "40"}
			if name == "postgres" {
				args = append(args, "--dsn", pgtest.DSN(t))
			}
			res := runCLI(t, "", args...)
			require.NoError(t, res.err, res.stderr)
			lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &got))
			require.Equal(t, "workflow", got["bench"])
			require.EqualValues(t, 300, got["items"])
			require.Greater(t, got["taskruns_per_sec"], 0.0)
		})
	}
}
