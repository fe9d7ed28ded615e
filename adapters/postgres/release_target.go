package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// targetScopeSQL renders a scope as a WHERE condition on release_targets
// (alias t) with its arguments.
func targetScopeSQL(sc ports.TargetScope) (string, []any) {
	conds := []string{"true"}
	var args []any
	for _, f := range []struct{ col, v string }{
		{"t.system_id", sc.SystemID}, {"t.deployment_id", sc.DeploymentID},
		{"t.environment_id", sc.EnvironmentID}, {"t.resource_id", sc.ResourceID},
	} {
		if f.v != "" {
			conds = append(conds, f.col+" = ?")
			args = append(args, f.v)
		}
	}
	return strings.Join(conds, " AND "), args
}

// sqlTargetsCheck finds the first target (by position) whose deployment,
// environment or resource is missing, whose deployment and environment are
// in different systems, or whose system is not the scope's (?3, when set).
const sqlTargetsCheck = `
SELECT t.i, d.id IS NOT NULL AS has_d, e.id IS NOT NULL AS has_e, r.id IS NOT NULL AS has_r,
	coalesce(d.system_id, '') AS d_sys, coalesce(e.system_id, '') AS e_sys
FROM unnest(?0::text[], ?1::text[], ?2::text[]) WITH ORDINALITY AS t(d, e, r, i)
LEFT JOIN release_deployments d ON d.id = t.d
LEFT JOIN release_environments e ON e.id = t.e
LEFT JOIN release_resources r ON r.id = t.r
WHERE d.id IS NULL OR e.id IS NULL OR r.id IS NULL OR d.system_id <> e.system_id
	OR (?3 <> '' AND d.system_id <> ?3)
ORDER BY t.i LIMIT 1`

// sqlTargetsUpsert inserts the targets (keys ?0, ids ?1..?3) with their
// deployment's system at ?4; a stored target whose deployment changed
// system is moved, and reported as not inserted.
const sqlTargetsUpsert = `
INSERT INTO release_targets AS rt (key, deployment_id, environment_id, resource_id, system_id, created_at)
SELECT t.k, t.d, t.e, t.r, d.system_id, ?4
FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::text[]) AS t(k, d, e, r)
JOIN release_deployments d ON d.id = t.d
ORDER BY t.k
ON CONFLICT (key) DO UPDATE SET system_id = excluded.system_id WHERE rt.system_id <> excluded.system_id
RETURNING rt.deployment_id, rt.environment_id, rt.resource_id, (xmax = 0) AS inserted`

// targetRow is a target's ids.
type targetRow struct {
	DeploymentID  string `bun:"deployment_id"`
	EnvironmentID string `bun:"environment_id"`
	ResourceID    string `bun:"resource_id"`
	Inserted      bool   `bun:"inserted"`
}

func (r *targetRow) target() release.ReleaseTarget {
	return release.ReleaseTarget{DeploymentID: r.DeploymentID, EnvironmentID: r.EnvironmentID, ResourceID: r.ResourceID}
}

