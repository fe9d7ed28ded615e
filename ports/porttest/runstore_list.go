package porttest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// listAll pages through kind with page size limit and returns the ids.
func listAll(t testT, ctx context.Context, s ports.RunStore, kind reconcile.RunKind, nonTerminal bool, limit int) []string {
	t.Helper()
	var ids []string
	after := ""
	for range 1000 {
		page, err := s.RunList(ctx, ports.RunListParams{Kind: kind, NonTerminal: nonTerminal, AfterID: after, Limit: limit})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), limit, "a page never exceeds the limit")
		for _, r := range page {
			require.Equal(t, kind, r.Ref.Kind, "list stays within its kind")
			ids = append(ids, r.Ref.ID)
		}
		if len(page) < limit {
			return ids
		}
		after = page[len(page)-1].Ref.ID
	}
	require.Fail(t, "listing did not terminate")
	return nil
}

func runListPages(t *testing.T, ctx context.Context, s ports.RunStore) {
	// Inserted out of order, with ids whose byte order differs from
	// numeric order, and a same-id run of another kind.
	ids := []string{"m", "b", "a10", "z", "a2", "a1", "c", "B", "aa", "a"}
	for _, id := range ids {
		mustCreate(t, ctx, s, baseRow(reconcile.KindStandalone, id, reconcile.StandaloneQueued))
	}
	mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "a", reconcile.RepoPending))
	mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "zz", reconcile.RepoPending))

	want := slices.Clone(ids)
	sort.Strings(want) // byte order
	for limit := 1; limit <= len(ids)+1; limit++ {
		require.Equal(t, want, listAll(t, ctx, s, reconcile.KindStandalone, false, limit), "limit %d", limit)
	}
	// A page carries whole rows.
	page, err := s.RunList(ctx, ports.RunListParams{Kind: reconcile.KindStandalone, AfterID: "a2", Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	requireSameRun(t, baseRow(reconcile.KindStandalone, "aa", reconcile.StandaloneQueued), page[0])
	require.Equal(t, int64(1), page[0].Version)
	require.Equal(t, "b", page[1].Ref.ID)
	// AfterID need not exist; past the end is empty; other kinds stay apart.
	page, err = s.RunList(ctx, ports.RunListParams{Kind: reconcile.KindStandalone, AfterID: "y", Limit: 10})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "z", page[0].Ref.ID)
	page, err = s.RunList(ctx, ports.RunListParams{Kind: reconcile.KindStandalone, AfterID: "z", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page)
	require.Equal(t, []string{"a", "zz"}, listAll(t, ctx, s, reconcile.KindRepo, false, 5))
	require.Empty(t, listAll(t, ctx, s, reconcile.KindPRReview, false, 5))

	_, err = s.RunList(ctx, ports.RunListParams{Kind: "nope", Limit: 5})
	require.ErrorIs(t, err, ports.ErrInvalidRun)
}

func runListDefaultLimit(t *testing.T, ctx context.Context, s ports.RunStore) {
	for i := range ports.DefaultRunListLimit + 3 {
		mustCreate(t, ctx, s, baseRow(reconcile.KindPRReview, fmt.Sprintf("rv-%04d", i), reconcile.ReviewQueued))
	}
	for _, limit := range []int{0, -1} {
		page, err := s.RunList(ctx, ports.RunListParams{Kind: reconcile.KindPRReview, Limit: limit})
		require.NoError(t, err)
		require.Len(t, page, ports.DefaultRunListLimit, "limit %d", limit)
		require.Equal(t, "rv-0000", page[0].Ref.ID)
	}
}

func runListNonTerminal(t *testing.T, ctx context.Context, s ports.RunStore) {
	// One run per state of every machine; NonTerminal keeps exactly the runs
	// whose state the kind's machine does not list as terminal.
	for _, kind := range reconcile.Kinds {
		m := reconcile.MachineFor(kind)
		var want []string
		for _, st := range m.States {
			id := "st-" + string(st)
			mustCreate(t, ctx, s, baseRow(kind, id, st))
			if !m.IsTerminal(st) {
				want = append(want, id)
			}
		}
		sort.Strings(want)
		require.NotEmpty(t, want)
		require.Equal(t, want, listAll(t, ctx, s, kind, true, 3), "non-terminal %s runs", kind)
		require.Len(t, listAll(t, ctx, s, kind, false, 3), len(m.States), "all %s runs", kind)
	}

	// Terminality follows writes in both directions.
	ref := refOf(reconcile.KindStandalone, "st-running")
	got, err := s.RunGet(ctx, ref)
	require.NoError(t, err)
	v, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: got.Version, State: reconcile.StandaloneCompleted, Body: got.Body})
	require.NoError(t, err)
	require.NotContains(t, listAll(t, ctx, s, reconcile.KindStandalone, true, 10), ref.ID, "a run that became terminal leaves the resync list")
	_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: v, State: reconcile.StandaloneQueued, Body: got.Body})
	require.NoError(t, err)
	require.Contains(t, listAll(t, ctx, s, reconcile.KindStandalone, true, 10), ref.ID, "a retried run rejoins the resync list")
}

