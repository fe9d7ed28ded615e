package postgres_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// outboxEvent is one events_outbox row (or, with Workspace and ObjectID
// empty, one workflow_events row: its type and doc), its data as compact
// JSON with sorted keys.
type outboxEvent struct {
	Kind, Workspace, ObjectID string
	At                        time.Time
	Data                      string
}

// outboxStatements are multi-row statements on release_jobs,
// release_desired, release_releases and workflow_task_runs, as the chain
// writes them, with the events (want) and hook events (hooks) each must
// record in order. The jobs' resources r1 and r2 are in workspaces w1 and
// w2; "gone" is no stored resource (an empty workspace). $1, where used,
// is outboxT0.
var outboxStatements = []struct {
	name  string
	sql   string
	want  []outboxEvent
	hooks []outboxEvent
	// upsert: an INSERT ... ON CONFLICT DO UPDATE, whose updated rows'
	// events come before its inserted rows' (the row triggers of 0024
	// recorded them in row order).
	upsert bool
}{
	{name: "insert jobs", sql: `
INSERT INTO release_jobs (id, idempotency_key, release_id, target_key, deployment_id, environment_id, resource_id,
	version_id, status, active, created_at, doc, version, updated_at)
SELECT v.id, v.id, 'rel-' || v.id, 'd:e:' || v.res, 'd', 'e', v.res, 'v1', v.status, true, $1, '{}', 1,
	$1::timestamptz + v.n * interval '1 second'
FROM (VALUES ('j3', 'gone', 'pending', 1), ('j1', 'r1', 'pending', 2), ('j4', 'r1', 'inProgress', 3),
	('j2', 'r2', 'pending', 4)) AS v(id, res, status, n)`,
		want: []outboxEvent{
			{"job.created", "", "j3", sec(1), `{"status": "pending", "release_id": "rel-j3", "target_key": "d:e:gone"}`},
			{"job.created", "w1", "j1", sec(2), `{"status": "pending", "release_id": "rel-j1", "target_key": "d:e:r1"}`},
			{"job.created", "w1", "j4", sec(3), `{"status": "inProgress", "release_id": "rel-j4", "target_key": "d:e:r1"}`},
			{"job.created", "w2", "j2", sec(4), `{"status": "pending", "release_id": "rel-j2", "target_key": "d:e:r2"}`},
		}},
	// A scan of the table, in the order the jobs were inserted.
	{name: "update jobs", sql: `
UPDATE release_jobs SET status = CASE id WHEN 'j1' THEN 'successful' WHEN 'j3' THEN 'failure' ELSE status END,
	doc = CASE id WHEN 'j4' THEN '{"verification": "failed", "measurements": {"b": 1, "a": 2}, "message": "m"}' ELSE doc END,
	version = version + 1, updated_at = $1::timestamptz + (10 + ascii(substr(id, 2))) * interval '1 second'`,
		want: []outboxEvent{
			{"job.status", "", "j3", sec(61), `{"status": "failure", "previous": "pending", "release_id": "rel-j3", "target_key": "d:e:gone"}`},
			{"job.status", "w1", "j1", sec(59), `{"status": "successful", "previous": "pending", "release_id": "rel-j1", "target_key": "d:e:r1"}`},
			{"target.current", "w1", "d:e:r1", sec(59), `{"job_id": "j1", "release_id": "rel-j1"}`},
		},
		hooks: []outboxEvent{
			{"job.failed", "", "", sec(61), hookDoc("j3", "d:e:gone", "failure", "", "")},
			{"release.failed", "", "", sec(61), hookDoc("j3", "d:e:gone", "failure", "", "")},
			{"verification.failed", "", "", sec(62), hookDoc("j4", "d:e:r1", "inProgress", "m", `["a","b"]`)},
			{"release.failed", "", "", sec(62), hookDoc("j4", "d:e:r1", "inProgress", "m", "")},
		}},
	// j3 fails again (no job.failed) and its verification fails; j4,
	// already failed verification, fails.
	{name: "update jobs failed", sql: `
UPDATE release_jobs SET status = CASE id WHEN 'j3' THEN 'invalidJobAgent' ELSE 'failure' END,
	doc = CASE id WHEN 'j3' THEN '{"verification": "failed"}' ELSE doc END,
	version = version + 1, updated_at = $1 WHERE id IN ('j3', 'j4')`,
		want: []outboxEvent{
			{"job.status", "", "j3", sec(0), `{"status": "invalidJobAgent", "previous": "failure", "release_id": "rel-j3", "target_key": "d:e:gone"}`},
			{"job.status", "w1", "j4", sec(0), `{"status": "failure", "previous": "inProgress", "release_id": "rel-j4", "target_key": "d:e:r1"}`},
		},
		hooks: []outboxEvent{
			{"verification.failed", "", "", sec(0), hookDoc("j3", "d:e:gone", "invalidJobAgent", "", "[]")},
			{"release.failed", "", "", sec(0), hookDoc("j3", "d:e:gone", "invalidJobAgent", "", "")},
			{"job.failed", "", "", sec(0), hookDoc("j4", "d:e:r1", "failure", "m", "")},
			{"release.failed", "", "", sec(0), hookDoc("j4", "d:e:r1", "failure", "m", "")},
		}},
	{name: "insert releases", sql: `
INSERT INTO release_releases (id, target_key, version_id, doc, created_at)
VALUES ('rel-b', 'd:e:r2', 'v2', '{}', $1::timestamptz + interval '40 seconds'),
	('rel-a', 'd:e:r1', 'v1', '{}', $1::timestamptz + interval '41 seconds')`,
		hooks: []outboxEvent{
			{"release.created", "", "", sec(40), `{"release_id": "rel-b", "target_key": "d:e:r2", "version_id": "v2"}`},
			{"release.created", "", "", sec(41), `{"release_id": "rel-a", "target_key": "d:e:r1", "version_id": "v1"}`},
		}},
	{name: "update jobs unchanged", sql: `UPDATE release_jobs SET version = version + 1, updated_at = $1`},
	{name: "insert desired", sql: `
INSERT INTO release_desired (target_key, release_id, updated_at)
SELECT v.key, v.rel, $1::timestamptz + v.n * interval '1 second'
FROM (VALUES ('d:e:r2', 'rel-2', 20), ('d:e:r1', '', 21), ('d:e:gone', 'rel-gone', 22), ('d:e:r3', 'rel-3', 23))
	AS v(key, rel, n)`,
		want: []outboxEvent{
			{"target.desired", "w2", "d:e:r2", sec(20), `{"release_id": "rel-2"}`},
			{"target.desired", "", "d:e:gone", sec(22), `{"release_id": "rel-gone"}`},
			{"target.desired", "", "d:e:r3", sec(23), `{"release_id": "rel-3"}`},
		}},
	{name: "upsert desired", upsert: true, sql: `
INSERT INTO release_desired AS d (target_key, release_id, reasons, updated_at)
SELECT v.key, v.rel, v.reasons::jsonb, $1::timestamptz + v.n * interval '1 second'
FROM (VALUES ('d:e:a', 'rel-a', '[]', 30), ('d:e:gone', '', '[]', 31), ('d:e:r1', 'rel-1', '[]', 32),
	('d:e:r2', 'rel-2', '["x"]', 33), ('d:e:r3', 'rel-3b', '[]', 34), ('d:e:z', '', '[]', 35)) AS v(key, rel, reasons, n)
ORDER BY v.key
ON CONFLICT (target_key) DO UPDATE SET release_id = excluded.release_id, reasons = excluded.reasons,
	updated_at = excluded.updated_at`,
		want: []outboxEvent{
			{"target.desired", "w1", "d:e:r1", sec(32), `{"release_id": "rel-1"}`},
			{"target.desired", "", "d:e:r3", sec(34), `{"release_id": "rel-3b"}`},
			{"target.desired", "", "d:e:a", sec(30), `{"release_id": "rel-a"}`},
		}},
	{name: "insert workflow", sql: `INSERT INTO workflows (id, doc, version) VALUES ('wf', '{"phase": "Running"}', 1)`,
		want: []outboxEvent{{"workflow.status", "", "wf", atNow, `{"phase": "Running"}`}}},
	{name: "insert task runs", sql: `
INSERT INTO workflow_task_runs (workflow_id, id, doc, version)
VALUES ('wf', 't2', '{"phase": "Pending"}', 1), ('wf', 't1', '{}', 1), ('wf', 't3', '{"phase": "Running"}', 1),
	('wf', 't4', '{"phase": ""}', 1)`,
		want: []outboxEvent{
			{"taskrun.status", "", "wf/t2", atNow, `{"phase": "Pending"}`},
			{"taskrun.status", "", "wf/t3", atNow, `{"phase": "Running"}`},
		}},
	// A scan of the table, in the order the TaskRuns were inserted.
	{name: "update task runs", sql: `
UPDATE workflow_task_runs SET version = version + 1, doc = CASE id
	WHEN 't1' THEN '{"phase": "Running"}' WHEN 't2' THEN '{"phase": "Pending", "x": 1}'
	WHEN 't3' THEN '{"phase": "Succeeded"}' ELSE '{}' END::jsonb`,
		want: []outboxEvent{
			{"taskrun.status", "", "wf/t1", atNow, `{"phase": "Running"}`},
			{"taskrun.status", "", "wf/t3", atNow, `{"phase": "Succeeded"}`},
		}},
}

