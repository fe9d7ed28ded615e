package porttest

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// JobAgentOptions tells the JobAgent suite how to drive one implementation.
// The zero value suits an agent that accepts a job with an empty config
// and reports its outcome on its own.
type JobAgentOptions struct {
	// Config is merged into the JobAgentConfig of every job the suite
	// dispatches, e.g. {"delay": "0s"} for the test runner.
	Config map[string]any
	// Dispatch, when set, builds the dispatch of a new job with the given
	// id instead of JobAgentDispatch; the job must have that id.
	Dispatch func(t *testing.T, jobID string) ports.JobDispatch
	// Passive marks an agent that reports nothing by itself (a pull-based
	// agent waiting to be polled): the suite then checks dispatches only.
	Passive bool
	// Timeout bounds every wait for a report and for a cancelled dispatch
	// to return; default 10s. It is a deadline for failing, not a sleep.
	Timeout time.Duration
	// Durable marks an agent whose runs live in an external system that
	// outlives it: the suite then dispatches a job, closes that agent (when
	// it has a Close method) as a crash would end it, and dispatches the
	// job again through a second agent from newAgent, which must find the
	// run the first one started (the same external id) instead of starting
	// another. A Durable agent is a ports.JobResumer too: the suite
	// dispatches a job, closes that agent, and has a new agent resume the
	// job (with the external id the dispatch answered, and without one, as
	// when a process died before recording it): the new agent must find
	// the same run and report its outcome, once. (A Durable agent that
	// follows nothing, the webhook push, is no JobResumer: those cases
	// skip.)
	Durable bool
	// RunsOf, when set, counts the external runs the system behind the
	// agent started for job id: the suite requires exactly one after a
	// crash-retried dispatch and after resumes.
	RunsOf func(t *testing.T, jobID string) int
}

// JobAgent is the conformance suite of ports.JobAgent. newAgent is called
// once per subtest with a fresh recording reporter and must return an
// agent that reports only through it; subtests run in parallel. newAgent
// should register the agent's shutdown with t.Cleanup: the suite checks
// the recorded reports after that cleanup ran, so reports a shutdown
// waits for are checked too.
//
// It checks that Type is set; that Dispatch returns a status a pending job
// may reach; that Dispatch is idempotent by job id, sequentially and from
// concurrent goroutines (one result, at most one terminal report); that
// reports name the dispatched job (by JobID, or by AgentID and the result's
// ExternalID), carry valid statuses, and move the job only along
// release.JobEdges from the dispatch status; that distinct jobs are not
// confused; that a dispatch with a cancelled context returns promptly
// and leaves the job dispatchable; and, for a Durable agent, that a
// dispatch retried through a new agent after a crash finds the run the
// first one started, and that a new agent resumes a job an earlier one
// dispatched (ports.JobResumer): it finds the same run, starts none
// (RunsOf), and reports the outcome once.
func JobAgent(t *testing.T, newAgent func(t *testing.T, r ports.JobReporter) ports.JobAgent, opts JobAgentOptions) {
	t.Helper()
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	setup := func(t *testing.T) *jobAgentFixture {
		t.Helper()
		t.Parallel()
		f := &jobAgentFixture{t: t, ctx: t.Context(), opts: opts, rep: newRecordingReporter(), dispatched: map[string]jobDispatched{}}
		// Registered before newAgent's cleanups, so it runs after them.
		t.Cleanup(f.checkReports)
		f.agent = newAgent(t, f.rep)
		require.NotNil(t, f.agent, "newAgent returned nil")
		return f
	}
	t.Run("TypeIsSet", func(t *testing.T) { jobAgentType(setup(t)) })
	t.Run("DispatchStatus", func(t *testing.T) { jobAgentDispatchStatus(setup(t)) })
	t.Run("DispatchIdempotent", func(t *testing.T) { jobAgentIdempotent(setup(t)) })
	t.Run("DispatchIdempotentConcurrent", func(t *testing.T) { jobAgentIdempotentConcurrent(setup(t)) })
	t.Run("ReportsDispatchedJob", func(t *testing.T) { jobAgentReports(setup(t)) })
	t.Run("DistinctJobs", func(t *testing.T) { jobAgentDistinct(setup(t)) })
	t.Run("CancelledContextReturnsPromptly", func(t *testing.T) { jobAgentCancelled(setup(t)) })
	if opts.Durable {
		t.Run("DispatchRetriedAfterACrash", func(t *testing.T) { jobAgentCrashRetry(setup(t), newAgent) })
		t.Run("ResumedByANewAgent", func(t *testing.T) { jobAgentResume(setup(t), newAgent, true) })
		t.Run("ResumedByKeyByANewAgent", func(t *testing.T) { jobAgentResume(setup(t), newAgent, false) })
	}
}

