package workflow

import "time"

// WorkflowPhase is the phase of a Workflow instance.
type WorkflowPhase string

// The workflow phases.
const (
	WorkflowPending   WorkflowPhase = "Pending"
	WorkflowRunning   WorkflowPhase = "Running"
	WorkflowSucceeded WorkflowPhase = "Succeeded"
	WorkflowFailed    WorkflowPhase = "Failed"
	WorkflowCancelled WorkflowPhase = "Cancelled"
)

// Terminal reports whether the workflow is finished.
func (p WorkflowPhase) Terminal() bool {
	return p == WorkflowSucceeded || p == WorkflowFailed || p == WorkflowCancelled
}

// TaskPhase is the phase of a TaskRun.
type TaskPhase string

// The TaskRun phases. A Failed run with retries left is not final: the
// scheduler moves it back to Pending with RetryTaskRun.
const (
	TaskPending   TaskPhase = "Pending"
	TaskRunning   TaskPhase = "Running"
	TaskSucceeded TaskPhase = "Succeeded"
	TaskFailed    TaskPhase = "Failed"
	TaskSkipped   TaskPhase = "Skipped"
	TaskCancelled TaskPhase = "Cancelled"
)

// Terminal reports whether the phase is an end state (Failed may still be
// retried; see Schedule).
func (p TaskPhase) Terminal() bool {
	return p == TaskSucceeded || p == TaskFailed || p == TaskSkipped || p == TaskCancelled
}

// TaskRunEdges is the TaskRun state machine: the phases each phase may move
// to. The empty phase is "not created yet": the phases a TaskRun can be
// born in. Executors check actions against this table before they write.
var TaskRunEdges = map[TaskPhase][]TaskPhase{
	"":          {TaskPending, TaskSkipped, TaskFailed, TaskCancelled},
	TaskPending: {TaskRunning, TaskCancelled},
	TaskRunning: {TaskSucceeded, TaskFailed, TaskCancelled},
	TaskFailed:  {TaskPending},
}

// WorkflowEdges is the Workflow state machine.
var WorkflowEdges = map[WorkflowPhase][]WorkflowPhase{
	WorkflowPending: {WorkflowRunning, WorkflowFailed, WorkflowCancelled},
	WorkflowRunning: {WorkflowSucceeded, WorkflowFailed, WorkflowCancelled},
}

// TaskRunCanMove reports whether from → to is an edge of TaskRunEdges.
func TaskRunCanMove(from, to TaskPhase) bool {
	for _, p := range TaskRunEdges[from] {
		if p == to {
			return true
		}
	}
	return false
}

// WorkflowCanMove reports whether from → to is an edge of WorkflowEdges.
func WorkflowCanMove(from, to WorkflowPhase) bool {
	for _, p := range WorkflowEdges[from] {
		if p == to {
			return true
		}
	}
	return false
}

// NoMatrix is the MatrixIndex of a TaskRun of a task without a matrix.
const NoMatrix = -1

// TaskRun is the stored execution record of one task (or one matrix item of
// a task) as the scheduler reads it back on every pass.
type TaskRun struct {
	ID   string `json:"id"`
	Task string `json:"task"`
	// MatrixIndex is the item's index, or NoMatrix.
	MatrixIndex int       `json:"matrixIndex"`
	Phase       TaskPhase `json:"phase"`
	// Attempt counts retries: 0 for the first attempt.
	Attempt int `json:"attempt"`
	// StartedAt is when the first attempt was dispatched (zero if never).
	StartedAt time.Time `json:"startedAt,omitzero"`
	// AttemptStartedAt is when the current attempt was dispatched; timeouts
	// and wait durations count from it.
	AttemptStartedAt time.Time `json:"attemptStartedAt,omitzero"`
	FinishedAt       time.Time `json:"finishedAt,omitzero"`
	// NextAttemptAt holds a retried run back until its backoff has passed.
	NextAttemptAt time.Time      `json:"nextAttemptAt,omitzero"`
	Outputs       map[string]any `json:"outputs,omitempty"`
	JobID         string         `json:"jobId,omitempty"`
	Message       string         `json:"message,omitempty"`
}

// WorkflowState is the stored Workflow instance as the scheduler sees it.
type WorkflowState struct {
	ID    string        `json:"id"`
	Name  string        `json:"name"`
	Phase WorkflowPhase `json:"phase"`
	// Parameters are the resolved value parameters (see ResolveParameters);
	// values may be SecretValue.
	Parameters map[string]any `json:"-"`
	// CancelRequested stops launching work and cancels what runs.
	CancelRequested bool `json:"cancelRequested,omitempty"`
}

// ScheduleInput is everything one scheduling pass reads: the stored state
// and the time. Nothing else influences the result.
type ScheduleInput struct {
	Now      time.Time
	Workflow WorkflowState
	// Template is the pinned template revision the workflow was created
	// from, already parsed.
	Template *Template
	// Matrix holds the expanded items of every matrix parameter (see
	// ExpandMatrix), pinned when the workflow was created.
	Matrix map[string][]any
	// Release and Variables are readable as release.* and variables.*.
	Release   map[string]any
	Variables map[string]any
	TaskRuns  []TaskRun
}
