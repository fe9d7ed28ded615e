package memory

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// versionOrder orders versions by (created_at, id) ascending; streams read
// the per-deployment slices backwards.
func versionOrder(a, b *release.DeploymentVersion) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// VersionCreate stores a new version of a stored deployment.
func (s *ReleaseStore) VersionCreate(ctx context.Context, v release.DeploymentVersion) error {
	op := "create version " + v.ID
	if err := v.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	v.CreatedAt = ports.StoredTime(v.CreatedAt)
	norm, err := jsonRoundTrip(&v)
	if err != nil {
		return fmt.Errorf("%s: %w", op, release.Invalid("config", err.Error()))
	}
	defer s.lock(ctx)()
	if !s.deployments.has(v.DeploymentID) {
		return fmt.Errorf("%s: deployment %s: %w", op, v.DeploymentID, ports.ErrNotFound)
	}
	if _, ok := s.versions[v.ID]; ok {
		return fmt.Errorf("%s: already exists: %w", op, ports.ErrConflict)
	}
	stored := &norm
	s.versions[v.ID] = stored
	list := s.versionsByDep[v.DeploymentID]
	i, _ := slices.BinarySearchFunc(list, stored, versionOrder)
	s.versionsByDep[v.DeploymentID] = slices.Insert(list, i, stored)
	s.onUndo(ctx, func() {
		delete(s.versions, v.ID)
		rest := slices.DeleteFunc(s.versionsByDep[v.DeploymentID], func(x *release.DeploymentVersion) bool { return x == stored })
		if len(rest) == 0 {
			delete(s.versionsByDep, v.DeploymentID)
		} else {
			s.versionsByDep[v.DeploymentID] = rest
		}
	})
	return nil
}

// VersionGet reads one version.
func (s *ReleaseStore) VersionGet(ctx context.Context, id string) (release.DeploymentVersion, error) {
	defer s.rlock(ctx)()
	v, ok := s.versions[id]
	if !ok {
		return release.DeploymentVersion{}, fmt.Errorf("get version %s: %w", id, ports.ErrNotFound)
	}
	return copyVersion(v), nil
}

