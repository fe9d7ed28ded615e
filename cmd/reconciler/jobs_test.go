package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// seedJobs stores, straight through the Postgres adapter, a workspace
// with deployment web on environments dev and prod and resource r1, and
// one job per environment (prod's the newer, dev's successful).
func seedJobs(t *testing.T, dsn string) {
	t.Helper()
	ctx := t.Context()
	db, err := postgres.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.MigrateUp(ctx))
	s := postgres.NewReleaseStore(db, ports.SystemClock)
	_, err = s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0)
	require.NoError(t, err)
	_, err = s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "sys"}, 0)
	require.NoError(t, err)
	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: "ext", Name: "ext", Type: "api"}, 0)
	require.NoError(t, err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "web", SystemID: "sys", Name: "web", Slug: "web", JobAgentID: "ext", ResourceSelector: "true"}, 0)
	require.NoError(t, err)
	for _, e := range []string{"dev", "prod"} {
		_, err = s.Environments().Put(ctx, release.Environment{ID: e, SystemID: "sys", Name: e, ResourceSelector: "true"}, 0)
		require.NoError(t, err)
	}
	_, err = s.Resources().Put(ctx, release.Resource{ID: "r1", WorkspaceID: "ws", Kind: "k", Identifier: "r1", Name: "r1"}, 0)
	require.NoError(t, err)
	_, err = s.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: "web"}, Targets: []release.ReleaseTarget{
		{DeploymentID: "web", EnvironmentID: "dev", ResourceID: "r1"}, {DeploymentID: "web", EnvironmentID: "prod", ResourceID: "r1"}}})
	require.NoError(t, err)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, s.VersionCreate(ctx, release.DeploymentVersion{ID: "web-v1", DeploymentID: "web", Tag: "v1", Status: release.VersionReady, CreatedAt: at}))
	for i, c := range []struct {
		env    string
		status release.JobStatus
	}{{"dev", release.JobSuccessful}, {"prod", release.JobPending}} {
		target := release.ReleaseTarget{DeploymentID: "web", EnvironmentID: c.env, ResourceID: "r1"}
		r, _, err := s.ReleaseUpsert(ctx, release.NewRelease(target, "web-v1", nil, time.Time{}))
		require.NoError(t, err)
		_, _, err = s.JobCreate(ctx, ports.JobCreateParams{IdempotencyKey: "k-" + c.env, Job: release.Job{ID: "job-" + c.env, ReleaseID: r.ID,
			TargetKey: target.Key(), JobAgentID: "ext", Status: c.status, CreatedAt: at.Add(time.Duration(i) * time.Minute)}})
		require.NoError(t, err)
	}
}

// TestJobsListCommand lists jobs on --dsn (the API in the process) and on
// --server, with filters, pages and every output; bad input exits 2.
func TestJobsListCommand(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	seedJobs(t, dsn)
	r := runCLI(t, "", "jobs", "list", "--dsn", dsn)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^ID +TARGET +WORKFLOW +VERSION +STATUS +CREATED +MESSAGE\njob-prod +web:prod:r1 +- +web-v1 +pending +2026-01-02T03:05:05Z *\njob-dev +web:dev:r1 +- +web-v1 +successful +2026-01-02T03:04:05Z *\n$`, r.stdout)
	r = runCLI(t, "", "jobs", "list", "--dsn", dsn, "--status", "successful", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var page api.Page[ports.JobRow]
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page), r.stdout)
	require.Len(t, page.Items, 1)
	require.Equal(t, "job-dev", page.Items[0].ID)
	r = runCLI(t, "", "jobs", "list", "--dsn", dsn, "--limit", "1", "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "id: job-prod")
	require.NotContains(t, r.stdout, "job-dev")
	cursor := strings.TrimSpace(strings.TrimPrefix(r.stderr, "more: add --cursor "))
	r = runCLI(t, "", "jobs", "list", "--dsn", dsn, "--limit", "1", "--cursor", cursor)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "job-dev")
	require.Empty(t, r.stderr, "the last page")
	for _, args := range [][]string{
		{"--environment", "prod"}, {"--target", "web:prod:r1"}, {"--job-agent", "ext", "--status", "pending,inProgress"},
		{"--workspace", "ws", "--deployment", "web", "--resource", "r1", "--version", "web-v1", "--status", "pending"},
	} {
		r = runCLI(t, "", append([]string{"get", "jobs", "--dsn", dsn}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "job-prod", "%v", args)
		require.NotContains(t, r.stdout, "job-dev", "%v", args)
	}
	for _, c := range []struct {
		args  []string
		names string
	}{
		{[]string{"--status", "done"}, "--status"},
		{[]string{"--target", "web"}, "--target"},
		{[]string{"--limit", "0"}, "limit"},
		{[]string{"--cursor", "!!"}, "cursor"},
		{[]string{"-o", "xml"}, "xml"},
	} {
		r = runCLI(t, "", append([]string{"jobs", "list", "--dsn", dsn}, c.args...)...)
		require.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.err.Error(), c.names, c.args)
	}
	require.Equal(t, 4, runCLI(t, "", "jobs", "list", "--dsn", dsn, "--target", "web:prod:nope").code)

	// An offline cancellation is recorded as local:<operating-system user>.
	r = runCLI(t, "", "jobs", "cancel", "job-prod", "--dsn", dsn)
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, "", "get", "job", "job-prod", "--dsn", dsn, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var job ports.JobRow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &job))
	require.Equal(t, release.JobCancelled, job.Status)
	require.Equal(t, "cancelled by "+localPrincipal(), job.Message)
	require.True(t, strings.HasPrefix(localPrincipal(), "local:"))

	url, tok := apiServer(t)
	r = runCLI(t, "", "jobs", "list", "--server", url, "--token", tok[ports.ScopeRead], "--deployment", "web", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page), r.stdout)
	require.Equal(t, 5, runCLI(t, "", "jobs", "list", "--server", url, "--token", tok[ports.ScopeAgent]).code, "scope read is needed")
	require.Equal(t, 5, runCLI(t, "", "jobs", "list", "--server", url, "--token", "rcn_bogus").code)
}
