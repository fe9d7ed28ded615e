package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// VersionCreate inserts a version while its deployment exists, holding the
// deployment row (FOR KEY SHARE) so a concurrent delete waits and then
// sees the version.
func (s *ReleaseStore) VersionCreate(ctx context.Context, v release.DeploymentVersion) error {
	op := "create version " + v.ID
	if err := v.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	v.CreatedAt = ports.StoredTime(v.CreatedAt)
	doc, err := relEncode("config", &v)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	n, err := s.exec(ctx, `INSERT INTO release_versions (id, deployment_id, created_at, status, doc)
		SELECT ?, ?, ?, ?, ?::jsonb WHERE EXISTS (SELECT 1 FROM release_deployments WHERE id = ? FOR KEY SHARE)
		ON CONFLICT (id) DO NOTHING`, v.ID, v.DeploymentID, v.CreatedAt, v.Status, doc, v.DeploymentID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 1 {
		return nil
	}
	var ok bool
	if err := s.scan(ctx, `SELECT EXISTS (SELECT 1 FROM release_deployments WHERE id = ?)`, []any{v.DeploymentID}, &ok); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !ok {
		return fmt.Errorf("%s: deployment %s: %w", op, v.DeploymentID, ports.ErrNotFound)
	}
	return fmt.Errorf("%s: already exists: %w", op, ports.ErrConflict)
}

// VersionGet reads one version.
func (s *ReleaseStore) VersionGet(ctx context.Context, id string) (release.DeploymentVersion, error) {
	var doc []byte
	err := s.scan(ctx, `SELECT doc FROM release_versions WHERE id = ?`, []any{id}, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return release.DeploymentVersion{}, fmt.Errorf("get version %s: %w", id, ports.ErrNotFound)
	}
	if err != nil {
		return release.DeploymentVersion{}, fmt.Errorf("get version %s: %w", id, err)
	}
	var v release.DeploymentVersion
	if err := json.Unmarshal(doc, &v); err != nil {
		return release.DeploymentVersion{}, fmt.Errorf("get version %s: decode: %w", id, err)
	}
	return v, nil
}

// VersionUpdateStatus sets the status column and the document's status.
func (s *ReleaseStore) VersionUpdateStatus(ctx context.Context, id string, status release.VersionStatus) error {
	op := "update version " + id
	if !status.Valid() {
		return fmt.Errorf("%s: %w", op, release.Invalid("status", "unknown version status "+string(status)))
	}
	n, err := s.exec(ctx, `UPDATE release_versions SET status = ?0, doc = jsonb_set(doc, '{status}', to_jsonb(?0::text)) WHERE id = ?1`, status, id)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	return nil
}

// VersionsNewestFirst streams a deployment's versions newest first, one
// keyset page per query from release_versions_stream_idx, reading the next
// page only when the loop has consumed the last.
func (s *ReleaseStore) VersionsNewestFirst(ctx context.Context, deploymentID string, pageSize int) iter.Seq2[release.DeploymentVersion, error] {
	size := ports.VersionPageSize(pageSize)
	return func(yield func(release.DeploymentVersion, error) bool) {
		var (
			after   *ports.NewestKey
			docs    []versionDoc
			version release.DeploymentVersion
		)
		for {
			docs, err := s.versionPage(ctx, docs[:0], deploymentID, after, size)
			if err != nil {
				yield(release.DeploymentVersion{}, fmt.Errorf("versions of %s: %w", deploymentID, err))
				return
			}
			if s.onPage != nil {
				s.onPage(len(docs))
			}
			for i := range docs {
				version = release.DeploymentVersion{}
				if err := json.Unmarshal(docs[i].Doc, &version); err != nil {
					yield(release.DeploymentVersion{}, fmt.Errorf("versions of %s: decode: %w", deploymentID, err))
					return
				}
				if !yield(version, nil) {
					return
				}
			}
			if len(docs) < size {
				return
			}
			after = &ports.NewestKey{CreatedAt: version.CreatedAt, ID: version.ID}
		}
	}
}

// versionDoc is one row of a version page.
type versionDoc struct {
	Doc []byte
}

// versionDocs runs a page query (hot) and appends its documents to docs.
// VersionsPage reads one keyset page of a deployment's versions, newest
// first, below p.After: one query on release_versions_stream_idx.
func (s *ReleaseStore) VersionsPage(ctx context.Context, p ports.VersionPageParams) ([]release.DeploymentVersion, error) {
	if err := ports.ValidateVersionPage(&p); err != nil {
		return nil, fmt.Errorf("versions of %s: %w", p.DeploymentID, err)
	}
	docs, err := s.versionPage(ctx, nil, p.DeploymentID, p.After, ports.VersionPageSize(p.Limit))
	if err != nil {
		return nil, fmt.Errorf("versions of %s: %w", p.DeploymentID, err)
	}
	if s.onPage != nil {
		s.onPage(len(docs))
	}
	out := make([]release.DeploymentVersion, len(docs))
	for i := range docs {
		if err := json.Unmarshal(docs[i].Doc, &out[i]); err != nil {
			return nil, fmt.Errorf("versions of %s: decode: %w", p.DeploymentID, err)
		}
	}
	return out, nil
}

// versionPage appends to docs the deployment's versions below after (from
// the newest when nil), at most size, newest first.
func (s *ReleaseStore) versionPage(ctx context.Context, docs []versionDoc, deploymentID string, after *ports.NewestKey, size int) ([]versionDoc, error) {
	if after == nil {
		return s.versionDocs(ctx, docs, `SELECT doc FROM release_versions WHERE deployment_id = $1
			ORDER BY created_at DESC, id DESC LIMIT $2`, deploymentID, size)
	}
	return s.versionDocs(ctx, docs, `SELECT doc FROM release_versions WHERE deployment_id = $1
		AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $4`, deploymentID, after.CreatedAt, after.ID, size)
}

func (s *ReleaseStore) versionDocs(ctx context.Context, docs []versionDoc, q string, args ...any) ([]versionDoc, error) {
	rows, err := s.db.hotQuery(ctx, q, args...)
	if err != nil {
		return docs, err
	}
	defer rows.Close()
	for rows.Next() {
		var d versionDoc
		if err := rows.Scan(&d.Doc); err != nil {
			return docs, err
		}
		docs = append(docs, d)
	}
	return docs, rows.Err()
}

// ApprovalAdd inserts an approval once per (version, environment, user)
// while the version exists.
func (s *ReleaseStore) ApprovalAdd(ctx context.Context, a release.Approval) (bool, error) {
	op := "add approval of " + a.VersionID
	if err := a.Validate(); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	n, err := s.exec(ctx, `INSERT INTO release_approvals (version_id, environment_id, user_name, approved_at)
		SELECT ?0, ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM release_versions WHERE id = ?0)
		ON CONFLICT DO NOTHING`, a.VersionID, a.EnvironmentID, a.User, ports.StoredTime(a.ApprovedAt))
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if n == 1 {
		return true, nil
	}
	if err := s.versionExists(ctx, a.VersionID); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return false, nil
}

// versionExists returns ErrNotFound for a missing version.
func (s *ReleaseStore) versionExists(ctx context.Context, id string) error {
	var ok bool
	if err := s.scan(ctx, `SELECT EXISTS (SELECT 1 FROM release_versions WHERE id = ?)`, []any{id}, &ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("version %s: %w", id, ports.ErrNotFound)
	}
	return nil
}

// ApprovalList lists a version's approvals by time, environment, user.
func (s *ReleaseStore) ApprovalList(ctx context.Context, versionID, environmentID string) ([]release.Approval, error) {
	var rows []struct {
		VersionID     string    `bun:"version_id"`
		EnvironmentID string    `bun:"environment_id"`
		User          string    `bun:"user_name"`
		ApprovedAt    time.Time `bun:"approved_at"`
	}
	err := s.scan(ctx, `SELECT version_id, environment_id, user_name, approved_at FROM release_approvals
		WHERE version_id = ?0 AND (?1 = '' OR environment_id = ?1) ORDER BY approved_at, environment_id, user_name`,
		[]any{versionID, environmentID}, &rows)
	if err != nil {
		return nil, fmt.Errorf("list approvals of %s: %w", versionID, err)
	}
	var out []release.Approval
	for _, r := range rows {
		out = append(out, release.Approval{VersionID: r.VersionID, EnvironmentID: r.EnvironmentID, User: r.User, ApprovedAt: r.ApprovedAt.UTC()})
	}
	return out, nil
}

// PolicySkipPut upserts a skip while its version exists.
func (s *ReleaseStore) PolicySkipPut(ctx context.Context, sk release.PolicySkip) error {
	op := "put policy skip " + sk.ID
	if err := ports.ValidatePolicySkip(&sk); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	sk.ExpiresAt = ports.StoredTime(sk.ExpiresAt)
	doc, err := relEncode("policy_skip", &sk)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	n, err := s.exec(ctx, `INSERT INTO release_policy_skips (id, version_id, doc)
		SELECT ?0, ?1, ?2::jsonb WHERE EXISTS (SELECT 1 FROM release_versions WHERE id = ?1)
		ON CONFLICT (id) DO UPDATE SET version_id = excluded.version_id, doc = excluded.doc`, sk.ID, sk.VersionID, doc)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: version %s: %w", op, sk.VersionID, ports.ErrNotFound)
	}
	return nil
}

