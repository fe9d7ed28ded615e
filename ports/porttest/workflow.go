package porttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
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
	t.Run("Matrix", func(t *testing.T) { wfMatrix(setup(t)) })
	t.Run("List", func(t *testing.T) { wfList(setup(t)) })
	t.Run("Unfinished", func(t *testing.T) { wfUnfinished(setup(t)) })
	t.Run("TaskRunWrites", func(t *testing.T) { wfTaskRunWrites(setup(t)) })
	t.Run("Reports", func(t *testing.T) { wfReports(setup(t)) })
	t.Run("ReportsWhileWriting", func(t *testing.T) { wfReportsWhileWriting(setup(t)) })
}

// wfTaskRunWrites: the count grows by one per TaskRun created or written,
// and a refused batch leaves it as it was.
func wfTaskRunWrites(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	_, err := s.TaskRunWrites(ctx, "nope")
	require.ErrorIs(t, err, ports.ErrNotFound)
	require.NoError(t, s.WorkflowCreate(ctx, wfRecord("wf")))
	require.NoError(t, s.WorkflowCreate(ctx, wfRecord("other")))
	count := func(id string) int64 {
		n, err := s.TaskRunWrites(ctx, id)
		require.NoError(t, err)
		return n
	}
	require.Zero(t, count("wf"))
	require.NoError(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "a", 0), wfRun("wf", "b", 0)}))
	require.EqualValues(t, 2, count("wf"))
	require.NoError(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "a", 1)}))
	require.EqualValues(t, 3, count("wf"))
	require.ErrorIs(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "b", 1), wfRun("wf", "a", 1)}), ports.ErrConflict)
	require.EqualValues(t, 3, count("wf"), "a refused batch writes nothing")
	require.NoError(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "b", 1), wfRun("wf", "a", 2), wfRun("wf", "c", 0)}))
	require.EqualValues(t, 6, count("wf"))
	require.Zero(t, count("other"), "per workflow")
}

func wfReport(wf, run, job string) ports.TaskRunReport {
	return ports.TaskRunReport{WorkflowID: wf, TaskRunID: run, JobID: job, ExternalID: "ext/" + job, Status: release.JobSuccessful,
		Message: "done", At: wfT0.Add(time.Minute), Outputs: map[string]any{"n": float64(2), "s": "x"}}
}

// wfReports: reports are stored when their TaskRun exists, listed per
// workflow in the order they were added, and taken out by Seq.
func wfReports(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	require.NoError(t, s.WorkflowCreate(ctx, wfRecord("wf")))
	require.NoError(t, s.WorkflowCreate(ctx, wfRecord("wg")))
	require.NoError(t, s.TaskRunsSave(ctx, "wf", []ports.TaskRunRecord{wfRun("wf", "a", 0), wfRun("wf", "b", 0)}))
	require.NoError(t, s.TaskRunsSave(ctx, "wg", []ports.TaskRunRecord{wfRun("wg", "a", 0)}))
	writes, err := s.TaskRunWrites(ctx, "wf")
	require.NoError(t, err)

	bad := wfReport("wf", "a", "wf/wf/a/0")
	bad.Status = release.JobInProgress
	_, err = s.ReportsAdd(ctx, []ports.TaskRunReport{wfReport("wf", "a", "wf/wf/a/0"), bad})
	requireInvalid(t, err, "status")
	bad = wfReport("wf", "a/b", "wf/wf/a/0")
	_, err = s.ReportsAdd(ctx, []ports.TaskRunReport{bad})
	requireInvalid(t, err, "task_run_id")
	bad = wfReport("wf", "a", "wf/wf/a/0")
	bad.Message = "a\x00"
	_, err = s.ReportsAdd(ctx, []ports.TaskRunReport{bad})
	require.ErrorIs(t, err, release.ErrInvalid)
	got, err := s.Reports(ctx, "wf")
	require.NoError(t, err)
	require.Empty(t, got, "a refused batch stores nothing")

	in := []ports.TaskRunReport{wfReport("wf", "b", "wf/wf/b/0"), wfReport("wf", "missing", "wf/wf/missing/0"),
		wfReport("wg", "a", "wf/wg/a/0"), wfReport("nope", "a", "wf/nope/a/0"), wfReport("wf", "a", "wf/wf/a/0")}
	in[4].Status, in[4].Outputs = release.JobFailure, nil
	stored, err := s.ReportsAdd(ctx, in)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true, false, true}, stored, "only reports on existing TaskRuns are stored")
	got, err = s.Reports(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Less(t, got[0].Seq, got[1].Seq, "in the order added")
	for i, want := range []ports.TaskRunReport{in[0], in[4]} {
		require.Positive(t, got[i].Seq)
		want.Seq = got[i].Seq
		require.Equal(t, want, got[i])
	}
	more, err := s.ReportsAdd(ctx, []ports.TaskRunReport{wfReport("wf", "a", "wf/wf/a/1")})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, more)
	all, err := s.Reports(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Greater(t, all[2].Seq, got[1].Seq, "a later report comes later")
	after, err := s.TaskRunWrites(ctx, "wf")
	require.NoError(t, err)
	require.Equal(t, writes, after, "reports write no TaskRun")

	require.NoError(t, s.ReportsDone(ctx, "wf", []int64{got[0].Seq, got[1].Seq, 1 << 40}))
	left, err := s.Reports(ctx, "wf")
	require.NoError(t, err)
	require.Equal(t, all[2:], left, "only the reports named are taken out")
	require.NoError(t, s.ReportsDone(ctx, "wf", []int64{got[0].Seq}), "twice is no error")
	wg, err := s.Reports(ctx, "wg")
	require.NoError(t, err)
	require.Len(t, wg, 1, "other workflows keep theirs")
	require.Equal(t, "wf/wg/a/0", wg[0].JobID)
	none, err := s.Reports(ctx, "nope")
	require.NoError(t, err)
	require.Empty(t, none)
}

