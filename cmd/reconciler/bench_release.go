package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

type benchReleaseOptions struct {
	dsn         string
	targets     int
	workers     int
	concurrency int
	timeout     time.Duration
	cpuProfile  string
	// processes lists the worker process counts to run with (empty: the
	// chain runs in this process, in o.workers engines).
	processes []int
	workerBin string
	// share gives each of n worker processes 1/n of the machine
	// (workerShare).
	share bool
	// policies runs the demo's shape: dev, staging and prod, progression
	// between them, an approval, a window and a gradual rollout in prod
	// (benchPolicies).
	policies bool
	// readProbe reads explain and the target list page during the timed
	// phase (benchReads).
	readProbe bool
	// watchers, when positive, streams every change of the timed phase to
	// that many clients of GET /api/v1/events (benchWatchers).
	watchers int
}

func newBenchReleaseCmd() *cobra.Command {
	o := benchReleaseOptions{}
	var processes string
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Time a new version reaching dispatched jobs on every release target",
		Long: `bench release measures the release chain end to end.

It stores one deployment in one environment over --targets resources (one
release target each) and an agent that accepts every job at once. Then it
creates a version and times the chain (desired-release, job-dispatch)
until a job of that version was dispatched on every target.
--workers engines share the queue, like separate processes. With
--processes 1,2 the chain runs instead in that many worker processes (each
an engine with the chain, as in serve, at --concurrency), the whole
benchmark once per count, one JSON line each, with each worker's peak RSS
(workers_rss_mb, the largest as worker_max_rss_mb). Each worker sizes its
Go runtime and its connection pool for the whole machine, as serve does by
default; with --share-machine each of n workers gets 1/n of it instead, as
n serve processes given their share of one host would: GOMAXPROCS of the
CPUs / n (at least 1) and pool_max_conns of the default pool (the larger
of 4 and the CPUs) / n (at least 2) unless the DSN sets it; the line says
so (share_machine). Each line lists what the workers ran with, as each
reported it: workers_gomaxprocs and workers_pool_max_conns.

With --policies the deployment has the demo's shape: dev, staging and
prod over --targets / 3 resources, progression dev → staging → prod, an
approval (given right after the version is created), a deployment window
and a gradual rollout in prod; every job succeeds at once, and the timed
phase ends when every target of the three environments has its job.

It runs in memory unless --dsn (or RECONCILER_DSN) names a PostgreSQL
database; the benchmark uses its own schema there and drops it afterwards.
The last line is JSON:
{"bench":"release","targets":N,"seconds":X,"targets_per_sec":X,"max_rss_mb":X, ...}
` + benchFiguresHelp,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envFallback(cmd); err != nil {
				return err
			}
			var err error
			if o.processes, err = parseProcesses(processes); err != nil {
				return err
			}
			if o.share && len(o.processes) == 0 {
				return usagef("--share-machine needs --processes")
			}
			if o.watchers > 0 && len(o.processes) > 0 {
				return usagef("--watchers: not supported with --processes")
			}
			if o.policies && len(o.processes) > 0 {
				return usagef("--policies: not supported with --processes yet")
			}
			if len(o.processes) > 0 {
				return benchReleaseProcesses(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
			}
			return benchRelease(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	dsnFlag(f, &o.dsn)
	intRangeVar(f, &o.targets, "targets", 10000, 1, 1_000_000, "release targets (one resource each)")
	intRangeVar(f, &o.workers, "workers", 1, 1, 64, "engines running the chain (like separate processes)")
	intRangeVar(f, &o.concurrency, "concurrency", 64, 1, 4096, "passes in flight per kind and engine")
	durationRangeVar(f, &o.timeout, "timeout", 2*time.Minute, time.Second, 24*time.Hour, "longest the timed phase may run")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed phase to this file (with --processes, one per worker process: FILE.<n>procs.<i>)")
	f.StringVar(&processes, "processes", "", "run the chain in worker processes instead, once per count of this comma-separated list (e.g. 1,2; needs --dsn)")
	f.StringVar(&o.workerBin, "worker-bin", "", "the reconciler binary the worker processes run (default this one)")
	_ = f.MarkHidden("worker-bin")
	f.BoolVar(&o.readProbe, "read-probe", false, "while the chain runs, explain one target and read the first page of the target list every 100 ms through an API served on loopback in this process, and report each read's p50 and p99 (reads_*)")
	f.BoolVar(&o.policies, "policies", false, "the demo's shape: --targets split over dev, staging and prod (one resource in each), staging after dev and prod after staging (progression), an approval, an always-open window and a gradual rollout (linear-normalized over 1 s) in prod; the agent's jobs succeed at once")
	intRangeVar(f, &o.watchers, "watchers", 0, 0, 1000, "stream every change of the timed phase to this many clients of GET /api/v1/events served on loopback, and report the events, the fewest any client received and their delivery lag (not with --processes)")
	f.BoolVar(&o.share, "share-machine", false, "with --processes, give each of n worker processes 1/n of this machine's CPUs (GOMAXPROCS) and default connection pool (pool_max_conns)")
	return cmd
}

// countingAgent accepts every job and counts the distinct ones; done closes
// when want jobs were dispatched. Its jobs are in progress, or status when
// set (successful: they end at once).
type countingAgent struct {
	status release.JobStatus
	// onNew, when set, is called with each job id dispatched the first
	// time.
	onNew func(id string)
	want  int64
	n     atomic.Int64
	seen  sync.Map
	once  sync.Once
	done  chan struct{}
}

func (a *countingAgent) Type() string { return "bench" }

func (a *countingAgent) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	if _, dup := a.seen.LoadOrStore(d.Job.ID, true); !dup {
		if a.onNew != nil {
			a.onNew(d.Job.ID)
		}
		if a.n.Add(1) == a.want {
			a.once.Do(func() { close(a.done) })
		}
	}
	status := release.JobInProgress
	if a.status != "" {
		status = a.status
	}
	return ports.JobDispatchResult{ExternalID: "bench-" + d.Job.ID, Status: status}, nil
}

// seedBenchPolicies adds the demo's shape to the benchmark's workspace:
// the dev and staging environments beside prod, and the policies
// (progression dev → staging → prod, an approval, an always-open window
// and a gradual rollout in prod).
func seedBenchPolicies(ctx context.Context, be *backend) error {
	for _, e := range []string{"dev", "staging"} {
		if _, err := be.releases.Environments().Put(ctx, release.Environment{ID: e, SystemID: "bench", Name: e, ResourceSelector: "true"}, 0); err != nil {
			return fmt.Errorf("bench release: store environment %s: %w", e, err)
		}
	}
	after := func(upstream string) policy.Rule {
		return policy.Rule{ID: "after-" + upstream, Spec: policy.EnvironmentProgression{
			DependsOnEnvironmentSelector: `environment.name == "` + upstream + `"`, MinimumSuccessPercentage: 100}}
	}
	policies := []policy.Policy{
		{ID: "staging-after-dev", Selector: `environment.name == "staging"`, Rules: []policy.Rule{after("dev")}},
		{ID: "prod-gate", Selector: `environment.name == "prod"`, Rules: []policy.Rule{
			after("staging"),
			{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}},
			{ID: "window", Spec: policy.DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYSECOND=0", DurationMinutes: 24 * 60}},
			{ID: "rollout", Spec: policy.GradualRollout{RolloutType: policy.RolloutLinearNormalized, TimeScaleInterval: 1}},
		}},
	}
	svc := catalog.New(be.catalog, catalog.Config{}).Policies("bench")
	for _, p := range policies {
		p.Name, p.Enabled, p.WorkspaceID = p.ID, true, "bench"
		if _, err := svc.Put(ctx, p, 0); err != nil {
			return fmt.Errorf("bench release: store policy %s: %w", p.ID, err)
		}
	}
	return nil
}

func benchRelease(ctx context.Context, stdout, stderr io.Writer, o benchReleaseOptions) error {
	env, cleanup, err := openBenchEnv(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer cleanup()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	resources := o.targets
	agent := &countingAgent{want: int64(o.targets), done: make(chan struct{})}
	if o.policies {
		resources = (o.targets + 2) / 3
		agent.want, agent.status = int64(3*resources), release.JobSuccessful
	}
	newChain := func(be *backend) *chain.Chain {
		return &chain.Chain{Store: be.releases, Queue: be.queue, Clock: ports.SystemClock, Logger: quiet,
			Agents: map[string]ports.JobAgent{agent.Type(): agent}}
	}
	ch := newChain(env.be)

	fmt.Fprintf(stderr, "bench release (%s): storing %d resources\n", env.be.name, resources)
	if err := seedBenchRelease(ctx, env.be.releases, resources); err != nil {
		return err
	}
	if o.policies {
		if err := seedBenchPolicies(ctx, env.be); err != nil {
			return err
		}
	}
	diff, err := ch.SyncTargets(ctx, "bench")
	if err != nil {
		return err
	}
	if int64(len(diff.Added)) != agent.want {
		return fmt.Errorf("bench release: %d targets computed, want %d", len(diff.Added), agent.want)
	}
	// Let the chain settle on "no version yet" first, so the timed phase
	// measures only the new version's way through it.
	if err := runChainUntil(ctx, env.be.queue, ch, o, nil, func() bool { return queueEmpty(ctx, env.be.queue) }); err != nil {
		return err
	}
	if err := env.startTimed(ctx); err != nil {
		return err
	}
	var watchers *benchWatchers
	if o.watchers > 0 {
		if watchers, err = startBenchWatchers(ctx, env.be, o.watchers, quiet); err != nil {
			return err
		}
	}
	ch = newChain(env.be)
	var reads *benchReads
	if o.readProbe {
		envs := []string{"prod"}
		if o.policies {
			envs = []string{"dev", "staging", "prod"}
		}
		if reads, err = startBenchReads(ctx, env.be, ch, envs, resources, quiet); err != nil {
			return err
		}
	}

	fmt.Fprintf(stderr, "bench release: creating a version for %d targets\n", o.targets)
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	start := time.Now()
	if err := ch.CreateVersion(ctx, release.DeploymentVersion{ID: "bench-v1", DeploymentID: "api", Tag: "v1"}); err != nil {
		return err
	}
	if o.policies {
		if _, err := ch.Approve(ctx, release.Approval{VersionID: "bench-v1", EnvironmentID: "prod", User: "bench"}); err != nil {
			return err
		}
	}
	timedOut := false
	if err := runChainUntil(ctx, env.be.queue, ch, o, agent.done, nil); err != nil {
		timedOut = true
		fmt.Fprintf(stderr, "bench release: %v\n", err)
	}
	elapsed := time.Since(start)
	n := agent.n.Load()
	perSec := float64(n) / elapsed.Seconds()
	fmt.Fprintf(stderr, "dispatched %d of %d jobs in %s = %.0f targets/s\n", n, agent.want, elapsed.Round(time.Millisecond), perSec)
	var watched map[string]any
	if reads != nil {
		watched = reads.stop(ctx)
	}
	if watchers != nil {
		w, err := watchers.stop(ctx, 30*time.Second)
		if err != nil {
			return err
		}
		if watched == nil {
			watched = map[string]any{}
		}
		maps.Copy(watched, w)
		if ev, ok := watched["events"].(int64); ok {
			watched["events_per_sec"] = round1(float64(ev) / elapsed.Seconds())
		}
	}
	figures, err := env.stopTimed(ctx, "target", n)
	if err != nil {
		return err
	}
	maps.Copy(figures, watched)
	line := map[string]any{
		"bench": "release", "store": env.be.name, "workers": o.workers, "targets": n, "policies": o.policies,
		"seconds": round3(elapsed.Seconds()), "targets_per_sec": round1(perSec),
	}
	maps.Copy(line, figures)
	if err := json.NewEncoder(stdout).Encode(line); err != nil {
		return err
	}
	if timedOut {
		return fmt.Errorf("bench release: only %d of %d targets dispatched", n, agent.want)
	}
	return nil
}

// startCPUProfile writes a CPU profile to path until the returned function
// is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// seedBenchRelease stores the benchmark's workspace: one system, one
// environment, one deployment on the bench agent and n resources.
func seedBenchRelease(ctx context.Context, s ports.ObjectStore, n int) error {
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("bench release: store %s: %w", what, err)
		}
		return nil
	}
	if _, err := s.Workspaces().Put(ctx, release.Workspace{ID: "bench", Name: "Bench"}, 0); err != nil {
		return step("workspace", err)
	}
	if _, err := s.Systems().Put(ctx, release.System{ID: "bench", WorkspaceID: "bench", Name: "Bench"}, 0); err != nil {
		return step("system", err)
	}
	if _, err := s.Environments().Put(ctx, release.Environment{ID: "prod", SystemID: "bench", Name: "prod", ResourceSelector: "true"}, 0); err != nil {
		return step("environment", err)
	}
	if _, err := s.JobAgents().Put(ctx, release.JobAgent{ID: "bench", Name: "Bench", Type: "bench"}, 0); err != nil {
		return step("job agent", err)
	}
	dep := release.Deployment{ID: "api", SystemID: "bench", Name: "API", Slug: "api", JobAgentID: "bench", ResourceSelector: `resource.kind == "Node"`}
	if _, err := s.Deployments().Put(ctx, dep, 0); err != nil {
		return step("deployment", err)
	}
	return seedBenchResources(ctx, s, n)
}

