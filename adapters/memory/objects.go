package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// objects is the one in-memory ports.Objects, parameterised by a kind: its
// table, whether a parent id is stored, and what depends on an object.
type objects[T any] struct {
	s     *ReleaseStore
	kind  *ports.Kind[T]
	table *docTable[T]
	// parentHas reports whether a parent id is stored (nil: top-level).
	parentHas func(id string) bool
	// dependent names one stored dependent of id ("" when none); the caller
	// holds the lock.
	dependent func(id string) string
	// written, when set, records the hook event of a write just made (a
	// resource's); the caller holds the lock.
	written func(ctx context.Context, typ workflow.EventType, id string, at time.Time)
}

// Workspaces implements ports.ObjectStore.
func (s *ReleaseStore) Workspaces() ports.Objects[release.Workspace] {
	return &objects[release.Workspace]{s: s, kind: &ports.WorkspaceKind, table: s.workspaces,
		dependent: func(id string) string {
			return firstOf("system", s.systems.byParent[id]) + firstOf("resource", s.resources.byParent[id]) +
				firstOf("relationship rule", s.relRules.byParent[id])
		}}
}

// Systems implements ports.ObjectStore.
func (s *ReleaseStore) Systems() ports.Objects[release.System] {
	return &objects[release.System]{s: s, kind: &ports.SystemKind, table: s.systems, parentHas: s.workspaces.has,
		dependent: func(id string) string {
			return firstOf("deployment", s.deployments.byParent[id]) + firstOf("environment", s.environments.byParent[id]) +
				firstOf("variable set", s.variableSets.byParent[id])
		}}
}

// VariableSets implements ports.ObjectStore.
func (s *ReleaseStore) VariableSets() ports.Objects[release.VariableSet] {
	return &objects[release.VariableSet]{s: s, kind: &ports.VariableSetKind, table: s.variableSets, parentHas: s.systems.has,
		dependent: func(string) string { return "" }}
}

// RelationshipRules implements ports.ObjectStore.
func (s *ReleaseStore) RelationshipRules() ports.Objects[release.RelationshipRule] {
	return &objects[release.RelationshipRule]{s: s, kind: &ports.RelationshipRuleKind, table: s.relRules, parentHas: s.workspaces.has,
		dependent: func(string) string { return "" }}
}

// Deployments implements ports.ObjectStore.
func (s *ReleaseStore) Deployments() ports.Objects[release.Deployment] {
	return &objects[release.Deployment]{s: s, kind: &ports.DeploymentKind, table: s.deployments, parentHas: s.systems.has,
		dependent: func(id string) string {
			if vs := s.versionsByDep[id]; len(vs) > 0 {
				return "version " + vs[len(vs)-1].ID
			}
			return s.targetOf(s.targets.byDep[id])
		}}
}

// Environments implements ports.ObjectStore.
func (s *ReleaseStore) Environments() ports.Objects[release.Environment] {
	return &objects[release.Environment]{s: s, kind: &ports.EnvironmentKind, table: s.environments, parentHas: s.systems.has,
		dependent: func(id string) string { return s.targetOf(s.targets.byEnv[id]) }}
}

// Resources implements ports.ObjectStore.
func (s *ReleaseStore) Resources() ports.Objects[release.Resource] {
	return &objects[release.Resource]{s: s, kind: &ports.ResourceKind, table: s.resources, parentHas: s.workspaces.has,
		dependent: func(id string) string { return s.targetOf(s.targets.byRes[id]) },
		written: func(ctx context.Context, typ workflow.EventType, id string, at time.Time) {
			s.recordEvents(ctx, ports.ResourceEvent(typ, id, at))
		}}
}

// JobAgents implements ports.ObjectStore.
func (s *ReleaseStore) JobAgents() ports.Objects[release.JobAgent] {
	return &objects[release.JobAgent]{s: s, kind: &ports.JobAgentKind, table: s.agents,
		dependent: func(id string) string {
			var ids []string
			for did, d := range s.deployments.rows {
				if d.Value.JobAgentID == id {
					ids = append(ids, did)
				}
			}
			slices.Sort(ids)
			return firstOf("deployment", ids)
		}}
}

// firstOf names the first of ids as a kind, "" when there is none.
func firstOf(kind string, ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return kind + " " + ids[0]
}

// targetOf names the first of recs as a release target.
func (s *ReleaseStore) targetOf(recs []*targetRec) string {
	if len(recs) == 0 {
		return ""
	}
	return "release target " + recs[0].key
}

// Get implements ports.Objects.
func (o *objects[T]) Get(ctx context.Context, id string) (ports.Stored[T], error) {
	defer o.s.rlock(ctx)()
	return o.table.get(id)
}

