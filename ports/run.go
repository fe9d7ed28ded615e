package ports

import (
	"context"
	"encoding/json"
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
}

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
	// AfterID continues a listing after this id.
	AfterID string
	Limit   int
}

// RunCounts is the capacity view: how many runs hold an agent slot.
type RunCounts struct {
	GlobalActive int
	RepoActive   int
}

// RunStore stores the runs of the four kinds.
//
// Invariants (checked by porttest.RunStore): every write bumps Version; a
// write with a stale ExpectedVersion returns ErrConflict and changes nothing;
// RunGet of a missing run returns ErrNotFound.
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
	// RunList pages through runs.
	RunList(ctx context.Context, p RunListParams) ([]RunRow, error)
	// RunStates returns the states of the named runs of one kind; missing
	// runs are absent from the map.
	RunStates(ctx context.Context, kind reconcile.RunKind, ids []string) (map[string]reconcile.State, error)
	// RunCounts counts runs holding an agent slot (provisioning or running
	// states of every kind, reviewing reviews), globally and for repo.
	RunCounts(ctx context.Context, repo string) (RunCounts, error)
}
