package pull

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Defaults of a Service.
const (
	// DefaultPoll is how often a waiting Next looks for a job whose lease
	// ran out (pending jobs wake it at once).
	DefaultPoll = time.Second
	// DefaultMaxWait caps a Next's wait.
	DefaultMaxWait = time.Minute
)

// Service takes, renews and reports pull agents' jobs for the API.
type Service struct {
	// Store reads agents, jobs and what a taken job needs, and renews
	// leases (compare-and-swap on the job).
	Store ports.ReleaseStore
	// Taker hands out the jobs.
	Taker ports.JobTaker
	// Tx, when set, makes a take and the wake-up of its target's
	// job-dispatch pass at the lease's end one transaction.
	Tx ports.Transactor
	// Queue stores that wake-up.
	Queue ports.Queue
	// Reporter records takers' reports: the release chain, and the
	// workflow controller for workflow jobs (flow.IsJobID).
	Reporter ports.JobReporter
	// Workflows, when set, hands out the jobs of workflow tasks beside
	// release jobs (ports.WorkflowJobs); its TaskRuns' passes are
	// enqueued at a take's lease end.
	Workflows ports.WorkflowJobs
	Clock     ports.Clock
	// Poll and MaxWait default to DefaultPoll and DefaultMaxWait.
	Poll, MaxWait time.Duration

	// turnMu guards workflowFirst: per agent, whether its next take looks
	// for a workflow job first (see takeAny).
	turnMu        sync.Mutex
	workflowFirst map[string]bool
}

// Taken is a job handed to a taker, with what it needs to run it. The
// job's config is merged (agent, deployment, version); sensitive
// variables hold secret references, never values.
//
// Kind is KindRelease for a release job and KindWorkflow for a workflow
// task's job (Job.Workflow names its workflow, task and TaskRun); a
// workflow job carries its release, version and target only when the
// workflow runs a release.
type Taken struct {
	Kind        string                    `json:"kind" enum:"release,workflow" doc:"release: a release job; workflow: a workflow task's job (job.workflow names its workflow, task and TaskRun; release, version and target are set only when the workflow runs a release)"`
	Job         ports.JobRow              `json:"job"`
	Release     release.Release           `json:"release"`
	Version     release.DeploymentVersion `json:"version"`
	Deployment  release.Deployment        `json:"deployment"`
	Environment release.Environment       `json:"environment"`
	Resource    release.Resource          `json:"resource"`
	// TakeToken is the hand-out's secret (256 random bits, hex): every
	// heartbeat and report of the hand-out carries it. Only its hash is
	// stored (release.JobTake.TokenHash).
	TakeToken string `json:"take_token"`
	// Traceparent is the W3C trace context the job was created under
	// (release.Job.Traceparent): a taker that traces continues it, and
	// sends it back as the traceparent header of its heartbeats and
	// reports. Empty when tracing is off.
	Traceparent string `json:"traceparent,omitempty"`
}

// The kinds of a taken job (Taken.Kind).
const (
	KindRelease  = "release"
	KindWorkflow = "workflow"
)

// newTakeToken returns a fresh take token and its stored hash.
func newTakeToken() (token, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("take token: %w", err)
	}
	token = hex.EncodeToString(b)
	return token, hashTakeToken(token), nil
}

// hashTakeToken is how a take token is stored.
func hashTakeToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// HandOut is the hand-out the taker holds: it names it on every heartbeat
// and report.
func (t *Taken) HandOut() int { return t.Job.Take.HandOut }

// Agent reads pull agent id's record and settings. An unknown agent, or
// one of another type, is ErrNotFound; bad settings are ErrInvalid naming
// the field.
func (s *Service) Agent(ctx context.Context, id string) (release.JobAgent, release.PullSettings, error) {
	a, err := s.Store.JobAgents().Get(ctx, id)
	if err != nil {
		return release.JobAgent{}, release.PullSettings{}, fmt.Errorf("job agent %s: %w", id, err)
	}
	if !release.IsPullAgentType(a.Value.Type) {
		return release.JobAgent{}, release.PullSettings{}, fmt.Errorf("job agent %s is of type %s, not a pull agent: %w",
			id, strconv.Quote(a.Value.Type), ports.ErrNotFound)
	}
	st, err := release.ParsePullSettings(a.Value.Config)
	if err != nil {
		return release.JobAgent{}, release.PullSettings{}, fmt.Errorf("job agent %s: %w", id, err)
	}
	return a.Value, st, nil
}

