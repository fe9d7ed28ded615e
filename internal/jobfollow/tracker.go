// Package jobfollow is what the job agents that run jobs on an external
// system share: idempotent dispatch by job id within the process (one
// start per job, concurrent dispatches wait for it and get its result),
// and one follower per dispatched job that polls the external run with a
// doubling backoff and reports each new status to the JobReporter, along
// release.JobEdges, ending with at most one terminal report.
//
// Idempotency across a crash is the adapter's part: its start function
// first looks for the external run it may already have started, by a
// correlation key derived from the job id (CorrelationKey). With a Lease,
// each follower renews its job's lease (ports.JobLeaser) until the run
// ends, so that when its process dies the lease runs out and another
// process resumes following (Resume, ports.JobResumer).
//
// Invariants: One start per job id in a process; reports follow `JobEdges`,
// at most one terminal; a follower's watch ends with it; with a `Lease` a
// follower renews its job's lease every third of it until the run ends or a
// renewal is refused as invalid (the job ended elsewhere); `Resume` keeps
// one follower per job in a process and starts following again once it ended
package jobfollow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// CorrelationKey is the name an agent gives the external run of job id
// (in a run's title, an operation's info, a run message), so that a
// dispatch retried after a crash finds the run instead of starting a
// second one. It is fixed-length, so no key is part of another.
func CorrelationKey(jobID string) string {
	sum := sha256.Sum256([]byte(jobID))
	return "reconciler-" + hex.EncodeToString(sum[:10])
}

// State is an external run's state as an adapter reads it.
type State struct {
	Status  release.JobStatus
	Message string
	// Outputs go into the report (the run's URL, its id).
	Outputs map[string]any
}

// Poll reads the external run's state. An error is transient: the
// follower polls again later. A run that is gone is a State with status
// externalRunNotFound.
type Poll func(ctx context.Context) (State, error)

// Started is what an adapter's start function returns.
type Started struct {
	Result ports.JobDispatchResult
	// Poll follows the run; nil (or a terminal Result) follows nothing.
	Poll Poll
	// Watch, when set, runs beside the follower until the follower ends
	// and sends on changed (without blocking: the channel holds one
	// signal) whenever the run may have changed, such as a watch event of
	// the external system, so the follower polls at once instead of after
	// its backoff. The backoff polls go on as the resync.
	Watch func(ctx context.Context, changed chan<- struct{})
}

// Options configures a Tracker.
type Options struct {
	// Adapter names the adapter in logs and errors.
	Adapter  string
	Reporter ports.JobReporter
	Logger   *slog.Logger
	// MinPoll is the first wait before polling, doubled after each
	// unchanged poll up to MaxPoll; defaults 2s and 30s.
	MinPoll, MaxPoll time.Duration
	// ReportAttempts and ReportBackoff retry a failed report; defaults 5
	// and 200ms (doubled).
	ReportAttempts int
	ReportBackoff  time.Duration
	// Lease, when positive, is the lease each follower holds on its job:
	// it renews it every third of it by a report of the job's status with
	// Lease set, until the run ends or the job is found ended (a renewal
	// refused as invalid).
	Lease time.Duration
}

// ErrClosed is returned by Dispatch after Close.
var ErrClosed = errors.New("agent closed")

// Tracker keeps an agent's dispatch results and followers. Create it with
// New, stop it with Close.
type Tracker struct {
	o      Options
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	results map[string]ports.JobDispatchResult
	live    map[string]bool          // the jobs a follower follows now
	locks   map[string]chan struct{} // one dispatch of a job at a time
	wg      sync.WaitGroup
}

