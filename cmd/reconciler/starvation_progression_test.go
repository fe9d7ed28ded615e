package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// progressionCap is TestStarvationProgression's cap of active jobs per
// environment (a concurrency rule) for a run over resources resources: 50
// as in issue 30's run, less in a small run, so that it binds there too.
func progressionCap(resources int) int { return min(50, (resources+1)/2) }

// starvationKills is how many SIGKILLs TestStarvationProgression makes:
// RECONCILER_STARVATION_KILLS, 10 when unset (issue 30's run).
func starvationKills(t *testing.T) int {
	return envCount(t, "RECONCILER_STARVATION_KILLS", "kills", 10)
}

// TestStarvationProgression (issue 30; make starvation) repeats issue 30's
// run: CPU hogs on every core while serve processes on one PostgreSQL roll
// out over RECONCILER_STARVATION release targets in dev, staging and prod
// (a third each; the test runner with 2 s jobs; at most 50 active jobs per
// environment, fewer in a small run (progressionCap); staging after dev
// and prod after staging by progression), with RECONCILER_STARVATION_KILLS
// SIGKILLs (two of them double kills), each made when its victims hold
// work item leases or jobs in flight and followed by a fresh process, and
// a second version created mid-rollout (once the first has succeeded
// somewhere in staging, before it is everywhere). It asserts that every
// kill happened, that every target converges to the second version with
// exactly one successful job of it, that no job was sent twice, that the
// cap was never exceeded (sampled), that no lease was taken from a live
// process and no job of a live process ended as lost, and that explain of
// a prod target answered 200, or 503 with Retry-After, within 2 s
// throughout. It logs the rollout's time and the explain latencies.
func TestStarvationProgression(t *testing.T) {
	n := starvationTargets(t)
	if n == 0 {
		t.Skip("RECONCILER_STARVATION not set (make starvation)")
	}
	ctx := t.Context()
	bin, dsn, be := runnerBackend(t)
	s := be.releases
	resources := (n + 2) / 3
	total := 3 * resources
	seedProgressionRollout(t, be, resources)
	ch := &chain.Chain{Store: s, Queue: be.queue, Clock: ports.SystemClock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	diff, err := ch.SyncTargets(ctx, "sys")
	require.NoError(t, err)
	require.Len(t, diff.Added, total)

	nHogs := starvationHogs(t)
	stopHogs := startHogs(ctx, nHogs)
	defer stopHogs()

	// The anchor serves the explain probe and is never killed; the others
	// are killed and replaced.
	log := &procLog{keep: []string{"listening", "testrunner.accepted"}}
	procs := map[string]*serveProc{}
	var order []string
	start := func(name string) {
		cmd := startServeLog(t, bin, dsn, name, log, "--listen", "127.0.0.1:0", "--insecure-no-auth", "--lock", "5s")
		procs[name] = &serveProc{pid: cmd.Process.Pid, kill: cmd.Process.Kill, wait: cmd.Wait}
		order = append(order, name)
	}
	for _, name := range []string{"anchor", "p1", "p2"} {
		start(name)
	}
	procs["anchor"].addr = listenAddr(t, log, "anchor")

	probe := &explainProbe{url: "http://" + procs["anchor"].addr + "/api/v1/targets/" +
		release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "prod", ResourceID: "node-0000"}.Key() + "/explain", keepTimes: true}
	probeCtx, stopProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() { defer close(probed); probe.run(probeCtx) }()
	defer func() { stopProbe(); <-probed }()

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	count := func(q string, args ...any) int {
		var k int
		require.NoError(t, conn.QueryRow(ctx, q, args...).Scan(&k))
		return k
	}
	// held is how much of the rollout a process holds: its work item
	// leases and the jobs it accepted that are still active.
	held := func(name string) (leases, jobs int) {
		leases = count(`SELECT count(*) FROM reconcile_work_scope WHERE lease_expires_at IS NOT NULL AND lease_owner LIKE $1`,
			fmt.Sprintf("%%-%d-%%", procs[name].pid))
		var mine []string
		for job, by := range sendsByJob(log) {
			if slices.Contains(by, name) {
				mine = append(mine, job)
			}
		}
		jobs = count(`SELECT count(*) FROM release_jobs WHERE active AND id = ANY($1)`, mine)
		return leases, jobs
	}
	succeeded := func(version string) int {
		return count(`SELECT count(DISTINCT target_key) FROM release_jobs WHERE status = 'successful' AND version_id = $1`, version)
	}

	// The cap: the jobs active per environment, sampled every 100 ms from
	// one consistent read each (a job runs for 2 s, so a burst past the
	// cap lasts long enough to be seen).
	peak := map[string]int{}
	samples := 0
	var sampleErr error
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	sconn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = sconn.Close(context.WithoutCancel(ctx)) }()
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
			rows, err := sconn.Query(sampleCtx, `SELECT environment_id, count(*) FROM release_jobs WHERE active GROUP BY environment_id`)
			if err != nil {
				if sampleCtx.Err() == nil {
					sampleErr = err
				}
				return
			}
			for rows.Next() {
				var env string
				var k int
				if sampleErr = rows.Scan(&env, &k); sampleErr != nil {
					rows.Close()
					return
				}
				peak[env] = max(peak[env], k)
			}
			rows.Close()
			if err := rows.Err(); err != nil && sampleCtx.Err() == nil {
				sampleErr = err
				return
			}
			samples++
		}
	}()
	defer func() { stopSampling(); <-sampled }()

	began := time.Now()
	require.NoError(t, ch.CreateVersion(ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "v1"}))

	// The kills, each at a moment its victims hold work, paced by the
	// rollout's progress; the second version once v1 succeeded somewhere
	// in staging.
	kills := starvationKills(t)
	double := map[int]bool{kills / 3: true, 2 * kills / 3: true}
	killed := map[string]bool{}
	fromLive := 0
	v2, v1DoneAtV2 := false, 0
	next := 0
	maybeV2 := func() {
		if !v2 && count(`SELECT count(*) FROM release_jobs WHERE status = 'successful' AND version_id = 'v1' AND environment_id = 'staging'`) > 0 {
			v1DoneAtV2 = succeeded("v1")
			require.NoError(t, ch.CreateVersion(ctx, release.DeploymentVersion{ID: "v2", DeploymentID: "api", Tag: "v2"}))
			v2 = true
		}
	}
	for k := range kills {
		// Kill k once k/kills of the targets' worth of jobs succeeded
		// (v1's and v2's together reach about 1.5 times the targets).
		waitUntil(t, 300*time.Second, func() bool {
			maybeV2()
			return succeeded("v1")+succeeded("v2") >= k*total/kills
		})
		want := 1
		if double[k] {
			want = 2
		}
		var victims []string
		holds := map[string][2]int{}
		waitUntil(t, 300*time.Second, func() bool {
			victims = victims[:0]
			for _, name := range order {
				if name == "anchor" || killed[name] {
					continue
				}
				if l, j := held(name); l+j > 0 {
					victims = append(victims, name)
					holds[name] = [2]int{l, j}
				}
			}
			return len(victims) >= want
		})
		for _, name := range victims[:want] {
			l, j := holds[name][0], holds[name][1]
			fromLive += takenFromLive(t, listenAddr(t, log, name))
			require.NoError(t, procs[name].kill())
			_ = procs[name].wait()
			killed[name] = true
			t.Logf("kill %d: %s holding %d leases and %d jobs in flight", k+1, name, l, j)
		}
		for range want {
			next++
			start(fmt.Sprintf("r%d", next))
		}
	}
	waitUntil(t, 300*time.Second, func() bool { maybeV2(); return v2 })
	require.Less(t, v1DoneAtV2, total, "the second version came mid-rollout")

	waitUntil(t, 900*time.Second, func() bool { return succeeded("v2") == total })
	took := time.Since(began)
	for _, name := range order {
		if !killed[name] {
			fromLive += takenFromLive(t, listenAddr(t, log, name))
		}
	}
	stopProbe()
	<-probed

	// Exactly one successful v2 job per target; no job sent twice.
	require.Zero(t, count(`SELECT count(*) FROM (SELECT target_key FROM release_jobs WHERE status = 'successful' AND version_id = 'v2' GROUP BY target_key HAVING count(*) > 1) d`),
		"targets with two successful jobs of v2")
	for job, by := range sendsByJob(log) {
		require.Len(t, by, 1, "job %s sent once, not by %v", job, by)
	}
	stopSampling()
	<-sampled
	require.NoError(t, sampleErr)
	require.Positive(t, samples, "the cap was sampled")

	// Jobs of killed processes end as lost; those of live ones never do.
	liveLost := 0
	targets, err := s.TargetList(ctx, ports.TargetListParams{})
	require.NoError(t, err)
	for _, tg := range targets {
		jobs, err := s.JobsByTarget(ctx, tg, 0)
		require.NoError(t, err)
		for _, r := range jobs {
			if r.Status != release.JobFailure || !strings.HasPrefix(r.Message, "lost") {
				continue
			}
			dead := false
			for name := range killed {
				dead = dead || strings.Contains(r.LeaseOwner, fmt.Sprintf("-%d-", procs[name].pid))
			}
			if !dead {
				liveLost++
				t.Logf("job %s of live owner %s lost: %s", r.ID, r.LeaseOwner, r.Message)
			}
		}
	}
	p50, p99 := probe.percentiles()
	t.Logf("starvation progression: %d targets (dev, staging, prod) converged to v2 in %s under %d CPU hogs, %d kills; v2 created when %d targets had v1; peak active jobs %v (%d samples); leases taken from live processes %d; live jobs lost %d; explain %d answers, %d failed, p50 %s, p99 %s, slowest %s",
		total, took.Round(time.Millisecond), nHogs, len(killed), v1DoneAtV2, peak, samples, fromLive, liveLost,
		probe.answers.Load(), probe.failed.Load(), p50, p99, time.Duration(probe.slowest.Load()))
	for env, k := range peak {
		require.LessOrEqual(t, k, progressionCap(resources), "active jobs in %s", env)
	}
	require.Len(t, killed, kills+len(double), "every kill happened")
	require.Zero(t, fromLive, "leases taken from live processes")
	require.Zero(t, liveLost, "jobs of live processes ended as lost")
	require.Positive(t, probe.answers.Load(), "explain was probed")
	require.Zero(t, probe.failed.Load(), "explain answers 200, or 503 with Retry-After, within 2 s: %s", probe.firstFailure())
}

