package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/internal/benchstat"
	"github.com/reconcilerhq/reconciler/ports"
)

// newBenchCmd groups the benchmark commands. Each ends with one JSON line of
// figures so runs can be compared.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the engine; each benchmark ends with one JSON line of figures",
	}
	cmd.AddCommand(newBenchQueueCmd(), newBenchReleaseCmd(), newBenchSteadyCmd(), newBenchWorkflowCmd(), newBenchWorkerCmd(), newBenchReleaseWorkerCmd())
	return cmd
}

type benchQueueOptions struct {
	dsn      string
	duration time.Duration
	workers  int
	batch    int
	items    int
	rate     int
	// passItems is the most items one processor call of the throughput
	// phase takes: 1, a Processor per item; more, a BatchProcessor.
	passItems int
	// cpuProfile names the file of a CPU profile of the throughput phase.
	cpuProfile string
}

func newBenchQueueCmd() *cobra.Command {
	o := benchQueueOptions{}
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Enqueue and drain no-op items through the engine",
		Long: `bench queue measures the work queue through the real engine in two phases:

  1. throughput: a backlog of --items no-op items is drained by --workers
     engines, each leasing up to --batch items per call (acks are batched),
     timed until the last ack has committed (the queue is empty); with
     --pass-items 1 (the default) every item has a processor call of its
     own (engine.Processor: a goroutine and a context each), with more the
     processor is an engine.BatchProcessor and one call takes up to that
     many of the items one lease returned;
  2. latency: items are enqueued one at a time at --rate per second for a
     third of --duration, and the time from enqueue to lease is recorded.

It runs in memory unless --dsn (or RECONCILER_DSN) names a PostgreSQL
database; the benchmark uses its own schema there and drops it afterwards.
The last line is JSON:
{"bench":"queue","items":N,"completions":N,"seconds":X,"items_per_sec":X,
 "lease_latency_p50_ms":X,"lease_latency_p99_ms":X,"max_rss_mb":X, ...}
` + benchFiguresHelp,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envFallback(cmd); err != nil {
				return err
			}
			return benchQueue(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	dsnFlag(f, &o.dsn)
	durationRangeVar(f, &o.duration, "duration", 10*time.Second, time.Second, 24*time.Hour, "longest the throughput phase may run")
	intRangeVar(f, &o.workers, "workers", 2, 1, 64, "engines draining the queue (like separate processes)")
	intRangeVar(f, &o.batch, "batch", 256, 1, 10_000, "items leased per call and passes in flight per engine")
	intRangeVar(f, &o.items, "items", 100000, 1, 10_000_000, "backlog size of the throughput phase")
	intRangeVar(f, &o.passItems, "pass-items", 1, 1, 10_000, "items one processor call of the throughput phase takes (1: a call per item; more: a batch processor)")
	intRangeVar(f, &o.rate, "rate", 1000, 1, 1_000_000, "enqueue rate of the latency phase, items per second")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the throughput phase to this file")
	return cmd
}

// Kinds of the benchmark items; the latency phase has its own so that what
// is left of the throughput backlog does not delay it.
const (
	benchKind        = "bench-noop"
	benchLatencyKind = "bench-latency"
)

func benchQueue(ctx context.Context, stdout, stderr io.Writer, o benchQueueOptions) error {
	env, cleanup, err := openBenchEnv(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer cleanup()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Phase 1: throughput on a backlog.
	fmt.Fprintf(stderr, "bench queue (%s): enqueueing %d items\n", env.be.name, o.items)
	const chunk = 1000
	for i := 0; i < o.items; i += chunk {
		ps := make([]ports.EnqueueParams, 0, chunk)
		for j := i; j < min(i+chunk, o.items); j++ {
			ps = append(ps, ports.EnqueueParams{Key: ports.WorkKey{Kind: benchKind, ScopeType: "item", ScopeID: fmt.Sprintf("t%d", j)}})
		}
		if err := env.be.queue.WorkEnqueue(ctx, ps...); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
	}
	if err := env.startTimed(ctx); err != nil {
		return err
	}
	var done atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	passed := func(n int) {
		if done.Add(int64(n)) == int64(o.items) {
			once.Do(func() { close(all) })
		}
	}
	// A plain Processor unless batches are asked for: the engine gives a
	// BatchProcessor its items in batches.
	var proc engine.Processor = engine.ProcessorFunc(benchBatch(passed).Process)
	if o.passItems > 1 {
		proc = benchBatch(passed)
	}
	stopProfile := func() {}
	if o.cpuProfile != "" {
		if stopProfile, err = startCPUProfile(o.cpuProfile); err != nil {
			return err
		}
	}
	start := time.Now()
	stop := startEngines(ctx, env.be.queue, o.workers, 200*time.Millisecond, quiet, func(e *engine.Engine) {
		e.Register(benchKind, proc, engine.KindOptions{Concurrency: o.batch, Batch: o.passItems})
	})
	limit := time.After(o.duration)
	drained := false
	select {
	case <-all:
		// Every item had its pass; the span ends when the last ack has
		// committed: the queue is empty. It is asked only now, so its
		// reads do not add to the commits of the work.
		drained = waitQueueEmpty(ctx, env.be.queue, limit)
	case <-limit:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	stop()
	stopProfile()
	completions := done.Load()
	perSec := float64(completions) / elapsed.Seconds()
	fmt.Fprintf(stderr, "throughput: %d passes, every ack committed %v, in %s = %.0f items/s\n",
		completions, drained, elapsed.Round(time.Millisecond), perSec)
	figures, err := env.stopTimed(ctx, "item", completions)
	if err != nil {
		return err
	}
	q := env.be.queue

	// Phase 2: enqueue-to-lease latency at a fixed rate.
	var mu sync.Mutex
	var lat []time.Duration
	proc2 := engine.ProcessorFunc(func(_ context.Context, it engine.Item) engine.Outcome {
		d := time.Since(it.EventTime)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		return engine.Done()
	})
	stop = startEngines(ctx, q, o.workers, 200*time.Millisecond, quiet, func(e *engine.Engine) {
		e.Register(benchLatencyKind, proc2, engine.KindOptions{Concurrency: o.batch})
	})
	phase := max(o.duration/3, time.Second)
	n := int(phase.Seconds() * float64(o.rate))
	tick := time.Second / time.Duration(o.rate)
	next := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next = next.Add(tick)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		now := time.Now()
		if err := q.WorkEnqueue(ctx, ports.EnqueueParams{EventTime: now, NotBefore: now,
			Key: ports.WorkKey{Kind: benchLatencyKind, ScopeType: "item", ScopeID: fmt.Sprintf("l%d", i)}}); err != nil {
			stop()
			return fmt.Errorf("enqueue: %w", err)
		}
	}
	// Let the tail drain.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(benchstat.Quantile(lat, q).Microseconds()) / 1000 }
	fmt.Fprintf(stderr, "latency at %d items/s: %d samples, p50 %.2f ms, p99 %.2f ms\n", o.rate, len(lat), p(0.5), p(0.99))
	line := map[string]any{
		"bench": "queue", "store": env.be.name, "workers": o.workers, "batch": o.batch, "pass_items": o.passItems,
		"items": o.items, "completions": completions, "drained": drained,
		"seconds": round3(elapsed.Seconds()), "items_per_sec": round1(perSec),
		"lease_latency_p50_ms": p(0.5), "lease_latency_p99_ms": p(0.99),
	}
	maps.Copy(line, figures)
	if err := json.NewEncoder(stdout).Encode(line); err != nil {
		return err
	}
	if !drained {
		return fmt.Errorf("bench queue: %d passes of %d items, the queue not empty after %s", completions, o.items, o.duration)
	}
	return nil
}

// benchBatch is the no-op batch processor of bench queue --pass-items:
// passed is told how many items each call completed.
type benchBatch func(n int)

// Process completes one item.
func (b benchBatch) Process(context.Context, engine.Item) engine.Outcome {
	b(1)
	return engine.Done()
}

// ProcessBatch completes every item.
func (b benchBatch) ProcessBatch(_ context.Context, items []engine.Item) []engine.Outcome {
	outs := make([]engine.Outcome, len(items))
	for i := range outs {
		outs[i] = engine.Done()
	}
	b(len(items))
	return outs
}

// waitQueueEmpty polls q every 2 ms until it holds no pending or leased
// item, and reports whether it got there before limit fired.
func waitQueueEmpty(ctx context.Context, q ports.Queue, limit <-chan time.Time) bool {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !queueEmpty(ctx, q) {
		select {
		case <-tick.C:
		case <-limit:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// benchFiguresHelp tells what the figures of a timed span on Postgres mean.
const benchFiguresHelp = `On Postgres the line also holds what the server counted for the timed span
(phase 1 of bench queue), read from pg_stat_database of the database after
the benchmark's connections ended: commits (xact_commit, read-only ones
included) and commits_per_unit, rows_written (tup_inserted + tup_updated +
tup_deleted) and rows_per_unit, xids (transaction ids assigned in the whole
cluster: the transactions that wrote), and the server's fsync,
synchronous_commit and full_page_writes. The commits of the one connection
that reads the counters (a few) are included. cpu_us_per_unit is this
process's CPU time over the span per unit (with its children that ended in
it), and server_cpu_us_per_unit the PostgreSQL cluster's (its processes'
CPU from /proc; present only when the server runs on this host and its data
directory is readable): on a machine whose cores are busy they say what a
unit costs where seconds do not. Exit status 1 when the work
did not finish within the time limit (the line is printed all the same).`

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

// startEngines runs n engines on q, each set up by register (like separate
// processes), and returns a function that stops them and waits.
func startEngines(ctx context.Context, q ports.Queue, n int, poll time.Duration, log *slog.Logger, register func(*engine.Engine)) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range n {
		e := engine.New(q, engine.Options{Owner: fmt.Sprintf("bench-%d-%d", os.Getpid(), i), Logger: log, PollInterval: poll})
		register(e)
		wg.Add(1)
		go func() { defer wg.Done(); _ = e.Run(ctx) }()
	}
	return func() { cancel(); wg.Wait() }
}
