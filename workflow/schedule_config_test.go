package workflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

// creates returns the CreateTaskRun actions by run name.
func creates(acts []workflow.Action) map[string]workflow.CreateTaskRun {
	out := map[string]workflow.CreateTaskRun{}
	for _, a := range acts {
		if c, ok := a.(workflow.CreateTaskRun); ok {
			out[name(c.Task, c.MatrixIndex)] = c
		}
	}
	return out
}

// TestMatrixItemFields: an object item's own fields are matrix.<field>, the
// whole item is matrix.item (a scalar item only so), and the built-ins win
// over item fields of the same name.
func TestMatrixItemFields(t *testing.T) {
	t.Parallel()
	f := setup(t)
	params := `- {name: cs, type: matrix, source: {kind: list, items: [{resource: {name: us}, index: 7}, plain]}}`
	tasks := `- name: deploy
  type: job
  jobAgentRef: ci
  matrix: "{{workflow.parameters.cs}}"
  config: {all: "{{matrix.item}}", index: "{{matrix.index}}", own: "{{ has(matrix.item.index) ? matrix.item.index : -1 }}"}`
	items, err := workflow.ExpandMatrix(&workflow.Parameter{Name: "cs", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{
		Kind: workflow.SourceList, Items: []any{map[string]any{"resource": map[string]any{"name": "us"}, "index": 7}, "plain"}}}, workflow.Inputs{})
	require.NoError(t, err)
	in := f.input(params, tasks, map[string][]any{"cs": items})
	got := creates(workflow.Schedule(in))
	require.Len(t, got, 2)
	obj := got["deploy[0]"]
	require.Equal(t, map[string]any{"resource": map[string]any{"name": "us"}, "index": int64(7)}, obj.MatrixItem, "the item as listed")
	require.Equal(t, map[string]any{
		"all": map[string]any{"resource": map[string]any{"name": "us"}, "index": int64(7)}, "index": int64(0), "own": int64(7),
	}, obj.Config["config"])
	require.Equal(t, map[string]any{"all": "plain", "index": int64(1), "own": int64(-1)}, got["deploy[1]"].Config["config"])
}

func TestCreateTaskRunResolvesConfig(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tasks := `- {name: build, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}"}
- {name: one, type: job, jobAgentRef: ci}
- {name: zone, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.zones}}"}
- name: ship
  type: job
  jobAgentRef: "{{variables.AGENT}}"
  matrix: "{{workflow.parameters.shards}}"
  dependencies: [build, one, zone]
  config:
    paired: "{{tasks.build.outputs.image}}"
    single: "{{tasks.one.outputs.url}}"
    all: "{{tasks.zone.outputs}}"
    shard: "{{matrix.item}} of {{matrix.length}}"
    auth: "Bearer {{variables.TOKEN}}"`
	in := f.input(pBoth, tasks, map[string][]any{"shards": items(2), "zones": items(2)},
		r("build[0]", workflow.TaskSucceeded, withOutputs(map[string]any{"image": "app:0"})),
		r("build[1]", workflow.TaskSucceeded, withOutputs(map[string]any{"image": "app:1"})),
		r("one", workflow.TaskSucceeded, withOutputs(map[string]any{"url": "https://one"})),
		r("zone[0]", workflow.TaskSucceeded, withOutputs(map[string]any{"z": int64(0)})),
		r("zone[1]", workflow.TaskSkipped),
	)
	in.Variables = map[string]any{"AGENT": "argo", "TOKEN": workflow.SecretValue{Value: "tok"}}
	got := creates(workflow.Schedule(in))
	require.Len(t, got, 2)
	c := got["ship[1]"]
	require.Equal(t, workflow.TaskPending, c.Phase)
	require.Equal(t, "shards", c.MatrixKey)
	require.Equal(t, "i1", c.MatrixItem)
	require.Equal(t, "argo", c.Config["jobAgentRef"])
	cfg := c.Config["config"].(map[string]any)
	require.Equal(t, "app:1", cfg["paired"], "same matrix: item i sees item i's outputs")
	require.Equal(t, "https://one", cfg["single"])
	require.Equal(t, []any{map[string]any{"z": int64(0)}, map[string]any{}}, cfg["all"], "other matrix: the list of every item's outputs")
	require.Equal(t, "i1 of 2", cfg["shard"])
	require.Equal(t, "Bearer "+workflow.Redacted, cfg["auth"])
	require.Equal(t, "Bearer tok", c.DispatchConfig["config"].(map[string]any)["auth"])
}

func TestCreateTaskRunBornFailedOnResolutionErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tasks := `- {name: a, type: job, jobAgentRef: ci}
- {name: b, type: job, jobAgentRef: ci, dependencies: [a], config: {url: "{{tasks.a.outputs.url}}"}}
- {name: c, type: job, jobAgentRef: ci, dependencies: [a], when: "tasks.a.outputs.ok"}
- {name: d, type: job, jobAgentRef: ci, dependencies: [b]}`
	got := creates(workflow.Schedule(f.input("", tasks, nil, r("a", workflow.TaskSucceeded))))
	require.Equal(t, workflow.TaskFailed, got["b"].Phase)
	require.Equal(t, workflow.ReasonConfigError, got["b"].Reason)
	require.Equal(t, `spec.tasks[1].config.url: {{tasks.a.outputs.url}}: no field "url" in tasks.a.outputs`, got["b"].Message)
	require.Nil(t, got["b"].Config)
	require.Equal(t, workflow.TaskFailed, got["c"].Phase)
	require.Equal(t, workflow.ReasonWhenError, got["c"].Reason)
	require.Contains(t, got["c"].Message, "spec.tasks[2].when")
	require.Equal(t, workflow.ReasonDependencyFailed, got["d"].Reason, "a run born failed fails its dependents")
}

func TestScheduleInvalidInput(t *testing.T) {
	t.Parallel()
	bad, err := workflow.Parse([]byte(doc("", "- {name: a, type: job}")))
	require.NoError(t, err)
	acts := workflow.Schedule(workflow.ScheduleInput{Now: now, Template: bad, Workflow: workflow.WorkflowState{Phase: workflow.WorkflowRunning}})
	require.Equal(t, []string{"workflow Failed invalid-input"}, summarize(acts))
	require.Contains(t, acts[0].(workflow.CompleteWorkflow).Message, "needs a jobAgentRef")

	acts = workflow.Schedule(workflow.ScheduleInput{Now: now, Workflow: workflow.WorkflowState{Phase: workflow.WorkflowRunning}})
	require.Equal(t, []string{"workflow Failed invalid-input"}, summarize(acts))

	for _, p := range []workflow.WorkflowPhase{workflow.WorkflowSucceeded, workflow.WorkflowFailed, workflow.WorkflowCancelled} {
		require.Empty(t, workflow.Schedule(workflow.ScheduleInput{Now: now, Template: bad, Workflow: workflow.WorkflowState{Phase: p}}),
			"a finished workflow gets no actions")
	}
}

func TestScheduleFailureMessageNamesTheTask(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.input(pShards, tPaired, map[string][]any{"shards": items(2)},
		r("deploy[0]", workflow.TaskSucceeded), r("deploy[1]", workflow.TaskFailed),
		r("verify[0]", workflow.TaskSucceeded), r("verify[1]", workflow.TaskFailed, neverStarted()), r("report", workflow.TaskFailed, neverStarted()))
	acts := workflow.Schedule(in)
	require.Len(t, acts, 1)
	require.Equal(t, `task "deploy[1]" failed`, acts[0].(workflow.CompleteWorkflow).Message)
}
