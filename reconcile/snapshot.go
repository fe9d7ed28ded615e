package reconcile

import "time"

// PodPhase is the observed phase of a run's pod.
type PodPhase string

// Pod phases.
const (
	PodPending    PodPhase = "pending"
	PodRunning    PodPhase = "running"
	PodReady      PodPhase = "ready"
	PodError      PodPhase = "error"
	PodTerminated PodPhase = "terminated"
	PodUnknown    PodPhase = "unknown"
)

// Pod is the observed state of the pod that runs an agent.
type Pod struct {
	Name  string   `json:"name,omitempty"`
	Phase PodPhase `json:"phase"`
	// ExitCode is set once the pod terminated; 0 means success.
	ExitCode  *int   `json:"exit_code,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Since is when the pod was first observed in Phase; producers set it.
	// An unknown phase counts as not yet observed for
	// Settings.UnknownPodGrace after Since.
	Since time.Time `json:"since,omitzero"`
}

// Alive reports whether the pod is pending, running or ready.
func (p *Pod) Alive() bool {
	return p != nil && (p.Phase == PodPending || p.Phase == PodRunning || p.Phase == PodReady)
}

// Dead reports whether the pod is gone: missing, errored, terminated, or in
// an unknown phase. Decisions give an unknown phase a grace period first
// (Settings.UnknownPodGrace).
func (p *Pod) Dead() bool { return !p.Alive() }

// Succeeded reports whether the pod terminated with exit code 0.
func (p *Pod) Succeeded() bool {
	return p != nil && p.Phase == PodTerminated && p.ExitCode != nil && *p.ExitCode == 0
}

// PRState is the state of a pull request.
type PRState string

// Pull request states.
const (
	PROpen   PRState = "open"
	PRClosed PRState = "closed"
	PRMerged PRState = "merged"
)

// ChecksStatus summarises a pull request's CI checks.
type ChecksStatus string

// CI check statuses. Conflicts is reported as a checks status, as the
// source system does.
const (
	ChecksNone      ChecksStatus = "none"
	ChecksPending   ChecksStatus = "pending"
	ChecksPassing   ChecksStatus = "passing"
	ChecksFailing   ChecksStatus = "failing"
	ChecksConflicts ChecksStatus = "conflicts"
)

// ReviewStatus summarises a pull request's reviews.
type ReviewStatus string

// Review statuses.
const (
	ReviewNone             ReviewStatus = "none"
	ReviewPending          ReviewStatus = "pending"
	ReviewApproved         ReviewStatus = "approved"
	ReviewChangesRequested ReviewStatus = "changes_requested"
	ReviewCommented        ReviewStatus = "commented"
)

// PullRequest is the observed state of a pull request.
type PullRequest struct {
	URL       string       `json:"url"`
	Number    int          `json:"number"`
	State     PRState      `json:"state"`
	Merged    bool         `json:"merged"`
	Mergeable bool         `json:"mergeable"`
	Checks    ChecksStatus `json:"checks"`
	Review    ReviewStatus `json:"review"`
	Comments  int          `json:"comments"`
	HeadSHA   string       `json:"head_sha"`
}

// PRFields are the pull-request fields stored on a run, compared with the
// observed PullRequest to detect drift and "newly" failing checks.
type PRFields struct {
	URL     string       `json:"url,omitempty"`
	Number  int          `json:"number,omitempty"`
	State   PRState      `json:"state,omitempty"`
	Checks  ChecksStatus `json:"checks,omitempty"`
	Review  ReviewStatus `json:"review,omitempty"`
	HeadSHA string       `json:"head_sha,omitempty"`
}

// Dependency is the state of a run this run depends on.
type Dependency struct {
	ID    string `json:"id"`
	State State  `json:"state"`
}

// Subtask is a child run; blocking subtasks must finish before auto-merge.
type Subtask struct {
	ID       string `json:"id"`
	State    State  `json:"state"`
	Blocking bool   `json:"blocking"`
}

// Capacity is the observed use of agent slots. A limit of 0 means unlimited.
type Capacity struct {
	GlobalActive int `json:"global_active"`
	GlobalLimit  int `json:"global_limit"`
	RepoActive   int `json:"repo_active"`
	RepoLimit    int `json:"repo_limit"`
}

// Available reports whether one more agent may start.
func (c Capacity) Available() bool {
	if c.GlobalLimit > 0 && c.GlobalActive >= c.GlobalLimit {
		return false
	}
	if c.RepoLimit > 0 && c.RepoActive >= c.RepoLimit {
		return false
	}
	return true
}

// ReviewTrigger says when an automatic code review launches.
type ReviewTrigger string

// Review triggers.
const (
	ReviewOnCIPass ReviewTrigger = "on_ci_pass"
	ReviewOnPROpen ReviewTrigger = "on_pr_open"
)

// PodLifecycle says how long a persistent agent's pod lives.
type PodLifecycle string

// Pod lifecycle modes.
const (
	// LifecycleAlwaysOn keeps the pod for the agent's whole life.
	LifecycleAlwaysOn PodLifecycle = "always-on"
	// LifecycleSticky keeps the pod until the keep-warm window ends.
	LifecycleSticky PodLifecycle = "sticky"
	// LifecycleOnDemand releases the pod after every turn.
	LifecycleOnDemand PodLifecycle = "on-demand"
)

// OffPeak restricts agent launches to a daily window in UTC hours
// [StartHour, EndHour); a window may wrap midnight.
type OffPeak struct {
	Only      bool `json:"only"`
	StartHour int  `json:"start_hour"`
	EndHour   int  `json:"end_hour"`
}

// Allows reports whether a launch at now passes off-peak gating.
func (o OffPeak) Allows(now time.Time) bool {
	if !o.Only || o.StartHour == o.EndHour {
		return true
	}
	h := now.UTC().Hour()
	if o.StartHour < o.EndHour {
		return h >= o.StartHour && h < o.EndHour
	}
	return h >= o.StartHour || h < o.EndHour
}

// Settings are the per-run (or per-repo) knobs the decisions read. Zero
// values mean the defaults documented on each field.
type Settings struct {
	// StallThreshold is how old a heartbeat may be before a running agent
	// counts as stalled (default 15 min).
	StallThreshold Duration `json:"stall_threshold,omitempty"`
	// UnknownPodGrace is how long a pod may stay in the unknown phase (from
	// Pod.Since) before the run counts it as lost (default 5 min).
	UnknownPodGrace Duration `json:"unknown_pod_grace,omitempty"`
	AutoMerge       bool     `json:"auto_merge"`
	// Cautious disables auto-merge regardless of AutoMerge.
	Cautious   bool `json:"cautious"`
	AutoResume bool `json:"auto_resume"`
	// MaxAutoResumes caps automatic resumes between manual actions (default 10).
	MaxAutoResumes int           `json:"max_auto_resumes,omitempty"`
	ReviewEnabled  bool          `json:"review_enabled"`
	ReviewTrigger  ReviewTrigger `json:"review_trigger,omitempty"`
	OffPeak        OffPeak       `json:"off_peak"`
	// WorkflowDisabled fails queued standalone runs of a disabled workflow.
	WorkflowDisabled bool `json:"workflow_disabled,omitempty"`
	// RetryBackoff is the base delay before a failed standalone run is retried
	// (default 30 s, doubling per retry, capped at 1 h).
	RetryBackoff Duration `json:"retry_backoff,omitempty"`
	// RerunOnPush re-runs a PR review when the head SHA changes.
	RerunOnPush bool `json:"rerun_on_push,omitempty"`
	// MaxReruns caps automatic review re-runs (default 10).
	MaxReruns int `json:"max_reruns,omitempty"`
	// PodLifecycle and KeepWarm govern a persistent agent's pod.
	PodLifecycle PodLifecycle `json:"pod_lifecycle,omitempty"`
	KeepWarm     Duration     `json:"keep_warm,omitempty"`
	// MaxTurnDuration bounds one persistent-agent turn (default 1 h).
	MaxTurnDuration Duration `json:"max_turn_duration,omitempty"`
	// FailureLimit is the consecutive-failure limit of a persistent agent
	// (default 3).
	FailureLimit int `json:"failure_limit,omitempty"`
}

// ReadError records that one source of the snapshot could not be read.
type ReadError struct {
	Source  string `json:"source"`
	Message string `json:"message"`
}

// Reconcile holds the three reconcile columns every run row carries.
type Reconcile struct {
	Intent       Intent    `json:"control_intent,omitempty"`
	BackoffUntil time.Time `json:"backoff_until,omitzero"`
	Attempts     int       `json:"attempts,omitempty"`
}

// World is what every snapshot observes besides the run row.
type World struct {
	// Now is the time of the observation; decisions read no other clock.
	Now time.Time `json:"now"`
	// JitterSeed makes backoff jitter deterministic for replay.
	JitterSeed uint64      `json:"jitter_seed"`
	Pod        *Pod        `json:"pod,omitempty"`
	Heartbeat  time.Time   `json:"heartbeat,omitzero"`
	Capacity   Capacity    `json:"capacity"`
	Settings   Settings    `json:"settings"`
	ReadErrors []ReadError `json:"read_errors,omitempty"`
}

// RepoRun is the stored row of a repo run.
type RepoRun struct {
	ID         string `json:"id"`
	State      State  `json:"state"`
	Version    int64  `json:"version"`
	Repo       string `json:"repo"`
	RetryCount int    `json:"retry_count"`
	MaxRetries int    `json:"max_retries"`
	SessionID  string `json:"session_id,omitempty"`
	// ResumeTrigger is set by an automatic or manual resume and tells the
	// next launch (queued → provisioning) to resume the agent's session on
	// the PR rather than start afresh; retry and restart clear it.
	ResumeTrigger string `json:"resume_trigger,omitempty"`
	// AutoResumes counts automatic resumes since the last manual action.
	AutoResumes   int       `json:"auto_resumes"`
	PR            PRFields  `json:"pr"`
	ReviewRunning bool      `json:"review_running"`
	Error         string    `json:"error,omitempty"`
	Reconcile     Reconcile `json:"reconcile"`
}

// RepoSnapshot is the frozen view a repo decision sees.
type RepoSnapshot struct {
	Run          RepoRun      `json:"run"`
	PR           *PullRequest `json:"pr,omitempty"`
	Dependencies []Dependency `json:"dependencies,omitempty"`
	Subtasks     []Subtask    `json:"subtasks,omitempty"`
	World
}

// StandaloneRun is the stored row of a standalone workflow run.
type StandaloneRun struct {
	ID         string    `json:"id"`
	State      State     `json:"state"`
	Version    int64     `json:"version"`
	Workflow   string    `json:"workflow"`
	RetryCount int       `json:"retry_count"`
	MaxRetries int       `json:"max_retries"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	Error      string    `json:"error,omitempty"`
	Reconcile  Reconcile `json:"reconcile"`
}