// seedBenchResources stores n Node resources node-000000 on in the
// benchmark's workspace, in chunks, each in one transaction when the store
// has them: one commit per benchSeedChunk resources, not one per resource.
func seedBenchResources(ctx context.Context, s ports.ObjectStore, n int) error {
	inTx := func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }
	if tx, ok := s.(ports.Transactor); ok {
		inTx = tx.InTx
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for lo := 0; lo < n; lo += benchSeedChunk {
		g.Go(func() error {
			return inTx(gctx, func(ctx context.Context) error {
				for i := lo; i < min(lo+benchSeedChunk, n); i++ {
					id := fmt.Sprintf("node-%06d", i)
					r := release.Resource{ID: id, WorkspaceID: "bench", Kind: "Node", Identifier: id, Name: id}
					if _, err := s.Resources().Put(ctx, r, 0); err != nil {
						return fmt.Errorf("bench: store resource %s: %w", id, err)
					}
				}
				return nil
			})
		})
	}
	return g.Wait()
}

// benchSeedChunk is how many resources the benchmark stores per
// transaction.
const benchSeedChunk = 1000

// queueEmpty reports whether the queue holds no item at all.
func queueEmpty(ctx context.Context, q ports.Queue) bool {
	st, err := q.WorkStats(ctx)
	if err != nil {
		return false
	}
	return st[ports.WorkPending]+st[ports.WorkLeased] == 0
}

// runChainUntil runs o.workers engines with the chain registered until done
// closes or until returns true (polled), or o.timeout passes.
func runChainUntil(ctx context.Context, q ports.Queue, ch *chain.Chain, o benchReleaseOptions, done <-chan struct{}, until func() bool) error {
	stop := startEngines(ctx, q, o.workers, 50*time.Millisecond, ch.Logger, func(e *engine.Engine) { ch.Register(e, o.concurrency) })
	defer stop()
	deadline := time.After(o.timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-deadline:
			return fmt.Errorf("timed out after %s", o.timeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if until != nil && until() {
				return nil
			}
		}
	}
}
