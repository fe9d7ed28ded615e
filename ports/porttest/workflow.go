package porttest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// WorkflowStore is the conformance suite of ports.WorkflowStore. newStore
// is called once per subtest and must return an empty store; subtests run
// in parallel.
func WorkflowStore(t *testing.T, newStore func(t *testing.T) ports.WorkflowStore) {
	t.Helper()
	setup := func(t *testing.T) (*testing.T, context.Context, ports.WorkflowStore) {
		t.Parallel()
		return t, t.Context(), newStore(t)
	}
	t.Run("CreateGetUpdate", func(t *testing.T) { wfCreateGetUpdate(setup(t)) })
	t.Run("Refused", func(t *testing.T) { wfRefused(setup(t)) })
	t.Run("TaskRunsBatch", func(t *testing.T) { wfTaskRunsBatch(setup(t)) })
	t.Run("TaskRunsConcurrent", func(t *testing.T) { wfTaskRunsConcurrent(setup(t)) })
	t.Run("List", func(t *testing.T) { wfList(setup(t)) })
	t.Run("Unfinished", func(t *testing.T) { wfUnfinished(setup(t)) })
}

// wfUnfinished: WorkflowsUnfinished lists exactly the Pending and Running
// workflows of one trigger key, by id, and follows phase changes.
func wfUnfinished(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	key := ports.TriggerKey(ports.TriggerSchedule, "nightly")
	at := time.Date(2026, 5, 6, 3, 0, 0, 0, time.UTC)
	mk := func(id, k string, phase workflow.WorkflowPhase) {
		w := wfRecord(id)
		w.Phase = phase
		if k != "" {
			w.Trigger = &ports.WorkflowTrigger{Key: k, Kind: ports.TriggerSchedule, Schedule: "0 3 * * *", Timezone: "Europe/Paris", ScheduledAt: at}
		}
		require.NoError(t, s.WorkflowCreate(ctx, w))
	}
	mk("c", key, workflow.WorkflowRunning)
	mk("a", key, workflow.WorkflowPending)
	mk("b", key, workflow.WorkflowSucceeded)
	mk("d", ports.TriggerKey(ports.TriggerSchedule, "other"), workflow.WorkflowRunning)
	mk("e", "", workflow.WorkflowRunning)
	ids := func() []string {
		ws, err := s.WorkflowsUnfinished(ctx, key)
		require.NoError(t, err)
		out := []string{}
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return out
	}
	require.Equal(t, []string{"a", "c"}, ids())
	got, err := s.WorkflowGet(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, &ports.WorkflowTrigger{Key: key, Kind: ports.TriggerSchedule, Schedule: "0 3 * * *", Timezone: "Europe/Paris", ScheduledAt: at}, got.Trigger)
	got.Phase = workflow.WorkflowCancelled
	_, err = s.WorkflowUpdate(ctx, got, got.Version)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids())
	ws, err := s.WorkflowsUnfinished(ctx, "schedule:none")
	require.NoError(t, err)
	require.Empty(t, ws)
}

var wfT0 = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

func wfRecord(id string) ports.WorkflowRecord {
	return ports.WorkflowRecord{ID: id, Name: "deploy", TemplateName: "deploy", TemplateRevision: 3,
		Template:   json.RawMessage(`{"kind":"WorkflowTemplate","spec":{"tasks":[]}}`),
		Parameters: map[string]any{"replicas": float64(3), "token": workflow.Redacted},
		Matrix:     map[string][]any{"clusters": {map[string]any{"item": "a"}}},
		Variables:  map[string]any{"db": map[string]any{"ref": "vault://db"}}, Secrets: []string{"db"},
		Phase: workflow.WorkflowPending, CreatedAt: wfT0}
}

func wfRun(wf, id string, version int64) ports.TaskRunRecord {
	return ports.TaskRunRecord{TaskRun: workflow.TaskRun{ID: id, Task: id, MatrixIndex: workflow.NoMatrix, Phase: workflow.TaskPending},
		WorkflowID: wf, Type: workflow.TaskJob, Config: map[string]any{"n": float64(1)}, Version: version}
}

