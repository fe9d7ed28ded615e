package scenario

import (
	"errors"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/workflow"
)

// Result is what an attempt of a job does when it runs.
type Result string

// The attempt results a script can give.
const (
	Succeed Result = "succeed"
	Fail    Result = "fail"
	Hang    Result = "hang" // never finishes: only a timeout or a cancel ends it
)

// ErrStuck reports a workflow that is not finished, has nothing to do and
// nothing to wait for.
var ErrStuck = errors.New("scenario: workflow is stuck")

// Sim is a simulated executor around the pure scheduler: it runs passes,
// applies their actions to an in-memory copy of the stored state, plays
// the scripted result of every dispatched job after JobDuration, and moves
// its clock to the next event when a pass has nothing to do.
type Sim struct {
	// In is the stored state; Sim updates Now, Workflow and TaskRuns.
	In workflow.ScheduleInput
	// Script gives the result of attempt (0-based) of a task's item
	// (index is workflow.NoMatrix without a matrix).
	Script func(task string, index, attempt int) Result
	// Outputs gives the outputs a successful job reports; may be nil.
	Outputs func(task string, index int) map[string]any
	// JobDuration is how long every dispatched attempt runs, unless
	// Duration is set and says otherwise for an attempt.
	JobDuration time.Duration
	Duration    func(task string, index, attempt int) time.Duration
	// CancelAt requests cancellation once the clock reaches it (zero: never).
	CancelAt time.Time
	// Observe, when set, sees every pass's input and actions before they
	// are applied; an error stops the run.
	Observe func(in workflow.ScheduleInput, actions []workflow.Action) error

	// Created records every CreateTaskRun by run id.
	Created map[string]workflow.CreateTaskRun
	// Passes counts scheduling passes.
	Passes int

	jobs   map[string]job
	wake   time.Time
	nextID int
}

type job struct {
	finish time.Time
	result Result
}

