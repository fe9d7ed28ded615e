package postgres_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// TestMigrateWorkflowMatrix: migration 0034 moves each workflow's matrix
// out of its document into the matrix column (a workflow without one gets
// NULL) and keeps the rest of the document as it was; the store then reads
// it there. Its down puts it back into the document and drops the column.
func TestMigrateWorkflowMatrix(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	steps := migrateDownBefore(t, db, 34)

	const (
		rest   = `{"id": "%s", "name": "fan", "phase": "Running", "version": 3, "template": {"kind": "WorkflowTemplate"}, "created_at": "2026-05-06T07:08:09Z", "template_name": "fan"}`
		matrix = `{"clusters": [{"item": "a"}, {"item": 2}]}`
	)
	with := fmt.Sprintf(rest, "with")
	_, err := conn.Exec(ctx, `INSERT INTO workflows (id, doc, version) VALUES
		('with', $1::jsonb || jsonb_build_object('matrix', $2::jsonb), 3), ('without', $3::jsonb, 1)`, with, matrix, fmt.Sprintf(rest, "without"))
	require.NoError(t, err)

	require.NoError(t, db.MigrateUp(ctx))
	var doc, m *string
	require.NoError(t, conn.QueryRow(ctx, `SELECT doc::text, matrix::text FROM workflows WHERE id = 'with'`).Scan(&doc, &m))
	require.JSONEq(t, with, *doc, "the matrix is out of the document, the rest as it was")
	require.JSONEq(t, matrix, *m)
	require.NoError(t, conn.QueryRow(ctx, `SELECT matrix::text FROM workflows WHERE id = 'without'`).Scan(&m))
	require.Nil(t, m, "no matrix: NULL")

	s := postgres.NewWorkflowStore(db)
	got, err := s.WorkflowMatrix(ctx, "with")
	require.NoError(t, err)
	require.Equal(t, map[string][]any{"clusters": {map[string]any{"item": "a"}, map[string]any{"item": float64(2)}}}, got)
	w, err := s.WorkflowGet(ctx, "with")
	require.NoError(t, err)
	require.EqualValues(t, 3, w.Version)
	require.Nil(t, w.Matrix)

	require.NoError(t, db.MigrateDown(ctx, steps))
	require.NoError(t, conn.QueryRow(ctx, `SELECT doc::text FROM workflows WHERE id = 'with'`).Scan(&doc))
	var want map[string]any
	require.NoError(t, json.Unmarshal([]byte(with), &want))
	want["matrix"] = json.RawMessage(matrix)
	b, err := json.Marshal(want)
	require.NoError(t, err)
	require.JSONEq(t, string(b), *doc, "down puts the matrix back")
	var cols int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'workflows' AND column_name = 'matrix'`).Scan(&cols))
	require.Zero(t, cols)
}

// TestWorkflowMatrixKeptApart: the document a pass reads and a phase
// change rewrites does not carry the matrix, however many items it has,
// and neither WorkflowUpdate's statement nor the row it writes changes the
// matrix column.
func TestWorkflowMatrixKeptApart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	s := postgres.NewWorkflowStore(db)
	items := make([]any, 5000)
	for i := range items {
		items[i] = map[string]any{"item": fmt.Sprintf("cluster-%05d", i)}
	}
	w := ports.WorkflowRecord{ID: "w", Name: "fan", Template: json.RawMessage(`{"kind":"WorkflowTemplate"}`),
		Matrix: map[string][]any{"clusters": items}, Phase: workflow.WorkflowPending}
	require.NoError(t, s.WorkflowCreate(ctx, w))
	sizes := func() (doc, matrix int) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, `SELECT octet_length(doc::text), octet_length(matrix::text) FROM workflows WHERE id = 'w'`).Scan(&doc, &matrix))
		return doc, matrix
	}
	doc, matrix := sizes()
	require.Less(t, doc, 1024, "the document leaves the matrix out")
	require.Greater(t, matrix, 5000*20)

	got, err := s.WorkflowGet(ctx, "w")
	require.NoError(t, err)
	got.Phase, got.Matrix = workflow.WorkflowRunning, w.Matrix // a caller that still holds it
	_, err = s.WorkflowUpdate(ctx, got, got.Version)
	require.NoError(t, err)
	doc2, matrix2 := sizes()
	require.Less(t, doc2, 1024, "an update writes no matrix into the document")
	require.Equal(t, matrix, matrix2)
}
