package live

import (
	"context"
	"fmt"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Store is a release store whose object writes enqueue, in the same
// transaction, exactly the work they affect (see the package doc). Reads,
// and the writes of every other port, go to the store it wraps.
type Store struct {
	ports.ReleaseStore
	// Queue receives the work; Tx makes each write and its enqueues one
	// transaction.
	Queue ports.Queue
	Tx    ports.Transactor
}

// New returns the live store over store, queue and tx (all required).
func New(store ports.ReleaseStore, queue ports.Queue, tx ports.Transactor) *Store {
	return &Store{ReleaseStore: store, Queue: queue, Tx: tx}
}

var _ ports.ReleaseStore = (*Store)(nil)

// NoTx is the ports.Transactor of a store without transactions: it runs fn
// as it is, so a write and its enqueues are not atomic.
type NoTx struct{}

// InTx runs fn.
func (NoTx) InTx(ctx context.Context, fn func(ctx context.Context) error) error { return fn(ctx) }

// VariableSets implements ports.ObjectStore: a write enqueues the targets
// of the set's system whose resolved variables it changes.
func (s *Store) VariableSets() ports.Objects[release.VariableSet] {
	return &objects[release.VariableSet]{s: s, kind: &ports.VariableSetKind, inner: s.ReleaseStore.VariableSets(), affect: s.variableSetChanged}
}

// Deployments implements ports.ObjectStore: a write recomputes the
// deployment's targets and enqueues every one of them.
func (s *Store) Deployments() ports.Objects[release.Deployment] {
	return &objects[release.Deployment]{s: s, kind: &ports.DeploymentKind, inner: s.ReleaseStore.Deployments(),
		affect: func(ctx context.Context, _, d *release.Deployment) error {
			if d == nil {
				return nil // a delete: refused while the deployment has targets
			}
			return s.recompute(ctx, ports.TargetScope{DeploymentID: d.ID}, d.SystemID)
		}}
}

// Environments implements ports.ObjectStore: a write recomputes the
// environment's targets and enqueues every one of them.
func (s *Store) Environments() ports.Objects[release.Environment] {
	return &objects[release.Environment]{s: s, kind: &ports.EnvironmentKind, inner: s.ReleaseStore.Environments(),
		affect: func(ctx context.Context, _, e *release.Environment) error {
			if e == nil {
				return nil // a delete: refused while the environment has targets
			}
			return s.recompute(ctx, ports.TargetScope{EnvironmentID: e.ID}, e.SystemID)
		}}
}

// Resources implements ports.ObjectStore: a write recomputes the resource's
// targets in every system of its workspace and enqueues every one of them.
func (s *Store) Resources() ports.Objects[release.Resource] {
	return &objects[release.Resource]{s: s, kind: &ports.ResourceKind, inner: s.ReleaseStore.Resources(),
		affect: func(ctx context.Context, _, r *release.Resource) error {
			if r == nil {
				return nil // a delete: refused while the resource has targets
			}
			if err := s.recompute(ctx, ports.TargetScope{ResourceID: r.ID}, ""); err != nil {
				return err
			}
			return s.relatedChanged(ctx, r.WorkspaceID)
		}}
}

// RelationshipRules implements ports.ObjectStore: a write enqueues every
// target of a resource of the rule's workspace (what a reference variable
// resolves to may change).
func (s *Store) RelationshipRules() ports.Objects[release.RelationshipRule] {
	return &objects[release.RelationshipRule]{s: s, kind: &ports.RelationshipRuleKind, inner: s.ReleaseStore.RelationshipRules(),
		affect: func(ctx context.Context, before, after *release.RelationshipRule) error {
			r := after
			if r == nil {
				r = before
			}
			if err := s.workspaceTargets(ctx, r.WorkspaceID); err != nil {
				return fmt.Errorf("relationship rule %s: %w", r.ID, err)
			}
			return nil
		}}
}

// objects is one kind's store whose writes run with their affected work in
// one transaction.
type objects[T any] struct {
	s     *Store
	kind  *ports.Kind[T]
	inner ports.Objects[T]
	// affect enqueues what the write from before to after affects (nil
	// before: a create; nil after: a delete).
	affect func(ctx context.Context, before, after *T) error
}

// Get implements ports.Objects.
func (o *objects[T]) Get(ctx context.Context, id string) (ports.Stored[T], error) {
	return o.inner.Get(ctx, id)
}

// List implements ports.Objects.
func (o *objects[T]) List(ctx context.Context, p ports.ListParams) (ports.Page[T], error) {
	return o.inner.List(ctx, p)
}

// Put implements ports.Objects: the write and the work it affects commit
// together.
func (o *objects[T]) Put(ctx context.Context, v T, expectedVersion int64) (int64, error) {
	var n int64
	err := o.s.Tx.InTx(ctx, func(ctx context.Context) error {
		var before *T
		if expectedVersion > 0 {
			cur, err := o.inner.Get(ctx, o.kind.ID(&v))
			if err == nil {
				before = &cur.Value
			}
		}
		var err error
		if n, err = o.inner.Put(ctx, v, expectedVersion); err != nil {
			return err
		}
		return o.affect(ctx, before, &v)
	})
	return n, err
}

// Delete implements ports.Objects.
func (o *objects[T]) Delete(ctx context.Context, id string, expectedVersion int64) error {
	return o.s.Tx.InTx(ctx, func(ctx context.Context) error {
		cur, err := o.inner.Get(ctx, id)
		if err != nil {
			return err
		}
		if err := o.inner.Delete(ctx, id, expectedVersion); err != nil {
			return err
		}
		return o.affect(ctx, &cur.Value, nil)
	})
}
