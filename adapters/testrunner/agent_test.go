package testrunner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestJobAgentConformance(t *testing.T) {
	t.Parallel()
	newAgent := func(t *testing.T, r ports.JobReporter) ports.JobAgent {
		a := New(r, ports.SystemClock)
		t.Cleanup(a.Close)
		return a
	}
	t.Run("ZeroDelay", func(t *testing.T) {
		t.Parallel()
		porttest.JobAgent(t, newAgent, porttest.JobAgentOptions{Config: map[string]any{"delay": "0s"}})
	})
	t.Run("SmallDelayFailure", func(t *testing.T) {
		t.Parallel()
		porttest.JobAgent(t, newAgent, porttest.JobAgentOptions{Config: map[string]any{"delay": "5ms", "outcome": "failure"}})
	})
}

// epoch is the fake clock's start.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is an agent on a fake clock whose reports go to a channel.
type fixture struct {
	agent   *Agent
	clock   *porttest.FakeClock
	reports chan ports.JobReport
}

// setup returns an agent whose reporter sends every report to a buffered
// channel; the agent is closed when the test ends.
func setup(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	t.Parallel()
	f := &fixture{clock: porttest.NewFakeClock(epoch), reports: make(chan ports.JobReport, 16)}
	f.agent = New(ports.JobReporterFunc(func(_ context.Context, r ports.JobReport) error {
		f.reports <- r
		return nil
	}), f.clock, opts...)
	t.Cleanup(f.agent.Close)
	return f
}

// dispatch dispatches job id with config cfg and requires success.
func (f *fixture) dispatch(t *testing.T, id string, cfg map[string]any) ports.JobDispatchResult {
	t.Helper()
	res, err := f.agent.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, id, cfg))
	require.NoError(t, err)
	return res
}

// next waits for the next report.
func (f *fixture) next(t *testing.T) ports.JobReport {
	t.Helper()
	select {
	case r := <-f.reports:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no report within 10s")
		return ports.JobReport{}
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   map[string]any
		field string
	}{
		{"delay not a duration", map[string]any{"delay": "soon"}, "job_agent_config.delay"},
		{"delay a number", map[string]any{"delay": float64(2)}, "job_agent_config.delay"},
		{"delay negative", map[string]any{"delay": "-1s"}, "job_agent_config.delay"},
		{"outcome unknown", map[string]any{"outcome": "great"}, "job_agent_config.outcome"},
		{"outcome active", map[string]any{"outcome": "inProgress"}, "job_agent_config.outcome"},
		{"outcome unreachable from inProgress", map[string]any{"outcome": "skipped"}, "job_agent_config.outcome"},
		{"outcome not a string", map[string]any{"outcome": true}, "job_agent_config.outcome"},
		{"message not a string", map[string]any{"message": float64(1)}, "job_agent_config.message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			_, err := f.agent.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", tt.cfg))
			require.ErrorIs(t, err, release.ErrInvalid)
			var fe *release.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.field, fe.Field)
			require.ErrorContains(t, err, "job job-1")
			require.Zero(t, f.agent.pending(), "a refused job schedules nothing")

			res := f.dispatch(t, "job-1", map[string]any{"delay": "0s"})
			require.Equal(t, release.JobInProgress, res.Status, "a refused dispatch leaves the job dispatchable")
		})
	}
}

func TestParseConfigDefaults(t *testing.T) {
	t.Parallel()
	c, err := parseConfig(nil)
	require.NoError(t, err)
	require.Equal(t, jobConfig{delay: time.Second, outcome: release.JobSuccessful}, c)
	require.ElementsMatch(t, []release.JobStatus{release.JobSuccessful, release.JobFailure, release.JobCancelled, release.JobExternalRunNotFound}, outcomes())
}

func TestOutcomeHonoured(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg     map[string]any
		status  release.JobStatus
		message string
	}{
		{map[string]any{"delay": "0s"}, release.JobSuccessful, ""},
		{map[string]any{"delay": "1ms", "outcome": "successful", "message": "all green"}, release.JobSuccessful, "all green"},
		{map[string]any{"delay": "0s", "outcome": "failure", "message": "boom"}, release.JobFailure, "boom"},
		{map[string]any{"delay": "0s", "outcome": "cancelled"}, release.JobCancelled, ""},
		{map[string]any{"delay": "0s", "outcome": "externalRunNotFound"}, release.JobExternalRunNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.status)+"/"+tt.message, func(t *testing.T) {
			f := setup(t)
			now := f.clock.Advance(time.Minute)
			res := f.dispatch(t, "job-1", tt.cfg)
			require.Equal(t, ports.JobDispatchResult{
				ExternalID: "test-runner/job-1",
				Status:     release.JobInProgress,
				Message:    res.Message,
			}, res)
			require.Contains(t, res.Message, string(tt.status))
			require.Equal(t, ports.JobReport{
				JobID:      "job-1",
				AgentID:    "agent-1",
				ExternalID: "test-runner/job-1",
				Status:     tt.status,
				Message:    tt.message,
				At:         now,
			}, f.next(t))
		})
	}
}

