package ports

import (
	"context"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// JobTakeParams asks for the next job of a pull agent.
type JobTakeParams struct {
	// AgentID is the pull agent's record id.
	AgentID string
	// Settings are the agent's lease and hand-out bound.
	Settings release.PullSettings
	// Taker names the taker, for people (a host name); required.
	Taker string
}

// JobTaker hands the release jobs of pull agents (release.PullAgentType)
// to takers outside the process. Implemented by the release stores.
//
// Invariants (checked by porttest.JobTaker):
//   - JobTake hands out the oldest job, by (created_at, id), of p.AgentID
//     that is release.Job.Takeable at the store's clock, as
//     release.Job.Taken in one compare-and-swap write (the returned row
//     carries the new version); ErrNotFound when there is none. Concurrent
//     takes, from any number of processes on one database, never hand out
//     the same hand-out of a job twice, and a take never waits for
//     another take's job.
//   - JobTakeNotify returns a channel that receives a wake-up (it holds at
//     most one; a writer never blocks on it) once a pending job is
//     created after the call, until ctx ends. Wake-ups may be spurious,
//     and a lease running out is not signalled: a waiter also polls.
type JobTaker interface {
	JobTake(ctx context.Context, p JobTakeParams) (JobRow, error)
	JobTakeNotify(ctx context.Context) <-chan struct{}
}

// ValidateJobTake checks a take's parameters.
func ValidateJobTake(p JobTakeParams) error {
	switch {
	case p.AgentID == "":
		return release.Invalid("agent_id", "is required")
	case p.Taker == "":
		return release.Invalid("taker", "is required")
	case p.Settings.Lease < release.MinPullLease || p.Settings.Lease > release.MaxPullLease:
		return release.Invalid("lease", "must be between "+release.MinPullLease.String()+" and "+release.MaxPullLease.String())
	case p.Settings.MaxHandOuts < 1 || p.Settings.MaxHandOuts > release.MaxHandOutsLimit:
		return release.Invalid("max_hand_outs", "must be between 1 and 100")
	}
	return nil
}