// New returns a tracker.
func New(o Options) *Tracker {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MinPoll <= 0 {
		o.MinPoll = 2 * time.Second
	}
	if o.MaxPoll < o.MinPoll {
		o.MaxPoll = max(30*time.Second, o.MinPoll)
	}
	if o.ReportAttempts <= 0 {
		o.ReportAttempts = 5
	}
	if o.ReportBackoff <= 0 {
		o.ReportBackoff = 200 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Tracker{o: o, ctx: ctx, cancel: cancel, results: map[string]ports.JobDispatchResult{}, live: map[string]bool{},
		locks: map[string]chan struct{}{}}
}

// Dispatch runs start once per job id: a job already dispatched by this
// tracker returns its first result; concurrent dispatches of one job wait
// for the first. After a successful start whose status is not terminal, a
// follower polls the run and reports its statuses for d's job.
func (t *Tracker) Dispatch(ctx context.Context, d ports.JobDispatch, start func(ctx context.Context) (Started, error)) (ports.JobDispatchResult, error) {
	return t.start(ctx, d, false, start)
}

// Resume follows d's job again (ports.JobResumer): a job this tracker
// follows now returns its result; otherwise start, which finds the run
// an earlier dispatch started (by d.Job.ExternalID or the correlation
// key), runs and a follower follows it as after Dispatch.
func (t *Tracker) Resume(ctx context.Context, d ports.JobDispatch, start func(ctx context.Context) (Started, error)) (ports.JobDispatchResult, error) {
	return t.start(ctx, d, true, start)
}

// start is Dispatch, and Resume when resume is set.
func (t *Tracker) start(ctx context.Context, d ports.JobDispatch, resume bool, start func(ctx context.Context) (Started, error)) (ports.JobDispatchResult, error) {
	id := d.Job.ID
	if id == "" {
		return ports.JobDispatchResult{}, fmt.Errorf("%s: dispatch: %w", t.o.Adapter, release.Invalid("job.id", "is required"))
	}
	lock, err := t.lock(ctx, id)
	if err != nil {
		return ports.JobDispatchResult{}, fmt.Errorf("%s: dispatch job %s: %w", t.o.Adapter, id, err)
	}
	defer func() { <-lock }()
	t.mu.Lock()
	res, ok := t.results[id]
	live := t.live[id]
	closed := t.closed
	t.mu.Unlock()
	if ok && (!resume || live) {
		return res, nil
	}
	if closed {
		return ports.JobDispatchResult{}, fmt.Errorf("%s: dispatch job %s: %w", t.o.Adapter, id, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return ports.JobDispatchResult{}, fmt.Errorf("%s: dispatch job %s: %w", t.o.Adapter, id, err)
	}
	st, err := start(ctx)
	if err != nil {
		return ports.JobDispatchResult{}, err
	}
	if st.Result.Status == "" {
		st.Result.Status = release.JobInProgress
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.results[id] = st.Result
	if st.Poll != nil && !st.Result.Status.IsTerminal() && !t.closed {
		t.live[id] = true
		t.wg.Add(1)
		go t.follow(id, d.Agent.ID, st.Result, st.Poll, st.Watch)
	}
	return st.Result, nil
}

// lock takes job id's dispatch lock, or fails when ctx ends first.
func (t *Tracker) lock(ctx context.Context, id string) (chan struct{}, error) {
	t.mu.Lock()
	l, ok := t.locks[id]
	if !ok {
		l = make(chan struct{}, 1)
		t.locks[id] = l
	}
	t.mu.Unlock()
	select {
	case l <- struct{}{}:
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// follow polls the run until it ends (or the tracker closes) and reports
// every status it moves to; with a Lease it renews the job's lease every
// third of it meanwhile.
func (t *Tracker) follow(jobID, agentID string, res ports.JobDispatchResult, poll Poll, watch func(context.Context, chan<- struct{})) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.live, jobID)
		t.mu.Unlock()
	}()
	changed := make(chan struct{}, 1)
	if watch != nil {
		ctx, cancel := context.WithCancel(t.ctx)
		done := make(chan struct{})
		go func() { defer close(done); watch(ctx, changed) }()
		defer func() { cancel(); <-done }()
	}
	var renew <-chan time.Time
	if t.o.Lease > 0 {
		tick := time.NewTicker(max(t.o.Lease/3, time.Millisecond))
		defer tick.Stop()
		renew = tick.C
	}
	status := res.Status
	wait := t.o.MinPoll
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-renew:
			err := t.report(ports.JobReport{JobID: jobID, AgentID: agentID, ExternalID: res.ExternalID, Status: status, Lease: t.o.Lease})
			if errors.Is(err, release.ErrInvalid) {
				return // the job ended without this follower: nothing to follow
			}
			continue
		case <-changed:
		case <-timer.C:
		}
		st, err := poll(t.ctx)
		switch {
		case err != nil:
			if t.ctx.Err() != nil {
				return
			}
			t.o.Logger.LogAttrs(t.ctx, slog.LevelWarn, "job.poll_failed", slog.String("adapter", t.o.Adapter),
				slog.String("id", jobID), slog.String("error", err.Error()))
			wait = min(wait*2, t.o.MaxPoll)
		case st.Status == status || !status.CanBecome(st.Status):
			wait = min(wait*2, t.o.MaxPoll)
		default:
			_ = t.report(ports.JobReport{JobID: jobID, AgentID: agentID, ExternalID: res.ExternalID, Status: st.Status,
				Message: st.Message, Outputs: st.Outputs})
			status = st.Status
			if status.IsTerminal() {
				return
			}
			wait = t.o.MinPoll
		}
		timer.Reset(wait)
	}
}

// report delivers r, retrying with a doubling backoff; it logs and drops
// it once the attempts are spent or the tracker is closed, and returns
// the last error.
func (t *Tracker) report(r ports.JobReport) error {
	backoff := t.o.ReportBackoff
	var err error
	for attempt := 1; attempt <= t.o.ReportAttempts; attempt++ {
		if err = t.o.Reporter.ReportJob(t.ctx, r); err == nil {
			return nil
		}
		if errors.Is(err, release.ErrInvalid) {
			break // the job cannot take it (it ended meanwhile): no retry helps
		}
		timer := time.NewTimer(backoff)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			attempt = t.o.ReportAttempts
		case <-timer.C:
		}
		backoff *= 2
	}
	t.o.Logger.LogAttrs(context.Background(), slog.LevelWarn, "job.report_dropped", slog.String("adapter", t.o.Adapter),
		slog.String("id", r.JobID), slog.String("outcome", string(r.Status)), slog.String("error", err.Error()))
	return err
}

// Result returns the dispatch result of job id, if this tracker has one.
func (t *Tracker) Result(id string) (ports.JobDispatchResult, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.results[id]
	return r, ok
}

// Close stops the followers and waits for them; Dispatch refuses new jobs
// afterwards. It is idempotent.
func (t *Tracker) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}