func TestDispatchRequiresJobID(t *testing.T) {
	f := setup(t)
	_, err := f.agent.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "", nil))
	var fe *release.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "job.id", fe.Field)
}

func TestCancelledContextSchedulesNothing(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := f.agent.Dispatch(ctx, porttest.JobAgentDispatch(Type, "job-1", nil))
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, f.agent.pending())
}

func TestCloseStopsPendingReports(t *testing.T) {
	f := setup(t)
	f.dispatch(t, "slow", map[string]any{"delay": "1h"})
	f.dispatch(t, "fast", map[string]any{"delay": "0s"})
	require.Equal(t, "fast", f.next(t).JobID)
	require.Equal(t, 1, f.agent.pending())

	f.agent.Close()
	require.Zero(t, f.agent.pending(), "Close stops the pending timer")
	select {
	case r := <-f.reports:
		t.Fatalf("report after Close: %+v", r)
	default:
	}
	_, err := f.agent.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "new", nil))
	require.ErrorIs(t, err, ErrClosed)
	res := f.dispatch(t, "slow", nil)
	require.Equal(t, "test-runner/slow", res.ExternalID, "an accepted job keeps its first result")
	f.agent.Close() // idempotent
}

func TestCloseCancelsReportInFlight(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	var got error
	a := New(ports.JobReporterFunc(func(ctx context.Context, _ ports.JobReport) error {
		close(entered)
		<-ctx.Done()
		got = ctx.Err()
		return got
	}), ports.SystemClock, WithLogger(slog.New(slog.DiscardHandler)))
	_, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", map[string]any{"delay": "0s"}))
	require.NoError(t, err)
	<-entered
	a.Close() // returns only once the report returned
	require.ErrorIs(t, got, context.Canceled)
}

func TestReportRetriedThenDropped(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	calls := make(chan ports.JobReport, 8)
	a := New(ports.JobReporterFunc(func(_ context.Context, r ports.JobReport) error {
		calls <- r
		return errors.New("store down")
	}), ports.SystemClock, WithLogger(logger), WithReportRetry(3, time.Millisecond))
	_, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", map[string]any{"delay": "0s"}))
	require.NoError(t, err)
	for range 3 {
		select {
		case r := <-calls:
			require.Equal(t, "job-1", r.JobID)
		case <-time.After(10 * time.Second):
			t.Fatal("report not retried")
		}
	}
	// The drop is logged by the report goroutine, which Close waits for.
	a.Close()
	require.Empty(t, calls, "no fourth attempt")
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, buf.String(), "id=job-1")
	require.Contains(t, buf.String(), "attempts=3")
	require.Contains(t, buf.String(), "store down")
}

func TestReportRetrySucceeds(t *testing.T) {
	t.Parallel()
	n := 0
	delivered := make(chan ports.JobReport, 1)
	a := New(ports.JobReporterFunc(func(_ context.Context, r ports.JobReport) error {
		n++ // reports of one job run on one goroutine
		if n < 3 {
			return errors.New("conflict")
		}
		delivered <- r
		return nil
	}), ports.SystemClock, WithReportRetry(5, time.Millisecond))
	t.Cleanup(a.Close)
	_, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", map[string]any{"delay": "0s", "outcome": "failure"}))
	require.NoError(t, err)
	select {
	case r := <-delivered:
		require.Equal(t, release.JobFailure, r.Status)
	case <-time.After(10 * time.Second):
		t.Fatal("report never delivered")
	}
	a.Close()
	require.Equal(t, 3, n)
}

