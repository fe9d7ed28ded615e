// Package pull serves pull agents (release.PullAgentType): job agents
// outside the process that long-poll the API for their next job
// (Service.Next: release jobs, then workflow tasks' jobs), hold a lease on it by heartbeats (Service.Heartbeat) and
// report through the API (Service.Report). A job whose taker stops
// heartbeating is handed out again to the next taker, at most its agent's
// max_hand_outs times; after the last hand-out's lease runs out the chain
// ends it as lost. Each hand-out is numbered, and a taker acts under its
// number: one the job was handed out again from is fenced (ErrConflict).
//
// Invariants: a job is held by at most one hand-out at a time (the store's
// ports.JobTaker); a wait for a job ends as soon as one is takeable (a
// pending job's creation wakes the waiters of every process; a lease
// running out is seen by polling) and never outlasts MaxWait.
package pull

import (
	"context"
	"fmt"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Agent is the JobAgent of pull agents for the release chain: dispatching
// a release job leaves it pending for a taker, with the job id as its
// external id. The workflow controller's is WorkflowAgent, which also
// stores a workflow task's job for the takers.
//
// It holds no lease in the process (it is no ports.JobLeaser): the lease
// starts when a taker takes the job.
type Agent struct {
	typ string
}

var _ ports.JobAgent = Agent{}

// NewAgent returns the agent serving typ: release.PullAgentType, or its
// older name release.APIAgentType.
func NewAgent(typ string) Agent { return Agent{typ: typ} }

// Type returns the type the agent serves.
func (a Agent) Type() string { return a.typ }

// Dispatch leaves the job pending for its taker. A config whose pull
// settings are bad is an ErrInvalid error: the chain ends the job
// invalidIntegration naming the field.
func (a Agent) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	if _, err := release.ParsePullSettings(d.Agent.Config); err != nil {
		return ports.JobDispatchResult{}, fmt.Errorf("pull agent %s: %w", d.Agent.ID, err)
	}
	return ports.JobDispatchResult{Status: release.JobPending, ExternalID: d.Job.ID,
		Message: "waiting for a taker of agent " + d.Agent.ID + " (POST /api/v1/job-agents/" + d.Agent.ID + "/jobs/next)"}, nil
}

// ValidateConfig checks a pull agent's config before it is stored: lease
// and max_hand_outs (release.ParsePullSettings), and report_secret, when
// set, a secret reference.
func ValidateConfig(cfg map[string]any) error {
	if _, err := release.ParsePullSettings(cfg); err != nil {
		return err
	}
	if v, ok := cfg[ReportSecretKey]; ok {
		ref, _ := v.(string)
		if scheme, name, ok := strings.Cut(ref, ":"); !ok || name == "" || (scheme != "env" && scheme != "file") {
			return release.Invalid("job_agent_config."+ReportSecretKey, "want a secret reference env:NAME or file:/path, not the secret itself")
		}
	}
	return nil
}

// ReportSecretKey is the config key of the secret reference a pull
// agent's signed calls are checked with.
const ReportSecretKey = "report_secret"
