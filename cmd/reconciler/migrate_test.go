package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// runMigrate runs `migrate args...` and returns its output and error.
func runMigrate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"migrate"}, args...))
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// requireUsage requires a usage error (exit status 2) mentioning want.
func requireUsage(t *testing.T, err error, want string) {
	t.Helper()
	var ec exitCoder
	require.True(t, errors.As(err, &ec), "want a usage error, got %v", err)
	require.Equal(t, 2, ec.ExitCode())
	require.ErrorContains(t, err, want)
}

func TestMigrateCmdUsage(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "want a subcommand"},
		{"unknown subcommand", []string{"sideways"}, `unknown subcommand "sideways"`},
		{"extra argument", []string{"up", "now", "--dsn", "x"}, "takes no arguments"},
		{"no dsn", []string{"status"}, "set --dsn or RECONCILER_DSN"},
		{"zero steps", []string{"down", "--steps", "0", "--dsn", "x"}, `"--steps" flag: out of range: want 1 to 10000`},
	}
	for _, tt := range tests {
		_, err := runMigrate(t, tt.args...)
		requireUsage(t, err, tt.want)
	}
}

// TestMigrateCmdUpDownStatus drives the subcommands against a fresh schema,
// with the DSN from the environment as an operator would set it.
func TestMigrateCmdUpDownStatus(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	t.Setenv("RECONCILER_DSN", dsn)
	// rowOf returns the status line of the work-queue migration.
	rowOf := func(out string) string {
		for line := range strings.Lines(out) {
			if strings.Contains(line, "work_queue") {
				return line
			}
		}
		t.Fatalf("no work_queue line in:\n%s", out)
		return ""
	}
	out, err := runMigrate(t, "status")
	require.NoError(t, err)
	require.Contains(t, rowOf(out), "pending")

	out, err = runMigrate(t, "up")
	require.NoError(t, err)
	require.Contains(t, rowOf(out), "applied")
	require.NotContains(t, out, "pending", "up applies everything")

	out, err = runMigrate(t, "down", "--steps", "100")
	require.NoError(t, err)
	require.NotContains(t, out, "applied")

	out, err = runMigrate(t, "status", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, rowOf(out), "pending")
}
