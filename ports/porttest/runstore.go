package porttest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// RunStore is the conformance suite of ports.RunStore. newStore is called
// once per subtest and must return an empty store; subtests run in parallel.
func RunStore(t *testing.T, newStore func(t *testing.T) ports.RunStore) {
	t.Helper()
	setup := func(t *testing.T) (*testing.T, context.Context, ports.RunStore) {
		t.Helper()
		t.Parallel()
		return t, t.Context(), newStore(t)
	}
	t.Run("CreateGetRoundTrip", func(t *testing.T) { runCreateGetRoundTrip(setup(t)) })
	t.Run("CreateIgnoresCallerVersionAndTimes", func(t *testing.T) { runCreateIgnoresCaller(setup(t)) })
	t.Run("CreateDuplicateConflicts", func(t *testing.T) { runCreateDuplicate(setup(t)) })
	t.Run("CreateRejectsInvalid", func(t *testing.T) { runCreateInvalid(setup(t)) })
	t.Run("GetMissingNotFound", func(t *testing.T) { runGetMissing(setup(t)) })
	t.Run("UpdateCompareAndSwap", func(t *testing.T) { runUpdateCAS(t, newStore) })
	t.Run("UpdateChainBumpsVersion", func(t *testing.T) { runUpdateChain(setup(t)) })
	t.Run("UpdateResetPod", func(t *testing.T) { runUpdateResetPod(setup(t)) })
	t.Run("UpdateSubtasks", func(t *testing.T) { runUpdateSubtasks(setup(t)) })
	t.Run("UpdateVersionProperty", func(t *testing.T) { runUpdateProperty(setup(t)) })
	t.Run("Observe", func(t *testing.T) { runObserve(t, newStore) })
	t.Run("ObserveInvalidatesStaleDecision", func(t *testing.T) { runObserveInvalidates(setup(t)) })
	t.Run("ListPagesByID", func(t *testing.T) { runListPages(setup(t)) })
	t.Run("ListDefaultLimit", func(t *testing.T) { runListDefaultLimit(setup(t)) })
	t.Run("ListNonTerminal", func(t *testing.T) { runListNonTerminal(setup(t)) })
	t.Run("States", func(t *testing.T) { runStates(setup(t)) })
	t.Run("Dependents", func(t *testing.T) { runDependents(setup(t)) })
	t.Run("Counts", func(t *testing.T) { runCounts(setup(t)) })
	t.Run("CountsFollowWrites", func(t *testing.T) { runCountsFollowWrites(setup(t)) })
	t.Run("RowsAreCopies", func(t *testing.T) { runRowsAreCopies(setup(t)) })
	t.Run("ConcurrentIncrements", func(t *testing.T) { runConcurrentIncrements(setup(t)) })
	t.Run("ListByState", func(t *testing.T) { runListByState(setup(t)) })
	t.Run("DecisionsRecorded", func(t *testing.T) { runDecisionsRecorded(setup(t)) })
	t.Run("DecisionsStaleWrite", func(t *testing.T) { runDecisionsStaleWrite(setup(t)) })
	t.Run("DecisionsBounded", func(t *testing.T) { runDecisionsBounded(setup(t)) })
}

// testT is what the suite's bodies need from *testing.T and *rapid.T.
type testT interface {
	require.TestingT
	Helper()
}

// refOf builds a ref.
func refOf(kind reconcile.RunKind, id string) reconcile.RunRef {
	return reconcile.RunRef{Kind: kind, ID: id}
}

// baseRow is a minimal valid row.
func baseRow(kind reconcile.RunKind, id string, state reconcile.State) ports.RunRow {
	return ports.RunRow{Ref: refOf(kind, id), State: state, Body: json.RawMessage(`{"n":0}`)}
}

