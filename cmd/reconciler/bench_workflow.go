package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/adapters/testrunner"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// benchWorkflowPoll is how often bench workflow reads the workflow's phase
// at first. Later it reads it every hundredth of the time run so far
// (benchWorkflowPollAfter): when each read decoded the whole workflow, its
// matrix and template included, at 50,000 items reading it ten times a
// second took 40% of the benchmark's CPU (the store keeps those apart now).
// The end is seen within 1% of the time.
const benchWorkflowPoll = 100 * time.Millisecond

// benchWorkflowPollAfter is how long bench workflow waits before its next
// read of the workflow's phase, elapsed into the run.
func benchWorkflowPollAfter(elapsed time.Duration) time.Duration {
	return max(benchWorkflowPoll, elapsed/100)
}

type benchWorkflowOptions struct {
	dsn         string
	items       int
	maxParallel int
	timeout     time.Duration
	cpuProfile  string
}

func newBenchWorkflowCmd() *cobra.Command {
	o := benchWorkflowOptions{}
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Time a matrix workflow of --items jobs from start to Succeeded",
		Long: `bench workflow starts one workflow whose job task fans out over a list matrix
of --items items (matrixStrategy.maxParallel --max-parallel), runs it on the
engine with the built-in test runner (jobs succeed at once) and times it until
the workflow has Succeeded, reading its phase every 100 ms (those reads are
among the commits counted).

It runs in memory unless --dsn (or RECONCILER_DSN) names a PostgreSQL
database; the benchmark uses its own schema there and drops it afterwards.
The last line is JSON:
{"bench":"workflow","items":N,"seconds":X,"taskruns_per_sec":X,"phase":"Succeeded","max_rss_mb":X, ...}
schedule_passes counts the controller's scheduling passes (workflow.Schedule
over the stored TaskRuns), schedule_passes_full those over all --items
TaskRuns, and schedule_pass_p50_ms and schedule_pass_max_ms are the median
and the slowest of these, timed around workflow.Schedule alone (no reads,
no writes).
When the workflow does not finish within --timeout, the line is printed all
the same, with the phase it reached, no taskruns_per_sec, and the figures
of the work done so far per --items.
` + benchFiguresHelp,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envFallback(cmd); err != nil {
				return err
			}
			return benchWorkflow(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	dsnFlag(f, &o.dsn)
	intRangeVar(f, &o.items, "items", 10000, 1, 1_000_000, "matrix items (one TaskRun and one job each)")
	intRangeVar(f, &o.maxParallel, "max-parallel", 500, 1, 1_000_000, "matrixStrategy.maxParallel")
	durationRangeVar(f, &o.timeout, "timeout", 5*time.Minute, time.Second, 24*time.Hour, "longest the run may take")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	return cmd
}

// benchTemplate is the benchmark's workflow: one job task over a list.
func benchTemplate(items, maxParallel int) ([]byte, error) {
	list := make([]any, items)
	for i := range list {
		list[i] = fmt.Sprintf("item-%05d", i)
	}
	return json.Marshal(map[string]any{
		"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": map[string]any{"name": "bench"},
		"spec": map[string]any{
			"parameters": []any{map[string]any{"name": "items", "type": "matrix", "source": map[string]any{"kind": "list", "items": list}}},
			"tasks": []any{map[string]any{"name": "run", "type": "job", "jobAgentRef": "runner",
				"config": map[string]any{"delay": "0s", "item": "{{matrix.item}}"}, "matrix": "{{workflow.parameters.items}}",
				"matrixStrategy": map[string]any{"maxParallel": maxParallel}}},
		},
	})
}

// schedulePasses collects how long the controller's scheduling passes
// (workflow.Schedule alone, timed by the controller) took over the whole
// workflow: once every item has its TaskRun.
type schedulePasses struct {
	items int

	mu   sync.Mutex
	full []time.Duration // passes that read every item's TaskRun
	all  int
}

func (p *schedulePasses) add(runs int, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all++
	if runs >= p.items {
		p.full = append(p.full, took)
	}
}

// figures are the JSON fields: the number of scheduling passes, of those
// over every TaskRun, and their median and slowest duration.
func (p *schedulePasses) figures() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]any{"schedule_passes": p.all, "schedule_passes_full": len(p.full)}
	if len(p.full) == 0 {
		return out
	}
	d := slices.Clone(p.full)
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return round3(float64(x) / float64(time.Millisecond)) }
	out["schedule_pass_p50_ms"], out["schedule_pass_max_ms"] = ms(d[len(d)/2]), ms(d[len(d)-1])
	return out
}

