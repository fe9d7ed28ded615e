package workflow

import (
	"fmt"
	"time"
)

// item states inside a pass: a TaskRun's stored phase as the scheduler
// reads it, updated by the actions the pass emits.
const (
	stNone      uint8 = iota // no TaskRun yet
	stPending                // waiting to be dispatched
	stRunning                // dispatched
	stRetrying               // Failed with a retry to come: not final
	stSucceeded              // final
	stSkipped                // final, counts as done for dependents
	stFailed                 // final
	stCancelled              // final
)

func final(st uint8) bool { return st >= stSucceeded }

// item is one (task, matrix index) slot of a pass.
type item struct {
	run   int32 // index into TaskRuns + 1; 0 when none
	st    uint8
	ran   bool // dispatched at least once
	acted bool // this pass already emitted an action for the run
}

// taskState is a task's slice of the pass.
type taskState struct {
	base, size int
	// aggregate over the task's items, valid once the task is processed
	done, failed, cancelled bool
	failFast                bool // fail-fast has tripped
	failedItem              int  // an item that failed (for messages)
}

// pass is one scheduling pass over a snapshot.
type pass struct {
	in     *ScheduleInput
	p      *plan
	now    time.Time
	cancel bool
	tasks  []taskState
	items  []item
	out    []Action
	wake   time.Time
	scope  *Vars // lazily built base scope
}

// Schedule computes, from stored state alone, what to do next for one
// workflow. It is a pure function of its input: no clock but in.Now, no
// memory between passes, so running it again on the same input yields the
// same actions, and once the actions are applied it yields nothing that
// repeats them. See the package doc for the rules.
func Schedule(in ScheduleInput) []Action {
	if in.Workflow.Phase.Terminal() {
		return nil
	}
	if in.Template == nil {
		return []Action{CompleteWorkflow{Phase: WorkflowFailed, Message: "no template", At: in.Now, Reason: ReasonInvalidInput}}
	}
	p, err := in.Template.planOf()
	if err != nil {
		return []Action{CompleteWorkflow{Phase: WorkflowFailed, Message: err.Error(), At: in.Now, Reason: ReasonInvalidInput}}
	}
	s := &pass{in: &in, p: p, now: in.Now, cancel: in.Workflow.CancelRequested}
	if msg := s.index(); msg != "" {
		return []Action{CompleteWorkflow{Phase: WorkflowFailed, Message: msg, At: in.Now, Reason: ReasonInvalidInput}}
	}
	if in.Workflow.Phase == WorkflowPending && !s.cancel {
		s.out = append(s.out, StartWorkflow{At: s.now, Reason: ReasonWorkflowStarted})
	}
	for _, ti := range p.order {
		s.settle(ti)
		s.births(ti)
		s.dispatch(ti)
		s.aggregate(ti)
	}
	if len(s.out) == 0 {
		s.complete()
	}
	if !s.wake.IsZero() {
		s.out = append(s.out, WakeAt{At: s.wake, Reason: ReasonNextEvent})
	}
	return s.out
}

// index lays out one slot per (task, item) and files every TaskRun into its
// slot. TaskRuns of unknown tasks, out-of-range indices and duplicates are
// ignored. It returns a message when the input cannot be scheduled.
func (s *pass) index() string {
	s.tasks = make([]taskState, len(s.p.tasks))
	total := 0
	for i := range s.p.tasks {
		pt := &s.p.tasks[i]
		size := 1
		if pt.matrixParam != "" {
			vals, ok := s.in.Matrix[pt.matrixParam]
			if !ok {
				return fmt.Sprintf("matrix parameter %q of task %q has no expanded items", pt.matrixParam, pt.name)
			}
			size = len(vals)
		}
		s.tasks[i] = taskState{base: total, size: size, failedItem: -1}
		total += size
	}
	s.items = make([]item, total)
	last := -1
	for k := range s.in.TaskRuns {
		tr := &s.in.TaskRuns[k]
		ti := last
		if ti < 0 || s.p.tasks[ti].name != tr.Task {
			ti = s.taskIndex(tr.Task)
			if ti < 0 {
				continue
			}
			last = ti
		}
		ts := &s.tasks[ti]
		idx := tr.MatrixIndex
		if s.p.tasks[ti].matrixParam == "" {
			if idx != NoMatrix {
				continue
			}
			idx = 0
		} else if idx < 0 || idx >= ts.size {
			continue
		}
		it := &s.items[ts.base+idx]
		if it.run != 0 {
			continue
		}
		it.run = int32(k + 1)
		it.ran = !tr.StartedAt.IsZero()
		it.st = s.classify(ti, tr)
	}
	return ""
}