// Next hands taker the next job of pull agent agentID, waiting up to wait
// (capped at MaxWait) for one; ok is false when none came. The wait ends
// as soon as a job is takeable: a pending job's creation wakes it at once
// (in any process on the same store), a lease running out at the next
// poll. A cancelled ctx ends it as if none came.
func (s *Service) Next(ctx context.Context, agentID, taker string, wait time.Duration) (t Taken, ok bool, err error) {
	_, st, err := s.Agent(ctx, agentID)
	if err != nil {
		return Taken{}, false, err
	}
	p := ports.JobTakeParams{AgentID: agentID, Settings: st, Taker: taker}
	if err := ports.ValidateJobTake(p); err != nil {
		return Taken{}, false, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := s.Taker.JobTakeNotify(wctx) // before the first look: nothing is missed
	var wfWake <-chan struct{}          // nil: workflow jobs wake wake, or are polled for
	if n, ok := s.Workflows.(workflowJobNotifier); ok {
		wfWake = n.WorkflowJobNotify(wctx)
	}
	deadline := time.NewTimer(min(max(wait, 0), s.maxWait()))
	defer deadline.Stop()
	poll := time.NewTicker(s.poll())
	defer poll.Stop()
	for {
		t, err := s.takeAny(ctx, p)
		if err == nil {
			return t, true, nil
		}
		if !errors.Is(err, ports.ErrNotFound) {
			return Taken{}, false, err
		}
		select {
		case <-wake:
		case <-wfWake:
		case <-poll.C:
		case <-deadline.C:
			return Taken{}, false, nil
		case <-ctx.Done():
			return Taken{}, false, nil // the caller left or the server stops: no job came
		}
	}
}

// take takes one job, reads what the taker needs and enqueues its target's
// job-dispatch pass at the lease's end (which ends the job as lost after
// its last hand-out), all in one transaction when Tx is set.
func (s *Service) take(ctx context.Context, p ports.JobTakeParams) (Taken, error) {
	var out Taken
	err := s.inTx(ctx, func(ctx context.Context) error {
		row, err := s.Taker.JobTake(ctx, p)
		if err != nil {
			return err
		}
		if err := s.handOut(ctx, row, &out); err != nil {
			return err
		}
		out.Kind = KindRelease
		return s.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: chain.TargetKey(chain.KindJobDispatch, out.Job.Target()), NotBefore: out.Job.LeaseUntil})
	})
	return out, err
}

// takeAny hands out a release job or a workflow job of p.AgentID, the
// kinds looked for first in turn per agent: a take that finds a job of
// the kind it looked for first makes the agent's next take look for the
// other kind first, so a steady stream of one kind never starves the
// other (each kind gets at least every other take while both have jobs).
// The turn is kept per process; ErrNotFound when neither kind has one.
func (s *Service) takeAny(ctx context.Context, p ports.JobTakeParams) (Taken, error) {
	if s.Workflows == nil {
		return s.take(ctx, p)
	}
	s.turnMu.Lock()
	wfFirst := s.workflowFirst[p.AgentID]
	s.turnMu.Unlock()
	kinds := []func(context.Context, ports.JobTakeParams) (Taken, error){s.take, s.takeWorkflow}
	if wfFirst {
		kinds[0], kinds[1] = kinds[1], kinds[0]
	}
	t, err := kinds[0](ctx, p)
	if errors.Is(err, ports.ErrNotFound) {
		return kinds[1](ctx, p)
	}
	if err == nil {
		s.turnMu.Lock()
		if s.workflowFirst == nil {
			s.workflowFirst = map[string]bool{}
		}
		s.workflowFirst[p.AgentID] = !wfFirst
		s.turnMu.Unlock()
	}
	return t, err
}

// takeWorkflow is take for a workflow task's job: it enqueues the
// workflow's pass at the lease's end (which fails the TaskRun as lost
// after the job's last hand-out, ports.JobLossChecker).
func (s *Service) takeWorkflow(ctx context.Context, p ports.JobTakeParams) (Taken, error) {
	var out Taken
	err := s.inTx(ctx, func(ctx context.Context) error {
		row, err := s.Workflows.WorkflowJobTake(ctx, p, s.Clock.Now())
		if err != nil {
			return err
		}
		if err := s.handOut(ctx, row, &out); err != nil {
			return err
		}
		out.Kind = KindWorkflow
		return s.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: flow.Key(row.Workflow.ID), NotBefore: out.Job.LeaseUntil})
	})
	return out, err
}

