package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// applied is what a pass wrote.
type applied struct {
	// runs are the workflow's TaskRuns as stored after the pass.
	runs []ports.TaskRunRecord
	// stop are the running jobs the pass ended (cancelled, timed out),
	// as they were before: their agents are to be told.
	stop                          []ports.TaskRunRecord
	changed                       bool
	created, dispatched, finished int
	// touched names the TaskRuns the pass wrote, as task or task.item
	// (the matrix item's index), in the order the actions came.
	touched []string
	// actions names each action applied (actionName), in order.
	actions []string
	reason  string
	wakeAt  time.Time
}

// apply turns the scheduler's actions into one batch of TaskRun writes and
// one workflow write, each checked against the state machines.
func (c *Controller) apply(ctx context.Context, w *ports.WorkflowRecord, runs []ports.TaskRunRecord, acts []workflow.Action, now time.Time) (applied, error) {
	res := applied{runs: runs}
	byID := make(map[string]int, len(runs))
	for i := range runs {
		byID[runs[i].ID] = i
	}
	var batch []ports.TaskRunRecord
	touched := map[string]int{} // run id → index in batch
	edit := func(id string, to workflow.TaskPhase) (*ports.TaskRunRecord, error) {
		i, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("task run %s: %w", id, ports.ErrNotFound)
		}
		if bi, ok := touched[id]; ok {
			return &batch[bi], fmt.Errorf("task run %s: two actions in one pass", id)
		}
		if !workflow.TaskRunCanMove(runs[i].Phase, to) {
			return nil, fmt.Errorf("task run %s: %s → %s is not an edge", id, runs[i].Phase, to)
		}
		touched[id] = len(batch)
		res.touched = append(res.touched, id)
		batch = append(batch, runs[i])
		r := &batch[len(batch)-1]
		r.Phase = to
		return r, nil
	}
	next := *w
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
			if _, ok := byID[id]; ok {
				return res, fmt.Errorf("task run %s created twice", id)
			}
			r := ports.TaskRunRecord{WorkflowID: w.ID, Type: a.Type, Config: a.Config, Dispatch: a.DispatchConfig,
				TaskRun: workflow.TaskRun{ID: id, Task: a.Task, MatrixIndex: a.MatrixIndex, Phase: a.Phase, Message: a.Message}}
			if a.Phase.Terminal() {
				r.FinishedAt = a.At
			}
			touched[id] = len(batch)
			res.touched = append(res.touched, id)
			byID[id] = -1
			batch = append(batch, r)
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
			res.dispatched++
		case workflow.RetryTaskRun:
			r, err := edit(a.ID, workflow.TaskPending)
			if err != nil {
				return res, err
			}
			r.Attempt, r.NextAttemptAt, r.JobID, r.ExternalID, r.Outputs, r.FinishedAt, r.ApprovedBy = a.Attempt, a.NotBefore, "", "", nil, time.Time{}, nil
			r.Delivery = nil
		case workflow.FailTaskRun:
			res.stopping(runs, byID, a.ID, a.Message)
			if err := finish(edit, a.ID, workflow.TaskFailed, a.At, a.Message); err != nil {
				return res, err
			}
			res.finished++
		case workflow.CancelTaskRun:
			res.stopping(runs, byID, a.ID, a.Message)
			if err := finish(edit, a.ID, workflow.TaskCancelled, a.At, a.Message); err != nil {
				return res, err
			}
			res.finished++
		case workflow.CompleteTaskRun:
			if err := finish(edit, a.ID, a.Phase, a.At, ""); err != nil {
				return res, err
			}
			res.finished++
		case workflow.WakeAt:
			res.wakeAt = a.At
		default:
			return res, fmt.Errorf("unknown action %T", a)
		}
	}
	if len(batch) > 0 {
		if err := c.Store.TaskRunsSave(ctx, w.ID, batch); err != nil {
			return res, err
		}
		res.changed = true
		res.runs = merge(runs, batch)
	}
	if next.Phase != w.Phase || next.StartedAt != w.StartedAt {
		v, err := c.Store.WorkflowUpdate(ctx, next, w.Version)
		if err != nil {
			return res, err
		}
		next.Version = v
		*w = next
		res.changed = true
	}
	return res, nil
}

// stopping notes a run the pass ends whose job an agent is running.
func (res *applied) stopping(runs []ports.TaskRunRecord, byID map[string]int, id, why string) {
	i, ok := byID[id]
	if !ok || i < 0 {
		return
	}
	if r := runs[i]; r.Type == workflow.TaskJob && r.Phase == workflow.TaskRunning && r.JobID != "" {
		r.Message = why
		res.stop = append(res.stop, r)
	}
}

// finish moves a run to a final phase.
func finish(edit func(string, workflow.TaskPhase) (*ports.TaskRunRecord, error), id string, to workflow.TaskPhase, at time.Time, msg string) error {
	r, err := edit(id, to)
	if err != nil {
		return err
	}
	r.FinishedAt, r.Message = at, msg
	return nil
}

// merge returns runs with the written records (at their new versions) in
// place of the old, new ones appended.
func merge(runs, written []ports.TaskRunRecord) []ports.TaskRunRecord {
	out := make([]ports.TaskRunRecord, 0, len(runs)+len(written))
	idx := make(map[string]int, len(written))
	for i := range written {
		written[i].Version++
		idx[written[i].ID] = i
	}
	for i := range runs {
		if j, ok := idx[runs[i].ID]; ok {
			out = append(out, written[j])
			delete(idx, runs[i].ID)
			continue
		}
		out = append(out, runs[i])
	}
	for i := range written {
		if _, ok := idx[written[i].ID]; ok {
			out = append(out, written[i])
		}
	}
	return out
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
