package ports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile"
)

// RunRow is one stored run of any kind. Body holds the kind's row type
// (reconcile.RepoRun, StandaloneRun, PRReviewRun or AgentRun) as JSON; the
// columns beside it are the ones queries need.
type RunRow struct {
	Ref   reconcile.RunRef `json:"ref"`
	State reconcile.State  `json:"state"`
	// Version is the compare-and-swap token: every write bumps it.
	Version int64 `json:"version"`
	// Repo groups runs for per-repo capacity; empty for kinds without one.
	Repo string          `json:"repo,omitempty"`
	Body json.RawMessage `json:"body"`
	// Settings are the run's knobs; zero fields take the engine defaults.
	Settings reconcile.Settings `json:"settings"`
	// Observations written by producers (pod watcher, PR poller, agent).
	Pod       *reconcile.Pod         `json:"pod,omitempty"`
	PR        *reconcile.PullRequest `json:"pr,omitempty"`
	Heartbeat time.Time              `json:"heartbeat,omitzero"`
	// DependsOn lists runs of the same kind this run waits for; Subtasks
	// lists child runs (blocking ones gate auto-merge).
	DependsOn []string            `json:"depends_on,omitempty"`
	Subtasks  []reconcile.Subtask `json:"subtasks,omitempty"`
	CreatedAt time.Time           `json:"created_at"`
	UpdatedAt time.Time           `json:"updated_at"`
}

// RunUpdateParams is one compare-and-swap write of a run's state and body.
type RunUpdateParams struct {
	Ref             reconcile.RunRef
	ExpectedVersion int64
	State           reconcile.State
	Body            json.RawMessage
	// ResetPod forgets the observed pod in the same write: an agent launch
	// starts a new pod, so the previous attempt's must not be judged again.
	ResetPod bool
	// Subtasks, when set, replaces the run's subtasks in the same write
	// (their ids and blocking flags; a pass reads their states afresh).
	Subtasks *[]reconcile.Subtask
	// Decision, when set, is recorded in the run's decision history in the
	// same write (only if the write lands); the store stamps its At and
	// Version.
	Decision *RunDecision
}

// RunDecision is one entry of a run's decision history: a decision the
// kernel applied (its action, reason and the move it made, if any), or an
// operator's request (a control intent, a message) with who made it.
type RunDecision struct {
	// Version is the run's version the recorded write produced; entries of
	// one run are ordered by it.
	Version int64 `json:"version"`
	// At is when the write landed (the store's clock).
	At time.Time `json:"at"`
	// Action is the decision's reconcile.ActionType, "intent" or
	// "message" for an operator's request, or "waiting" when the decided
	// action could not be applied (engine/runs.DecisionWaiting).
	Action string `json:"action"`
	// Reason is the decision's kebab-case reason, why a "waiting" run
	// waits (the failure, bounded), or the request (e.g.
	// "cancel").
	Reason string `json:"reason"`
	// From and To are set for a move (From → To).
	From reconcile.State `json:"from,omitempty"`
	To   reconcile.State `json:"to,omitempty"`
	// By names the principal of an operator's request; empty for the kernel.
	By string `json:"by,omitempty"`
}

// RunDecisionsKept is how many decisions a store keeps per run: the newest
// ones; older entries are dropped as new ones are recorded.
const RunDecisionsKept = 50

// RunObserveParams records what a producer observed; nil fields are left
// alone. Observations bump the version, so a decision taken on older
// observations loses its compare-and-swap.
type RunObserveParams struct {
	Ref       reconcile.RunRef
	Pod       *reconcile.Pod
	PR        *reconcile.PullRequest
	Heartbeat time.Time
	// Patch, when set, is merged into the body (e.g. the agent setting
	// turn_done or review_done); keys are the body's JSON names.
	Patch map[string]any
}

// RunListParams pages through runs by (kind, id).
type RunListParams struct {
	Kind reconcile.RunKind
	// NonTerminal keeps only runs in a non-terminal state of their machine.
	NonTerminal bool
	// State, when set, keeps only runs in this state.
	State reconcile.State
	// AfterID continues a listing after this id.
	AfterID string
	// Limit is the most rows returned; zero or less means
	// DefaultRunListLimit.
	Limit int
}

// RunCounts is the capacity view: how many runs hold an agent slot.
type RunCounts struct {
	GlobalActive int
	RepoActive   int
}

