package testrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Type is the release.JobAgent.Type the test runner serves.
const Type = "test-runner"

// ErrClosed is returned by Dispatch after Close.
var ErrClosed = errors.New("testrunner: agent closed")

// Default report retry policy: attempts in all, and the wait before the
// first retry (doubled before each further one).
const (
	defaultReportAttempts = 4
	defaultReportBackoff  = 100 * time.Millisecond
)

// Agent is the built-in test-runner job agent: it accepts every job with a
// valid config and reports the configured outcome after the configured
// delay. It is goroutine-safe. Create it with New and stop it with Close.
type Agent struct {
	reporter ports.JobReporter
	clock    ports.Clock
	log      *slog.Logger
	attempts int
	backoff  time.Duration
	lease    time.Duration

	// ctx lives until Close; reports and their backoffs run under it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	results map[string]ports.JobDispatchResult // by job id, kept for idempotency
	timers  map[string]*time.Timer             // pending reports by job id
	leased  map[string]ports.JobReport         // renewals of pending jobs by id (with a lease)
	wg      sync.WaitGroup                     // running reports; Add only under mu while open
}

var _ ports.JobAgent = (*Agent)(nil)

// Option configures an Agent.
type Option func(*Agent)

// WithLogger sets the logger for dropped reports; the default is
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(a *Agent) {
		if l != nil {
			a.log = l
		}
	}
}

// WithReportRetry sets how many times a report is attempted in all
// (at least 1; default 4) and the wait before the first retry, doubled
// before each further one (default 100ms).
func WithReportRetry(attempts int, backoff time.Duration) Option {
	return func(a *Agent) {
		a.attempts = max(attempts, 1)
		a.backoff = max(backoff, 0)
	}
}

// WithLease makes the agent hold a lease of d on every job it runs (see
// ports.JobLeaser): it renews the leases of its pending jobs every d/3 by
// an inProgress report, so a job that died with its process is noticed
// once its lease runs out. Zero (the default) holds none.
func WithLease(d time.Duration) Option {
	return func(a *Agent) { a.lease = max(d, 0) }
}

// New returns a test runner that reports outcomes through reporter and
// stamps them with clock. Call Close when done with it.
func New(reporter ports.JobReporter, clock ports.Clock, opts ...Option) *Agent {
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{
		reporter: reporter,
		clock:    clock,
		log:      slog.Default(),
		attempts: defaultReportAttempts,
		backoff:  defaultReportBackoff,
		ctx:      ctx,
		cancel:   cancel,
		results:  map[string]ports.JobDispatchResult{},
		timers:   map[string]*time.Timer{},
		leased:   map[string]ports.JobReport{},
	}
	for _, o := range opts {
		o(a)
	}
	if a.lease > 0 {
		a.wg.Add(1)
		go a.renewLoop()
	}
	return a
}

var _ ports.JobLeaser = (*Agent)(nil)

// JobLease is the lease the agent holds on each job it runs (WithLease);
// zero: none.
func (a *Agent) JobLease() time.Duration { return a.lease }

// renewLoop renews the leases of the pending jobs every lease/3 until
// Close. A renewal that fails is only logged: the next one tries again.
func (a *Agent) renewLoop() {
	defer a.wg.Done()
	t := time.NewTicker(a.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		renew := make([]ports.JobReport, 0, len(a.leased))
		for _, r := range a.leased {
			renew = append(renew, r)
		}
		a.mu.Unlock()
		// Renewals have connections of their own in the store
		// (ports.LaneRenewal): they never wait behind passes.
		ctx := ports.WithLane(a.ctx, ports.LaneRenewal)
		for _, r := range renew {
			r.At = a.clock.Now()
			if err := a.reporter.ReportJob(ctx, r); err != nil && a.ctx.Err() == nil {
				a.log.Debug("testrunner: lease renewal failed", slog.String("id", r.JobID), slog.Any("err", err))
			}
		}
	}
}

// Type returns "test-runner".
func (a *Agent) Type() string { return Type }

