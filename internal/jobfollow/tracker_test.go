package jobfollow

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

type recorder struct {
	mu   sync.Mutex
	all  []ports.JobReport
	fail int // reports to refuse first
	done chan struct{}
}

func (r *recorder) ReportJob(_ context.Context, rep ports.JobReport) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errors.New("store unavailable")
	}
	r.all = append(r.all, rep)
	if rep.Status.IsTerminal() {
		close(r.done)
	}
	return nil
}

func newTracker(r ports.JobReporter) *Tracker {
	return New(Options{Adapter: "test", Reporter: r, MinPoll: time.Millisecond, MaxPoll: 4 * time.Millisecond, ReportBackoff: time.Millisecond})
}

func TestFollowerReportsEachNewStatusAlongTheEdgesThenStops(t *testing.T) {
	t.Parallel()
	rec := &recorder{fail: 2, done: make(chan struct{})}
	tr := newTracker(rec)
	defer tr.Close()
	states := []State{{Status: release.JobInProgress}, {}, {Status: release.JobActionRequired}, {Status: release.JobActionRequired},
		{Status: release.JobSkipped /* not an edge from actionRequired: ignored */}, {Status: release.JobSuccessful, Message: "done"}}
	var polls atomic.Int32
	res, err := tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-1", nil), func(context.Context) (Started, error) {
		return Started{Result: ports.JobDispatchResult{ExternalID: "x-1"}, Poll: func(context.Context) (State, error) {
			i := int(polls.Add(1)) - 1
			if i == 1 {
				return State{}, errors.New("transient")
			}
			return states[min(i, len(states)-1)], nil
		}}, nil
	})
	require.NoError(t, err)
	require.Equal(t, release.JobInProgress, res.Status, "an empty status is inProgress")
	select {
	case <-rec.done:
	case <-time.After(10 * time.Second):
		t.Fatal("no terminal report")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.all, 2, "reports: %+v", rec.all)
	require.Equal(t, ports.JobReport{JobID: "job-1", AgentID: "agent-1", ExternalID: "x-1", Status: release.JobActionRequired}, rec.all[0])
	require.Equal(t, release.JobSuccessful, rec.all[1].Status)
	tr.Close() // waits for the follower
	require.EqualValues(t, len(states), polls.Load(), "the follower stopped at the terminal state")
}

func TestDispatchStartsOncePerJobAndWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	tr := newTracker(ports.JobReporterFunc(func(context.Context, ports.JobReport) error { return nil }))
	defer tr.Close()
	var starts atomic.Int32
	gate := make(chan struct{})
	start := func(context.Context) (Started, error) {
		starts.Add(1)
		<-gate
		return Started{Result: ports.JobDispatchResult{ExternalID: "x", Status: release.JobSuccessful}}, nil
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			res, err := tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-1", nil), start)
			if err != nil || res.ExternalID != "x" {
				t.Errorf("dispatch: %+v %v", res, err)
			}
		})
	}
	close(gate)
	wg.Wait()
	require.EqualValues(t, 1, starts.Load())

	// A failed start is not remembered: the retry starts again.
	fails := func(context.Context) (Started, error) { return Started{}, errors.New("boom") }
	_, err := tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-2", nil), fails)
	require.Error(t, err)
	_, err = tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-2", nil), start)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = tr.Dispatch(ctx, porttest.JobAgentDispatch("test", "job-3", nil), start)
	require.ErrorIs(t, err, context.Canceled)
	tr.Close()
	_, err = tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-4", nil), start)
	require.ErrorIs(t, err, ErrClosed)
	res, err := tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-1", nil), start)
	require.NoError(t, err, "a job dispatched before Close keeps its result")
	require.Equal(t, "x", res.ExternalID)
}

func TestCorrelationKey(t *testing.T) {
	t.Parallel()
	a, b := CorrelationKey("wf/x/deploy.1/1"), CorrelationKey("wf/x/deploy.1/10")
	require.NotEqual(t, a, b)
	require.Len(t, a, len("reconciler-")+20)
	require.Equal(t, a, CorrelationKey("wf/x/deploy.1/1"), "stable across processes")
}

