package workflow_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/workflow"
	"github.com/reconcilerhq/reconciler/workflow/scenario"
)

// genWorkflow draws a random DAG template: up to 6 tasks, each depending on
// a random subset of earlier ones, some fanning out over one of two matrix
// parameters of random size, with random caps, fail-fast, retries,
// timeouts and `when` conditions.
func genWorkflow(t *rapid.T) (*workflow.Template, map[string][]any) {
	sizes := []int{rapid.IntRange(0, 6).Draw(t, "m0"), rapid.IntRange(0, 6).Draw(t, "m1")}
	tpl := &workflow.Template{APIVersion: workflow.APIVersion, Kind: workflow.KindWorkflowTemplate, Metadata: workflow.Metadata{Name: "prop"}}
	matrix := map[string][]any{}
	for i, n := range sizes {
		name := fmt.Sprintf("m%d", i)
		list := make([]any, n)
		for k := range list {
			list[k] = k
		}
		tpl.Spec.Parameters = append(tpl.Spec.Parameters, workflow.Parameter{Name: name, Type: workflow.TypeMatrix,
			Source: &workflow.MatrixSource{Kind: workflow.SourceList, Items: list}})
		items, err := workflow.ExpandMatrix(&tpl.Spec.Parameters[i], workflow.Inputs{})
		if err != nil {
			t.Fatalf("expand: %v", err)
		}
		matrix[name] = items
	}
	n := rapid.IntRange(1, 6).Draw(t, "tasks")
	for i := 0; i < n; i++ {
		task := workflow.Task{Name: fmt.Sprintf("t%d", i), Type: workflow.TaskJob, JobAgentRef: "ci"}
		if rapid.IntRange(0, 5).Draw(t, "wait") == 0 {
			task.Type, task.JobAgentRef = workflow.TaskWait, ""
			task.Wait = &workflow.Wait{Duration: reconcile.Duration(time.Duration(rapid.IntRange(1, 30).Draw(t, "waitFor")) * time.Second)}
		}
		for j := 0; j < i; j++ {
			if rapid.Bool().Draw(t, "dep") {
				task.Dependencies = append(task.Dependencies, fmt.Sprintf("t%d", j))
			}
		}
		if m := rapid.IntRange(-1, 1).Draw(t, "matrix"); m >= 0 {
			task.Matrix = fmt.Sprintf("{{workflow.parameters.m%d}}", m)
			task.MatrixStrategy = &workflow.MatrixStrategy{MaxParallel: rapid.IntRange(0, 3).Draw(t, "maxParallel"), FailFast: rapid.Bool().Draw(t, "failFast")}
			if rapid.IntRange(0, 3).Draw(t, "when") == 0 {
				task.When = "matrix.index != 1"
			}
		} else if rapid.IntRange(0, 5).Draw(t, "whenFalse") == 0 {
			task.When = "false"
		}
		if rapid.Bool().Draw(t, "retry") {
			d := reconcile.Duration(time.Duration(rapid.IntRange(1, 5).Draw(t, "backoff")) * time.Second)
			f := workflow.IntOrString(rapid.IntRange(1, 3).Draw(t, "factor"))
			task.RetryStrategy = &workflow.RetryStrategy{Limit: workflow.IntOrString(rapid.IntRange(0, 2).Draw(t, "limit")),
				Backoff: &workflow.Backoff{Duration: &d, Factor: &f}}
		}
		if rapid.Bool().Draw(t, "timeout") {
			d := reconcile.Duration(time.Duration(rapid.IntRange(5, 40).Draw(t, "timeoutSecs")) * time.Second)
			task.Timeout = &d
		}
		tpl.Spec.Tasks = append(tpl.Spec.Tasks, task)
	}
	data, err := json.Marshal(tpl)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	parsed, err := workflow.Load(data)
	if err != nil {
		t.Fatalf("generated template is invalid: %v\n%s", err, data)
	}
	return parsed, matrix
}

// model answers questions about the generated template for the checks.
type model struct {
	tpl    *workflow.Template
	matrix map[string][]any
}

func (m model) size(task *workflow.Task) int {
	if task.Matrix == "" {
		return 1
	}
	return len(m.matrix[task.Matrix[len("{{workflow.parameters."):len(task.Matrix)-2]])
}