// Dispatch accepts the job: it returns ExternalID "test-runner/<job id>"
// and status inProgress, and schedules the configured outcome's report
// after the configured delay. Dispatching a job again returns the first
// result and schedules nothing. A bad config is an error wrapping a
// *release.FieldError that names the key (job_agent_config.delay, ...).
func (a *Agent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	id := d.Job.ID
	if id == "" {
		return ports.JobDispatchResult{}, fmt.Errorf("testrunner: dispatch: %w", release.Invalid("job.id", "is required"))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if res, ok := a.results[id]; ok {
		return res, nil
	}
	if a.closed {
		return ports.JobDispatchResult{}, fmt.Errorf("testrunner: dispatch job %s: %w", id, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return ports.JobDispatchResult{}, fmt.Errorf("testrunner: dispatch job %s: %w", id, err)
	}
	cfg, err := parseConfig(d.Job.JobAgentConfig)
	if err != nil {
		return ports.JobDispatchResult{}, fmt.Errorf("testrunner: dispatch job %s: %w", id, err)
	}
	res := ports.JobDispatchResult{
		ExternalID: Type + "/" + id,
		Status:     dispatchStatus,
		Message:    fmt.Sprintf("test runner will report %s after %s", cfg.outcome, cfg.delay),
	}
	report := ports.JobReport{
		JobID:      id,
		AgentID:    d.Agent.ID,
		ExternalID: res.ExternalID,
		Status:     cfg.outcome,
		Message:    cfg.message,
		Outputs:    cfg.outputs,
	}
	a.results[id] = res
	if a.lease > 0 {
		a.leased[id] = ports.JobReport{JobID: id, AgentID: d.Agent.ID, ExternalID: res.ExternalID,
			Status: release.JobInProgress, Lease: a.lease}
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "testrunner.accepted", slog.String("job", id), slog.Duration("delay", cfg.delay))
	// The timer's function runs on its own goroutine, after this lock is
	// released, even when the delay is zero.
	a.timers[id] = time.AfterFunc(cfg.delay, func() { a.fire(report) })
	return res, nil
}

var _ ports.JobCanceler = (*Agent)(nil)

// CancelJob stops a job whose outcome is not reported yet and reports it
// cancelled instead. A job already reported, or unknown, is left as it is.
func (a *Agent) CancelJob(_ context.Context, c ports.JobCancel) error {
	a.mu.Lock()
	t, ok := a.timers[c.JobID]
	if !ok || a.closed || !t.Stop() {
		a.mu.Unlock()
		return nil // reported, being reported, unknown, or closed
	}
	delete(a.timers, c.JobID)
	r := ports.JobReport{JobID: c.JobID, AgentID: c.Agent.ID, ExternalID: a.results[c.JobID].ExternalID,
		Status: release.JobCancelled, Message: "cancelled"}
	if c.Reason != "" {
		r.Message += ": " + c.Reason
	}
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		a.report(r)
	}()
	return nil
}

// reported ends the lease renewals of a job once its terminal report was
// delivered or dropped: until then the job's lease is renewed, so a slow
// report never lets a live job be ended as lost.
func (a *Agent) reported(jobID string) {
	a.mu.Lock()
	delete(a.leased, jobID)
	a.mu.Unlock()
}

// fire runs when a job's delay has passed: it reports the outcome unless
// the agent was closed.
func (a *Agent) fire(r ports.JobReport) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	delete(a.timers, r.JobID)
	a.wg.Add(1)
	a.mu.Unlock()
	defer a.wg.Done()
	a.report(r)
}

// report delivers r, retrying failures with a doubling backoff, and logs
// and drops it once the attempts are spent or the agent is closed; the
// job's lease is renewed until then (reported).
func (a *Agent) report(r ports.JobReport) {
	defer a.reported(r.JobID)
	ctx := ports.WithLane(a.ctx, ports.LaneRenewal)
	backoff := a.backoff
	var err error
	attempt := 0
	for attempt < a.attempts {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-a.ctx.Done():
				t.Stop()
				a.drop(r, attempt, fmt.Errorf("testrunner: agent closed while retrying: %w", err))
				return
			case <-t.C:
			}
			backoff *= 2
		}
		attempt++
		r.At = a.clock.Now()
		if err = a.reporter.ReportJob(ctx, r); err == nil {
			return
		}
	}
	a.drop(r, attempt, err)
}

// drop logs a report that could not be delivered.
func (a *Agent) drop(r ports.JobReport, attempts int, err error) {
	a.log.Error("testrunner: dropped job report",
		slog.String("id", r.JobID),
		slog.String("outcome", string(r.Status)),
		slog.Int("attempts", attempts),
		slog.Any("err", err))
}

// Close stops pending reports, cancels the ones in flight and waits for
// them to return. The agent refuses new jobs afterwards (ErrClosed); jobs
// it already accepted still return their first result. Close is
// idempotent.
func (a *Agent) Close() {
	a.mu.Lock()
	a.closed = true
	for id, t := range a.timers {
		t.Stop()
		delete(a.timers, id)
	}
	clear(a.leased)
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

// pending is the number of scheduled, not yet fired reports.
func (a *Agent) pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.timers)
}
