package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// WorkflowStore is ports.WorkflowStore on PostgreSQL: one row per workflow
// and per TaskRun, each a JSON document with a version column; a
// workflow's pinned template and matrix are in columns of their own
// (migration 0034), which only WorkflowCreate writes and only
// WorkflowTemplate and WorkflowMatrix read.
type WorkflowStore struct {
	db *DB
}

// NewWorkflowStore returns the store over db.
func NewWorkflowStore(db *DB) *WorkflowStore { return &WorkflowStore{db: db} }

var (
	_ ports.WorkflowStore = (*WorkflowStore)(nil)
	_ ports.Transactor    = (*WorkflowStore)(nil)
)

// InTx implements ports.Transactor with DB.InTx: the store's calls, and
// those of the other adapters on the same DB (the Queue), join it.
func (s *WorkflowStore) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.db.InTx(ctx, fn)
}

// WorkflowCreate stores w at version 1.
func (s *WorkflowStore) WorkflowCreate(ctx context.Context, w ports.WorkflowRecord) error {
	op := "create workflow " + w.ID
	if err := ports.ValidateNewWorkflow(&w); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	w.Version = 1
	enc, err := ports.EncodeWorkflow(&w)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var m any // NULL: no matrix
	if enc.Matrix != nil {
		m = string(enc.Matrix)
	}
	res, err := s.db.hotExec(ctx, `INSERT INTO workflows (id, doc, template, matrix, version) VALUES ($1, $2::jsonb, $3::jsonb, $4::jsonb, 1)
		ON CONFLICT DO NOTHING`, w.ID, string(enc.Doc), string(enc.Template), m)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s: %w", op, ports.ErrConflict)
	}
	return nil
}

// WorkflowGet reads one workflow.
func (s *WorkflowStore) WorkflowGet(ctx context.Context, id string) (ports.WorkflowRecord, error) {
	var doc []byte
	err := scanOne(s.db.hotQuery(ctx, `SELECT doc FROM workflows WHERE id = $1`, id))(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.WorkflowRecord{}, fmt.Errorf("get workflow %s: %w", id, ports.ErrNotFound)
	}
	if err != nil {
		return ports.WorkflowRecord{}, fmt.Errorf("get workflow %s: %w", id, err)
	}
	var w ports.WorkflowRecord
	if err := json.Unmarshal(doc, &w); err != nil {
		return ports.WorkflowRecord{}, fmt.Errorf("get workflow %s: decode: %w", id, err)
	}
	return w, nil
}

// WorkflowTemplate reads a workflow's template column.
func (s *WorkflowStore) WorkflowTemplate(ctx context.Context, id string) (json.RawMessage, error) {
	b, err := s.pinned(ctx, id, "template")
	return json.RawMessage(b), err
}

// WorkflowMatrix reads a workflow's matrix column.
func (s *WorkflowStore) WorkflowMatrix(ctx context.Context, id string) (map[string][]any, error) {
	b, err := s.pinned(ctx, id, "matrix")
	if err != nil || b == nil {
		return nil, err
	}
	var m map[string][]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("get matrix of workflow %s: decode: %w", id, err)
	}
	return m, nil
}

// pinned reads a workflow's template or matrix column (nil: NULL).
func (s *WorkflowStore) pinned(ctx context.Context, id, column string) ([]byte, error) {
	var b []byte
	err := scanOne(s.db.hotQuery(ctx, `SELECT `+column+` FROM workflows WHERE id = $1`, id))(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get %s of workflow %s: %w", column, id, ports.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s of workflow %s: %w", column, id, err)
	}
	return b, nil
}

// WorkflowUpdate writes w at the expected version, keeping the template's
// name and revision and the creation time; the template and matrix
// columns are not written.
func (s *WorkflowStore) WorkflowUpdate(ctx context.Context, w ports.WorkflowRecord, expected int64) (int64, error) {
	op := "update workflow " + w.ID
	if err := ports.ValidateWorkflow(&w); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	w.Version = expected + 1
	w.Template, w.Matrix = nil, nil // kept apart, never changed
	doc, err := release.EncodeText(&w)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	res, err := s.db.hotExec(ctx, `UPDATE workflows SET version = version + 1,
		doc = $2::jsonb || jsonb_build_object('template_name', doc->'template_name',
			'template_revision', doc->'template_revision', 'created_at', doc->'created_at')
		WHERE id = $1 AND version = $3`, w.ID, string(doc), expected)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return w.Version, nil
	}
	cur, err := s.WorkflowGet(ctx, w.ID)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return 0, fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, cur.Version, ports.ErrConflict)
}

