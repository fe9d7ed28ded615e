package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ReleaseStore is the in-memory ports.ReleaseStore. One RWMutex guards
// everything; values are normalised by a JSON round trip on write (so they
// read back as from Postgres) and copied on read. Versions and jobs are kept
// in slices sorted by (created_at, id) per deployment and per target, so
// version pages and job histories are binary searches, never scans; targets
// are kept in key-sorted slices per system, deployment, environment and
// resource.
type ReleaseStore struct {
	clock  ports.Clock
	onPage func(rows int)

	mu           sync.RWMutex
	workspaces   *docTable[release.Workspace]
	systems      *docTable[release.System]
	deployments  *docTable[release.Deployment]
	environments *docTable[release.Environment]
	resources    *docTable[release.Resource]
	agents       *docTable[release.JobAgent]
	policies     map[string]*policyRec

	targets targetIndex

	versions      map[string]*release.DeploymentVersion
	versionsByDep map[string][]*release.DeploymentVersion
	approvals     map[string][]release.Approval
	skips         map[string]*release.PolicySkip

	releases map[string]*release.Release
	desired  map[release.ReleaseTarget]*ports.DesiredRelease

	jobs jobIndex
}

var _ ports.ReleaseStore = (*ReleaseStore)(nil)

// ReleaseOption tunes NewReleaseStore.
type ReleaseOption func(*ReleaseStore)

// WithVersionPageHook calls fn with the row count of every page
// VersionsNewestFirst reads, so tests can count page reads.
func WithVersionPageHook(fn func(rows int)) ReleaseOption {
	return func(s *ReleaseStore) { s.onPage = fn }
}

