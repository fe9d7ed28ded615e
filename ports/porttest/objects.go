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

// objListAll reads every page of k at limit, checking each page's size and
// that only the last page has no continue token.
func objListAll(t *testing.T, e *relEnv, k relCatalogKind, parent string, limit int) []string {
	t.Helper()
	var all []string
	p := ports.ListParams{Parent: parent, Limit: limit}
	for range 1000 {
		ids, next, err := k.list(e, p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(ids), limit, "page size")
		all = append(all, ids...)
		if next == "" {
			return all
		}
		require.Len(t, ids, limit, "only the last page is short")
		p.Continue = next
	}
	t.Fatal("the listing never ended")
	return nil
}

// objListPages: List pages in id order by the continue token, per parent
// and over all parents, with no empty last page; an object created behind
// the cursor is not seen, one ahead of it is, and a deleted one never
// makes the listing repeat or skip a survivor.
func objListPages(t *testing.T, setup func(*testing.T) (*testing.T, *relEnv)) {
	for _, k := range relCatalogKinds() {
		t.Run(k.name, func(t *testing.T) {
			t, e := setup(t)
			relWorld(t, e)
			before := objListAll(t, e, k, k.parent, ports.MaxListLimit)
			var made []string
			for i := range 8 {
				id := fmt.Sprintf("p%02d", i)
				_, err := k.put(e, id, k.parent, "page "+id, 0)
				require.NoError(t, err)
				made = append(made, id)
			}
			want := slices.Sorted(slices.Values(append(slices.Clone(before), made...)))
			for _, limit := range []int{1, 3, len(want), len(want) + 1} {
				require.Equal(t, want, objListAll(t, e, k, k.parent, limit), "limit %d", limit)
			}
			if k.parent != "" {
				all := objListAll(t, e, k, "", 2)
				require.Subset(t, all, want, "an empty parent lists every parent's objects")
				require.True(t, slices.IsSorted(all), "by id: %v", all)
				require.Equal(t, len(all), len(slices.Compact(slices.Clone(all))), "no repeats")
			}

			// Mutate between the pages of one listing.
			ids, next, err := k.list(e, ports.ListParams{Parent: k.parent, Limit: 4})
			require.NoError(t, err)
			require.Equal(t, want[:4], ids)
			_, err = k.put(e, "a-behind", k.parent, "behind", 0)
			require.NoError(t, err)
			_, err = k.put(e, "z-ahead", k.parent, "ahead", 0)
			require.NoError(t, err)
			require.NoError(t, k.del(e, want[4], 1), "delete the first object of the next page")
			rest := []string{}
			p := ports.ListParams{Parent: k.parent, Limit: 4, Continue: next}
			for p.Continue != "" {
				ids, p.Continue, err = k.list(e, p)
				require.NoError(t, err)
				rest = append(rest, ids...)
			}
			require.Equal(t, append(slices.Clone(want[5:]), "z-ahead"), rest)
		})
	}
	t.Run("default limit", func(t *testing.T) {
		t, e := setup(t)
		for i := range ports.DefaultListLimit + 1 {
			_, err := e.s.JobAgents().Put(e.ctx, release.JobAgent{ID: fmt.Sprintf("a%03d", i), Name: "A", Type: "t"}, 0)
			require.NoError(t, err)
		}
		page, err := e.s.JobAgents().List(e.ctx, ports.ListParams{})
		require.NoError(t, err)
		require.Len(t, page.Items, ports.DefaultListLimit)
		require.NotEmpty(t, page.Continue)
		page, err = e.s.JobAgents().List(e.ctx, ports.ListParams{Continue: page.Continue})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		require.Equal(t, fmt.Sprintf("a%03d", ports.DefaultListLimit), page.Items[0].Value.ID)
		require.Empty(t, page.Continue)
	})
}

// objListRefused: a bad limit, continue token or parent is invalid input
// naming its field.
func objListRefused(t *testing.T, e *relEnv) {
	relWorld(t, e)
	for _, c := range []struct {
		p     ports.ListParams
		field string
	}{
		{ports.ListParams{Limit: -1}, "limit"},
		{ports.ListParams{Limit: ports.MaxListLimit + 1}, "limit"},
		{ports.ListParams{Continue: "not a token"}, "continue"},
		{ports.ListParams{Continue: ports.ContinueToken("")}, "continue"},
	} {
		_, err := e.s.Deployments().List(e.ctx, c.p)
		requireInvalid(t, err, c.field)
	}
	_, err := e.s.Workspaces().List(e.ctx, ports.ListParams{Parent: relWS})
	requireInvalid(t, err, "parent")
	_, err = e.s.JobAgents().List(e.ctx, ports.ListParams{Parent: "x"})
	requireInvalid(t, err, "parent")
}