// TargetsReplace checks every target's references in one query, deletes the
// scope's targets that are not wanted and upserts the wanted ones, in one
// transaction.
func (s *ReleaseStore) TargetsReplace(ctx context.Context, p ports.TargetsReplaceParams) (ports.TargetsDiff, error) {
	const op = "replace targets"
	if err := ports.ValidateTargetsReplace(p); err != nil {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, err)
	}
	n := len(p.Targets)
	keys, ds, es, rs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, t := range p.Targets {
		keys[i], ds[i], es[i], rs[i] = t.Key(), t.DeploymentID, t.EnvironmentID, t.ResourceID
	}
	var diff ports.TargetsDiff
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if n > 0 {
			// Hold the referenced rows, so a concurrent delete of one waits
			// and then sees its targets (ports.ObjectStore).
			for _, l := range []struct {
				table string
				ids   []string
			}{{"release_deployments", ds}, {"release_environments", es}, {"release_resources", rs}} {
				if _, err := s.exec(ctx, "SELECT 1 FROM "+l.table+" WHERE id = ANY(?::text[]) FOR KEY SHARE", pgdialect.Array(l.ids)); err != nil {
					return err
				}
			}
		}
		if err := s.targetsCheck(ctx, p, ds, es, rs); err != nil {
			return err
		}
		where, args := targetScopeSQL(p.Scope)
		var removed []targetRow
		err := s.scan(ctx, `DELETE FROM release_targets t WHERE `+where+
			` AND NOT EXISTS (SELECT 1 FROM unnest(?::text[]) AS k(key) WHERE k.key = t.key)
			RETURNING t.deployment_id, t.environment_id, t.resource_id`,
			append(args, pgdialect.Array(keys)), &removed)
		if err != nil {
			return err
		}
		var upserted []targetRow
		if n > 0 {
			err = s.scan(ctx, sqlTargetsUpsert, []any{pgdialect.Array(keys), pgdialect.Array(ds), pgdialect.Array(es), pgdialect.Array(rs), s.now()}, &upserted)
			if err != nil {
				return err
			}
		}
		for i := range removed {
			diff.Removed = append(diff.Removed, removed[i].target())
		}
		for i := range upserted {
			if upserted[i].Inserted {
				diff.Added = append(diff.Added, upserted[i].target())
			}
		}
		return nil
	})
	if err != nil {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, err)
	}
	relSortTargets(diff.Added)
	relSortTargets(diff.Removed)
	return diff, nil
}

// targetsCheck refuses targets with missing or disagreeing references, in
// the memory adapter's order.
func (s *ReleaseStore) targetsCheck(ctx context.Context, p ports.TargetsReplaceParams, ds, es, rs []string) error {
	if len(ds) == 0 {
		return nil
	}
	var bad []struct {
		I    int    `bun:"i"`
		HasD bool   `bun:"has_d"`
		HasE bool   `bun:"has_e"`
		HasR bool   `bun:"has_r"`
		DSys string `bun:"d_sys"`
		ESys string `bun:"e_sys"`
	}
	if err := s.scan(ctx, sqlTargetsCheck, []any{pgdialect.Array(ds), pgdialect.Array(es), pgdialect.Array(rs), p.Scope.SystemID}, &bad); err != nil {
		return err
	}
	if len(bad) == 0 {
		return nil
	}
	b := bad[0]
	i := b.I - 1
	t := p.Targets[i]
	path := release.Index("targets", i)
	switch {
	case !b.HasD:
		return fmt.Errorf("%s: deployment %s: %w", path, t.DeploymentID, ports.ErrNotFound)
	case !b.HasE:
		return fmt.Errorf("%s: environment %s: %w", path, t.EnvironmentID, ports.ErrNotFound)
	case !b.HasR:
		return fmt.Errorf("%s: resource %s: %w", path, t.ResourceID, ports.ErrNotFound)
	case b.DSys != b.ESys:
		return fmt.Errorf("%s: %w", path, release.Invalid("environment_id", "environment "+t.EnvironmentID+" is in system "+b.ESys+
			", deployment "+t.DeploymentID+" in "+b.DSys))
	}
	return release.Invalid(path, "target "+t.Key()+" lies outside the scope")
}

// relSortTargets sorts targets by key.
func relSortTargets(ts []release.ReleaseTarget) {
	slices.SortFunc(ts, func(a, b release.ReleaseTarget) int { return strings.Compare(a.Key(), b.Key()) })
}