// sec is the test's t0 plus n seconds.
func sec(n int) time.Time { return outboxT0.Add(time.Duration(n) * time.Second) }

var outboxT0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// atNow stands for the time of the statement's transaction (now()).
var atNow = time.Unix(0, 0).UTC()

// hookDoc is the doc of a job's hook event in the test (metrics: the
// names of its measurements as JSON, "" for none).
func hookDoc(job, target, status, message, metrics string) string {
	doc := `{"release_id": "rel-` + job + `", "target_key": "` + target + `", "version_id": "v1", "job_id": "` + job +
		`", "job_status": "` + status + `", "job_message": "` + message + `", "job_agent_id": "", "external_id": ""`
	if metrics != "" {
		doc += `, "metrics": ` + metrics
	}
	return doc + "}"
}

// canonicalJSON is s compacted with its object keys sorted.
func canonicalJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// canonicalEvents is events with their data canonicalJSON, nil for none.
func canonicalEvents(t *testing.T, events []outboxEvent) []outboxEvent {
	t.Helper()
	var out []outboxEvent
	for _, e := range events {
		e.Data = canonicalJSON(t, e.Data)
		out = append(out, e)
	}
	return out
}

// drainEvents deletes and returns, in seq order, the rows query's CTE d
// deleted (kind, workspace, object id, at, data), an at of now as
// atNow.
func drainEvents(t *testing.T, tx pgx.Tx, now time.Time, query string) []outboxEvent {
	t.Helper()
	rows, err := tx.Query(t.Context(), query)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outboxEvent, error) {
		var e outboxEvent
		err := r.Scan(&e.Kind, &e.Workspace, &e.ObjectID, &e.At, &e.Data)
		e.At = e.At.UTC()
		if e.At.Equal(now) {
			e.At = atNow
		}
		return e, err
	})
	require.NoError(t, err)
	return canonicalEvents(t, got)
}