// objDelete checks Delete's compare-and-swap for every kind: a bad, stale
// or missing version changes nothing; a deleted object is gone from Get and
// List and its id can be created again at version 1.
func objDelete(t *testing.T, setup func(*testing.T) (*testing.T, *relEnv)) {
	for _, k := range relCatalogKinds() {
		t.Run(k.name, func(t *testing.T) {
			t, e := setup(t)
			relWorld(t, e)
			const id = "del1"
			_, err := k.put(e, id, k.parent, "first", 0)
			require.NoError(t, err)
			_, err = k.put(e, id, k.parent, "second", 1)
			require.NoError(t, err)

			requireInvalid(t, k.del(e, id, 0), "expected_version")
			requireInvalid(t, k.del(e, id, -1), "expected_version")
			require.ErrorIs(t, k.del(e, id, 1), ports.ErrConflict, "stale version")
			require.ErrorIs(t, k.del(e, id, 3), ports.ErrConflict, "future version")
			require.ErrorIs(t, k.del(e, "del-missing", 1), ports.ErrNotFound)
			label, v, _, err := k.get(e, id)
			require.NoError(t, err, "a refused delete changes nothing")
			require.Equal(t, "second", label)
			require.Equal(t, int64(2), v)

			require.NoError(t, k.del(e, id, 2))
			_, _, _, err = k.get(e, id)
			require.ErrorIs(t, err, ports.ErrNotFound)
			require.NotContains(t, objListAll(t, e, k, k.parent, ports.MaxListLimit), id)
			require.ErrorIs(t, k.del(e, id, 2), ports.ErrNotFound, "deleted twice")
			_, err = k.put(e, id, k.parent, "updated after delete", 2)
			require.ErrorIs(t, err, ports.ErrNotFound, "an update of a deleted object")

			v, err = k.put(e, id, k.parent, "again", 0)
			require.NoError(t, err)
			require.Equal(t, int64(1), v, "created again")
			require.Contains(t, objListAll(t, e, k, k.parent, ports.MaxListLimit), id)
		})
	}
}

// requireInUse asserts err refuses a delete because of dependent, and that
// the object is still stored.
func requireInUse(t *testing.T, err error, dependent string, stillThere func() error) {
	t.Helper()
	require.ErrorIs(t, err, ports.ErrInUse)
	require.ErrorIs(t, err, ports.ErrConflict, "in use is a conflict")
	require.ErrorContains(t, err, dependent)
	require.NoError(t, stillThere(), "a refused delete changes nothing")
}

