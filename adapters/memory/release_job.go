package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// agentRef is a job's (agent, external id) pair.
type agentRef struct{ agent, external string }

// envRef is a (deployment, environment) pair.
type envRef struct{ deployment, environment string }

// jobIndex holds the jobs with the indexes the queries need. Jobs are kept
// per target sorted by (created_at, id), which never changes.
type jobIndex struct {
	byID     map[string]*ports.JobRow
	byKey    map[string]*ports.JobRow
	byTarget map[release.ReleaseTarget][]*ports.JobRow
	// all holds every job sorted by (created_at, id), for JobList.
	all []*ports.JobRow
	// Targets with jobs, by deployment, resource and version.
	targetsByDep     map[string]map[release.ReleaseTarget]struct{}
	targetsByRes     map[string]map[release.ReleaseTarget]struct{}
	targetsByVersion map[string]map[release.ReleaseTarget]struct{}
	// Active job counts per target and per (deployment, environment).
	activeByTarget map[release.ReleaseTarget]int
	activeByEnv    map[envRef]int
	// Active jobs per agent id (for pull agents' takes).
	activeByAgent map[string]map[*ports.JobRow]struct{}
	byExternal    map[agentRef][]*ports.JobRow
}

func newJobIndex() jobIndex {
	return jobIndex{
		byID:             map[string]*ports.JobRow{},
		byKey:            map[string]*ports.JobRow{},
		byTarget:         map[release.ReleaseTarget][]*ports.JobRow{},
		targetsByDep:     map[string]map[release.ReleaseTarget]struct{}{},
		targetsByRes:     map[string]map[release.ReleaseTarget]struct{}{},
		targetsByVersion: map[string]map[release.ReleaseTarget]struct{}{},
		activeByTarget:   map[release.ReleaseTarget]int{},
		activeByEnv:      map[envRef]int{},
		activeByAgent:    map[string]map[*ports.JobRow]struct{}{},
		byExternal:       map[agentRef][]*ports.JobRow{},
	}
}

// jobOrder orders jobs by (created_at, id) ascending.
func jobOrder(a, b *ports.JobRow) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

func addToSet(m map[string]map[release.ReleaseTarget]struct{}, k string, t release.ReleaseTarget) {
	set := m[k]
	if set == nil {
		set = map[release.ReleaseTarget]struct{}{}
		m[k] = set
	}
	set[t] = struct{}{}
}

// countActive adds delta to the active counts if j is active.
func (x *jobIndex) countActive(j *ports.JobRow, t release.ReleaseTarget, delta int) {
	if !j.Status.IsActive() {
		return
	}
	x.activeByTarget[t] += delta
	if x.activeByTarget[t] == 0 {
		delete(x.activeByTarget, t)
	}
	e := envRef{t.DeploymentID, t.EnvironmentID}
	x.activeByEnv[e] += delta
	if x.activeByEnv[e] == 0 {
		delete(x.activeByEnv, e)
	}
	set := x.activeByAgent[j.JobAgentID]
	switch {
	case delta > 0 && set == nil:
		x.activeByAgent[j.JobAgentID] = map[*ports.JobRow]struct{}{j: {}}
	case delta > 0:
		set[j] = struct{}{}
	default:
		delete(set, j)
		if len(set) == 0 {
			delete(x.activeByAgent, j.JobAgentID)
		}
	}
}

// indexExternal adds (delta > 0) or removes j from the external-id index.
func (x *jobIndex) indexExternal(j *ports.JobRow, add bool) {
	if j.ExternalID == "" {
		return
	}
	k := agentRef{j.JobAgentID, j.ExternalID}
	if add {
		x.byExternal[k] = append(x.byExternal[k], j)
		return
	}
	list := slices.DeleteFunc(x.byExternal[k], func(o *ports.JobRow) bool { return o == j })
	if len(list) == 0 {
		delete(x.byExternal, k)
	} else {
		x.byExternal[k] = list
	}
}

// insert indexes a new job.
func (x *jobIndex) insert(j *ports.JobRow) {
	t := j.Target()
	x.byID[j.ID] = j
	x.byKey[j.IdempotencyKey] = j
	list := x.byTarget[t]
	i, _ := slices.BinarySearchFunc(list, j, jobOrder)
	x.byTarget[t] = slices.Insert(list, i, j)
	i, _ = slices.BinarySearchFunc(x.all, j, jobOrder)
	x.all = slices.Insert(x.all, i, j)
	addToSet(x.targetsByDep, t.DeploymentID, t)
	addToSet(x.targetsByRes, t.ResourceID, t)
	addToSet(x.targetsByVersion, j.VersionID, t)
	x.countActive(j, t, 1)
	x.indexExternal(j, true)
}