// VersionUpdateStatus sets a version's status. Stored versions are never
// mutated (streams hold pointers to them outside the lock): the version is
// replaced by a changed copy.
func (s *ReleaseStore) VersionUpdateStatus(ctx context.Context, id string, status release.VersionStatus) error {
	op := "update version " + id
	if !status.Valid() {
		return fmt.Errorf("%s: %w", op, release.Invalid("status", "unknown version status "+string(status)))
	}
	defer s.lock(ctx)()
	old, ok := s.versions[id]
	if !ok {
		return fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	next := *old
	next.Status = status
	s.versions[id] = &next
	list := s.versionsByDep[old.DeploymentID]
	i, _ := slices.BinarySearchFunc(list, old, versionOrder)
	list[i] = &next
	s.onUndo(ctx, func() {
		s.versions[id] = old
		list := s.versionsByDep[old.DeploymentID]
		i, _ := slices.BinarySearchFunc(list, old, versionOrder)
		list[i] = old
	})
	return nil
}

// VersionsNewestFirst streams a deployment's versions newest first, one
// page per read lock: each page is found by binary search below the last
// version yielded, so the first item costs O(log n) whatever the count.
func (s *ReleaseStore) VersionsNewestFirst(ctx context.Context, deploymentID string, pageSize int) iter.Seq2[release.DeploymentVersion, error] {
	size := ports.VersionPageSize(pageSize)
	return func(yield func(release.DeploymentVersion, error) bool) {
		var after *release.DeploymentVersion
		for {
			if err := ctx.Err(); err != nil {
				yield(release.DeploymentVersion{}, fmt.Errorf("versions of %s: %w", deploymentID, err))
				return
			}
			page := s.versionPage(ctx, deploymentID, after, size)
			if s.onPage != nil {
				s.onPage(len(page))
			}
			for _, v := range page {
				if !yield(copyVersion(v), nil) {
					return
				}
			}
			if len(page) < size {
				return
			}
			after = page[len(page)-1]
		}
	}
}

// VersionsPage reads one keyset page of a deployment's versions, newest
// first, below p.After.
func (s *ReleaseStore) VersionsPage(ctx context.Context, p ports.VersionPageParams) ([]release.DeploymentVersion, error) {
	if err := ports.ValidateVersionPage(&p); err != nil {
		return nil, fmt.Errorf("versions of %s: %w", p.DeploymentID, err)
	}
	var after *release.DeploymentVersion
	if p.After != nil {
		after = &release.DeploymentVersion{ID: p.After.ID, CreatedAt: p.After.CreatedAt}
	}
	page := s.versionPage(ctx, p.DeploymentID, after, ports.VersionPageSize(p.Limit))
	if s.onPage != nil {
		s.onPage(len(page))
	}
	out := make([]release.DeploymentVersion, len(page))
	for i, v := range page {
		out[i] = copyVersion(v)
	}
	return out, nil
}

// versionPage returns up to size versions older than after (all when nil),
// newest first. The pointers stay valid: stored versions are immutable.
func (s *ReleaseStore) versionPage(ctx context.Context, deploymentID string, after *release.DeploymentVersion, size int) []*release.DeploymentVersion {
	defer s.rlock(ctx)()
	list := s.versionsByDep[deploymentID]
	end := len(list)
	if after != nil {
		end, _ = slices.BinarySearchFunc(list, after, versionOrder)
	}
	n := min(size, end)
	page := make([]*release.DeploymentVersion, n)
	for i := range n {
		page[i] = list[end-1-i]
	}
	return page
}

// approvalOrder orders approvals by time, environment, user.
func approvalOrder(a, b release.Approval) int {
	if c := a.ApprovedAt.Compare(b.ApprovedAt); c != 0 {
		return c
	}
	if c := strings.Compare(a.EnvironmentID, b.EnvironmentID); c != 0 {
		return c
	}
	return strings.Compare(a.User, b.User)
}

// ApprovalAdd records an approval once per (version, environment, user).
func (s *ReleaseStore) ApprovalAdd(ctx context.Context, a release.Approval) (bool, error) {
	op := "add approval of " + a.VersionID
	if err := a.Validate(); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	a.ApprovedAt = ports.StoredTime(a.ApprovedAt)
	defer s.lock(ctx)()
	if _, ok := s.versions[a.VersionID]; !ok {
		return false, fmt.Errorf("%s: version %s: %w", op, a.VersionID, ports.ErrNotFound)
	}
	list := s.approvals[a.VersionID]
	for _, x := range list {
		if x.EnvironmentID == a.EnvironmentID && x.User == a.User {
			return false, nil
		}
	}
	i, _ := slices.BinarySearchFunc(list, a, approvalOrder)
	s.approvals[a.VersionID] = slices.Insert(list, i, a)
	s.onUndo(ctx, func() {
		rest := slices.DeleteFunc(s.approvals[a.VersionID], func(x release.Approval) bool {
			return x.EnvironmentID == a.EnvironmentID && x.User == a.User
		})
		if len(rest) == 0 {
			delete(s.approvals, a.VersionID)
		} else {
			s.approvals[a.VersionID] = rest
		}
	})
	return true, nil
}

// ApprovalList lists a version's approvals by time, environment, user.
func (s *ReleaseStore) ApprovalList(ctx context.Context, versionID, environmentID string) ([]release.Approval, error) {
	defer s.rlock(ctx)()
	var out []release.Approval
	for _, a := range s.approvals[versionID] {
		if environmentID == "" || a.EnvironmentID == environmentID {
			out = append(out, a)
		}
	}
	return out, nil
}

// PolicySkipPut creates or replaces a skip of a stored version.
func (s *ReleaseStore) PolicySkipPut(ctx context.Context, sk release.PolicySkip) error {
	op := "put policy skip " + sk.ID
	if err := ports.ValidatePolicySkip(&sk); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	sk.ExpiresAt = ports.StoredTime(sk.ExpiresAt)
	defer s.lock(ctx)()
	if _, ok := s.versions[sk.VersionID]; !ok {
		return fmt.Errorf("%s: version %s: %w", op, sk.VersionID, ports.ErrNotFound)
	}
	old, had := s.skips[sk.ID]
	s.skips[sk.ID] = &sk
	s.onUndo(ctx, func() { restore(s.skips, sk.ID, old, had) })
	return nil
}

// PolicySkipList lists a version's skips by id.
func (s *ReleaseStore) PolicySkipList(ctx context.Context, versionID string) ([]release.PolicySkip, error) {
	defer s.rlock(ctx)()
	var out []release.PolicySkip
	for _, sk := range s.skips {
		if sk.VersionID == versionID {
			out = append(out, *sk)
		}
	}
	slices.SortFunc(out, func(a, b release.PolicySkip) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// PolicySkipDelete removes a skip.
func (s *ReleaseStore) PolicySkipDelete(ctx context.Context, id string) error {
	defer s.lock(ctx)()
	old, ok := s.skips[id]
	if !ok {
		return fmt.Errorf("delete policy skip %s: %w", id, ports.ErrNotFound)
	}
	delete(s.skips, id)
	s.onUndo(ctx, func() { s.skips[id] = old })
	return nil
}

// ReleaseUpsert stores r once per content-hash ID.
func (s *ReleaseStore) ReleaseUpsert(ctx context.Context, r release.Release) (release.Release, bool, error) {
	op := "upsert release " + r.ID
	if err := r.Validate(); err != nil {
		return release.Release{}, false, fmt.Errorf("%s: %w", op, err)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.clock.Now()
	}
	r.CreatedAt = ports.StoredTime(r.CreatedAt)
	norm, err := jsonRoundTrip(&r)
	if err != nil {
		return release.Release{}, false, fmt.Errorf("%s: %w", op, release.Invalid("variables", err.Error()))
	}
	defer s.lock(ctx)()
	if cur, ok := s.releases[r.ID]; ok {
		return copyRelease(cur), false, nil
	}
	v, ok := s.versions[r.VersionID]
	if !ok {
		return release.Release{}, false, fmt.Errorf("%s: version %s: %w", op, r.VersionID, ports.ErrNotFound)
	}
	if v.DeploymentID != r.Target.DeploymentID {
		return release.Release{}, false, fmt.Errorf("%s: %w", op, release.Invalid("version_id",
			"version "+v.ID+" belongs to deployment "+v.DeploymentID+", not "+r.Target.DeploymentID))
	}
	s.releases[r.ID] = &norm
	s.onUndo(ctx, func() { delete(s.releases, r.ID) })
	s.recordEvents(ctx, ports.ReleaseEvent(&norm))
	return copyRelease(&norm), true, nil
}

// ReleaseGet reads one release.
func (s *ReleaseStore) ReleaseGet(ctx context.Context, id string) (release.Release, error) {
	defer s.rlock(ctx)()
	r, ok := s.releases[id]
	if !ok {
		return release.Release{}, fmt.Errorf("get release %s: %w", id, ports.ErrNotFound)
	}
	return copyRelease(r), nil
}

// DesiredSet records the target's desired release when it changed.
func (s *ReleaseStore) DesiredSet(ctx context.Context, d ports.DesiredRelease) (bool, error) {
	op := "set desired release of " + d.Target.Key()
	if err := ports.ValidateDesired(&d); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	d.NextCheckAt = ports.StoredTime(d.NextCheckAt)
	if len(d.Reasons) == 0 {
		d.Reasons = nil
	}
	defer s.lock(ctx)()
	if d.ReleaseID != "" {
		r, ok := s.releases[d.ReleaseID]
		if !ok {
			return false, fmt.Errorf("%s: release %s: %w", op, d.ReleaseID, ports.ErrNotFound)
		}
		if r.Target != d.Target {
			return false, fmt.Errorf("%s: %w", op, release.Invalid("release_id", "release "+d.ReleaseID+" is for target "+r.Target.Key()))
		}
	}
	cur, had := s.desired[d.Target]
	if had && sameDesired(cur, &d) {
		return false, nil
	}
	c := copyDesired(&d)
	c.UpdatedAt = s.now()
	c.Decision = nil
	s.desired[d.Target] = &c
	s.onUndo(ctx, func() { restore(s.desired, d.Target, cur, had) })
	if d.Decision != nil {
		s.recordDecision(ctx, d.Target, *d.Decision, c.UpdatedAt)
	}
	var old string
	if had {
		old = cur.ReleaseID
	}
	s.changes.publishAfterCommit(ctx, ports.DesiredChange(d.Target.Key(), old, c.ReleaseID, s.workspaceOf(d.Target.Key()), c.UpdatedAt)...)
	return true, nil
}

// recordDecision appends d to t's history, stamped at, keeping the newest
// ports.TargetDecisionsKept; a rollback restores the history.
func (s *ReleaseStore) recordDecision(ctx context.Context, t release.ReleaseTarget, d ports.TargetDecision, at time.Time) {
	if s.decisions == nil {
		s.decisions = map[release.ReleaseTarget][]ports.TargetDecision{}
	}
	old, had := s.decisions[t]
	d.Seq, d.At = 1, at
	if len(old) > 0 {
		d.Seq = old[len(old)-1].Seq + 1
	}
	hist := append(slices.Clone(old), d)
	if len(hist) > ports.TargetDecisionsKept {
		hist = hist[len(hist)-ports.TargetDecisionsKept:]
	}
	s.decisions[t] = hist
	s.onUndo(ctx, func() { restore(s.decisions, t, old, had) })
}

// TargetDecisions reads the target's newest recorded decisions.
func (s *ReleaseStore) TargetDecisions(ctx context.Context, t release.ReleaseTarget, limit int) ([]ports.TargetDecision, error) {
	if limit <= 0 || limit > ports.TargetDecisionsKept {
		limit = ports.TargetDecisionsKept
	}
	defer s.rlock(ctx)()
	hist := s.decisions[t]
	out := make([]ports.TargetDecision, 0, min(limit, len(hist)))
	for i := len(hist) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, hist[i])
	}
	return out, nil
}

// DesiredSetMany implements ports.DesiredBatcher one write at a time: in
// memory a call costs nothing to save.
func (s *ReleaseStore) DesiredSetMany(ctx context.Context, writes []ports.DesiredWrite) []ports.DesiredWritten {
	return ports.DesiredSetEach(ctx, s, writes)
}

func sameDesired(a, b *ports.DesiredRelease) bool {
	return a.ReleaseID == b.ReleaseID && a.NextCheckAt.Equal(b.NextCheckAt) && slices.Equal(a.Reasons, b.Reasons)
}

// DesiredGet reads the target's desired release.
// DesiredGetMany is DesiredGet of every target of ts, a target without a
// decision left out (ports.JobStateBatcher).
func (s *ReleaseStore) DesiredGetMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]ports.DesiredRelease, error) {
	defer s.rlock(ctx)()
	out := make(map[release.ReleaseTarget]ports.DesiredRelease, len(ts))
	for _, t := range ts {
		if d, ok := s.desired[t]; ok {
			out[t] = copyDesired(d)
		}
	}
	return out, nil
}

func (s *ReleaseStore) DesiredGet(ctx context.Context, t release.ReleaseTarget) (ports.DesiredRelease, error) {
	defer s.rlock(ctx)()
	d, ok := s.desired[t]
	if !ok {
		return ports.DesiredRelease{}, fmt.Errorf("get desired release of %s: %w", t, ports.ErrNotFound)
	}
	return copyDesired(d), nil
}
