package postgres_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateVariableSetsMovesSystemSets: migration 0008 moves the variable
// sets a system document held into rows of their own (ids by position, so
// id order keeps the old list order), and its down puts them back.
func TestMigrateVariableSetsMovesSystemSets(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	steps := migrateDownBefore(t, db, 8)

	sets := `[{"name":"prod","selector":"environment.name == \"prod\"","priority":2,"values":{"replicas":{"literal":4}}},
		{"name":"all","priority":0,"values":{"region":{"literal":"eu"}}}]`
	_, err := conn.Exec(ctx, `INSERT INTO release_systems (id, workspace_id, doc, version, updated_at) VALUES
		('shop', 'ws', jsonb_build_object('id', 'shop', 'workspace_id', 'ws', 'name', 'Shop', 'variable_sets', $1::jsonb), 3, now()),
		('bare', 'ws', '{"id":"bare","workspace_id":"ws","name":"Bare"}', 1, now())`, sets)
	require.NoError(t, err)

	require.NoError(t, db.MigrateUp(ctx))
	rows, err := conn.Query(ctx, `SELECT id, system_id, doc FROM release_variable_sets ORDER BY id`)
	require.NoError(t, err)
	type row struct {
		ID, System string
		Doc        map[string]any
	}
	var got []row
	for rows.Next() {
		var r row
		var doc []byte
		require.NoError(t, rows.Scan(&r.ID, &r.System, &doc))
		require.NoError(t, json.Unmarshal(doc, &r.Doc))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 2)
	require.Equal(t, "shop-vs-0001", got[0].ID)
	require.Equal(t, "shop", got[0].System)
	require.Equal(t, map[string]any{"id": "shop-vs-0001", "system_id": "shop", "name": "prod", "selector": `environment.name == "prod"`,
		"priority": float64(2), "values": map[string]any{"replicas": map[string]any{"literal": float64(4)}}}, got[0].Doc)
	require.Equal(t, "shop-vs-0002", got[1].ID)
	require.Equal(t, "all", got[1].Doc["name"])
	var has bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT doc ? 'variable_sets' FROM release_systems WHERE id = 'shop'`).Scan(&has))
	require.False(t, has, "the system document no longer holds its sets")

	require.NoError(t, db.MigrateDown(ctx, steps))
	var doc []byte
	require.NoError(t, conn.QueryRow(ctx, `SELECT doc->'variable_sets' FROM release_systems WHERE id = 'shop'`).Scan(&doc))
	require.JSONEq(t, sets, string(doc), "down puts the sets back in order")
	require.NoError(t, conn.QueryRow(ctx, `SELECT doc ? 'variable_sets' FROM release_systems WHERE id = 'bare'`).Scan(&has))
	require.False(t, has, "a system without sets gets none")
}