// List implements ports.Objects.
func (o *objects[T]) List(ctx context.Context, p ports.ListParams) (ports.Page[T], error) {
	after, limit, err := ports.ListCursor(o.kind, p)
	if err != nil {
		return ports.Page[T]{}, fmt.Errorf("list %s: %w", o.kind.Plural, err)
	}
	defer o.s.rlock(ctx)()
	var ids []string
	switch {
	case p.Workspace != "" && o.kind.ParentKind == ports.SystemKind.Name:
		ids = o.inWorkspace(p.Workspace, p.Parent)
	case p.Workspace != "" && p.Parent != "" && p.Parent != p.Workspace:
		// a workspace-parented kind: another parent than the workspace
	case p.Workspace != "":
		ids = o.table.byParent[p.Workspace]
	case p.Parent != "" || o.parentHas == nil:
		ids = o.table.byParent[p.Parent]
	default:
		ids = o.table.allIDs()
	}
	i, found := slices.BinarySearch(ids, after)
	if found {
		i++
	}
	ids = ids[i:]
	var page ports.Page[T]
	if len(ids) > limit {
		ids = ids[:limit]
		page.Continue = ports.ContinueToken(ids[limit-1])
	}
	page.Items = make([]ports.Stored[T], 0, len(ids))
	for _, id := range ids {
		page.Items = append(page.Items, o.table.stored(o.table.rows[id]))
	}
	return page, nil
}

// inWorkspace lists, in id order, the ids of a system-parented kind whose
// system is in workspace ws (and is parent, when given); the caller holds
// the lock.
func (o *objects[T]) inWorkspace(ws, parent string) []string {
	var ids []string
	for _, sys := range o.s.systems.byParent[ws] {
		if parent == "" || parent == sys {
			ids = append(ids, o.table.byParent[sys]...)
		}
	}
	slices.Sort(ids)
	return ids
}

// Put implements ports.Objects: validate, then normalise, then (under the
// lock) check the parent and the version.
func (o *objects[T]) Put(ctx context.Context, v T, expected int64) (int64, error) {
	t, id := o.table, o.kind.ID(&v)
	op := "put " + o.kind.Name + " " + id
	if err := o.kind.Validate(&v); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if expected < 0 {
		return 0, fmt.Errorf("%s: %w", op, release.Invalid("expected_version", "must not be negative"))
	}
	norm, err := jsonRoundTrip(&v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, release.Invalid(o.kind.Name, err.Error()))
	}

	s := o.s
	defer s.lock(ctx)()
	parent := o.kind.ParentOf(&norm)
	if o.parentHas != nil && !o.parentHas(parent) {
		return 0, fmt.Errorf("%s: %s %s: %w", op, o.kind.ParentKind, parent, ports.ErrNotFound)
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
		s.onUndo(ctx, func() { delete(t.rows, id); t.unparent(parent, id) })
	} else {
		before, old := *cur, o.kind.ParentOf(&cur.Value)
		if old != parent {
			t.unparent(old, id)
			t.byParent[parent] = insertSorted(t.byParent[parent], id)
		}
		s.onUndo(ctx, func() {
			*cur = before
			if old != parent {
				t.unparent(parent, id)
				t.byParent[old] = insertSorted(t.byParent[old], id)
			}
		})
	}
	created := cur.Version == 0
	cur.Value = norm
	cur.Version++
	cur.UpdatedAt = s.now()
	if o.written != nil {
		typ := workflow.EventResourceUpdated
		if created {
			typ = workflow.EventResourceCreated
		}
		o.written(ctx, typ, id, cur.UpdatedAt)
	}
	return cur.Version, nil
}

// Delete implements ports.Objects.
func (o *objects[T]) Delete(ctx context.Context, id string, expected int64) error {
	op := "delete " + o.kind.Name + " " + id
	if err := ports.CheckDelete(expected); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s, t := o.s, o.table
	defer s.lock(ctx)()
	cur := t.rows[id]
	switch {
	case cur == nil:
		return fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	case cur.Version != expected:
		return fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, cur.Version, ports.ErrConflict)
	}
	if dep := o.dependent(id); dep != "" {
		return fmt.Errorf("%s: %s belongs to it: %w", op, dep, ports.ErrInUse)
	}
	parent := o.kind.ParentOf(&cur.Value)
	t.unparent(parent, id)
	delete(t.rows, id)
	s.onUndo(ctx, func() { t.rows[id] = cur; t.byParent[parent] = insertSorted(t.byParent[parent], id) })
	if o.written != nil {
		o.written(ctx, workflow.EventResourceDeleted, id, s.now())
	}
	return nil
}