// remove unindexes j, the newest job of its kind created (the undo of
// insert).
func (x *jobIndex) remove(j *ports.JobRow) {
	t := j.Target()
	delete(x.byID, j.ID)
	delete(x.byKey, j.IdempotencyKey)
	list := slices.DeleteFunc(x.byTarget[t], func(o *ports.JobRow) bool { return o == j })
	if i, ok := slices.BinarySearchFunc(x.all, j, jobOrder); ok {
		x.all = slices.Delete(x.all, i, i+1)
	}
	if len(list) == 0 {
		delete(x.byTarget, t)
		dropFromSet(x.targetsByDep, t.DeploymentID, t)
		dropFromSet(x.targetsByRes, t.ResourceID, t)
	} else {
		x.byTarget[t] = list
	}
	if !slices.ContainsFunc(list, func(o *ports.JobRow) bool { return o.VersionID == j.VersionID }) {
		dropFromSet(x.targetsByVersion, j.VersionID, t)
	}
	x.countActive(j, t, -1)
	x.indexExternal(j, false)
}

// replace changes the stored job j by change, keeping the active counts and
// the external-id index in step.
func (x *jobIndex) replace(j *ports.JobRow, change func()) {
	t := j.Target()
	x.countActive(j, t, -1)
	x.indexExternal(j, false)
	change()
	x.countActive(j, t, 1)
	x.indexExternal(j, true)
}

func dropFromSet(m map[string]map[release.ReleaseTarget]struct{}, k string, t release.ReleaseTarget) {
	delete(m[k], t)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

// normJob normalises a job's times and maps as Postgres would read them.
func normJob(j release.Job) (release.Job, error) {
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
	out, err := jsonRoundTrip(&j)
	if err != nil {
		return j, release.Invalid("dispatch_context", err.Error())
	}
	return out, nil
}

// JobCreate creates a job once per idempotency key.
func (s *ReleaseStore) JobCreate(ctx context.Context, p ports.JobCreateParams) (ports.JobRow, bool, error) {
	op := "create job " + p.Job.ID
	if err := ports.ValidateJobCreate(p); err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	job, err := normJob(p.Job)
	if err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	defer s.lock(ctx)()
	if cur, ok := s.jobs.byKey[p.IdempotencyKey]; ok {
		if cur.ReleaseID != job.ReleaseID {
			return ports.JobRow{}, false, fmt.Errorf("%s: idempotency key %s belongs to job %s of release %s: %w",
				op, p.IdempotencyKey, cur.ID, cur.ReleaseID, ports.ErrConflict)
		}
		return copyJob(cur), false, nil
	}
	rel, ok := s.releases[job.ReleaseID]
	if !ok {
		return ports.JobRow{}, false, fmt.Errorf("%s: release %s: %w", op, job.ReleaseID, ports.ErrNotFound)
	}
	if rel.Target.Key() != job.TargetKey {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, release.Invalid("target_key", "release "+rel.ID+" is for target "+rel.Target.Key()))
	}
	if _, ok := s.jobs.byID[job.ID]; ok {
		return ports.JobRow{}, false, fmt.Errorf("%s: id already taken: %w", op, ports.ErrConflict)
	}
	if limit := p.MaxActiveInEnvironment; limit > 0 && job.Status.IsActive() {
		t := rel.Target
		if n := s.jobs.activeByEnv[envRef{t.DeploymentID, t.EnvironmentID}]; n >= limit {
			return ports.JobRow{}, false, fmt.Errorf("%s: %d active jobs of deployment %s in environment %s (limit %d): %w",
				op, n, t.DeploymentID, t.EnvironmentID, limit, ports.ErrLimitReached)
		}
	}
	row := &ports.JobRow{Job: job, VersionID: rel.VersionID, IdempotencyKey: p.IdempotencyKey, Version: 1, UpdatedAt: s.now()}
	s.jobs.insert(row)
	s.refreshProgression(row.Target(), row.VersionID)
	s.onUndo(ctx, func() { s.jobs.remove(row); s.refreshProgression(row.Target(), row.VersionID) })
	s.changes.publishAfterCommit(ctx, ports.JobChanges(nil, &row.Job, s.workspaceOf(row.TargetKey), row.UpdatedAt)...)
	if row.Status == release.JobPending {
		s.takers.wake()
	}
	return copyJob(row), true, nil
}