// WorkflowList lists workflows by id.
func (s *WorkflowStore) WorkflowList(ctx context.Context, afterID string, limit int) ([]ports.WorkflowRecord, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.db.hotQuery(ctx, `SELECT doc FROM workflows WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return scanDocs[ports.WorkflowRecord](rows, "list workflows")
}

// WorkflowsUnfinished lists the unfinished workflows of a trigger by id,
// through the partial index of migration 0011.
func (s *WorkflowStore) WorkflowsUnfinished(ctx context.Context, triggerKey string) ([]ports.WorkflowRecord, error) {
	rows, err := s.db.hotQuery(ctx, `SELECT doc FROM workflows
		WHERE doc->'trigger'->>'key' = $1 AND doc->>'phase' IN ('Pending', 'Running') ORDER BY id`, triggerKey)
	if err != nil {
		return nil, fmt.Errorf("list unfinished workflows of %s: %w", triggerKey, err)
	}
	return scanDocs[ports.WorkflowRecord](rows, "list unfinished workflows of "+triggerKey)
}

// TaskRunsList lists a workflow's TaskRuns by id.
func (s *WorkflowStore) TaskRunsList(ctx context.Context, workflowID string) ([]ports.TaskRunRecord, error) {
	op := "list task runs of " + workflowID
	rows, err := s.db.hotQuery(ctx, `SELECT r.doc FROM workflows w LEFT JOIN workflow_task_runs r ON r.workflow_id = w.id
		WHERE w.id = $1 ORDER BY r.id`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var docs [][]byte
	for rows.Next() {
		var d []byte
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		docs = append(docs, d)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	out := make([]ports.TaskRunRecord, 0, len(docs))
	for _, d := range docs {
		if d == nil { // the workflow has no TaskRuns yet
			continue
		}
		var r ports.TaskRunRecord
		if err := json.Unmarshal(d, &r); err != nil {
			return nil, fmt.Errorf("%s: decode: %w", op, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// TaskRunGet reads one TaskRun.
func (s *WorkflowStore) TaskRunGet(ctx context.Context, workflowID, id string) (ports.TaskRunRecord, error) {
	var doc []byte
	err := scanOne(s.db.hotQuery(ctx, `SELECT doc FROM workflow_task_runs WHERE workflow_id = $1 AND id = $2`, workflowID, id))(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.TaskRunRecord{}, fmt.Errorf("get task run %s/%s: %w", workflowID, id, ports.ErrNotFound)
	}
	if err != nil {
		return ports.TaskRunRecord{}, fmt.Errorf("get task run %s/%s: %w", workflowID, id, err)
	}
	var r ports.TaskRunRecord
	if err := json.Unmarshal(doc, &r); err != nil {
		return ports.TaskRunRecord{}, fmt.Errorf("get task run %s/%s: decode: %w", workflowID, id, err)
	}
	return r, nil
}

// TaskRunsSave creates and updates the batch in one transaction of two
// statements; a count short of the batch rolls it all back as a conflict.
func (s *WorkflowStore) TaskRunsSave(ctx context.Context, workflowID string, runs []ports.TaskRunRecord) error {
	op := fmt.Sprintf("save %d task runs of %s", len(runs), workflowID)
	var newIDs, newDocs, upIDs, upDocs []string
	var upVersions []int64
	seen := make(map[string]bool, len(runs))
	for i := range runs {
		r := runs[i]
		if err := ports.ValidateTaskRun(workflowID, &r); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if seen[r.ID] {
			return fmt.Errorf("%s: task run %s twice in one batch: %w", op, r.ID, ports.ErrConflict)
		}
		seen[r.ID] = true
		expected := r.Version
		r.Version++
		doc, err := release.EncodeText(&r)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if expected == 0 {
			newIDs, newDocs = append(newIDs, r.ID), append(newDocs, string(doc))
		} else {
			upIDs, upDocs, upVersions = append(upIDs, r.ID), append(upDocs, string(doc)), append(upVersions, expected)
		}
	}
	errShort := errors.New("short")
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if len(newIDs) > 0 {
			res, err := s.db.hotExec(ctx, `INSERT INTO workflow_task_runs (workflow_id, id, doc, version)
				SELECT $1, n.id, n.doc::jsonb, 1 FROM unnest($2::text[], $3::text[]) AS n(id, doc)
				WHERE EXISTS (SELECT 1 FROM workflows WHERE id = $1)
				ON CONFLICT DO NOTHING`, workflowID, newIDs, newDocs)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != int64(len(newIDs)) {
				return errShort
			}
		}
		if len(upIDs) > 0 {
			res, err := s.db.hotExec(ctx, `UPDATE workflow_task_runs r SET doc = u.doc::jsonb, version = r.version + 1
				FROM unnest($2::text[], $3::text[], $4::bigint[]) AS u(id, doc, expected)
				WHERE r.workflow_id = $1 AND r.id = u.id AND r.version = u.expected`, workflowID, upIDs, upDocs, upVersions)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != int64(len(upIDs)) {
				return errShort
			}
		}
		return nil
	})
	if errors.Is(err, errShort) {
		if _, gerr := s.WorkflowGet(ctx, workflowID); errors.Is(gerr, ports.ErrNotFound) {
			return fmt.Errorf("%s: %w", op, ports.ErrNotFound)
		}
		return fmt.Errorf("%s: a task run was created or changed meanwhile, or is missing: %w", op, ports.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// TaskRunWrites is the sum of the workflow's TaskRun versions.
func (s *WorkflowStore) TaskRunWrites(ctx context.Context, workflowID string) (int64, error) {
	var n int64
	err := scanOne(s.db.hotQuery(ctx, `SELECT (SELECT coalesce(sum(r.version), 0)::bigint FROM workflow_task_runs r WHERE r.workflow_id = w.id)
		FROM workflows w WHERE w.id = $1`, workflowID))(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("count task run writes of %s: %w", workflowID, ports.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("count task run writes of %s: %w", workflowID, err)
	}
	return n, nil
}

// ReportsAdd inserts the reports whose TaskRun exists in one statement:
// it reads the TaskRuns without locking them (the foreign key locks the
// workflow row FOR KEY SHARE, which no update of a workflow waits for).
func (s *WorkflowStore) ReportsAdd(ctx context.Context, reports []ports.TaskRunReport) ([]bool, error) {
	op := fmt.Sprintf("add %d reports", len(reports))
	wfs, runs, docs := make([]string, len(reports)), make([]string, len(reports)), make([]string, len(reports))
	for i := range reports {
		r := reports[i]
		if err := ports.ValidateTaskRunReport(&r); err != nil {
			return nil, fmt.Errorf("%s: report %d: %w", op, i, err)
		}
		r.Seq = 0
		doc, err := release.EncodeText(&r)
		if err != nil {
			return nil, fmt.Errorf("%s: report %d: %w", op, i, err)
		}
		wfs[i], runs[i], docs[i] = r.WorkflowID, r.TaskRunID, string(doc)
	}
	rows, err := s.db.hotQuery(ctx, `WITH u AS (
			SELECT u.wf, u.doc, u.i FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(wf, tr, doc, i)
			WHERE EXISTS (SELECT 1 FROM workflow_task_runs r WHERE r.workflow_id = u.wf AND r.id = u.tr)),
		ins AS (INSERT INTO workflow_reports (workflow_id, doc) SELECT wf, doc::jsonb FROM u ORDER BY i)
		SELECT i FROM u`, wfs, runs, docs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	stored := make([]bool, len(reports))
	for rows.Next() {
		var i int
		if err := rows.Scan(&i); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		stored[i-1] = true
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return stored, nil
}

// Reports lists a workflow's inbox in Seq order.
func (s *WorkflowStore) Reports(ctx context.Context, workflowID string) ([]ports.TaskRunReport, error) {
	op := "list reports of " + workflowID
	rows, err := s.db.hotQuery(ctx, `SELECT seq, doc FROM workflow_reports WHERE workflow_id = $1 ORDER BY seq`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []ports.TaskRunReport
	for rows.Next() {
		var seq int64
		var doc []byte
		if err := rows.Scan(&seq, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		var r ports.TaskRunReport
		if err := json.Unmarshal(doc, &r); err != nil {
			return nil, fmt.Errorf("%s: decode: %w", op, err)
		}
		r.Seq = seq
		out = append(out, r)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// ReportsDone deletes the workflow's reports of the given Seqs.
func (s *WorkflowStore) ReportsDone(ctx context.Context, workflowID string, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := s.db.hotExec(ctx, `DELETE FROM workflow_reports WHERE workflow_id = $1 AND seq = ANY($2::bigint[])`, workflowID, seqs); err != nil {
		return fmt.Errorf("remove %d reports of %s: %w", len(seqs), workflowID, err)
	}
	return nil
}

// scanDocs decodes every row's single JSON column.
func scanDocs[T any](rows *sql.Rows, op string) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var d []byte
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		var v T
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, fmt.Errorf("%s: decode: %w", op, err)
		}
		out = append(out, v)
	}
	return out, rows.Close()
}