// fullRow sets every column so round trips cover them all. Times are whole
// microseconds in UTC, the precision every adapter keeps.
func fullRow(id string) ports.RunRow {
	exit := 3
	return ports.RunRow{
		Ref:   refOf(reconcile.KindRepo, id),
		State: reconcile.RepoRunning,
		Repo:  "acme/widgets",
		Body:  json.RawMessage(`{"prompt":"fix it","nested":{"a":[1,2,3]},"n":0}`),
		Settings: reconcile.Settings{
			StallThreshold: reconcile.Duration(20 * time.Minute),
			AutoMerge:      true,
			MaxAutoResumes: 4,
			ReviewTrigger:  reconcile.ReviewOnCIPass,
			OffPeak:        reconcile.OffPeak{Only: true, StartHour: 22, EndHour: 6},
			PodLifecycle:   reconcile.LifecycleSticky,
		},
		Pod:       &reconcile.Pod{Name: "pod-1", Phase: reconcile.PodTerminated, ExitCode: &exit, LastError: "boom"},
		PR:        &reconcile.PullRequest{URL: "https://example.test/pr/7", Number: 7, State: reconcile.PROpen, Mergeable: true, Comments: 2, HeadSHA: "abc123"},
		Heartbeat: time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC),
		DependsOn: []string{"dep-a", "dep-b"},
		Subtasks:  []reconcile.Subtask{{ID: "child-1", State: reconcile.RepoQueued, Blocking: true}, {ID: "child-2", State: reconcile.RepoCompleted}},
	}
}

// requireSameRun compares everything but Version and the adapter's
// timestamps; bodies compare as JSON values (stores may re-encode them).
func requireSameRun(t testT, want, got ports.RunRow) {
	t.Helper()
	require.Equal(t, want.Ref, got.Ref, "ref")
	require.Equal(t, want.State, got.State, "state of %s", want.Ref)
	require.Equal(t, want.Repo, got.Repo, "repo of %s", want.Ref)
	wantBody := want.Body
	if len(wantBody) == 0 {
		wantBody = json.RawMessage(`{}`)
	}
	require.JSONEq(t, string(wantBody), string(got.Body), "body of %s", want.Ref)
	require.Equal(t, want.Settings, got.Settings, "settings of %s", want.Ref)
	require.Equal(t, want.Pod, got.Pod, "pod of %s", want.Ref)
	require.Equal(t, want.PR, got.PR, "pr of %s", want.Ref)
	require.True(t, want.Heartbeat.Equal(got.Heartbeat), "heartbeat of %s: want %v, got %v", want.Ref, want.Heartbeat, got.Heartbeat)
	require.Equal(t, want.DependsOn, got.DependsOn, "depends_on of %s", want.Ref)
	require.Equal(t, want.Subtasks, got.Subtasks, "subtasks of %s", want.Ref)
}

// requireUnchanged asserts the stored row equals before in every field.
func requireUnchanged(t testT, s ports.RunStore, before ports.RunRow) {
	t.Helper()
	got, err := s.RunGet(context.Background(), before.Ref)
	require.NoError(t, err)
	requireSameRun(t, before, got)
	require.Equal(t, before.Version, got.Version, "version of %s", before.Ref)
	require.True(t, before.UpdatedAt.Equal(got.UpdatedAt), "updated_at of %s changed", before.Ref)
}

// mustCreate creates row and returns the stored row.
func mustCreate(t testT, ctx context.Context, s ports.RunStore, row ports.RunRow) ports.RunRow {
	t.Helper()
	got, err := s.RunCreate(ctx, row)
	require.NoError(t, err, "create %s", row.Ref)
	return got
}

