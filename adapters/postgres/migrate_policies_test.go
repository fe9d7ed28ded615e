package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// TestMigratePoliciesIntoCatalog: migration 0010 makes every row of
// release_policies the next published revision of its catalog object, so
// the policies in effect stay in effect, and its down puts the latest
// published revisions back in the table.
func TestMigratePoliciesIntoCatalog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	steps := migrateDownBefore(t, db, 10)
	// One workspace: migration 0022 gives the policies it (they match no
	// target).
	_, err := conn.Exec(ctx, `INSERT INTO release_workspaces (id, doc, version, updated_at) VALUES ('ws', '{"id":"ws","name":"ws"}', 1, now())`)
	require.NoError(t, err)

	// gate also has a revision published in the catalog already: the
	// table's row, the one in effect, becomes revision 2.
	_, err = conn.Exec(ctx, `INSERT INTO release_policies (id, priority, enabled, doc, version, updated_at) VALUES
		('gate', 5, true, '{"id":"gate","name":"Gate","priority":5,"enabled":true,"rules":[]}', 3, now()),
		('off', 0, false, '{"id":"off","name":"Off","priority":0,"enabled":false,"rules":[]}', 1, now())`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO catalog_objects (kind, name, highest_number) VALUES ('policy', 'gate', 1)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO catalog_revisions (kind, name, id, number, lifecycle, content, version, approved_by, created_at, updated_at, published_at)
		VALUES ('policy', 'gate', 'old', 1, 'published', '{"id":"gate","name":"Old","priority":1,"enabled":true,"rules":[]}', 2, 'bob', now(), now(), now())`)
	require.NoError(t, err)

	require.NoError(t, db.MigrateUp(ctx))
	rs := postgres.NewReleaseStore(db, ports.SystemClock)
	t.Cleanup(rs.Close)
	gate, err := rs.CatalogLatestPublished(ctx, revision.KindPolicy, "gate")
	require.NoError(t, err)
	require.Equal(t, 2, gate.Revision)
	require.Equal(t, "migration 0010", gate.ApprovedBy)
	pols, err := ports.EnabledPolicies(ctx, rs)
	require.NoError(t, err)
	require.Len(t, pols, 1, "off stays disabled")
	require.Equal(t, "Gate", pols[0].Value.Name)
	require.Equal(t, int64(2), pols[0].Version)
	var gone bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass('release_policies') IS NULL`).Scan(&gone))
	require.True(t, gone)

	require.NoError(t, db.MigrateDown(ctx, steps))
	var name string
	var version int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT doc->>'name', version FROM release_policies WHERE id = 'gate'`).Scan(&name, &version))
	require.Equal(t, "Gate", name, "down keeps the latest published revision")
	require.Equal(t, int64(2), version)
}