// StandaloneSnapshot is the frozen view a standalone decision sees.
type StandaloneSnapshot struct {
	Run StandaloneRun `json:"run"`
	World
}

// PRReviewRun is the stored row of an external pull-request review.
type PRReviewRun struct {
	ID      string `json:"id"`
	State   State  `json:"state"`
	Version int64  `json:"version"`
	PRURL   string `json:"pr_url"`
	// ReviewedSHA is the head SHA the current or last review looked at.
	ReviewedSHA string `json:"reviewed_sha,omitempty"`
	Reruns      int    `json:"reruns"`
	// ReviewDone is set by the review agent when its draft is complete.
	ReviewDone bool `json:"review_done"`
	// Review is the draft the review agent reported with its exit: the
	// text the submitted review posts. Decisions do not read it.
	Review    *ReviewDraft `json:"review,omitempty"`
	Error     string       `json:"error,omitempty"`
	Reconcile Reconcile    `json:"reconcile"`
}

// ReviewDraft is the review a review agent wrote.
type ReviewDraft struct {
	// Body is the review's text.
	Body string `json:"body"`
	// Event is the verdict: COMMENT (empty: the default), APPROVE or
	// REQUEST_CHANGES.
	Event string `json:"event,omitempty"`
	// Truncated says the agent wrote more than its runtime brings back
	// (Body ends with a note saying so).
	Truncated bool `json:"truncated,omitempty"`
}

