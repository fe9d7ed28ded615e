package scenario_test

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
	"github.com/reconcilerhq/reconciler/workflow/scenario"
)

const tpl = `apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata: {name: t}
spec:
  tasks:
    - {name: a, type: job, jobAgentRef: ci}
    - {name: b, type: job, jobAgentRef: ci, dependencies: [a]}
`

func setup(t *testing.T, files map[string]string) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{"templates/t.yaml": {Data: []byte(tpl)}}
	for k, v := range files {
		fsys[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return fsys
}

func TestLoadAndRun(t *testing.T) {
	t.Parallel()
	fsys := setup(t, map[string]string{"s/one.yaml": `
templateFile: ../templates/t.yaml
outcomes: {a: fail-then-succeed}
expect: {phase: Failed, taskRuns: {a: Failed, b: Failed}}
`})
	sc, err := scenario.Load(fsys, "s/one.yaml")
	require.NoError(t, err)
	require.Equal(t, "one", sc.Name)
	sim, err := sc.Run()
	require.NoError(t, err)
	require.Empty(t, sc.Check(sim), "without a retry strategy the first failure is final")

	sc.Expect.Phase = workflow.WorkflowSucceeded
	sc.Expect.TaskRuns["b"] = workflow.TaskSucceeded
	require.Equal(t, []string{
		"workflow phase Failed, want Succeeded",
		`b: phase Failed, want Succeeded (dependency "a" failed)`,
	}, sc.Check(sim), "mismatches are reported one per line")
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ file, want string }{
		"no template":      {"expect: {phase: Succeeded}", "no template"},
		"both templates":   {"templateFile: ../templates/t.yaml\ntemplate: {kind: x}\nexpect: {phase: Succeeded}", "not both"},
		"bad outcome":      {"templateFile: ../templates/t.yaml\noutcomes: {a: explode}\nexpect: {phase: Succeeded}", `unknown outcome "explode"`},
		"unknown field":    {"templateFile: ../templates/t.yaml\nexpectt: {}", "unknown field"},
		"invalid template": {"template: {apiVersion: reconciler.dev/v1, kind: WorkflowTemplate, metadata: {name: x}, spec: {tasks: [{name: a, type: job}]}}\nexpect: {phase: Succeeded}", "jobAgentRef"},
		"missing file":     {"templateFile: ../nope.yaml\nexpect: {phase: Succeeded}", "templateFile"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := scenario.Load(setup(t, map[string]string{"s/x.yaml": tc.file}), "s/x.yaml")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestStuckWorkflowIsReported(t *testing.T) {
	t.Parallel()
	sc, err := scenario.Load(setup(t, map[string]string{"s/hang.yaml": "templateFile: ../templates/t.yaml\noutcomes: {a: hang}\nexpect: {phase: Succeeded}"}), "s/hang.yaml")
	require.NoError(t, err)
	_, err = sc.Run()
	require.True(t, errors.Is(err, scenario.ErrStuck), "a job that never finishes and has no timeout leaves nothing to wait for: %v", err)
}