func runCreateGetRoundTrip(t *testing.T, ctx context.Context, s ports.RunStore) {
	want := fullRow("r1")
	created := mustCreate(t, ctx, s, want)
	requireSameRun(t, want, created)
	require.Equal(t, int64(1), created.Version)
	require.False(t, created.CreatedAt.IsZero(), "created_at is set from the store's clock")
	require.True(t, created.CreatedAt.Equal(created.UpdatedAt), "a new run was last updated when created")

	got, err := s.RunGet(ctx, want.Ref)
	require.NoError(t, err)
	requireSameRun(t, want, got)
	require.Equal(t, int64(1), got.Version)
	require.True(t, created.CreatedAt.Equal(got.CreatedAt))
	require.True(t, created.UpdatedAt.Equal(got.UpdatedAt))

	// A row with only the required fields reads back with empty optionals
	// and an empty-object body.
	minimal := ports.RunRow{Ref: refOf(reconcile.KindStandalone, "s1"), State: reconcile.StandaloneQueued}
	mustCreate(t, ctx, s, minimal)
	got, err = s.RunGet(ctx, minimal.Ref)
	require.NoError(t, err)
	requireSameRun(t, minimal, got)
	require.Nil(t, got.Pod)
	require.Nil(t, got.PR)
	require.True(t, got.Heartbeat.IsZero())
	require.Empty(t, got.DependsOn)
	require.Empty(t, got.Subtasks)
}

func runCreateIgnoresCaller(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := baseRow(reconcile.KindStandalone, "s1", reconcile.StandaloneQueued)
	past := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	row.Version, row.CreatedAt, row.UpdatedAt = 42, past, past
	created := mustCreate(t, ctx, s, row)
	require.Equal(t, int64(1), created.Version)
	require.False(t, created.CreatedAt.Equal(past), "created_at comes from the store's clock")
	got, err := s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Version)
	require.True(t, created.CreatedAt.Equal(got.CreatedAt))
}

func runCreateDuplicate(t *testing.T, ctx context.Context, s ports.RunStore) {
	first := mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "dup", reconcile.RepoPending))

	again := baseRow(reconcile.KindRepo, "dup", reconcile.RepoRunning)
	again.Body = json.RawMessage(`{"n":99}`)
	_, err := s.RunCreate(ctx, again)
	require.ErrorIs(t, err, ports.ErrConflict)
	require.Contains(t, err.Error(), "dup", "the error names the run")
	requireUnchanged(t, s, first)

	// The same id under another kind is a different run.
	other := mustCreate(t, ctx, s, baseRow(reconcile.KindStandalone, "dup", reconcile.StandaloneQueued))
	require.Equal(t, int64(1), other.Version)
	requireUnchanged(t, s, first)
}

func runCreateInvalid(t *testing.T, ctx context.Context, s ports.RunStore) {
	tests := []struct {
		name  string
		row   ports.RunRow
		field string
	}{
		{"unknown kind", baseRow("nope", "x", reconcile.RepoQueued), "kind"},
		{"empty id", baseRow(reconcile.KindRepo, "", reconcile.RepoQueued), "id"},
		{"state of another machine", baseRow(reconcile.KindRepo, "x", reconcile.ReviewRunning), "state"},
		{"empty state", baseRow(reconcile.KindRepo, "x", ""), "state"},
		{"body not JSON", func() ports.RunRow {
			r := baseRow(reconcile.KindRepo, "x", reconcile.RepoQueued)
			r.Body = json.RawMessage(`{"n":`)
			return r
		}(), "body"},
		{"body not an object", func() ports.RunRow {
			r := baseRow(reconcile.KindRepo, "x", reconcile.RepoQueued)
			r.Body = json.RawMessage(`[1,2]`)
			return r
		}(), "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.RunCreate(ctx, tt.row)
			require.ErrorIs(t, err, ports.ErrInvalidRun)
			require.Contains(t, err.Error(), tt.field)
		})
	}
	// Nothing was stored by the rejected writes.
	_, err := s.RunGet(ctx, refOf(reconcile.KindRepo, "x"))
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func runGetMissing(t *testing.T, ctx context.Context, s ports.RunStore) {
	mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "present", reconcile.RepoPending))
	for _, ref := range []reconcile.RunRef{
		refOf(reconcile.KindRepo, "absent"),
		refOf(reconcile.KindStandalone, "present"), // same id, other kind
	} {
		_, err := s.RunGet(ctx, ref)
		require.ErrorIs(t, err, ports.ErrNotFound, "get %s", ref)
	}
}