// runOutboxStatements runs outboxStatements on conn's schema and returns
// the events and hook events each recorded, in order.
func runOutboxStatements(t *testing.T, conn *pgx.Conn) (events, hooks [][]outboxEvent) {
	t.Helper()
	ctx := t.Context()
	_, err := conn.Exec(ctx, `INSERT INTO release_resources (id, workspace_id, doc, version, updated_at)
		VALUES ('r1', 'w1', '{}', 1, now()), ('r2', 'w2', '{}', 1, now())`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `DELETE FROM events_outbox; DELETE FROM workflow_events`)
	require.NoError(t, err)
	events, hooks = make([][]outboxEvent, len(outboxStatements)), make([][]outboxEvent, len(outboxStatements))
	for i, s := range outboxStatements {
		// In one transaction, so an event at now() is told by its time.
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		var args []any
		if strings.Contains(s.sql, "$1") {
			args = append(args, outboxT0)
		}
		_, err = tx.Exec(ctx, s.sql, args...)
		require.NoError(t, err, s.name)
		var now time.Time
		require.NoError(t, tx.QueryRow(ctx, `SELECT now()`).Scan(&now))
		events[i] = drainEvents(t, tx, now, `WITH d AS (DELETE FROM events_outbox RETURNING *)
			SELECT kind, workspace, object_id, at, data::text FROM d ORDER BY seq`)
		hooks[i] = drainEvents(t, tx, now, `WITH d AS (DELETE FROM workflow_events RETURNING *)
			SELECT type, '', '', at, doc::text FROM d ORDER BY seq`)
		require.NoError(t, tx.Commit(ctx))
	}
	return events, hooks
}

// TestEventsOutboxStatementTriggers: migration 0033's statement triggers
// record, for multi-row statements, exactly the events and hook events
// the row triggers of 0011 and 0024 did (kinds, workspaces, ids, times,
// data; skipping unchanged statuses, phases and releases and empty
// releases), in the statement's row order; its down restores the row
// triggers and up again the statement triggers.
func TestEventsOutboxStatementTriggers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	check := func(t *testing.T, conn *pgx.Conn) {
		t.Helper()
		events, hooks := runOutboxStatements(t, conn)
		for i, s := range outboxStatements {
			require.Equal(t, canonicalEvents(t, s.want), events[i], s.name)
			require.Equal(t, canonicalEvents(t, s.hooks), hooks[i], "%s: hooks", s.name)
		}
	}

	db, _, _, conn := setupMigrate(t)
	require.NoError(t, db.MigrateUp(ctx))
	check(t, conn)

	// The same statements under the row triggers (0033 reverted): the same
	// events, the upsert's in row order.
	rowDB, _, _, rowConn := setupMigrate(t)
	require.NoError(t, rowDB.MigrateUp(ctx))
	require.Positive(t, migrateDownBefore(t, rowDB, 33))
	byRow, hooksByRow := runOutboxStatements(t, rowConn)
	for i, s := range outboxStatements {
		want := canonicalEvents(t, s.want)
		require.Equal(t, canonicalEvents(t, s.hooks), hooksByRow[i], "%s: hooks", s.name)
		if s.upsert {
			require.ElementsMatch(t, want, byRow[i], s.name)
			require.NotEqual(t, want, byRow[i], "%s: the row triggers kept row order", s.name)
			continue
		}
		require.Equal(t, want, byRow[i], s.name)
	}

	// Up again (after down) installs the statement triggers again.
	require.NoError(t, rowDB.MigrateUp(ctx))
	_, err := rowConn.Exec(ctx, `TRUNCATE release_jobs, release_desired, release_releases, release_resources, workflows CASCADE`)
	require.NoError(t, err)
	check(t, rowConn)
}
