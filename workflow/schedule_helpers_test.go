package workflow_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

var now = time.Date(2026, 1, 12, 12, 0, 0, 0, time.UTC)

// fixture builds scheduler inputs from short YAML task lists.
type fixture struct {
	t *testing.T
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return &fixture{t: t}
}

// input loads a template from parameter and task lines and wraps it with
// the given matrix items and runs, in a Running workflow.
func (f *fixture) input(params, tasks string, matrix map[string][]any, runs ...workflow.TaskRun) workflow.ScheduleInput {
	f.t.Helper()
	tpl, err := workflow.Load([]byte(doc(params, tasks)))
	require.NoError(f.t, err)
	values, _ := workflow.ResolveParameters(tpl.Spec.Parameters, workflow.Sources{})
	return workflow.ScheduleInput{
		Now:      now,
		Workflow: workflow.WorkflowState{ID: "wf", Name: "wf", Phase: workflow.WorkflowRunning, Parameters: values},
		Template: tpl,
		Matrix:   matrix,
		TaskRuns: runs,
	}
}

// items makes n list-matrix items.
func items(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("i%d", i)
	}
	return out
}

var runKey = regexp.MustCompile(`^([^\[]+)(?:\[(\d+)\])?$`)

type runMod func(*workflow.TaskRun)

// r makes a stored TaskRun from "task" or "task[i]". Runs that have run
// started a minute ago; final ones finished a second ago.
func r(key string, phase workflow.TaskPhase, mods ...runMod) workflow.TaskRun {
	m := runKey.FindStringSubmatch(key)
	idx := workflow.NoMatrix
	if m[2] != "" {
		idx, _ = strconv.Atoi(m[2])
	}
	tr := workflow.TaskRun{ID: key, Task: m[1], MatrixIndex: idx, Phase: phase}
	switch phase {
	case workflow.TaskRunning, workflow.TaskSucceeded, workflow.TaskFailed:
		tr.StartedAt, tr.AttemptStartedAt = now.Add(-time.Minute), now.Add(-time.Minute)
	}
	if phase.Terminal() {
		tr.FinishedAt = now.Add(-time.Second)
	}
	for _, mod := range mods {
		mod(&tr)
	}
	return tr
}

func startedAgo(d time.Duration) runMod {
	return func(tr *workflow.TaskRun) { tr.AttemptStartedAt = now.Add(-d); tr.StartedAt = now.Add(-d) }
}
func firstStartedAgo(d time.Duration) runMod {
	return func(tr *workflow.TaskRun) { tr.StartedAt = now.Add(-d) }
}
func neverStarted() runMod {
	return func(tr *workflow.TaskRun) { tr.StartedAt, tr.AttemptStartedAt = time.Time{}, time.Time{} }
}
func attemptN(n int) runMod { return func(tr *workflow.TaskRun) { tr.Attempt = n } }
func notBefore(in time.Duration) runMod {
	return func(tr *workflow.TaskRun) { tr.NextAttemptAt = now.Add(in) }
}
func withOutputs(o map[string]any) runMod { return func(tr *workflow.TaskRun) { tr.Outputs = o } }

func name(task string, idx int) string {
	if idx == workflow.NoMatrix {
		return task
	}
	return fmt.Sprintf("%s[%d]", task, idx)
}

func rel(t time.Time) string {
	if d := t.Sub(now); d < 0 {
		return d.String()
	}
	return "+" + t.Sub(now).String()
}

// summarize renders actions as short lines for table tests.
func summarize(acts []workflow.Action) []string {
	out := []string{}
	for _, a := range acts {
		var s string
		switch a := a.(type) {
		case workflow.StartWorkflow:
			s = "start"
		case workflow.CreateTaskRun:
			s = fmt.Sprintf("create %s %s %s", name(a.Task, a.MatrixIndex), a.Phase, a.Reason)
		case workflow.DispatchTaskRun:
			s = "dispatch " + name(a.Task, a.MatrixIndex)
		case workflow.RetryTaskRun:
			s = fmt.Sprintf("retry %s attempt=%d at=%s", name(a.Task, a.MatrixIndex), a.Attempt, rel(a.NotBefore))
		case workflow.FailTaskRun:
			s = fmt.Sprintf("fail %s %s", name(a.Task, a.MatrixIndex), a.Reason)
		case workflow.CancelTaskRun:
			s = fmt.Sprintf("cancel %s %s", name(a.Task, a.MatrixIndex), a.Reason)
		case workflow.CompleteTaskRun:
			s = fmt.Sprintf("complete %s %s", name(a.Task, a.MatrixIndex), a.Phase)
		case workflow.CompleteWorkflow:
			s = fmt.Sprintf("workflow %s %s", a.Phase, a.Reason)
		case workflow.WakeAt:
			s = "wake " + rel(a.At)
		}
		out = append(out, s)
	}
	return out
}
