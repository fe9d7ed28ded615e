package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// benchSteadyOptions are the flags of `bench steady`.
type benchSteadyOptions struct {
	dsn, workerBin          string
	cpuProfile              string
	targets, deployments    int
	processes, concurrency  int
	every, duration, settle time.Duration
}

// newBenchSteadyCmd measures the release chain under a steady stream of
// versions.
func newBenchSteadyCmd() *cobra.Command {
	var o benchSteadyOptions
	cmd := &cobra.Command{
		Use:   "steady",
		Short: "Stream versions of many deployments through dev → staging → prod and report the chain's latencies",
		Long: `bench steady stores --deployments deployments over dev, staging and prod
(staging after dev and prod after staging: progression) and enough Node
resources for --targets release targets, starts --processes worker
processes running the chain (like serve processes on one database; their
agent's jobs succeed at once), then creates a version of the next
deployment, round robin, every --every for --duration (versions are due
at start + k × --every), and waits up to --settle for the queue to empty.

It prints a JSON line of the queue's depth every second ("bench":
"steady-depth": pending and leased items, the pending ones by kind, and
how long the oldest due item has waited for a worker), then one of the
run: the p50 and p99 of version created → its first job dispatched and
of job success → the next environment's job dispatched (progression), in
seconds, the dead letters, whether the backlog emptied, and from the
workers' start to the end, per job: the commits, rows written, and CPU
of this process with its workers (cpu_us_per_unit) and of the server
when it runs on this host (server_cpu_us_per_unit). A job's dispatch is
its successful report (the agent's jobs end at dispatch). Needs --dsn
(PostgreSQL).`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envFallback(cmd); err != nil {
				return err
			}
			if o.dsn == "" {
				return usagef("--dsn is required: the worker processes share a PostgreSQL database")
			}
			if o.targets < 3*o.deployments {
				return usagef("--targets: want at least 3 × --deployments (%d), got %d", 3*o.deployments, o.targets)
			}
			return benchSteady(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	dsnFlag(f, &o.dsn)
	intRangeVar(f, &o.targets, "targets", 50000, 3, 1_000_000, "release targets: deployments × 3 environments × resources")
	intRangeVar(f, &o.deployments, "deployments", 20, 1, 1000, "deployments, each over every resource in dev, staging and prod")
	intRangeVar(f, &o.processes, "processes", 2, 1, 16, "worker processes running the chain")
	intRangeVar(f, &o.concurrency, "concurrency", 64, 1, 4096, "passes in flight per kind and worker process")
	durationRangeVar(f, &o.every, "every", 3*time.Second, 10*time.Millisecond, time.Hour, "time between versions")
	durationRangeVar(f, &o.duration, "duration", 2*time.Minute, 10*time.Millisecond, 24*time.Hour, "how long versions keep coming")
	durationRangeVar(f, &o.settle, "settle", 5*time.Minute, time.Second, 24*time.Hour, "longest wait for the queue to empty after the last version")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of each worker process's run to FILE.<n>procs.<i>")
	f.StringVar(&o.workerBin, "worker-bin", "", "the reconciler binary the worker processes run (default this one)")
	_ = f.MarkHidden("worker-bin")
	return cmd
}

// seedBenchSteady stores the workspace of bench steady: the deployments
// (api, d01, d02, ...) over n Node resources in dev, staging and prod, and
// the progression policies (staging after dev, prod after staging).
func seedBenchSteady(ctx context.Context, be *backend, deployments, resources int) error {
	if err := seedBenchRelease(ctx, be.releases, resources); err != nil {
		return err
	}
	for i := 1; i < deployments; i++ {
		id := fmt.Sprintf("d%02d", i)
		d := release.Deployment{ID: id, SystemID: "bench", Name: id, Slug: id, JobAgentID: "bench", ResourceSelector: `resource.kind == "Node"`}
		if _, err := be.releases.Deployments().Put(ctx, d, 0); err != nil {
			return fmt.Errorf("bench steady: store deployment %s: %w", id, err)
		}
	}
	for _, e := range []string{"dev", "staging"} {
		if _, err := be.releases.Environments().Put(ctx, release.Environment{ID: e, SystemID: "bench", Name: e, ResourceSelector: "true"}, 0); err != nil {
			return fmt.Errorf("bench steady: store environment %s: %w", e, err)
		}
	}
	svc := catalog.New(be.catalog, catalog.Config{}).Policies("bench")
	for env, upstream := range map[string]string{"staging": "dev", "prod": "staging"} {
		p := policy.Policy{ID: env + "-after-" + upstream, Selector: `environment.name == "` + env + `"`, Enabled: true,
			Rules: []policy.Rule{{ID: "after-" + upstream, Spec: policy.EnvironmentProgression{
				DependsOnEnvironmentSelector: `environment.name == "` + upstream + `"`, MinimumSuccessPercentage: 100}}}}
		p.Name, p.WorkspaceID = p.ID, "bench"
		if _, err := svc.Put(ctx, p, 0); err != nil {
			return fmt.Errorf("bench steady: store policy %s: %w", p.ID, err)
		}
	}
	return nil
}

// sqlSteadyLatencies reads the run's latencies from the jobs: version
// created → the version's first job's successful report, and a job's
// successful report → that of the next environment's job of the same
// version, deployment and resource. The jobs of bench steady end at
// dispatch, so their last update is their dispatch.
const sqlSteadyLatencies = `
WITH first AS (
	SELECT extract(epoch FROM min(j.updated_at) - v.created_at) AS s
	FROM release_versions v JOIN release_jobs j ON j.version_id = v.id AND j.status = 'successful'
	GROUP BY v.id, v.created_at
), prog AS (
	SELECT extract(epoch FROM n.updated_at - p.updated_at) AS s
	FROM release_jobs p JOIN release_jobs n ON (n.version_id, n.deployment_id, n.resource_id) = (p.version_id, p.deployment_id, p.resource_id)
		AND n.environment_id = CASE p.environment_id WHEN 'dev' THEN 'staging' WHEN 'staging' THEN 'prod' END
	WHERE p.status = 'successful' AND n.status = 'successful'
)
SELECT (SELECT count(*) FROM first), coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) FROM first), 0),
	coalesce((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY s) FROM first), 0),
	(SELECT count(*) FROM prog), coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) FROM prog), 0),
	coalesce((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY s) FROM prog), 0),
	(SELECT count(*) FROM release_jobs)`

func benchSteady(ctx context.Context, stdout, stderr io.Writer, o benchSteadyOptions) error {
	bin := o.workerBin
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("bench steady: find the worker binary: %w", err)
		}
	}
	env, cleanup, err := openBenchEnv(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer cleanup()
	resources := (o.targets + 3*o.deployments - 1) / (3 * o.deployments)
	fmt.Fprintf(stderr, "bench steady: storing %d deployments over %d resources in 3 environments\n", o.deployments, resources)
	if err := seedBenchSteady(ctx, env.be, o.deployments, resources); err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ch := &chain.Chain{Store: env.be.releases, Queue: env.be.queue, Clock: ports.SystemClock, Logger: quiet}
	diff, err := ch.SyncTargets(ctx, "bench")
	if err != nil {
		return err
	}
	rel := benchReleaseOptions{workers: 1, concurrency: o.concurrency, timeout: o.settle}
	if err := runChainUntil(ctx, env.be.queue, ch, rel, nil, func() bool { return queueEmpty(ctx, env.be.queue) }); err != nil {
		return err
	}
	// The timed span, whose commits and CPU (the bench's, its workers' and
	// the server's) are reported per job, starts here: the set-up's work
	// is left out.
	if err := env.startTimed(ctx); err != nil {
		return err
	}
	ch = &chain.Chain{Store: env.be.releases, Queue: env.be.queue, Clock: ports.SystemClock, Logger: quiet}
	rel.cpuProfile = o.cpuProfile
	workers, err := startReleaseWorkers(ctx, bin, env.dsn, nil, rel, o.processes, "--succeed")
	if err != nil {
		return err
	}
	var dispatched int64 // the jobs the workers dispatched
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		for range workers.ids {
			dispatched++
		}
	}()
	fmt.Fprintf(stderr, "bench steady: a version every %s for %s over %d targets, %d worker processes\n", o.every, o.duration, len(diff.Added), o.processes)
	enc := json.NewEncoder(stdout)
	start := time.Now()
	versions, depth, maxDepth := 0, time.NewTicker(time.Second), 0
	maxWait := time.Duration(0) // the longest a due item waited, at a sample
	defer depth.Stop()
	next := time.NewTimer(0)
	end := time.After(o.duration)
	settleBy := time.Time{}
	emptied := false
	sample := func() (int, error) {
		st, err := env.be.queue.WorkStats(ctx)
		if err != nil {
			return 0, err
		}
		n := st[ports.WorkPending] + st[ports.WorkLeased]
		maxDepth = max(maxDepth, n)
		kinds, err := env.be.queue.WorkKindStats(ctx)
		if err != nil {
			return 0, err
		}
		// The pending items by kind, and how long the oldest due one has
		// waited for a worker: the backlog, apart from the work in flight.
		pending, waited := map[string]int{}, time.Duration(0)
		now := time.Now()
		for _, k := range kinds {
			if k.State != ports.WorkPending {
				continue
			}
			pending[k.Kind] += k.Count
			if !k.OldestDue.IsZero() {
				waited = max(waited, now.Sub(k.OldestDue))
			}
		}
		maxWait = max(maxWait, waited)
		return n, enc.Encode(map[string]any{"bench": "steady-depth", "at_s": round3(time.Since(start).Seconds()),
			"pending": st[ports.WorkPending], "leased": st[ports.WorkLeased], "dead": st[ports.WorkDead], "versions": versions,
			"pending_by_kind": pending, "oldest_due_wait_s": round3(waited.Seconds())})
	}
loop:
	for {
		select {
		case <-ctx.Done():
			workers.stop()
			return ctx.Err()
		case <-next.C:
			if !settleBy.IsZero() {
				continue
			}
			dep := "api"
			if i := versions % o.deployments; i > 0 {
				dep = fmt.Sprintf("d%02d", i)
			}
			id := fmt.Sprintf("steady-%05d", versions)
			if err := ch.CreateVersion(ctx, release.DeploymentVersion{ID: id, DeploymentID: dep, Tag: id}); err != nil {
				workers.stop()
				return err
			}
			versions++
			next.Reset(time.Until(versionDue(start, versions, o.every)))
		case <-end:
			settleBy = time.Now().Add(o.settle)
		case <-depth.C:
			n, err := sample()
			if err != nil {
				workers.stop()
				return err
			}
			if !settleBy.IsZero() && (n == 0 || time.Now().After(settleBy)) {
				emptied = n == 0
				break loop
			}
		}
	}
	rss := workers.stop()
	<-counted
	figures, err := env.stopTimed(ctx, "job", dispatched)
	if err != nil {
		return err
	}
	st, err := env.be.queue.WorkStats(ctx)
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", env.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	var firstN, progN, jobs int64
	var firstP50, firstP99, progP50, progP99 float64
	if err := db.QueryRowContext(ctx, sqlSteadyLatencies).Scan(&firstN, &firstP50, &firstP99, &progN, &progP50, &progP99, &jobs); err != nil {
		return fmt.Errorf("bench steady: read latencies: %w", err)
	}
	peak := 0.0
	for _, r := range rss {
		peak = max(peak, r)
	}
	line := map[string]any{
		"bench": "steady", "targets": len(diff.Added), "deployments": o.deployments, "processes": o.processes,
		"every_s": o.every.Seconds(), "duration_s": o.duration.Seconds(), "versions": versions, "jobs": jobs,
		"version_to_dispatch_n": firstN, "version_to_dispatch_p50_s": round3(firstP50), "version_to_dispatch_p99_s": round3(firstP99),
		"progression_n": progN, "progression_p50_s": round3(progP50), "progression_p99_s": round3(progP99),
		"queue_max_depth": maxDepth, "queue_max_oldest_due_wait_s": round3(maxWait.Seconds()), "backlog_emptied": emptied, "dead": st[ports.WorkDead], "worker_max_rss_mb": peak,
	}
	for k, v := range figures {
		if k != "max_rss_mb" { // the bench's own; the workers' is worker_max_rss_mb
			line[k] = v
		}
	}
	if err := enc.Encode(line); err != nil {
		return err
	}
	if !emptied {
		return fmt.Errorf("bench steady: the backlog did not empty within --settle %s", o.settle)
	}
	return nil
}

// versionDue is when bench steady's version number k (from 0) is due:
// start + k × every, whatever creating the ones before took.
func versionDue(start time.Time, k int, every time.Duration) time.Time {
	return start.Add(time.Duration(k) * every)
}