// objDeleteInUse: a delete never cascades; each kind is refused while one
// of its dependents (ports.ObjectStore) is stored, naming it, and succeeds
// once they are gone.
func objDeleteInUse(t *testing.T, e *relEnv) {
	relWorld(t, e)
	ctx, s := e.ctx, e.s
	relReplace(t, e, ports.TargetScope{SystemID: relSys1}, tgt(relD1, relE1, relR1))
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)))
	requireInUse(t, s.Workspaces().Delete(ctx, relWS, 1), "system sys1", func() error { _, err := s.Workspaces().Get(ctx, relWS); return err })
	requireInUse(t, s.Systems().Delete(ctx, relSys1, 1), "deployment d1", func() error { _, err := s.Systems().Get(ctx, relSys1); return err })
	requireInUse(t, s.Deployments().Delete(ctx, relD1, 1), "version v1", func() error { _, err := s.Deployments().Get(ctx, relD1); return err })
	requireInUse(t, s.Environments().Delete(ctx, relE1, 1), "release target d1:e1:r1", func() error { _, err := s.Environments().Get(ctx, relE1); return err })
	requireInUse(t, s.Resources().Delete(ctx, relR1, 1), "release target d1:e1:r1", func() error { _, err := s.Resources().Get(ctx, relR1); return err })
	requireInUse(t, s.JobAgents().Delete(ctx, relAgent, 1), "deployment d1", func() error { _, err := s.JobAgents().Get(ctx, relAgent); return err })
	tgts, err := s.TargetList(ctx, ports.TargetListParams{})
	require.NoError(t, err)
	require.Equal(t, []release.ReleaseTarget{tgt(relD1, relE1, relR1)}, tgts, "no delete touched the targets")

	// What nothing depends on goes.
	require.NoError(t, s.Deployments().Delete(ctx, relD2, 1))
	require.NoError(t, s.Environments().Delete(ctx, relE2, 1))
	require.NoError(t, s.Resources().Delete(ctx, relR2, 1))

	// Recomputed targets free the environment and the resource.
	relReplace(t, e, ports.TargetScope{SystemID: relSys1})
	require.NoError(t, s.Environments().Delete(ctx, relE1, 1))
	require.NoError(t, s.Resources().Delete(ctx, relR1, 1))
	requireInUse(t, s.Deployments().Delete(ctx, relD1, 1), "version v1", func() error { _, err := s.Deployments().Get(ctx, relD1); return err })

	// A system goes once its deployments and environments have.
	requireInUse(t, s.Systems().Delete(ctx, relSys2, 1), "deployment d3", func() error { _, err := s.Systems().Get(ctx, relSys2); return err })
	require.NoError(t, s.Deployments().Delete(ctx, relD3, 1))
	requireInUse(t, s.Systems().Delete(ctx, relSys2, 1), "environment e3", func() error { _, err := s.Systems().Get(ctx, relSys2); return err })
	require.NoError(t, s.Environments().Delete(ctx, relE3, 1))
	require.NoError(t, s.Systems().Delete(ctx, relSys2, 1))

	// The agent goes once no deployment names it.
	d1, err := s.Deployments().Get(ctx, relD1)
	require.NoError(t, err)
	d1.Value.JobAgentID = ""
	_, err = s.Deployments().Put(ctx, d1.Value, d1.Version)
	require.NoError(t, err)
	require.NoError(t, s.JobAgents().Delete(ctx, relAgent, 1))

	// The workspace waits for its resources too.
	requireInUse(t, s.Workspaces().Delete(ctx, relWS, 1), "system sys1", func() error { _, err := s.Workspaces().Get(ctx, relWS); return err })
}

// objDeleteConcurrentChild races deleting a parent with creating a child
// (a system of a workspace, a version of a deployment, a target of an
// environment): exactly one of them wins, so no child is ever left without
// its parent.
func objDeleteConcurrentChild(t *testing.T, e *relEnv) {
	relWorld(t, e)
	ctx, s := e.ctx, e.s
	race := func(del, create func() error) (delErr, createErr error) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; delErr = del() }()
		go func() { defer wg.Done(); <-start; createErr = create() }()
		close(start)
		wg.Wait()
		return delErr, createErr
	}
	judge := func(round string, delErr, createErr error) {
		t.Helper()
		if delErr == nil {
			require.ErrorIs(t, createErr, ports.ErrNotFound, "%s: the parent was deleted first", round)
			return
		}
		require.ErrorIs(t, delErr, ports.ErrInUse, "%s", round)
		require.NoError(t, createErr, "%s: the child was created first", round)
	}
	for i := range 10 {
		ws, sys := fmt.Sprintf("race-ws%d", i), fmt.Sprintf("race-sys%d", i)
		_, err := s.Workspaces().Put(ctx, release.Workspace{ID: ws, Name: "W"}, 0)
		require.NoError(t, err)
		delErr, createErr := race(
			func() error { return s.Workspaces().Delete(ctx, ws, 1) },
			func() error {
				_, err := s.Systems().Put(ctx, release.System{ID: sys, WorkspaceID: ws, Name: "S"}, 0)
				return err
			})
		judge("workspace "+ws, delErr, createErr)

		dep := fmt.Sprintf("race-d%d", i)
		_, err = s.Deployments().Put(ctx, release.Deployment{ID: dep, SystemID: relSys1, Name: "D", Slug: "d"}, 0)
		require.NoError(t, err)
		delErr, createErr = race(
			func() error { return s.Deployments().Delete(ctx, dep, 1) },
			func() error { return s.VersionCreate(ctx, relVersion("race-v"+dep, dep, relAt(i))) })
		judge("deployment "+dep, delErr, createErr)

		env := fmt.Sprintf("race-e%d", i)
		_, err = s.Environments().Put(ctx, release.Environment{ID: env, SystemID: relSys1, Name: "E"}, 0)
		require.NoError(t, err)
		delErr, createErr = race(
			func() error { return s.Environments().Delete(ctx, env, 1) },
			func() error {
				_, err := s.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{EnvironmentID: env},
					Targets: []release.ReleaseTarget{tgt(relD1, env, relR1)}})
				return err
			})
		judge("environment "+env, delErr, createErr)
	}
}