// TargetGet reads a target joined with its system, deployment,
// environment and resource, and its system's variable sets.
func (s *ReleaseStore) TargetGet(ctx context.Context, t release.ReleaseTarget) (ports.TargetDetail, error) {
	var row struct {
		SDoc      []byte    `bun:"s_doc"`
		VSDocs    []byte    `bun:"vs_docs"`
		CreatedAt time.Time `bun:"created_at"`
		DDoc      []byte    `bun:"d_doc"`
		EDoc      []byte    `bun:"e_doc"`
		RDoc      []byte    `bun:"r_doc"`
	}
	err := s.scan(ctx, `SELECT s.doc AS s_doc, t.created_at, d.doc AS d_doc, e.doc AS e_doc, r.doc AS r_doc,
		(SELECT coalesce(json_agg(vs.doc ORDER BY vs.id), '[]') FROM release_variable_sets vs WHERE vs.system_id = s.id) AS vs_docs
		FROM release_targets t
		JOIN release_systems s ON s.id = t.system_id
		JOIN release_deployments d ON d.id = t.deployment_id
		JOIN release_environments e ON e.id = t.environment_id
		JOIN release_resources r ON r.id = t.resource_id
		WHERE t.key = ?`, []any{t.Key()}, &row)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.TargetDetail{}, fmt.Errorf("get target %s: %w", t, ports.ErrNotFound)
	}
	if err != nil {
		return ports.TargetDetail{}, fmt.Errorf("get target %s: %w", t, err)
	}
	out := ports.TargetDetail{Target: t, CreatedAt: row.CreatedAt.UTC()}
	if err := errors.Join(json.Unmarshal(row.SDoc, &out.System), unmarshalSets(row.VSDocs, &out.VariableSets), json.Unmarshal(row.DDoc, &out.Deployment), json.Unmarshal(row.EDoc, &out.Environment),
		json.Unmarshal(row.RDoc, &out.Resource)); err != nil {
		return ports.TargetDetail{}, fmt.Errorf("get target %s: decode: %w", t, err)
	}
	return out, nil
}

// TargetList lists the targets of a scope in key order from the scope's
// index.
func (s *ReleaseStore) TargetList(ctx context.Context, p ports.TargetListParams) ([]release.ReleaseTarget, error) {
	where, args := targetScopeSQL(p.Scope)
	q := `SELECT t.deployment_id, t.environment_id, t.resource_id FROM release_targets t WHERE ` + where + ` AND t.key > ? ORDER BY t.key`
	if p.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", p.Limit)
	}
	var rows []targetRow
	if err := s.scan(ctx, q, append(args, p.AfterKey), &rows); err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]release.ReleaseTarget, len(rows))
	for i := range rows {
		out[i] = rows[i].target()
	}
	return out, nil
}

// sqlScopeTargets reads a scope's generation (?0 deployment, ?1
// environment) and, when it is not ?2, its targets by key, in one
// statement: one snapshot, so the list is the generation's.
const sqlScopeTargets = `
SELECT g.generation, t.resource_id
FROM (SELECT coalesce((SELECT s.generation FROM release_progression_scopes s
	WHERE s.deployment_id = ?0 AND s.environment_id = ?1), 0) AS generation) g
LEFT JOIN LATERAL (SELECT t.key, t.resource_id FROM release_targets t
	WHERE t.deployment_id = ?0 AND t.environment_id = ?1 AND g.generation <> ?2) t ON true
ORDER BY t.key`

// ScopeTargets reads the scope's generation (kept by the triggers of
// migration 0032) and, when it is not p.Known, its targets, in one
// statement.
func (s *ReleaseStore) ScopeTargets(ctx context.Context, p ports.ScopeTargetsParams) (ports.ScopeTargets, error) {
	if err := p.Validate(); err != nil {
		return ports.ScopeTargets{}, fmt.Errorf("scope targets: %w", err)
	}
	var rows []struct {
		Generation int64   `bun:"generation"`
		ResourceID *string `bun:"resource_id"`
	}
	if err := s.scan(ctx, sqlScopeTargets, []any{p.DeploymentID, p.EnvironmentID, p.Known}, &rows); err != nil {
		return ports.ScopeTargets{}, fmt.Errorf("scope targets of %s in %s: %w", p.DeploymentID, p.EnvironmentID, err)
	}
	out := ports.ScopeTargets{Generation: rows[0].Generation, Changed: rows[0].Generation != p.Known}
	if !out.Changed || rows[0].ResourceID == nil {
		return out, nil
	}
	out.Targets = make([]release.ReleaseTarget, len(rows))
	for i := range rows {
		out.Targets[i] = release.ReleaseTarget{DeploymentID: p.DeploymentID, EnvironmentID: p.EnvironmentID, ResourceID: *rows[i].ResourceID}
	}
	return out, nil
}