// PolicySkipList lists a version's skips by id.
func (s *ReleaseStore) PolicySkipList(ctx context.Context, versionID string) ([]release.PolicySkip, error) {
	var docs []versionDoc
	if err := s.scan(ctx, `SELECT doc FROM release_policy_skips WHERE version_id = ? ORDER BY id`, []any{versionID}, &docs); err != nil {
		return nil, fmt.Errorf("list policy skips of %s: %w", versionID, err)
	}
	var out []release.PolicySkip
	for i := range docs {
		var sk release.PolicySkip
		if err := json.Unmarshal(docs[i].Doc, &sk); err != nil {
			return nil, fmt.Errorf("list policy skips of %s: decode: %w", versionID, err)
		}
		out = append(out, sk)
	}
	return out, nil
}

// PolicySkipDelete removes a skip.
func (s *ReleaseStore) PolicySkipDelete(ctx context.Context, id string) error {
	n, err := s.exec(ctx, `DELETE FROM release_policy_skips WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete policy skip %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("delete policy skip %s: %w", id, ports.ErrNotFound)
	}
	return nil
}

// releaseDoc stamps r's creation time as the store keeps it (now when it
// is zero) and encodes r as its stored document.
func (s *ReleaseStore) releaseDoc(r *release.Release) (string, error) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.clock.Now()
	}
	r.CreatedAt = ports.StoredTime(r.CreatedAt)
	return relEncode("variables", r)
}

// desiredReasons encodes a decision's reasons as stored: a JSON array,
// empty for none.
func desiredReasons(reasons []string) (string, error) {
	if len(reasons) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(reasons)
	return string(b), err
}

// ReleaseUpsert inserts r while its version belongs to the target's
// deployment, unless its ID is stored; then it reads the stored one.
func (s *ReleaseStore) ReleaseUpsert(ctx context.Context, r release.Release) (release.Release, bool, error) {
	op := "upsert release " + r.ID
	if err := r.Validate(); err != nil {
		return release.Release{}, false, fmt.Errorf("%s: %w", op, err)
	}
	doc, err := s.releaseDoc(&r)
	if err != nil {
		return release.Release{}, false, fmt.Errorf("%s: %w", op, err)
	}
	n, err := s.hotExecN(ctx, `INSERT INTO release_releases (id, target_key, version_id, doc, created_at)
		SELECT ?0, ?1, ?2::text, ?3::jsonb, ?4::timestamptz FROM release_versions v WHERE v.id = ?2 AND v.deployment_id = ?5
		ON CONFLICT (id) DO NOTHING`, r.ID, r.Target.Key(), r.VersionID, doc, r.CreatedAt, r.Target.DeploymentID)
	if err != nil {
		return release.Release{}, false, fmt.Errorf("%s: %w", op, err)
	}
	if n == 1 {
		var out release.Release
		if err := json.Unmarshal([]byte(doc), &out); err != nil {
			return release.Release{}, false, fmt.Errorf("%s: decode: %w", op, err)
		}
		return out, true, nil
	}
	stored, err := s.ReleaseGet(ctx, r.ID)
	if err == nil {
		return stored, false, nil
	}
	if !errors.Is(err, ports.ErrNotFound) {
		return release.Release{}, false, fmt.Errorf("%s: %w", op, err)
	}
	v, err := s.VersionGet(ctx, r.VersionID)
	if err != nil {
		return release.Release{}, false, fmt.Errorf("%s: %w", op, err)
	}
	return release.Release{}, false, fmt.Errorf("%s: %w", op, release.Invalid("version_id",
		"version "+v.ID+" belongs to deployment "+v.DeploymentID+", not "+r.Target.DeploymentID))
}

// ReleaseGet reads one release.
func (s *ReleaseStore) ReleaseGet(ctx context.Context, id string) (release.Release, error) {
	var doc []byte
	err := s.scan(ctx, `SELECT doc FROM release_releases WHERE id = ?`, []any{id}, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return release.Release{}, fmt.Errorf("get release %s: %w", id, ports.ErrNotFound)
	}
	if err != nil {
		return release.Release{}, fmt.Errorf("get release %s: %w", id, err)
	}
	var r release.Release
	if err := json.Unmarshal(doc, &r); err != nil {
		return release.Release{}, fmt.Errorf("get release %s: decode: %w", id, err)
	}
	return r, nil
}

// sqlDesiredSet upserts a decision only when it differs from the stored one
// and its release (if any) is a stored release of the target; a written
// decision with a history entry ?5 (NULL: none) records it (sqlDecisionLog).
// The result counts the decisions written (0 or 1).
var sqlDesiredSet = `
WITH des AS (
	INSERT INTO release_desired AS d (target_key, release_id, reasons, next_check_at, updated_at)
	SELECT ?0::text, ?1::text, ?2::jsonb, ?3::timestamptz, ?4::timestamptz
	WHERE ?1 = '' OR EXISTS (SELECT 1 FROM release_releases WHERE id = ?1 AND target_key = ?0)
	ON CONFLICT (target_key) DO UPDATE SET release_id = excluded.release_id, reasons = excluded.reasons,
		next_check_at = excluded.next_check_at, updated_at = excluded.updated_at
	WHERE (d.release_id, d.reasons, d.next_check_at) IS DISTINCT FROM (excluded.release_id, excluded.reasons, excluded.next_check_at)
	RETURNING d.target_key, ?5::text AS decision, d.updated_at
)` + sqlDecisionLog + `
SELECT count(*) FROM des`

// sqlDecisionLog appends to target_decisions the history entry (decision,
// NULL for none) of every decision written by the CTE des (target_key,
// decision, updated_at), and keeps each target's newest
// ports.TargetDecisionsKept: both CTEs read the history as it was before
// the statement, so the delete keeps the newest Kept-1 and the insert adds
// one.
var sqlDecisionLog = `, hist AS (
	INSERT INTO target_decisions (target_key, seq, at, doc)
	SELECT des.target_key, COALESCE((SELECT max(x.seq) FROM target_decisions x WHERE x.target_key = des.target_key), 0) + 1,
		des.updated_at, des.decision::jsonb
	FROM des WHERE des.decision IS NOT NULL
), pruned AS (
	DELETE FROM target_decisions x USING des
	WHERE des.decision IS NOT NULL AND x.target_key = des.target_key
		AND x.seq <= (SELECT max(y.seq) FROM target_decisions y WHERE y.target_key = des.target_key) - ` + strconv.Itoa(ports.TargetDecisionsKept-1) + `
)`

// sqlDesiredSetMany stores the releases and decisions of many targets: the
// arrays ?0..?8 are target key, release id, version id (” when there is
// no release to store), release document, release creation time,
// deployment id, reasons, next check (NULL for none) and the write's
// position; ?9 is now; ?10 the history entries (NULL for none), recorded
// by sqlDecisionLog for the decisions written. A release is inserted as by ReleaseUpsert, a
// decision written as by sqlDesiredSet when its release is stored (now or
// before) for its target. The result has the position of each decision
// written or found unchanged, and whether it changed.
var sqlDesiredSetMany = `
WITH w AS (
	SELECT * FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::text[], ?4::timestamptz[], ?5::text[], ?6::text[],
		?7::timestamptz[], ?8::int[], ?10::text[])
		AS w(target_key, release_id, version_id, doc, created_at, deployment_id, reasons, next_check_at, ord, decision)
), rel AS (
	INSERT INTO release_releases (id, target_key, version_id, doc, created_at)
	SELECT w.release_id, w.target_key, w.version_id, w.doc::jsonb, w.created_at
	FROM w JOIN release_versions v ON v.id = w.version_id AND v.deployment_id = w.deployment_id
	WHERE w.version_id <> ''
	ORDER BY w.release_id
	ON CONFLICT (id) DO NOTHING
	RETURNING id, target_key
), ok AS (
	SELECT w.* FROM w
	WHERE w.release_id = ''
		OR EXISTS (SELECT 1 FROM rel WHERE rel.id = w.release_id AND rel.target_key = w.target_key)
		OR EXISTS (SELECT 1 FROM release_releases r WHERE r.id = w.release_id AND r.target_key = w.target_key)
), des AS (
	INSERT INTO release_desired AS d (target_key, release_id, reasons, next_check_at, updated_at)
	SELECT ok.target_key, ok.release_id, ok.reasons::jsonb, ok.next_check_at, ?9::timestamptz FROM ok ORDER BY ok.target_key
	ON CONFLICT (target_key) DO UPDATE SET release_id = excluded.release_id, reasons = excluded.reasons,
		next_check_at = excluded.next_check_at, updated_at = excluded.updated_at
	WHERE (d.release_id, d.reasons, d.next_check_at) IS DISTINCT FROM (excluded.release_id, excluded.reasons, excluded.next_check_at)
	RETURNING d.target_key, (SELECT ok2.decision FROM ok ok2 WHERE ok2.target_key = d.target_key) AS decision, d.updated_at
)` + sqlDecisionLog + `
SELECT ok.ord, EXISTS (SELECT 1 FROM des WHERE des.target_key = ok.target_key) FROM ok`

// DesiredSetMany implements ports.DesiredBatcher: the valid writes of
// distinct targets in one statement (sqlDesiredSetMany); a write it did
// not store (and every write of a call that names a target twice) goes
// through ReleaseUpsert and DesiredSet, which write or explain it.
func (s *ReleaseStore) DesiredSetMany(ctx context.Context, writes []ports.DesiredWrite) []ports.DesiredWritten {
	out := make([]ports.DesiredWritten, len(writes))
	done := make([]bool, len(writes))
	var (
		keys, rels, versions, docs, deployments, reasons []string
		decisions                                        []*string
		created, next                                    []*time.Time
		ords                                             []int32
	)
	seen := make(map[string]bool, len(writes))
	now := s.now()
	for i, w := range writes {
		key := w.Desired.Target.Key()
		if seen[key] {
			ords = nil // one target twice: each write in turn
			break
		}
		seen[key] = true
		d := w.Desired
		if ports.ValidateDesired(&d) != nil {
			continue
		}
		reason, err := desiredReasons(d.Reasons)
		if err != nil {
			continue
		}
		decision, err := decisionDoc(d.Decision)
		if err != nil {
			continue
		}
		var version, doc string
		var at *time.Time
		if w.Release != nil {
			r := *w.Release
			if r.Validate() != nil || r.ID != d.ReleaseID || r.Target != d.Target {
				continue
			}
			if doc, err = s.releaseDoc(&r); err != nil {
				continue
			}
			version, at = r.VersionID, &r.CreatedAt
		}
		var check *time.Time
		if !d.NextCheckAt.IsZero() {
			c := ports.StoredTime(d.NextCheckAt)
			check = &c
		}
		keys, rels, versions, docs = append(keys, key), append(rels, d.ReleaseID), append(versions, version), append(docs, doc)
		created, deployments, reasons = append(created, at), append(deployments, d.Target.DeploymentID), append(reasons, reason)
		next, ords, decisions = append(next, check), append(ords, int32(i)), append(decisions, decision)
	}
	if len(ords) > 0 {
		rows, err := s.db.hotQuery(ctx, hotText(sqlDesiredSetMany), keys, rels, versions, docs, created, deployments, reasons,
			next, ords, now, decisions)
		if err == nil {
			for rows.Next() {
				var ord int32
				var changed bool
				if err = rows.Scan(&ord, &changed); err != nil {
					break
				}
				out[ord].Changed, done[ord] = changed, true
			}
			if err == nil {
				err = rows.Err()
			}
			rows.Close()
		}
		if err != nil {
			for i, w := range writes {
				out[i] = ports.DesiredWritten{Err: fmt.Errorf("set desired release of %s: %w", w.Desired.Target.Key(), err)}
			}
			return out
		}
	}
	for i, w := range writes {
		if !done[i] {
			out[i] = ports.DesiredSetEach(ctx, s, []ports.DesiredWrite{w})[0]
		}
	}
	return out
}

// DesiredSet records the target's decision when it changed, in one
// statement; only a write that matched nothing is explained by a read.
func (s *ReleaseStore) DesiredSet(ctx context.Context, d ports.DesiredRelease) (bool, error) {
	op := "set desired release of " + d.Target.Key()
	if err := ports.ValidateDesired(&d); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	reasons, err := desiredReasons(d.Reasons)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	decision, err := decisionDoc(d.Decision)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	key := d.Target.Key()
	var n int64
	err = s.hotScan(ctx, sqlDesiredSet, []any{key, d.ReleaseID, reasons, relNullTime(d.NextCheckAt), s.now(), decision}, &n)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if n == 1 || d.ReleaseID == "" {
		return n == 1, nil
	}
	var target string
	err = s.scan(ctx, `SELECT target_key FROM release_releases WHERE id = ?`, []any{d.ReleaseID}, &target)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("%s: release %s: %w", op, d.ReleaseID, ports.ErrNotFound)
	case err != nil:
		return false, fmt.Errorf("%s: %w", op, err)
	case target != key:
		return false, fmt.Errorf("%s: %w", op, release.Invalid("release_id", "release "+d.ReleaseID+" is for target "+target))
	}
	return false, nil
}

// DesiredGet reads the target's decision.
func (s *ReleaseStore) DesiredGet(ctx context.Context, t release.ReleaseTarget) (ports.DesiredRelease, error) {
	var row desiredRow
	err := s.scan(ctx, `SELECT release_id, reasons, next_check_at, updated_at FROM release_desired WHERE target_key = ?`, []any{t.Key()}, &row)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.DesiredRelease{}, fmt.Errorf("get desired release of %s: %w", t, ports.ErrNotFound)
	}
	if err != nil {
		return ports.DesiredRelease{}, fmt.Errorf("get desired release of %s: %w", t, err)
	}
	out, err := row.decode(t)
	if err != nil {
		return ports.DesiredRelease{}, fmt.Errorf("get desired release of %s: %w", t, err)
	}
	return out, nil
}

// DesiredGetMany is DesiredGet of every target of ts in one statement, a
// target without a decision left out (ports.JobStateBatcher).
func (s *ReleaseStore) DesiredGetMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]ports.DesiredRelease, error) {
	out := make(map[release.ReleaseTarget]ports.DesiredRelease, len(ts))
	if len(ts) == 0 {
		return out, nil
	}
	byKey, keys := targetKeys(ts)
	var rows []struct {
		TargetKey string `bun:"target_key"`
		desiredRow
	}
	if err := s.db.idb(ctx).NewRaw(`SELECT target_key, release_id, reasons, next_check_at, updated_at FROM release_desired WHERE target_key = ANY(?)`,
		pgdialect.Array(keys)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("get desired releases of %d targets: %w", len(ts), err)
	}
	for i := range rows {
		t, ok := byKey[rows[i].TargetKey]
		if !ok {
			continue
		}
		d, err := rows[i].decode(t)
		if err != nil {
			return nil, fmt.Errorf("get desired release of %s: %w", t, err)
		}
		out[t] = d
	}
	return out, nil
}

// desiredRow is a stored decision.
type desiredRow struct {
	ReleaseID   string       `bun:"release_id"`
	Reasons     []byte       `bun:"reasons"`
	NextCheckAt sql.NullTime `bun:"next_check_at"`
	UpdatedAt   time.Time    `bun:"updated_at"`
}

// decode returns t's decision from the row.
func (row *desiredRow) decode(t release.ReleaseTarget) (ports.DesiredRelease, error) {
	out := ports.DesiredRelease{Target: t, ReleaseID: row.ReleaseID, UpdatedAt: row.UpdatedAt.UTC()}
	if row.NextCheckAt.Valid {
		out.NextCheckAt = row.NextCheckAt.Time.UTC()
	}
	if err := json.Unmarshal(row.Reasons, &out.Reasons); err != nil {
		return ports.DesiredRelease{}, fmt.Errorf("decode reasons: %w", err)
	}
	out.Reasons = slices.Clip(out.Reasons)
	if len(out.Reasons) == 0 {
		out.Reasons = nil
	}
	return out, nil
}

// decisionDoc is the stored form of a history entry; nil for none.
func decisionDoc(d *ports.TargetDecision) (*string, error) {
	if d == nil {
		return nil, nil
	}
	doc, err := relEncode("decision", d)
	if err != nil {
		return nil, err
	}
	return &doc, nil
}

// TargetDecisions reads the target's newest recorded decisions.
func (s *ReleaseStore) TargetDecisions(ctx context.Context, t release.ReleaseTarget, limit int) ([]ports.TargetDecision, error) {
	if limit <= 0 || limit > ports.TargetDecisionsKept {
		limit = ports.TargetDecisionsKept
	}
	var rows []struct {
		Seq int64     `bun:"seq"`
		At  time.Time `bun:"at"`
		Doc []byte    `bun:"doc"`
	}
	err := s.db.idb(ctx).NewRaw(`SELECT seq, at, doc FROM target_decisions WHERE target_key = ? ORDER BY seq DESC LIMIT ?`, t.Key(), limit).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("target decisions of %s: %w", t, err)
	}
	out := make([]ports.TargetDecision, 0, len(rows))
	for _, r := range rows {
		var d ports.TargetDecision
		if err := json.Unmarshal(r.Doc, &d); err != nil {
			return nil, fmt.Errorf("target decisions of %s: decode %d: %w", t, r.Seq, err)
		}
		d.Seq, d.At = r.Seq, r.At.UTC()
		out = append(out, d)
	}
	return out, nil
}
