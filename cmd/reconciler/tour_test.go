package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// TestReadmeTour runs the README's tour against the demo workspace as
// `serve` seeds it: examples/demo.yaml is the demo as apply documents (so
// applying it changes nothing), examples/freeze.yaml plans a policy without
// writing it, a new version waits for prod's approval, explain and
// versions status say why, and an approval lets it through.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	url, tok := apiServer(t)
	run := func(args ...string) cliResult {
		t.Helper()
		r := runCLI(t, "", append(args, "--server", url, "--token", tok[ports.ScopeAdmin])...)
		require.Equal(t, 0, r.code, "%v: %v %s", args, r.err, r.stderr)
		return r
	}
	r := run("apply", "-f", "../../examples/demo.yaml")
	require.NotContains(t, r.stdout, "created")
	require.NotContains(t, r.stdout, " changed", "examples/demo.yaml is the demo as seeded")
	require.Contains(t, r.stdout, "deployment/web unchanged")

	r = run("apply", "--dry-run", "-f", "../../examples/freeze.yaml")
	require.Contains(t, r.stdout, "policy/weekend-freeze created (dry run)")
	require.Equal(t, 4, runCLI(t, "", "get", "policies", "weekend-freeze", "--server", url, "--token", tok[ports.ScopeRead]).code, "a dry run writes nothing")

	// The plan first: prod would wait for its approval; nothing stored.
	r = run("versions", "create", "web", "v3", "--dry-run")
	require.Regexp(t, `web:dev:eu-1\s+yes\s+allowed`, r.stdout)
	require.Regexp(t, `web:prod:eu-1\s+no\s+pending\s+-\s+.*approval`, r.stdout)
	require.Equal(t, 4, runCLI(t, "", "get", "version", "web-v3", "--server", url, "--token", tok[ports.ScopeRead]).code, "a dry run stores nothing")
	require.Contains(t, run("versions", "create", "web", "v3").stdout, "created version web-v3")
	require.Contains(t, run("explain", "web:prod:eu-1").stdout, "0 of 1 required approvals")
	require.Contains(t, run("versions", "status", "web-v3").stdout, "prod-gate/approval")
	run("approve", "web-v3", "prod")
	require.NotContains(t, run("versions", "status", "web-v3", "--environment", "prod").stdout, "prod-gate/approval")
	// Who did it is on record.
	r = run("get", "audit", "--actor", "cli-admin")
	require.Contains(t, r.stdout, "approveVersion")
	require.Contains(t, r.stdout, "approved version web-v3 for environment prod")
	require.Contains(t, r.stdout, "createVersion")
}