// JobAgentDispatch is the suite's default dispatch: a valid job with id
// jobID and the given JobAgentConfig, routed to an agent record of type
// agentType, with a matching release, version, deployment, environment
// and resource.
func JobAgentDispatch(agentType, jobID string, config map[string]any) ports.JobDispatch {
	target := release.ReleaseTarget{DeploymentID: "dep-1", EnvironmentID: "env-1", ResourceID: "res-1"}
	return ports.JobDispatch{
		Job: release.Job{
			ID:             jobID,
			ReleaseID:      "rel-1",
			TargetKey:      target.Key(),
			JobAgentID:     "agent-1",
			JobAgentConfig: maps.Clone(config),
			Status:         release.JobPending,
			CreatedAt:      queueEpoch,
		},
		Agent:       release.JobAgent{ID: "agent-1", Name: "conformance", Type: agentType},
		Release:     release.Release{ID: "rel-1", Target: target, VersionID: "ver-1"},
		Version:     release.DeploymentVersion{ID: "ver-1", DeploymentID: target.DeploymentID, Tag: "v1.0.0"},
		Deployment:  release.Deployment{ID: target.DeploymentID, SystemID: "sys-1", Name: "dep", Slug: "dep", JobAgentID: "agent-1"},
		Environment: release.Environment{ID: target.EnvironmentID, SystemID: "sys-1", Name: "env"},
		Resource:    release.Resource{ID: target.ResourceID, WorkspaceID: "ws-1", Kind: "Test", Identifier: "res-1", Name: "res"},
	}
}

// jobDispatched is what a successful dispatch of a job returned.
type jobDispatched struct {
	agentID string
	result  ports.JobDispatchResult
}

// jobAgentFixture is one subtest's agent, reporter and dispatch results.
type jobAgentFixture struct {
	t     *testing.T
	ctx   context.Context
	opts  JobAgentOptions
	rep   *recordingReporter
	agent ports.JobAgent

	mu         sync.Mutex
	dispatched map[string]jobDispatched // by job id
}

// dispatchOf builds the dispatch of job id.
func (f *jobAgentFixture) dispatchOf(id string) ports.JobDispatch {
	f.t.Helper()
	if f.opts.Dispatch != nil {
		d := f.opts.Dispatch(f.t, id)
		require.Equal(f.t, id, d.Job.ID, "opts.Dispatch must build a job with the id it was given")
		return d
	}
	return JobAgentDispatch(f.agent.Type(), id, f.opts.Config)
}

// dispatch dispatches job id and requires success. It is safe from any
// goroutine: it reports failures with Errorf, not FailNow.
func (f *jobAgentFixture) dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, bool) {
	res, err := f.agent.Dispatch(ctx, d)
	if err != nil {
		f.t.Errorf("Dispatch(job %s): %v", d.Job.ID, err)
		return res, false
	}
	f.remember(d, res)
	return res, true
}

// remember records a successful dispatch result, requiring it to equal an
// earlier one of the same job.
func (f *jobAgentFixture) remember(d ports.JobDispatch, res ports.JobDispatchResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if prev, ok := f.dispatched[d.Job.ID]; ok {
		if prev.result != res {
			f.t.Errorf("job %s dispatched twice with different results: %+v then %+v", d.Job.ID, prev.result, res)
		}
		return
	}
	f.dispatched[d.Job.ID] = jobDispatched{agentID: d.Agent.ID, result: res}
}

