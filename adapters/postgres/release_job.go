package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// jobColumns are the columns a JobRow is read from.
const jobColumns = `j.doc, j.version_id, j.idempotency_key, j.version, j.updated_at`

// jobRowScan is one row of jobColumns.
type jobRowScan struct {
	Doc            []byte    `bun:"doc"`
	VersionID      string    `bun:"version_id"`
	IdempotencyKey string    `bun:"idempotency_key"`
	Version        int64     `bun:"version"`
	UpdatedAt      time.Time `bun:"updated_at"`
}

// row decodes the scanned row.
func (r *jobRowScan) row() (ports.JobRow, error) {
	var j release.Job
	if err := json.Unmarshal(r.Doc, &j); err != nil {
		return ports.JobRow{}, fmt.Errorf("decode job: %w", err)
	}
	return ports.JobRow{Job: j, VersionID: r.VersionID, IdempotencyKey: r.IdempotencyKey,
		Version: r.Version, UpdatedAt: r.UpdatedAt.UTC()}, nil
}

// relJob normalises a job's times to what Postgres keeps and encodes it.
func relJob(j release.Job) (release.Job, string, error) {
	j.CreatedAt = ports.StoredTime(j.CreatedAt)
	j.StartedAt = ports.StoredTime(j.StartedAt)
	j.CompletedAt = ports.StoredTime(j.CompletedAt)
	j.LeaseUntil = ports.StoredTime(j.LeaseUntil)
	if j.Take != nil {
		take := *j.Take
		take.TakenAt = ports.StoredTime(take.TakenAt)
		j.Take = &take
	}
	j.Measurements = ports.StoredMeasurements(j.Measurements)
	doc, err := relEncode("dispatch_context", &j)
	if err != nil {
		return j, "", err
	}
	// Read back what was encoded, so maps hold what a later read returns.
	var out release.Job
	if err := json.Unmarshal([]byte(doc), &out); err != nil {
		return j, "", release.Invalid("dispatch_context", err.Error())
	}
	return out, doc, nil
}