// NewReleaseStore returns an empty store that stamps writes with clock.
func NewReleaseStore(clock ports.Clock, opts ...ReleaseOption) *ReleaseStore {
	s := &ReleaseStore{
		clock:         clock,
		workspaces:    newDocTable("workspace", nil, copyWorkspace),
		systems:       newDocTable("system", func(v *release.System) string { return v.WorkspaceID }, copySystem),
		deployments:   newDocTable("deployment", func(v *release.Deployment) string { return v.SystemID }, copyDeployment),
		environments:  newDocTable("environment", func(v *release.Environment) string { return v.SystemID }, copyEnvironment),
		resources:     newDocTable("resource", func(v *release.Resource) string { return v.WorkspaceID }, copyResource),
		agents:        newDocTable("job agent", nil, copyJobAgent),
		policies:      map[string]*policyRec{},
		targets:       newTargetIndex(),
		versions:      map[string]*release.DeploymentVersion{},
		versionsByDep: map[string][]*release.DeploymentVersion{},
		approvals:     map[string][]release.Approval{},
		skips:         map[string]*release.PolicySkip{},
		releases:      map[string]*release.Release{},
		desired:       map[release.ReleaseTarget]*ports.DesiredRelease{},
		jobs:          newJobIndex(),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// now reads the clock at the precision Postgres keeps.
func (s *ReleaseStore) now() time.Time { return ports.StoredTime(s.clock.Now()) }

// docTable holds one kind of catalog object with its ids per parent kept
// sorted for listing.
type docTable[T any] struct {
	name     string
	rows     map[string]*ports.Stored[T]
	byParent map[string][]string
	parent   func(*T) string
	copy     func(*T) T
}

func newDocTable[T any](name string, parent func(*T) string, cp func(*T) T) *docTable[T] {
	return &docTable[T]{name: name, rows: map[string]*ports.Stored[T]{}, byParent: map[string][]string{}, parent: parent, copy: cp}
}

// stored returns a copy of a stored object.
func (t *docTable[T]) stored(r *ports.Stored[T]) ports.Stored[T] {
	return ports.Stored[T]{Value: t.copy(&r.Value), Version: r.Version, UpdatedAt: r.UpdatedAt}
}

// get reads one object; the caller holds the lock.
func (t *docTable[T]) get(id string) (ports.Stored[T], error) {
	r, ok := t.rows[id]
	if !ok {
		return ports.Stored[T]{}, fmt.Errorf("get %s %s: %w", t.name, id, ports.ErrNotFound)
	}
	return t.stored(r), nil
}

// list returns the objects of parent (all when the table has none) by id;
// the caller holds the lock.
func (t *docTable[T]) list(parent string) []ports.Stored[T] {
	ids := t.byParent[parent]
	out := make([]ports.Stored[T], 0, len(ids))
	for _, id := range ids {
		out = append(out, t.stored(t.rows[id]))
	}
	return out
}

// has reports whether id is stored; the caller holds the lock.
func (t *docTable[T]) has(id string) bool { _, ok := t.rows[id]; return ok }

// put is the compare-and-swap write of every catalog object: validate, then
// normalise, then (under the lock) check the parent and the version.
func put[T any](s *ReleaseStore, t *docTable[T], v T, id string, validate func(*T) error, parentOK func(string) bool, expected int64) (int64, error) {
	op := "put " + t.name + " " + id
	if err := validate(&v); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if expected < 0 {
		return 0, fmt.Errorf("%s: %w", op, release.Invalid("expected_version", "must not be negative"))
	}
	norm, err := jsonRoundTrip(&v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, release.Invalid(t.name, err.Error()))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	parent := ""
	if t.parent != nil {
		parent = t.parent(&norm)
		if !parentOK(parent) {
			return 0, fmt.Errorf("%s: parent %s: %w", op, parent, ports.ErrNotFound)
		}
	}
	cur := t.rows[id]
	switch {
	case expected == 0 && cur != nil:
		return 0, fmt.Errorf("%s: already exists at version %d: %w", op, cur.Version, ports.ErrConflict)
	case expected > 0 && cur == nil:
		return 0, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	case expected > 0 && cur.Version != expected:
		return 0, fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, cur.Version, ports.ErrConflict)
	}
	if cur == nil {
		cur = &ports.Stored[T]{}
		t.rows[id] = cur
		t.byParent[parent] = insertSorted(t.byParent[parent], id)
	} else if t.parent != nil {
		if old := t.parent(&cur.Value); old != parent {
			t.byParent[old] = removeSorted(t.byParent[old], id)
			if len(t.byParent[old]) == 0 {
				delete(t.byParent, old)
			}
			t.byParent[parent] = insertSorted(t.byParent[parent], id)
		}
	}
	cur.Value = norm
	cur.Version++
	cur.UpdatedAt = s.now()
	return cur.Version, nil
}

func insertSorted(ids []string, id string) []string {
	i, found := slices.BinarySearch(ids, id)
	if found {
		return ids
	}
	return slices.Insert(ids, i, id)
}

func removeSorted(ids []string, id string) []string {
	i, found := slices.BinarySearch(ids, id)
	if !found {
		return ids
	}
	return slices.Delete(ids, i, i+1)
}

// WorkspacePut creates or updates a workspace.
func (s *ReleaseStore) WorkspacePut(_ context.Context, w release.Workspace, expected int64) (int64, error) {
	return put(s, s.workspaces, w, w.ID, (*release.Workspace).Validate, nil, expected)
}

// WorkspaceGet reads one workspace.
func (s *ReleaseStore) WorkspaceGet(_ context.Context, id string) (ports.Stored[release.Workspace], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.workspaces.get(id)
}

// SystemPut creates or updates a system of a stored workspace.
func (s *ReleaseStore) SystemPut(_ context.Context, v release.System, expected int64) (int64, error) {
	return put(s, s.systems, v, v.ID, (*release.System).Validate, s.workspaces.has, expected)
}

// SystemGet reads one system.
func (s *ReleaseStore) SystemGet(_ context.Context, id string) (ports.Stored[release.System], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.systems.get(id)
}

// SystemList lists a workspace's systems by id.
func (s *ReleaseStore) SystemList(_ context.Context, workspaceID string) ([]ports.Stored[release.System], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.systems.list(workspaceID), nil
}

// DeploymentPut creates or updates a deployment of a stored system.
func (s *ReleaseStore) DeploymentPut(_ context.Context, d release.Deployment, expected int64) (int64, error) {
	return put(s, s.deployments, d, d.ID, (*release.Deployment).Validate, s.systems.has, expected)
}

// DeploymentGet reads one deployment.
func (s *ReleaseStore) DeploymentGet(_ context.Context, id string) (ports.Stored[release.Deployment], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.deployments.get(id)
}

// DeploymentList lists a system's deployments by id.
func (s *ReleaseStore) DeploymentList(_ context.Context, systemID string) ([]ports.Stored[release.Deployment], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.deployments.list(systemID), nil
}

// EnvironmentPut creates or updates an environment of a stored system.
func (s *ReleaseStore) EnvironmentPut(_ context.Context, e release.Environment, expected int64) (int64, error) {
	return put(s, s.environments, e, e.ID, (*release.Environment).Validate, s.systems.has, expected)
}

// EnvironmentGet reads one environment.
func (s *ReleaseStore) EnvironmentGet(_ context.Context, id string) (ports.Stored[release.Environment], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.environments.get(id)
}

// EnvironmentList lists a system's environments by id.
func (s *ReleaseStore) EnvironmentList(_ context.Context, systemID string) ([]ports.Stored[release.Environment], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.environments.list(systemID), nil
}

// ResourcePut creates or updates a resource of a stored workspace.
func (s *ReleaseStore) ResourcePut(_ context.Context, r release.Resource, expected int64) (int64, error) {
	return put(s, s.resources, r, r.ID, (*release.Resource).Validate, s.workspaces.has, expected)
}

// ResourceGet reads one resource.
func (s *ReleaseStore) ResourceGet(_ context.Context, id string) (ports.Stored[release.Resource], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.resources.get(id)
}

// ResourceList pages through a workspace's resources by id.
func (s *ReleaseStore) ResourceList(_ context.Context, p ports.ResourceListParams) ([]ports.Stored[release.Resource], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := s.resources.byParent[p.WorkspaceID]
	i, found := slices.BinarySearch(ids, p.AfterID)
	if found {
		i++
	}
	ids = ids[i:]
	if p.Limit > 0 && len(ids) > p.Limit {
		ids = ids[:p.Limit]
	}
	out := make([]ports.Stored[release.Resource], 0, len(ids))
	for _, id := range ids {
		out = append(out, s.resources.stored(s.resources.rows[id]))
	}
	return out, nil
}

// JobAgentPut creates or updates a job agent.
func (s *ReleaseStore) JobAgentPut(_ context.Context, a release.JobAgent, expected int64) (int64, error) {
	return put(s, s.agents, a, a.ID, (*release.JobAgent).Validate, nil, expected)
}

// JobAgentGet reads one job agent.
func (s *ReleaseStore) JobAgentGet(_ context.Context, id string) (ports.Stored[release.JobAgent], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.agents.get(id)
}

// JobAgentList lists every job agent by id.
func (s *ReleaseStore) JobAgentList(_ context.Context) ([]ports.Stored[release.JobAgent], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.agents.list(""), nil
}

// policyRec is a stored policy: its JSON document (decoded on every read,
// which is the deep copy) and the columns listing sorts by.
type policyRec struct {
	doc       []byte
	priority  int
	enabled   bool
	version   int64
	updatedAt time.Time
}

func (r *policyRec) stored() (ports.Stored[policy.Policy], error) {
	var p policy.Policy
	if err := json.Unmarshal(r.doc, &p); err != nil {
		return ports.Stored[policy.Policy]{}, fmt.Errorf("decode policy: %w", err)
	}
	return ports.Stored[policy.Policy]{Value: p, Version: r.version, UpdatedAt: r.updatedAt}, nil
}

// PolicyPut creates or updates a policy after policy.Validate.
func (s *ReleaseStore) PolicyPut(_ context.Context, p policy.Policy, expected int64) (int64, error) {
	op := "put policy " + p.ID
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if expected < 0 {
		return 0, fmt.Errorf("%s: %w", op, release.Invalid("expected_version", "must not be negative"))
	}
	doc, err := json.Marshal(&p)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, release.Invalid("rules", err.Error()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.policies[p.ID]
	switch {
	case expected == 0 && cur != nil:
		return 0, fmt.Errorf("%s: already exists at version %d: %w", op, cur.version, ports.ErrConflict)
	case expected > 0 && cur == nil:
		return 0, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	case expected > 0 && cur.version != expected:
		return 0, fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, cur.version, ports.ErrConflict)
	}
	if cur == nil {
		cur = &policyRec{}
		s.policies[p.ID] = cur
	}
	cur.doc, cur.priority, cur.enabled = doc, p.Priority, p.Enabled
	cur.version++
	cur.updatedAt = s.now()
	return cur.version, nil
}

// PolicyGet reads one policy.
func (s *ReleaseStore) PolicyGet(_ context.Context, id string) (ports.Stored[policy.Policy], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.policies[id]
	if !ok {
		return ports.Stored[policy.Policy]{}, fmt.Errorf("get policy %s: %w", id, ports.ErrNotFound)
	}
	out, err := r.stored()
	if err != nil {
		return out, fmt.Errorf("get policy %s: %w", id, err)
	}
	return out, nil
}

// PolicyList lists policies by priority (highest first), then id.
func (s *ReleaseStore) PolicyList(_ context.Context, enabledOnly bool) ([]ports.Stored[policy.Policy], error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, 0, len(s.policies))
	for id, r := range s.policies {
		if !enabledOnly || r.enabled {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := cmp.Compare(s.policies[b].priority, s.policies[a].priority); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := make([]ports.Stored[policy.Policy], 0, len(ids))
	for _, id := range ids {
		p, err := s.policies[id].stored()
		if err != nil {
			return nil, fmt.Errorf("list policies: %s: %w", id, err)
		}
		out = append(out, p)
	}
	return out, nil
}
