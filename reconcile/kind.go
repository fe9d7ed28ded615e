package reconcile

import "fmt"

// RunKind discriminates the four kinds of run the kernel reconciles.
type RunKind string

// The run kinds.
const (
	KindRepo            RunKind = "repo"
	KindStandalone      RunKind = "standalone"
	KindPRReview        RunKind = "pr-review"
	KindPersistentAgent RunKind = "persistent-agent"
)

// Kinds lists every run kind in a fixed order.
var Kinds = []RunKind{KindRepo, KindStandalone, KindPRReview, KindPersistentAgent}

// Valid reports whether k is one of the four kinds.
func (k RunKind) Valid() bool {
	switch k {
	case KindRepo, KindStandalone, KindPRReview, KindPersistentAgent:
		return true
	}
	return false
}

// RunRef names one run.
type RunRef struct {
	Kind RunKind `json:"kind"`
	ID   string  `json:"id"`
}

// String renders the ref as kind/id.
func (r RunRef) String() string { return fmt.Sprintf("%s/%s", r.Kind, r.ID) }

// State is a run state; its valid values depend on the kind (see Machine).
type State string

// Repo run states.
const (
	RepoPending        State = "pending"
	RepoWaitingOnDeps  State = "waiting_on_deps"
	RepoQueued         State = "queued"
	RepoProvisioning   State = "provisioning"
	RepoRunning        State = "running"
	RepoNeedsAttention State = "needs_attention"
	RepoPROpened       State = "pr_opened"
	RepoCompleted      State = "completed"
	RepoFailed         State = "failed"
	RepoCancelled      State = "cancelled"
)

// Standalone run states.
const (
	StandaloneQueued    State = "queued"
	StandaloneRunning   State = "running"
	StandaloneCompleted State = "completed"
	StandaloneFailed    State = "failed"
	StandaloneCancelled State = "cancelled"
)

// PR review run states.
const (
	ReviewQueued    State = "queued"
	ReviewRunning   State = "reviewing"
	ReviewReady     State = "ready"
	ReviewSubmitted State = "submitted"
	ReviewStale     State = "stale"
	ReviewFailed    State = "failed"
	ReviewCancelled State = "cancelled"
)

// Persistent agent states. The machine is cyclic: a successful turn returns
// the agent to idle.
const (
	AgentIdle         State = "idle"
	AgentQueued       State = "queued"
	AgentProvisioning State = "provisioning"
	AgentRunning      State = "running"
	AgentPaused       State = "paused"
	AgentFailed       State = "failed"
	AgentArchived     State = "archived"
)

// Intent is an operator-set control intent stored on the run.
type Intent string

// Control intents. Which apply to which kind is decided by the kind's
// decision function, and only along allowed edges.
const (
	IntentNone     Intent = ""
	IntentCancel   Intent = "cancel"
	IntentRetry    Intent = "retry"
	IntentResume   Intent = "resume"
	IntentRestart  Intent = "restart"
	IntentRereview Intent = "rereview"
	IntentPause    Intent = "pause"
	IntentArchive  Intent = "archive"
)

// Valid reports whether i is a known intent (or none).
func (i Intent) Valid() bool {
	switch i {
	case IntentNone, IntentCancel, IntentRetry, IntentResume, IntentRestart, IntentRereview, IntentPause, IntentArchive:
		return true
	}
	return false
}