// wfReportsWhileWriting: batches of reports across every TaskRun of two
// workflows race batch writes of all those TaskRuns (in reverse order):
// every report is stored, every write either lands or is a conflict, and
// none of them fails otherwise (no deadlock, no lock wait error).
func wfReportsWhileWriting(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	const n = 40
	for _, wf := range []string{"wf", "wg"} {
		require.NoError(t, s.WorkflowCreate(ctx, wfRecord(wf)))
		runs := make([]ports.TaskRunRecord, n)
		for i := range runs {
			runs[i] = wfRun(wf, fmt.Sprintf("r%02d", i), 0)
		}
		require.NoError(t, s.TaskRunsSave(ctx, wf, runs))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 5 {
				var batch []ports.TaskRunReport
				for i := range n {
					wf := []string{"wf", "wg"}[(i+w)%2]
					batch = append(batch, wfReport(wf, fmt.Sprintf("r%02d", (i*7+w+round)%n), fmt.Sprintf("wf/%s/r/%d", wf, round)))
				}
				stored, err := s.ReportsAdd(ctx, batch)
				if err == nil && slices.Contains(stored, false) {
					err = fmt.Errorf("a report on an existing TaskRun was not stored: %v", stored)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, wf := range []string{"wf", "wg"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				runs, err := s.TaskRunsList(ctx, wf)
				if err != nil {
					errs <- err
					return
				}
				slices.Reverse(runs)
				for i := range runs {
					runs[i].Message = "written"
				}
				if err := s.TaskRunsSave(ctx, wf, runs); err != nil && !errors.Is(err, ports.ErrConflict) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := 0
	for _, wf := range []string{"wf", "wg"} {
		reps, err := s.Reports(ctx, wf)
		require.NoError(t, err)
		total += len(reps)
	}
	require.Equal(t, 4*5*n, total, "every report stored once")
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
	require.Nil(t, got.Template, "the template is read apart (WorkflowTemplate)")
	require.Nil(t, got.Matrix, "the matrix is read apart (WorkflowMatrix)")
	w.Template, w.Matrix = nil, nil
	require.Equal(t, w, got)

	got.Template = json.RawMessage(`{"kind":"Other"}`)
	got.CreatedAt, got.TemplateName, got.TemplateRevision = wfT0.Add(time.Hour), "other", 9
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
	require.Equal(t, "deploy", again.TemplateName, "the template's name never changes")
	require.Equal(t, 3, again.TemplateRevision, "the template's revision never changes")
	tmpl, err := s.WorkflowTemplate(ctx, "wf1")
	require.NoError(t, err)
	require.JSONEq(t, `{"kind":"WorkflowTemplate","spec":{"tasks":[]}}`, string(tmpl), "the pinned template never changes")
	_, err = s.WorkflowTemplate(ctx, "nope")
	require.ErrorIs(t, err, ports.ErrNotFound)

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

// wfMatrix: the matrix (and the template) round-trip through
// WorkflowMatrix (WorkflowTemplate) and no other read carries them; an
// update neither changes nor drops them, whatever the record it is given
// holds; a workflow without a matrix has none; a NUL in either is refused
// naming it.
func wfMatrix(t *testing.T, ctx context.Context, s ports.WorkflowStore) {
	w := wfRecord("wf")
	w.Trigger = &ports.WorkflowTrigger{Key: "event:deploy", Kind: ports.TriggerEvent}
	w.Matrix = map[string][]any{"clusters": {map[string]any{"item": "a"}, map[string]any{"item": "b", "n": float64(2)}}, "regions": {"eu"}}
	require.NoError(t, s.WorkflowCreate(ctx, w))
	matrix := func(id string) map[string][]any {
		t.Helper()
		m, err := s.WorkflowMatrix(ctx, id)
		require.NoError(t, err)
		return m
	}
	require.Equal(t, w.Matrix, matrix("wf"))

	got, err := s.WorkflowGet(ctx, "wf")
	require.NoError(t, err)
	require.Nil(t, got.Matrix, "WorkflowGet leaves the matrix out")
	all, err := s.WorkflowList(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Nil(t, all[0].Matrix, "WorkflowList leaves the matrix out")
	require.Nil(t, all[0].Template, "WorkflowList leaves the template out")
	unfinished, err := s.WorkflowsUnfinished(ctx, "event:deploy")
	require.NoError(t, err)
	require.Len(t, unfinished, 1)
	require.Nil(t, unfinished[0].Matrix, "WorkflowsUnfinished leaves the matrix out")
	require.Nil(t, unfinished[0].Template, "WorkflowsUnfinished leaves the template out")
	template := func() string {
		t.Helper()
		b, err := s.WorkflowTemplate(ctx, "wf")
		require.NoError(t, err)
		return string(b)
	}

	got.Phase = workflow.WorkflowRunning
	v, err := s.WorkflowUpdate(ctx, got, got.Version)
	require.NoError(t, err)
	require.Equal(t, w.Matrix, matrix("wf"), "an update without the matrix does not drop it")
	require.JSONEq(t, string(w.Template), template(), "an update without the template does not drop it")
	got.Matrix, got.Template, got.Version = map[string][]any{"clusters": {"other"}}, json.RawMessage(`{"kind":"Other"}`), v
	_, err = s.WorkflowUpdate(ctx, got, v)
	require.NoError(t, err)
	require.Equal(t, w.Matrix, matrix("wf"), "an update does not change it")
	require.JSONEq(t, string(w.Template), template(), "an update does not change the template")

	bare := wfRecord("bare")
	bare.Matrix = nil
	require.NoError(t, s.WorkflowCreate(ctx, bare))
	require.Nil(t, matrix("bare"), "a workflow without a matrix")
	empty := wfRecord("empty")
	empty.Matrix = map[string][]any{}
	require.NoError(t, s.WorkflowCreate(ctx, empty))
	require.Empty(t, matrix("empty"))
	_, err = s.WorkflowMatrix(ctx, "nope")
	require.ErrorIs(t, err, ports.ErrNotFound)

	nul := wfRecord("nul")
	nul.Matrix = map[string][]any{"clusters": {"a\x00"}}
	requireInvalid(t, s.WorkflowCreate(ctx, nul), "matrix.clusters[0]")
	nul = wfRecord("nul")
	nul.Template = json.RawMessage(`{"kind":"WorkflowTemplate","metadata":{"name":"a\u0000"}}`)
	requireInvalid(t, s.WorkflowCreate(ctx, nul), "template.metadata.name")
	_, err = s.WorkflowGet(ctx, "nul")
	require.ErrorIs(t, err, ports.ErrNotFound, "nothing stored")
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
