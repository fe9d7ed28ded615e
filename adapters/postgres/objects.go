package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// objectTable describes the table of one kind of the object store: every
// table has id, doc (the object's JSON), version and updated_at, plus the
// parent column (when the kind has a parent) and any columns queries
// filter on.
type objectTable struct {
	table string
	// parentCol and parentTable name the parent's column and table (empty
	// for a top-level kind).
	parentCol, parentTable string
	// dependents are what a delete refuses while a row matches.
	dependents []dependent
}

// dependent is a query for one kind of row that depends on an object: the
// first matching row's id, by id, with the object's id as the argument.
type dependent struct {
	what, query string
}

// childOf is the dependent rows of table whose col is the object's id.
func childOf(what, table, col, idCol string) dependent {
	return dependent{what: what, query: "SELECT " + idCol + " FROM " + table + " WHERE " + col + " = ? ORDER BY " + idCol + " LIMIT 1"}
}

var (
	relWorkspaces = objectTable{table: "release_workspaces", dependents: []dependent{
		childOf("system", "release_systems", "workspace_id", "id"),
		childOf("resource", "release_resources", "workspace_id", "id"),
		childOf("relationship rule", "release_relationship_rules", "workspace_id", "id")}}
	relSystems = objectTable{table: "release_systems", parentCol: "workspace_id", parentTable: "release_workspaces",
		dependents: []dependent{
			childOf("deployment", "release_deployments", "system_id", "id"),
			childOf("environment", "release_environments", "system_id", "id"),
			childOf("variable set", "release_variable_sets", "system_id", "id")}}
	relDeployments = objectTable{table: "release_deployments", parentCol: "system_id", parentTable: "release_systems",
		dependents: []dependent{
			childOf("version", "release_versions", "deployment_id", "id"),
			childOf("release target", "release_targets", "deployment_id", "key")}}
	relEnvironments = objectTable{table: "release_environments", parentCol: "system_id", parentTable: "release_systems",
		dependents: []dependent{childOf("release target", "release_targets", "environment_id", "key")}}
	relResources = objectTable{table: "release_resources", parentCol: "workspace_id", parentTable: "release_workspaces",
		dependents: []dependent{childOf("release target", "release_targets", "resource_id", "key")}}
	relVariableSets = objectTable{table: "release_variable_sets", parentCol: "system_id", parentTable: "release_systems"}
	relRelRules     = objectTable{table: "release_relationship_rules", parentCol: "workspace_id", parentTable: "release_workspaces"}
	relAgents       = objectTable{table: "release_job_agents", dependents: []dependent{
		{what: "deployment", query: "SELECT id FROM release_deployments WHERE doc->>'job_agent_id' = ? ORDER BY id LIMIT 1"}}}
)

// objects is the one Postgres ports.Objects, parameterised by a kind and
// its table. cols returns the extra columns of a row (besides id, parent,
// doc, version, updated_at) with their values.
type objects[T any] struct {
	s    *ReleaseStore
	kind *ports.Kind[T]
	t    objectTable
	cols func(*T) ([]string, []any)
}

// Workspaces implements ports.ObjectStore.
func (s *ReleaseStore) Workspaces() ports.Objects[release.Workspace] {
	return &objects[release.Workspace]{s: s, kind: &ports.WorkspaceKind, t: relWorkspaces}
}

// Systems implements ports.ObjectStore.
func (s *ReleaseStore) Systems() ports.Objects[release.System] {
	return &objects[release.System]{s: s, kind: &ports.SystemKind, t: relSystems}
}

// Deployments implements ports.ObjectStore.
func (s *ReleaseStore) Deployments() ports.Objects[release.Deployment] {
	return &objects[release.Deployment]{s: s, kind: &ports.DeploymentKind, t: relDeployments}
}

// Environments implements ports.ObjectStore.
func (s *ReleaseStore) Environments() ports.Objects[release.Environment] {
	return &objects[release.Environment]{s: s, kind: &ports.EnvironmentKind, t: relEnvironments}
}

