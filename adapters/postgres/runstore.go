package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// RunStore is the Postgres ports.RunStore over the runs table. Every query
// goes through the context's transaction when there is one (DB.InTx), so
// store writes commit or roll back with the caller's other writes.
type RunStore struct {
	db    *DB
	clock ports.Clock
}

var _ ports.RunStore = (*RunStore)(nil)

// NewRunStore returns a store over db that stamps rows with clock.
func NewRunStore(db *DB, clock ports.Clock) *RunStore {
	return &RunStore{db: db, clock: clock}
}

// runModel is one row of the runs table.
type runModel struct {
	bun.BaseModel `bun:"table:runs"`

	Kind      reconcile.RunKind      `bun:"kind,pk"`
	ID        string                 `bun:"id,pk"`
	State     reconcile.State        `bun:"state"`
	Version   int64                  `bun:"version"`
	Repo      string                 `bun:"repo"`
	Terminal  bool                   `bun:"terminal"`
	Body      json.RawMessage        `bun:"body,type:jsonb"`
	Settings  reconcile.Settings     `bun:"settings,type:jsonb"`
	Pod       *reconcile.Pod         `bun:"pod,type:jsonb"`
	PR        *reconcile.PullRequest `bun:"pr,type:jsonb"`
	Heartbeat time.Time              `bun:"heartbeat,nullzero"`
	DependsOn []string               `bun:"depends_on,array"`
	Subtasks  []reconcile.Subtask    `bun:"subtasks,type:jsonb,nullzero"`
	CreatedAt time.Time              `bun:"created_at"`
	UpdatedAt time.Time              `bun:"updated_at"`
}

// row converts the stored model to the port's row.
func (m *runModel) row() ports.RunRow {
	r := ports.RunRow{
		Ref:       reconcile.RunRef{Kind: m.Kind, ID: m.ID},
		State:     m.State,
		Version:   m.Version,
		Repo:      m.Repo,
		Body:      m.Body,
		Settings:  m.Settings,
		Pod:       m.Pod,
		PR:        m.PR,
		Heartbeat: runUTC(m.Heartbeat),
		CreatedAt: runUTC(m.CreatedAt),
		UpdatedAt: runUTC(m.UpdatedAt),
	}
	if len(m.DependsOn) > 0 {
		r.DependsOn = m.DependsOn
	}
	if len(m.Subtasks) > 0 {
		r.Subtasks = m.Subtasks
	}
	return r
}

// runTerminal reports whether state is terminal in kind's machine; the kind
// has been validated.
func runTerminal(kind reconcile.RunKind, state reconcile.State) bool {
	return reconcile.MachineFor(kind).IsTerminal(state)
}

// now reads the clock at the precision Postgres keeps.
func (s *RunStore) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// RunCreate inserts row at version 1, stamped with the store's clock. The
// insert skips on conflict rather than failing, so a duplicate does not abort
// the caller's transaction.
func (s *RunStore) RunCreate(ctx context.Context, row ports.RunRow) (ports.RunRow, error) {
	if err := ports.ValidateRunWrite(row.Ref, row.State, row.Body); err != nil {
		return ports.RunRow{}, fmt.Errorf("create run: %w", err)
	}
	now := s.now()
	m := runModel{
		Kind:      row.Ref.Kind,
		ID:        row.Ref.ID,
		State:     row.State,
		Version:   1,
		Repo:      row.Repo,
		Terminal:  runTerminal(row.Ref.Kind, row.State),
		Body:      row.Body,
		Settings:  row.Settings,
		Pod:       row.Pod,
		PR:        row.PR,
		Heartbeat: row.Heartbeat.UTC().Truncate(time.Microsecond),
		DependsOn: row.DependsOn,
		Subtasks:  row.Subtasks,
		CreatedAt: now,
		UpdatedAt: now,
	}
	if len(m.Body) == 0 {
		m.Body = json.RawMessage(`{}`)
	}
	if len(m.DependsOn) == 0 {
		m.DependsOn = nil
	}
	if len(m.Subtasks) == 0 {
		m.Subtasks = nil
	}
	res, err := s.db.idb(ctx).NewInsert().Model(&m).On("CONFLICT (kind, id) DO NOTHING").Exec(ctx)
	if err != nil {
		return ports.RunRow{}, fmt.Errorf("create run %s: %w", row.Ref, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return ports.RunRow{}, fmt.Errorf("create run %s: %w", row.Ref, err)
	} else if n == 0 {
		return ports.RunRow{}, fmt.Errorf("create run %s: already exists: %w", row.Ref, ports.ErrConflict)
	}
	// The row handed back shares nothing with the caller's row.
	out := row
	out.Version, out.CreatedAt, out.UpdatedAt = 1, now, now
	out.Heartbeat = runUTC(m.Heartbeat)
	out.Body = append(json.RawMessage(nil), m.Body...)
	out.Pod, out.PR = runClonePod(row.Pod), runClonePR(row.PR)
	out.DependsOn = append([]string(nil), m.DependsOn...)
	out.Subtasks = append([]reconcile.Subtask(nil), m.Subtasks...)
	return out, nil
}

// RunGet reads one run, or ErrNotFound.
func (s *RunStore) RunGet(ctx context.Context, ref reconcile.RunRef) (ports.RunRow, error) {
	var m runModel
	err := s.db.idb(ctx).NewSelect().Model(&m).
		Where("kind = ? AND id = ?", ref.Kind, ref.ID).
		Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.RunRow{}, fmt.Errorf("get run %s: %w", ref, ports.ErrNotFound)
	}
	if err != nil {
		return ports.RunRow{}, fmt.Errorf("get run %s: %w", ref, err)
	}
	return m.row(), nil
}

