package porttest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// Events is the conformance suite of ports.Events: the release store
// records exactly the events of its changes, in the same write, and the
// outbox hands each out until it is marked done.
func Events(t *testing.T, newStore ReleaseStoreFactory) {
	t.Helper()
	setup := relSetup(newStore)
	t.Run("ReleaseCreated", func(t *testing.T) { eventReleaseCreated(setup(t)) })
	t.Run("JobFailed", func(t *testing.T) { eventJobFailed(setup(t)) })
	t.Run("VerificationFailed", func(t *testing.T) { eventVerificationFailed(setup(t)) })
	t.Run("RefusedWriteRecordsNothing", func(t *testing.T) { eventRefusedWrite(setup(t)) })
	t.Run("Resources", func(t *testing.T) { eventResources(setup(t)) })
	t.Run("PendingAndDone", func(t *testing.T) { eventPendingDone(setup(t)) })
}

// eventsPending lists every pending event.
func eventsPending(t *testing.T, e *relEnv) []ports.Event {
	t.Helper()
	evs, err := e.s.EventsPending(e.ctx, 1000)
	require.NoError(t, err)
	return evs
}

// eventsClear marks every pending event done.
func eventsClear(t *testing.T, e *relEnv) {
	t.Helper()
	var seqs []int64
	for _, ev := range eventsPending(t, e) {
		seqs = append(seqs, ev.Seq)
	}
	require.NoError(t, e.s.EventsDone(e.ctx, seqs))
	require.Empty(t, eventsPending(t, e))
}

func eventReleaseCreated(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)))
	eventsClear(t, e)
	target := tgt(relD1, relE1, relR1)
	r := relStoreRelease(t, e, target, "v1")
	again := relStoreRelease(t, e, target, "v1")
	require.Equal(t, r.ID, again.ID)
	evs := eventsPending(t, e)
	require.Len(t, evs, 1, "one event for the creation, none for the upsert of the same content")
	ev := evs[0]
	require.Positive(t, ev.Seq)
	ev.Seq = 0
	require.Equal(t, ports.Event{Type: workflow.EventReleaseCreated, At: relNorm(r.CreatedAt), ReleaseID: r.ID,
		TargetKey: target.Key(), VersionID: "v1"}, ev)
	require.Equal(t, target, ev.Target())
}

func eventJobFailed(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	eventsClear(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	row := relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(4)))
	require.Empty(t, eventsPending(t, e), "creating a job records nothing")
	next := row.Job
	next.Status, next.ExternalID = release.JobInProgress, "run-1"
	v, err := e.s.JobUpdate(e.ctx, next, row.Version)
	require.NoError(t, err)
	require.Empty(t, eventsPending(t, e), "a move into a status that is no failure records nothing")

	e.clock.Set(relAt(9))
	next.Status, next.Message, next.CompletedAt = release.JobFailure, "exit 1", relAt(8)
	_, err = e.s.JobUpdate(e.ctx, next, v)
	require.NoError(t, err)
	evs := eventsPending(t, e)
	require.Len(t, evs, 2, "job.failed, then release.failed")
	ev := evs[0]
	ev.Seq = 0
	want := ports.Event{Type: workflow.EventJobFailed, At: relNorm(relAt(9)), ReleaseID: r.ID, TargetKey: r.Target.Key(),
		VersionID: "v1", JobID: "j1", JobStatus: release.JobFailure, JobMessage: "exit 1", JobAgentID: relAgent, ExternalID: "run-1"}
	require.Equal(t, want, ev)
	rf := evs[1]
	require.Greater(t, rf.Seq, evs[0].Seq)
	rf.Seq, want.Type = 0, workflow.EventReleaseFailed
	require.Equal(t, want, rf, "release.failed carries the failed job's fields")

	// Each failed status counts; one job fails once.
	for i, st := range ports.FailedJobStatuses[1:] {
		id := "jf" + string(rune('a'+i))
		row := relCreateJob(t, e, relJob(id, r, release.JobPending, relAt(10+i)))
		next := row.Job
		next.Status = st
		_, err := e.s.JobUpdate(e.ctx, next, row.Version)
		require.NoError(t, err, st)
	}
	evs = eventsOfType(eventsPending(t, e), workflow.EventJobFailed)
	require.Len(t, evs, len(ports.FailedJobStatuses))
	require.Len(t, eventsOfType(eventsPending(t, e), workflow.EventReleaseFailed), len(ports.FailedJobStatuses), "each with its release.failed")
	for i, ev := range evs[1:] {
		require.Equal(t, workflow.EventJobFailed, ev.Type)
		require.Equal(t, ports.FailedJobStatuses[i+1], ev.JobStatus)
		require.Greater(t, ev.Seq, evs[i].Seq, "sequence numbers increase")
	}
}

