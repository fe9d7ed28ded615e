package porttest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// ChangeWorld is one subtest's event stream with the stores that publish
// to it.
type ChangeWorld struct {
	Changes   ports.ChangeStream
	Store     ports.ReleaseStore
	Tx        ports.Transactor
	Workflows ports.WorkflowStore
	Runs      ports.RunStore
	Catalog   ports.Catalog
	// Publish makes what has committed readable now (Postgres moves its
	// outbox); Prune applies the retention now. nil: nothing to do.
	Publish, Prune func(ctx context.Context) error
	// Other, when set, is the stream of a second process on the same
	// data: it must list the same changes and be woken by them.
	Other ports.ChangeStream
}

// ChangeWorldFactory returns an empty world whose stores stamp writes with
// clock and whose stream keeps the newest keep changes; it is called once
// per subtest, and subtests run in parallel.
type ChangeWorldFactory func(t *testing.T, clock ports.Clock, keep int) ChangeWorld

// ChangeStream is the conformance suite of ports.ChangeStream: every
// invariant of its doc comment, over writes of every kind of object the
// stream carries.
func ChangeStream(t *testing.T, newWorld ChangeWorldFactory) {
	t.Helper()
	setup := func(t *testing.T, keep int) (*relEnv, ChangeWorld) {
		t.Helper()
		t.Parallel()
		env := &relEnv{ctx: t.Context(), clock: NewFakeClock(relT0)}
		w := newWorld(t, env.clock, keep)
		env.s = w.Store
		return env, w
	}
	t.Run("Jobs", func(t *testing.T) { e, w := setup(t, 1000); changeJobs(t, e, w) })
	t.Run("Desired", func(t *testing.T) { e, w := setup(t, 1000); changeDesired(t, e, w) })
	t.Run("WorkflowsRunsCatalog", func(t *testing.T) { e, w := setup(t, 1000); changeOthers(t, e, w) })
	t.Run("RolledBackPublishesNothing", func(t *testing.T) { e, w := setup(t, 1000); changeRolledBack(t, e, w) })
	t.Run("ResumeAndExpiry", func(t *testing.T) { e, w := setup(t, 3); changeExpiry(t, e, w) })
	t.Run("Notify", func(t *testing.T) { e, w := setup(t, 1000); changeNotify(t, e, w) })
}

// changesAll publishes and lists every retained change after after.
func changesAll(t *testing.T, e *relEnv, w ChangeWorld, after int64) []ports.Change {
	t.Helper()
	if w.Publish != nil {
		require.NoError(t, w.Publish(e.ctx))
	}
	out, err := w.Changes.ChangesAfter(e.ctx, after, 1000)
	require.NoError(t, err)
	if w.Other != nil {
		other, err := w.Other.ChangesAfter(e.ctx, after, 1000)
		require.NoError(t, err)
		require.Equal(t, out, other, "a second process lists the same changes")
	}
	for i := 1; i < len(out); i++ {
		require.Greater(t, out[i].ID, out[i-1].ID, "ids increase")
	}
	return out
}

// changeLast is the id of the newest change, 0 when none.
func changeLast(t *testing.T, e *relEnv, w ChangeWorld) int64 {
	t.Helper()
	all := changesAll(t, e, w, 0)
	var want int64
	if len(all) > 0 {
		want = all[len(all)-1].ID
	}
	last, err := w.Changes.ChangesLast(e.ctx)
	require.NoError(t, err)
	require.Equal(t, want, last, "ChangesLast is the newest change's id")
	return last
}

// changeShape is what a test compares of a change: its kind, workspace,
// object and data, decoded.
type changeShape struct {
	Kind      ports.ChangeKind
	Workspace string
	Object    string
	Data      map[string]any
}

func changeShapes(t *testing.T, cs []ports.Change) []changeShape {
	t.Helper()
	out := make([]changeShape, len(cs))
	for i, c := range cs {
		require.Positive(t, c.ID)
		require.False(t, c.At.IsZero(), "a change has its time")
		out[i] = changeShape{Kind: c.Kind, Workspace: c.Workspace, Object: c.Object}
		require.NoError(t, json.Unmarshal(c.Data, &out[i].Data))
	}
	return out
}

