package reconcile

import (
	"time"
)

// ActionType names an action in JSON and logs.
type ActionType string

// The action types. Each is one outcome with one meaning.
const (
	TypeTransition         ActionType = "transition"
	TypePatchStatus        ActionType = "patchStatus"
	TypeLaunchReview       ActionType = "launchReview"
	TypeAutoMergePR        ActionType = "autoMergePr"
	TypeResumeAgent        ActionType = "resumeAgent"
	TypeRequeueForAgent    ActionType = "requeueForAgent"
	TypeRequeueSoon        ActionType = "requeueSoon"
	TypeDeferWithBackoff   ActionType = "deferWithBackoff"
	TypeClearControlIntent ActionType = "clearControlIntent"
	TypeEnqueueAgent       ActionType = "enqueueAgent"
	TypeLaunchReviewRun    ActionType = "launchReviewRun"
	TypeSubmitReview       ActionType = "submitReview"
	TypeMarkStale          ActionType = "markStale"
	TypeEnqueueTurn        ActionType = "enqueueTurn"
	TypeReleasePod         ActionType = "releasePod"
	TypeNoop               ActionType = "noop"
)

// Action is the one thing a decision asks the executor to do. The set is
// closed: only this package's types implement it. Match with a type switch.
type Action interface {
	// Type names the action.
	Type() ActionType
	// Why returns the action's Reason: a stable kebab-case code.
	Why() string
	sealed()
}

// Moving is implemented by actions that change the run's state; the
// executor checks Edge against the kind's Machine before it writes.
type Moving interface {
	Action
	// Move returns the state change the action makes.
	Move() Edge
}

// Patch lists the run fields an action writes besides the state. Nil
// pointers leave a field alone. The executor writes the patch and any state
// change in one conditional update.
type Patch struct {
	ClearIntent         bool       `json:"clear_intent,omitempty"`
	RetryCount          *int       `json:"retry_count,omitempty"`
	ResetSession        bool       `json:"reset_session,omitempty"`
	ResumeTrigger       *string    `json:"resume_trigger,omitempty"`
	AutoResumes         *int       `json:"auto_resumes,omitempty"`
	PR                  *PRFields  `json:"pr,omitempty"`
	ReviewRunning       *bool      `json:"review_running,omitempty"`
	Error               *string    `json:"error,omitempty"`
	ReconcileAttempts   *int       `json:"reconcile_attempts,omitempty"`
	FinishedAt          *time.Time `json:"finished_at,omitempty"`
	Reruns              *int       `json:"reruns,omitempty"`
	ReviewedSHA         *string    `json:"reviewed_sha,omitempty"`
	ReviewDone          *bool      `json:"review_done,omitempty"`
	ConsecutiveFailures *int       `json:"consecutive_failures,omitempty"`
	TurnStartedAt       *time.Time `json:"turn_started_at,omitempty"`
	TurnDone            *bool      `json:"turn_done,omitempty"`
	KeepWarmUntil       *time.Time `json:"keep_warm_until,omitempty"`
	PodHeld             *bool      `json:"pod_held,omitempty"`
	PendingMessages     *int       `json:"pending_messages,omitempty"`
	TurnMessages        *int       `json:"turn_messages,omitempty"`
}

// Transition moves the run along an edge, writing Patch in the same update.
type Transition struct {
	From   State  `json:"from"`
	To     State  `json:"to"`
	Patch  *Patch `json:"patch,omitempty"`
	Reason string `json:"reason"`
}

// PatchStatus writes non-state fields (drifted PR fields, counters).
type PatchStatus struct {
	Patch  Patch  `json:"patch"`
	Reason string `json:"reason"`
}

// LaunchReview starts a code-review subtask for a repo run's open PR.
type LaunchReview struct {
	PRURL  string `json:"pr_url"`
	Reason string `json:"reason"`
}

// AutoMergePR merges the run's pull request.
type AutoMergePR struct {
	PRURL   string `json:"pr_url"`
	HeadSHA string `json:"head_sha"`
	Reason  string `json:"reason"`
}

// ResumeAgent re-runs a repo run's agent on its open PR (to fix conflicts,
// failing CI or requested changes), moving pr_opened → queued, counting the
// automatic resume and recording Trigger as the run's resume trigger. It
// launches nothing: the launch is the RequeueForAgent that takes the run
// out of queued once capacity allows, so a resume launches exactly once.
type ResumeAgent struct {
	From    State  `json:"from"`
	To      State  `json:"to"`
	Trigger string `json:"trigger"`
	Patch   *Patch `json:"patch,omitempty"`
	Reason  string `json:"reason"`
}

// RequeueForAgent hands a queued repo run to an agent: queued → provisioning
// plus the launch, under the launch's idempotency key. Trigger, when set
// (the run's resume trigger), makes the launch a resume of the agent's
// session on its PR.
type RequeueForAgent struct {
	From    State  `json:"from"`
	To      State  `json:"to"`
	Trigger string `json:"trigger,omitempty"`
	Reason  string `json:"reason"`
}

// RequeueSoon asks for another pass at At without changing anything (e.g.
// capacity is full or off-peak gating holds the run).
type RequeueSoon struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// DeferWithBackoff records a failed read: reconcile attempts become Attempts
// and no pass acts before Until.
type DeferWithBackoff struct {
	Until    time.Time `json:"until"`
	Attempts int       `json:"attempts"`
	Reason   string    `json:"reason"`
}

// ClearControlIntent drops an intent that does not apply to the run's state.
type ClearControlIntent struct {
	Intent Intent `json:"intent"`
	Reason string `json:"reason"`
}