func runStates(t *testing.T, ctx context.Context, s ports.RunStore) {
	mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "d1", reconcile.RepoCompleted))
	mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "d2", reconcile.RepoRunning))
	mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "d3", reconcile.RepoQueued))
	mustCreate(t, ctx, s, baseRow(reconcile.KindStandalone, "d4", reconcile.StandaloneFailed))

	got, err := s.RunStates(ctx, reconcile.KindRepo, []string{"d1", "d2", "missing", "d4", "d1"})
	require.NoError(t, err)
	require.Equal(t, map[string]reconcile.State{"d1": reconcile.RepoCompleted, "d2": reconcile.RepoRunning}, got)

	got, err = s.RunStates(ctx, reconcile.KindRepo, nil)
	require.NoError(t, err)
	require.Empty(t, got)

	got, err = s.RunStates(ctx, reconcile.KindStandalone, []string{"d4"})
	require.NoError(t, err)
	require.Equal(t, map[string]reconcile.State{"d4": reconcile.StandaloneFailed}, got)

	_, err = s.RunStates(ctx, "nope", []string{"d1"})
	require.ErrorIs(t, err, ports.ErrInvalidRun)
}

// runDependents: RunDependents lists, in id order, the non-terminal runs
// of the kind whose DependsOn names the run; a terminal dependent, a run
// of another kind and a run depending on something else are left out, and
// a dependent that finished leaves the list.
func runDependents(t *testing.T, ctx context.Context, s ports.RunStore) {
	mk := func(kind reconcile.RunKind, id string, st reconcile.State, deps ...string) {
		r := baseRow(kind, id, st)
		r.DependsOn = deps
		mustCreate(t, ctx, s, r)
	}
	mk(reconcile.KindRepo, "parent", reconcile.RepoRunning)
	mk(reconcile.KindRepo, "waits-b", reconcile.RepoWaitingOnDeps, "other", "parent")
	mk(reconcile.KindRepo, "waits-a", reconcile.RepoPending, "parent")
	mk(reconcile.KindRepo, "done", reconcile.RepoCompleted, "parent")
	mk(reconcile.KindRepo, "elsewhere", reconcile.RepoPending, "other")
	mk(reconcile.KindStandalone, "waits-a", reconcile.StandaloneQueued, "parent")
	boss := baseRow(reconcile.KindRepo, "has-it-as-subtask", reconcile.RepoPROpened)
	boss.Subtasks = []reconcile.Subtask{{ID: "other"}, {ID: "parent", Blocking: true}}
	mustCreate(t, ctx, s, boss)
	got, err := s.RunDependents(ctx, reconcile.KindRepo, "parent")
	require.NoError(t, err)
	require.Equal(t, []string{"has-it-as-subtask", "waits-a", "waits-b"}, got, "dependents and the runs it is a subtask of")
	got, err = s.RunDependents(ctx, reconcile.KindRepo, "nobody")
	require.NoError(t, err)
	require.Empty(t, got)

	ref := refOf(reconcile.KindRepo, "waits-a")
	row, err := s.RunGet(ctx, ref)
	require.NoError(t, err)
	_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: row.Version, State: reconcile.RepoFailed, Body: row.Body})
	require.NoError(t, err)
	got, err = s.RunDependents(ctx, reconcile.KindRepo, "parent")
	require.NoError(t, err)
	require.Equal(t, []string{"has-it-as-subtask", "waits-b"}, got, "a dependent that finished is not woken")

	_, err = s.RunDependents(ctx, "nope", "parent")
	require.ErrorIs(t, err, ports.ErrInvalidRun)
}