func (s *pass) taskIndex(name string) int {
	for i := range s.p.tasks {
		if s.p.tasks[i].name == name {
			return i
		}
	}
	return -1
}

// classify maps a stored TaskRun to its pass state.
func (s *pass) classify(ti int, tr *TaskRun) uint8 {
	switch tr.Phase {
	case TaskPending:
		return stPending
	case TaskRunning:
		return stRunning
	case TaskSucceeded:
		return stSucceeded
	case TaskSkipped:
		return stSkipped
	case TaskCancelled:
		return stCancelled
	case TaskFailed:
		if _, ok := s.retryAt(ti, tr, tr.FinishedAt); ok {
			return stRetrying
		}
		return stFailed
	}
	return stFailed // an unknown phase cannot be reasoned about: treat as failed
}

// retryAt says whether a failed attempt that finished at finished gets
// another, and when. Runs that never started (failed at birth) and
// workflows being cancelled are not retried; Argo's maxDuration bounds the
// time from the first start to the next attempt.
func (s *pass) retryAt(ti int, tr *TaskRun, finished time.Time) (time.Time, bool) {
	pt := &s.p.tasks[ti]
	if s.cancel || tr.StartedAt.IsZero() || tr.Attempt >= pt.retryLimit {
		return time.Time{}, false
	}
	at := finished.Add(pt.backoffFor(tr.Attempt))
	if pt.maxDuration > 0 && at.After(tr.StartedAt.Add(pt.maxDuration)) {
		return time.Time{}, false
	}
	return at, true
}

func (s *pass) run(it *item) *TaskRun { return &s.in.TaskRuns[it.run-1] }

func (s *pass) matrixIndex(ti, idx int) int {
	if s.p.tasks[ti].matrixParam == "" {
		return NoMatrix
	}
	return idx
}

func (s *pass) wakeAt(t time.Time) {
	if t.After(s.now) && (s.wake.IsZero() || t.Before(s.wake)) {
		s.wake = t
	}
}

// settle handles the task's existing runs: cancellation, wait completion,
// timeouts, retries and fail-fast.
func (s *pass) settle(ti int) {
	pt := &s.p.tasks[ti]
	ts := &s.tasks[ti]
	items := s.items[ts.base : ts.base+ts.size]
	s.tripFailFast(ti)
	for idx := range items {
		it := &items[idx]
		if it.run == 0 {
			continue
		}
		if it.st != stPending && it.st != stRunning && it.st != stRetrying {
			continue
		}
		tr := s.run(it)
		mi := s.matrixIndex(ti, idx)
		switch it.st {
		case stPending:
			if s.cancel {
				s.out = append(s.out, CancelTaskRun{ID: tr.ID, Task: pt.name, MatrixIndex: mi, Message: "workflow cancelled", At: s.now, Reason: ReasonCancelRequested})
				it.st, it.acted = stCancelled, true
			}
		case stRunning:
			switch {
			case s.cancel:
				s.out = append(s.out, CancelTaskRun{ID: tr.ID, Task: pt.name, MatrixIndex: mi, Message: "workflow cancelled", At: s.now, Reason: ReasonCancelRequested})
				it.st, it.acted = stCancelled, true
			case pt.typ == TaskWait && !s.now.Before(tr.AttemptStartedAt.Add(pt.wait)):
				s.out = append(s.out, CompleteTaskRun{ID: tr.ID, Task: pt.name, MatrixIndex: mi, Phase: TaskSucceeded, At: s.now, Reason: ReasonWaitElapsed})
				it.st, it.acted = stSucceeded, true
			case pt.timeout > 0 && !s.now.Before(tr.AttemptStartedAt.Add(pt.timeout)):
				s.out = append(s.out, FailTaskRun{ID: tr.ID, Task: pt.name, MatrixIndex: mi,
					Message: fmt.Sprintf("timed out after %s", pt.timeout), At: s.now, Reason: ReasonTimeout})
				it.acted = true
				it.st = stFailed
				if at, ok := s.retryAt(ti, tr, s.now); ok {
					it.st = stRetrying
					s.wakeAt(at)
				}
			default:
				if pt.typ == TaskWait {
					s.wakeAt(tr.AttemptStartedAt.Add(pt.wait))
				}
				if pt.timeout > 0 {
					s.wakeAt(tr.AttemptStartedAt.Add(pt.timeout))
				}
			}
		case stRetrying:
			if it.acted {
				continue
			}
			if ts.failFast { // no more attempts once fail-fast has tripped
				it.st = stFailed
				continue
			}
			at, _ := s.retryAt(ti, tr, tr.FinishedAt)
			s.out = append(s.out, RetryTaskRun{ID: tr.ID, Task: pt.name, MatrixIndex: mi, Attempt: tr.Attempt + 1, NotBefore: at, Reason: ReasonRetry})
			it.st, it.acted = stPending, true
			s.wakeAt(at)
		}
	}
	s.tripFailFast(ti) // a timeout in this pass may trip it
	if !ts.failFast || s.cancel {
		return
	}
	for idx := range items {
		it := &items[idx]
		if it.st == stPending && !it.acted {
			s.out = append(s.out, CancelTaskRun{ID: s.run(it).ID, Task: pt.name, MatrixIndex: s.matrixIndex(ti, idx),
				Message: "not started: another item failed (failFast)", At: s.now, Reason: ReasonFailFast})
			it.st, it.acted = stCancelled, true
		}
	}
}