func eventVerificationFailed(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	row := relCreateJob(t, e, relJob("j1", r, release.JobSuccessful, relAt(4)))
	eventsClear(t, e)
	next := row.Job
	next.Verification = release.VerificationRunning
	next.Measurements = map[string][]release.Measurement{"latency": {{At: relAt(5), Result: 900.0}}}
	v, err := e.s.JobUpdate(e.ctx, next, row.Version)
	require.NoError(t, err)
	require.Empty(t, eventsPending(t, e), "a running verification records nothing")
	e.clock.Set(relAt(7))
	next.Verification = release.VerificationFailed
	next.Measurements["error-rate"] = []release.Measurement{{At: relAt(6), Error: "no data"}}
	v, err = e.s.JobUpdate(e.ctx, next, v)
	require.NoError(t, err)
	evs := eventsPending(t, e)
	require.Len(t, evs, 2, "verification.failed, then release.failed")
	require.Equal(t, workflow.EventReleaseFailed, evs[1].Type)
	require.Equal(t, "j1", evs[1].JobID)
	ev := evs[0]
	ev.Seq = 0
	require.Equal(t, ports.Event{Type: workflow.EventVerificationFailed, At: relNorm(relAt(7)), ReleaseID: r.ID, TargetKey: r.Target.Key(),
		VersionID: "v1", JobID: "j1", JobStatus: release.JobSuccessful, JobAgentID: relAgent, Metrics: []string{"error-rate", "latency"}}, ev)
	_, err = e.s.JobUpdate(e.ctx, next, v)
	require.NoError(t, err)
	require.Len(t, eventsPending(t, e), 2, "rewriting a failed verification records nothing")
}

func eventRefusedWrite(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	row := relCreateJob(t, e, relJob("j1", r, release.JobInProgress, relAt(4)))
	eventsClear(t, e)
	next := row.Job
	next.Status = release.JobFailure
	_, err := e.s.JobUpdate(e.ctx, next, row.Version+1)
	require.ErrorIs(t, err, ports.ErrConflict)
	next.ReleaseID = f.release(tgt(relD1, relE1, relR1), "v2").ID
	_, err = e.s.JobUpdate(e.ctx, next, row.Version)
	require.Error(t, err, "an update changing the release is refused")
	require.Empty(t, eventsPending(t, e), "a refused write records no event")
	_, _, err = e.s.ReleaseUpsert(e.ctx, release.NewRelease(tgt(relD1, relE1, relR1), "missing", nil, time.Time{}))
	require.Error(t, err)
	require.Empty(t, eventsPending(t, e), "a refused release records no event")
}

func eventPendingDone(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)))
	eventsClear(t, e)
	for _, res := range []string{relR1, relR2} {
		for _, env := range []string{relE1, relE2} {
			relStoreRelease(t, e, tgt(relD1, env, res), "v1")
		}
	}
	first, err := e.s.EventsPending(e.ctx, 3)
	require.NoError(t, err)
	require.Len(t, first, 3, "at most limit")
	all := eventsPending(t, e)
	require.Len(t, all, 4)
	require.Equal(t, first, all[:3], "oldest first")
	_, err = e.s.EventsPending(e.ctx, 0)
	require.Error(t, err, "a limit is required")
	require.NoError(t, e.s.EventsDone(e.ctx, []int64{all[0].Seq, all[2].Seq}))
	require.NoError(t, e.s.EventsDone(e.ctx, []int64{all[0].Seq}), "again: no-op")
	require.NoError(t, e.s.EventsDone(e.ctx, nil))
	require.Equal(t, []ports.Event{all[1], all[3]}, eventsPending(t, e))
}

// eventsOfType keeps the events of type typ.
func eventsOfType(evs []ports.Event, typ workflow.EventType) []ports.Event {
	var out []ports.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func eventResources(t *testing.T, e *relEnv) {
	relWorld(t, e)
	eventsClear(t, e)
	e.clock.Set(relAt(3))
	v, err := e.s.Resources().Put(e.ctx, release.Resource{ID: "r-new", WorkspaceID: relWS, Kind: "Cluster", Identifier: "id-new", Name: "new"}, 0)
	require.NoError(t, err)
	e.clock.Set(relAt(4))
	v, err = e.s.Resources().Put(e.ctx, release.Resource{ID: "r-new", WorkspaceID: relWS, Kind: "Cluster", Identifier: "id-new", Name: "renamed"}, v)
	require.NoError(t, err)
	_, err = e.s.Resources().Put(e.ctx, release.Resource{ID: "r-new", WorkspaceID: relWS, Kind: "Cluster", Identifier: "id-new", Name: "x"}, v+1)
	require.ErrorIs(t, err, ports.ErrConflict)
	require.NoError(t, e.s.Resources().Delete(e.ctx, "r-new", v))
	_, err = e.s.Systems().Put(e.ctx, release.System{ID: "sys-new", WorkspaceID: relWS, Name: "s"}, 0)
	require.NoError(t, err)
	evs := eventsPending(t, e)
	require.Len(t, evs, 3, "created, updated, deleted; a refused write and other kinds record none")
	for i, typ := range []workflow.EventType{workflow.EventResourceCreated, workflow.EventResourceUpdated, workflow.EventResourceDeleted} {
		require.Equal(t, typ, evs[i].Type)
		require.Equal(t, "r-new", evs[i].ResourceID)
		require.Empty(t, evs[i].ReleaseID)
		require.False(t, evs[i].At.IsZero())
	}
	require.Equal(t, relNorm(relAt(3)), evs[0].At)
	require.Equal(t, relNorm(relAt(4)), evs[1].At)
}
