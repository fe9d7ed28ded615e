package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// runRoot runs the command tree with args and returns stdout and the error
// main would exit on.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// requireExit requires an error whose exit status is code.
func requireExit(t *testing.T, err error, code int, contains string) {
	t.Helper()
	require.Error(t, err)
	got := 1
	var ec exitCoder
	if errors.As(err, &ec) {
		got = ec.ExitCode()
	}
	require.Equal(t, code, got, "%v", err)
	require.ErrorContains(t, err, contains)
}

// TestReleaseCLI drives versions create, approve and explain against a
// Postgres schema holding the demo workspace.
func TestReleaseCLI(t *testing.T) {
	t.Setenv("USER", "bob") // offline actions are recorded as local:bob
	dsn, be, ch := demoSchema(t)
	ctx := context.Background()

	out, err := runRoot(t, "versions", "create", "web", "v9", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "created version web-v9 (v9) of web")
	it, err := be.queue.WorkGet(ctx, chain.TargetKey(chain.KindDesiredRelease, mustTarget(t, "web:prod:eu-1")))
	require.NoError(t, err, "the new version enqueued desired-release for the deployment's targets")
	require.Equal(t, ports.WorkPending, it.State)

	_, err = runRoot(t, "versions", "create", "web", "v9", "--dsn", dsn)
	requireExit(t, err, 3, "already exists")
	_, err = runRoot(t, "versions", "create", "nope", "v1", "--dsn", dsn)
	requireExit(t, err, 4, "not found")
	_, err = runRoot(t, "versions", "create", "web", "v10", "--status", "shiny", "--dsn", dsn)
	requireExit(t, err, 2, "status")

	out, err = runRoot(t, "approve", "web-v9", "prod", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "local:bob approved web-v9 in environment prod")
	out, err = runRoot(t, "approve", "web-v9", "prod", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "already approved")
	_, err = runRoot(t, "approve", "web-v404", "prod", "--dsn", dsn)
	requireExit(t, err, 4, "not found")

	out, err = runRoot(t, "explain", "web:prod:eu-1", "-o", "json", "--dsn", dsn)
	require.NoError(t, err)
	var ex chain.Explanation
	require.NoError(t, json.Unmarshal([]byte(out), &ex))
	require.Equal(t, "v9", ex.Versions[0].Version.Tag)
	verdicts := map[string]policy.Status{}
	for _, v := range ex.Versions[0].Verdicts {
		verdicts[v.RuleID] = v.Status
	}
	require.Equal(t, map[string]policy.Status{"approval": policy.Allowed, "after-staging": policy.Pending}, verdicts)
	out, err = runRoot(t, "explain", "web:prod:eu-1", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "v9 (web-v9, ready): pending")
	require.Contains(t, out, "after-staging")
	require.Contains(t, out, "converged: no, runs nothing yet;", "explain never says all is well before the target runs its desired release")

	out, err = runRoot(t, "versions", "force-deploy", "web-v9", "--environment", "prod", "--resource", "eu-1",
		"--reason", "hotfix", "--expires", "1h", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "force-deployed web-v9")
	out, err = runRoot(t, "explain", "web:prod:eu-1", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "forced: force-deployed v9 by local:bob: hotfix")
	_, err = runRoot(t, "versions", "force-deploy", "web-v404", "--dsn", dsn)
	requireExit(t, err, 4, "not found")
	_, err = runRoot(t, "versions", "force-deploy", "web-v9", "--expires", "-1h", "--dsn", dsn)
	requireExit(t, err, 2, "expires")

	// A second workspace beside the demo, with its own staging: the demo's
	// staging policy (environment.name == "staging") has no say there
	// (issue 29), while it still gates the demo's staging.
	s := be.releases
	_, err = s.Workspaces().Put(ctx, release.Workspace{ID: "mine", Name: "Mine"}, 0)
	require.NoError(t, err)
	_, err = s.Systems().Put(ctx, release.System{ID: "my-shop", WorkspaceID: "mine", Name: "Shop"}, 0)
	require.NoError(t, err)
	_, err = s.Environments().Put(ctx, release.Environment{ID: "my-staging", SystemID: "my-shop", Name: "staging", ResourceSelector: "true"}, 0)
	require.NoError(t, err)
	_, err = s.Resources().Put(ctx, release.Resource{ID: "my-vm", WorkspaceID: "mine", Kind: "VM", Identifier: "vm/1", Name: "vm"}, 0)
	require.NoError(t, err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "my-web", SystemID: "my-shop", Name: "web", Slug: "web", ResourceSelector: "true"}, 0)
	require.NoError(t, err)
	_, err = ch.SyncTargets(ctx, "my-shop")
	require.NoError(t, err)
	_, err = runRoot(t, "versions", "create", "my-web", "v1", "--dsn", dsn)
	require.NoError(t, err)
	for key, rules := range map[string]int{"my-web:my-staging:my-vm": 0, "web:staging:eu-1": 1} {
		out, err = runRoot(t, "explain", key, "-o", "json", "--dsn", dsn)
		require.NoError(t, err)
		ex = chain.Explanation{}
		require.NoError(t, json.Unmarshal([]byte(out), &ex))
		require.NotEmpty(t, ex.Versions, key)
		require.Len(t, ex.Versions[0].Verdicts, rules, "%s: %s", key, out)
	}

	_, err = runRoot(t, "explain", "web-prod", "--dsn", dsn)
	requireExit(t, err, 2, "DEPLOYMENT:ENVIRONMENT:RESOURCE")
	_, err = runRoot(t, "explain", "web:prod:nowhere", "--dsn", dsn)
	requireExit(t, err, 4, "not found")
}

// demoSchema is a Postgres schema holding the demo workspace, with its
// backend and a chain over it; RECONCILER_DSN is cleared.
func demoSchema(t *testing.T) (string, *backend, *chain.Chain) {
	t.Helper()
	t.Setenv("RECONCILER_DSN", "")
	dsn, _ := pgtest.Schema(t)
	ctx := context.Background()
	be, err := openBackend(ctx, dsn, true, ports.SystemClock)
	require.NoError(t, err)
	t.Cleanup(be.close)
	ch := &chain.Chain{Store: be.releases, Queue: be.queue, Clock: ports.SystemClock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	seedCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel) // stops the demo's delayed v2
	fsys, where, err := demoFS("")
	require.NoError(t, err)
	w, err := loadReleaseDemo(fsys, where)
	require.NoError(t, err)
	require.NoError(t, seedReleaseDemo(seedCtx, ch, be.catalog, be.tx, w))
	return dsn, be, ch
}

// TestReleaseCLINoDSN: without a database the commands refuse with a usage
// error that says what to set.
func TestReleaseCLINoDSN(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	for _, args := range [][]string{{"versions", "create", "web", "v1"}, {"versions", "force-deploy", "v"}, {"approve", "v", "prod"}, {"explain", "a:b:c"}} {
		_, err := runRoot(t, args...)
		requireExit(t, err, 2, "RECONCILER_DSN")
	}
}

func mustTarget(t *testing.T, key string) release.ReleaseTarget {
	t.Helper()
	tg, err := release.ParseTargetKey(key)
	require.NoError(t, err)
	return tg
}
