package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/testrunner"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// TestWorkflowValidateCLI: every template in testdata/workflows passes (the
// seed's, and its list-source twin reading {{matrix.resource.name}}); a
// broken one lists every problem with its path and exits 2.
func TestWorkflowValidateCLI(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../testdata/workflows/*.yaml")
	require.NoError(t, err)
	require.Contains(t, files, "../../testdata/workflows/multi-cluster-list.yaml")
	for _, f := range files {
		out, err := runRoot(t, "workflow", "validate", f)
		require.NoError(t, err, f)
		require.Contains(t, out, "valid WorkflowTemplate", f)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: x}\nspec:\n"+
		"  tasks:\n    - {name: a, type: wait, wait: {duration: 1s}, dependencies: [b]}\n    - {name: b, type: wait, wait: {duration: 1s}, dependencies: [a], colour: red}\n"), 0o600))
	out, err := runRoot(t, "workflow", "validate", bad)
	requireExit(t, err, 2, "problems")
	require.Contains(t, out, "spec.tasks[1].colour")
	require.Contains(t, out, "dependency cycle")
	out, err = runRoot(t, "workflow", "validate", bad, "-o", "json")
	requireExit(t, err, 2, "problems")
	var res struct {
		Valid    bool               `json:"valid"`
		Problems []workflow.Problem `json:"problems"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.False(t, res.Valid)
	require.Len(t, res.Problems, 2)
	_, err = runRoot(t, "workflow", "validate", "no-such-file.yaml")
	requireExit(t, err, 2, "no such file")
}

const cliTemplate = `apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata: {name: ship}
spec:
  parameters:
    - {name: replicas, type: number, required: true}
  tasks:
    - name: build
      type: job
      jobAgentRef: runner
      config: {delay: 10ms, outputs: {image: "app:{{workflow.parameters.replicas}}"}}
    - name: gate
      type: approval
      approval: {message: "ship {{tasks.build.outputs.image}}?", approvers: ["local:alice"]}
      dependencies: [build]
`

// TestWorkflowRunCLI: run starts a workflow on Postgres (bad parameters
// start nothing), a controller runs it with the test runner, approve lets
// it finish, status shows the DAG.
func TestWorkflowRunCLI(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	t.Setenv("USER", "alice") // the offline approver is local:alice
	dsn, _ := pgtest.Schema(t)
	file := filepath.Join(t.TempDir(), "ship.yaml")
	require.NoError(t, os.WriteFile(file, []byte(cliTemplate), 0o600))

	_, err := runRoot(t, "workflow", "run", file, "--dsn", dsn)
	requireExit(t, err, 2, "replicas")
	out, err := runRoot(t, "workflow", "run", file, "--param", "replicas=3", "--id", "ship-1", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "started workflow ship-1")
	_, err = runRoot(t, "workflow", "run", file, "--param", "replicas=3", "--id", "ship-1", "--dsn", dsn)
	requireExit(t, err, 3, "conflict")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	be, err := openBackend(ctx, dsn, true, ports.SystemClock)
	require.NoError(t, err)
	defer be.close()
	_, err = be.releases.JobAgents().Put(ctx, release.JobAgent{ID: "runner", Name: "runner", Type: testrunner.Type}, 0)
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var c *flow.Controller
	runner := testrunner.New(ports.JobReporterFunc(func(ctx context.Context, r ports.JobReport) error { return c.ReportJob(ctx, r) }), ports.SystemClock)
	defer runner.Close()
	c = &flow.Controller{Store: be.workflows, Queue: be.queue, Releases: be.releases, Clock: ports.SystemClock, Logger: log,
		Agents: map[string]ports.JobAgent{testrunner.Type: runner}}
	eng := engine.New(be.queue, engine.Options{Logger: log, PollInterval: 20 * time.Millisecond})
	c.Register(eng, 2)
	go func() { _ = eng.Run(ctx) }()

	phase := func(task string) workflow.TaskPhase {
		st, err := c.Status(ctx, "ship-1")
		require.NoError(t, err)
		for _, r := range st.TaskRuns {
			if r.Task == task {
				return r.Phase
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return phase("gate") == workflow.TaskRunning }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		out, err = runRoot(t, "workflow", "status", "ship-1", "--dsn", dsn)
		return err == nil && strings.Contains(out, "waiting for approval (0 of 1 from local:alice): ship app:3?")
	}, 10*time.Second, 20*time.Millisecond, "approvers see what they approve: %s", out)
	require.Contains(t, out, "workflow ship-1 (ship): Running")
	require.Contains(t, out, "build")
	require.Contains(t, out, "Succeeded")

	_, err = runRoot(t, "workflow", "approve", "ship-1", "build", "--dsn", dsn)
	requireExit(t, err, 2, "not an approval")
	out, err = runRoot(t, "workflow", "approve", "ship-1", "gate", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "local:alice approved gate")
	require.Eventually(t, func() bool {
		w, err := c.Status(ctx, "ship-1")
		return err == nil && w.Workflow.Phase == workflow.WorkflowSucceeded
	}, 10*time.Second, 20*time.Millisecond)
	out, err = runRoot(t, "workflow", "status", "ship-1", "-o", "json", "--dsn", dsn)
	require.NoError(t, err)
	var st flow.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase)
	for _, r := range st.TaskRuns {
		if r.Task == "gate" {
			require.Equal(t, "ship app:3?", r.Config["approval"].(map[string]any)["message"], "outputs of build feed gate")
		}
	}
	_, err = runRoot(t, "workflow", "status", "nope", "--dsn", dsn)
	requireExit(t, err, 4, "not found")
}

// TestWorkflowCLINoDSN: the database commands say what to set.
func TestWorkflowCLINoDSN(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	for _, args := range [][]string{{"workflow", "run", "x"}, {"workflow", "status", "x"}, {"workflow", "approve", "x", "y"}, {"workflow", "cancel", "x"}} {
		_, err := runRoot(t, args...)
		requireExit(t, err, 2, "RECONCILER_DSN")
	}
}

// TestWorkflowRunMatrixFromStore: a resource matrix selects the stored
// workspace's resources; without a workspace the run is refused, naming
// the flag's field, and nothing is stored.
func TestWorkflowRunMatrixFromStore(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	dsn, _ := pgtest.Schema(t)
	ctx := t.Context()
	be, err := openBackend(ctx, dsn, true, ports.SystemClock)
	require.NoError(t, err)
	defer be.close()
	_, err = be.releases.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "acme"}, 0)
	require.NoError(t, err)
	_, err = be.releases.Systems().Put(ctx, release.System{ID: "shop", WorkspaceID: "ws", Name: "shop"}, 0)
	require.NoError(t, err)
	for _, r := range []release.Resource{
		{ID: "eu-1", WorkspaceID: "ws", Kind: "Kubernetes", Identifier: "k/eu-1", Name: "eu-1"},
		{ID: "us-1", WorkspaceID: "ws", Kind: "Kubernetes", Identifier: "k/us-1", Name: "us-1"},
		{ID: "vm-1", WorkspaceID: "ws", Kind: "VM", Identifier: "vm-1", Name: "vm-1"},
	} {
		_, err = be.releases.Resources().Put(ctx, r, 0)
		require.NoError(t, err)
	}
	file := filepath.Join(t.TempDir(), "fan.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata: {name: fan}
spec:
  parameters:
    - {name: clusters, type: matrix, source: {kind: resource, selector: 'resource.kind == "Kubernetes"'}}
  tasks:
    - {name: wait, type: wait, matrix: "{{workflow.parameters.clusters}}", wait: {duration: 1s}}
`), 0o600))
	_, err = runRoot(t, "workflow", "run", file, "--id", "fan-0", "--dsn", dsn)
	requireExit(t, err, 2, "workspace")
	_, err = be.workflows.WorkflowGet(ctx, "fan-0")
	require.ErrorIs(t, err, ports.ErrNotFound)

	_, err = runRoot(t, "workflow", "run", file, "--id", "fan-1", "--system", "shop", "--dsn", dsn)
	require.NoError(t, err)
	matrix, err := be.workflows.WorkflowMatrix(ctx, "fan-1")
	require.NoError(t, err)
	var names []string
	for _, it := range matrix["clusters"] {
		names = append(names, it.(map[string]any)["resource"].(map[string]any)["name"].(string))
	}
	require.Equal(t, []string{"eu-1", "us-1"}, names, "the system's workspace's Kubernetes resources, by id")
}

// TestWorkflowValidateCLITriggers: validate names a bad hook filter and a
// bad schedule (exit 2) and says what starts a valid template.
func TestWorkflowValidateCLITriggers(t *testing.T) {
	t.Parallel()
	out, err := runRoot(t, "workflow", "validate", "../../testdata/workflows/nightly-smoke.yaml")
	require.NoError(t, err)
	require.Contains(t, out, `starts schedule "0 3 * * *" in Europe/Paris`)
	out, err = runRoot(t, "workflow", "validate", "../../testdata/workflows/notify-on-failure.yaml")
	require.NoError(t, err)
	require.Contains(t, out, "starts on job.failed, on verification.failed")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: x}\nspec:\n"+
		"  hooks:\n    - event: job.failed\n      filter: event.job.status\n  schedule: '0 3 * * 9'\n  timezone: Europe/Nowhere\n"+
		"  tasks:\n    - {name: a, type: wait, wait: {duration: 1s}}\n"), 0o600))
	out, err = runRoot(t, "workflow", "validate", bad)
	requireExit(t, err, 2, "problems")
	require.Contains(t, out, "spec.hooks[0].filter: bad expression \"event.job.status\": line 1, column 1: result is dyn, want bool (line 7, column 7)")
	require.Contains(t, out, "spec.schedule: bad schedule \"0 3 * * 9\": day of week: 9 is out of range 0-7 (line 8, column 3)")
	require.Contains(t, out, `spec.timezone: unknown timezone "Europe/Nowhere"`)
}

func TestWorkflowStatusSaysWhatStartedIt(t *testing.T) {
	t.Parallel()
	tmpl := json.RawMessage(`{"spec":{"tasks":[{"name":"a","type":"wait"}]}}`)
	at := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
	for want, w := range map[string]ports.WorkflowRecord{
		`started by schedule "30 2 * * *" (Europe/Paris) for 2026-03-29T01:00:00Z`: {Trigger: &ports.WorkflowTrigger{Kind: ports.TriggerSchedule,
			Schedule: "30 2 * * *", Timezone: "Europe/Paris", ScheduledAt: at}},
		"started by event job.failed #7 (release r1, target d:e:r, job j1 failure)": {Trigger: &ports.WorkflowTrigger{Kind: ports.TriggerEvent,
			Event: &ports.Event{Seq: 7, Type: workflow.EventJobFailed, ReleaseID: "r1", TargetKey: "d:e:r", JobID: "j1", JobStatus: release.JobFailure}}},
		"started by release job j9": {JobID: "j9"},
	} {
		w.ID, w.TemplateName, w.Phase, w.Template = "w", "t", workflow.WorkflowRunning, tmpl
		require.Contains(t, statusText(&flow.Status{Workflow: w}), "\n  "+want+"\n")
	}
	require.NotContains(t, statusText(&flow.Status{Workflow: ports.WorkflowRecord{ID: "w", Template: tmpl}}), "started by")
}
