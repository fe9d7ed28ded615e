package postgres

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// sqlTargetFacts reads everything a chain pass needs about one target in
// one statement (one snapshot): the target's objects and its system's
// variable sets, its decision with the
// release and version, the deployment's agent, its newest jobs (LIMIT $2;
// NULL is all) and the latest published revision of every policy in the
// catalog, the last two as JSON arrays.
const sqlTargetFacts = sqlTargetFactsSelect + `WHERE t.key = $1`

// sqlTargetFactsMany is sqlTargetFacts for the targets whose keys are in
// $1 (an array); the policies are read once for them all.
const sqlTargetFactsMany = sqlTargetFactsSelect + `WHERE t.key = ANY($1::text[])`

// sqlTargetFactsSelect is sqlTargetFacts without its WHERE clause.
const sqlTargetFactsSelect = `
SELECT t.key, s.doc AS s_doc,
	(SELECT coalesce(json_agg(vs.doc ORDER BY vs.id), '[]') FROM release_variable_sets vs WHERE vs.system_id = s.id) AS vs_docs,
	t.created_at, d.doc AS d_doc, e.doc AS e_doc, r.doc AS r_doc,
	s.version, s.updated_at, d.version, d.updated_at, e.version, e.updated_at, r.version, r.updated_at,
	ds.release_id AS ds_release, ds.reasons AS ds_reasons, ds.next_check_at AS ds_next, ds.updated_at AS ds_updated,
	rel.doc AS rel_doc, v.doc AS v_doc,
	a.doc AS a_doc, a.version AS a_version, a.updated_at AS a_updated,
	(SELECT coalesce(json_agg(json_build_object('doc', j.doc, 'version_id', j.version_id,
			'idempotency_key', j.idempotency_key, 'version', j.version, 'updated_at', j.updated_at)
			ORDER BY j.created_at DESC, j.id DESC), '[]')
		FROM (SELECT * FROM release_jobs j WHERE j.deployment_id = t.deployment_id AND j.target_key = t.key
			ORDER BY j.created_at DESC, j.id DESC LIMIT $2) j) AS jobs,
	(SELECT coalesce(json_agg(json_build_object('name', p.name, 'content', p.content, 'revision', p.number,
			'published_at', p.published_at) ORDER BY p.name), '[]')
		FROM (SELECT DISTINCT ON (c.name) c.name, c.content, c.number, c.published_at FROM catalog_revisions c
			WHERE c.kind = 'policy' AND c.lifecycle = 'published' ORDER BY c.name, c.number DESC) p) AS policies,
	(SELECT coalesce(json_agg(ps.doc ORDER BY ps.id), '[]')
		FROM release_policy_skips ps JOIN release_versions fv ON fv.id = ps.version_id
		WHERE ps.doc->>'rule_id' = '*' AND fv.deployment_id = t.deployment_id
			AND coalesce(ps.doc->>'environment_id', '') IN ('', t.environment_id)
			AND coalesce(ps.doc->>'resource_id', '') IN ('', t.resource_id)) AS forced
` + sqlTargetJoins + `LEFT JOIN release_versions v ON v.id = rel.version_id
LEFT JOIN release_job_agents a ON a.id = d.doc->>'job_agent_id'
`

// sqlTargetJoins are the target's rows both sqlTargetFactsSelect and
// sqlTargetStampMany read: its objects, its decision and its release.
const sqlTargetJoins = `
FROM release_targets t
JOIN release_systems s ON s.id = t.system_id
JOIN release_deployments d ON d.id = t.deployment_id
JOIN release_environments e ON e.id = t.environment_id
JOIN release_resources r ON r.id = t.resource_id
LEFT JOIN release_desired ds ON ds.target_key = t.key
LEFT JOIN release_releases rel ON rel.id = ds.release_id AND ds.release_id <> ''
`

// factsRow is one row of sqlTargetFacts.
type factsRow struct {
	Key       string
	SDoc      []byte
	VSDocs    []byte
	CreatedAt time.Time
	DDoc      []byte
	EDoc      []byte
	RDoc      []byte
	Objects   objectVersions
	DsRelease sql.NullString
	DsReasons []byte
	DsNext    sql.NullTime
	DsUpdated sql.NullTime
	RelDoc    []byte
	VDoc      []byte
	ADoc      []byte
	AVersion  sql.NullInt64
	AUpdated  sql.NullTime
	Jobs      []byte
	Policies  []byte
	Forced    []byte
}

