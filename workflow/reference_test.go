package workflow_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/refdoc"
	"github.com/reconcilerhq/reconciler/workflow"
)

// workflowIntro is the hand-written part of docs/workflows.md; the test
// checks it names every task type, parameter type, event and reference
// root the package knows.
const workflowIntro = "# WorkflowTemplate reference\n\n" +
	"A WorkflowTemplate is a DAG of tasks with parameters, published to the catalog " +
	"(`reconciler catalog create workflow-template/NAME -f FILE`) and run by `reconciler workflow run`, " +
	"by a deployment whose `workflow_template` names it (one workflow per release), by a hook or by a schedule. " +
	"`reconciler workflow validate FILE` lists every problem with its line. Examples: `testdata/workflows/`. " +
	"The field tables below are generated from the workflow package's source by `make docs`; a test fails when a field has no entry.\n\n" +
	"## Task types\n\n" +
	"- `job`: dispatches a job to `jobAgentRef` with `config` (docs/agents.md has each agent's config). On a pull agent the job is a job like a release job's: listed by `GET /api/v1/jobs` (and `reconciler get jobs`) with its `workflow` (id, task, TaskRun) and, when the workflow runs a release, its release and target; the agent's takers take, heartbeat and report it as they do release jobs (docs/agents.md, pull agents), and the taker's report completes the TaskRun.\n" +
	"- `verification`: measures `verification.metrics` through their providers; `successCondition` and `failureCondition` are CEL over `result`.\n" +
	"- `approval`: waits for `approval.minApprovals` approvals (`reconciler workflow approve ID TASKRUN`), shown with `approval.message`.\n" +
	"- `wait`: succeeds `wait.duration` after it started.\n" +
	"- `webhook`: sends one HTTP request (`webhook.url`, `method`, `headers`, `body`).\n\n" +
	"## Parameters\n\n" +
	"Types: `string`, `number`, `boolean`, `object`, `array` and `matrix`. A `matrix` parameter has a `source` " +
	"(`resource` or `environment` matching a selector, the `releaseTarget`s of a deployment, or a `list`), and a task " +
	"with `matrix: \"{{workflow.parameters.NAME}}\"` runs once per item, bounded by `matrixStrategy`.\n\n" +
	"## References: `{{ }}` and `when`\n\n" +
	"`config`, the type blocks and `when` may use `{{ PATH }}` references (a dotted path, or CEL) over these roots:\n\n" +
	"- `workflow`: `{name, parameters}`;\n" +
	"- `release`: the release that started the workflow, if any (version, deployment, environment, resource);\n" +
	"- `variables`: the deployment's variables, resolved for the target;\n" +
	"- `matrix`: the item's fields plus `index`, `length`, `isFirst` and `isLast` (matrix tasks only);\n" +
	"- `tasks`: an ancestor task's `{outputs}` by name.\n\n" +
	"Secrets (`env:RECONCILER_SECRET_*`, `file:` under `--secret-dir`) are resolved when a TaskRun is dispatched and stored redacted.\n\n" +
	"## Hooks and schedules\n\n" +
	"`spec.hooks` start a workflow on `release.created`, `job.failed`, `verification.failed`, `release.failed`, `resource.created`, `resource.updated` or `resource.deleted` when their `filter` (CEL over `event`) holds; " +
	"an event starts at most one workflow per template. `spec.schedule` is a cron expression in `timezone`, with " +
	"`concurrencyPolicy` allow, forbid or replace and `startingDeadlineSeconds` for fires missed while no process ran.\n"

// TestWorkflowReferenceIsCurrent: docs/workflows.md describes every field
// of a WorkflowTemplate (with its comment) and every task type, parameter
// type, event and reference root; UPDATE_DOCS=1 (make docs) rewrites it.
func TestWorkflowReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"`job`", "`verification`", "`approval`", "`wait`", "`webhook`",
		"`string`", "`number`", "`boolean`", "`object`", "`array`", "`matrix`",
		"`" + workflow.RootWorkflow + "`", "`" + workflow.RootRelease + "`", "`" + workflow.RootVariables + "`",
		"`" + workflow.RootMatrix + "`", "`" + workflow.RootTasks + "`", "`" + workflow.RootEvent + "`"} {
		require.Contains(t, workflowIntro, name)
	}
	for _, e := range workflow.EventTypes {
		require.Contains(t, workflowIntro, "`"+string(e)+"`")
	}
	for _, typ := range []workflow.TaskType{workflow.TaskJob, workflow.TaskVerification, workflow.TaskApproval, workflow.TaskWait, workflow.TaskWebhook} {
		require.Contains(t, workflowIntro, "- `"+string(typ)+"`")
	}
	pkg, err := refdoc.Load(".")
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString(workflowIntro)
	all, err := pkg.Walk("Template")
	require.NoError(t, err)
	for _, s := range all {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n%s", s.Name, s.Doc, refdoc.Table(s.Fields))
	}
	require.Empty(t, refdoc.Check(all...), "every field has a comment, its entry in the reference")
	committed, err := refdoc.WriteOrCompare("../docs/workflows.md", b.String())
	require.NoError(t, err, "run make docs")
	require.Equal(t, committed, b.String(), "docs/workflows.md is stale: run make docs")
}
