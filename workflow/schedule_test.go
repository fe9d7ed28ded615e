package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

const (
	pFlag   = "- {name: go, type: boolean, default: false}"
	pShards = "- {name: shards, type: matrix, source: {kind: list, items: [a]}}"
	pBoth   = pShards + "\n- {name: zones, type: matrix, source: {kind: list, items: [a]}}"

	tAB  = "- {name: a, type: job, jobAgentRef: ci}\n- {name: b, type: job, jobAgentRef: ci, dependencies: [a]}"
	tABC = tAB + "\n- {name: c, type: job, jobAgentRef: ci, dependencies: [b]}"
	// deploy and verify share the shards matrix; report gathers them all.
	tPaired = `- {name: deploy, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}"}
- {name: verify, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}", dependencies: [deploy]}
- {name: report, type: job, jobAgentRef: ci, dependencies: [deploy]}`
	tCapped   = `- {name: d, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}", matrixStrategy: {maxParallel: 2}}`
	tFailFast = `- {name: d, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}", matrixStrategy: {maxParallel: 1, failFast: true}}
- {name: v, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}", dependencies: [d], matrixStrategy: {failFast: true}}`
	tRetry   = `- {name: a, type: job, jobAgentRef: ci, retryStrategy: {limit: 2, backoff: {duration: 10s, factor: 3, cap: 20s, maxDuration: 1h}}}`
	tTimeout = `- {name: a, type: job, jobAgentRef: ci, timeout: 60, retryStrategy: {limit: 1}}`
	tWait    = `- {name: w, type: wait, wait: {duration: 5m}}`
)

