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

// TestMigrateWorkflowPinned: migration 0034 moves each workflow's template
// and matrix out of its document into columns of their own (a workflow
// without a matrix gets NULL) and keeps the rest of the document as it
// was; the store then reads them there. Its down puts them back into the
// document and drops the columns.
func TestMigrateWorkflowPinned(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	steps := migrateDownBefore(t, db, 34)

	const (
		rest     = `{"id": "%s", "name": "fan", "phase": "Running", "version": 3, "created_at": "2026-05-06T07:08:09Z", "template_name": "fan"}`
		template = `{"kind": "WorkflowTemplate", "spec": {"tasks": []}}`
		matrix   = `{"clusters": [{"item": "a"}, {"item": 2}]}`
	)
	with, without := fmt.Sprintf(rest, "with"), fmt.Sprintf(rest, "without")
	_, err := conn.Exec(ctx, `INSERT INTO workflows (id, doc, version) VALUES
		('with', $1::jsonb || jsonb_build_object('template', $2::jsonb, 'matrix', $3::jsonb), 3),
		('without', $4::jsonb || jsonb_build_object('template', $2::jsonb), 1)`, with, template, matrix, without)
	require.NoError(t, err)

	require.NoError(t, db.MigrateUp(ctx))
	var doc, tmpl, m *string
	require.NoError(t, conn.QueryRow(ctx, `SELECT doc::text, template::text, matrix::text FROM workflows WHERE id = 'with'`).Scan(&doc, &tmpl, &m))
	require.JSONEq(t, with, *doc, "the template and matrix are out of the document, the rest as it was")
	require.JSONEq(t, template, *tmpl)
	require.JSONEq(t, matrix, *m)
	require.NoError(t, conn.QueryRow(ctx, `SELECT doc::text, matrix::text FROM workflows WHERE id = 'without'`).Scan(&doc, &m))
	require.JSONEq(t, without, *doc)
	require.Nil(t, m, "no matrix: NULL")

	s := postgres.NewWorkflowStore(db)
	got, err := s.WorkflowMatrix(ctx, "with")
	require.NoError(t, err)
	require.Equal(t, map[string][]any{"clusters": {map[string]any{"item": "a"}, map[string]any{"item": float64(2)}}}, got)
	gotT, err := s.WorkflowTemplate(ctx, "without")
	require.NoError(t, err)
	require.JSONEq(t, template, string(gotT))
	w, err := s.WorkflowGet(ctx, "with")
	require.NoError(t, err)
	require.EqualValues(t, 3, w.Version)
	require.Nil(t, w.Matrix)
	require.Nil(t, w.Template)

	require.NoError(t, db.MigrateDown(ctx, steps))
	for id, extra := range map[string]string{"with": `"template": ` + template + `, "matrix": ` + matrix, "without": `"template": ` + template} {
		require.NoError(t, conn.QueryRow(ctx, `SELECT doc::text FROM workflows WHERE id = $1`, id).Scan(&doc))
		want := fmt.Sprintf(rest, id)
		require.JSONEq(t, want[:len(want)-1]+", "+extra+"}", *doc, "down puts them back")
	}
	var cols int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'workflows' AND column_name IN ('template', 'matrix')`).Scan(&cols))
	require.Zero(t, cols)
}

// TestWorkflowPinnedKeptApart: the document a pass reads and a phase
// change rewrites carries neither the matrix nor the template, however many
// items they have, and WorkflowUpdate changes neither column.
func TestWorkflowPinnedKeptApart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	s := postgres.NewWorkflowStore(db)
	items := make([]any, 5000)
	for i := range items {
		items[i] = map[string]any{"item": fmt.Sprintf("cluster-%05d", i)}
	}
	list, err := json.Marshal(map[string]any{"kind": "WorkflowTemplate", "spec": map[string]any{"items": items}})
	require.NoError(t, err)
	w := ports.WorkflowRecord{ID: "w", Name: "fan", Template: list, Matrix: map[string][]any{"clusters": items}, Phase: workflow.WorkflowPending}
	require.NoError(t, s.WorkflowCreate(ctx, w))
	sizes := func() (doc, template, matrix int) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, `SELECT octet_length(doc::text), octet_length(template::text), octet_length(matrix::text)
			FROM workflows WHERE id = 'w'`).Scan(&doc, &template, &matrix))
		return doc, template, matrix
	}
	doc, template, matrix := sizes()
	require.Less(t, doc, 1024, "the document leaves the template and matrix out")
	require.Greater(t, template, 5000*20)
	require.Greater(t, matrix, 5000*20)

	got, err := s.WorkflowGet(ctx, "w")
	require.NoError(t, err)
	got.Phase, got.Template, got.Matrix = workflow.WorkflowRunning, w.Template, w.Matrix // a caller that still holds them
	_, err = s.WorkflowUpdate(ctx, got, got.Version)
	require.NoError(t, err)
	doc2, template2, matrix2 := sizes()
	require.Less(t, doc2, 1024, "an update writes neither into the document")
	require.Equal(t, template, template2)
	require.Equal(t, matrix, matrix2)
}