// reportsOf returns the recorded reports that name job id.
func (f *jobAgentFixture) reportsOf(all []ports.JobReport, id string) []ports.JobReport {
	f.mu.Lock()
	disp, ok := f.dispatched[id]
	f.mu.Unlock()
	var out []ports.JobReport
	for _, r := range all {
		if r.JobID == id || (ok && r.JobID == "" && disp.result.ExternalID != "" &&
			r.AgentID == disp.agentID && r.ExternalID == disp.result.ExternalID) {
			out = append(out, r)
		}
	}
	return out
}

// awaitOutcome waits until job id has a terminal report, unless the agent
// is passive. It fails the test at the deadline.
func (f *jobAgentFixture) awaitOutcome(id string) {
	f.t.Helper()
	if f.opts.Passive {
		return
	}
	ok := f.rep.await(f.ctx, f.opts.Timeout, func(all []ports.JobReport) bool {
		for _, r := range f.reportsOf(all, id) {
			if r.Status.IsTerminal() {
				return true
			}
		}
		return false
	})
	require.True(f.t, ok, "no terminal report for job %s within %s; reports: %+v", id, f.opts.Timeout, f.rep.all())
}

// checkReports runs after the agent's cleanups: every report names a
// dispatched job, and each job's reports follow JobEdges from its dispatch
// status, with at most one terminal report.
func (f *jobAgentFixture) checkReports() {
	t := f.t
	all := f.rep.stop()
	f.mu.Lock()
	ids := make([]string, 0, len(f.dispatched))
	for id := range f.dispatched {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	claimed := make([]bool, len(all))
	for _, id := range ids {
		f.mu.Lock()
		status := f.dispatched[id].result.Status
		f.mu.Unlock()
		terminal := 0
		for _, r := range f.reportsOf(all, id) {
			for i := range all {
				if reflect.DeepEqual(all[i], r) {
					claimed[i] = true
				}
			}
			if !r.Status.Valid() {
				t.Errorf("job %s: report with unknown status %q", id, r.Status)
				continue
			}
			if r.Status.IsTerminal() {
				terminal++
			}
			if r.Status != status && !status.CanBecome(r.Status) {
				t.Errorf("job %s: report moves it %s -> %s, not an edge of release.JobEdges", id, status, r.Status)
				continue
			}
			status = r.Status
		}
		if terminal > 1 {
			t.Errorf("job %s: %d terminal reports, want at most one", id, terminal)
		}
	}
	for i, r := range all {
		if !claimed[i] {
			t.Errorf("report names no dispatched job (by JobID, or AgentID and ExternalID): %+v", r)
		}
	}
}

func jobAgentType(f *jobAgentFixture) {
	require.NotEmpty(f.t, strings.TrimSpace(f.agent.Type()), "Type must name the release.JobAgent.Type served")
}

func jobAgentDispatchStatus(f *jobAgentFixture) {
	res, ok := f.dispatch(f.ctx, f.dispatchOf("job-status"))
	require.True(f.t, ok)
	require.True(f.t, res.Status.Valid(), "dispatch status %q is not a job status", res.Status)
	require.True(f.t, res.Status == release.JobPending || release.JobPending.CanBecome(res.Status),
		"dispatch status %q is not reachable from pending", res.Status)
	f.awaitOutcome("job-status")
}

func jobAgentIdempotent(f *jobAgentFixture) {
	d := f.dispatchOf("job-twice")
	first, ok := f.dispatch(f.ctx, d)
	require.True(f.t, ok)
	second, ok := f.dispatch(f.ctx, f.dispatchOf("job-twice"))
	require.True(f.t, ok)
	require.Equal(f.t, first, second, "a second dispatch returns the first result")
	f.awaitOutcome("job-twice")
	third, ok := f.dispatch(f.ctx, d)
	require.True(f.t, ok)
	require.Equal(f.t, first, third, "a dispatch after the outcome still returns the first result")
	// At most one terminal report: checked after the agent's cleanup.
}

func jobAgentIdempotentConcurrent(f *jobAgentFixture) {
	const n = 8
	ds := make([]ports.JobDispatch, n)
	for i := range ds {
		ds[i] = f.dispatchOf("job-race")
	}
	results := make([]ports.JobDispatchResult, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], _ = f.dispatch(f.ctx, ds[i])
		})
	}
	close(start)
	wg.Wait()
	for i := 1; i < n; i++ {
		require.Equal(f.t, results[0], results[i], "concurrent dispatches of one job return one result")
	}
	f.awaitOutcome("job-race")
}