// queryJobs runs a query selecting jobColumns and decodes every row.
func (s *ReleaseStore) queryJobs(ctx context.Context, q string, args ...any) ([]ports.JobRow, error) {
	var rows []jobRowScan
	if err := s.db.idb(ctx).NewRaw(q, args...).Scan(ctx, &rows); err != nil {
		return nil, err
	}
	out := make([]ports.JobRow, 0, len(rows))
	for i := range rows {
		j, err := rows[i].row()
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// sqlJobCreate inserts a job while its release is stored for the job's
// target, copying the target's ids and the release's version; a taken
// idempotency key or id inserts nothing.
const sqlJobCreate = `
INSERT INTO release_jobs (id, idempotency_key, release_id, target_key, deployment_id, environment_id, resource_id,
	version_id, job_agent_id, external_id, status, active, created_at, doc, version, updated_at)
SELECT ?0::text, ?1::text, r.id, r.target_key, ?2::text, ?3::text, ?4::text, r.version_id, ?5::text, ?6::text,
	?7::text, ?8::boolean, ?9::timestamptz, ?10::jsonb, 1, ?11::timestamptz
FROM release_releases r WHERE r.id = ?12 AND r.target_key = ?13
ON CONFLICT DO NOTHING
RETURNING version_id`

// JobCreate creates a job once per idempotency key, in one statement on its
// normal path; a create that inserted nothing is explained by reads.
func (s *ReleaseStore) JobCreate(ctx context.Context, p ports.JobCreateParams) (ports.JobRow, bool, error) {
	op := "create job " + p.Job.ID
	if err := ports.ValidateJobCreate(p); err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	job, doc, err := relJob(p.Job)
	if err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	t, _ := release.ParseTargetKey(job.TargetKey) // checked by Validate
	now := s.now()
	var versionID string
	insert := func(ctx context.Context) error {
		return s.hotScan(ctx, sqlJobCreate, []any{job.ID, p.IdempotencyKey, t.DeploymentID, t.EnvironmentID, t.ResourceID,
			job.JobAgentID, job.ExternalID, job.Status, job.Status.IsActive(), job.CreatedAt, doc, now,
			job.ReleaseID, job.TargetKey}, &versionID)
	}
	if limit := p.MaxActiveInEnvironment; limit > 0 && job.Status.IsActive() {
		err = s.db.InTx(ctx, func(ctx context.Context) error { return s.createCapped(ctx, t, p.IdempotencyKey, limit, insert) })
	} else {
		err = insert(ctx)
	}
	if errors.Is(err, ports.ErrLimitReached) {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	if err == nil {
		if job.Status == release.JobPending {
			s.announcePending(ctx, job.JobAgentID)
		}
		return ports.JobRow{Job: job, VersionID: versionID, IdempotencyKey: p.IdempotencyKey, Version: 1, UpdatedAt: now}, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	// Nothing inserted: the key or the id is taken, or the release is
	// missing or for another target.
	existing, err := s.queryJobs(ctx, `SELECT `+jobColumns+` FROM release_jobs j WHERE j.idempotency_key = ?`, p.IdempotencyKey)
	if err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	if len(existing) == 1 {
		cur := existing[0]
		if cur.ReleaseID != job.ReleaseID {
			return ports.JobRow{}, false, fmt.Errorf("%s: idempotency key %s belongs to job %s of release %s: %w",
				op, p.IdempotencyKey, cur.ID, cur.ReleaseID, ports.ErrConflict)
		}
		return cur, false, nil
	}
	var target string
	err = s.scan(ctx, `SELECT target_key FROM release_releases WHERE id = ?`, []any{job.ReleaseID}, &target)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ports.JobRow{}, false, fmt.Errorf("%s: release %s: %w", op, job.ReleaseID, ports.ErrNotFound)
	case err != nil:
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	case target != job.TargetKey:
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, release.Invalid("target_key", "release "+job.ReleaseID+" is for target "+target))
	}
	return ports.JobRow{}, false, fmt.Errorf("%s: id already taken: %w", op, ports.ErrConflict)
}

// sqlJobCreateMany is sqlJobCreate for many jobs, inserted in the call's
// order; it returns the id and release version of each job it inserted.
const sqlJobCreateMany = `
INSERT INTO release_jobs (id, idempotency_key, release_id, target_key, deployment_id, environment_id, resource_id,
	version_id, job_agent_id, external_id, status, active, created_at, doc, version, updated_at)
SELECT p.id, p.key, r.id, r.target_key, p.deployment_id, p.environment_id, p.resource_id, r.version_id, p.agent,
	p.external_id, p.status, p.active, p.created_at, p.doc::jsonb, 1, ?13::timestamptz
FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::text[], ?4::text[], ?5::text[], ?6::text[], ?7::text[],
	?8::boolean[], ?9::timestamptz[], ?10::text[], ?11::text[], ?12::text[]) WITH ORDINALITY
	AS p(id, key, deployment_id, environment_id, resource_id, agent, external_id, status, active, created_at, doc,
		release_id, target_key, ord)
JOIN release_releases r ON r.id = p.release_id AND r.target_key = p.target_key
ORDER BY p.ord
ON CONFLICT DO NOTHING
RETURNING id, version_id`

// JobCreateMany implements ports.Jobs: the valid uncapped creates of a
// call in one statement (sqlJobCreateMany); a create it did not insert (a
// taken key or id, a missing release) goes through JobCreate, which
// returns the job already created or explains. A call with a capped
// create, or naming one id or key twice, runs one create at a time.
func (s *ReleaseStore) JobCreateMany(ctx context.Context, creates []ports.JobCreateParams) []ports.JobCreated {
	if len(creates) < 2 {
		return ports.JobCreateEach(ctx, s, creates)
	}
	out := make([]ports.JobCreated, len(creates))
	var (
		ids, keys, deps, envs, ress, agents, exts, statuses, docs, rels, targets []string
		actives                                                                  []bool
		created                                                                  []time.Time
		idx                                                                      []int
	)
	jobs := make([]release.Job, len(creates))
	seen := make(map[string]bool, 2*len(creates))
	for i, p := range creates {
		if p.MaxActiveInEnvironment > 0 && p.Job.Status.IsActive() {
			return ports.JobCreateEach(ctx, s, creates)
		}
		if seen["i/"+p.Job.ID] || seen["k/"+p.IdempotencyKey] {
			return ports.JobCreateEach(ctx, s, creates)
		}
		seen["i/"+p.Job.ID], seen["k/"+p.IdempotencyKey] = true, true
		if ports.ValidateJobCreate(p) != nil {
			continue
		}
		job, doc, err := relJob(p.Job)
		if err != nil {
			continue
		}
		t, _ := release.ParseTargetKey(job.TargetKey) // checked by Validate
		jobs[i] = job
		ids, keys, deps, envs, ress = append(ids, job.ID), append(keys, p.IdempotencyKey), append(deps, t.DeploymentID),
			append(envs, t.EnvironmentID), append(ress, t.ResourceID)
		agents, exts, statuses, actives = append(agents, job.JobAgentID), append(exts, job.ExternalID),
			append(statuses, string(job.Status)), append(actives, job.Status.IsActive())
		created, docs, rels, targets = append(created, job.CreatedAt), append(docs, doc), append(rels, job.ReleaseID),
			append(targets, job.TargetKey)
		idx = append(idx, i)
	}
	done := make([]bool, len(creates))
	if len(idx) > 0 {
		now := s.now()
		at := make(map[string]int, len(idx))
		for n, i := range idx {
			at[ids[n]] = i
		}
		rows, err := s.db.hotQuery(ctx, hotText(sqlJobCreateMany), ids, keys, deps, envs, ress, agents, exts, statuses,
			actives, created, docs, rels, targets, now)
		if err == nil {
			for rows.Next() {
				var id, versionID string
				if err = rows.Scan(&id, &versionID); err != nil {
					break
				}
				i, ok := at[id]
				if !ok {
					err = fmt.Errorf("the insert returned job %s, which the call did not create", id)
					break
				}
				p := creates[i]
				out[i] = ports.JobCreated{Created: true, Row: ports.JobRow{Job: jobs[i], VersionID: versionID,
					IdempotencyKey: p.IdempotencyKey, Version: 1, UpdatedAt: now}}
				done[i] = true
			}
			if err == nil {
				err = rows.Err()
			}
			rows.Close()
		}
		if err != nil {
			for i, p := range creates {
				out[i] = ports.JobCreated{Err: fmt.Errorf("create job %s: %w", p.Job.ID, err)}
			}
			return out
		}
		announced := make(map[string]bool)
		for i := range creates {
			if j := &jobs[i]; done[i] && j.Status == release.JobPending && !announced[j.JobAgentID] {
				announced[j.JobAgentID] = true
				s.announcePending(ctx, j.JobAgentID)
			}
		}
	}
	for i, p := range creates {
		if !done[i] {
			out[i].Row, out[i].Created, out[i].Err = s.JobCreate(ctx, p)
		}
	}
	return out
}

// announcePending wakes the takers of agent's pull jobs in every process
// once ctx's transaction, if any, has committed the pending job created
// in it.
func (s *ReleaseStore) announcePending(ctx context.Context, agent string) {
	s.db.afterCommit(ctx, func() { s.db.pub.publish(jobsChannel, agent) })
}

// createCapped runs insert, inside the caller's transaction, only while
// fewer than limit jobs of t's deployment are active in t's environment.
// A transaction-scoped advisory lock per (deployment, environment)
// serializes capped creates there, so the count cannot go stale before the
// insert; a job already created with key is left to insert's conflict path.
func (s *ReleaseStore) createCapped(ctx context.Context, t release.ReleaseTarget, key string, limit int, insert func(context.Context) error) error {
	if _, err := s.db.idb(ctx).ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('release-env-cap'), hashtext(?0))`,
		t.DeploymentID+"/"+t.EnvironmentID); err != nil {
		return err
	}
	var n int
	var exists bool
	if err := s.scan(ctx, `SELECT count(*) FILTER (WHERE active),
		coalesce(bool_or(idempotency_key = ?0), false) FROM release_jobs
		WHERE deployment_id = ?1 AND environment_id = ?2 AND (active OR idempotency_key = ?0)`,
		[]any{key, t.DeploymentID, t.EnvironmentID}, &n, &exists); err != nil {
		return err
	}
	if n >= limit && !exists {
		return fmt.Errorf("%d active jobs of deployment %s in environment %s (limit %d): %w",
			n, t.DeploymentID, t.EnvironmentID, limit, ports.ErrLimitReached)
	}
	return insert(ctx)
}

// sqlJobUpdate writes a job at version ?0 whose release, target and creation
// time are unchanged and whose status may move to the new one (?1: the
// statuses allowed before it).
const sqlJobUpdate = `
UPDATE release_jobs SET job_agent_id = ?2, external_id = ?3, status = ?4, active = ?5, doc = ?6::jsonb,
	version = version + 1, updated_at = ?7
WHERE id = ?8 AND version = ?0 AND status = ANY(?1::text[])
	AND release_id = ?9 AND target_key = ?10 AND (doc->>'created_at')::timestamptz = ?11
RETURNING version`

// JobUpdate writes a job by compare-and-swap in one statement; a write that
// matched nothing is explained by a read.
func (s *ReleaseStore) JobUpdate(ctx context.Context, job release.Job, expected int64) (int64, error) {
	op := "update job " + job.ID
	if err := job.Validate(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	next, doc, err := relJob(job)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	into := ports.JobStatusesInto(next.Status)
	from := make([]string, len(into))
	for i, st := range into {
		from[i] = string(st)
	}
	var version int64
	err = s.hotScan(ctx, sqlJobUpdate, []any{expected, from, next.JobAgentID, next.ExternalID, next.Status,
		next.Status.IsActive(), doc, s.now(), next.ID, next.ReleaseID, next.TargetKey, next.CreatedAt}, &version)
	if err == nil {
		return version, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	cur, err := s.JobGet(ctx, job.ID)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, errors.Unwrap(err))
	}
	if cur.Version != expected {
		return 0, fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, cur.Version, ports.ErrConflict)
	}
	if err := ports.CheckJobUpdate(&cur.Job, &next); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	// The row matched on a re-read: it changed between the two statements.
	return 0, fmt.Errorf("%s: changed concurrently: %w", op, ports.ErrConflict)
}

// sqlJobUpdateMany is sqlJobUpdate for many jobs of distinct ids: ?0..?10
// are the arrays id, expected version, the statuses allowed before (each
// comma-joined), job agent, external id, status, active, doc, release,
// target and creation time; ?11 is now. It returns the id and new version
// of each row written.
const sqlJobUpdateMany = `
UPDATE release_jobs j SET job_agent_id = r.agent, external_id = r.ext, status = r.status, active = r.active,
	doc = r.doc::jsonb, version = j.version + 1, updated_at = ?11
FROM unnest(?0::text[], ?1::bigint[], ?2::text[], ?3::text[], ?4::text[], ?5::text[], ?6::boolean[], ?7::text[],
	?8::text[], ?9::text[], ?10::timestamptz[]) AS r(id, expected, from_statuses, agent, ext, status, active, doc,
	release_id, target_key, created_at)
WHERE j.id = r.id AND j.version = r.expected AND j.status = ANY(string_to_array(r.from_statuses, ','))
	AND j.release_id = r.release_id AND j.target_key = r.target_key AND (j.doc->>'created_at')::timestamptz = r.created_at
RETURNING j.id, j.version`

// JobUpdateMany writes the updates of distinct valid jobs in one
// statement; an update it did not write (and every update of a call that
// names a job twice) goes through JobUpdate, which writes or explains it.
func (s *ReleaseStore) JobUpdateMany(ctx context.Context, updates []ports.JobUpdateParams) ([]int64, []error) {
	versions, errs := make([]int64, len(updates)), make([]error, len(updates))
	done := make([]bool, len(updates))
	byID := make(map[string]int, len(updates))
	var (
		ids, from, agents, exts, statuses, docs, rels, targets []string
		expected                                               []int64
		actives                                                []bool
		created                                                []time.Time
	)
	for i, u := range updates {
		if _, dup := byID[u.Job.ID]; dup {
			byID = nil // one job twice: each in turn
			break
		}
		byID[u.Job.ID] = i
		if u.Job.Validate() != nil {
			continue // JobUpdate says why
		}
		next, doc, err := relJob(u.Job)
		if err != nil {
			continue
		}
		into := ports.JobStatusesInto(next.Status)
		names := make([]string, len(into))
		for k, st := range into {
			names[k] = string(st)
		}
		ids, expected, from = append(ids, next.ID), append(expected, u.ExpectedVersion), append(from, strings.Join(names, ","))
		agents, exts, statuses = append(agents, next.JobAgentID), append(exts, next.ExternalID), append(statuses, string(next.Status))
		actives, docs, rels = append(actives, next.Status.IsActive()), append(docs, doc), append(rels, next.ReleaseID)
		targets, created = append(targets, next.TargetKey), append(created, next.CreatedAt)
	}
	if byID != nil && len(ids) > 0 {
		rows, err := s.db.hotQuery(ctx, hotText(sqlJobUpdateMany), ids, expected, from, agents, exts, statuses, actives, docs,
			rels, targets, created, s.now())
		if err == nil {
			for rows.Next() {
				var id string
				var v int64
				if err = rows.Scan(&id, &v); err != nil {
					break
				}
				i := byID[id]
				versions[i], done[i] = v, true
			}
			if err == nil {
				err = rows.Err()
			}
			rows.Close()
		}
		if err != nil {
			for i := range updates {
				errs[i] = fmt.Errorf("update job %s: %w", updates[i].Job.ID, err)
			}
			return make([]int64, len(updates)), errs
		}
	}
	for i, u := range updates {
		if !done[i] {
			versions[i], errs[i] = s.JobUpdate(ctx, u.Job, u.ExpectedVersion)
		}
	}
	return versions, errs
}

// JobGet reads one job.
func (s *ReleaseStore) JobGet(ctx context.Context, id string) (ports.JobRow, error) {
	rows, err := s.queryJobs(ctx, `SELECT `+jobColumns+` FROM release_jobs j WHERE j.id = ?`, id)
	if err != nil {
		return ports.JobRow{}, fmt.Errorf("get job %s: %w", id, err)
	}
	if len(rows) == 0 {
		return ports.JobRow{}, fmt.Errorf("get job %s: %w", id, ports.ErrNotFound)
	}
	return rows[0], nil
}

// JobByExternalID reads the newest job the agent knows by externalID.
func (s *ReleaseStore) JobByExternalID(ctx context.Context, agentID, externalID string) (ports.JobRow, error) {
	op := "get job by external id " + externalID
	if externalID == "" {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, release.Invalid("external_id", "is required"))
	}
	rows, err := s.queryJobs(ctx, `SELECT `+jobColumns+` FROM release_jobs j
		WHERE j.job_agent_id = ? AND j.external_id = ? ORDER BY j.created_at DESC, j.id DESC LIMIT 1`, agentID, externalID)
	if err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	if len(rows) == 0 {
		return ports.JobRow{}, fmt.Errorf("%s of agent %s: %w", op, agentID, ports.ErrNotFound)
	}
	return rows[0], nil
}

// JobsByTarget lists the target's jobs newest first, at most limit.
func (s *ReleaseStore) JobsByTarget(ctx context.Context, t release.ReleaseTarget, limit int) ([]ports.JobRow, error) {
	q := `SELECT ` + jobColumns + ` FROM release_jobs j WHERE j.deployment_id = ? AND j.target_key = ?
		ORDER BY j.created_at DESC, j.id DESC`
	args := []any{t.DeploymentID, t.Key()}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.queryJobs(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", t, err)
	}
	return rows, nil
}

// JobList lists the jobs matching p newest first, one keyset page. Only
// the filters given are in the statement, so the planner reads the
// narrowest index in (created_at desc, id desc) order: one job agent's
// or one deployment's (migration 0013), else all jobs', filtering along.
func (s *ReleaseStore) JobList(ctx context.Context, p ports.JobListParams) ([]ports.JobRow, error) {
	if err := ports.ValidateJobList(&p); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	q, args := jobListSQL(&p)
	rows, err := s.queryJobs(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return rows, nil
}

// jobListSQL is JobList's statement for p: only the filters given, so the
// planner picks the narrowest index (TestJobListPlans checks its plans).
func jobListSQL(p *ports.JobListParams) (string, []any) {
	q := `SELECT ` + jobColumns + ` FROM release_jobs j WHERE true`
	var args []any
	for _, f := range []struct{ col, v string }{{"j.job_agent_id", p.JobAgentID}, {"j.deployment_id", p.DeploymentID},
		{"j.environment_id", p.EnvironmentID}, {"j.resource_id", p.ResourceID}, {"j.version_id", p.VersionID}} {
		if f.v != "" {
			q += ` AND ` + f.col + ` = ?`
			args = append(args, f.v)
		}
	}
	if len(p.Statuses) > 0 {
		statuses := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			statuses[i] = string(st)
		}
		q += ` AND j.status = ANY(?::text[])`
		args = append(args, pgdialect.Array(statuses))
	}
	if p.WorkspaceID != "" {
		q += ` AND j.deployment_id IN (SELECT d.id FROM release_deployments d
			JOIN release_systems sys ON sys.id = d.system_id WHERE sys.workspace_id = ?)`
		args = append(args, p.WorkspaceID)
	}
	if p.After != nil {
		q += ` AND (j.created_at, j.id) < (?::timestamptz, ?::text)`
		args = append(args, p.After.CreatedAt, p.After.ID)
	}
	q += ` ORDER BY j.created_at DESC, j.id DESC LIMIT ?`
	args = append(args, ports.VersionPageSize(p.Limit))
	return q, args
}

// JobsActiveByTarget lists the target's active jobs, newest first.
func (s *ReleaseStore) JobsActiveByTarget(ctx context.Context, t release.ReleaseTarget) ([]ports.JobRow, error) {
	rows, err := s.queryJobs(ctx, `SELECT `+jobColumns+` FROM release_jobs j
		WHERE j.deployment_id = ? AND j.environment_id = ? AND j.target_key = ? AND j.active
		ORDER BY j.created_at DESC, j.id DESC`, t.DeploymentID, t.EnvironmentID, t.Key())
	if err != nil {
		return nil, fmt.Errorf("list active jobs of %s: %w", t, err)
	}
	return rows, nil
}

// JobsActiveCount counts the active jobs of the target and of its
// deployment's environment in one read of the active index.
func (s *ReleaseStore) JobsActiveCount(ctx context.Context, t release.ReleaseTarget) (ports.JobActiveCounts, error) {
	var c ports.JobActiveCounts
	err := s.scan(ctx, `SELECT count(*) FILTER (WHERE target_key = ?0), count(*) FROM release_jobs
		WHERE deployment_id = ?1 AND environment_id = ?2 AND active`, []any{t.Key(), t.DeploymentID, t.EnvironmentID},
		&c.Target, &c.Environment)
	if err != nil {
		return ports.JobActiveCounts{}, fmt.Errorf("count active jobs of %s: %w", t, err)
	}
	return c, nil
}

// JobsLatest returns the newest matching job of each target, in key order,
// reading the index of the narrowest filter given.
func (s *ReleaseStore) JobsLatest(ctx context.Context, p ports.JobsLatestParams) ([]ports.JobRow, error) {
	if err := ports.ValidateJobsLatest(p); err != nil {
		return nil, fmt.Errorf("latest jobs: %w", err)
	}
	statuses := make([]string, len(p.Statuses))
	for i, st := range p.Statuses {
		statuses[i] = string(st)
	}
	rows, err := s.queryJobs(ctx, `SELECT DISTINCT ON (j.target_key) `+jobColumns+` FROM release_jobs j
		WHERE (?0 = '' OR j.deployment_id = ?0) AND (?1 = '' OR j.environment_id = ?1)
			AND (?2 = '' OR j.resource_id = ?2) AND (?3 = '' OR j.version_id = ?3)
			AND (cardinality(?4::text[]) = 0 OR j.status = ANY(?4::text[]))
		ORDER BY j.target_key, j.created_at DESC, j.id DESC`,
		p.DeploymentID, p.EnvironmentID, p.ResourceID, p.VersionID, pgdialect.Array(statuses))
	if err != nil {
		return nil, fmt.Errorf("latest jobs: %w", err)
	}
	return rows, nil
}

// sqlTargetJobState reads a target's newest active job and newest
// successful job, each with its version's document.
const sqlTargetJobState = `
SELECT k.which, ` + jobColumns + `, v.doc AS vdoc FROM (VALUES ('active'), ('successful')) AS k(which)
CROSS JOIN LATERAL (
	SELECT * FROM release_jobs j
	WHERE j.deployment_id = ?0 AND j.target_key = ?1
		AND CASE WHEN k.which = 'active' THEN j.active ELSE j.status = ?2 END
	ORDER BY j.created_at DESC, j.id DESC LIMIT 1
) j
LEFT JOIN release_versions v ON v.id = j.version_id`

// sqlTargetJobStateMany is sqlTargetJobState of many targets: their
// deployments and keys as two arrays, each row numbered by its target's
// place (1-based).
const sqlTargetJobStateMany = `
SELECT t.n, k.which, ` + jobColumns + `, v.doc AS vdoc
FROM unnest(?0::text[], ?1::text[]) WITH ORDINALITY AS t(deployment_id, target_key, n)
CROSS JOIN (VALUES ('active'), ('successful')) AS k(which)
CROSS JOIN LATERAL (
	SELECT * FROM release_jobs j
	WHERE j.deployment_id = t.deployment_id AND j.target_key = t.target_key
		AND CASE WHEN k.which = 'active' THEN j.active ELSE j.status = ?2 END
	ORDER BY j.created_at DESC, j.id DESC LIMIT 1
) j
LEFT JOIN release_versions v ON v.id = j.version_id`

// jobStateRow is one row of sqlTargetJobState(Many).
type jobStateRow struct {
	N     int    `bun:"n"`
	Which string `bun:"which"`
	jobRowScan
	VDoc []byte `bun:"vdoc"`
}

// add puts the row's job, with its version, into st.
func (r *jobStateRow) add(st *ports.TargetJobState) error {
	j, err := r.row()
	if err != nil {
		return err
	}
	out := &ports.JobWithVersion{Job: j}
	if len(r.VDoc) > 0 {
		if err := json.Unmarshal(r.VDoc, &out.Version); err != nil {
			return fmt.Errorf("decode version: %w", err)
		}
	}
	if r.Which == "active" {
		st.Active = out
	} else {
		st.Successful = out
	}
	return nil
}

// TargetJobState reads the target's newest active and successful jobs with
// their versions in one statement.
func (s *ReleaseStore) TargetJobState(ctx context.Context, t release.ReleaseTarget) (ports.TargetJobState, error) {
	op := "job state of " + t.String()
	var rows []jobStateRow
	if err := s.db.idb(ctx).NewRaw(sqlTargetJobState, t.DeploymentID, t.Key(), release.JobSuccessful).Scan(ctx, &rows); err != nil {
		return ports.TargetJobState{}, fmt.Errorf("%s: %w", op, err)
	}
	var st ports.TargetJobState
	for i := range rows {
		if err := rows[i].add(&st); err != nil {
			return ports.TargetJobState{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	return st, nil
}

// TargetJobStateMany is TargetJobState of every target of ts in one
// statement (ports.JobStateBatcher).
func (s *ReleaseStore) TargetJobStateMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]ports.TargetJobState, error) {
	out := make(map[release.ReleaseTarget]ports.TargetJobState, len(ts))
	if len(ts) == 0 {
		return out, nil
	}
	deployments, keys := make([]string, len(ts)), make([]string, len(ts))
	for i, t := range ts {
		deployments[i], keys[i] = t.DeploymentID, t.Key()
	}
	var rows []jobStateRow
	if err := s.db.idb(ctx).NewRaw(sqlTargetJobStateMany, pgdialect.Array(deployments), pgdialect.Array(keys), release.JobSuccessful).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("job state of %d targets: %w", len(ts), err)
	}
	for i := range rows {
		if rows[i].N < 1 || rows[i].N > len(ts) {
			return nil, fmt.Errorf("job state of %d targets: row of target %d", len(ts), rows[i].N)
		}
		t := ts[rows[i].N-1]
		st := out[t]
		if err := rows[i].add(&st); err != nil {
			return nil, fmt.Errorf("job state of %s: %w", t, err)
		}
		out[t] = st
	}
	return out, nil
}

// sqlProgressionSummary reads a scope's target count and its version's
// outcome rows (migration 0027 keeps both in each job's and target's
// write): one statement over O(outcomes) rows.
const sqlProgressionSummary = `
SELECT COALESCE((SELECT s.targets FROM release_progression_scopes s WHERE s.deployment_id = ?0 AND s.environment_id = ?1), 0),
	o.status, o.verification, o.targets, o.latest_at
FROM (SELECT 1) AS one
LEFT JOIN release_progression_outcomes o ON o.deployment_id = ?0 AND o.environment_id = ?1 AND o.version_id = ?2 AND o.targets > 0
ORDER BY o.status, o.verification`

// ProgressionSummary reads the kept progression aggregate of the scope.
func (s *ReleaseStore) ProgressionSummary(ctx context.Context, p ports.ProgressionSummaryParams) (policy.ProgressionSummary, error) {
	op := "progression summary of " + p.DeploymentID + " in " + p.EnvironmentID + " for " + p.VersionID
	if err := p.Validate(); err != nil {
		return policy.ProgressionSummary{}, fmt.Errorf("progression summary: %w", err)
	}
	rows, err := s.db.hotQuery(ctx, hotText(sqlProgressionSummary), p.DeploymentID, p.EnvironmentID, p.VersionID)
	if err != nil {
		return policy.ProgressionSummary{}, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	sum := policy.ProgressionSummary{VersionID: p.VersionID}
	for rows.Next() {
		var (
			total        int64
			status, verf sql.NullString
			n            sql.NullInt64
			latest       sql.NullTime
		)
		if err := rows.Scan(&total, &status, &verf, &n, &latest); err != nil {
			return policy.ProgressionSummary{}, fmt.Errorf("%s: %w", op, err)
		}
		sum.Targets = int(total)
		if !status.Valid {
			continue
		}
		sum.Outcomes = append(sum.Outcomes, policy.ProgressionOutcome{Status: release.JobStatus(status.String),
			Verification: release.VerificationStatus(verf.String), Targets: int(n.Int64), LatestAt: latest.Time.UTC()})
	}
	if err := rows.Err(); err != nil {
		return policy.ProgressionSummary{}, fmt.Errorf("%s: %w", op, err)
	}
	return sum, nil
}