// RunUpdate writes state and body in one compare-and-swap statement; only
// when it matches nothing does a second query tell a conflict from a missing
// run.
func (s *RunStore) RunUpdate(ctx context.Context, p ports.RunUpdateParams) (int64, error) {
	if err := ports.ValidateRunWrite(p.Ref, p.State, p.Body); err != nil {
		return 0, fmt.Errorf("update run: %w", err)
	}
	body := string(p.Body)
	if body == "" {
		body = "{}"
	}
	var version int64
	var subtasks *string // NULL: none
	if p.Subtasks != nil && len(*p.Subtasks) > 0 {
		b, err := json.Marshal(*p.Subtasks)
		if err != nil {
			return 0, fmt.Errorf("update run %s: subtasks: %w", p.Ref, err)
		}
		str := string(b)
		subtasks = &str
	}
	update := `UPDATE runs SET state = ?, terminal = ?, body = ?::jsonb, version = version + 1, updated_at = ?,
		    pod = CASE WHEN ? THEN NULL ELSE pod END,
		    subtasks = CASE WHEN ? THEN ?::jsonb ELSE subtasks END
		 WHERE kind = ? AND id = ? AND version = ? RETURNING version, updated_at`
	args := []any{p.State, runTerminal(p.Ref.Kind, p.State), body, s.now(), p.ResetPod, p.Subtasks != nil, subtasks,
		p.Ref.Kind, p.Ref.ID, p.ExpectedVersion}
	var q string
	if d := p.Decision; d != nil {
		// One statement: the update, its decision (only if the update
		// matched) and the trim of the run's history to the newest
		// RunDecisionsKept rows.
		q = `WITH u AS (` + update + `),
		 ins AS (INSERT INTO run_decisions (kind, id, version, at, action, reason, from_state, to_state, by_name)
		         SELECT ?, ?, u.version, u.updated_at, ?, ?, ?, ?, ? FROM u),
		 trim AS (DELETE FROM run_decisions WHERE kind = ? AND id = ? AND EXISTS (SELECT 1 FROM u) AND version <
		         (SELECT version FROM run_decisions WHERE kind = ? AND id = ? ORDER BY version DESC OFFSET ? LIMIT 1))
		 SELECT version FROM u`
		args = append(args, p.Ref.Kind, p.Ref.ID, d.Action, d.Reason, string(d.From), string(d.To), d.By,
			p.Ref.Kind, p.Ref.ID, p.Ref.Kind, p.Ref.ID, ports.RunDecisionsKept-2)
	} else {
		q = `WITH u AS (` + update + `) SELECT version FROM u`
	}
	err := s.db.idb(ctx).NewRaw(q, args...).Scan(ctx, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, s.missedCAS(ctx, "update", p.Ref, p.ExpectedVersion)
	}
	if err != nil {
		return 0, fmt.Errorf("update run %s: %w", p.Ref, err)
	}
	return version, nil
}