// TargetFactsGet reads t's facts in one statement.
func (s *ReleaseStore) TargetFactsGet(ctx context.Context, t release.ReleaseTarget, jobLimit int) (ports.TargetFacts, error) {
	op := "get facts of target " + t.Key()
	var row factsRow
	err := s.scanFacts(ctx, t, limitArg(jobLimit), &row)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.TargetFacts{}, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	if err != nil {
		return ports.TargetFacts{}, fmt.Errorf("%s: %w", op, err)
	}
	f, err := row.facts(t, nil)
	if err != nil {
		return ports.TargetFacts{}, fmt.Errorf("%s: decode: %w", op, err)
	}
	return f, nil
}

// scanFacts runs sqlTargetFacts as a hot statement into row.
func (s *ReleaseStore) scanFacts(ctx context.Context, t release.ReleaseTarget, limit any, row *factsRow) error {
	return s.hotScan(ctx, sqlTargetFacts, []any{t.Key(), limit}, row.dest()...)
}

// dest lists the row's fields in the order of sqlTargetFactsSelect.
func (row *factsRow) dest() []any {
	return []any{&row.Key, &row.SDoc, &row.VSDocs, &row.CreatedAt, &row.DDoc, &row.EDoc, &row.RDoc,
		&row.Objects[0].Version, &row.Objects[0].UpdatedAt, &row.Objects[1].Version, &row.Objects[1].UpdatedAt,
		&row.Objects[2].Version, &row.Objects[2].UpdatedAt, &row.Objects[3].Version, &row.Objects[3].UpdatedAt,
		&row.DsRelease, &row.DsReasons, &row.DsNext, &row.DsUpdated, &row.RelDoc, &row.VDoc,
		&row.ADoc, &row.AVersion, &row.AUpdated, &row.Jobs, &row.Policies, &row.Forced}
}

// TargetFactsGetMany reads the facts of the stored targets among ts in one
// statement.
func (s *ReleaseStore) TargetFactsGetMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]ports.TargetFacts, error) {
	var prev factsPolicies // every row carries the same policies
	return byTarget(ctx, s, ts, "facts", sqlTargetFactsMany, jobLimit, func(rows *sql.Rows, byKey map[string]release.ReleaseTarget) (string, ports.TargetFacts, error) {
		var row factsRow
		if err := rows.Scan(row.dest()...); err != nil {
			return "", ports.TargetFacts{}, err
		}
		f, err := row.facts(byKey[row.Key], &prev)
		return row.Key, f, err
	})
}

// byTarget runs query (sqlTargetFactsMany, sqlTargetStampMany) on the
// keys of ts and the job limit, and scans each row to its target's what.
func byTarget[V any](ctx context.Context, s *ReleaseStore, ts []release.ReleaseTarget, what, query string, jobLimit int,
	scan func(*sql.Rows, map[string]release.ReleaseTarget) (string, V, error)) (map[release.ReleaseTarget]V, error) {
	out := make(map[release.ReleaseTarget]V, len(ts))
	if len(ts) == 0 {
		return out, nil
	}
	byKey, keys := targetKeys(ts)
	op := fmt.Sprintf("get %s of %d targets", what, len(keys))
	rows, err := s.db.hotQuery(ctx, query, keys, limitArg(jobLimit))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	for rows.Next() {
		key, v, err := scan(rows, byKey)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", op, key, err)
		}
		out[byKey[key]] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, rows.Close()
}

