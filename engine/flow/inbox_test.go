package flow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// quietLeaser is a JobLeaser that accepts every job and reports nothing
// by itself: the test reports for it.
type quietLeaser struct{}

func (quietLeaser) Type() string            { return "quiet" }
func (quietLeaser) JobLease() time.Duration { return 10 * time.Second }

func (quietLeaser) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return ports.JobDispatchResult{ExternalID: "ext/" + d.Job.ID, Status: release.JobInProgress}, nil
}

// TestReportsGoThroughTheInbox: an agent's reports (a lease renewal, a
// terminal report, a stale one) write no TaskRun: they wait in the
// workflow's inbox, and the workflow's next pass applies them in order and
// takes them out. A renewal keeps a job whose first lease ran out alive;
// a report naming no TaskRun is ErrNotFound; the terminal report ends the
// run with its outputs, and a later renewal changes nothing.
func TestReportsGoThroughTheInbox(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, eng, clock := setupController(t, open)
			useAgent(t, c, "q", quietLeaser{})
			tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{"tasks":[
				{"name":"a","type":"job","jobAgentRef":"q"},
				{"name":"b","type":"job","jobAgentRef":"q","dependencies":["a"],"config":{"n":"{{tasks.a.outputs.n}}"}}]}}`
			_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl)})
			require.NoError(t, err)
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			sent := clock.Now()
			run := func() ports.TaskRunRecord {
				r, err := c.Store.TaskRunGet(ctx, "w", "a")
				require.NoError(t, err)
				return r
			}
			job := run().JobID
			require.Equal(t, "wf/w/a/0", job)
			writes, err := c.Store.TaskRunWrites(ctx, "w")
			require.NoError(t, err)

			clock.Advance(8 * time.Second)
			require.NoError(t, c.ReportJob(ctx, ports.JobReport{JobID: job, Status: release.JobInProgress, Lease: 10 * time.Second}))
			require.NoError(t, c.ReportJob(ctx, ports.JobReport{JobID: "wf/w/a/7", Status: release.JobSuccessful}), "another attempt's report is taken")
			require.ErrorIs(t, c.ReportJob(ctx, ports.JobReport{JobID: "wf/w/zz/0", Status: release.JobSuccessful}), ports.ErrNotFound)
			require.ErrorIs(t, c.ReportJob(ctx, ports.JobReport{JobID: "wf/nope/a/0", Status: release.JobSuccessful}), ports.ErrNotFound)
			inbox, err := c.Store.Reports(ctx, "w")
			require.NoError(t, err)
			require.Len(t, inbox, 2)
			require.Equal(t, sent.Add(18*time.Second), inbox[0].LeaseUntil.UTC(), "a renewal asks for its lease from its time")
			after, err := c.Store.TaskRunWrites(ctx, "w")
			require.NoError(t, err)
			require.Equal(t, writes, after, "reports write no TaskRun")

			clock.Advance(4 * time.Second) // past the first lease, within the renewed one
			require.NoError(t, c.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: flow.Key("w")}))
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			r := run()
			require.Equal(t, workflow.TaskRunning, r.Phase, r.Message)
			require.Equal(t, sent.Add(18*time.Second), r.Delivery.LeaseUntil.UTC(), "the pass applied the renewal before judging the lease")
			inbox, err = c.Store.Reports(ctx, "w")
			require.NoError(t, err)
			require.Empty(t, inbox, "the pass took out what it applied and what was stale")

			require.NoError(t, c.ReportJob(ctx, ports.JobReport{JobID: job, Status: release.JobSuccessful, ExternalID: "x",
				Message: "done", Outputs: map[string]any{"n": 4}}))
			require.NoError(t, c.ReportJob(ctx, ports.JobReport{JobID: job, Status: release.JobInProgress, Lease: time.Minute}))
			require.Equal(t, workflow.TaskRunning, run().Phase, "not applied before a pass")
			_, err = eng.Drain(ctx) // the terminal report woke the workflow
			require.NoError(t, err)
			r = run()
			require.Equal(t, workflow.TaskSucceeded, r.Phase)
			require.Equal(t, "done", r.Message)
			require.Equal(t, clock.Now(), r.FinishedAt.UTC(), "ended at the report's time")
			require.Equal(t, sent.Add(18*time.Second), r.Delivery.LeaseUntil.UTC(), "a renewal after the end changes nothing")
			b, err := c.Store.TaskRunGet(ctx, "w", "b")
			require.NoError(t, err)
			require.Equal(t, map[string]any{"n": float64(4)}, b.Config["config"], "the outputs fed the next task")
			inbox, err = c.Store.Reports(ctx, "w")
			require.NoError(t, err)
			require.Empty(t, inbox)
		})
	}
}

// TestConcurrentReportsShareWrites: the terminal reports of many jobs,
// sent while an inbox write is in flight, are stored together in later
// writes (engine.Coalescer), all end their runs, and the workflow
// succeeds.
func TestConcurrentReportsShareWrites(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, eng, _ := setupController(t, open)
			counting := &countingStore{WorkflowStore: c.Store, entered: make(chan struct{}), gate: make(chan struct{})}
			c.Store = counting
			useAgent(t, c, "q", quietLeaser{})
			const n = 64
			items := make([]string, n)
			for i := range items {
				items[i] = fmt.Sprintf(`"i%d"`, i)
			}
			tmpl := fmt.Sprintf(`{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{
				"parameters":[{"name":"items","type":"matrix","source":{"kind":"list","items":[%s]}}],
				"tasks":[{"name":"a","type":"job","jobAgentRef":"q","matrix":"{{workflow.parameters.items}}"}]}}`, join(items))
			_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl)})
			require.NoError(t, err)
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			st, err := c.Status(ctx, "w")
			require.NoError(t, err)
			require.Len(t, st.TaskRuns, n)
			var wg sync.WaitGroup
			errs := make([]error, n)
			report := func(i int) {
				defer wg.Done()
				errs[i] = c.ReportJob(ctx, ports.JobReport{JobID: st.TaskRuns[i].JobID, Status: release.JobSuccessful})
			}
			wg.Add(1)
			go report(0)
			<-counting.entered // the first report's write is in flight, held
			started := make(chan struct{}, n)
			for i := 1; i < n; i++ {
				wg.Add(1)
				go func() {
					started <- struct{}{}
					report(i)
				}()
			}
			for i := 1; i < n; i++ {
				<-started
			}
			close(counting.gate)
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			require.Greater(t, counting.largest(), 1, "reports that came during a write are stored together")
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			st, err = c.Status(ctx, "w")
			require.NoError(t, err)
			require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase, st.Workflow.Message)
		})
	}
}

// countingStore holds its first ReportsAdd call until gate is closed
// (entered says it was called) and keeps the largest batch.
type countingStore struct {
	ports.WorkflowStore
	entered, gate chan struct{}

	mu    sync.Mutex
	calls int
	most  int
}

func (s *countingStore) ReportsAdd(ctx context.Context, reps []ports.TaskRunReport) ([]bool, error) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.most = max(s.most, len(reps))
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.gate
	}
	return s.WorkflowStore.ReportsAdd(ctx, reps)
}

func (s *countingStore) largest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

// InTx keeps the wrapped store's transactions (ports.Transactor).
func (s *countingStore) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if tx, ok := s.WorkflowStore.(ports.Transactor); ok {
		return tx.InTx(ctx, fn)
	}
	return fn(ctx)
}

func join(items []string) string {
	out := ""
	for i, s := range items {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}