func changeJobs(t *testing.T, e *relEnv, w ChangeWorld) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	last := changeLast(t, e, w)
	row := relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(4)))
	next := row.Job
	next.Status = release.JobInProgress
	v, err := e.s.JobUpdate(e.ctx, next, row.Version)
	require.NoError(t, err)
	next.Message = "still running"
	v, err = e.s.JobUpdate(e.ctx, next, v)
	require.NoError(t, err)
	next.Status = release.JobSuccessful
	_, err = e.s.JobUpdate(e.ctx, next, v)
	require.NoError(t, err)
	key := r.Target.Key()
	require.Equal(t, []changeShape{
		{ports.ChangeJobCreated, relWS, "j1", map[string]any{"status": "pending", "release_id": r.ID, "target_key": key}},
		{ports.ChangeJobStatus, relWS, "j1", map[string]any{"status": "inProgress", "previous": "pending", "release_id": r.ID, "target_key": key}},
		{ports.ChangeJobStatus, relWS, "j1", map[string]any{"status": "successful", "previous": "inProgress", "release_id": r.ID, "target_key": key}},
		{ports.ChangeTargetCurrent, relWS, key, map[string]any{"release_id": r.ID, "job_id": "j1"}},
	}, changeShapes(t, changesAll(t, e, w, last)), "a write that leaves the status alone publishes nothing")
}

func changeDesired(t *testing.T, e *relEnv, w ChangeWorld) {
	f := relJobWorld(t, e)
	target := tgt(relD1, relE1, relR1)
	r1, r2 := f.release(target, "v1"), f.release(target, "v2")
	last := changeLast(t, e, w)
	for _, id := range []string{r1.ID, r1.ID, r2.ID} {
		_, err := e.s.DesiredSet(e.ctx, ports.DesiredRelease{Target: target, ReleaseID: id})
		require.NoError(t, err)
	}
	require.Equal(t, []changeShape{
		{ports.ChangeTargetDesired, relWS, target.Key(), map[string]any{"release_id": r1.ID}},
		{ports.ChangeTargetDesired, relWS, target.Key(), map[string]any{"release_id": r2.ID}},
	}, changeShapes(t, changesAll(t, e, w, last)), "setting the same desired release again publishes nothing")
}

func changeOthers(t *testing.T, e *relEnv, w ChangeWorld) {
	ctx := e.ctx
	last := changeLast(t, e, w)
	wf := wfRecord("wf1")
	require.NoError(t, w.Workflows.WorkflowCreate(ctx, wf))
	wf.Phase = workflow.WorkflowRunning
	_, err := w.Workflows.WorkflowUpdate(ctx, wf, 1)
	require.NoError(t, err)
	require.NoError(t, w.Workflows.TaskRunsSave(ctx, "wf1", []ports.TaskRunRecord{wfRun("wf1", "a", 0)}))
	run := wfRun("wf1", "a", 1)
	run.Phase = workflow.TaskRunning
	require.NoError(t, w.Workflows.TaskRunsSave(ctx, "wf1", []ports.TaskRunRecord{run}))

	ref := refOf(reconcile.KindStandalone, "run1")
	_, err = w.Runs.RunCreate(ctx, baseRow(reconcile.KindStandalone, "run1", reconcile.StandaloneQueued))
	require.NoError(t, err)
	_, err = w.Runs.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, State: reconcile.StandaloneRunning, ExpectedVersion: 1})
	require.NoError(t, err)

	rev := catalogCreate(t, ctx, w.Catalog, revision.KindPolicy, "p-changes")
	rev = catalogMove(t, ctx, w.Catalog, rev, revision.Proposed)
	require.NoError(t, w.Catalog.CatalogDelete(ctx, rev.Ref(), rev.Version))
	obj := "policy/p-changes/" + rev.ID
	require.Equal(t, []changeShape{
		{ports.ChangeWorkflowStatus, "", "wf1", map[string]any{"phase": "Pending"}},
		{ports.ChangeWorkflowStatus, "", "wf1", map[string]any{"phase": "Running"}},
		{ports.ChangeTaskRunStatus, "", "wf1/a", map[string]any{"phase": "Pending"}},
		{ports.ChangeTaskRunStatus, "", "wf1/a", map[string]any{"phase": "Running"}},
		{ports.ChangeRunStatus, "", "standalone/run1", map[string]any{"kind": "standalone", "state": "queued"}},
		{ports.ChangeRunStatus, "", "standalone/run1", map[string]any{"kind": "standalone", "state": "running"}},
		{ports.ChangeCatalogRevision, "", obj, map[string]any{"kind": "policy", "name": "p-changes", "lifecycle": "draft", "revision": float64(0)}},
		{ports.ChangeCatalogRevision, "", obj, map[string]any{"kind": "policy", "name": "p-changes", "lifecycle": "proposed", "revision": float64(0)}},
		{ports.ChangeCatalogRevision, "", obj, map[string]any{"kind": "policy", "name": "p-changes", "lifecycle": "deleted", "revision": float64(0)}},
	}, changeShapes(t, changesAll(t, e, w, last)))
}

