package porttest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relScopeTargets reads d1's targets in e1 given the generation known.
func relScopeTargets(t testT, e *relEnv, known int64) ports.ScopeTargets {
	t.Helper()
	got, err := e.s.ScopeTargets(e.ctx, ports.ScopeTargetsParams{DeploymentID: relD1, EnvironmentID: relE1, Known: known})
	require.NoError(t, err)
	return got
}

// relScopeTargetsGeneration: ScopeTargets lists the scope only when its
// generation is not the one known; every insert, delete and replacement
// of the scope's targets (even one keeping their count) gives a new
// generation, and a write of another scope or one that changes nothing
// keeps it.
func relScopeTargetsGeneration(t *testing.T, e *relEnv) {
	relWorld(t, e)
	require.Equal(t, ports.ScopeTargets{}, relScopeTargets(t, e, 0), "a scope that never held a target: generation zero, empty")
	scope := ports.TargetScope{DeploymentID: relD1, EnvironmentID: relE1}
	seen := map[int64]bool{0: true}
	known := int64(0)
	// step writes the scope's targets on resources rs and requires a new
	// generation listing them, then no list for it.
	step := func(name string, write func(), rs ...string) {
		t.Helper()
		write()
		got := relScopeTargets(t, e, known)
		require.True(t, got.Changed, "%s: changed", name)
		require.False(t, seen[got.Generation], "%s: generation %d is new", name, got.Generation)
		want := make([]release.ReleaseTarget, 0, len(rs))
		for _, r := range rs {
			want = append(want, tgt(relD1, relE1, r))
		}
		require.Equal(t, want, append([]release.ReleaseTarget{}, got.Targets...), "%s: the scope's targets by key", name)
		seen[got.Generation], known = true, got.Generation
		require.Equal(t, ports.ScopeTargets{Generation: known}, relScopeTargets(t, e, known), "%s: unchanged, no list", name)
	}
	step("insert", func() {
		relReplace(t, e, ports.TargetScope{DeploymentID: relD1}, tgt(relD1, relE1, relR2), tgt(relD1, relE1, relR1), tgt(relD1, relE2, relR1))
	},
		relR1, relR2)
	relReplace(t, e, ports.TargetScope{DeploymentID: relD1, EnvironmentID: relE2}, tgt(relD1, relE2, relR3))
	relReplace(t, e, ports.TargetScope{DeploymentID: relD2}, tgt(relD2, relE1, relR1))
	relReplace(t, e, scope, tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2))
	require.Equal(t, ports.ScopeTargets{Generation: known}, relScopeTargets(t, e, known), "other scopes' writes and an unchanged replacement keep the generation")
	step("insert one", func() {
		relReplace(t, e, scope, tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE1, relR3))
	},
		relR1, relR2, relR3)
	step("delete one", func() { relReplace(t, e, scope, tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR3)) }, relR1, relR3)
	step("replace with the same count", func() { relReplace(t, e, scope, tgt(relD1, relE1, relR2), tgt(relD1, relE1, relR3)) }, relR2, relR3)
	step("delete through a wider scope", func() { relReplace(t, e, ports.TargetScope{EnvironmentID: relE1}, tgt(relD1, relE1, relR3)) }, relR3)
	step("clear", func() { relReplace(t, e, scope) })
	got := relScopeTargets(t, e, 0)
	require.True(t, got.Changed, "a cleared scope is not the scope that never held a target")

	for _, c := range []struct {
		p     ports.ScopeTargetsParams
		field string
	}{
		{ports.ScopeTargetsParams{EnvironmentID: relE1}, "deployment_id"},
		{ports.ScopeTargetsParams{DeploymentID: relD1}, "environment_id"},
	} {
		_, err := e.s.ScopeTargets(e.ctx, c.p)
		requireInvalid(t, err, c.field)
	}
}

// relScopeTargetsConcurrent: a writer replaces the scope's targets over
// and over while readers read it, each keeping its list and generation as
// a cache would. A generation is only ever seen with one list, and once the
// writer is done every reader's kept list is the stored one: no list is
// ever kept under a generation newer than its contents.
func relScopeTargetsConcurrent(t *testing.T, e *relEnv) {
	relWorld(t, e)
	scope := ports.TargetScope{DeploymentID: relD1, EnvironmentID: relE1}
	sets := [][]string{{relR1}, {relR1, relR2}, {relR2, relR3}, {relR1, relR2, relR3}, {}, {relR3}, {relR1, relR3}}
	const writes, readers = 60, 3
	done := make(chan struct{})
	var mu sync.Mutex
	lists := map[int64][]release.ReleaseTarget{}
	var wg sync.WaitGroup
	kept := make([]ports.ScopeTargets, readers)
	errs := make([]error, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stop := false; !stop; {
				select {
				case <-done:
					stop = true // one more read after the last write
				default:
				}
				got, err := e.s.ScopeTargets(e.ctx, ports.ScopeTargetsParams{DeploymentID: relD1, EnvironmentID: relE1, Known: kept[r].Generation})
				if err != nil {
					errs[r] = err
					return
				}
				if !got.Changed {
					continue
				}
				kept[r] = got
				mu.Lock()
				prev, ok := lists[got.Generation]
				if !ok {
					lists[got.Generation] = got.Targets
				}
				mu.Unlock()
				if ok && !slices.Equal(prev, got.Targets) {
					errs[r] = fmt.Errorf("generation %d listed %v, then %v", got.Generation, prev, got.Targets)
					return
				}
			}
		}()
	}
	for i := range writes {
		var ts []release.ReleaseTarget
		for _, r := range sets[i%len(sets)] {
			ts = append(ts, tgt(relD1, relE1, r))
		}
		relReplace(t, e, scope, ts...)
	}
	close(done)
	wg.Wait()
	want, err := e.s.TargetList(e.ctx, ports.TargetListParams{Scope: scope})
	require.NoError(t, err)
	for r := range readers {
		require.NoError(t, errs[r], "reader %d", r)
		require.Equal(t, want, kept[r].Targets, "reader %d keeps the stored list", r)
		require.Equal(t, ports.ScopeTargets{Generation: kept[r].Generation}, relScopeTargets(t, e, kept[r].Generation), "reader %d: its generation is current", r)
	}
}
