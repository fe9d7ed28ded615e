package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// TestApplyCLIOnDSN: apply, get -o yaml and delete on --dsn go through the
// API served in the process: the same output, exit statuses and round trip.
func TestApplyCLIOnDSN(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	dsn, _ := pgtest.Schema(t)
	docs := `apiVersion: reconciler.dev/v1
kind: Workspace
metadata: {name: acme}
---
apiVersion: reconciler.dev/v1
kind: System
metadata: {name: shop, workspace: acme}
---
apiVersion: reconciler.dev/v1
kind: Environment
metadata: {name: dev, system: shop}
spec: {resource_selector: "true"}
---
apiVersion: reconciler.dev/v1
kind: Policy
metadata: {name: gate, workspace: acme}
spec: {enabled: true, rules: [{id: a, type: anyApproval, min_approvals: 1}]}
`
	r := runCLI(t, docs, "apply", "-f", "-", "--dsn", dsn)
	require.Equal(t, 0, r.code, "%v", r.err)
	require.Equal(t, "workspace/acme created\nsystem/shop created\nenvironment/dev created\npolicy/gate created\n", r.stdout)
	var all strings.Builder
	for _, k := range []string{"workspaces", "systems", "environments", "policies"} {
		r = runCLI(t, "", "get", k, "-o", "yaml", "--dsn", dsn)
		require.Equal(t, 0, r.code, "%v", r.err)
		all.WriteString("---\n" + r.stdout)
	}
	r = runCLI(t, all.String(), "apply", "-f", "-", "--dsn", dsn)
	require.Equal(t, 0, r.code, "%v", r.err)
	require.Equal(t, "workspace/acme unchanged\nsystem/shop unchanged\nenvironment/dev unchanged\npolicy/gate unchanged\n", r.stdout)
	r = runCLI(t, strings.Replace(docs, "{name: dev, system: shop}", "{name: qa, system: shop}", 1), "apply", "-f", "-", "--dry-run", "--dsn", dsn)
	require.Equal(t, 0, r.code, "%v", r.err)
	require.Contains(t, r.stdout, "environment/qa created (dry run)\npolicy/gate unchanged (dry run)\nplan: no release target changes its gating rules or its desired release\n", "no resources: no targets")
	r = runCLI(t, "", "catalog", "plan", "policy/gate", "--dsn", dsn)
	require.Equal(t, 0, r.code, "%v", r.err)
	require.Equal(t, "plan: no release target changes its gating rules or its desired release\n", r.stdout, "the published revision against itself")
	r = runCLI(t, strings.Replace(docs, `"true"`, `"yes"`, 1), "apply", "-f", "-", "--dsn", dsn)
	require.Equal(t, 2, r.code, "a non-boolean selector")
	require.Contains(t, r.err.Error(), "stdin:12: Environment \"dev\": spec.resource_selector:")
	require.Equal(t, 3, runCLI(t, "", "delete", "system", "shop", "--dsn", dsn).code, "in use")
	require.Equal(t, 0, runCLI(t, "", "delete", "environment", "dev", "--dsn", dsn).code)
	require.Equal(t, 4, runCLI(t, "", "delete", "environment", "dev", "--dsn", dsn).code)
}