func changeRolledBack(t *testing.T, e *relEnv, w ChangeWorld) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	last := changeLast(t, e, w)
	boom := errors.New("boom")
	err := w.Tx.InTx(e.ctx, func(ctx context.Context) error {
		_, _, err := e.s.JobCreate(ctx, ports.JobCreateParams{Job: relJob("j1", r, release.JobPending, relAt(4)), IdempotencyKey: "k1"})
		require.NoError(t, err)
		_, err = e.s.DesiredSet(ctx, ports.DesiredRelease{Target: r.Target, ReleaseID: r.ID})
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Empty(t, changesAll(t, e, w, last), "a rolled-back transaction publishes nothing")

	require.NoError(t, w.Tx.InTx(e.ctx, func(ctx context.Context) error {
		_, _, err := e.s.JobCreate(ctx, ports.JobCreateParams{Job: relJob("j1", r, release.JobPending, relAt(4)), IdempotencyKey: "k1"})
		return err
	}))
	got := changesAll(t, e, w, last)
	require.Len(t, got, 1, "a committed one publishes its changes")
	require.Equal(t, ports.ChangeJobCreated, got[0].Kind)
}

func changeExpiry(t *testing.T, e *relEnv, w ChangeWorld) {
	ctx := e.ctx
	require.NoError(t, w.Workflows.WorkflowCreate(ctx, wfRecord("wf1")))
	wf := wfRecord("wf1")
	phases := []workflow.WorkflowPhase{workflow.WorkflowRunning, workflow.WorkflowSucceeded}
	for i, p := range phases {
		wf.Phase = p
		_, err := w.Workflows.WorkflowUpdate(ctx, wf, int64(i+1))
		require.NoError(t, err)
	}
	all := changesAll(t, e, w, 0)
	first := all[0].ID
	// Two more: the stream keeps 3, so the first two are pruned.
	require.NoError(t, w.Workflows.WorkflowCreate(ctx, wfRecord("wf2")))
	require.NoError(t, w.Workflows.WorkflowCreate(ctx, wfRecord("wf3")))
	if w.Publish != nil {
		require.NoError(t, w.Publish(ctx))
	}
	if w.Prune != nil {
		require.NoError(t, w.Prune(ctx))
	}
	for _, s := range []ports.ChangeStream{w.Changes, w.Other} {
		if s == nil {
			continue
		}
		_, err := s.ChangesAfter(ctx, first-1, 10)
		require.ErrorIs(t, err, ports.ErrChangesExpired, "a resume point before what is retained")
		_, err = s.ChangesAfter(ctx, first, 10)
		require.ErrorIs(t, err, ports.ErrChangesExpired)
		got, err := s.ChangesAfter(ctx, first+1, 10)
		require.NoError(t, err, "resuming after the last pruned id misses nothing")
		require.Len(t, got, 3)
		require.Equal(t, first+2, got[0].ID)
		got, err = s.ChangesAfter(ctx, first+2, 1)
		require.NoError(t, err)
		require.Len(t, got, 1, "limit")
		require.Equal(t, "wf2", got[0].Object)
		last, err := s.ChangesLast(ctx)
		require.NoError(t, err)
		require.Equal(t, first+4, last)
	}
}

func changeNotify(t *testing.T, e *relEnv, w ChangeWorld) {
	ctx := e.ctx
	streams := []ports.ChangeStream{w.Changes}
	if w.Other != nil {
		streams = append(streams, w.Other)
	}
	chans := make([]<-chan struct{}, len(streams))
	for i, s := range streams {
		chans[i] = s.ChangesNotify(ctx)
	}
	// A listener may need a moment to start: write until every channel
	// was woken, each write a new change.
	woken := make([]bool, len(chans))
	deadline := time.After(20 * time.Second)
	for i := 0; ; i++ {
		wf := wfRecord("wf-" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		require.NoError(t, w.Workflows.WorkflowCreate(ctx, wf))
		if w.Publish != nil {
			require.NoError(t, w.Publish(ctx))
		}
		all := true
		for k, ch := range chans {
			if woken[k] {
				continue
			}
			select {
			case <-ch:
				woken[k] = true
			case <-time.After(200 * time.Millisecond):
			case <-deadline:
				t.Fatalf("stream %d never woken", k)
			}
			all = all && woken[k]
		}
		if all {
			return
		}
	}
}
