package chain

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// fakeScopes answers ScopeTargets from a map of scope sizes (generation:
// the size), counting the lists it returns.
type fakeScopes struct {
	ports.Targets
	sizes map[string]int
	lists int
}

func (f *fakeScopes) ScopeTargets(_ context.Context, p ports.ScopeTargetsParams) (ports.ScopeTargets, error) {
	n := f.sizes[p.DeploymentID]
	out := ports.ScopeTargets{Generation: int64(n)}
	if out.Generation == p.Known {
		return out, nil
	}
	f.lists++
	out.Changed = true
	for i := range n {
		out.Targets = append(out.Targets, release.ReleaseTarget{DeploymentID: p.DeploymentID, EnvironmentID: p.EnvironmentID, ResourceID: fmt.Sprint(i)})
	}
	return out, nil
}

// TestScopeCacheBounded: the cache holds at most its limit of targets,
// evicting the least recently used scope (read again on its next use), and
// keeps no scope larger than the limit (evicting none for it); a kept scope is not listed again
// and keeps its order.
func TestScopeCacheBounded(t *testing.T) {
	ctx := t.Context()
	store := &fakeScopes{sizes: map[string]int{"a": 3, "b": 2, "c": 2, "huge": 9}}
	c := &scopeCache{limit: 5}
	get := func(d string) *scopeEntry {
		t.Helper()
		e, err := c.get(ctx, store, ports.TargetScope{DeploymentID: d, EnvironmentID: "prod"})
		require.NoError(t, err)
		require.Len(t, e.targets, store.sizes[d])
		require.LessOrEqual(t, c.held, c.limit)
		return e
	}
	a := get("a")
	get("b")
	require.Equal(t, 2, store.lists)
	require.Same(t, a, get("a"), "kept: not listed again")
	require.Equal(t, 2, store.lists)
	get("c") // 7 > 5: b, the least recently used, goes
	require.Equal(t, 3, store.lists)
	require.Same(t, a, get("a"))
	get("b")
	require.Equal(t, 4, store.lists, "b was evicted")
	get("huge")
	get("huge")
	require.Equal(t, 6, store.lists, "a scope over the limit is never kept")
	require.Same(t, a, get("a"), "nor does it evict the others")
	store.sizes["a"] = 4
	require.NotSame(t, a, get("a"), "a new generation is listed again")
}