func okPhase(p workflow.TaskPhase) bool {
	return p == workflow.TaskSucceeded || p == workflow.TaskSkipped
}

// depsDone reports whether every dependency of item idx of task finished
// well in the stored runs.
func (m model) depsDone(runs []workflow.TaskRun, task *workflow.Task, idx int) bool {
	for _, d := range task.Dependencies {
		dep := m.tpl.Task(d)
		paired := task.Matrix != "" && task.Matrix == dep.Matrix
		count := 0
		for _, tr := range runs {
			if tr.Task != d || (paired && tr.MatrixIndex != idx) {
				continue
			}
			if !okPhase(tr.Phase) {
				return false
			}
			count++
		}
		want := m.size(dep)
		if paired {
			want = 1
		}
		if count < want {
			return false
		}
	}
	return true
}

// finalFailure reports whether a dispatched item of task has failed with
// no retry to come.
func (m model) finalFailure(runs []workflow.TaskRun, task *workflow.Task, cancel bool) bool {
	limit := 0
	if task.RetryStrategy != nil {
		limit = int(task.RetryStrategy.Limit)
	}
	for _, tr := range runs {
		if tr.Task == task.Name && tr.Phase == workflow.TaskFailed && !tr.StartedAt.IsZero() && (cancel || tr.Attempt >= limit) {
			return true
		}
	}
	return false
}

// check states the invariants of one pass.
func (m model) check(in workflow.ScheduleInput, acts []workflow.Action) error {
	if again := workflow.Schedule(in); !reflect.DeepEqual(again, acts) {
		return fmt.Errorf("not deterministic:\n%v\n%v", summarize(acts), summarize(again))
	}
	running := map[string]int{}
	for _, tr := range in.TaskRuns {
		if tr.Phase == workflow.TaskRunning {
			running[tr.Task]++
		}
	}
	for i := range m.tpl.Spec.Tasks {
		task := &m.tpl.Spec.Tasks[i]
		if s := task.MatrixStrategy; s != nil && s.MaxParallel > 0 && running[task.Name] > s.MaxParallel {
			return fmt.Errorf("%s: %d running, maxParallel %d", task.Name, running[task.Name], s.MaxParallel)
		}
	}
	byID := map[string]workflow.TaskRun{}
	for _, tr := range in.TaskRuns {
		byID[tr.ID] = tr
	}
	touched := map[string]bool{}
	for k, a := range acts {
		var id string
		switch a := a.(type) {
		case workflow.DispatchTaskRun:
			id = a.ID
			task := m.tpl.Task(a.Task)
			if !m.depsDone(in.TaskRuns, task, a.MatrixIndex) {
				return fmt.Errorf("%s dispatched before its dependencies finished", name(a.Task, a.MatrixIndex))
			}
			if task.MatrixStrategy != nil && task.MatrixStrategy.FailFast && m.finalFailure(in.TaskRuns, task, in.Workflow.CancelRequested) {
				return fmt.Errorf("%s dispatched after an item failed (failFast)", name(a.Task, a.MatrixIndex))
			}
			if in.Workflow.CancelRequested {
				return fmt.Errorf("%s dispatched in a cancelled workflow", name(a.Task, a.MatrixIndex))
			}
		case workflow.CreateTaskRun:
			if a.Phase == workflow.TaskPending && !m.depsDone(applied(in.TaskRuns, acts[:k]), m.tpl.Task(a.Task), a.MatrixIndex) {
				return fmt.Errorf("%s created Pending before its dependencies finished", name(a.Task, a.MatrixIndex))
			}
			id = "new:" + name(a.Task, a.MatrixIndex)
		case workflow.RetryTaskRun:
			id = a.ID
		case workflow.FailTaskRun:
			id = a.ID
		case workflow.CancelTaskRun:
			id = a.ID
		case workflow.CompleteTaskRun:
			id = a.ID
		case workflow.CompleteWorkflow:
			if len(acts) > 1 {
				return fmt.Errorf("CompleteWorkflow with other actions: %v", summarize(acts))
			}
		}
		if id != "" {
			if touched[id] {
				return fmt.Errorf("two actions for %s in one pass: %v", id, summarize(acts))
			}
			touched[id] = true
		}
	}
	return nil
}