// RunStore stores the runs of the four kinds and each run's recent decision
// history.
//
// Invariants (checked by porttest.RunStore): every write bumps Version; a
// write with a stale ExpectedVersion returns ErrConflict and changes nothing
// (its Decision is not recorded either); RunGet of a missing run returns
// ErrNotFound; RunDecisions returns the newest RunDecisionsKept decisions at
// most, newest first, each stamped with the version its write produced.
type RunStore interface {
	// RunCreate inserts a new run at version 1; an existing ref is ErrConflict.
	RunCreate(ctx context.Context, row RunRow) (RunRow, error)
	// RunGet reads one run.
	RunGet(ctx context.Context, ref reconcile.RunRef) (RunRow, error)
	// RunUpdate writes state and body if the version still matches and
	// returns the new version.
	RunUpdate(ctx context.Context, p RunUpdateParams) (int64, error)
	// RunObserve records observations and returns the new version.
	RunObserve(ctx context.Context, p RunObserveParams) (int64, error)
	// RunDecisions returns up to limit of the run's recorded decisions,
	// newest first (limit <= 0 or above RunDecisionsKept means
	// RunDecisionsKept); a missing run is ErrNotFound.
	RunDecisions(ctx context.Context, ref reconcile.RunRef, limit int) ([]RunDecision, error)
	// RunList pages through runs.
	RunList(ctx context.Context, p RunListParams) ([]RunRow, error)
	// RunStates returns the states of the named runs of one kind; missing
	// runs are absent from the map.
	RunStates(ctx context.Context, kind reconcile.RunKind, ids []string) (map[string]reconcile.State, error)
	// RunDependents returns, in id order, the ids of the non-terminal runs
	// of kind whose DependsOn or Subtasks name id: the runs to wake when it
	// finishes.
	RunDependents(ctx context.Context, kind reconcile.RunKind, id string) ([]string, error)
	// RunCounts counts runs holding an agent slot (provisioning or running
	// states of every kind, reviewing reviews), globally and for repo.
	RunCounts(ctx context.Context, repo string) (RunCounts, error)
}

// DefaultRunListLimit is the page size RunList uses when Limit is not
// positive.
const DefaultRunListLimit = 100

// ErrInvalidRun is returned (wrapped, naming the field) when a run write or
// query carries an unknown kind, an empty id, a state outside the kind's
// machine or a body that is not a JSON object.
var ErrInvalidRun = errors.New("invalid run")

// HoldsSlot reports whether a run of kind in state holds an agent slot and so
// counts against capacity: provisioning or running repo runs and persistent
// agents, running standalone runs and reviewing pull-request reviews. It is
// the one definition RunCounts and the engine share.
func HoldsSlot(kind reconcile.RunKind, state reconcile.State) bool {
	switch kind {
	case reconcile.KindRepo:
		return state == reconcile.RepoProvisioning || state == reconcile.RepoRunning
	case reconcile.KindStandalone:
		return state == reconcile.StandaloneRunning
	case reconcile.KindPRReview:
		return state == reconcile.ReviewRunning
	case reconcile.KindPersistentAgent:
		return state == reconcile.AgentProvisioning || state == reconcile.AgentRunning
	}
	return false
}

// ValidateRunRef checks that ref names a known kind and a non-empty id.
func ValidateRunRef(ref reconcile.RunRef) error {
	if !ref.Kind.Valid() {
		return fmt.Errorf("%w: ref.kind %q is not a run kind", ErrInvalidRun, ref.Kind)
	}
	if ref.ID == "" {
		return fmt.Errorf("%w: ref.id is empty", ErrInvalidRun)
	}
	return nil
}

// ValidateRunWrite checks what a create or update writes: the ref, a state of
// the kind's machine and a body that is empty or a JSON object.
func ValidateRunWrite(ref reconcile.RunRef, state reconcile.State, body json.RawMessage) error {
	if err := ValidateRunRef(ref); err != nil {
		return err
	}
	if !reconcile.MachineFor(ref.Kind).IsState(state) {
		return fmt.Errorf("%w: state %q is not a state of kind %s", ErrInvalidRun, state, ref.Kind)
	}
	if len(body) == 0 {
		return nil
	}
	if !json.Valid(body) {
		return fmt.Errorf("%w: body of %s is not valid JSON", ErrInvalidRun, ref)
	}
	if b := bytes.TrimLeft(body, " \t\r\n"); b[0] != '{' {
		return fmt.Errorf("%w: body of %s is not a JSON object", ErrInvalidRun, ref)
	}
	return nil
}