// JobUpdate writes a job by compare-and-swap.
func (s *ReleaseStore) JobUpdate(ctx context.Context, job release.Job, expected int64) (int64, error) {
	op := "update job " + job.ID
	if err := job.Validate(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	next, err := normJob(job)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	defer s.lock(ctx)()
	cur, ok := s.jobs.byID[job.ID]
	if !ok {
		return 0, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	if cur.Version != expected {
		return 0, fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, cur.Version, ports.ErrConflict)
	}
	if err := ports.CheckJobUpdate(&cur.Job, &next); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	before := *cur
	s.jobs.replace(cur, func() { cur.Job = next; cur.Version++; cur.UpdatedAt = s.now() })
	s.refreshProgression(cur.Target(), cur.VersionID)
	s.onUndo(ctx, func() {
		s.jobs.replace(cur, func() { *cur = before })
		s.refreshProgression(cur.Target(), cur.VersionID)
	})
	s.recordEvents(ctx, ports.JobEvents(&before.Job, &cur.Job, cur.UpdatedAt, cur.VersionID)...)
	s.changes.publishAfterCommit(ctx, ports.JobChanges(&before.Job, &cur.Job, s.workspaceOf(cur.TargetKey), cur.UpdatedAt)...)
	return cur.Version, nil
}

// JobCreateMany runs JobCreate on each create in order: in memory a call
// costs nothing to save.
func (s *ReleaseStore) JobCreateMany(ctx context.Context, creates []ports.JobCreateParams) []ports.JobCreated {
	return ports.JobCreateEach(ctx, s, creates)
}

// JobUpdateMany runs JobUpdate on each update in order.
func (s *ReleaseStore) JobUpdateMany(ctx context.Context, updates []ports.JobUpdateParams) ([]int64, []error) {
	versions, errs := make([]int64, len(updates)), make([]error, len(updates))
	for i, u := range updates {
		versions[i], errs[i] = s.JobUpdate(ctx, u.Job, u.ExpectedVersion)
	}
	return versions, errs
}

// JobGet reads one job.
func (s *ReleaseStore) JobGet(ctx context.Context, id string) (ports.JobRow, error) {
	defer s.rlock(ctx)()
	j, ok := s.jobs.byID[id]
	if !ok {
		return ports.JobRow{}, fmt.Errorf("get job %s: %w", id, ports.ErrNotFound)
	}
	return copyJob(j), nil
}

// JobByExternalID reads the newest job the agent knows by externalID.
func (s *ReleaseStore) JobByExternalID(ctx context.Context, agentID, externalID string) (ports.JobRow, error) {
	op := "get job by external id " + externalID
	if externalID == "" {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, release.Invalid("external_id", "is required"))
	}
	defer s.rlock(ctx)()
	var best *ports.JobRow
	for _, j := range s.jobs.byExternal[agentRef{agentID, externalID}] {
		if best == nil || jobOrder(j, best) > 0 {
			best = j
		}
	}
	if best == nil {
		return ports.JobRow{}, fmt.Errorf("%s of agent %s: %w", op, agentID, ports.ErrNotFound)
	}
	return copyJob(best), nil
}

// JobsByTarget lists the target's jobs newest first, at most limit.
func (s *ReleaseStore) JobsByTarget(ctx context.Context, t release.ReleaseTarget, limit int) ([]ports.JobRow, error) {
	defer s.rlock(ctx)()
	list := s.jobs.byTarget[t]
	n := len(list)
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]ports.JobRow, 0, n)
	for i := len(list) - 1; len(out) < n; i-- {
		out = append(out, copyJob(list[i]))
	}
	return out, nil
}

// JobList lists the jobs matching p newest first, one keyset page: it
// walks the jobs in (created_at, id) order down from p.After.
func (s *ReleaseStore) JobList(ctx context.Context, p ports.JobListParams) ([]ports.JobRow, error) {
	if err := ports.ValidateJobList(&p); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	limit := ports.VersionPageSize(p.Limit)
	defer s.rlock(ctx)()
	var deployments map[string]bool
	if p.WorkspaceID != "" {
		deployments = map[string]bool{}
		for _, sys := range s.systems.byParent[p.WorkspaceID] {
			for _, d := range s.deployments.byParent[sys] {
				deployments[d] = true
			}
		}
	}
	end := len(s.jobs.all)
	if p.After != nil {
		after := &ports.JobRow{Job: release.Job{ID: p.After.ID, CreatedAt: p.After.CreatedAt}}
		end, _ = slices.BinarySearchFunc(s.jobs.all, after, jobOrder)
	}
	out := []ports.JobRow{}
	for i := end - 1; i >= 0 && len(out) < limit; i-- {
		j := s.jobs.all[i]
		t := j.Target()
		if (len(p.Statuses) == 0 || slices.Contains(p.Statuses, j.Status)) &&
			(p.JobAgentID == "" || j.JobAgentID == p.JobAgentID) &&
			(p.DeploymentID == "" || t.DeploymentID == p.DeploymentID) &&
			(p.EnvironmentID == "" || t.EnvironmentID == p.EnvironmentID) &&
			(p.ResourceID == "" || t.ResourceID == p.ResourceID) &&
			(p.VersionID == "" || j.VersionID == p.VersionID) &&
			(deployments == nil || deployments[t.DeploymentID]) {
			out = append(out, copyJob(j))
		}
	}
	return out, nil
}

