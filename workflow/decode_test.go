package workflow_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

// problemsOf loads src and returns its problems (nil when it is valid).
func problemsOf(t *testing.T, src string) []workflow.Problem {
	t.Helper()
	_, err := workflow.Load([]byte(src))
	if err == nil {
		return nil
	}
	var ie *workflow.InvalidError
	require.ErrorAs(t, err, &ie)
	require.ErrorIs(t, err, workflow.ErrInvalid)
	return ie.Problems
}

// findProblem returns the problem at path, failing the test when there is
// none.
func findProblem(t *testing.T, ps []workflow.Problem, path string) workflow.Problem {
	t.Helper()
	for _, p := range ps {
		if p.Path == path {
			return p
		}
	}
	require.Failf(t, "no problem at path", "%s in %v", path, ps)
	return workflow.Problem{}
}

func TestSeedTemplateLoadsAsWritten(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../testdata/workflows/multi-cluster-deployment.yaml")
	require.NoError(t, err)
	tpl, err := workflow.Load(data)
	require.NoError(t, err)
	require.Equal(t, "multi-cluster-deployment", tpl.Metadata.Name)
	require.Equal(t, workflow.ScopeSystem, tpl.Metadata.Scope)
	sel := tpl.Param("clusters").Source.Selector
	require.NotNil(t, sel.Condition, "the structured selector form is kept")
	code, ps := sel.CEL("resource")
	require.Empty(t, ps)
	require.Contains(t, code, `== "Kubernetes"`)
	require.Equal(t, 2, tpl.Task("deploy").MatrixStrategy.MaxParallel)
	require.Equal(t, "result.value < 0.01", tpl.Task("verify").Verification.Metrics[0].SuccessCondition)
}

func TestUnknownFieldNamesPathLineAndSuggestion(t *testing.T) {
	t.Parallel()
	src := `apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata: {name: x}
spec:
  parameters:
    - {name: m, type: matrix, source: {kind: list, items: [a]}}
  tasks:
    - {name: a, type: job, jobAgentRef: ci}
    - {name: b, type: job, jobAgentRef: ci}
    - name: c
      type: job
      jobAgentRef: ci
      matrix: "{{workflow.parameters.m}}"
      matrixStrategy:
        maxParalel: 2
`
	ps := problemsOf(t, src)
	require.Len(t, ps, 1)
	p := ps[0]
	require.Equal(t, "spec.tasks[2].matrixStrategy.maxParalel", p.Path)
	require.Contains(t, p.Message, `unknown field "maxParalel"`)
	require.Contains(t, p.Message, `did you mean "maxParallel"`)
	require.Equal(t, 15, p.Line)
	require.Contains(t, p.String(), "(line 15, column 9)")
}

func TestDecodeProblemsAreAllReported(t *testing.T) {
	t.Parallel()
	src := `apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata: {name: x, colour: red}
spec:
  tasks:
    - name: a
      type: job
      jobAgentRef: ci
      dependencies: notalist
      timeout: soon
      retryStrategy: {limit: -1}
      extra: 1
`
	ps := problemsOf(t, src)
	require.Contains(t, findProblem(t, ps, "metadata.colour").Message, "unknown field")
	require.Contains(t, findProblem(t, ps, "spec.tasks[0].dependencies").Message, "want an array, got a string")
	require.Contains(t, findProblem(t, ps, "spec.tasks[0].timeout").Message, `"soon"`)
	require.Contains(t, findProblem(t, ps, "spec.tasks[0].retryStrategy.limit").Message, "non-negative integer")
	require.Contains(t, findProblem(t, ps, "spec.tasks[0].extra").Message, "unknown field")
	require.Len(t, ps, 5, "a field that failed to decode is not reported again by the semantic checks")
}

func TestSyntaxErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		line      int
		want      string
	}{
		{"yaml", "apiVersion: x\nspec:\n\ttasks: []\n", 3, "cannot start any token"},
		{"yaml duplicate key", "kind: a\nkind: b\n", 2, `"kind" already set`},
		{"unquoted braces", "apiVersion: x\nspec:\n  tasks:\n    - when: {{workflow.parameters.x}}\n", 4, "must be quoted"},
		{"json", "{\n  \"apiVersion\": \"x\",\n  \"kind\": \n}", 4, "syntax error"},
		{"empty", "  \n", 0, "empty document"},
		{"not an object", "- a\n- b\n", 1, "must be an object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.Parse([]byte(tc.src))
			var ie *workflow.InvalidError
			require.ErrorAs(t, err, &ie)
			require.Len(t, ie.Problems, 1)
			require.Contains(t, ie.Problems[0].Message, tc.want)
			require.Equal(t, tc.line, ie.Problems[0].Line)
		})
	}
}

func TestJSONTemplateWithTabs(t *testing.T) {
	t.Parallel()
	src := "{\n\t\"apiVersion\": \"reconciler.dev/v1\",\n\t\"kind\": \"WorkflowTemplate\",\n\t\"metadata\": {\"name\": \"j\"},\n" +
		"\t\"spec\": {\"tasks\": [{\"name\": \"a\", \"type\": \"wait\", \"wait\": {\"duration\": 30}, \"bogus\": true}]}\n}"
	ps := problemsOf(t, src)
	require.Len(t, ps, 1)
	require.Equal(t, "spec.tasks[0].bogus", ps[0].Path)
	require.Equal(t, 5, ps[0].Line, "JSON positions are tracked too")
	tpl, err := workflow.Load([]byte(strings.Replace(src, `, "bogus": true`, "", 1)))
	require.NoError(t, err)
	require.Equal(t, "30s", tpl.Spec.Tasks[0].Wait.Duration.D().String())
}

func TestInvalidErrorListsEveryProblem(t *testing.T) {
	t.Parallel()
	err := &workflow.InvalidError{Problems: []workflow.Problem{{Path: "a", Message: "x"}, {Path: "b", Message: "y", Line: 3, Column: 1}}}
	require.True(t, errors.Is(err, workflow.ErrInvalid))
	require.Equal(t, "invalid workflow template: 2 problems:\n  a: x\n  b: y (line 3, column 1)", err.Error())
}

func TestYAML11BooleanKeysAreFlagged(t *testing.T) {
	t.Parallel()
	ps := problemsOf(t, doc("", "- {name: a, type: job, jobAgentRef: ci, config: {y: 1, \"n\": 2}}"))
	require.Len(t, ps, 1, "the quoted key is fine")
	require.Equal(t, "spec.tasks[0].config.y", ps[0].Path)
	require.Contains(t, ps[0].Message, "read as a boolean by YAML 1.1")
}

// TestParseRefusesSecondDocument: a YAML stream with two documents is a
// syntax problem at the second one's line, not a silently ignored tail.
func TestParseRefusesSecondDocument(t *testing.T) {
	_, err := workflow.Parse([]byte("apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\n---\nmetadata: {name: x}\n"))
	var inv *workflow.InvalidError
	require.ErrorAs(t, err, &inv)
	require.Len(t, inv.Problems, 1)
	require.Equal(t, 4, inv.Problems[0].Line)
	require.Contains(t, inv.Problems[0].Message, "want exactly one YAML document, got 2")
}

// A bad duration is reported with its path, and the rest of the template
// still decodes: the semantic problems after it are reported too.
func TestBadDurationDoesNotHideLaterProblems(t *testing.T) {
	t.Parallel()
	src := `apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata: {name: x}
spec:
  tasks:
    - {name: a, type: wait, wait: {duration: -5m}}
    - {name: b, type: job, jobAgentRef: ci, timeout: soon, retryStrategy: {limit: 1, backoff: {duration: true}}}
    - {name: c, type: wait, wait: {duration: 1}, dependencies: [nope]}
`
	ps := problemsOf(t, src)
	require.Contains(t, findProblem(t, ps, "spec.tasks[0].wait.duration").Message, `"-5m" is negative`)
	require.Contains(t, findProblem(t, ps, "spec.tasks[1].timeout").Message, `got "soon"`)
	require.Contains(t, findProblem(t, ps, "spec.tasks[1].retryStrategy.backoff.duration").Message, "got a boolean")
	require.Contains(t, findProblem(t, ps, "spec.tasks[2].dependencies[0]").Message, "nope")
	require.Len(t, ps, 4, "a field that failed to decode is not reported again by the semantic checks")
}
