package main

import (
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestKillServeMidRolloutLosesNothing rolls a version out to release
// targets (200 in make test, 1,000 under make soak) on two serve processes and SIGKILLs one of them
// mid-rollout, the first seen with jobs in flight (read from its accepted
// sends and the stored jobs). The jobs that died with it time out (the
// deployment's job_timeout_seconds) and the retry policy runs them again;
// every target ends with exactly one successful job for the desired
// release, and no job id is sent twice.
func TestKillServeMidRolloutLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	var r rolloutKill
	killRollout(t, soakScale(200, 1000), 0, &r)
	require.Positive(t, r.retried, "jobs in flight on the killed process were retried")
	t.Logf("%d targets; killed the victim with %d jobs in flight; %d targets needed a second job", r.targets, r.inFlight, r.retried)
}

// rolloutKill is what a rollout kill run observed: lost (targets without
// exactly one successful job) and duplicated (job ids sent twice) are
// filled in before they are asserted to be zero.
type rolloutKill struct {
	targets, jobs, inFlight, retried, lost, duplicated int
}

// killRollout rolls v1 out to n targets on two serve processes and
// SIGKILLs one once the processes have accepted at least the fraction at
// of the n jobs (0: any) and it has jobs in flight: a moment
// picked by the rollout's progress, however fast it runs; it
// asserts the recovery and fills res with what it saw.
func killRollout(t *testing.T, n int, at float64, res *rolloutKill) {
	ctx := t.Context()
	bin, dsn, be, ch := rolloutBackend(t, n, 3)
	res.targets = n
	s := be.releases
	log := &procLog{keep: []string{"testrunner.accepted"}}
	procs := map[string]*exec.Cmd{"a": startServeLog(t, bin, dsn, "a", log), "b": startServeLog(t, bin, dsn, "b", log)}
	require.NoError(t, ch.CreateVersion(ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "v1"}))

	// Kill a process while jobs it accepted are still active: the first
	// one seen holding some (a pass takes up to chain.BatchSize targets,
	// so one process may well hold all of a small rollout's).
	active := func() map[string]int {
		k := map[string]int{}
		for job, by := range sendsByJob(log) {
			row, err := s.JobGet(ctx, job)
			if err == nil && row.Status.IsActive() {
				k[by[0]]++
			}
		}
		return k
	}
	victim := ""
	waitUntil(t, 120*time.Second, func() bool {
		if float64(len(sendsByJob(log))) < at*float64(n) {
			return false
		}
		for name, k := range active() {
			if k >= 1 {
				victim, res.inFlight = name, k
				return true
			}
		}
		return false
	})
	require.NoError(t, procs[victim].Process.Kill())
	_ = procs[victim].Wait()

	targets, err := s.TargetList(ctx, ports.TargetListParams{})
	require.NoError(t, err)
	require.Len(t, targets, n)
	done := func(tg release.ReleaseTarget) bool {
		st, err := s.TargetJobState(ctx, tg)
		require.NoError(t, err)
		return st.Successful != nil && st.Successful.Version.ID == "v1"
	}
	var undone []release.ReleaseTarget
	defer func() {
		if !t.Failed() {
			return
		}
		// Say what each of the first few targets left undone waits for.
		for _, tg := range undone[:min(len(undone), 5)] {
			rows, _ := s.JobsByTarget(ctx, tg, 0)
			var jobs []string
			for _, r := range rows {
				jobs = append(jobs, fmt.Sprintf("%s %s (agent %s, lease until %s)", r.ID, r.Status, r.JobAgentID, r.LeaseUntil.Format(time.RFC3339Nano)))
			}
			var items []string
			for _, kind := range []string{chain.KindDesiredRelease, chain.KindJobDispatch} {
				it, err := be.queue.WorkGet(ctx, chain.TargetKey(kind, tg))
				items = append(items, fmt.Sprintf("%s: %+v %v", kind, it, err))
			}
			t.Logf("%s not done: jobs %v; queue %v", tg.Key(), jobs, items)
		}
	}()
	waitUntil(t, 180*time.Second, func() bool {
		undone = undone[:0]
		for _, tg := range targets {
			if !done(tg) {
				undone = append(undone, tg)
			}
		}
		return len(undone) == 0
	})
	defer func() { // also when a wait or an assertion below fails
		res.lost, res.duplicated, res.jobs = 0, 0, 0
		for _, tg := range targets {
			rows, err := s.JobsByTarget(ctx, tg, 0)
			ok := 0
			for _, r := range rows {
				if r.Status == release.JobSuccessful {
					ok++
				}
			}
			if err != nil || ok != 1 {
				res.lost++
			}
		}
		for _, procs := range sendsByJob(log) {
			res.jobs++
			if len(procs) > 1 {
				res.duplicated++
			}
		}
	}()
	for _, tg := range targets {
		rows, err := s.JobsByTarget(ctx, tg, 0)
		require.NoError(t, err)
		ok := 0
		for _, r := range rows {
			if r.Status == release.JobSuccessful {
				ok++
			}
		}
		require.Equal(t, 1, ok, "%s: exactly one successful job", tg.Key())
		if len(rows) > 1 {
			res.retried++
		}
	}
	for job, procs := range sendsByJob(log) {
		require.Len(t, procs, 1, "job %s sent once, not by %v", job, procs)
	}
}

// rolloutBackend is a Postgres backend with one deployment of n release
// targets in prod on the test runner (200 ms jobs, the job timeout, a
// retry policy), the serve binary and the chain the test creates versions
// through.
func rolloutBackend(t *testing.T, n int, jobTimeoutSeconds int64) (bin, dsn string, be *backend, ch *chain.Chain) {
	t.Helper()
	ctx := t.Context()
	bin, dsn, be = runnerBackend(t)
	s := be.releases
	must := func(_ int64, err error) { t.Helper(); require.NoError(t, err) }
	must(s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0))
	must(s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "sys"}, 0))
	must(s.Environments().Put(ctx, release.Environment{ID: "prod", SystemID: "sys", Name: "prod", ResourceSelector: "true"}, 0))
	must(s.Deployments().Put(ctx, release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api", JobAgentID: "runner",
		JobAgentConfig: map[string]any{"delay": "200ms"}, JobTimeoutSeconds: jobTimeoutSeconds,
		ResourceSelector: `resource.kind == "Node"`}, 0))
	must(catalog.New(s, catalog.Config{}).Policies("test").Put(ctx, policy.Policy{ID: "retry", WorkspaceID: "ws", Name: "retry", Enabled: true, Selector: "true", Rules: []policy.Rule{
		{ID: "retry", Spec: policy.Retry{MaxRetries: 3, RetryOnStatuses: []release.JobStatus{release.JobFailure}}}}}, 0))
	for i := range n {
		id := fmt.Sprintf("node-%04d", i)
		must(s.Resources().Put(ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "Node", Identifier: id, Name: id}, 0))
	}
	ch = &chain.Chain{Store: s, Queue: be.queue, Clock: ports.SystemClock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	diff, err := ch.SyncTargets(ctx, "sys")
	require.NoError(t, err)
	require.Len(t, diff.Added, n)
	return bin, dsn, be, ch
}