// JobsActiveByTarget lists the target's active jobs, newest first.
func (s *ReleaseStore) JobsActiveByTarget(ctx context.Context, t release.ReleaseTarget) ([]ports.JobRow, error) {
	defer s.rlock(ctx)()
	list := s.jobs.byTarget[t]
	var out []ports.JobRow
	for i := len(list) - 1; i >= 0 && len(out) < s.jobs.activeByTarget[t]; i-- {
		if list[i].Status.IsActive() {
			out = append(out, copyJob(list[i]))
		}
	}
	return out, nil
}

// JobsActiveCount reads the kept active counts of the target and of its
// deployment's environment.
func (s *ReleaseStore) JobsActiveCount(ctx context.Context, t release.ReleaseTarget) (ports.JobActiveCounts, error) {
	defer s.rlock(ctx)()
	return ports.JobActiveCounts{
		Target:      s.jobs.activeByTarget[t],
		Environment: s.jobs.activeByEnv[envRef{t.DeploymentID, t.EnvironmentID}],
	}, nil
}

// JobsLatest returns the newest matching job of each target, in key order.
func (s *ReleaseStore) JobsLatest(ctx context.Context, p ports.JobsLatestParams) ([]ports.JobRow, error) {
	if err := ports.ValidateJobsLatest(p); err != nil {
		return nil, fmt.Errorf("latest jobs: %w", err)
	}
	defer s.rlock(ctx)()
	var set map[release.ReleaseTarget]struct{}
	switch {
	case p.VersionID != "":
		set = s.jobs.targetsByVersion[p.VersionID]
	case p.DeploymentID != "":
		set = s.jobs.targetsByDep[p.DeploymentID]
	default:
		set = s.jobs.targetsByRes[p.ResourceID]
	}
	scope := ports.TargetScope{DeploymentID: p.DeploymentID, EnvironmentID: p.EnvironmentID, ResourceID: p.ResourceID}
	var out []ports.JobRow
	for t := range set {
		if !scope.Contains(t, "") {
			continue
		}
		list := s.jobs.byTarget[t]
		for i := len(list) - 1; i >= 0; i-- {
			j := list[i]
			if (p.VersionID == "" || j.VersionID == p.VersionID) && (len(p.Statuses) == 0 || slices.Contains(p.Statuses, j.Status)) {
				out = append(out, copyJob(j))
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b ports.JobRow) int { return strings.Compare(a.TargetKey, b.TargetKey) })
	return out, nil
}

// TargetJobState reads the target's newest active and successful jobs.
func (s *ReleaseStore) TargetJobState(ctx context.Context, t release.ReleaseTarget) (ports.TargetJobState, error) {
	defer s.rlock(ctx)()
	return s.targetJobState(t), nil
}

// TargetJobStateMany is TargetJobState of every target of ts, under one
// lock (ports.JobStateBatcher).
func (s *ReleaseStore) TargetJobStateMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]ports.TargetJobState, error) {
	defer s.rlock(ctx)()
	out := make(map[release.ReleaseTarget]ports.TargetJobState, len(ts))
	for _, t := range ts {
		out[t] = s.targetJobState(t)
	}
	return out, nil
}

// targetJobState is t's job state; the caller holds the lock.
func (s *ReleaseStore) targetJobState(t release.ReleaseTarget) ports.TargetJobState {
	var st ports.TargetJobState
	list := s.jobs.byTarget[t]
	for i := len(list) - 1; i >= 0 && (st.Active == nil || st.Successful == nil); i-- {
		j := list[i]
		switch {
		case st.Active == nil && j.Status.IsActive():
			st.Active = s.withVersion(j)
		case st.Successful == nil && j.Status == release.JobSuccessful:
			st.Successful = s.withVersion(j)
		}
	}
	return st
}

// withVersion pairs a job with a copy of its version; the caller holds the
// lock.
func (s *ReleaseStore) withVersion(j *ports.JobRow) *ports.JobWithVersion {
	out := &ports.JobWithVersion{Job: copyJob(j)}
	if v, ok := s.versions[j.VersionID]; ok {
		out.Version = copyVersion(v)
	}
	return out
}

// ProgressionSummary reads the summary the store keeps in each job's and
// target's write (progressionIndex): O(outcomes), whatever the
// environment's size.
func (s *ReleaseStore) ProgressionSummary(ctx context.Context, p ports.ProgressionSummaryParams) (policy.ProgressionSummary, error) {
	if err := p.Validate(); err != nil {
		return policy.ProgressionSummary{}, fmt.Errorf("progression summary: %w", err)
	}
	defer s.rlock(ctx)()
	n := s.targets.count[envRef{p.DeploymentID, p.EnvironmentID}]
	return s.progression.summary(p.DeploymentID, p.EnvironmentID, p.VersionID, n), nil
}