func runUpdateCAS(t *testing.T, newStore func(t *testing.T) ports.RunStore) {
	t.Parallel()
	tests := []struct {
		name     string
		expected func(current int64) int64
		state    reconcile.State
		ref      reconcile.RunRef
		wantErr  error
	}{
		{"matching version writes", func(v int64) int64 { return v }, reconcile.RepoQueued, refOf(reconcile.KindRepo, "r"), nil},
		{"stale version conflicts", func(v int64) int64 { return v - 1 }, reconcile.RepoQueued, refOf(reconcile.KindRepo, "r"), ports.ErrConflict},
		{"future version conflicts", func(v int64) int64 { return v + 1 }, reconcile.RepoQueued, refOf(reconcile.KindRepo, "r"), ports.ErrConflict},
		{"zero version conflicts", func(int64) int64 { return 0 }, reconcile.RepoQueued, refOf(reconcile.KindRepo, "r"), ports.ErrConflict},
		{"missing run not found", func(v int64) int64 { return v }, reconcile.RepoQueued, refOf(reconcile.KindRepo, "absent"), ports.ErrNotFound},
		{"same id other kind not found", func(v int64) int64 { return v }, reconcile.StandaloneQueued, refOf(reconcile.KindStandalone, "r"), ports.ErrNotFound},
		{"invalid state rejected", func(v int64) int64 { return v }, "bogus", refOf(reconcile.KindRepo, "r"), ports.ErrInvalidRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, s := t.Context(), newStore(t)
			// Start from version 2 so "stale" is a real earlier version.
			created := mustCreate(t, ctx, s, fullRow("r"))
			v, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: created.Ref, ExpectedVersion: 1, State: reconcile.RepoRunning, Body: json.RawMessage(`{"n":1}`)})
			require.NoError(t, err)
			before, err := s.RunGet(ctx, created.Ref)
			require.NoError(t, err)
			require.Equal(t, v, before.Version)

			newBody := json.RawMessage(`{"n":2,"note":"written"}`)
			got, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: tt.ref, ExpectedVersion: tt.expected(before.Version), State: tt.state, Body: newBody})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Contains(t, err.Error(), tt.ref.ID, "the error names the run")
				requireUnchanged(t, s, before)
				return
			}
			require.NoError(t, err)
			require.Equal(t, before.Version+1, got)
			after, err := s.RunGet(ctx, created.Ref)
			require.NoError(t, err)
			want := before
			want.State, want.Body = tt.state, newBody
			requireSameRun(t, want, after) // observations and settings untouched
			require.Equal(t, got, after.Version)
			require.True(t, after.CreatedAt.Equal(created.CreatedAt), "created_at never changes")
			require.False(t, after.UpdatedAt.Before(before.UpdatedAt), "updated_at never goes back")
		})
	}
}

func runUpdateResetPod(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := mustCreate(t, ctx, s, baseRow(reconcile.KindStandalone, "p", reconcile.StandaloneFailed))
	code := 1
	v, err := s.RunObserve(ctx, ports.RunObserveParams{Ref: row.Ref, Pod: &reconcile.Pod{Name: "old", Phase: reconcile.PodTerminated, ExitCode: &code}})
	require.NoError(t, err)
	// A write without ResetPod keeps the observation.
	v, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v, State: reconcile.StandaloneQueued})
	require.NoError(t, err)
	got, err := s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.NotNil(t, got.Pod)
	// A launch forgets the previous attempt's pod in the same write.
	_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v, State: reconcile.StandaloneRunning, ResetPod: true})
	require.NoError(t, err)
	got, err = s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Nil(t, got.Pod)
	require.Equal(t, reconcile.StandaloneRunning, got.State)
}

// runUpdateSubtasks: Subtasks replaces the subtasks in the write; a write
// without it keeps them; an empty list clears them.
func runUpdateSubtasks(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "parent", reconcile.RepoQueued))
	set := []reconcile.Subtask{{ID: "child-a", Blocking: true}, {ID: "child-b"}}
	v, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: row.Version, State: row.State, Subtasks: &set})
	require.NoError(t, err)
	got, err := s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, set, got.Subtasks)
	v, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v, State: row.State})
	require.NoError(t, err)
	got, err = s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, set, got.Subtasks, "a write without Subtasks keeps them")
	none := []reconcile.Subtask{}
	_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v, State: row.State, Subtasks: &none})
	require.NoError(t, err)
	got, err = s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Empty(t, got.Subtasks)
}