func TestWatchWakesTheFollowerAndEndsWithIt(t *testing.T) {
	t.Parallel()
	rec := &recorder{done: make(chan struct{})}
	tr := New(Options{Adapter: "test", Reporter: rec, MinPoll: time.Hour, MaxPoll: time.Hour})
	defer tr.Close()
	var ended atomic.Bool
	var state atomic.Value
	state.Store(State{Status: release.JobInProgress})
	wake := make(chan struct{})
	_, err := tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-1", nil), func(context.Context) (Started, error) {
		return Started{Result: ports.JobDispatchResult{ExternalID: "x-1"},
			Poll: func(context.Context) (State, error) { return state.Load().(State), nil },
			Watch: func(ctx context.Context, changed chan<- struct{}) {
				defer ended.Store(true)
				for {
					select {
					case <-ctx.Done():
						return
					case <-wake:
						changed <- struct{}{}
					}
				}
			}}, nil
	})
	require.NoError(t, err)
	state.Store(State{Status: release.JobSuccessful})
	wake <- struct{}{}
	select {
	case <-rec.done: // an hour's backoff did not stand in the way: the watch woke the follower
	case <-time.After(10 * time.Second):
		t.Fatal("the watch signal did not wake the follower")
	}
	tr.Close()
	require.True(t, ended.Load(), "the watch ends with its follower")
}

// leaseRecorder records reports and hands each to the test; renewals of
// the jobs in refuse are refused as invalid (the job ended elsewhere).
type leaseRecorder struct {
	mu     sync.Mutex
	all    []ports.JobReport
	refuse map[string]bool
	ch     chan ports.JobReport
}

func newLeaseRecorder(refuse ...string) *leaseRecorder {
	r := &leaseRecorder{refuse: map[string]bool{}, ch: make(chan ports.JobReport, 1024)}
	for _, id := range refuse {
		r.refuse[id] = true
	}
	return r
}

func (r *leaseRecorder) ReportJob(_ context.Context, rep ports.JobReport) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rep)
	r.ch <- rep
	if rep.Lease > 0 && r.refuse[rep.JobID] {
		return release.Invalid("status", "job "+rep.JobID+" cannot move from successful to inProgress")
	}
	return nil
}

// of returns the reports of job id.
func (r *leaseRecorder) of(id string) []ports.JobReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ports.JobReport
	for _, rep := range r.all {
		if rep.JobID == id {
			out = append(out, rep)
		}
	}
	return out
}

// await waits for n more reports of job id with a lease.
func (r *leaseRecorder) await(t *testing.T, id string, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for n > 0 {
		select {
		case rep := <-r.ch:
			if rep.JobID == id && rep.Lease > 0 {
				n--
			}
		case <-deadline:
			t.Fatalf("timed out waiting for renewals of %s: %+v", id, r.of(id))
		}
	}
}

// run is an external run the test ends by hand; its follower polls only
// when the watch says it changed.
type run struct {
	mu      sync.Mutex
	state   State
	changed chan struct{}
	polls   atomic.Int32
}

func newRun() *run {
	return &run{state: State{Status: release.JobInProgress}, changed: make(chan struct{}, 1)}
}

func (r *run) end(s release.JobStatus) {
	r.mu.Lock()
	r.state = State{Status: s}
	r.mu.Unlock()
	r.changed <- struct{}{}
}

func (r *run) started(ext string) func(context.Context) (Started, error) {
	return func(context.Context) (Started, error) {
		return Started{Result: ports.JobDispatchResult{ExternalID: ext},
			Poll: func(context.Context) (State, error) {
				r.polls.Add(1)
				r.mu.Lock()
				defer r.mu.Unlock()
				return r.state, nil
			},
			Watch: func(ctx context.Context, changed chan<- struct{}) {
				for {
					select {
					case <-ctx.Done():
						return
					case <-r.changed:
						changed <- struct{}{}
					}
				}
			}}, nil
	}
}

func newLeasingTracker(r ports.JobReporter, lease time.Duration) *Tracker {
	return New(Options{Adapter: "test", Reporter: r, MinPoll: time.Hour, MaxPoll: time.Hour, ReportBackoff: time.Millisecond, Lease: lease})
}

