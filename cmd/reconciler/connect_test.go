package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// TestConnectTimeoutCLI: migrate and serve against a server that accepts
// connections but never answers fail after --connect-timeout (or
// RECONCILER_CONNECT_TIMEOUT) instead of waiting forever.
func TestConnectTimeoutCLI(t *testing.T) {
	dsn := "postgres://u@" + pgtest.SilentServer(t) + "/db?sslmode=disable"
	for _, tt := range []struct {
		args []string
		env  string
	}{
		{args: []string{"migrate", "up", "--dsn", dsn, "--connect-timeout", "1s"}},
		{args: []string{"migrate", "status", "--dsn", dsn}, env: "1s"},
		{args: []string{"serve", "--listen", "", "--dsn", dsn, "--connect-timeout", "1s"}},
	} {
		t.Run(strings.Join(tt.args[:2], " "), func(t *testing.T) {
			t.Setenv("RECONCILER_DSN", "")
			t.Setenv("RECONCILER_CONNECT_TIMEOUT", tt.env)
			res := runCLI(t, "", tt.args...)
			require.Equal(t, 1, res.code, "%v", res.err)
			require.ErrorContains(t, res.err, "127.0.0.1")
			require.ErrorContains(t, res.err, "no answer within the connect timeout of 1s", "the flag's (or variable's) timeout, not the default")
		})
	}
}

// TestReadsNeverMigrate: the commands that only read (explain, workflow
// status, catalog list and get) refuse an unmigrated database with exit
// status 5 and the command that migrates it, and create no table there.
func TestReadsNeverMigrate(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	dsn, schema := pgtest.Schema(t)
	for _, args := range [][]string{
		{"explain", "web:prod:eu-1"},
		{"workflow", "status", "wf-1"},
		{"catalog", "list"},
		{"catalog", "get", "workflow-template/deploy"},
		{"catalog", "get", "policy/gate", "--migrate=false"},
	} {
		res := runCLI(t, "", append(args, "--dsn", dsn)...)
		require.Equal(t, exitNotMigrated, res.code, "%v: %v", args, res.err)
		require.ErrorContains(t, res.err, "database not migrated")
		require.ErrorContains(t, res.err, "run `reconciler migrate up`")
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var tables []string
	rows, err := conn.Query(t.Context(), "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, tables, "a read created tables")
}
