package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ReleaseStore is the Postgres ports.ReleaseStore over the release_* tables
// of migration 0004. Every query goes through idb(ctx), so it joins the
// caller's DB.InTx; multi-statement writes (TargetsReplace) open or join
// one. Each method is one statement on its normal path; a second query runs
// only to explain a write that matched nothing (not found, conflict,
// invalid).
type ReleaseStore struct {
	db     *DB
	clock  ports.Clock
	onPage func(rows int)
}

var _ ports.ReleaseStore = (*ReleaseStore)(nil)

// ReleaseOption tunes NewReleaseStore.
type ReleaseOption func(*ReleaseStore)

// WithVersionPageHook calls fn with the row count of every page
// VersionsNewestFirst reads, so tests can count page reads.
func WithVersionPageHook(fn func(rows int)) ReleaseOption {
	return func(s *ReleaseStore) { s.onPage = fn }
}

// NewReleaseStore returns a store over db that stamps writes with clock.
func NewReleaseStore(db *DB, clock ports.Clock, opts ...ReleaseOption) *ReleaseStore {
	s := &ReleaseStore{db: db, clock: clock}
	for _, o := range opts {
		o(s)
	}
	return s
}

// now reads the clock at the precision Postgres keeps.
func (s *ReleaseStore) now() time.Time { return ports.StoredTime(s.clock.Now()) }

// relNullTime is t, or NULL for the zero time.
func relNullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ports.StoredTime(t)
}

// exec runs a statement and returns the rows it affected.
func (s *ReleaseStore) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.idb(ctx).NewRaw(q, args...).Exec(ctx)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// hotScan runs q, written with bun's ?N placeholders, as a hot statement
// (DB.hotQuery) and scans its first row into dest; no row is
// sql.ErrNoRows. For the statements every chain pass runs.
func (s *ReleaseStore) hotScan(ctx context.Context, q string, args []any, dest ...any) error {
	return scanOne(s.db.hotQuery(ctx, hotText(q), args...))(dest...)
}

// hotExecN is hotScan for a statement without rows; it returns the rows
// affected.
func (s *ReleaseStore) hotExecN(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.hotExec(ctx, hotText(q), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// hotTexts caches dollarParams per statement text.
var hotTexts sync.Map

// hotText is dollarParams(q), computed once per text.
func hotText(q string) string {
	if v, ok := hotTexts.Load(q); ok {
		return v.(string)
	}
	h := dollarParams(q)
	hotTexts.Store(q, h)
	return h
}

// scan runs a query into dest; no row is sql.ErrNoRows for a single-row
// dest.
func (s *ReleaseStore) scan(ctx context.Context, q string, args []any, dest ...any) error {
	return s.db.idb(ctx).NewRaw(q, args...).Scan(ctx, dest...)
}

// relEncode encodes a document; a value JSON cannot hold (NaN, a channel)
// is invalid input at field.
func relEncode(field string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", release.Invalid(field, err.Error())
	}
	return string(b), nil
}

// docRow is a stored catalog document with its CAS columns.
type docRow struct {
	Doc       []byte    `bun:"doc"`
	Version   int64     `bun:"version"`
	UpdatedAt time.Time `bun:"updated_at"`
}

// relStored decodes a document row.
func relStored[T any](r *docRow) (ports.Stored[T], error) {
	var v T
	if err := json.Unmarshal(r.Doc, &v); err != nil {
		return ports.Stored[T]{}, fmt.Errorf("decode: %w", err)
	}
	return ports.Stored[T]{Value: v, Version: r.Version, UpdatedAt: r.UpdatedAt.UTC()}, nil
}

// catalogTable describes one catalog table: its name, the object name for
// errors, and its parent column and table (empty when none).
type catalogTable struct {
	table, name         string
	parentCol, parentOf string
}

var (
	relWorkspaces   = catalogTable{table: "release_workspaces", name: "workspace"}
	relSystems      = catalogTable{table: "release_systems", name: "system", parentCol: "workspace_id", parentOf: "release_workspaces"}
	relDeployments  = catalogTable{table: "release_deployments", name: "deployment", parentCol: "system_id", parentOf: "release_systems"}
	relEnvironments = catalogTable{table: "release_environments", name: "environment", parentCol: "system_id", parentOf: "release_systems"}
	relResources    = catalogTable{table: "release_resources", name: "resource", parentCol: "workspace_id", parentOf: "release_workspaces"}
	relAgents       = catalogTable{table: "release_job_agents", name: "job agent"}
	relPolicies     = catalogTable{table: "release_policies", name: "policy"}
)

// catalogPut is one compare-and-swap write of a catalog document: an insert
// for expected 0, else an update at version expected, either only while the
// parent exists. cols and vals are extra columns (the parent column first
// when the table has one).
func (s *ReleaseStore) catalogPut(ctx context.Context, t catalogTable, id, doc string, cols []string, vals []any, expected int64) (int64, error) {
	op := "put " + t.name + " " + id
	if expected < 0 {
		return 0, fmt.Errorf("%s: %w", op, release.Invalid("expected_version", "must not be negative"))
	}
	parentCond, parentArgs := "true", []any(nil)
	if t.parentCol != "" {
		parentCond = "EXISTS (SELECT 1 FROM " + t.parentOf + " WHERE id = ?)"
		parentArgs = []any{vals[0]}
	}
	now := s.now()
	var q string
	var args []any
	if expected == 0 {
		marks := strings.Repeat("?, ", len(cols))
		q = "INSERT INTO " + t.table + " (id, " + strings.Join(append(slices.Clone(cols), ""), ", ") + "doc, version, updated_at) " +
			"SELECT ?, " + marks + "?::jsonb, 1, ? WHERE " + parentCond + " ON CONFLICT (id) DO NOTHING"
		args = append(append(append([]any{id}, vals...), doc, now), parentArgs...)
	} else {
		sets := ""
		for _, c := range cols {
			sets += c + " = ?, "
		}
		q = "UPDATE " + t.table + " SET " + sets + "doc = ?::jsonb, version = version + 1, updated_at = ? " +
			"WHERE id = ? AND version = ? AND " + parentCond
		args = append(append(append([]any{}, vals...), doc, now, id, expected), parentArgs...)
	}
	n, err := s.exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if n == 1 {
		return expected + 1, nil
	}
	return 0, s.catalogMissed(ctx, t, op, id, parentArgs, expected)
}

// catalogMissed explains a catalog write that matched nothing.
func (s *ReleaseStore) catalogMissed(ctx context.Context, t catalogTable, op, id string, parentArgs []any, expected int64) error {
	if t.parentCol != "" {
		var ok bool
		if err := s.scan(ctx, "SELECT EXISTS (SELECT 1 FROM "+t.parentOf+" WHERE id = ?)", parentArgs, &ok); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if !ok {
			return fmt.Errorf("%s: parent %v: %w", op, parentArgs[0], ports.ErrNotFound)
		}
	}
	var stored int64
	err := s.scan(ctx, "SELECT version FROM "+t.table+" WHERE id = ?", []any{id}, &stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s: %w", op, err)
	case expected == 0:
		return fmt.Errorf("%s: already exists at version %d: %w", op, stored, ports.ErrConflict)
	}
	return fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, stored, ports.ErrConflict)
}