func runUpdateChain(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := mustCreate(t, ctx, s, baseRow(reconcile.KindStandalone, "s", reconcile.StandaloneQueued))
	states := []reconcile.State{reconcile.StandaloneRunning, reconcile.StandaloneFailed, reconcile.StandaloneQueued, reconcile.StandaloneRunning}
	v := row.Version
	for i, st := range states {
		nv, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v, State: st, Body: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))})
		require.NoError(t, err)
		require.Equal(t, v+1, nv, "every write bumps the version by one")
		// The version just consumed can never win again.
		_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v, State: reconcile.StandaloneCancelled})
		require.ErrorIs(t, err, ports.ErrConflict)
		v = nv
	}
	got, err := s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.StandaloneRunning, got.State)
	require.Equal(t, v, got.Version)
	require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, len(states)), string(got.Body))
}

// runUpdateProperty states the CAS invariant over random write sequences: a
// write succeeds iff it names the current version; each success bumps the
// version by exactly one; the stored state is the last successful write.
func runUpdateProperty(t *testing.T, ctx context.Context, s ports.RunStore) {
	states := reconcile.RepoMachine.States
	var seq atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		ref := refOf(reconcile.KindRepo, fmt.Sprintf("prop-%d", seq.Add(1)))
		mustCreate(rt, ctx, s, ports.RunRow{Ref: ref, State: reconcile.RepoPending})
		version, state, n := int64(1), reconcile.RepoPending, 0
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := range steps {
			expected := version + rapid.Int64Range(-2, 1).Draw(rt, fmt.Sprintf("offset%d", i))
			next := rapid.SampledFrom(states).Draw(rt, fmt.Sprintf("state%d", i))
			if rapid.Bool().Draw(rt, fmt.Sprintf("observe%d", i)) {
				v, err := s.RunObserve(ctx, ports.RunObserveParams{Ref: ref, Heartbeat: time.Unix(int64(i), 0)})
				require.NoError(rt, err)
				require.Equal(rt, version+1, v)
				version = v
				continue
			}
			v, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: expected, State: next, Body: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))})
			if expected != version {
				require.ErrorIs(rt, err, ports.ErrConflict)
				continue
			}
			require.NoError(rt, err)
			require.Equal(rt, version+1, v)
			version, state, n = v, next, i+1
		}
		got, err := s.RunGet(ctx, ref)
		require.NoError(rt, err)
		require.Equal(rt, version, got.Version)
		require.Equal(rt, state, got.State)
		if n > 0 {
			require.JSONEq(rt, fmt.Sprintf(`{"n":%d}`, n), string(got.Body))
		}
	})
}

