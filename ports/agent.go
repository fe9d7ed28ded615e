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

// AgentRuntime launches and releases the pods agents run in. Implementations
// must be idempotent by key.
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
}

// CodeHost acts on pull requests. Implementations must be idempotent by key.
type CodeHost interface {
	// PRMerge merges the pull request if its head is still HeadSHA.
	PRMerge(ctx context.Context, p PRMergeParams) error
	// PRSubmitReview posts the review the review run prepared.
	PRSubmitReview(ctx context.Context, p PRSubmitParams) error
}