// RunDecisions returns up to limit of the run's recorded decisions, newest
// first; a missing run is ErrNotFound.
func (s *RunStore) RunDecisions(ctx context.Context, ref reconcile.RunRef, limit int) ([]ports.RunDecision, error) {
	if limit <= 0 || limit > ports.RunDecisionsKept {
		limit = ports.RunDecisionsKept
	}
	var rows []struct {
		Version int64     `bun:"version"`
		At      time.Time `bun:"at"`
		Action  string    `bun:"action"`
		Reason  string    `bun:"reason"`
		From    string    `bun:"from_state"`
		To      string    `bun:"to_state"`
		By      string    `bun:"by_name"`
	}
	err := s.db.idb(ctx).NewRaw(
		`SELECT version, at, action, reason, from_state, to_state, by_name FROM run_decisions
		 WHERE kind = ? AND id = ? ORDER BY version DESC LIMIT ?`, ref.Kind, ref.ID, limit).Scan(ctx, &rows)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run decisions of %s: %w", ref, err)
	}
	if len(rows) == 0 {
		if _, err := s.RunGet(ctx, ref); err != nil {
			return nil, fmt.Errorf("run decisions: %w", err)
		}
	}
	out := make([]ports.RunDecision, len(rows))
	for i, r := range rows {
		out[i] = ports.RunDecision{Version: r.Version, At: runUTC(r.At), Action: r.Action, Reason: r.Reason,
			From: reconcile.State(r.From), To: reconcile.State(r.To), By: r.By}
	}
	return out, nil
}

// missedCAS explains a compare-and-swap that matched no row.
func (s *RunStore) missedCAS(ctx context.Context, op string, ref reconcile.RunRef, expected int64) error {
	var stored int64
	err := s.db.idb(ctx).NewRaw(`SELECT version FROM runs WHERE kind = ? AND id = ?`, ref.Kind, ref.ID).Scan(ctx, &stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s run %s: %w", op, ref, ports.ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s run %s: %w", op, ref, err)
	}
	return fmt.Errorf("%s run %s: expected version %d, stored %d: %w", op, ref, expected, stored, ports.ErrConflict)
}

// RunObserve records the non-nil observations and merges Patch into the
// body's top-level keys in one statement, bumping the version.
func (s *RunStore) RunObserve(ctx context.Context, p ports.RunObserveParams) (int64, error) {
	if err := ports.ValidateRunRef(p.Ref); err != nil {
		return 0, fmt.Errorf("observe run: %w", err)
	}
	sets := []string{"version = version + 1", "updated_at = ?"}
	args := []any{s.now()}
	if p.Pod != nil {
		b, err := json.Marshal(p.Pod)
		if err != nil {
			return 0, fmt.Errorf("observe run %s: pod: %w", p.Ref, err)
		}
		sets, args = append(sets, "pod = ?::jsonb"), append(args, string(b))
	}
	if p.PR != nil {
		b, err := json.Marshal(p.PR)
		if err != nil {
			return 0, fmt.Errorf("observe run %s: pr: %w", p.Ref, err)
		}
		sets, args = append(sets, "pr = ?::jsonb"), append(args, string(b))
	}
	if !p.Heartbeat.IsZero() {
		sets, args = append(sets, "heartbeat = ?"), append(args, p.Heartbeat.UTC())
	}
	if len(p.Patch) > 0 {
		patch, err := runPatchJSON(p.Patch)
		if err != nil {
			return 0, fmt.Errorf("observe run %s: %w", p.Ref, err)
		}
		sets, args = append(sets, "body = body || ?::jsonb"), append(args, string(patch))
	}
	args = append(args, p.Ref.Kind, p.Ref.ID)
	var version int64
	err := s.db.idb(ctx).NewRaw(
		"UPDATE runs SET "+strings.Join(sets, ", ")+" WHERE kind = ? AND id = ? RETURNING version", args...,
	).Scan(ctx, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("observe run %s: %w", p.Ref, ports.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("observe run %s: %w", p.Ref, err)
	}
	return version, nil
}

// runPatchJSON encodes the patch as a JSON object, naming the key that fails.
func runPatchJSON(patch map[string]any) ([]byte, error) {
	obj := make(map[string]json.RawMessage, len(patch))
	for k, v := range patch {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("patch key %q: %w", k, err)
		}
		obj[k] = b
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	return b, nil
}

// RunList pages through the runs of one kind in id order.
func (s *RunStore) RunList(ctx context.Context, p ports.RunListParams) ([]ports.RunRow, error) {
	if !p.Kind.Valid() {
		return nil, fmt.Errorf("list runs: %w: kind %q is not a run kind", ports.ErrInvalidRun, p.Kind)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = ports.DefaultRunListLimit
	}
	var ms []runModel
	q := s.db.idb(ctx).NewSelect().Model(&ms).
		Where("kind = ?", p.Kind).
		Where("id > ?", p.AfterID).
		OrderExpr("id").
		Limit(int64(limit))
	if p.NonTerminal {
		q = q.Where("NOT terminal")
	}
	if p.State != "" {
		q = q.Where("state = ?", p.State)
	}
	if err := q.Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("list %s runs after %q: %w", p.Kind, p.AfterID, err)
	}
	out := make([]ports.RunRow, len(ms))
	for i := range ms {
		out[i] = ms[i].row()
	}
	return out, nil
}