// tripFailFast marks a fail-fast task whose dispatched item failed for good.
func (s *pass) tripFailFast(ti int) {
	ts := &s.tasks[ti]
	if !s.p.tasks[ti].failFast || ts.failFast {
		return
	}
	for _, it := range s.items[ts.base : ts.base+ts.size] {
		if it.st == stFailed && it.ran {
			ts.failFast = true
			return
		}
	}
}

// dispatch starts Pending runs in index order, up to maxParallel running.
func (s *pass) dispatch(ti int) {
	ts := &s.tasks[ti]
	pt := &s.p.tasks[ti]
	if s.cancel || ts.failFast {
		return
	}
	items := s.items[ts.base : ts.base+ts.size]
	capacity := len(items)
	if pt.maxParallel > 0 {
		running := 0
		for i := range items {
			if items[i].st == stRunning {
				running++
			}
		}
		capacity = pt.maxParallel - running
	}
	for idx := 0; idx < len(items) && capacity > 0; idx++ {
		it := &items[idx]
		if it.st != stPending || it.run == 0 || it.acted {
			continue
		}
		tr := s.run(it)
		if tr.NextAttemptAt.After(s.now) {
			s.wakeAt(tr.NextAttemptAt)
			continue
		}
		s.out = append(s.out, DispatchTaskRun{ID: tr.ID, Task: pt.name, Type: pt.typ, MatrixIndex: s.matrixIndex(ti, idx),
			Attempt: tr.Attempt, At: s.now, Reason: ReasonDispatch})
		it.st, it.acted, it.ran = stRunning, true, true
		capacity--
	}
}

// aggregate summarises a processed task for its dependents.
func (s *pass) aggregate(ti int) {
	ts := &s.tasks[ti]
	ts.done = true
	for idx, it := range s.items[ts.base : ts.base+ts.size] {
		if !final(it.st) {
			ts.done = false
		}
		if it.st == stFailed && !ts.failed {
			ts.failed, ts.failedItem = true, idx
		}
		ts.cancelled = ts.cancelled || it.st == stCancelled
	}
}

// complete finishes the workflow when nothing is left to do.
func (s *pass) complete() {
	failed, cancelled := false, false
	for _, it := range s.items {
		switch {
		case s.cancel && (it.st == stPending || it.st == stRunning || it.st == stRetrying):
			return
		case !s.cancel && !final(it.st):
			return
		}
		failed = failed || it.st == stFailed
		cancelled = cancelled || it.st == stCancelled
	}
	switch {
	case s.cancel:
		s.out = append(s.out, CompleteWorkflow{Phase: WorkflowCancelled, Message: "cancelled on request", At: s.now, Reason: ReasonCancelRequested})
	case failed || cancelled:
		s.out = append(s.out, CompleteWorkflow{Phase: WorkflowFailed, Message: s.failureMessage(), At: s.now, Reason: ReasonTaskFailed})
	default:
		s.out = append(s.out, CompleteWorkflow{Phase: WorkflowSucceeded, At: s.now, Reason: ReasonAllSucceeded})
	}
}

// failureMessage names the first failed task in topological order.
func (s *pass) failureMessage() string {
	for _, ti := range s.p.order {
		ts := &s.tasks[ti]
		if ts.failed {
			return fmt.Sprintf("task %s failed", s.itemName(ti, ts.failedItem))
		}
	}
	for _, ti := range s.p.order {
		if s.tasks[ti].cancelled {
			return fmt.Sprintf("task %q was cancelled", s.p.tasks[ti].name)
		}
	}
	return "failed"
}

// itemName renders "deploy[3]" or "deploy".
func (s *pass) itemName(ti, idx int) string {
	if s.p.tasks[ti].matrixParam == "" {
		return fmt.Sprintf("%q", s.p.tasks[ti].name)
	}
	return fmt.Sprintf("%q", fmt.Sprintf("%s[%d]", s.p.tasks[ti].name, idx))
}