// Resources implements ports.ObjectStore.
func (s *ReleaseStore) Resources() ports.Objects[release.Resource] {
	return &objects[release.Resource]{s: s, kind: &ports.ResourceKind, t: relResources}
}

// VariableSets implements ports.ObjectStore.
func (s *ReleaseStore) VariableSets() ports.Objects[release.VariableSet] {
	return &objects[release.VariableSet]{s: s, kind: &ports.VariableSetKind, t: relVariableSets}
}

// RelationshipRules implements ports.ObjectStore.
func (s *ReleaseStore) RelationshipRules() ports.Objects[release.RelationshipRule] {
	return &objects[release.RelationshipRule]{s: s, kind: &ports.RelationshipRuleKind, t: relRelRules}
}

// JobAgents implements ports.ObjectStore.
func (s *ReleaseStore) JobAgents() ports.Objects[release.JobAgent] {
	return &objects[release.JobAgent]{s: s, kind: &ports.JobAgentKind, t: relAgents}
}

// docRow is a stored document with its CAS columns.
type docRow struct {
	ID        string    `bun:"id"`
	Doc       []byte    `bun:"doc"`
	Version   int64     `bun:"version"`
	UpdatedAt time.Time `bun:"updated_at"`
}

// stored decodes a document row.
func (o *objects[T]) stored(r *docRow) (ports.Stored[T], error) {
	v, err := relStored[T](r)
	if err != nil {
		return v, fmt.Errorf("%s %s: %w", o.kind.Name, r.ID, err)
	}
	return v, nil
}

