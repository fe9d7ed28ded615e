package workflow

import "time"

// Action is one change a scheduling pass asks the executor to make. The set
// is closed (only this package implements it); match it with a type switch.
// Every action carries a Reason: a stable kebab-case code. A pass emits at
// most one action per TaskRun, in a deterministic order, and WakeAt last.
type Action interface {
	// Why returns the action's Reason.
	Why() string
	action()
}

// The reasons actions carry.
const (
	ReasonWorkflowStarted     = "workflow-started"
	ReasonReady               = "dependencies-done"
	ReasonWhenFalse           = "when-false"
	ReasonWhenError           = "when-error"
	ReasonConfigError         = "config-error"
	ReasonDependencyFailed    = "dependency-failed"
	ReasonDependencyCancelled = "dependency-cancelled"
	ReasonFailFast            = "fail-fast"
	ReasonDispatch            = "dispatch"
	ReasonRetry               = "retry"
	ReasonTimeout             = "timeout"
	ReasonWaitElapsed         = "wait-elapsed"
	ReasonCancelRequested     = "cancel-requested"
	ReasonAllSucceeded        = "all-succeeded"
	ReasonTaskFailed          = "task-failed"
	ReasonInvalidInput        = "invalid-input"
	ReasonNextEvent           = "next-event"
)

// StartWorkflow moves a Pending workflow to Running at At.
type StartWorkflow struct {
	At     time.Time
	Reason string
}

// CreateTaskRun creates the TaskRun of one task (or one matrix item) in
// Phase: Pending when it is to run, or born final — Skipped (when false),
// Failed (a dependency failed, or config or when could not be resolved;
// Message says why) or Cancelled (fail-fast, a cancelled dependency).
// Config is the resolved config to store, with secrets Redacted;
// DispatchConfig is the same config with secrets, for the executor only —
// never store or log it. Both are nil when the run is born final without
// being resolved.
type CreateTaskRun struct {
	Task           string
	Type           TaskType
	MatrixKey      string // the matrix parameter, "" without a matrix
	MatrixIndex    int    // NoMatrix without a matrix
	MatrixItem     any
	Phase          TaskPhase
	Config         map[string]any
	DispatchConfig map[string]any
	Message        string
	At             time.Time
	Reason         string
}

// DispatchTaskRun moves a Pending TaskRun to Running at At (setting
// AttemptStartedAt, and StartedAt on the first attempt) and hands it to the
// executor of its Type. For wait tasks there is nothing to hand over: the
// scheduler completes them itself.
type DispatchTaskRun struct {
	ID          string
	Task        string
	Type        TaskType
	MatrixIndex int
	Attempt     int
	At          time.Time
	Reason      string
}

// RetryTaskRun moves a Failed TaskRun back to Pending as attempt Attempt,
// not to be dispatched before NotBefore (stored as NextAttemptAt); the job
// id and outputs of the failed attempt are cleared.
type RetryTaskRun struct {
	ID          string
	Task        string
	MatrixIndex int
	Attempt     int
	NotBefore   time.Time
	Reason      string
}

// FailTaskRun moves a Running TaskRun to Failed at At (a timeout); the
// executor stops its job.
type FailTaskRun struct {
	ID          string
	Task        string
	MatrixIndex int
	Message     string
	At          time.Time
	Reason      string
}

// CancelTaskRun moves a Pending or Running TaskRun to Cancelled at At; the
// executor stops its job if it has one.
type CancelTaskRun struct {
	ID          string
	Task        string
	MatrixIndex int
	Message     string
	At          time.Time
	Reason      string
}

// CompleteTaskRun moves a Running TaskRun the scheduler runs itself (wait
// tasks) to Phase at At.
type CompleteTaskRun struct {
	ID          string
	Task        string
	MatrixIndex int
	Phase       TaskPhase
	At          time.Time
	Reason      string
}

// CompleteWorkflow moves the workflow to its final Phase at At. It is only
// emitted by a pass that has nothing else to do.
type CompleteWorkflow struct {
	Phase   WorkflowPhase
	Message string
	At      time.Time
	Reason  string
}

// WakeAt asks for another pass at At, the earliest time something changes
// without outside news: a wait elapsing, a retry backoff ending, a timeout.
type WakeAt struct {
	At     time.Time
	Reason string
}

// Why returns the reason.
func (a StartWorkflow) Why() string { return a.Reason }

// Why returns the reason.
func (a CreateTaskRun) Why() string { return a.Reason }

// Why returns the reason.
func (a DispatchTaskRun) Why() string { return a.Reason }

// Why returns the reason.
func (a RetryTaskRun) Why() string { return a.Reason }

// Why returns the reason.
func (a FailTaskRun) Why() string { return a.Reason }

// Why returns the reason.
func (a CancelTaskRun) Why() string { return a.Reason }

// Why returns the reason.
func (a CompleteTaskRun) Why() string { return a.Reason }

// Why returns the reason.
func (a CompleteWorkflow) Why() string { return a.Reason }

// Why returns the reason.
func (a WakeAt) Why() string { return a.Reason }

func (StartWorkflow) action()    {}
func (CreateTaskRun) action()    {}
func (DispatchTaskRun) action()  {}
func (RetryTaskRun) action()     {}
func (FailTaskRun) action()      {}
func (CancelTaskRun) action()    {}
func (CompleteTaskRun) action()  {}
func (CompleteWorkflow) action() {}
func (WakeAt) action()           {}