// RunDependents returns the non-terminal runs of kind whose depends_on
// (the GIN index of migration 0012) or subtasks name id, in id order.
func (s *RunStore) RunDependents(ctx context.Context, kind reconcile.RunKind, id string) ([]string, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("run dependents: %w: kind %q is not a run kind", ports.ErrInvalidRun, kind)
	}
	var ids []string
	sub, err := json.Marshal([]map[string]string{{"id": id}})
	if err != nil {
		return nil, fmt.Errorf("%s run dependents of %s: %w", kind, id, err)
	}
	err = s.db.idb(ctx).NewRaw(`SELECT id FROM runs WHERE kind = ? AND NOT terminal AND (depends_on @> ? OR subtasks @> ?::jsonb) ORDER BY id`,
		kind, pgdialect.Array([]string{id}), string(sub)).Scan(ctx, &ids)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s run dependents of %s: %w", kind, id, err)
	}
	return ids, nil
}

// RunStates returns the states of the named runs of kind that exist.
func (s *RunStore) RunStates(ctx context.Context, kind reconcile.RunKind, ids []string) (map[string]reconcile.State, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("run states: %w: kind %q is not a run kind", ports.ErrInvalidRun, kind)
	}
	out := make(map[string]reconcile.State, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID    string          `bun:"id"`
		State reconcile.State `bun:"state"`
	}
	err := s.db.idb(ctx).NewRaw(`SELECT id, state FROM runs WHERE kind = ? AND id = ANY(?)`, kind, pgdialect.Array(ids)).Scan(ctx, &rows)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s run states: %w", kind, err)
	}
	for _, r := range rows {
		out[r.ID] = r.State
	}
	return out, nil
}

// RunCounts counts slot-holding runs globally and for repo in one scan of
// the live-state index.
func (s *RunStore) RunCounts(ctx context.Context, repo string) (ports.RunCounts, error) {
	var c struct {
		Global int `bun:"global"`
		Repo   int `bun:"repo"`
	}
	err := s.db.idb(ctx).NewRaw(
		`SELECT count(*) AS global, count(*) FILTER (WHERE repo = ? AND repo <> '') AS repo FROM runs WHERE `+runSlotPredicate,
		repo,
	).Scan(ctx, &c)
	if err != nil {
		return ports.RunCounts{}, fmt.Errorf("run counts for repo %q: %w", repo, err)
	}
	return ports.RunCounts{GlobalActive: c.Global, RepoActive: c.Repo}, nil
}

// runSlotPredicate selects the runs ports.HoldsSlot says hold an agent slot,
// derived from it and the machines so there is one definition.
var runSlotPredicate = buildRunSlotPredicate()

// buildRunSlotPredicate renders runSlotPredicate as SQL.
func buildRunSlotPredicate() string {
	var terms []string
	live := true
	for _, k := range reconcile.Kinds {
		m := reconcile.MachineFor(k)
		var states []string
		for _, st := range m.States {
			if ports.HoldsSlot(k, st) {
				states = append(states, runQuoteLiteral(string(st)))
				live = live && !m.IsTerminal(st)
			}
		}
		if len(states) > 0 {
			terms = append(terms, fmt.Sprintf("(kind = %s AND state IN (%s))", runQuoteLiteral(string(k)), strings.Join(states, ", ")))
		}
	}
	if len(terms) == 0 {
		return "false"
	}
	pred := "(" + strings.Join(terms, " OR ") + ")"
	if live {
		// Lets the planner use the partial index on live runs.
		pred = "NOT terminal AND " + pred
	}
	return pred
}

// runQuoteLiteral quotes a constant from package reconcile as an SQL literal.
func runQuoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// runUTC returns t in UTC, keeping the zero time zero.
func runUTC(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// runClonePod deep-copies a pod observation.
func runClonePod(p *reconcile.Pod) *reconcile.Pod {
	if p == nil {
		return nil
	}
	c := *p
	if p.ExitCode != nil {
		code := *p.ExitCode
		c.ExitCode = &code
	}
	return &c
}

// runClonePR copies a pull-request observation.
func runClonePR(p *reconcile.PullRequest) *reconcile.PullRequest {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
