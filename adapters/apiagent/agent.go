// Package apiagent is the JobAgent of job agents outside the process that
// talk to reconciler through its HTTP API: dispatching a job leaves it
// pending; the outside agent finds it (GET /api/v1/targets shows each
// target's active job) and reports on it with POST
// /api/v1/jobs/{id}/report, with a token of scope agent or signed with
// its report_secret.
//
// Invariants: Dispatch never blocks, never fails, and reports nothing by
// itself; the same job dispatched twice gets the same result.
package apiagent

import (
	"context"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Type is the release.JobAgent.Type this agent serves.
const Type = "api"

// Agent is the pull-based agent: see the package doc.
type Agent struct{}

var _ ports.JobAgent = Agent{}

// Type returns Type.
func (Agent) Type() string { return Type }

// Dispatch leaves the job pending for its outside agent to fetch, with the job id as
// the external id.
func (Agent) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return ports.JobDispatchResult{Status: release.JobPending, ExternalID: d.Job.ID,
		Message: "waiting for agent " + d.Agent.ID + " to report through the API"}, nil
}
