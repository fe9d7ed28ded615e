package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoDatabaseNamesServer: every command refused for want of a database
// names --server as the other way (issue 29), and exits 2.
func TestNoDatabaseNamesServer(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	t.Setenv("RECONCILER_SERVER", "")
	for _, args := range [][]string{
		{"versions", "list"},
		{"approve", "web-v1", "prod"},
		{"workflow", "status", "w1"},
		{"catalog", "list"},
		{"token", "list"},
	} {
		code, msg := campaignRun(t, "", args)
		require.Equal(t, 2, code, "%q: %s", args, msg)
		require.Contains(t, msg, "no database", "%q", args)
		require.Contains(t, msg, "--server", "%q", args)
	}
}