// EnqueueAgent launches a standalone run's agent: queued → running.
type EnqueueAgent struct {
	From   State  `json:"from"`
	To     State  `json:"to"`
	Reason string `json:"reason"`
}

// LaunchReviewRun launches a PR review's agent: queued → reviewing.
type LaunchReviewRun struct {
	From    State  `json:"from"`
	To      State  `json:"to"`
	HeadSHA string `json:"head_sha"`
	Reason  string `json:"reason"`
}

// SubmitReview posts a finished review: ready → submitted.
type SubmitReview struct {
	From   State  `json:"from"`
	To     State  `json:"to"`
	Reason string `json:"reason"`
}

// MarkStale gives up on a review whose PR moved on or closed: → stale.
type MarkStale struct {
	From   State  `json:"from"`
	To     State  `json:"to"`
	Reason string `json:"reason"`
}

// EnqueueTurn starts a persistent agent's turn: queued → provisioning.
// Patch records how many pending messages the turn is for
// (TurnMessages).
type EnqueueTurn struct {
	From   State  `json:"from"`
	To     State  `json:"to"`
	Patch  *Patch `json:"patch,omitempty"`
	Reason string `json:"reason"`
}

// ReleasePod lets an idle persistent agent's pod go.
type ReleasePod struct {
	Reason string `json:"reason"`
}

// Noop means the world matches the desired state. WakeAt, when set, is the
// earliest time a pass could decide differently (e.g. backoff expiry).
type Noop struct {
	WakeAt time.Time `json:"wake_at,omitzero"`
	Reason string    `json:"reason"`
}

func (Transition) Type() ActionType         { return TypeTransition }
func (PatchStatus) Type() ActionType        { return TypePatchStatus }
func (LaunchReview) Type() ActionType       { return TypeLaunchReview }
func (AutoMergePR) Type() ActionType        { return TypeAutoMergePR }
func (ResumeAgent) Type() ActionType        { return TypeResumeAgent }
func (RequeueForAgent) Type() ActionType    { return TypeRequeueForAgent }
func (RequeueSoon) Type() ActionType        { return TypeRequeueSoon }
func (DeferWithBackoff) Type() ActionType   { return TypeDeferWithBackoff }
func (ClearControlIntent) Type() ActionType { return TypeClearControlIntent }
func (EnqueueAgent) Type() ActionType       { return TypeEnqueueAgent }
func (LaunchReviewRun) Type() ActionType    { return TypeLaunchReviewRun }
func (SubmitReview) Type() ActionType       { return TypeSubmitReview }
func (MarkStale) Type() ActionType          { return TypeMarkStale }
func (EnqueueTurn) Type() ActionType        { return TypeEnqueueTurn }
func (ReleasePod) Type() ActionType         { return TypeReleasePod }
func (Noop) Type() ActionType               { return TypeNoop }

func (a Transition) Why() string         { return a.Reason }
func (a PatchStatus) Why() string        { return a.Reason }
func (a LaunchReview) Why() string       { return a.Reason }
func (a AutoMergePR) Why() string        { return a.Reason }
func (a ResumeAgent) Why() string        { return a.Reason }
func (a RequeueForAgent) Why() string    { return a.Reason }
func (a RequeueSoon) Why() string        { return a.Reason }
func (a DeferWithBackoff) Why() string   { return a.Reason }
func (a ClearControlIntent) Why() string { return a.Reason }
func (a EnqueueAgent) Why() string       { return a.Reason }
func (a LaunchReviewRun) Why() string    { return a.Reason }
func (a SubmitReview) Why() string       { return a.Reason }
func (a MarkStale) Why() string          { return a.Reason }
func (a EnqueueTurn) Why() string        { return a.Reason }
func (a ReleasePod) Why() string         { return a.Reason }
func (a Noop) Why() string               { return a.Reason }

func (Transition) sealed()         {}
func (PatchStatus) sealed()        {}
func (LaunchReview) sealed()       {}
func (AutoMergePR) sealed()        {}
func (ResumeAgent) sealed()        {}
func (RequeueForAgent) sealed()    {}
func (RequeueSoon) sealed()        {}
func (DeferWithBackoff) sealed()   {}
func (ClearControlIntent) sealed() {}
func (EnqueueAgent) sealed()       {}
func (LaunchReviewRun) sealed()    {}
func (SubmitReview) sealed()       {}
func (MarkStale) sealed()          {}
func (EnqueueTurn) sealed()        {}
func (ReleasePod) sealed()         {}
func (Noop) sealed()               {}

// Move returns the edge the action takes.
func (a Transition) Move() Edge { return Edge{a.From, a.To} }

// Move returns the edge the action takes.
func (a ResumeAgent) Move() Edge { return Edge{a.From, a.To} }

// Move returns the edge the action takes.
func (a RequeueForAgent) Move() Edge { return Edge{a.From, a.To} }

// Move returns the edge the action takes.
func (a EnqueueAgent) Move() Edge { return Edge{a.From, a.To} }

// Move returns the edge the action takes.
func (a LaunchReviewRun) Move() Edge { return Edge{a.From, a.To} }

// Move returns the edge the action takes.
func (a SubmitReview) Move() Edge { return Edge{a.From, a.To} }

// Move returns the edge the action takes.
func (a MarkStale) Move() Edge { return Edge{a.From, a.To} }

// Move returns the edge the action takes.
func (a EnqueueTurn) Move() Edge { return Edge{a.From, a.To} }