// Get implements ports.Objects.
func (o *objects[T]) Get(ctx context.Context, id string) (ports.Stored[T], error) {
	op := "get " + o.kind.Name + " " + id
	var r docRow
	err := o.s.scan(ctx, "SELECT id, doc, version, updated_at FROM "+o.t.table+" WHERE id = ?", []any{id}, &r)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.Stored[T]{}, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	if err != nil {
		return ports.Stored[T]{}, fmt.Errorf("%s: %w", op, err)
	}
	out, err := o.stored(&r)
	if err != nil {
		return out, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// List implements ports.Objects: a keyset page on (parent, id) or id.
func (o *objects[T]) List(ctx context.Context, p ports.ListParams) (ports.Page[T], error) {
	op := "list " + o.kind.Plural
	after, limit, err := ports.ListCursor(o.kind, p)
	if err != nil {
		return ports.Page[T]{}, fmt.Errorf("%s: %w", op, err)
	}
	where, args := "id > ?", []any{after}
	if p.Parent != "" {
		where, args = o.t.parentCol+" = ? AND "+where, append([]any{p.Parent}, args...)
	}
	if p.Workspace != "" {
		in := o.t.parentCol + " = ?"
		if o.t.parentTable == relSystems.table {
			in = o.t.parentCol + " IN (SELECT id FROM release_systems WHERE workspace_id = ?)"
		}
		where, args = in+" AND "+where, append([]any{p.Workspace}, args...)
	}
	var rows []docRow
	q := fmt.Sprintf("SELECT id, doc, version, updated_at FROM %s WHERE %s ORDER BY id LIMIT %d", o.t.table, where, limit+1)
	if err := o.s.scan(ctx, q, args, &rows); err != nil {
		return ports.Page[T]{}, fmt.Errorf("%s: %w", op, err)
	}
	var page ports.Page[T]
	if len(rows) > limit {
		rows = rows[:limit]
		page.Continue = ports.ContinueToken(rows[limit-1].ID)
	}
	page.Items = make([]ports.Stored[T], 0, len(rows))
	for i := range rows {
		v, err := o.stored(&rows[i])
		if err != nil {
			return ports.Page[T]{}, fmt.Errorf("%s: %w", op, err)
		}
		page.Items = append(page.Items, v)
	}
	return page, nil
}

// Put implements ports.Objects: validate, encode, then one compare-and-swap
// statement: an insert for expected 0, else an update at version expected,
// either only while the parent exists. The parent row is held FOR KEY
// SHARE, so a concurrent delete of the parent waits and then sees the
// child.
func (o *objects[T]) Put(ctx context.Context, v T, expected int64) (int64, error) {
	id := o.kind.ID(&v)
	op := "put " + o.kind.Name + " " + id
	if err := o.kind.Validate(&v); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if expected < 0 {
		return 0, fmt.Errorf("%s: %w", op, release.Invalid("expected_version", "must not be negative"))
	}
	doc, err := relEncode(o.kind.Name, &v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var cols []string
	var vals []any
	parentCond, parentArgs := "true", []any(nil)
	if o.t.parentCol != "" {
		parent := o.kind.ParentOf(&v)
		cols, vals = []string{o.t.parentCol}, []any{parent}
		parentCond = "EXISTS (SELECT 1 FROM " + o.t.parentTable + " WHERE id = ? FOR KEY SHARE)"
		parentArgs = []any{parent}
	}
	if o.cols != nil {
		c, x := o.cols(&v)
		cols, vals = append(cols, c...), append(vals, x...)
	}
	now := o.s.now()
	var q string
	var args []any
	if expected == 0 {
		marks := strings.Repeat("?, ", len(cols))
		q = "INSERT INTO " + o.t.table + " (id, " + strings.Join(append(slices.Clone(cols), ""), ", ") + "doc, version, updated_at) " +
			"SELECT ?, " + marks + "?::jsonb, 1, ? WHERE " + parentCond + " ON CONFLICT (id) DO NOTHING"
		args = append(append(append([]any{id}, vals...), doc, now), parentArgs...)
	} else {
		sets := ""
		for _, c := range cols {
			sets += c + " = ?, "
		}
		q = "UPDATE " + o.t.table + " SET " + sets + "doc = ?::jsonb, version = version + 1, updated_at = ? " +
			"WHERE id = ? AND version = ? AND " + parentCond
		args = append(append(append([]any{}, vals...), doc, now, id, expected), parentArgs...)
	}
	n, err := o.s.exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if n == 1 {
		return expected + 1, nil
	}
	return 0, o.missed(ctx, op, id, parentArgs, expected)
}

// missed explains a write that matched nothing.
func (o *objects[T]) missed(ctx context.Context, op, id string, parentArgs []any, expected int64) error {
	if o.t.parentCol != "" {
		var ok bool
		if err := o.s.scan(ctx, "SELECT EXISTS (SELECT 1 FROM "+o.t.parentTable+" WHERE id = ?)", parentArgs, &ok); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if !ok {
			return fmt.Errorf("%s: %s %v: %w", op, o.kind.ParentKind, parentArgs[0], ports.ErrNotFound)
		}
	}
	var stored int64
	err := o.s.scan(ctx, "SELECT version FROM "+o.t.table+" WHERE id = ?", []any{id}, &stored)
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

// Delete implements ports.Objects in one transaction: lock the row FOR
// UPDATE at the expected version (children being written hold it FOR KEY
// SHARE, so they finish first or wait and then find it gone), refuse while
// a dependent exists, delete.
func (o *objects[T]) Delete(ctx context.Context, id string, expected int64) error {
	op := "delete " + o.kind.Name + " " + id
	if err := ports.CheckDelete(expected); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := o.s.db.InTx(ctx, func(ctx context.Context) error {
		var stored int64
		err := o.s.scan(ctx, "SELECT version FROM "+o.t.table+" WHERE id = ? FOR UPDATE", []any{id}, &stored)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ports.ErrNotFound
		case err != nil:
			return err
		case stored != expected:
			return fmt.Errorf("expected version %d, stored %d: %w", expected, stored, ports.ErrConflict)
		}
		for _, d := range o.t.dependents {
			var dep string
			err := o.s.scan(ctx, d.query, []any{id}, &dep)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("%s %s belongs to it: %w", d.what, dep, ports.ErrInUse)
		}
		_, err = o.s.exec(ctx, "DELETE FROM "+o.t.table+" WHERE id = ?", id)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