func jobAgentReports(f *jobAgentFixture) {
	if f.opts.Passive {
		f.t.Skip("passive agent: reports nothing by itself")
	}
	res, ok := f.dispatch(f.ctx, f.dispatchOf("job-report"))
	require.True(f.t, ok)
	f.awaitOutcome("job-report")
	reports := f.reportsOf(f.rep.all(), "job-report")
	require.NotEmpty(f.t, reports)
	status := res.Status
	for _, r := range reports {
		require.True(f.t, r.Status.Valid(), "report status %q is not a job status", r.Status)
		require.True(f.t, r.Status == status || status.CanBecome(r.Status),
			"report moves the job %s -> %s, not an edge of release.JobEdges", status, r.Status)
		status = r.Status
	}
	require.True(f.t, status.IsTerminal(), "the last report is terminal")
}

func jobAgentDistinct(f *jobAgentFixture) {
	a, ok := f.dispatch(f.ctx, f.dispatchOf("job-a"))
	require.True(f.t, ok)
	b, ok := f.dispatch(f.ctx, f.dispatchOf("job-b"))
	require.True(f.t, ok)
	if a.ExternalID != "" || b.ExternalID != "" {
		require.NotEqual(f.t, a.ExternalID, b.ExternalID, "distinct jobs get distinct external ids")
	}
	f.awaitOutcome("job-a")
	f.awaitOutcome("job-b")
}

func jobAgentCancelled(f *jobAgentFixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	d := f.dispatchOf("job-cancelled")
	type ret struct {
		res ports.JobDispatchResult
		err error
	}
	done := make(chan ret, 1)
	go func() {
		res, err := f.agent.Dispatch(ctx, d)
		done <- ret{res, err}
	}()
	timer := time.NewTimer(f.opts.Timeout)
	defer timer.Stop()
	var got ret
	select {
	case got = <-done:
	case <-timer.C:
		f.t.Fatalf("Dispatch with a cancelled context did not return within %s", f.opts.Timeout)
	}
	if got.err == nil {
		// The agent accepted the job anyway: then it is dispatched.
		f.remember(d, got.res)
	}
	// Whatever the cancelled attempt did, a retry with a live context
	// succeeds (and returns the first result if the first was accepted).
	_, ok := f.dispatch(f.ctx, f.dispatchOf("job-cancelled"))
	require.True(f.t, ok)
	f.awaitOutcome("job-cancelled")
}

func jobAgentCrashRetry(f *jobAgentFixture, newAgent func(t *testing.T, r ports.JobReporter) ports.JobAgent) {
	d := f.dispatchOf("job-crash")
	first, ok := f.dispatch(f.ctx, d)
	require.True(f.t, ok)
	if c, ok := f.agent.(interface{ Close() }); ok {
		c.Close()
	}
	second := newAgent(f.t, f.rep)
	require.NotNil(f.t, second, "newAgent returned nil")
	again, err := second.Dispatch(f.ctx, f.dispatchOf("job-crash"))
	require.NoError(f.t, err, "a dispatch retried after a crash")
	require.Equal(f.t, first.ExternalID, again.ExternalID, "the retried dispatch finds the run the first agent started")
	f.agent = second
	f.awaitOutcome("job-crash")
	if f.opts.RunsOf != nil {
		require.Equal(f.t, 1, f.opts.RunsOf(f.t, "job-crash"), "one external run for the dispatched and retried job")
	}
	// At most one terminal report in all: checked after the cleanups.
}

