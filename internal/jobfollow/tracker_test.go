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
