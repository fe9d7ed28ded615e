package main

import (
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/testrunner"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// acceptedJob finds the job id in a test runner's testrunner.accepted line.
var acceptedJob = regexp.MustCompile(`testrunner\.accepted job=(\S+)`)

// sendsByJob counts the test runners' accepted sends per job id, across
// every process whose lines log kept.
func sendsByJob(log *procLog) map[string][]string {
	out := map[string][]string{}
	for _, l := range log.matching("testrunner.accepted") {
		if m := acceptedJob.FindStringSubmatch(l.text); m != nil {
			out[m[1]] = append(out[m[1]], l.proc)
		}
	}
	return out
}

// fastJobsTemplate is a workflow of 20 parallel millisecond jobs (5 to
// 25 ms) and one after them: their reports race the pass that is still
// dispatching their siblings.
const fastJobsTemplate = `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"fast"},"spec":{
	"parameters":[{"name":"delays","type":"matrix","source":{"kind":"list","items":
		["5ms","10ms","15ms","20ms","25ms","5ms","10ms","15ms","20ms","25ms","5ms","10ms","15ms","20ms","25ms","5ms","10ms","15ms","20ms","25ms"]}}],
	"tasks":[
	{"name":"work","type":"job","jobAgentRef":"runner","matrix":"{{workflow.parameters.delays}}","config":{"delay":"{{matrix.item}}"}},
	{"name":"done","type":"job","jobAgentRef":"runner","config":{"delay":"5ms"},"dependencies":["work"]}]}}`

// runnerBackend builds the binary and opens a fresh migrated Postgres
// schema (closed when the test ends) with the test runner's agent record
// "runner" stored.
func runnerBackend(t *testing.T) (bin, dsn string, be *backend) {
	t.Helper()
	bin, err := buildBinary()
	require.NoError(t, err)
	dsn, _ = pgtest.Schema(t)
	be, err = openBackend(t.Context(), dsn, true, ports.SystemClock)
	require.NoError(t, err)
	t.Cleanup(be.close)
	_, err = be.releases.JobAgents().Put(t.Context(), release.JobAgent{ID: "runner", Name: "runner", Type: testrunner.Type}, 0)
	require.NoError(t, err)
	return bin, dsn, be
}

// TestNoJobSentTwiceAcrossProcesses runs 100 workflows of millisecond
// jobs on three serve processes sharing one Postgres, with no kill: every
// job id is sent exactly once, by one process, and every workflow
// succeeds.
func TestNoJobSentTwiceAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	ctx := t.Context()
	bin, dsn, be := runnerBackend(t)

	log := &procLog{keep: []string{"testrunner.accepted"}}
	for i := range 3 {
		// No process is killed here, so the test runner's job leases (the
		// lock) need not be short: a 2 s lease can run out between a job's
		// record and its send on a loaded machine, failing it as lost.
		startServeLog(t, bin, dsn, fmt.Sprintf("serve%d", i), log, "--lock", "15s")
	}
	c := &flow.Controller{Store: be.workflows, Queue: be.queue, Releases: be.releases, Clock: ports.SystemClock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const n = 100
	for i := range n {
		_, err := c.Start(ctx, flow.StartParams{ID: fmt.Sprintf("fast-%03d", i), Template: []byte(fastJobsTemplate)})
		require.NoError(t, err)
	}
	waitUntil(t, 120*time.Second, func() bool {
		ws, err := be.workflows.WorkflowList(ctx, "", n+1)
		require.NoError(t, err)
		for _, w := range ws {
			if !w.Phase.Terminal() {
				return false
			}
		}
		return len(ws) == n
	})

	jobs := 0
	for i := range n {
		st, err := c.Status(ctx, fmt.Sprintf("fast-%03d", i))
		require.NoError(t, err)
		for _, r := range st.TaskRuns { // the failed TaskRun's own message says why, so check them first
			require.Equal(t, workflow.TaskSucceeded, r.Phase, "%s/%s: %s", st.Workflow.ID, r.ID, r.Message)
		}
		require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase, "%s: %s", st.Workflow.ID, st.Workflow.Message)
		require.Len(t, st.TaskRuns, 21)
		for _, r := range st.TaskRuns {
			require.Equal(t, workflow.TaskSucceeded, r.Phase, "%s/%s: %s", st.Workflow.ID, r.ID, r.Message)
			require.Zero(t, r.Attempt, "%s/%s: no job had to be retried", st.Workflow.ID, r.ID)
			jobs++
		}
	}
	// The last reports' lines may trail the stores by a moment.
	waitUntil(t, 10*time.Second, func() bool { return len(sendsByJob(log)) >= jobs })
	sends := sendsByJob(log)
	dups := 0
	for id, procs := range sends {
		if len(procs) > 1 {
			dups++
			t.Errorf("job %s sent %d times, by %v", id, len(procs), procs)
		}
	}
	require.Len(t, sends, jobs, "every job sent")
	require.Zero(t, dups, "jobs sent more than once")
	t.Logf("%d workflows, %d jobs on 3 processes: %d sent twice", n, jobs, dups)
}
