package chain

import (
	"container/list"
	"context"
	"sync"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// scopeCacheTargets is how many targets, over every scope, a Chain's
// scope cache holds at most (about 100 bytes each with a version's order).
const scopeCacheTargets = 250_000

// scopeEntry is a scope's targets as of one generation
// (ports.ScopeTargets), with the rollout order over that very slice. It
// never changes once built: a batch may keep using one that was evicted
// or replaced meanwhile.
type scopeEntry struct {
	scope      ports.TargetScope
	generation int64
	targets    []release.ReleaseTarget
	order      *policy.RolloutOrder
}

// scopeCache keeps scopes' targets and rollout orders across batches, so
// that a batch reads a scope's list only when its generation changed (one
// cheap read otherwise), not the whole list once per batch: N²/B over a
// rollout. It holds at most limit targets, evicting the least recently
// used scopes, and is safe for concurrent batches.
type scopeCache struct {
	mu      sync.Mutex
	limit   int // zero: scopeCacheTargets
	held    int // targets held
	lru     *list.List
	entries map[ports.TargetScope]*list.Element // of *scopeEntry
}

// get is the scope's current entry: the cached one when the store says
// its generation is still current, else the list read now (and cached).
func (c *scopeCache) get(ctx context.Context, store ports.Targets, scope ports.TargetScope) (*scopeEntry, error) {
	c.mu.Lock()
	cached := c.lookup(scope)
	c.mu.Unlock()
	var known int64 // zero: the scope that never held a target, empty
	if cached != nil {
		known = cached.generation
	}
	st, err := store.ScopeTargets(ctx, ports.ScopeTargetsParams{DeploymentID: scope.DeploymentID, EnvironmentID: scope.EnvironmentID, Known: known})
	if err != nil {
		return nil, err
	}
	if !st.Changed && cached != nil {
		return cached, nil
	}
	e := &scopeEntry{scope: scope, generation: st.Generation, targets: st.Targets}
	e.order = policy.NewRolloutOrder(e.targets)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(e)
	return e, nil
}

// lookup is the scope's cached entry (nil: none), marked used; the caller
// holds mu.
func (c *scopeCache) lookup(scope ports.TargetScope) *scopeEntry {
	el, ok := c.entries[scope]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*scopeEntry)
}

// put caches e in place of its scope's entry, then evicts the least
// recently used entries past the limit; an entry over the limit on its own
// is not kept (nor does it flush the others). The caller holds mu.
func (c *scopeCache) put(e *scopeEntry) {
	if c.entries == nil {
		c.entries, c.lru = map[ports.TargetScope]*list.Element{}, list.New()
	}
	if c.limit == 0 {
		c.limit = scopeCacheTargets
	}
	if el, ok := c.entries[e.scope]; ok {
		c.remove(el)
	}
	if len(e.targets) > c.limit {
		return
	}
	c.entries[e.scope] = c.lru.PushFront(e)
	c.held += len(e.targets)
	for c.held > c.limit {
		c.remove(c.lru.Back())
	}
}

// remove drops an entry; the caller holds mu.
func (c *scopeCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*scopeEntry)
	delete(c.entries, e.scope)
	c.held -= len(e.targets)
}

// scopeRollout is the scope's targets and the rollout order over them. In
// a batch both come from the chain's scope cache, read once per batch;
// outside one the targets are listed and the order is nil (one target's
// read: the rule counts directly).
func (c *Chain) scopeRollout(ctx context.Context, scope ports.TargetScope) ([]release.ReleaseTarget, *policy.RolloutOrder, error) {
	b := batchOf(ctx)
	if b == nil {
		ts, err := c.Store.TargetList(ctx, ports.TargetListParams{Scope: scope})
		return ts, nil, err
	}
	e, ok := b.scopes[scope]
	if !ok {
		var err error
		if e, err = c.scopes.get(ctx, c.Store, scope); err != nil {
			return nil, nil, err
		}
		if b.scopes == nil {
			b.scopes = map[ports.TargetScope]*scopeEntry{}
		}
		b.scopes[scope] = e
	}
	return e.targets, e.order, nil
}