// handOut issues row's take token and reads what its taker needs: the
// release, its version and its target's details (none for a workflow job
// whose workflow runs no release).
func (s *Service) handOut(ctx context.Context, row ports.JobRow, out *Taken) error {
	row, err := s.issueTakeToken(ctx, row, out)
	if err != nil {
		return err
	}
	out.Job, out.Traceparent = row, row.Traceparent
	if row.ReleaseID == "" {
		return nil
	}
	t, err := release.ParseTargetKey(row.TargetKey)
	if err != nil {
		return fmt.Errorf("job %s: %w", row.ID, err)
	}
	if out.Release, err = s.Store.ReleaseGet(ctx, row.ReleaseID); err != nil {
		return fmt.Errorf("job %s: %w", row.ID, err)
	}
	if out.Version, err = s.Store.VersionGet(ctx, row.VersionID); err != nil {
		return fmt.Errorf("job %s: %w", row.ID, err)
	}
	det, err := s.Store.TargetGet(ctx, t)
	if err != nil {
		return fmt.Errorf("job %s: %w", row.ID, err)
	}
	out.Deployment, out.Environment, out.Resource = det.Deployment, det.Environment, det.Resource
	return nil
}

// jobGet reads job jobID from the store that holds it: the workflow jobs
// for a workflow job id (flow.IsJobID), else the release store.
func (s *Service) jobGet(ctx context.Context, jobID string) (ports.JobRow, error) {
	if flow.IsJobID(jobID) {
		if s.Workflows == nil {
			return ports.JobRow{}, fmt.Errorf("job %s: workflow jobs are not handed out here: %w", jobID, ports.ErrNotFound)
		}
		return s.Workflows.WorkflowJobGet(ctx, jobID)
	}
	return s.Store.JobGet(ctx, jobID)
}

// jobUpdate writes job j at the expected version in the store that holds
// it (see jobGet).
func (s *Service) jobUpdate(ctx context.Context, j release.Job, expected int64) (int64, error) {
	if flow.IsJobID(j.ID) && s.Workflows != nil {
		return s.Workflows.WorkflowJobUpdate(ctx, j, expected, s.Clock.Now())
	}
	return s.Store.JobUpdate(ctx, j, expected)
}

// issueTakeToken gives the hand-out row holds a fresh take token: its hash
// is stored on the job, the token goes to out.
func (s *Service) issueTakeToken(ctx context.Context, row ports.JobRow, out *Taken) (ports.JobRow, error) {
	token, hash, err := newTakeToken()
	if err != nil {
		return row, err
	}
	next := row.Job
	take := *next.Take
	take.TokenHash = hash
	next.Take = &take
	v, err := s.jobUpdate(ctx, next, row.Version)
	if err != nil {
		return row, fmt.Errorf("job %s: store take token: %w", row.ID, err)
	}
	row.Job, row.Version = next, v
	out.TakeToken = token
	return row, nil
}

// Heartbeat renews the lease of hand-out handOut (with its take token) of
// job jobID of agent agentID to the agent's lease from now, and returns
// the job. A job of another agent is ErrNotFound; a wrong take token is
// ErrUnauthorized; a hand-out the job was handed out again from, or a job
// that ended, is ErrConflict saying so.
func (s *Service) Heartbeat(ctx context.Context, agentID, jobID string, handOut int, takeToken string) (ports.JobRow, error) {
	_, st, err := s.Agent(ctx, agentID)
	if err != nil {
		return ports.JobRow{}, err
	}
	for range 5 {
		row, err := s.job(ctx, agentID, jobID, handOut, takeToken)
		if err != nil {
			return ports.JobRow{}, err
		}
		if !row.Status.IsActive() {
			return ports.JobRow{}, fmt.Errorf("heartbeat on job %s: it ended %s: %w", jobID, row.Status, ports.ErrConflict)
		}
		until := ports.StoredTime(s.Clock.Now().Add(st.Lease))
		if !until.After(row.LeaseUntil) {
			return row, nil
		}
		next := row.Job
		next.LeaseUntil = until
		v, err := s.jobUpdate(ctx, next, row.Version)
		if errors.Is(err, ports.ErrConflict) {
			continue // judge the heartbeat on the job as it is now
		}
		if err != nil {
			return ports.JobRow{}, fmt.Errorf("heartbeat on job %s: %w", jobID, err)
		}
		row.Job, row.Version = next, v
		return row, nil
	}
	return ports.JobRow{}, fmt.Errorf("heartbeat on job %s: the job kept changing: %w", jobID, ports.ErrConflict)
}