func runObserve(t *testing.T, newStore func(t *testing.T) ports.RunStore) {
	t.Parallel()
	exit := 0
	pod := &reconcile.Pod{Name: "p2", Phase: reconcile.PodRunning}
	donePod := &reconcile.Pod{Name: "p2", Phase: reconcile.PodTerminated, ExitCode: &exit}
	pr := &reconcile.PullRequest{URL: "https://example.test/pr/9", Number: 9, State: reconcile.PRMerged, Merged: true, HeadSHA: "def"}
	beat := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	tests := []struct {
		name   string
		params ports.RunObserveParams
		want   func(r *ports.RunRow)
	}{
		{"pod only", ports.RunObserveParams{Pod: pod}, func(r *ports.RunRow) { r.Pod = pod }},
		{"terminated pod with exit code", ports.RunObserveParams{Pod: donePod}, func(r *ports.RunRow) { r.Pod = donePod }},
		{"pr only", ports.RunObserveParams{PR: pr}, func(r *ports.RunRow) { r.PR = pr }},
		{"heartbeat only", ports.RunObserveParams{Heartbeat: beat}, func(r *ports.RunRow) { r.Heartbeat = beat }},
		{"nothing still bumps", ports.RunObserveParams{}, func(*ports.RunRow) {}},
		{"patch adds a key", ports.RunObserveParams{Patch: map[string]any{"turn_done": true}},
			func(r *ports.RunRow) {
				r.Body = json.RawMessage(`{"prompt":"fix it","nested":{"a":[1,2,3]},"n":0,"turn_done":true}`)
			}},
		{"patch overwrites a key", ports.RunObserveParams{Patch: map[string]any{"n": 5}},
			func(r *ports.RunRow) { r.Body = json.RawMessage(`{"prompt":"fix it","nested":{"a":[1,2,3]},"n":5}`) }},
		{"patch replaces a nested object whole", ports.RunObserveParams{Patch: map[string]any{"nested": map[string]any{"b": "x"}}},
			func(r *ports.RunRow) { r.Body = json.RawMessage(`{"prompt":"fix it","nested":{"b":"x"},"n":0}`) }},
		{"patch writes null", ports.RunObserveParams{Patch: map[string]any{"prompt": nil}},
			func(r *ports.RunRow) { r.Body = json.RawMessage(`{"prompt":null,"nested":{"a":[1,2,3]},"n":0}`) }},
		{"everything at once", ports.RunObserveParams{Pod: pod, PR: pr, Heartbeat: beat, Patch: map[string]any{"review_done": true}},
			func(r *ports.RunRow) {
				r.Pod, r.PR, r.Heartbeat = pod, pr, beat
				r.Body = json.RawMessage(`{"prompt":"fix it","nested":{"a":[1,2,3]},"n":0,"review_done":true}`)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, s := t.Context(), newStore(t)
			before := mustCreate(t, ctx, s, fullRow("o"))
			p := tt.params
			p.Ref = before.Ref
			v, err := s.RunObserve(ctx, p)
			require.NoError(t, err)
			require.Equal(t, before.Version+1, v, "observations bump the version")
			got, err := s.RunGet(ctx, before.Ref)
			require.NoError(t, err)
			want := before
			tt.want(&want)
			requireSameRun(t, want, got)
			require.Equal(t, v, got.Version)
			require.False(t, got.UpdatedAt.Before(before.UpdatedAt))
		})
	}
	t.Run("missing run not found", func(t *testing.T) {
		t.Parallel()
		ctx, s := t.Context(), newStore(t)
		_, err := s.RunObserve(ctx, ports.RunObserveParams{Ref: refOf(reconcile.KindRepo, "absent"), Heartbeat: beat})
		require.ErrorIs(t, err, ports.ErrNotFound)
		_, err = s.RunObserve(ctx, ports.RunObserveParams{Ref: refOf(reconcile.KindRepo, "absent"), Patch: map[string]any{"k": 1}})
		require.ErrorIs(t, err, ports.ErrNotFound)
	})
	t.Run("unencodable patch rejected", func(t *testing.T) {
		t.Parallel()
		ctx, s := t.Context(), newStore(t)
		before := mustCreate(t, ctx, s, fullRow("o"))
		_, err := s.RunObserve(ctx, ports.RunObserveParams{Ref: before.Ref, Patch: map[string]any{"bad": make(chan int)}, Heartbeat: beat})
		require.Error(t, err)
		require.Contains(t, err.Error(), "patch")
		requireUnchanged(t, s, before)
	})
}

func runObserveInvalidates(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := mustCreate(t, ctx, s, baseRow(reconcile.KindPRReview, "rv", reconcile.ReviewRunning))
	// A decision read version 1; an observation lands; the decision's write
	// must lose so it is re-taken on the new observation.
	_, err := s.RunObserve(ctx, ports.RunObserveParams{Ref: row.Ref, Patch: map[string]any{"review_done": true}})
	require.NoError(t, err)
	_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: row.Version, State: reconcile.ReviewFailed, Body: row.Body})
	require.ErrorIs(t, err, ports.ErrConflict)
	got, err := s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.ReviewRunning, got.State)
	require.JSONEq(t, `{"n":0,"review_done":true}`, string(got.Body))
}