// facts decodes the row; prev holds what the previous row of the same
// statement decoded (nil: none), as every row carries the same policies.
func (r *factsRow) facts(t release.ReleaseTarget, prev *factsPolicies) (ports.TargetFacts, error) {
	f := ports.TargetFacts{Detail: ports.TargetDetail{Target: t, CreatedAt: r.CreatedAt.UTC()}}
	if err := errors.Join(json.Unmarshal(r.SDoc, &f.Detail.System), unmarshalSets(r.VSDocs, &f.Detail.VariableSets), json.Unmarshal(r.DDoc, &f.Detail.Deployment), json.Unmarshal(r.EDoc, &f.Detail.Environment),
		json.Unmarshal(r.RDoc, &f.Detail.Resource)); err != nil {
		return f, err
	}
	if r.DsRelease.Valid {
		d := desiredRow{ReleaseID: r.DsRelease.String, Reasons: r.DsReasons, NextCheckAt: r.DsNext, UpdatedAt: r.DsUpdated.Time}
		dr, err := d.decode(t)
		if err != nil {
			return f, err
		}
		f.Desired = &dr
	}
	if r.RelDoc != nil && r.VDoc != nil {
		var rel release.Release
		var v release.DeploymentVersion
		if err := errors.Join(json.Unmarshal(r.RelDoc, &rel), json.Unmarshal(r.VDoc, &v)); err != nil {
			return f, err
		}
		f.Release, f.Version = &rel, &v
	}
	if r.ADoc != nil {
		a, err := relStored[release.JobAgent](&docRow{Doc: r.ADoc, Version: r.AVersion.Int64, UpdatedAt: r.AUpdated.Time})
		if err != nil {
			return f, err
		}
		f.Agent = &a
	}
	var jobs []struct {
		Doc            json.RawMessage `json:"doc"`
		VersionID      string          `json:"version_id"`
		IdempotencyKey string          `json:"idempotency_key"`
		Version        int64           `json:"version"`
		UpdatedAt      time.Time       `json:"updated_at"`
	}
	if err := json.Unmarshal(r.Jobs, &jobs); err != nil {
		return f, fmt.Errorf("jobs: %w", err)
	}
	if len(jobs) > 0 {
		f.Jobs = make([]ports.JobRow, len(jobs))
	}
	for i := range jobs {
		j := &jobs[i]
		row, err := (&jobRowScan{Doc: j.Doc, VersionID: j.VersionID, IdempotencyKey: j.IdempotencyKey,
			Version: j.Version, UpdatedAt: j.UpdatedAt}).row()
		if err != nil {
			return f, err
		}
		f.Jobs[i] = row
	}
	pol, err := prev.decode(r.Policies)
	if err != nil {
		return f, err
	}
	st := stampRow{Created: r.CreatedAt, Objects: r.Objects, AgentVersion: r.AVersion, AgentUpdated: r.AUpdated,
		Jobs: make([]stampJob, len(f.Jobs)), Policies: pol.published}
	for i := range f.Jobs {
		st.Jobs[i] = stampJob{ID: f.Jobs[i].ID, Version: f.Jobs[i].Version}
	}
	f.Stamp = st.stamp()
	if f.Release != nil {
		f.Stamp.ReleaseID, f.Stamp.ReleaseCreatedAt = f.Release.ID, f.Release.CreatedAt
	}
	f.Policies = pol.enabledCopy()
	if err := json.Unmarshal(r.Forced, &f.Forced); err != nil {
		return f, fmt.Errorf("forced: %w", err)
	}
	if len(f.Forced) == 0 {
		f.Forced = nil
	}
	return f, nil
}

// factsPolicies is the decoding of a facts row's policies column, kept
// for the next row of the statement, which carries the same bytes.
type factsPolicies struct {
	raw []byte
	// published are the latest published revisions, as a stamp digests
	// them; enabled the enabled policies among them, in priority order.
	published []stampPolicy
	enabled   []ports.Stored[policy.Policy]
}

// decode decodes raw, a JSON array of published policy revisions; when p
// (nil: none) decoded the same bytes before, it is p, else p holds raw's
// decoding from now on.
func (p *factsPolicies) decode(raw []byte) (*factsPolicies, error) {
	if p != nil && p.raw != nil && bytes.Equal(p.raw, raw) {
		return p, nil
	}
	var revs []ports.Revision
	if err := json.Unmarshal(raw, &revs); err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	out := &factsPolicies{raw: raw, published: make([]stampPolicy, len(revs))}
	for i := range revs {
		out.published[i] = stampPolicy{Name: revs[i].Name, Revision: revs[i].Revision}
		st, err := ports.PolicyOf(revs[i])
		if err != nil {
			return nil, err
		}
		if st.Value.Enabled {
			out.enabled = append(out.enabled, st)
		}
	}
	ports.SortPolicies(out.enabled)
	if p != nil {
		*p = *out
	}
	return out, nil
}

// enabledCopy is a copy of the enabled policies a target's facts own.
func (p *factsPolicies) enabledCopy() []ports.Stored[policy.Policy] {
	out := slices.Clone(p.enabled)
	for i := range out {
		out[i].Value.Rules = slices.Clone(out[i].Value.Rules)
	}
	return out
}

// unmarshalSets decodes a JSON array of variable sets; an empty array is nil.
func unmarshalSets(b []byte, out *[]release.VariableSet) error {
	if err := json.Unmarshal(b, out); err != nil {
		return err
	}
	if len(*out) == 0 {
		*out = nil
	}
	return nil
}

// objectVersions are the versions of a target's system, deployment,
// environment and resource, in that order.
type objectVersions [4]struct {
	Version   int64
	UpdatedAt time.Time
}

// stampJob and stampPolicy are what a stamp digests of a job and of a
// policy's latest published revision.
type (
	stampJob struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}
	stampPolicy struct {
		Name     string `json:"name"`
		Revision int    `json:"revision"`
	}
)