func TestScheduleRules(t *testing.T) {
	t.Parallel()
	shards := func(n int) map[string][]any { return map[string][]any{"shards": items(n)} }
	cases := []struct {
		name          string
		params, tasks string
		matrix        map[string][]any
		pending       bool // workflow phase Pending
		cancel        bool
		runs          []workflow.TaskRun
		want          []string
	}{
		{name: "a pending workflow starts and creates its roots", tasks: tAB, pending: true,
			want: []string{"start", "create a Pending dependencies-done"}},
		{name: "a created run is dispatched", tasks: tAB, runs: []workflow.TaskRun{r("a", workflow.TaskPending)},
			want: []string{"dispatch a"}},
		{name: "dependents wait for running dependencies", tasks: tAB, runs: []workflow.TaskRun{r("a", workflow.TaskRunning)},
			want: []string{}},
		{name: "dependents are created once dependencies succeed", tasks: tAB, runs: []workflow.TaskRun{r("a", workflow.TaskSucceeded)},
			want: []string{"create b Pending dependencies-done"}},
		{name: "false when skips and dependents of a skipped task still run", params: pFlag,
			tasks: "- {name: a, type: job, jobAgentRef: ci, when: '{{workflow.parameters.go}}'}\n- {name: b, type: job, jobAgentRef: ci, dependencies: [a]}",
			want:  []string{"create a Skipped when-false", "create b Pending dependencies-done"}},
		{name: "dependents of a failed task fail, transitively in one pass", tasks: tABC, runs: []workflow.TaskRun{r("a", workflow.TaskFailed)},
			want: []string{"create b Failed dependency-failed", "create c Failed dependency-failed"}},
		{name: "dependents of a cancelled task are cancelled", tasks: tAB, runs: []workflow.TaskRun{r("a", workflow.TaskCancelled)},
			want: []string{"create b Cancelled dependency-cancelled"}},
		{name: "paired matrix items wait only for their own item", params: pShards, tasks: tPaired, matrix: shards(3),
			runs: []workflow.TaskRun{r("deploy[0]", workflow.TaskSucceeded), r("deploy[1]", workflow.TaskRunning), r("deploy[2]", workflow.TaskFailed)},
			want: []string{"create verify[0] Pending dependencies-done", "create verify[2] Failed dependency-failed"}},
		{name: "an unpaired dependent waits for every item", params: pShards, tasks: tPaired, matrix: shards(2),
			runs: []workflow.TaskRun{r("deploy[0]", workflow.TaskSucceeded), r("deploy[1]", workflow.TaskSucceeded),
				r("verify[0]", workflow.TaskRunning), r("verify[1]", workflow.TaskRunning)},
			want: []string{"create report Pending dependencies-done"}},
		{name: "tasks over different matrices do not pair", params: pBoth, matrix: map[string][]any{"shards": items(2), "zones": items(2)},
			tasks: `- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}"}
- {name: b, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.zones}}", dependencies: [a]}`,
			runs: []workflow.TaskRun{r("a[0]", workflow.TaskSucceeded), r("a[1]", workflow.TaskRunning)},
			want: []string{}},
		{name: "maxParallel caps running items", params: pShards, tasks: tCapped, matrix: shards(5),
			runs: []workflow.TaskRun{r("d[0]", workflow.TaskRunning), r("d[1]", workflow.TaskPending), r("d[2]", workflow.TaskPending), r("d[3]", workflow.TaskPending), r("d[4]", workflow.TaskPending)},
			want: []string{"dispatch d[1]"}},
		{name: "items in backoff wait and free their slot", params: pShards, tasks: tCapped, matrix: shards(3),
			runs: []workflow.TaskRun{r("d[0]", workflow.TaskPending, notBefore(30*time.Second)), r("d[1]", workflow.TaskPending), r("d[2]", workflow.TaskPending)},
			want: []string{"dispatch d[1]", "dispatch d[2]", "wake +30s"}},
		{name: "failFast cancels pending items and lets running ones finish", params: pShards, tasks: tFailFast, matrix: shards(4),
			runs: []workflow.TaskRun{r("d[0]", workflow.TaskFailed), r("d[1]", workflow.TaskRunning), r("d[2]", workflow.TaskPending), r("d[3]", workflow.TaskPending), r("v[0]", workflow.TaskFailed, neverStarted())},
			want: []string{"cancel d[2] fail-fast", "cancel d[3] fail-fast", "create v[2] Cancelled dependency-cancelled", "create v[3] Cancelled dependency-cancelled"}},
		{name: "failFast cancels items created after the failure", params: pShards, tasks: tFailFast, matrix: shards(2),
			runs: []workflow.TaskRun{r("d[0]", workflow.TaskSucceeded), r("d[1]", workflow.TaskSucceeded), r("v[0]", workflow.TaskFailed)},
			want: []string{"create v[1] Cancelled fail-fast"}},
		{name: "failFast ignores items that failed without running", params: pShards, tasks: tFailFast, matrix: shards(2),
			runs: []workflow.TaskRun{r("d[0]", workflow.TaskFailed), r("d[1]", workflow.TaskSucceeded), r("v[0]", workflow.TaskFailed, neverStarted())},
			want: []string{"create v[1] Pending dependencies-done"}},
		{name: "cancellation cancels pending and running runs and creates nothing", tasks: tABC + "\n- {name: x, type: job, jobAgentRef: ci}", cancel: true,
			runs: []workflow.TaskRun{r("a", workflow.TaskSucceeded), r("b", workflow.TaskRunning), r("x", workflow.TaskPending)},
			want: []string{"cancel b cancel-requested", "cancel x cancel-requested"}},
		{name: "a cancelled workflow completes once every run is final", tasks: tABC, cancel: true,
			runs: []workflow.TaskRun{r("a", workflow.TaskSucceeded), r("b", workflow.TaskCancelled)},
			want: []string{"workflow Cancelled cancel-requested"}},
		{name: "a pending workflow cancelled before it started", tasks: tAB, cancel: true, pending: true,
			want: []string{"workflow Cancelled cancel-requested"}},
		{name: "a failed attempt is retried after its backoff", tasks: tRetry, runs: []workflow.TaskRun{r("a", workflow.TaskFailed)},
			want: []string{"retry a attempt=1 at=+9s", "wake +9s"}},
		{name: "backoff grows by factor up to cap", tasks: tRetry, runs: []workflow.TaskRun{r("a", workflow.TaskFailed, attemptN(1))},
			want: []string{"retry a attempt=2 at=+19s", "wake +19s"}},
		{name: "no retry past the limit", tasks: tRetry + "\n- {name: b, type: job, jobAgentRef: ci, dependencies: [a]}",
			runs: []workflow.TaskRun{r("a", workflow.TaskFailed, attemptN(2))},
			want: []string{"create b Failed dependency-failed"}},
		{name: "no retry past maxDuration", tasks: tRetry, runs: []workflow.TaskRun{r("a", workflow.TaskFailed, firstStartedAgo(time.Hour))},
			want: []string{"workflow Failed task-failed"}},
		{name: "a retried run is dispatched once its backoff passed", tasks: tRetry,
			runs: []workflow.TaskRun{r("a", workflow.TaskPending, attemptN(1), notBefore(-time.Second))},
			want: []string{"dispatch a"}},
		{name: "a run past its timeout fails", tasks: tTimeout, runs: []workflow.TaskRun{r("a", workflow.TaskRunning, startedAgo(61*time.Second))},
			want: []string{"fail a timeout"}},
		{name: "a running run wakes the scheduler at its timeout", tasks: tTimeout, runs: []workflow.TaskRun{r("a", workflow.TaskRunning, startedAgo(20*time.Second))},
			want: []string{"wake +40s"}},
		{name: "wait tasks are dispatched like others", tasks: tWait, runs: []workflow.TaskRun{r("w", workflow.TaskPending)},
			want: []string{"dispatch w"}},
		{name: "a running wait wakes the scheduler when it ends", tasks: tWait, runs: []workflow.TaskRun{r("w", workflow.TaskRunning, startedAgo(time.Minute))},
			want: []string{"wake +4m0s"}},
		{name: "the scheduler completes an elapsed wait itself", tasks: tWait, runs: []workflow.TaskRun{r("w", workflow.TaskRunning, startedAgo(5*time.Minute))},
			want: []string{"complete w Succeeded"}},
		{name: "the workflow succeeds when every run succeeded or was skipped", tasks: tAB,
			runs: []workflow.TaskRun{r("a", workflow.TaskSkipped), r("b", workflow.TaskSucceeded)},
			want: []string{"workflow Succeeded all-succeeded"}},
		{name: "the workflow fails when a run failed for good", tasks: tAB,
			runs: []workflow.TaskRun{r("a", workflow.TaskFailed), r("b", workflow.TaskFailed, neverStarted())},
			want: []string{"workflow Failed task-failed"}},
		{name: "an empty matrix is done at once", params: pShards, tasks: tPaired, matrix: shards(0),
			want: []string{"create report Pending dependencies-done"}},
		{name: "unknown and duplicate runs are ignored", tasks: tAB,
			runs: []workflow.TaskRun{r("ghost", workflow.TaskRunning), r("a[3]", workflow.TaskRunning), r("a", workflow.TaskSucceeded), r("a", workflow.TaskRunning)},
			want: []string{"create b Pending dependencies-done"}},
		{name: "a missing matrix is invalid input", params: pShards, tasks: tPaired, matrix: map[string][]any{},
			want: []string{"workflow Failed invalid-input"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			in := f.input(tc.params, tc.tasks, tc.matrix, tc.runs...)
			if tc.pending {
				in.Workflow.Phase = workflow.WorkflowPending
			}
			in.Workflow.CancelRequested = tc.cancel
			got := workflow.Schedule(in)
			require.Equal(t, tc.want, summarize(got))
			require.Equal(t, got, workflow.Schedule(in), "the same input gives the same actions")
		})
	}
}

func TestFailFastStopsRetries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tasks := `- {name: d, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}", matrixStrategy: {failFast: true}, retryStrategy: {limit: 3}}`
	in := f.input(pShards, tasks, map[string][]any{"shards": items(2)},
		r("d[0]", workflow.TaskFailed, attemptN(3)), r("d[1]", workflow.TaskFailed))
	require.Equal(t, []string{"workflow Failed task-failed"}, summarize(workflow.Schedule(in)),
		"once an item failed for good, the others get no more attempts")
	in.TaskRuns[0].Attempt = 1
	require.Equal(t, []string{"retry d[0] attempt=2 at=-1s", "retry d[1] attempt=1 at=-1s"}, summarize(workflow.Schedule(in)),
		"retryable failures do not trip fail-fast")
}