// Report records hand-out handOut's report r (with its take token) on job
// jobID of agent agentID through the Reporter, which fences it
// (ports.JobReport.HandOut); a non-terminal report renews the lease as a
// heartbeat does.
func (s *Service) Report(ctx context.Context, agentID, jobID string, handOut int, takeToken string, r ports.JobReport) error {
	_, st, err := s.Agent(ctx, agentID)
	if err != nil {
		return err
	}
	if _, err := s.job(ctx, agentID, jobID, handOut, takeToken); err != nil {
		return err
	}
	if flow.IsJobID(jobID) {
		return s.reportWorkflow(ctx, agentID, jobID, handOut, takeToken, r)
	}
	r.JobID, r.AgentID, r.HandOut = jobID, agentID, handOut
	if !r.Status.IsTerminal() {
		r.Lease = st.Lease
	}
	return s.Reporter.ReportJob(ctx, r)
}

// job reads job jobID of agentID, checking that handOut is its current
// hand-out and takeToken that hand-out's token.
func (s *Service) job(ctx context.Context, agentID, jobID string, handOut int, takeToken string) (ports.JobRow, error) {
	if handOut < 1 {
		return ports.JobRow{}, release.Invalid("hand_out", "must be the hand-out the job was taken under (1 or more)")
	}
	row, err := s.jobGet(ctx, jobID)
	if err != nil {
		return ports.JobRow{}, err
	}
	if row.JobAgentID != agentID {
		return ports.JobRow{}, fmt.Errorf("job %s is not a job of agent %s: %w", jobID, agentID, ports.ErrNotFound)
	}
	if why := row.CheckHandOut(handOut); why != "" {
		return ports.JobRow{}, fmt.Errorf("%s: %w", why, ports.ErrConflict)
	}
	if row.Take.TokenHash == "" || subtle.ConstantTimeCompare([]byte(hashTakeToken(takeToken)), []byte(row.Take.TokenHash)) != 1 {
		return ports.JobRow{}, fmt.Errorf("job %s: take_token is not hand-out %d's: %w", jobID, handOut, ErrBadTakeToken)
	}
	return row, nil
}

// workflowJobNotifier is a ports.WorkflowJobs whose job creations wake
// takers through their own channel (the in-memory store; PostgreSQL's
// wake the release store's JobTakeNotify through the jobs channel).
type workflowJobNotifier interface {
	WorkflowJobNotify(ctx context.Context) <-chan struct{}
}

// ErrBadTakeToken is a heartbeat or report whose take token is not its
// hand-out's.
var ErrBadTakeToken = errors.New("bad take token")

func (s *Service) inTx(ctx context.Context, fn func(context.Context) error) error {
	if s.Tx == nil {
		return fn(ctx)
	}
	return s.Tx.InTx(ctx, fn)
}

func (s *Service) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return DefaultPoll
}

func (s *Service) maxWait() time.Duration {
	if s.MaxWait > 0 {
		return s.MaxWait
	}
	return DefaultMaxWait
}

// reportWorkflow records a taker's report on a workflow job: a
// non-terminal one renews the lease as a heartbeat does; a terminal one
// ends the stored job (compare-and-swap, fenced by the hand-out) and goes
// to the Reporter, the workflow controller, which completes the TaskRun
// from it, so the workflow goes on. A terminal report repeated (the first
// ended the job under the same hand-out) is passed on again: the
// controller applies a TaskRun's end once.
func (s *Service) reportWorkflow(ctx context.Context, agentID, jobID string, handOut int, takeToken string, r ports.JobReport) error {
	if !r.Status.IsTerminal() {
		_, err := s.Heartbeat(ctx, agentID, jobID, handOut, takeToken)
		return err
	}
	for try := 0; ; try++ {
		if try == 5 {
			return fmt.Errorf("report on job %s: the job kept changing: %w", jobID, ports.ErrConflict)
		}
		row, err := s.job(ctx, agentID, jobID, handOut, takeToken)
		if err != nil {
			return err
		}
		if !row.Status.IsActive() {
			break
		}
		now := s.Clock.Now()
		next := row.Job
		next.Status, next.Message, next.CompletedAt = r.Status, r.Message, now
		if r.ExternalID != "" {
			next.ExternalID = r.ExternalID
		}
		_, err = s.Workflows.WorkflowJobUpdate(ctx, next, row.Version, now)
		if errors.Is(err, ports.ErrConflict) {
			continue // judge the report on the job as it is now
		}
		if err != nil {
			return fmt.Errorf("report on job %s: %w", jobID, err)
		}
		break
	}
	r.JobID, r.AgentID, r.HandOut, r.Lease = jobID, agentID, handOut, 0
	return s.Reporter.ReportJob(ctx, r)
}