func benchWorkflow(ctx context.Context, stdout, stderr io.Writer, o benchWorkflowOptions) error {
	env, cleanup, err := openBenchEnv(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer cleanup()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := env.be.releases.JobAgents().Put(ctx, release.JobAgent{ID: "runner", Name: "runner", Type: testrunner.Type}, 0); err != nil {
		return fmt.Errorf("bench workflow: %w", err)
	}
	doc, err := benchTemplate(o.items, o.maxParallel)
	if err != nil {
		return err
	}
	if err := env.startTimed(ctx); err != nil {
		return err
	}
	be := env.be
	var c *flow.Controller
	runner := testrunner.New(ports.JobReporterFunc(func(ctx context.Context, r ports.JobReport) error { return c.ReportJob(ctx, r) }),
		ports.SystemClock, testrunner.WithLogger(quiet))
	defer runner.Close()
	passes := schedulePasses{items: o.items}
	c = &flow.Controller{Store: be.workflows, Queue: be.queue, Releases: be.releases, Clock: ports.SystemClock, Logger: quiet,
		Agents: map[string]ports.JobAgent{testrunner.Type: runner}, ScheduleTimed: passes.add}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	fmt.Fprintf(stderr, "bench workflow (%s): %d items, maxParallel %d\n", be.name, o.items, o.maxParallel)
	stop := startEngines(ctx, be.queue, 1, 50*time.Millisecond, quiet, func(e *engine.Engine) { c.Register(e, 1) })
	defer stop()

	start := time.Now()
	w, err := c.Start(ctx, flow.StartParams{ID: "bench", Template: doc})
	if err != nil {
		return err
	}
	deadline := time.After(o.timeout)
	poll := time.NewTimer(benchWorkflowPoll)
	defer poll.Stop()
	var final ports.WorkflowRecord
	timedOut := false
	for !timedOut && (final.Phase == "" || !final.Phase.Terminal()) {
		select {
		case <-deadline:
			timedOut = true
			continue
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
			poll.Reset(benchWorkflowPollAfter(time.Since(start)))
		}
		if final, err = be.workflows.WorkflowGet(ctx, w.ID); err != nil {
			return err
		}
	}
	elapsed := time.Since(start)
	stop()
	runner.Close()
	if !timedOut && final.Phase != workflow.WorkflowSucceeded {
		return fmt.Errorf("bench workflow: ended %s: %s", final.Phase, final.Message)
	}
	perSec := float64(o.items) / elapsed.Seconds()
	if timedOut {
		fmt.Fprintf(stderr, "not finished after %s: phase %q\n", elapsed.Round(time.Millisecond), final.Phase)
	} else {
		fmt.Fprintf(stderr, "%d TaskRuns in %s = %.0f TaskRuns/s\n", o.items, elapsed.Round(time.Millisecond), perSec)
	}
	figures, err := env.stopTimed(ctx, "taskrun", int64(o.items))
	if err != nil {
		return err
	}
	line := map[string]any{
		"bench": "workflow", "store": be.name, "items": o.items, "max_parallel": o.maxParallel,
		"seconds": round3(elapsed.Seconds()), "taskruns_per_sec": round1(perSec), "phase": string(final.Phase),
	}
	if timedOut {
		// The figures of the work done so far, per planned TaskRun.
		delete(line, "taskruns_per_sec")
	}
	maps.Copy(line, passes.figures())
	maps.Copy(line, figures)
	if err := json.NewEncoder(stdout).Encode(line); err != nil {
		return err
	}
	if timedOut {
		return fmt.Errorf("bench workflow: not finished after %s (phase %q)", o.timeout, final.Phase)
	}
	return nil
}
