package ports

import (
	"context"

	"github.com/reconcilerhq/reconciler/reconcile"
)

// AgentPurpose says why an agent is launched.
type AgentPurpose string

// Agent launch purposes.
const (
	PurposeRun    AgentPurpose = "run"
	PurposeResume AgentPurpose = "resume"
	PurposeReview AgentPurpose = "review"
	PurposeTurn   AgentPurpose = "turn"
)

// AgentLaunchParams asks for an agent pod for a run.
type AgentLaunchParams struct {
	Ref     reconcile.RunRef
	Purpose AgentPurpose
	// Trigger details a resume (conflicts, ci-failing, changes-requested).
	Trigger string
	// IdempotencyKey makes a retried launch a no-op.
	IdempotencyKey string
}

// AgentRuntime launches and releases the pods agents run in.
//
// Invariants (checked by porttest.AgentRuntime): a launch of any kind and
// purpose starts one agent; launches and releases are idempotent by key,
// also under concurrent calls; a new key for the same run is a new launch;
// releasing a run that has no agent is not an error.
type AgentRuntime interface {
	// AgentLaunch starts (or resumes) the run's agent.
	AgentLaunch(ctx context.Context, p AgentLaunchParams) error
	// AgentRelease lets the run's pod go.
	AgentRelease(ctx context.Context, ref reconcile.RunRef, idempotencyKey string) error
}

// PRMergeParams merges a pull request at a known head.
type PRMergeParams struct {
	URL            string
	HeadSHA        string
	IdempotencyKey string
}

// PRSubmitParams posts a finished review.
type PRSubmitParams struct {
	Ref            reconcile.RunRef
	URL            string
	IdempotencyKey string
	// HeadSHA is the commit the review looked at (empty: the PR's head).
	HeadSHA string
	// Body is the review text; Event is COMMENT (default), APPROVE or
	// REQUEST_CHANGES.
	Body, Event string
}

// CodeHost acts on pull requests.
//
// Invariants (checked by porttest.CodeHost): merges and review submissions
// are idempotent by key, also under concurrent calls; a new key is a new
// submission; each pull request keeps its own effects.
type CodeHost interface {
	// PRMerge merges the pull request if its head is still HeadSHA.
	PRMerge(ctx context.Context, p PRMergeParams) error
	// PRSubmitReview posts the review the review run prepared.
	PRSubmitReview(ctx context.Context, p PRSubmitParams) error
}

// PROpenParams opens a pull request from an agent's branch.
type PROpenParams struct {
	// Repo is owner/name; Head the agent's branch; Base the target branch
	// (empty: the repository's default branch).
	Repo, Head, Base string
	Title, Body      string
}

// PullRequests reads and opens pull requests on a code host: the PR
// poller observes runs' pull requests through it, and an agent's branch
// becomes a pull request through it.
//
// Invariants (checked by porttest.PullRequests): one open pull request
// per head branch, also under concurrent opens; a closed one is not
// reused; PRGet reads the host's current state, ErrNotFound when the host
// has no such pull request.
type PullRequests interface {
	// PRGet returns the observed state of the pull request at url
	// (state, mergeability, checks and reviews summarised).
	PRGet(ctx context.Context, url string) (reconcile.PullRequest, error)
	// PROpen opens a pull request from p.Head, or returns the open one
	// that already has that head (idempotent).
	PROpen(ctx context.Context, p PROpenParams) (reconcile.PullRequest, error)
}