func wfCreateGetUpdate(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	w := wfRecord("wf1")
	require.NoError(t, s.WorkflowCreate(ctx, w))
	require.ErrorIs(t, s.WorkflowCreate(ctx, w), ports.ErrConflict, "an existing id")
	got, err := s.WorkflowGet(ctx, "wf1")
	require.NoError(t, err)
	w.Version = 1
	require.JSONEq(t, string(w.Template), string(got.Template))
	got.Template, w.Template = nil, nil
	require.Equal(t, w, got)

	got.Template = json.RawMessage(`{"kind":"Other"}`)
	got.CreatedAt = wfT0.Add(time.Hour)
	got.Phase, got.StartedAt = workflow.WorkflowRunning, wfT0.Add(time.Minute)
	v, err := s.WorkflowUpdate(ctx, got, 1)
	require.NoError(t, err)
	require.EqualValues(t, 2, v)
	_, err = s.WorkflowUpdate(ctx, got, 1)
	require.ErrorIs(t, err, ports.ErrConflict, "a stale version")
	again, err := s.WorkflowGet(ctx, "wf1")
	require.NoError(t, err)
	require.Equal(t, workflow.WorkflowRunning, again.Phase)
	require.EqualValues(t, 2, again.Version)
	require.Equal(t, wfT0, again.CreatedAt, "the creation time never changes")
	require.JSONEq(t, `{"kind":"WorkflowTemplate","spec":{"tasks":[]}}`, string(again.Template), "the pinned template never changes")

	_, err = s.WorkflowGet(ctx, "nope")
	require.ErrorIs(t, err, ports.ErrNotFound)
	_, err = s.WorkflowUpdate(ctx, wfRecord("nope"), 1)
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func wfRefused(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	w := wfRecord("a/b")
	requireInvalid(t, s.WorkflowCreate(ctx, w), "id")
	w = wfRecord("ok")
	w.Template = nil
	requireInvalid(t, s.WorkflowCreate(ctx, w), "template")
	w = wfRecord("ok")
	w.Phase = "Dancing"
	requireInvalid(t, s.WorkflowCreate(ctx, w), "phase")
	w = wfRecord("ok")
	w.Parameters = map[string]any{"x": "a\x00"}
	requireInvalid(t, s.WorkflowCreate(ctx, w), "parameters.x")
	_, err := s.WorkflowGet(ctx, "ok")
	require.ErrorIs(t, err, ports.ErrNotFound, "nothing stored")

	require.NoError(t, s.WorkflowCreate(ctx, wfRecord("wf")))
	requireInvalid(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("other", "r1", 0)}), "workflow_id")
	requireInvalid(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "r/1", 0)}), "id")
	require.ErrorIs(t, s.TaskRunsSave(ctx, "missing", []ports.TaskRunRecord{wfRun("missing", "r1", 0)}), ports.ErrNotFound)
	runs, err := s.TaskRunsList(ctx, "wf")
	require.NoError(t, err)
	require.Empty(t, runs)
	_, err = s.TaskRunsList(ctx, "missing")
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func wfTaskRunsBatch(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	require.NoError(t, s.WorkflowCreate(ctx, wfRecord("wf")))
	require.NoError(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "b", 0), wfRun("wf", "a", 0)}))
	runs, err := s.TaskRunsList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, runs, 2)
	require.Equal(t, "a", runs[0].ID, "by id")
	require.EqualValues(t, 1, runs[0].Version)

	// A batch with one stale record writes nothing.
	up := runs[0]
	up.Phase, up.AttemptStartedAt, up.ApprovedBy = workflow.TaskRunning, wfT0, []string{"alice"}
	stale := runs[1]
	stale.Version = 7
	require.ErrorIs(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{up, stale, wfRun("wf", "c", 0)}), ports.ErrConflict)
	after, err := s.TaskRunsList(ctx, "wf")
	require.NoError(t, err)
	require.Equal(t, runs, after, "nothing of a refused batch is written")
	require.ErrorIs(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "a", 0)}), ports.ErrConflict, "create of an existing id")

	require.NoError(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{up, wfRun("wf", "c", 0)}))
	got, err := s.TaskRunGet(ctx, "wf", "a")
	require.NoError(t, err)
	up.Version = 2
	require.Equal(t, up, got)
	_, err = s.TaskRunGet(ctx, "wf", "zz")
	require.ErrorIs(t, err, ports.ErrNotFound)
}

// wfTaskRunsConcurrent: racing writers of one TaskRun at one version: one
// wins, the others get ErrConflict.
func wfTaskRunsConcurrent(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	require.NoError(t, s.WorkflowCreate(ctx, wfRecord("wf")))
	require.NoError(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "a", 0)}))
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := wfRun("wf", "a", 1)
			r.Message = fmt.Sprintf("writer %d", i)
			errs[i] = s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{r})
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		require.ErrorIs(t, err, ports.ErrConflict)
	}
	require.Equal(t, 1, wins)
}

func wfList(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	for _, id := range []string{"c", "a", "b"} {
		require.NoError(t, s.WorkflowCreate(ctx, wfRecord(id)))
	}
	all, err := s.WorkflowList(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, all, 3)
	page, err := s.WorkflowList(ctx, "a", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "b", page[0].ID)
}