// TestFollowerRenewsItsLeaseUntilTheRunEnds: with a Lease, a follower
// renews its job's lease (its status, the lease, its external id) while
// the run goes on, and stops with the outcome, while another job's
// renewals go on.
func TestFollowerRenewsItsLeaseUntilTheRunEnds(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Millisecond
	rec := newLeaseRecorder()
	tr := newLeasingTracker(rec, lease)
	defer tr.Close()
	short, long := newRun(), newRun()
	_, err := tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-short", nil), short.started("x-short"))
	require.NoError(t, err)
	_, err = tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-long", nil), long.started("x-long"))
	require.NoError(t, err)
	rec.await(t, "job-short", 3)
	for _, r := range rec.of("job-short") {
		require.Equal(t, ports.JobReport{JobID: "job-short", AgentID: "agent-1", ExternalID: "x-short", Status: release.JobInProgress, Lease: lease}, r)
	}
	short.end(release.JobSuccessful)
	var ended int
	require.Eventually(t, func() bool {
		for i, r := range rec.of("job-short") {
			if r.Status.IsTerminal() {
				ended = i
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond)
	rec.await(t, "job-long", 3)
	reps := rec.of("job-short")
	require.Len(t, reps, ended+1, "nothing after the outcome: %+v", reps[ended:])
	require.Equal(t, release.JobSuccessful, reps[ended].Status)
	require.Zero(t, reps[ended].Lease)
}

// TestRenewalRefusedAsInvalidEndsTheFollower: a job that ended without
// its follower (a cancel, a timeout) refuses the renewal; the follower
// stops renewing and polling.
func TestRenewalRefusedAsInvalidEndsTheFollower(t *testing.T) {
	t.Parallel()
	rec := newLeaseRecorder("job-gone")
	tr := newLeasingTracker(rec, 30*time.Millisecond)
	defer tr.Close()
	gone, other := newRun(), newRun()
	_, err := tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-gone", nil), gone.started("x-gone"))
	require.NoError(t, err)
	_, err = tr.Dispatch(t.Context(), porttest.JobAgentDispatch("test", "job-other", nil), other.started("x-other"))
	require.NoError(t, err)
	rec.await(t, "job-gone", 1)
	rec.await(t, "job-other", 3)
	require.Len(t, rec.of("job-gone"), 1, "one refused renewal, then nothing")
	tr.mu.Lock()
	require.False(t, tr.live["job-gone"])
	require.True(t, tr.live["job-other"])
	tr.mu.Unlock()
}

// TestResumeKeepsOneFollowerPerJob: resuming a job this tracker follows
// starts nothing; once its follower ended (its outcome not recorded, so
// the lease ran out), a resume starts following again.
func TestResumeKeepsOneFollowerPerJob(t *testing.T) {
	t.Parallel()
	rec := newLeaseRecorder()
	tr := newLeasingTracker(rec, time.Hour)
	defer tr.Close()
	r := newRun()
	d := porttest.JobAgentDispatch("test", "job-1", nil)
	first, err := tr.Dispatch(t.Context(), d, r.started("x-1"))
	require.NoError(t, err)
	var starts atomic.Int32
	resumeStart := func(ctx context.Context) (Started, error) {
		starts.Add(1)
		return r.started("x-1")(ctx)
	}
	got, err := tr.Resume(t.Context(), d, resumeStart)
	require.NoError(t, err)
	require.Equal(t, first, got)
	require.Zero(t, starts.Load(), "a followed job keeps its one follower")

	r.end(release.JobSuccessful)
	require.Eventually(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return !tr.live["job-1"]
	}, 10*time.Second, time.Millisecond)
	again, err := tr.Dispatch(t.Context(), d, resumeStart)
	require.NoError(t, err)
	require.Equal(t, first, again, "a dispatch still answers the first result")
	require.Zero(t, starts.Load())
	_, err = tr.Resume(t.Context(), d, resumeStart)
	require.NoError(t, err)
	require.Equal(t, int32(1), starts.Load(), "a resume of a job no follower follows starts following")
	r.changed <- struct{}{}
	require.Eventually(t, func() bool { return len(rec.of("job-1")) == 2 }, 10*time.Second, time.Millisecond, "the outcome reported again")
}
