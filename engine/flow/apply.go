package flow

import (
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// applied is what a pass decided and wrote.
type applied struct {
	// next is the workflow as the pass leaves it.
	next ports.WorkflowRecord
	// stop are the running jobs the pass ended (cancelled, timed out),
	// as they were before: their agents are to be told.
	stop                          []ports.TaskRunRecord
	changed                       bool
	created, dispatched, finished int
	// reported counts the inbox's reports that ended a run.
	reported int
	// renewedOnly: the pass changed nothing but jobs' leases.
	renewedOnly bool
	// touched names the TaskRuns the pass's actions wrote, as task or
	// task.item (the matrix item's index), in the order the actions came.
	touched []string
	// actions names each action applied (actionName), in order.
	actions []string
	reason  string
	wakeAt  time.Time
}

// apply turns the scheduler's actions into changes of the pass's TaskRuns
// and of the workflow (res.next), each checked against the state machines.
// Nothing is written here.
func (c *Controller) apply(w *ports.WorkflowRecord, ch *changes, acts []workflow.Action) (applied, error) {
	res := applied{next: *w}
	acted := map[string]bool{}
	edit := func(id string, to workflow.TaskPhase) (ports.TaskRunRecord, error) {
		r, ok := ch.get(id)
		if !ok {
			return r, fmt.Errorf("task run %s: %w", id, ports.ErrNotFound)
		}
		if acted[id] {
			return r, fmt.Errorf("task run %s: two actions in one pass", id)
		}
		if !workflow.TaskRunCanMove(r.Phase, to) {
			return r, fmt.Errorf("task run %s: %s → %s is not an edge", id, r.Phase, to)
		}
		acted[id] = true
		res.touched = append(res.touched, id)
		r.Phase = to
		return r, nil
	}
	next := &res.next
	for _, a := range acts {
		res.reason = a.Why()
		res.actions = append(res.actions, actionName(a))
		switch a := a.(type) {
		case workflow.StartWorkflow:
			if !workflow.WorkflowCanMove(next.Phase, workflow.WorkflowRunning) {
				return res, fmt.Errorf("start from %s", next.Phase)
			}
			next.Phase, next.StartedAt = workflow.WorkflowRunning, a.At
		case workflow.CompleteWorkflow:
			if !workflow.WorkflowCanMove(next.Phase, a.Phase) {
				return res, fmt.Errorf("complete %s → %s is not an edge", next.Phase, a.Phase)
			}
			next.Phase, next.Message, next.FinishedAt = a.Phase, a.Message, a.At
		case workflow.CreateTaskRun:
			id := runID(a.Task, a.MatrixIndex)
			if _, ok := ch.get(id); ok {
				return res, fmt.Errorf("task run %s created twice", id)
			}
			r := ports.TaskRunRecord{WorkflowID: w.ID, Type: a.Type, Config: a.Config, Dispatch: a.DispatchConfig,
				TaskRun: workflow.TaskRun{ID: id, Task: a.Task, MatrixIndex: a.MatrixIndex, Phase: a.Phase, Message: a.Message}}
			if a.Phase.Terminal() {
				r.FinishedAt = a.At
			}
			acted[id] = true
			res.touched = append(res.touched, id)
			ch.put(r)
			res.created++
		case workflow.DispatchTaskRun:
			r, err := edit(a.ID, workflow.TaskRunning)
			if err != nil {
				return res, err
			}
			r.AttemptStartedAt = a.At
			if r.StartedAt.IsZero() {
				r.StartedAt = a.At
			}
			ch.put(r)
			res.dispatched++
		case workflow.RetryTaskRun:
			r, err := edit(a.ID, workflow.TaskPending)
			if err != nil {
				return res, err
			}
			r.Attempt, r.NextAttemptAt, r.JobID, r.ExternalID, r.Outputs, r.FinishedAt, r.ApprovedBy = a.Attempt, a.NotBefore, "", "", nil, time.Time{}, nil
			r.Delivery = nil
			ch.put(r)
		case workflow.FailTaskRun:
			res.stopping(ch, a.ID, a.Message)
			if err := finish(ch, edit, a.ID, workflow.TaskFailed, a.At, a.Message); err != nil {
				return res, err
			}
			res.finished++
		case workflow.CancelTaskRun:
			res.stopping(ch, a.ID, a.Message)
			if err := finish(ch, edit, a.ID, workflow.TaskCancelled, a.At, a.Message); err != nil {
				return res, err
			}
			res.finished++
		case workflow.CompleteTaskRun:
			if err := finish(ch, edit, a.ID, a.Phase, a.At, ""); err != nil {
				return res, err
			}
			res.finished++
		case workflow.WakeAt:
			res.wakeAt = a.At
		default:
			return res, fmt.Errorf("unknown action %T", a)
		}
	}
	return res, nil
}

// stopping notes a run the pass ends whose job an agent is running.
func (res *applied) stopping(ch *changes, id, why string) {
	r, ok := ch.get(id)
	if ok && r.Type == workflow.TaskJob && r.Phase == workflow.TaskRunning && r.JobID != "" {
		r.Message = why
		res.stop = append(res.stop, r)
	}
}

// finish moves a run to a final phase.
func finish(ch *changes, edit func(string, workflow.TaskPhase) (ports.TaskRunRecord, error), id string, to workflow.TaskPhase, at time.Time, msg string) error {
	r, err := edit(id, to)
	if err != nil {
		return err
	}
	r.FinishedAt, r.Message = at, msg
	ch.put(r)
	return nil
}

// actionName is the metric name of a scheduler action: its type in
// kebab case (start-workflow, create-task-run, ...).
func actionName(a workflow.Action) string {
	switch a.(type) {
	case workflow.StartWorkflow:
		return "start-workflow"
	case workflow.CompleteWorkflow:
		return "complete-workflow"
	case workflow.CreateTaskRun:
		return "create-task-run"
	case workflow.DispatchTaskRun:
		return "dispatch-task-run"
	case workflow.RetryTaskRun:
		return "retry-task-run"
	case workflow.FailTaskRun:
		return "fail-task-run"
	case workflow.CancelTaskRun:
		return "cancel-task-run"
	case workflow.CompleteTaskRun:
		return "complete-task-run"
	case workflow.WakeAt:
		return "wake-at"
	}
	return "unknown"
}
