package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/workflow"
)

// fanTemplate is a 60-item matrix of test-runner jobs and one job after
// them, with a retry strategy and NO timeout: a job that dies with its
// process can only be noticed by the test runner's lease.
func fanTemplate(t *testing.T, delay string) string {
	items := make([]string, 60)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	file := filepath.Join(t.TempDir(), "fan.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata: {name: fan}
spec:
  parameters:
    - {name: items, type: matrix, source: {kind: list, items: [`+strings.Join(items, ", ")+`]}}
  tasks:
    - name: work
      type: job
      jobAgentRef: runner
      matrix: "{{workflow.parameters.items}}"
      matrixStrategy: {maxParallel: 12}
      retryStrategy: {limit: 3}
      config: {delay: `+delay+`}
    - {name: done, type: job, jobAgentRef: runner, dependencies: [work], retryStrategy: {limit: 3}, config: {delay: 10ms}}
`), 0o600))
	return file
}

// TestKillServeMidWorkflowLosesNothing runs a 60-item matrix workflow of
// jobs with no timeout on two serve processes and SIGKILLs one of them
// while it has jobs in flight (read from its accepted sends and the
// stored TaskRuns). The jobs that died with it are noticed by their
// lapsed leases and retried under new job ids; the workflow succeeds with
// every item succeeded; no job id is sent twice; only runs whose job was
// in flight on the killed process are retried.
func TestKillServeMidWorkflowLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	var r workflowKill
	killWorkflow(t, 0, &r)
	require.Positive(t, r.retriedKilled, "a job in flight at the kill was retried after its lease ran out")
	t.Logf("killed the victim with %d jobs in flight; %d of them were retried, the rest had reported just before the kill",
		r.inFlight, r.retriedKilled)
}

// workflowKill is what a workflow kill run observed: lost (TaskRuns not
// succeeded) and duplicated (job ids sent twice) are filled in before
// they are asserted to be zero, so a soak can count a failing run's.
type workflowKill struct {
	jobs, inFlight, retriedKilled, lost, duplicated int
}

// killWorkflow runs the fan workflow on two serve processes and, once
// delay has passed, SIGKILLs the one that has jobs in flight then (either
// may: the one that made a wave's work often leases all of it; its jobs
// take at least delay/2, so the workflow is still running at delay); it
// asserts the recovery and fills res with what it saw.
func killWorkflow(t *testing.T, delay time.Duration, res *workflowKill) {
	ctx := t.Context()
	bin, dsn, be := runnerBackend(t)
	// Jobs long enough that the workflow (five waves of 12) outlasts the
	// kill delay: a workflow over before it has no job in flight to kill.
	file := fanTemplate(t, max(400*time.Millisecond, (delay/2).Round(time.Millisecond)).String())

	log := &procLog{keep: []string{"testrunner.accepted"}}
	serves := map[string]*exec.Cmd{
		"serve-a": startServeLog(t, bin, dsn, "serve-a", log),
		"serve-b": startServeLog(t, bin, dsn, "serve-b", log),
	}
	_, err := runRoot(t, "workflow", "run", file, "--id", "fan-kill", "--dsn", dsn)
	require.NoError(t, err)

	// inFlight lists, by the process that accepted it, the TaskRuns
	// running a job (run id to job id).
	inFlight := func() map[string]map[string]string {
		runs, err := be.workflows.TaskRunsList(ctx, "fan-kill")
		require.NoError(t, err)
		byJob := map[string]string{}
		for _, r := range runs {
			if r.Phase == workflow.TaskRunning && r.JobID != "" {
				byJob[r.JobID] = r.ID
			}
		}
		out := map[string]map[string]string{}
		for job, procs := range sendsByJob(log) {
			if run, ok := byJob[job]; ok {
				if out[procs[0]] == nil {
					out[procs[0]] = map[string]string{}
				}
				out[procs[0]][run] = job
			}
		}
		return out
	}
	var (
		victim string
		killed map[string]string
	)
	start := time.Now()
	defer func() {
		if !t.Failed() {
			return
		}
		// Which process sent each job first, and where the workflow is.
		first := map[string]int{}
		for _, procs := range sendsByJob(log) {
			first[procs[0]]++
		}
		w, err := be.workflows.WorkflowGet(context.WithoutCancel(ctx), "fan-kill")
		t.Logf("delay %s; victim %q; jobs sent first by each process %v; workflow %s (%v)", delay, victim, first, w.Phase, err)
	}()
	waitUntil(t, 60*time.Second, func() bool {
		if time.Since(start) < delay {
			return false
		}
		for proc, runs := range inFlight() {
			if len(runs) > len(killed) {
				victim, killed = proc, runs
			}
		}
		return len(killed) >= 1
	})
	require.NoError(t, serves[victim].Process.Kill())
	_ = serves[victim].Wait()
	res.inFlight = len(killed)
	defer func() { // also when a wait or an assertion below fails
		res.lost, res.duplicated, res.jobs = 61, 0, 0
		if runs, err := be.workflows.TaskRunsList(ctx, "fan-kill"); err == nil {
			for _, r := range runs {
				if r.Phase == workflow.TaskSucceeded {
					res.lost--
				}
			}
		}
		for _, procs := range sendsByJob(log) {
			res.jobs++
			if len(procs) > 1 {
				res.duplicated++
			}
		}
	}()

	waitUntil(t, 90*time.Second, func() bool {
		w, err := be.workflows.WorkflowGet(ctx, "fan-kill")
		require.NoError(t, err)
		return w.Phase.Terminal()
	})
	st, err := (&flow.Controller{Store: be.workflows}).Status(ctx, "fan-kill")
	require.NoError(t, err)
	require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase, st.Workflow.Message)
	require.Len(t, st.TaskRuns, 61)
	for _, r := range st.TaskRuns {
		require.Equal(t, workflow.TaskSucceeded, r.Phase, "%s: %s", r.ID, r.Message)
		if r.Attempt == 0 {
			continue
		}
		// A retried run's first job died with the victim: it was in flight
		// there, or recorded by the victim's pass and never sent.
		_, wasKilled := killed[r.ID]
		first := sendsByJob(log)[flow.JobID("fan-kill", r.ID, 0)]
		require.True(t, wasKilled || len(first) == 0 || first[0] == victim,
			"%s was retried although its first job ran on the survivor (%v, victim %s)", r.ID, first, victim)
		if wasKilled {
			res.retriedKilled++
		}
	}
	for job, procs := range sendsByJob(log) {
		require.Len(t, procs, 1, "job %s sent once", job)
	}
}
