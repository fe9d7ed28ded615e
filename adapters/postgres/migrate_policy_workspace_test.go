package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestMigratePolicyWorkspace: migration 0022 gives each policy the
// workspace of the release targets its selector matches, adding
// "workspace_id" to every revision and keeping the rest byte for byte; a
// policy matching targets of two workspaces (both have a "staging") makes
// it refuse, naming the policy and the workspaces, and change nothing. Its
// down takes the field out again.
func TestMigratePolicyWorkspace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	rs := postgres.NewReleaseStore(db, ports.SystemClock)
	t.Cleanup(rs.Close)
	for _, ws := range []string{"a", "b"} {
		_, err := rs.Workspaces().Put(ctx, release.Workspace{ID: ws, Name: ws}, 0)
		require.NoError(t, err)
		_, err = rs.Systems().Put(ctx, release.System{ID: "sys-" + ws, WorkspaceID: ws, Name: "shop"}, 0)
		require.NoError(t, err)
		_, err = rs.Resources().Put(ctx, release.Resource{ID: "r-" + ws, WorkspaceID: ws, Kind: "cluster", Identifier: "r-" + ws, Name: "r"}, 0)
		require.NoError(t, err)
		_, err = rs.Deployments().Put(ctx, release.Deployment{ID: "web-" + ws, SystemID: "sys-" + ws, Name: "web", Slug: "web", ResourceSelector: "true"}, 0)
		require.NoError(t, err)
		envs := []string{"staging"}
		if ws == "a" {
			envs = append(envs, "prod")
		}
		for _, e := range envs {
			_, err = rs.Environments().Put(ctx, release.Environment{ID: e + "-" + ws, SystemID: "sys-" + ws, Name: e, ResourceSelector: "true"}, 0)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, `INSERT INTO release_targets (key, deployment_id, environment_id, resource_id, system_id, created_at)
				VALUES ($1, $2, $3, $4, $5, now())`, "web-"+ws+":"+e+"-"+ws+":r-"+ws, "web-"+ws, e+"-"+ws, "r-"+ws, "sys-"+ws)
			require.NoError(t, err)
		}
	}
	steps := migrateDownBefore(t, db, 22)

	const prodGate = `{"id":"prod-gate",  "name":"Prod gate","selector":"environment.name == \"prod\"","enabled":true,"rules":[]}`
	insert := func(name, content string) {
		t.Helper()
		_, err := conn.Exec(ctx, `INSERT INTO catalog_objects (kind, name, highest_number) VALUES ('policy', $1, 1)`, name)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO catalog_revisions (kind, name, id, number, lifecycle, content, version, approved_by, created_at, updated_at, published_at)
			VALUES ('policy', $1, 'r1', 1, 'published', $2, 1, 'bob', now(), now(), now())`, name, content)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO catalog_revisions (kind, name, id, lifecycle, content, version, created_at, updated_at)
			VALUES ('policy', $1, 'd1', 'draft', $2, 1, now(), now())`, name, content)
		require.NoError(t, err)
	}
	insert("prod-gate", prodGate)
	insert("staging-gate", `{"id":"staging-gate","name":"Staging","selector":"environment.name == \"staging\"","enabled":true,"rules":[]}`)

	err := db.MigrateUp(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "staging-gate matches targets of workspaces a, b")
	require.NotContains(t, err.Error(), "prod-gate")
	var content string
	require.NoError(t, conn.QueryRow(ctx, `SELECT content::text FROM catalog_revisions WHERE name = 'prod-gate' AND id = 'r1'`).Scan(&content))
	require.Equal(t, prodGate, content, "a refused migration changes nothing")

	_, err = conn.Exec(ctx, `DELETE FROM catalog_revisions WHERE name = 'staging-gate'`)
	require.NoError(t, err)
	require.NoError(t, db.MigrateUp(ctx))
	for _, id := range []string{"r1", "d1"} {
		require.NoError(t, conn.QueryRow(ctx, `SELECT content::text FROM catalog_revisions WHERE name = 'prod-gate' AND id = $1`, id).Scan(&content))
		require.Equal(t, `{"workspace_id":"a",`+prodGate[1:], content, "revision %s", id)
	}
	pols, err := ports.EnabledPolicies(ctx, rs)
	require.NoError(t, err)
	require.Len(t, pols, 1)
	require.Equal(t, "a", pols[0].Value.WorkspaceID)
	require.NoError(t, pols[0].Value.Validate(), "a migrated policy validates")

	require.NoError(t, db.MigrateDown(ctx, steps))
	var has bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT content::jsonb ? 'workspace_id' FROM catalog_revisions WHERE name = 'prod-gate' AND id = 'r1'`).Scan(&has))
	require.False(t, has)
}
