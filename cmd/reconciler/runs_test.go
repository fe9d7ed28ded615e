package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// runsCLI exercises `reconciler runs` through target (the flags naming a
// server and token, or a database) and checks the exit table: 0 ok, 2 bad
// input, 3 a refused intent or a taken id, 4 no such run.
func runsCLI(t *testing.T, target func(ports.Scope) []string) {
	t.Helper()
	as := func(s ports.Scope, args ...string) cliResult {
		return runCLI(t, "", append(args, target(s)...)...)
	}
	r := as(ports.ScopeWrite, "runs", "create", "repo/fix-login", "--repo", "acme/api", "--auto-merge")
	require.Equal(t, 0, r.code, r.stderr+r.stdout)
	require.Equal(t, "created repo/fix-login (pending)\n", r.stdout)
	r = as(ports.ScopeWrite, "runs", "create", "persistent-agent/bot")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 3, as(ports.ScopeWrite, "runs", "create", "persistent-agent/bot").code, "a taken id")
	r = as(ports.ScopeWrite, "runs", "create", "repo/no-repo")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.err.Error(), "repo")
	require.Equal(t, 2, as(ports.ScopeWrite, "runs", "create", "bot").code, "KIND/ID")
	require.Equal(t, 2, as(ports.ScopeWrite, "runs", "create", "persistent-agent/bot", "--workflow", "w").code, "a flag of another kind")

	r = as(ports.ScopeRead, "runs", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "repo              fix-login")
	require.Contains(t, r.stdout, "persistent-agent  bot")
	r = as(ports.ScopeRead, "runs", "list", "--kind", "persistent-agent", "--state", "idle", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct {
		Items []ports.RunRow `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page.Items, 1)
	require.Equal(t, 2, as(ports.ScopeRead, "runs", "list", "--kind", "cron").code)
	require.Equal(t, 2, as(ports.ScopeRead, "runs", "list", "--state", "nope").code)

	r = as(ports.ScopeWrite, "runs", "resume", "persistent-agent/bot")
	require.Equal(t, 3, r.code, "the kernel refuses resume on an idle agent")
	require.Contains(t, r.err.Error(), "resume-not-applicable")
	r = as(ports.ScopeWrite, "runs", "pause", "persistent-agent/bot")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "pause asked for persistent-agent/bot; next pass: intent-pause: idle → paused\n", r.stdout)
	require.Equal(t, 4, as(ports.ScopeWrite, "runs", "cancel", "repo/nope").code)
	r = as(ports.ScopeWrite, "runs", "message", "persistent-agent/bot", "triage #42")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 2, as(ports.ScopeWrite, "runs", "message", "repo/fix-login", "hi").code, "messages go to agents only")

	r = as(ports.ScopeRead, "runs", "get", "persistent-agent/bot")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "persistent-agent/bot  state idle")
	require.Regexp(t, `message\s+message\s+-\s+\S+`, r.stdout)
	require.Regexp(t, `intent\s+pause\s+-\s+\S+`, r.stdout)
	require.Equal(t, 4, as(ports.ScopeRead, "runs", "get", "repo/nope").code)

	// Subtasks: set, change, show in the decisions, refuse bad input, remove.
	require.Equal(t, 0, as(ports.ScopeWrite, "runs", "create", "repo/child", "--repo", "acme/api").code)
	r = as(ports.ScopeWrite, "runs", "subtask", "repo/fix-login", "child", "--blocking")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "repo/fix-login subtasks: child (blocking)\n", r.stdout)
	r = as(ports.ScopeWrite, "runs", "subtask", "repo/fix-login", "child")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "repo/fix-login subtasks: child\n", r.stdout)
	r = as(ports.ScopeRead, "runs", "get", "repo/fix-login")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `subtask\s+add child \(blocking\)\s+-\s+\S+`, r.stdout)
	for _, bad := range [][]string{
		{"runs", "subtask", "repo/fix-login", "nosuch"},      // no such child: the field child
		{"runs", "subtask", "repo/fix-login", "fix-login"},   // itself
		{"runs", "subtask", "persistent-agent/bot", "child"}, // not a repo run
		{"runs", "subtask", "repo/fix-login", "bad id!"},     // not an id
		{"runs", "subtask", "repo/fix-login", "child", "--remove", "--blocking"},
	} {
		r = as(ports.ScopeWrite, bad...)
		require.Equal(t, 2, r.code, "%v: %s", bad, r.stderr)
	}
	require.Equal(t, 4, as(ports.ScopeWrite, "runs", "subtask", "repo/nope", "child").code)
	r = as(ports.ScopeWrite, "runs", "subtask", "repo/fix-login", "child", "--remove")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "repo/fix-login subtasks: none\n", r.stdout)
}

func TestCLIRunsServer(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			url, tok := catalogAPIServer(t, store)
			runsCLI(t, func(s ports.Scope) []string { return []string{"--server", url, "--token", tok[s]} })
			require.Equal(t, 5, runCLI(t, "", "runs", "create", "persistent-agent/x", "--server", url, "--token", tok[ports.ScopeRead]).code, "a scope it lacks")
		})
	}
}

func TestCLIRunsDSN(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	runsCLI(t, func(ports.Scope) []string { return []string{"--dsn", dsn} })
}