// Run drives the workflow until it completes, for at most maxPasses passes.
func (s *Sim) Run(maxPasses int) error {
	for s.Passes < maxPasses {
		done, err := s.Step()
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("scenario: workflow not finished after %d passes (phase %s)", maxPasses, s.In.Workflow.Phase)
}

// Step runs one pass and applies it; when the pass changes nothing it
// advances the clock to the next event instead. done reports a terminal
// workflow.
func (s *Sim) Step() (done bool, err error) {
	if s.In.Workflow.Phase.Terminal() {
		return true, nil
	}
	if s.jobs == nil {
		s.jobs = map[string]job{}
		s.Created = map[string]workflow.CreateTaskRun{}
	}
	if !s.CancelAt.IsZero() && !s.In.Now.Before(s.CancelAt) {
		s.In.Workflow.CancelRequested = true
	}
	s.Passes++
	acts := workflow.Schedule(s.In)
	if s.Observe != nil {
		if err := s.Observe(s.In, acts); err != nil {
			return false, err
		}
	}
	changed := false
	s.wake = time.Time{}
	for _, a := range acts {
		if _, ok := a.(workflow.WakeAt); !ok {
			changed = true
		}
		if err := s.apply(a); err != nil {
			return false, err
		}
	}
	if s.In.Workflow.Phase.Terminal() {
		return true, nil
	}
	if !changed {
		return false, s.advance()
	}
	return false, nil
}

// advance moves the clock to the next job completion, wake-up or cancel
// request and plays the job completions due by then.
func (s *Sim) advance() error {
	next := s.wake
	consider := func(t time.Time) {
		if t.After(s.In.Now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, j := range s.jobs {
		if j.result != Hang {
			consider(j.finish)
		}
	}
	if !s.In.Workflow.CancelRequested && !s.CancelAt.IsZero() {
		consider(s.CancelAt)
	}
	if next.IsZero() {
		return fmt.Errorf("%w at %s (phase %s, %d runs)", ErrStuck, s.In.Now.Format(time.RFC3339), s.In.Workflow.Phase, len(s.In.TaskRuns))
	}
	s.In.Now = next
	for i := range s.In.TaskRuns {
		tr := &s.In.TaskRuns[i]
		j, ok := s.jobs[tr.ID]
		if !ok || j.result == Hang || j.finish.After(next) || tr.Phase != workflow.TaskRunning {
			continue
		}
		delete(s.jobs, tr.ID)
		tr.FinishedAt = j.finish
		if j.result == Succeed {
			tr.Phase = workflow.TaskSucceeded
			if s.Outputs != nil {
				tr.Outputs = s.Outputs(tr.Task, tr.MatrixIndex)
			}
		} else {
			tr.Phase = workflow.TaskFailed
			tr.Message = "job failed"
		}
	}
	return nil
}

func (s *Sim) find(id string) (*workflow.TaskRun, error) {
	for i := range s.In.TaskRuns {
		if s.In.TaskRuns[i].ID == id {
			return &s.In.TaskRuns[i], nil
		}
	}
	return nil, fmt.Errorf("scenario: no TaskRun %q", id)
}

// move checks an edge of the TaskRun state machine and applies it.
func move(tr *workflow.TaskRun, to workflow.TaskPhase, a workflow.Action) error {
	if !workflow.TaskRunCanMove(tr.Phase, to) {
		return fmt.Errorf("scenario: %T (%s) moves %s[%d] %s -> %s, not an edge", a, a.Why(), tr.Task, tr.MatrixIndex, tr.Phase, to)
	}
	tr.Phase = to
	return nil
}

func (s *Sim) apply(a workflow.Action) error {
	switch a := a.(type) {
	case workflow.StartWorkflow:
		if !workflow.WorkflowCanMove(s.In.Workflow.Phase, workflow.WorkflowRunning) {
			return fmt.Errorf("scenario: start from %s", s.In.Workflow.Phase)
		}
		s.In.Workflow.Phase = workflow.WorkflowRunning
	case workflow.CompleteWorkflow:
		if !workflow.WorkflowCanMove(s.In.Workflow.Phase, a.Phase) {
			return fmt.Errorf("scenario: complete %s -> %s, not an edge", s.In.Workflow.Phase, a.Phase)
		}
		s.In.Workflow.Phase = a.Phase
	case workflow.CreateTaskRun:
		if !workflow.TaskRunCanMove("", a.Phase) {
			return fmt.Errorf("scenario: create %s[%d] in %s, not an edge", a.Task, a.MatrixIndex, a.Phase)
		}
		for _, tr := range s.In.TaskRuns {
			if tr.Task == a.Task && tr.MatrixIndex == a.MatrixIndex {
				return fmt.Errorf("scenario: %s[%d] created twice", a.Task, a.MatrixIndex)
			}
		}
		s.nextID++
		tr := workflow.TaskRun{ID: fmt.Sprintf("tr-%d", s.nextID), Task: a.Task, MatrixIndex: a.MatrixIndex, Phase: a.Phase, Message: a.Message}
		if a.Phase.Terminal() {
			tr.FinishedAt = a.At
		}
		s.Created[tr.ID] = a
		s.In.TaskRuns = append(s.In.TaskRuns, tr)
	case workflow.DispatchTaskRun:
		tr, err := s.find(a.ID)
		if err != nil {
			return err
		}
		if err := move(tr, workflow.TaskRunning, a); err != nil {
			return err
		}
		tr.AttemptStartedAt = a.At
		if tr.StartedAt.IsZero() {
			tr.StartedAt = a.At
		}
		if a.Type != workflow.TaskWait {
			res := Succeed
			if s.Script != nil {
				res = s.Script(tr.Task, tr.MatrixIndex, tr.Attempt)
			}
			d := s.JobDuration
			if s.Duration != nil {
				d = s.Duration(tr.Task, tr.MatrixIndex, tr.Attempt)
			}
			s.jobs[tr.ID] = job{finish: a.At.Add(d), result: res}
			tr.JobID = "job-" + tr.ID
		}
	case workflow.RetryTaskRun:
		tr, err := s.find(a.ID)
		if err != nil {
			return err
		}
		if err := move(tr, workflow.TaskPending, a); err != nil {
			return err
		}
		tr.Attempt, tr.NextAttemptAt, tr.JobID, tr.Outputs = a.Attempt, a.NotBefore, "", nil
	case workflow.FailTaskRun:
		return s.finish(a.ID, workflow.TaskFailed, a.At, a.Message, a)
	case workflow.CancelTaskRun:
		return s.finish(a.ID, workflow.TaskCancelled, a.At, a.Message, a)
	case workflow.CompleteTaskRun:
		return s.finish(a.ID, a.Phase, a.At, "", a)
	case workflow.WakeAt:
		s.wake = a.At
	default:
		return fmt.Errorf("scenario: unknown action %T", a)
	}
	return nil
}

func (s *Sim) finish(id string, to workflow.TaskPhase, at time.Time, msg string, a workflow.Action) error {
	tr, err := s.find(id)
	if err != nil {
		return err
	}
	if err := move(tr, to, a); err != nil {
		return err
	}
	delete(s.jobs, id)
	tr.FinishedAt, tr.Message = at, msg
	return nil
}