func jobAgentResume(f *jobAgentFixture, newAgent func(t *testing.T, r ports.JobReporter) ports.JobAgent, knownID bool) {
	t := f.t
	if _, ok := f.agent.(ports.JobResumer); !ok {
		t.Skip("not a ports.JobResumer: nobody follows its runs")
	}
	id := "job-resume"
	if !knownID {
		id = "job-resume-key"
	}
	first, ok := f.dispatch(f.ctx, f.dispatchOf(id))
	require.True(t, ok)
	if c, ok := f.agent.(interface{ Close() }); ok {
		c.Close() // the process died while the run went on
	}
	// The new agent reports into a reporter of its own, checked once it
	// is closed: every report names the job and moves it along JobEdges
	// from the resumed status, and the outcome comes once (none when the
	// resume itself answered it).
	rep := newRecordingReporter()
	var resumed ports.JobDispatchResult
	t.Cleanup(func() {
		all := rep.stop()
		status, terminal := resumed.Status, 0
		for _, r := range all {
			if r.JobID != id && (r.JobID != "" || r.ExternalID != first.ExternalID) {
				t.Errorf("a resumed agent's report names another job: %+v", r)
				continue
			}
			if r.Status != status && !status.CanBecome(r.Status) {
				t.Errorf("job %s: report moves it %s -> %s, not an edge of release.JobEdges", id, status, r.Status)
			}
			status = r.Status
			if r.Status.IsTerminal() {
				terminal++
			}
		}
		want := 1
		if resumed.Status.IsTerminal() {
			want = 0
		}
		if terminal != want {
			t.Errorf("job %s: %d terminal reports from the resumed agent, want %d: %+v", id, terminal, want, all)
		}
	})
	second := newAgent(t, rep)
	require.NotNil(t, second, "newAgent returned nil")
	resumer := second.(ports.JobResumer)
	d := f.dispatchOf(id)
	d.Job.Status = first.Status
	if knownID {
		d.Job.ExternalID = first.ExternalID
	}
	var err error
	resumed, err = resumer.ResumeJob(f.ctx, d)
	require.NoError(t, err)
	require.Equal(t, first.ExternalID, resumed.ExternalID, "the resumed job follows the run the first agent started")
	require.True(t, resumed.Status == first.Status || first.Status.CanBecome(resumed.Status), "resumed status %s", resumed.Status)
	if !resumed.Status.IsTerminal() {
		require.True(t, rep.await(f.ctx, f.opts.Timeout, func(all []ports.JobReport) bool {
			for _, r := range all {
				if r.Status.IsTerminal() {
					return true
				}
			}
			return false
		}), "no outcome from the resumed agent within %s: %+v", f.opts.Timeout, rep.all())
	}
	if f.opts.RunsOf != nil {
		require.Equal(t, 1, f.opts.RunsOf(t, id), "one external run for the dispatched and resumed job")
	}
}

// recordingReporter is a ports.JobReporter that records every report and
// wakes waiters on each. After stop it refuses reports.
type recordingReporter struct {
	mu      sync.Mutex
	reports []ports.JobReport
	arrived []time.Time // when each report came, by index
	stopped bool
	changed chan struct{} // closed and replaced on each report
}

var _ ports.JobReporter = (*recordingReporter)(nil)

func newRecordingReporter() *recordingReporter {
	return &recordingReporter{changed: make(chan struct{})}
}

// ReportJob records r.
func (r *recordingReporter) ReportJob(ctx context.Context, rep ports.JobReport) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("report job %s: %w", rep.JobID, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return fmt.Errorf("report job %s: reporter stopped after the test ended", rep.JobID)
	}
	r.reports = append(r.reports, rep)
	r.arrived = append(r.arrived, time.Now())
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// all returns a copy of the recorded reports.
func (r *recordingReporter) all() []ports.JobReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ports.JobReport(nil), r.reports...)
}

// of returns the reports of job id with the times they arrived.
func (r *recordingReporter) of(id string) ([]ports.JobReport, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var reps []ports.JobReport
	var at []time.Time
	for i, rep := range r.reports {
		if rep.JobID == id {
			reps, at = append(reps, rep), append(at, r.arrived[i])
		}
	}
	return reps, at
}

// stop refuses further reports and returns the recorded ones.
func (r *recordingReporter) stop() []ports.JobReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	return append([]ports.JobReport(nil), r.reports...)
}

// await waits until done holds for the recorded reports, ctx ends or
// timeout passes; it reports whether done held.
func (r *recordingReporter) await(ctx context.Context, timeout time.Duration, done func([]ports.JobReport) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		reports := append([]ports.JobReport(nil), r.reports...)
		changed := r.changed
		r.mu.Unlock()
		if done(reports) {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		}
	}
}
