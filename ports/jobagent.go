package ports

import (
	"context"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// JobDispatch is everything an agent needs to run one job: the job (its
// JobAgentConfig already merged agent → deployment → version), the agent
// record it was routed to, and the release with its target's objects.
// Sensitive variables hold a SecretRef, never plaintext: an agent resolves
// secrets itself.
type JobDispatch struct {
	Job         release.Job
	Agent       release.JobAgent
	Release     release.Release
	Version     release.DeploymentVersion
	Deployment  release.Deployment
	Environment release.Environment
	Resource    release.Resource
}

// JobDispatchResult is what an agent reports when it accepted a job.
type JobDispatchResult struct {
	// ExternalID is the agent's name for the run (a workflow run id, an
	// Argo CD sync id); later reports find the job by it.
	ExternalID string
	// Status is the job's status after the dispatch: queued or inProgress
	// for push agents that run it, pending for pull-based agents that will
	// fetch it, or a terminal status when the agent already knows the
	// outcome.
	Status release.JobStatus
	// Message says what happened, for humans.
	Message string
}

// JobAgent runs jobs on an external system (GitHub Actions, Argo CD,
// Terraform Cloud, Argo Workflows, a pull-based agent, the test runner).
// The chain routes a job to the JobAgent whose Type equals the job's
// release.JobAgent.Type.
//
// Invariants (checked by porttest.JobAgent):
//   - Dispatch is idempotent by Job.ID: a second dispatch of the same job
//     (a retried work item) starts nothing new and returns the first
//     result.
//   - Outcomes come back later through a JobReporter, by job id or by
//     (agent id, external id); Dispatch itself never blocks on the run.
//     At most one terminal report is sent per job (the reporter ignores a
//     repeated status, so a report retried after an ambiguous error is
//     harmless).
//   - A Dispatch that returns an error started nothing, so a retry may
//     succeed; with a cancelled context it returns promptly. An error
//     wrapping release.ErrInvalid is a configuration error that no retry
//     can fix: the chain ends the job invalidIntegration.
type JobAgent interface {
	// Type is the release.JobAgent.Type this implementation serves.
	Type() string
	// Dispatch hands the job to the agent.
	Dispatch(ctx context.Context, d JobDispatch) (JobDispatchResult, error)
}

// JobCancel asks an agent to stop one job it was handed.
type JobCancel struct {
	JobID string
	// ExternalID is the agent's name for the run, as its Dispatch returned.
	ExternalID string
	Agent      release.JobAgent
	// Reason says why, for humans (the workflow was cancelled, the task
	// timed out).
	Reason string
}

// JobCanceler is implemented by JobAgents that can stop a running job.
// The workflow controller calls it when a job is no longer wanted: its
// workflow was cancelled or its TaskRun timed out. By then the job's end
// is already recorded, so a report that still comes is ignored.
//
// CancelJob is idempotent: cancelling a job that already ended, or that
// the agent does not know, is not an error. An error means the agent
// could not be told; the job may run on.
type JobCanceler interface {
	CancelJob(ctx context.Context, c JobCancel) error
}

// JobReport is a job's progress as an agent reports it: by JobID, or by
// AgentID and ExternalID when the agent only knows its own name for the
// run.
type JobReport struct {
	JobID      string
	AgentID    string
	ExternalID string
	Status     release.JobStatus
	Message    string
	// At is when the status was reached; zero means when it is recorded.
	At time.Time
	// Outputs are what the job produced (an image tag, a URL), for later
	// workflow tasks (tasks.NAME.outputs.*); nil when none.
	Outputs map[string]any
	// Links are added to the job's links (a name already there takes the
	// new URL); see release.ValidateLinks. Release jobs only.
	Links map[string]string
	// Lease, on a non-terminal report of a JobLeaser's job, renews the
	// job's lease until At (or the time it is recorded) plus Lease.
	// A pull agent's taker's report (HandOut set) renews its lease too.
	Lease time.Duration
	// HandOut, when positive, is the hand-out of a pull agent's job
	// (release.JobTake) the reporting taker holds: the report is refused
	// with ErrConflict when the job was handed out again since or ended
	// (release.Job.CheckHandOut). Release jobs only.
	HandOut int
}

// JobLeaser is implemented by JobAgents whose jobs run in the process
// that dispatched them (the built-in test runner), so that a job dies with
// its process. Such an agent holds a lease on every job it runs: it
// renews it by a non-terminal JobReport with Lease set at least every
// JobLease()/3, and the workflow controller ends an attempt whose lease
// ran out as failed (its retry strategy may run it again under a new job
// id) without waiting for a task timeout; the release chain ends such a
// release job as lost (release.Job.LeaseUntil) without waiting for the
// deployment's job timeout. JobLease is constant; zero
// means the agent holds no leases. Checked by porttest.JobLeaser: renewals
// name the job and carry JobLease, come within the lease, and stop with
// the job's outcome or cancel.
type JobLeaser interface {
	JobLease() time.Duration
}

// JobResumer is implemented by JobLeasers whose jobs run on an external
// system that outlives the process following them (GitHub Actions, Argo
// CD, Terraform Cloud, Argo Workflows, Kubernetes Jobs): the lease they
// hold is their follower's, renewed while a process follows the run. When
// a job's lease ran out, the release chain and the workflow controller do
// not end it as lost: they claim it anew (its lease renewed by a
// compare-and-swap write, so one process of many wins) and, once that
// claim is stored, call ResumeJob in the process that won.
//
// ResumeJob follows job d again, d being the job as dispatched before,
// perhaps by another process (d.Job.ExternalID is what that dispatch
// answered, "" when none was recorded): it finds the external run by that
// id or the job's correlation key and starts none unless no earlier
// dispatch did (the process died before the system took it); it then
// reports the run's statuses through the agent's JobReporter, renewing
// the job's lease, as after a Dispatch. The result is the run's status
// now, as a Dispatch's (terminal when it ended meanwhile). A job this
// process follows already keeps its one follower. An error started
// nothing: the lease runs out again and the next claim retries. Checked
// by porttest.JobAgent (JobAgentOptions.Durable).
type JobResumer interface {
	ResumeJob(ctx context.Context, d JobDispatch) (JobDispatchResult, error)
}

// ResumerOf is agent as a JobResumer when it resumes jobs it holds leases
// on, else nil: a job of any other agent whose lease ran out is lost.
func ResumerOf(agent JobAgent) JobResumer {
	if r, ok := agent.(JobResumer); ok && JobLeaseOf(agent) > 0 {
		return r
	}
	return nil
}

// JobLeaseOf is the lease agent holds on each job it runs: its JobLease
// when it is a JobLeaser, else zero (it holds none).
func JobLeaseOf(agent JobAgent) time.Duration {
	if l, ok := agent.(JobLeaser); ok {
		return max(l.JobLease(), 0)
	}
	return 0
}

// JobLossChecker is implemented by JobAgents whose jobs are held under a
// lease outside the process (a pull agent's workflow jobs, leased to their
// takers). The workflow controller asks it, on each pass over a sent job,
// whether the job is lost (why is not empty: its last hand-out's lease ran
// out); next is when to ask again (zero: on the next pass anyway).
type JobLossChecker interface {
	JobLost(ctx context.Context, jobID string, now time.Time) (why string, next time.Time, err error)
}

// JobReporter takes agents' reports. Reporting a status the job already
// has is a no-op; a status the job cannot move to (release.JobEdges) is
// refused with an error wrapping release.ErrInvalid.
type JobReporter interface {
	ReportJob(ctx context.Context, r JobReport) error
}

// JobReporterFunc adapts a function to JobReporter.
type JobReporterFunc func(ctx context.Context, r JobReport) error

// ReportJob calls f.
func (f JobReporterFunc) ReportJob(ctx context.Context, r JobReport) error { return f(ctx, r) }

// MeasureRequest asks a verifier for one measurement of a metric for a job.
type MeasureRequest struct {
	Metric policy.MetricSpec
	Job    release.Job
	// Attempt is the 1-based number of this measurement of the metric;
	// below 1 is a malformed request, refused with an error.
	Attempt int
}

// Verifier takes measurements for verification metrics (Datadog, HTTP
// probes, Terraform Cloud run status, the built-in sleep and scripted
// providers). The chain routes a metric to the Verifier whose Type equals
// its Provider.Type.
//
// Invariants (checked by porttest.Verifier): Measure returns the provider's
// result as JSON-like data (maps, slices, strings, float64, bool, nil) that
// the metric's CEL conditions read as `result`; a provider that cannot
// measure returns an error, which counts as a failed measurement.
type Verifier interface {
	// Type is the policy.Provider.Type this implementation serves.
	Type() string
	// Measure takes one measurement.
	Measure(ctx context.Context, r MeasureRequest) (any, error)
}