// catalogGet reads one document.
func catalogGet[T any](ctx context.Context, s *ReleaseStore, t catalogTable, id string) (ports.Stored[T], error) {
	var r docRow
	err := s.scan(ctx, "SELECT doc, version, updated_at FROM "+t.table+" WHERE id = ?", []any{id}, &r)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.Stored[T]{}, fmt.Errorf("get %s %s: %w", t.name, id, ports.ErrNotFound)
	}
	if err != nil {
		return ports.Stored[T]{}, fmt.Errorf("get %s %s: %w", t.name, id, err)
	}
	out, err := relStored[T](&r)
	if err != nil {
		return out, fmt.Errorf("get %s %s: %w", t.name, id, err)
	}
	return out, nil
}

// catalogList reads documents by a WHERE clause and its arguments.
func catalogList[T any](ctx context.Context, s *ReleaseStore, t catalogTable, where, order string, args ...any) ([]ports.Stored[T], error) {
	var rows []docRow
	if err := s.scan(ctx, "SELECT doc, version, updated_at FROM "+t.table+" WHERE "+where+" ORDER BY "+order, args, &rows); err != nil {
		return nil, fmt.Errorf("list %ss: %w", t.name, err)
	}
	out := make([]ports.Stored[T], 0, len(rows))
	for i := range rows {
		v, err := relStored[T](&rows[i])
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", t.name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// putValidated validates v, encodes it and writes it.
func putValidated[T any](ctx context.Context, s *ReleaseStore, t catalogTable, v *T, id string, validate func(*T) error, parent string, expected int64) (int64, error) {
	if err := validate(v); err != nil {
		return 0, fmt.Errorf("put %s %s: %w", t.name, id, err)
	}
	doc, err := relEncode(t.name, v)
	if err != nil {
		return 0, fmt.Errorf("put %s %s: %w", t.name, id, err)
	}
	var cols []string
	var vals []any
	if t.parentCol != "" {
		cols, vals = []string{t.parentCol}, []any{parent}
	}
	return s.catalogPut(ctx, t, id, doc, cols, vals, expected)
}

// WorkspacePut creates or updates a workspace.
func (s *ReleaseStore) WorkspacePut(ctx context.Context, w release.Workspace, expected int64) (int64, error) {
	return putValidated(ctx, s, relWorkspaces, &w, w.ID, (*release.Workspace).Validate, "", expected)
}

// WorkspaceGet reads one workspace.
func (s *ReleaseStore) WorkspaceGet(ctx context.Context, id string) (ports.Stored[release.Workspace], error) {
	return catalogGet[release.Workspace](ctx, s, relWorkspaces, id)
}

// SystemPut creates or updates a system of a stored workspace.
func (s *ReleaseStore) SystemPut(ctx context.Context, v release.System, expected int64) (int64, error) {
	return putValidated(ctx, s, relSystems, &v, v.ID, (*release.System).Validate, v.WorkspaceID, expected)
}

// SystemGet reads one system.
func (s *ReleaseStore) SystemGet(ctx context.Context, id string) (ports.Stored[release.System], error) {
	return catalogGet[release.System](ctx, s, relSystems, id)
}

// SystemList lists a workspace's systems by id.
func (s *ReleaseStore) SystemList(ctx context.Context, workspaceID string) ([]ports.Stored[release.System], error) {
	return catalogList[release.System](ctx, s, relSystems, "workspace_id = ?", "id", workspaceID)
}

// DeploymentPut creates or updates a deployment of a stored system.
func (s *ReleaseStore) DeploymentPut(ctx context.Context, d release.Deployment, expected int64) (int64, error) {
	return putValidated(ctx, s, relDeployments, &d, d.ID, (*release.Deployment).Validate, d.SystemID, expected)
}

// DeploymentGet reads one deployment.
func (s *ReleaseStore) DeploymentGet(ctx context.Context, id string) (ports.Stored[release.Deployment], error) {
	return catalogGet[release.Deployment](ctx, s, relDeployments, id)
}

// DeploymentList lists a system's deployments by id.
func (s *ReleaseStore) DeploymentList(ctx context.Context, systemID string) ([]ports.Stored[release.Deployment], error) {
	return catalogList[release.Deployment](ctx, s, relDeployments, "system_id = ?", "id", systemID)
}

// EnvironmentPut creates or updates an environment of a stored system.
func (s *ReleaseStore) EnvironmentPut(ctx context.Context, e release.Environment, expected int64) (int64, error) {
	return putValidated(ctx, s, relEnvironments, &e, e.ID, (*release.Environment).Validate, e.SystemID, expected)
}

// EnvironmentGet reads one environment.
func (s *ReleaseStore) EnvironmentGet(ctx context.Context, id string) (ports.Stored[release.Environment], error) {
	return catalogGet[release.Environment](ctx, s, relEnvironments, id)
}

// EnvironmentList lists a system's environments by id.
func (s *ReleaseStore) EnvironmentList(ctx context.Context, systemID string) ([]ports.Stored[release.Environment], error) {
	return catalogList[release.Environment](ctx, s, relEnvironments, "system_id = ?", "id", systemID)
}

// ResourcePut creates or updates a resource of a stored workspace.
func (s *ReleaseStore) ResourcePut(ctx context.Context, r release.Resource, expected int64) (int64, error) {
	return putValidated(ctx, s, relResources, &r, r.ID, (*release.Resource).Validate, r.WorkspaceID, expected)
}

// ResourceGet reads one resource.
func (s *ReleaseStore) ResourceGet(ctx context.Context, id string) (ports.Stored[release.Resource], error) {
	return catalogGet[release.Resource](ctx, s, relResources, id)
}

// ResourceList pages through a workspace's resources by id.
func (s *ReleaseStore) ResourceList(ctx context.Context, p ports.ResourceListParams) ([]ports.Stored[release.Resource], error) {
	order := "id"
	if p.Limit > 0 {
		order = fmt.Sprintf("id LIMIT %d", p.Limit)
	}
	return catalogList[release.Resource](ctx, s, relResources, "workspace_id = ? AND id > ?", order, p.WorkspaceID, p.AfterID)
}

// JobAgentPut creates or updates a job agent.
func (s *ReleaseStore) JobAgentPut(ctx context.Context, a release.JobAgent, expected int64) (int64, error) {
	return putValidated(ctx, s, relAgents, &a, a.ID, (*release.JobAgent).Validate, "", expected)
}

// JobAgentGet reads one job agent.
func (s *ReleaseStore) JobAgentGet(ctx context.Context, id string) (ports.Stored[release.JobAgent], error) {
	return catalogGet[release.JobAgent](ctx, s, relAgents, id)
}

// JobAgentList lists every job agent by id.
func (s *ReleaseStore) JobAgentList(ctx context.Context) ([]ports.Stored[release.JobAgent], error) {
	return catalogList[release.JobAgent](ctx, s, relAgents, "true", "id")
}

// PolicyPut creates or updates a policy after policy.Validate.
func (s *ReleaseStore) PolicyPut(ctx context.Context, p policy.Policy, expected int64) (int64, error) {
	op := "put policy " + p.ID
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	doc, err := relEncode("rules", &p)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return s.catalogPut(ctx, relPolicies, p.ID, doc, []string{"priority", "enabled"}, []any{p.Priority, p.Enabled}, expected)
}

// PolicyGet reads one policy.
func (s *ReleaseStore) PolicyGet(ctx context.Context, id string) (ports.Stored[policy.Policy], error) {
	return catalogGet[policy.Policy](ctx, s, relPolicies, id)
}

// PolicyList lists policies by priority (highest first), then id.
func (s *ReleaseStore) PolicyList(ctx context.Context, enabledOnly bool) ([]ports.Stored[policy.Policy], error) {
	where := "true"
	if enabledOnly {
		where = "enabled"
	}
	return catalogList[policy.Policy](ctx, s, relPolicies, where, "priority DESC, id")
}