// seedProgressionRollout stores issue 30's shape: resources Node
// resources, each a target in dev, staging and prod; deployment api on the
// test runner with 2 s jobs; a retry policy, a cap of
// progressionCap(resources) active jobs per environment, staging after dev
// and prod after staging.
func seedProgressionRollout(t *testing.T, be *backend, resources int) {
	t.Helper()
	ctx := t.Context()
	s := be.releases
	must := func(_ int64, err error) { t.Helper(); require.NoError(t, err) }
	must(s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0))
	must(s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "sys"}, 0))
	for _, e := range []string{"dev", "staging", "prod"} {
		must(s.Environments().Put(ctx, release.Environment{ID: e, SystemID: "sys", Name: e, ResourceSelector: "true"}, 0))
	}
	must(s.Deployments().Put(ctx, release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api", JobAgentID: "runner",
		JobAgentConfig: map[string]any{"delay": "2s"}, JobTimeoutSeconds: 120, ResourceSelector: `resource.kind == "Node"`}, 0))
	after := func(env, upstream string) policy.Policy {
		return policy.Policy{ID: env + "-after-" + upstream, Selector: `environment.name == "` + env + `"`, Rules: []policy.Rule{
			{ID: "after-" + upstream, Spec: policy.EnvironmentProgression{
				DependsOnEnvironmentSelector: `environment.name == "` + upstream + `"`, MinimumSuccessPercentage: 100}}}}
	}
	svc := catalog.New(s, catalog.Config{}).Policies("test")
	for _, p := range []policy.Policy{
		{ID: "retry", Selector: "true", Rules: []policy.Rule{
			{ID: "retry", Spec: policy.Retry{MaxRetries: 3, RetryOnStatuses: []release.JobStatus{release.JobFailure}}}}},
		{ID: "cap", Selector: "true", Rules: []policy.Rule{
			{ID: "cap", Spec: policy.Concurrency{MaxActivePerEnvironment: progressionCap(resources)}}}},
		after("staging", "dev"),
		after("prod", "staging"),
	} {
		p.Name, p.Enabled, p.WorkspaceID = p.ID, true, "ws"
		must(svc.Put(ctx, p, 0))
	}
	for i := range resources {
		id := fmt.Sprintf("node-%04d", i)
		must(s.Resources().Put(ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "Node", Identifier: id, Name: id}, 0))
	}
}

// listenAddr is the address the serve process name logged it listens on.
func listenAddr(t *testing.T, log *procLog, name string) string {
	t.Helper()
	addr := regexp.MustCompile(`addr=(\S+)`)
	found := ""
	waitUntil(t, 30*time.Second, func() bool {
		for _, l := range log.matching("listening") {
			if m := addr.FindStringSubmatch(l.text); m != nil && l.proc == name {
				found = m[1]
			}
		}
		return found != ""
	})
	return found
}

// startHogs runs n CPU hogs (spinning goroutines, each on its own
// thread) until the returned stop is called.
func startHogs(ctx context.Context, n int) (stop func()) {
	hogCtx, cancel := context.WithCancel(ctx)
	var hogs sync.WaitGroup
	for range n {
		hogs.Add(1)
		go func() {
			defer hogs.Done()
			runtime.LockOSThread()
			for x := 0; hogCtx.Err() == nil; x++ {
				for range 1 << 16 {
					x ^= x << 1
				}
			}
		}()
	}
	return func() { cancel(); hogs.Wait() }
}