// lockedWriter serialises writes to a buffer the test also reads.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestCancelJob: a pending job is reported cancelled at once, with the
// reason; cancelling it again, a reported job or an unknown one does
// nothing.
func TestCancelJob(t *testing.T) {
	f := setup(t)
	f.dispatch(t, "slow", map[string]any{"delay": "1h"})
	f.dispatch(t, "fast", map[string]any{"delay": "0s"})
	require.Equal(t, "fast", f.next(t).JobID)

	agent := release.JobAgent{ID: "agent-1", Type: Type}
	require.NoError(t, f.agent.CancelJob(t.Context(), ports.JobCancel{JobID: "slow", Agent: agent, Reason: "workflow cancelled"}))
	r := f.next(t)
	require.Equal(t, "slow", r.JobID)
	require.Equal(t, release.JobCancelled, r.Status)
	require.Equal(t, "cancelled: workflow cancelled", r.Message)
	require.Equal(t, "test-runner/slow", r.ExternalID)
	require.Zero(t, f.agent.pending())

	for _, id := range []string{"slow", "fast", "ghost"} {
		require.NoError(t, f.agent.CancelJob(t.Context(), ports.JobCancel{JobID: id, Agent: agent}))
	}
	f.agent.Close() // waits for any report in flight
	select {
	case r := <-f.reports:
		t.Fatalf("report after a repeated cancel: %+v", r)
	default:
	}
}

// TestLeaseRenewedUntilReported: with a lease, a pending job's lease is
// renewed by inProgress reports carrying it until the outcome is
// reported, and never after.
func TestLeaseRenewedUntilReported(t *testing.T) {
	f := setup(t, WithLease(30*time.Millisecond))
	require.Equal(t, 30*time.Millisecond, f.agent.JobLease())
	f.dispatch(t, "j1", map[string]any{"delay": "200ms"})
	renewals := 0
	for {
		r := f.next(t)
		require.Equal(t, "j1", r.JobID)
		if r.Status.IsTerminal() {
			require.Equal(t, release.JobSuccessful, r.Status)
			break
		}
		require.Equal(t, release.JobInProgress, r.Status)
		require.Equal(t, 30*time.Millisecond, r.Lease)
		require.Equal(t, Type+"/j1", r.ExternalID)
		renewals++
	}
	require.GreaterOrEqual(t, renewals, 2, "renewed every 10ms for 200ms")
	require.Eventually(t, func() bool {
		f.agent.mu.Lock()
		defer f.agent.mu.Unlock()
		return len(f.agent.leased) == 0
	}, time.Second, 5*time.Millisecond, "nothing left to renew")
}

// TestNoLeaseByDefault: without WithLease the agent holds no lease and
// sends no renewals.
func TestNoLeaseByDefault(t *testing.T) {
	f := setup(t)
	require.Zero(t, f.agent.JobLease())
	f.dispatch(t, "j1", map[string]any{"delay": "30ms"})
	r := f.next(t)
	require.Equal(t, release.JobSuccessful, r.Status, "the outcome is the only report")
}

// TestJobLeaserConformance runs the JobLeaser suite against the test
// runner with a 300 ms lease (renewed every 100 ms).
func TestJobLeaserConformance(t *testing.T) {
	t.Parallel()
	porttest.JobLeaser(t, func(t *testing.T, r ports.JobReporter) porttest.LeasingAgent {
		a := New(r, ports.SystemClock, WithLease(300*time.Millisecond))
		t.Cleanup(a.Close)
		return a
	}, porttest.JobLeaserOptions{Dispatch: func(_ *testing.T, id string, long bool) ports.JobDispatch {
		delay := "50ms"
		if long {
			delay = "1h"
		}
		return porttest.JobAgentDispatch(Type, id, map[string]any{"delay": delay})
	}})
}

// TestLeaseRenewedWhileReportIsSlow: while the outcome's report has not
// been delivered (a slow store), the job's lease keeps being renewed, so a
// job that succeeded is never ended as lost for want of renewals; once it
// is delivered the renewals stop.
func TestLeaseRenewedWhileReportIsSlow(t *testing.T) {
	t.Parallel()
	renewals := make(chan ports.JobReport, 64)
	inReport, release := make(chan struct{}), make(chan struct{})
	a := New(ports.JobReporterFunc(func(ctx context.Context, r ports.JobReport) error {
		if !r.Status.IsTerminal() {
			require.Equal(t, ports.LaneRenewal, ports.LaneOf(ctx), "renewals use their own lane")
			renewals <- r
			return nil
		}
		close(inReport)
		<-release
		return nil
	}), ports.SystemClock, WithLease(30*time.Millisecond), WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(a.Close)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // before Close, which waits for the report
	_, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", map[string]any{"delay": "0s"}))
	require.NoError(t, err)
	<-inReport
	for len(renewals) > 0 { // those sent before the report began
		<-renewals
	}
	for range 2 {
		select {
		case r := <-renewals:
			require.Equal(t, "job-1", r.JobID)
		case <-time.After(10 * time.Second):
			t.Fatal("the lease is not renewed while the report is in flight")
		}
	}
	unblock()
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.leased) == 0
	}, 10*time.Second, 5*time.Millisecond, "renewals end once the report is delivered")
}