// PRReviewSnapshot is the frozen view a PR review decision sees.
type PRReviewSnapshot struct {
	Run PRReviewRun  `json:"run"`
	PR  *PullRequest `json:"pr,omitempty"`
	World
}

// AgentRun is the stored row of a persistent agent.
type AgentRun struct {
	ID              string `json:"id"`
	State           State  `json:"state"`
	Version         int64  `json:"version"`
	PendingMessages int    `json:"pending_messages"`
	// Inbox keeps the newest messages sent to the agent (at most
	// MaxInbox), oldest first; the last PendingMessages of them are unread.
	// Decisions read only PendingMessages.
	Inbox []AgentMessage `json:"inbox,omitempty"`
	// TurnMessages is how many of PendingMessages the current turn was
	// started for (set when the turn is enqueued). A successful turn
	// subtracts it from PendingMessages, so a message sent during the turn
	// stays pending and starts the next turn.
	TurnMessages        int       `json:"turn_messages,omitempty"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	TurnStartedAt       time.Time `json:"turn_started_at,omitzero"`
	// TurnDone is set by the agent when its current turn halted successfully.
	TurnDone      bool      `json:"turn_done"`
	KeepWarmUntil time.Time `json:"keep_warm_until,omitzero"`
	// PodHeld is true while the agent keeps a pod between turns.
	PodHeld   bool      `json:"pod_held"`
	Error     string    `json:"error,omitempty"`
	Reconcile Reconcile `json:"reconcile"`
}

// AgentMessage is one message sent to a persistent agent.
type AgentMessage struct {
	At time.Time `json:"at"`
	// By names who sent it (the API token's name).
	By   string `json:"by"`
	Text string `json:"text"`
}

// MaxInbox is how many messages an agent's Inbox keeps.
const MaxInbox = 10

// AgentSnapshot is the frozen view a persistent-agent decision sees.
type AgentSnapshot struct {
	Run AgentRun `json:"run"`
	World
}