// applied returns the runs after the given actions of a pass: within a pass
// the scheduler sees its own earlier actions (a wait it completed, a run
// born final) as done, as the executor applies them in order.
func applied(runs []workflow.TaskRun, acts []workflow.Action) []workflow.TaskRun {
	out := append([]workflow.TaskRun(nil), runs...)
	set := func(id string, p workflow.TaskPhase) {
		for i := range out {
			if out[i].ID == id {
				out[i].Phase = p
			}
		}
	}
	for _, a := range acts {
		switch a := a.(type) {
		case workflow.CreateTaskRun:
			out = append(out, workflow.TaskRun{Task: a.Task, MatrixIndex: a.MatrixIndex, Phase: a.Phase})
		case workflow.CompleteTaskRun:
			set(a.ID, a.Phase)
		case workflow.FailTaskRun:
			set(a.ID, workflow.TaskFailed)
		case workflow.CancelTaskRun:
			set(a.ID, workflow.TaskCancelled)
		}
	}
	return out
}

func TestSchedulerProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		tpl, matrix := genWorkflow(t)
		m := model{tpl: tpl, matrix: matrix}
		sim := &scenario.Sim{
			In: workflow.ScheduleInput{
				Now:      scenario.Start,
				Workflow: workflow.WorkflowState{ID: "wf", Name: "prop", Phase: workflow.WorkflowPending},
				Template: tpl, Matrix: matrix,
			},
			Script: func(task string, index, attempt int) scenario.Result {
				choices := []scenario.Result{scenario.Succeed, scenario.Succeed, scenario.Fail}
				if tpl.Task(task).Timeout != nil {
					choices = append(choices, scenario.Hang)
				}
				return rapid.SampledFrom(choices).Draw(t, "outcome")
			},
			Duration: func(task string, index, attempt int) time.Duration {
				return time.Duration(rapid.IntRange(1, 20).Draw(t, "jobSecs")) * time.Second
			},
		}
		if rapid.IntRange(0, 3).Draw(t, "cancel") == 0 {
			sim.CancelAt = scenario.Start.Add(time.Duration(rapid.IntRange(0, 60).Draw(t, "cancelAt")) * time.Second)
		}
		lastNow, samePasses := sim.In.Now, 0
		sim.Observe = func(in workflow.ScheduleInput, acts []workflow.Action) error {
			if in.Now.Equal(lastNow) {
				samePasses++
			} else {
				lastNow, samePasses = in.Now, 1
			}
			if samePasses > 3*len(tpl.Spec.Tasks)+5 {
				return fmt.Errorf("no fixpoint at %s after %d passes", in.Now, samePasses)
			}
			return m.check(in, acts)
		}
		if err := sim.Run(5_000); err != nil {
			t.Fatalf("%v", err)
		}
		if err := m.check(sim.In, nil); err != nil {
			t.Fatalf("final state: %v", err)
		}
		m.checkOutcome(t, sim)
	})
}

// checkOutcome states how a finished workflow must look.
func (m model) checkOutcome(t *rapid.T, sim *scenario.Sim) {
	in := sim.In
	require.Empty(t, workflow.Schedule(in), "a finished workflow gets no actions")
	bad := false
	for _, tr := range in.TaskRuns {
		require.True(t, tr.Phase.Terminal(), "%s is %s at the end", name(tr.Task, tr.MatrixIndex), tr.Phase)
		bad = bad || tr.Phase == workflow.TaskFailed || tr.Phase == workflow.TaskCancelled
	}
	switch {
	case in.Workflow.CancelRequested:
		require.Equal(t, workflow.WorkflowCancelled, in.Workflow.Phase)
	case bad:
		require.Equal(t, workflow.WorkflowFailed, in.Workflow.Phase)
	default:
		require.Equal(t, workflow.WorkflowSucceeded, in.Workflow.Phase)
		want := 0
		for i := range m.tpl.Spec.Tasks {
			want += m.size(&m.tpl.Spec.Tasks[i])
		}
		require.Len(t, in.TaskRuns, want, "a successful workflow ran every item of every task")
	}
}
