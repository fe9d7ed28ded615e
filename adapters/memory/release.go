package memory

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ReleaseStore is the in-memory ports.ReleaseStore: every small port of
// the release chain on one store. One RWMutex guards
// everything; values are normalised by a JSON round trip on write (so they
// read back as from Postgres) and copied on read. Versions and jobs are kept
// in slices sorted by (created_at, id) per deployment and per target, so
// version pages and job histories are binary searches, never scans; targets
// are kept in key-sorted slices per system, deployment, environment and
// resource.
type ReleaseStore struct {
	// Catalog holds the policies' (and workflow templates') revisions; the
	// chain evaluates the latest published policy revisions.
	*Catalog

	clock  ports.Clock
	onPage func(rows int)

	mu           sync.RWMutex
	workspaces   *docTable[release.Workspace]
	systems      *docTable[release.System]
	deployments  *docTable[release.Deployment]
	environments *docTable[release.Environment]
	resources    *docTable[release.Resource]
	variableSets *docTable[release.VariableSet]
	agents       *docTable[release.JobAgent]
	relRules     *docTable[release.RelationshipRule]

	targets targetIndex

	versions      map[string]*release.DeploymentVersion
	versionsByDep map[string][]*release.DeploymentVersion
	approvals     map[string][]release.Approval
	skips         map[string]*release.PolicySkip

	releases map[string]*release.Release
	desired  map[release.ReleaseTarget]*ports.DesiredRelease
	// decisions are each target's recorded decisions, oldest first.
	decisions map[release.ReleaseTarget][]ports.TargetDecision

	jobs jobIndex
	// progression is environment progression's kept aggregate.
	progression progressionIndex
	// takers are the waiters of JobTakeNotify.
	takers wakeSet

	events eventOutbox
	// changes receives the event stream's changes (SetChanges); nil: none.
	changes *Changes
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
		Catalog:       NewCatalog(clock),
		clock:         clock,
		workspaces:    newDocTable("workspace", nil, copyWorkspace),
		systems:       newDocTable("system", func(v *release.System) string { return v.WorkspaceID }, copySystem),
		deployments:   newDocTable("deployment", func(v *release.Deployment) string { return v.SystemID }, copyDeployment),
		environments:  newDocTable("environment", func(v *release.Environment) string { return v.SystemID }, copyEnvironment),
		resources:     newDocTable("resource", func(v *release.Resource) string { return v.WorkspaceID }, copyResource),
		variableSets:  newDocTable("variable set", func(v *release.VariableSet) string { return v.SystemID }, copyVariableSet),
		agents:        newDocTable("job agent", nil, copyJobAgent),
		relRules:      newDocTable("relationship rule", func(v *release.RelationshipRule) string { return v.WorkspaceID }, copyRelationshipRule),
		targets:       newTargetIndex(),
		versions:      map[string]*release.DeploymentVersion{},
		versionsByDep: map[string][]*release.DeploymentVersion{},
		approvals:     map[string][]release.Approval{},
		skips:         map[string]*release.PolicySkip{},
		releases:      map[string]*release.Release{},
		desired:       map[release.ReleaseTarget]*ports.DesiredRelease{},
		jobs:          newJobIndex(),
		progression:   newProgressionIndex(),
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

// allIDs returns every id in order; the caller holds the lock.
func (t *docTable[T]) allIDs() []string {
	if len(t.byParent) == 1 {
		for _, ids := range t.byParent {
			return ids
		}
	}
	ids := make([]string, 0, len(t.rows))
	for id := range t.rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// unparent removes id from parent's ids; the caller holds the lock.
func (t *docTable[T]) unparent(parent, id string) {
	t.byParent[parent] = removeSorted(t.byParent[parent], id)
	if len(t.byParent[parent]) == 0 {
		delete(t.byParent, parent)
	}
}

// has reports whether id is stored; the caller holds the lock.
func (t *docTable[T]) has(id string) bool { _, ok := t.rows[id]; return ok }

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

// SetChanges makes the store (and its catalog) publish the event stream's
// changes to c, each once its write commits. Call it before first use.
func (s *ReleaseStore) SetChanges(c *Changes) {
	s.changes = c
	s.Catalog.changes = c
}

// workspaceOf is the workspace of a target's resource ("" when unknown);
// the caller holds the lock.
func (s *ReleaseStore) workspaceOf(targetKey string) string {
	t, err := release.ParseTargetKey(targetKey)
	if err != nil {
		return ""
	}
	r, err := s.resources.get(t.ResourceID)
	if err != nil {
		return ""
	}
	return r.Value.WorkspaceID
}
