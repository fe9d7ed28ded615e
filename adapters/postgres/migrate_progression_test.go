package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestMigrateProgressionSummaryBackfill: migration 0027 counts the jobs and
// targets stored before it, including those written while it was down
// (its triggers gone), and its down drops what it added.
func TestMigrateProgressionSummaryBackfill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, schema, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	rs := postgres.NewReleaseStore(db, ports.SystemClock)
	t.Cleanup(rs.Close)
	_, err := rs.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0)
	require.NoError(t, err)
	_, err = rs.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "shop"}, 0)
	require.NoError(t, err)
	_, err = rs.Deployments().Put(ctx, release.Deployment{ID: "web", SystemID: "sys", Name: "web", Slug: "web", ResourceSelector: "true"}, 0)
	require.NoError(t, err)
	_, err = rs.Environments().Put(ctx, release.Environment{ID: "dev", SystemID: "sys", Name: "dev", ResourceSelector: "true"}, 0)
	require.NoError(t, err)
	var targets []release.ReleaseTarget
	for _, r := range []string{"r1", "r2", "r3"} {
		_, err = rs.Resources().Put(ctx, release.Resource{ID: r, WorkspaceID: "ws", Kind: "cluster", Identifier: r, Name: r}, 0)
		require.NoError(t, err)
		targets = append(targets, release.ReleaseTarget{DeploymentID: "web", EnvironmentID: "dev", ResourceID: r})
	}
	_, err = rs.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: "web", EnvironmentID: "dev"}, Targets: targets})
	require.NoError(t, err)
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	require.NoError(t, rs.VersionCreate(ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "web", Tag: "v1", Status: release.VersionReady, CreatedAt: t0}))
	job := func(id string, target release.ReleaseTarget, status release.JobStatus, at time.Time) {
		t.Helper()
		r, _, err := rs.ReleaseUpsert(ctx, release.NewRelease(target, "v1", nil, time.Time{}))
		require.NoError(t, err)
		_, created, err := rs.JobCreate(ctx, ports.JobCreateParams{Job: release.Job{ID: id, ReleaseID: r.ID, TargetKey: target.Key(),
			Status: status, CreatedAt: at}, IdempotencyKey: id})
		require.NoError(t, err)
		require.True(t, created)
	}
	job("j1", targets[0], release.JobSuccessful, t0.Add(time.Minute))
	summary := func() policy.ProgressionSummary {
		t.Helper()
		s, err := rs.ProgressionSummary(ctx, ports.ProgressionSummaryParams{DeploymentID: "web", EnvironmentID: "dev", VersionID: "v1"})
		require.NoError(t, err)
		return s
	}
	before := summary()
	require.Equal(t, 3, before.Targets)

	steps := migrateDownBefore(t, db, 27)
	require.False(t, tableIn(t, conn, schema, "release_progression_outcomes"), "down drops the aggregate")
	job("j2", targets[1], release.JobSuccessful, t0.Add(2*time.Minute))
	job("j3", targets[2], release.JobFailure, t0.Add(3*time.Minute))
	job("j4", targets[2], release.JobPending, t0.Add(4*time.Minute))
	require.GreaterOrEqual(t, steps, 1, "0027 and the migrations after it were undone")
	require.NoError(t, db.MigrateUp(ctx))
	require.Equal(t, policy.ProgressionSummary{VersionID: "v1", Targets: 3, Outcomes: []policy.ProgressionOutcome{
		{Status: release.JobFailure, Targets: 1, LatestAt: t0.Add(3 * time.Minute)},
		{Status: release.JobSuccessful, Targets: 2, LatestAt: t0.Add(2 * time.Minute)},
	}}, summary(), "the jobs stored before the migration count")
}
