package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/internal/benchstat"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// parseProcesses reads --processes: a comma-separated list of worker
// process counts, each from 1 to 16.
func parseProcesses(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 16 {
			return nil, usagef("--processes: want a comma-separated list of counts from 1 to 16, got %q", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchReleaseProcesses runs the release benchmark once per count of
// o.processes: the chain runs in that many worker processes (`bench
// release-worker`, like as many serve processes on one database) instead
// of in this one, and one JSON line is printed per count with the peak RSS
// of each worker (VmHWM of /proc/PID/status, read before it is stopped).
func benchReleaseProcesses(ctx context.Context, stdout, stderr io.Writer, o benchReleaseOptions) error {
	if o.dsn == "" {
		return usagef("--processes needs --dsn: worker processes share a PostgreSQL database")
	}
	bin := o.workerBin
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("bench release: find the worker binary: %w", err)
		}
	}
	var failed error
	for _, n := range o.processes {
		if err := benchReleaseInProcesses(ctx, stdout, stderr, o, bin, n); err != nil {
			if failed == nil {
				failed = err
			}
			fmt.Fprintf(stderr, "bench release: %d processes: %v\n", n, err)
		}
	}
	return failed
}

// benchReleaseInProcesses is one run of benchReleaseProcesses with n
// worker processes.
func benchReleaseInProcesses(ctx context.Context, stdout, stderr io.Writer, o benchReleaseOptions, bin string, n int) error {
	env, cleanup, err := openBenchEnv(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer cleanup()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	settle := &countingAgent{want: -1, done: make(chan struct{})}
	ch := &chain.Chain{Store: env.be.releases, Queue: env.be.queue, Clock: ports.SystemClock, Logger: quiet,
		Agents: map[string]ports.JobAgent{settle.Type(): settle}}
	fmt.Fprintf(stderr, "bench release (%s, %d worker processes): storing %d resources\n", env.be.name, n, o.targets)
	if err := seedBenchRelease(ctx, env.be.releases, o.targets); err != nil {
		return err
	}
	if _, err := ch.SyncTargets(ctx, "bench"); err != nil {
		return err
	}
	if err := runChainUntil(ctx, env.be.queue, ch, o, nil, func() bool { return queueEmpty(ctx, env.be.queue) }); err != nil {
		return err
	}
	if err := env.startTimed(ctx); err != nil {
		return err
	}
	share := workerShare(n, runtime.NumCPU(), env.dsn, o.share)
	workers, err := startReleaseWorkers(ctx, bin, share.dsn, share.env, o, n)
	if err != nil {
		return err
	}
	ch = &chain.Chain{Store: env.be.releases, Queue: env.be.queue, Clock: ports.SystemClock, Logger: quiet}
	var reads *benchReads
	if o.readProbe {
		if reads, err = startBenchReads(ctx, env.be, ch, []string{"prod"}, o.targets, quiet); err != nil {
			workers.stop()
			return err
		}
	}
	fmt.Fprintf(stderr, "bench release: creating a version for %d targets\n", o.targets)
	start := time.Now()
	if err := ch.CreateVersion(ctx, release.DeploymentVersion{ID: "bench-v1", DeploymentID: "api", Tag: "v1"}); err != nil {
		workers.stop()
		return err
	}
	got, timedOut := workers.await(ctx, o.targets, o.timeout)
	elapsed := time.Since(start)
	var read map[string]any
	if reads != nil {
		read = reads.stop(ctx)
	}
	rss := workers.stop()
	perSec := float64(got) / elapsed.Seconds()
	fmt.Fprintf(stderr, "dispatched %d of %d jobs in %s with %d processes = %.0f targets/s\n", got, o.targets, elapsed.Round(time.Millisecond), n, perSec)
	figures, err := env.stopTimed(ctx, "target", int64(got))
	if err != nil {
		return err
	}
	peak := 0.0
	for _, r := range rss {
		peak = max(peak, r)
	}
	line := map[string]any{
		"bench": "release", "store": env.be.name, "processes": n, "concurrency": o.concurrency, "targets": got,
		"seconds": round3(elapsed.Seconds()), "targets_per_sec": round1(perSec),
		"worker_max_rss_mb": peak, "workers_rss_mb": rss,
	}
	if o.share {
		line["share_machine"] = true
	}
	line["workers_gomaxprocs"], line["workers_pool_max_conns"] = workers.gomaxprocs, workers.maxConns
	maps.Copy(line, figures)
	maps.Copy(line, read)
	if err := json.NewEncoder(stdout).Encode(line); err != nil {
		return err
	}
	if timedOut {
		return fmt.Errorf("only %d of %d targets dispatched", got, o.targets)
	}
	return nil
}

// releaseWorkers are running `bench release-worker` processes and the job
// ids they dispatched, read from their standard output.
type releaseWorkers struct {
	cmds []*exec.Cmd
	ids  chan string
	wg   sync.WaitGroup
	// gomaxprocs and maxConns are what each worker said it runs with.
	gomaxprocs, maxConns []int
}

// machineShare is how each worker process of a run is started: its DSN
// and its environment's additions.
type machineShare struct {
	dsn string
	env []string
}

// workerShare is the share of each of n workers on a machine of cpus CPUs:
// with share, GOMAXPROCS of cpus/n (at least 1) and a pool of pgx's
// default (the larger of 4 and cpus) / n connections (at least 2) unless
// dsn sizes its pool; else the machine's, as serve takes it by default.
func workerShare(n, cpus int, dsn string, share bool) machineShare {
	if !share {
		return machineShare{dsn: dsn}
	}
	s := machineShare{dsn: dsn, env: []string{"GOMAXPROCS=" + strconv.Itoa(max(1, cpus/n))}}
	if !strings.Contains(dsn, "pool_max_conns") {
		s.dsn = withParams(dsn, map[string]string{"pool_max_conns": strconv.Itoa(max(2, max(4, cpus)/n))})
	}
	return s
}

// startReleaseWorkers starts n workers on dsn, with env added to this
// process's environment and extra added to their arguments, and waits
// until each is ready.
func startReleaseWorkers(ctx context.Context, bin, dsn string, env []string, o benchReleaseOptions, n int, extra ...string) (*releaseWorkers, error) {
	w := &releaseWorkers{ids: make(chan string, 4096), gomaxprocs: make([]int, n), maxConns: make([]int, n)}
	ready := make(chan error, n)
	for i := range n {
		args := []string{"bench", "release-worker", "--dsn", dsn,
			"--concurrency", strconv.Itoa(o.concurrency), "--owner", fmt.Sprintf("bench-worker-%d", i)}
		args = append(args, extra...)
		if o.cpuProfile != "" {
			args = append(args, "--cpuprofile", workerProfilePath(o.cpuProfile, n, i))
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stderr = os.Stderr
		if len(env) > 0 {
			cmd.Env = append(os.Environ(), env...)
		}
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 30 * time.Second
		out, err := cmd.StdoutPipe()
		if err != nil {
			w.stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			w.stop()
			return nil, fmt.Errorf("start worker: %w", err)
		}
		w.cmds = append(w.cmds, cmd)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			sc := bufio.NewScanner(out)
			first := true
			for sc.Scan() {
				line := sc.Text()
				if first {
					first = false
					_, err := fmt.Sscanf(line, "ready %d %d", &w.gomaxprocs[i], &w.maxConns[i])
					if err != nil {
						ready <- fmt.Errorf("worker %d: want \"ready GOMAXPROCS MAXCONNS\", got %q", i, line)
						return
					}
					ready <- nil
					continue
				}
				w.ids <- line
			}
			if first {
				ready <- fmt.Errorf("worker %d ended before it was ready", i)
			}
		}()
	}
	for range n {
		if err := <-ready; err != nil {
			w.stop()
			return nil, err
		}
	}
	return w, nil
}

// workerProfilePath names the CPU profile of worker i of a run with n
// worker processes: path with ".<n>procs.<i>" added.
func workerProfilePath(path string, n, i int) string {
	return fmt.Sprintf("%s.%dprocs.%d", path, n, i)
}

// await counts the distinct job ids the workers dispatched until want were
// or timeout passed.
func (w *releaseWorkers) await(ctx context.Context, want int, timeout time.Duration) (int, bool) {
	seen := make(map[string]bool, want)
	deadline := time.After(timeout)
	for len(seen) < want {
		select {
		case id := <-w.ids:
			seen[id] = true
		case <-deadline:
			return len(seen), true
		case <-ctx.Done():
			return len(seen), true
		}
	}
	return len(seen), false
}

// stop ends the workers (SIGTERM: a graceful shutdown) and returns each
// one's peak RSS in MiB (VmHWM, read just before).
func (w *releaseWorkers) stop() []float64 {
	rss := make([]float64, len(w.cmds))
	for i, cmd := range w.cmds {
		rss[i] = benchstat.PeakRSSMBOf(cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	go func() {
		for range w.ids { // keep the readers from blocking
		}
	}()
	w.wg.Wait()
	for _, cmd := range w.cmds {
		_ = cmd.Wait()
	}
	close(w.ids)
	return rss
}

// newBenchReleaseWorkerCmd runs the release chain of `bench release
// --processes`: one engine with the chain registered, like serve, whose
// agent accepts every job and prints its id on standard output ("ready"
// first), until SIGTERM.
func newBenchReleaseWorkerCmd() *cobra.Command {
	var dsn, owner, cpuProfile string
	var concurrency int
	var succeed bool
	cmd := &cobra.Command{
		Use:    "release-worker",
		Short:  "Run the release chain for bench release --processes (prints each dispatched job id)",
		Hidden: true,
		Args:   argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envFallback(cmd); err != nil {
				return err
			}
			if dsn == "" {
				return usagef("--dsn is required")
			}
			ctx := cmd.Context()
			be, err := openBackend(ctx, dsn, false, ports.SystemClock)
			if err != nil {
				return err
			}
			defer be.close()
			out := bufio.NewWriter(cmd.OutOrStdout())
			ids := make(chan string, 1024)
			agent := &countingAgent{want: -1, done: make(chan struct{}), onNew: func(id string) { ids <- id }}
			if succeed {
				agent.status = release.JobSuccessful
			}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			ch := &chain.Chain{Store: be.releases, Queue: be.queue, Clock: ports.SystemClock, Logger: quiet,
				Agents: map[string]ports.JobAgent{agent.Type(): agent}}
			if owner == "" {
				owner = fmt.Sprintf("bench-worker-%d", os.Getpid())
			}
			e := engine.New(be.queue, engine.Options{Owner: owner, Logger: quiet, PollInterval: 50 * time.Millisecond})
			ch.Register(e, concurrency)
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			// What it runs with, for the benchmark's line.
			fmt.Fprintln(out, "ready", runtime.GOMAXPROCS(0), be.db.MaxConns())
			if err := out.Flush(); err != nil {
				return err
			}
			written := make(chan struct{})
			go func() {
				defer close(written)
				for id := range ids {
					fmt.Fprintln(out, id)
					if len(ids) == 0 {
						_ = out.Flush()
					}
				}
				_ = out.Flush()
			}()
			err = e.Run(ctx)
			close(ids)
			<-written
			return err
		},
	}
	f := cmd.Flags()
	dsnFlag(f, &dsn)
	f.StringVar(&owner, "owner", "", "lease owner name (default bench-worker-PID)")
	intRangeVar(f, &concurrency, "concurrency", 64, 1, 4096, "passes in flight per kind")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	f.BoolVar(&succeed, "succeed", false, "the agent's jobs succeed at dispatch (bench steady) instead of staying in progress")
	return cmd
}