// stampRow is what a target's ports.FactsStamp digests, read with its facts
// (sqlTargetFactsSelect) or alone (sqlTargetStampMany).
type stampRow struct {
	Created      time.Time
	Objects      objectVersions
	AgentVersion sql.NullInt64
	AgentUpdated sql.NullTime
	Jobs         []stampJob
	Policies     []stampPolicy
}

// stamp digests the row (ReleaseID and ReleaseCreatedAt are the caller's).
func (r *stampRow) stamp() ports.FactsStamp {
	parts := []any{r.Created}
	for _, o := range r.Objects {
		parts = append(parts, o.Version, o.UpdatedAt)
	}
	if r.AgentVersion.Valid {
		parts = append(parts, "agent", r.AgentVersion.Int64, r.AgentUpdated.Time)
	}
	parts = append(parts, "jobs")
	for _, j := range r.Jobs {
		parts = append(parts, j.ID, j.Version)
	}
	parts = append(parts, "policies")
	for _, p := range r.Policies {
		parts = append(parts, p.Name, p.Revision)
	}
	return ports.FactsStamp{Rest: ports.FactsDigest(parts...)}
}

// sqlTargetStampMany reads what the stamps of the targets whose keys are
// in $1 digest, with their newest $2 jobs (NULL: all): the columns of
// sqlTargetFactsSelect a stamp covers, without the documents.
const sqlTargetStampMany = `
SELECT t.key, t.created_at,
	s.version, s.updated_at, d.version, d.updated_at, e.version, e.updated_at, r.version, r.updated_at,
	a.version, a.updated_at, coalesce(ds.release_id, ''), rel.created_at,
	(SELECT coalesce(json_agg(json_build_object('id', j.id, 'version', j.version) ORDER BY j.created_at DESC, j.id DESC), '[]')
		FROM (SELECT j.id, j.version, j.created_at FROM release_jobs j WHERE j.deployment_id = t.deployment_id AND j.target_key = t.key
			ORDER BY j.created_at DESC, j.id DESC LIMIT $2) j) AS jobs,
	(SELECT coalesce(json_agg(json_build_object('name', p.name, 'revision', p.number) ORDER BY p.name), '[]')
		FROM (SELECT DISTINCT ON (c.name) c.name, c.number FROM catalog_revisions c
			WHERE c.kind = 'policy' AND c.lifecycle = 'published' ORDER BY c.name, c.number DESC) p) AS policies
` + sqlTargetJoins + `LEFT JOIN release_job_agents a ON a.id = d.doc->>'job_agent_id'
WHERE t.key = ANY($1::text[])`

// TargetStampMany reads the stamps of the stored targets among ts in one
// statement.
func (s *ReleaseStore) TargetStampMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]ports.FactsStamp, error) {
	return byTarget(ctx, s, ts, "stamps", sqlTargetStampMany, jobLimit, func(rows *sql.Rows, _ map[string]release.ReleaseTarget) (string, ports.FactsStamp, error) {
		var key, relID string
		var relCreated sql.NullTime
		var jobs, policies []byte
		var st stampRow
		o := &st.Objects
		if err := rows.Scan(&key, &st.Created, &o[0].Version, &o[0].UpdatedAt, &o[1].Version, &o[1].UpdatedAt,
			&o[2].Version, &o[2].UpdatedAt, &o[3].Version, &o[3].UpdatedAt, &st.AgentVersion, &st.AgentUpdated,
			&relID, &relCreated, &jobs, &policies); err != nil {
			return "", ports.FactsStamp{}, err
		}
		if err := errors.Join(json.Unmarshal(jobs, &st.Jobs), json.Unmarshal(policies, &st.Policies)); err != nil {
			return key, ports.FactsStamp{}, fmt.Errorf("decode: %w", err)
		}
		stamp := st.stamp()
		if relCreated.Valid {
			stamp.ReleaseID, stamp.ReleaseCreatedAt = relID, relCreated.Time.UTC()
		}
		return key, stamp, nil
	})
}

// targetKeys are the keys of ts, each once, in order, and the target of
// each.
func targetKeys(ts []release.ReleaseTarget) (map[string]release.ReleaseTarget, []string) {
	byKey := make(map[string]release.ReleaseTarget, len(ts))
	keys := make([]string, 0, len(ts))
	for _, t := range ts {
		if _, dup := byKey[t.Key()]; !dup {
			byKey[t.Key()] = t
			keys = append(keys, t.Key())
		}
	}
	return byKey, keys
}

// limitArg is a job limit as a LIMIT argument: NULL (no limit) when n is
// zero or less.
func limitArg(n int) any {
	if n > 0 {
		return n
	}
	return nil
}