// slotStates spells out which states hold an agent slot, independently of
// ports.HoldsSlot, so the suite checks the rule rather than mirroring it.
var slotStates = map[reconcile.RunKind][]reconcile.State{
	reconcile.KindRepo:            {"provisioning", "running"},
	reconcile.KindStandalone:      {"running"},
	reconcile.KindPRReview:        {"reviewing"},
	reconcile.KindPersistentAgent: {"provisioning", "running"},
}

func runCounts(t *testing.T, ctx context.Context, s ports.RunStore) {
	c, err := s.RunCounts(ctx, "acme/a")
	require.NoError(t, err)
	require.Equal(t, ports.RunCounts{}, c, "an empty store counts nothing")

	// Every state of every kind in repo a (twice), repo b (once) and no repo
	// (once).
	placements := []struct{ repo, suffix string }{{"acme/a", "a1"}, {"acme/a", "a2"}, {"acme/b", "b"}, {"", "none"}}
	perPlacement := 0
	for _, kind := range reconcile.Kinds {
		perPlacement += len(slotStates[kind])
		for _, st := range reconcile.MachineFor(kind).States {
			require.Equal(t, slices.Contains(slotStates[kind], st), ports.HoldsSlot(kind, st), "HoldsSlot(%s, %s)", kind, st)
			for _, p := range placements {
				row := baseRow(kind, string(st)+"-"+p.suffix, st)
				row.Repo = p.repo
				mustCreate(t, ctx, s, row)
			}
		}
	}
	require.Equal(t, 6, perPlacement, "the slot table covers six kind/state pairs")
	tests := []struct {
		repo string
		want ports.RunCounts
	}{
		{"acme/a", ports.RunCounts{GlobalActive: 4 * perPlacement, RepoActive: 2 * perPlacement}},
		{"acme/b", ports.RunCounts{GlobalActive: 4 * perPlacement, RepoActive: perPlacement}},
		{"acme/none", ports.RunCounts{GlobalActive: 4 * perPlacement}},
		{"", ports.RunCounts{GlobalActive: 4 * perPlacement}}, // runs without a repo share no repo slot
	}
	for _, tt := range tests {
		got, err := s.RunCounts(ctx, tt.repo)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "repo %q", tt.repo)
	}
}

func runCountsFollowWrites(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := baseRow(reconcile.KindRepo, "r", reconcile.RepoQueued)
	row.Repo = "acme/a"
	created := mustCreate(t, ctx, s, row)
	count := func() ports.RunCounts {
		c, err := s.RunCounts(ctx, "acme/a")
		require.NoError(t, err)
		return c
	}
	require.Equal(t, ports.RunCounts{}, count())
	v := created.Version
	for _, step := range []struct {
		state reconcile.State
		want  int
	}{{reconcile.RepoProvisioning, 1}, {reconcile.RepoRunning, 1}, {reconcile.RepoPROpened, 0}, {reconcile.RepoQueued, 0}, {reconcile.RepoProvisioning, 1}, {reconcile.RepoFailed, 0}} {
		nv, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: created.Ref, ExpectedVersion: v, State: step.state, Body: created.Body})
		require.NoError(t, err)
		v = nv
		require.Equal(t, ports.RunCounts{GlobalActive: step.want, RepoActive: step.want}, count(), "after %s", step.state)
	}
}
