package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// buildBinary compiles the reconciler once per test binary.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "reconciler-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "reconciler")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// startWorker runs `reconciler bench worker` and waits until it is ready.
func startWorker(t *testing.T, bin, dsn, owner string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "bench", "worker", "--dsn", dsn, "--owner", owner, "--lock", "2s", "--batch", "64")
	startProcess(t, cmd, "ready", "worker "+owner)
	return cmd
}

// startProcess starts cmd and waits until its stderr has a line
// containing marker; the process is killed when the test ends.
func startProcess(t *testing.T, cmd *exec.Cmd, marker, what string) {
	t.Helper()
	startProcessLog(t, cmd, marker, what, nil)
}

// procLog keeps the stderr lines of processes that contain one of its
// markers, each with the name of its process.
type procLog struct {
	keep []string

	mu    sync.Mutex
	lines []procLine
}

type procLine struct{ proc, text string }

func (l *procLog) add(proc, line string) {
	if l == nil {
		return
	}
	for _, k := range l.keep {
		if strings.Contains(line, k) {
			l.mu.Lock()
			l.lines = append(l.lines, procLine{proc, line})
			l.mu.Unlock()
			return
		}
	}
}

// matching returns the kept lines containing s.
func (l *procLog) matching(s string) []procLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []procLine
	for _, x := range l.lines {
		if strings.Contains(x.text, s) {
			out = append(out, x)
		}
	}
	return out
}

// startProcessLog is startProcess that also hands every stderr line to
// log (nil: none kept), under the process name what.
func startProcessLog(t *testing.T, cmd *exec.Cmd, marker, what string, log *procLog) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		started := false
		for sc.Scan() {
			log.add(what, sc.Text())
			if !started && strings.Contains(sc.Text(), marker) {
				started = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start", what)
	}
}

// soakScale is small in the regular test run and large under `make soak`
// (RECONCILER_SOAK set).
func soakScale(small, large int) int {
	if os.Getenv("RECONCILER_SOAK") != "" {
		return large
	}
	return small
}

// TestKillWorkerMidRunLosesNothing starts three worker processes on one
// Postgres, enqueues items, and SIGKILLs one worker at a moment picked by
// state: while it holds leases (read from the queue table while the worker
// is stopped, so that it cannot ack them before the kill). It checks that
// it did, that the items it held were re-leased by the others (attempt >=
// 2) and completed, that every item completed, that nothing is left
// leased or dead, and that only items whose lease expired ran twice.
func TestKillWorkerMidRunLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process crash test")
	}
	t.Parallel()
	var r killResult
	killWorkers(t, soakScale(5000, 20000), 0, &r)
	require.NotEmpty(t, r.held, "the victim held leases when it was killed")
	require.Positive(t, r.reLeased, "items the victim held were re-leased by the others")
	t.Logf("killed w1 holding %d leases; %d of them re-leased and completed by the others (attempt >= 2); %d of %d items ran twice, every one after a lease expired",
		len(r.held), r.reLeased, r.dups, r.items)
}

// killResult is what a worker kill run observed: lost and duplicated
// (run twice without a lease expiry) are filled in before they are
// asserted to be zero, so a soak can count a failing run's.
type killResult struct {
	items, dups, reLeased, lost, duplicated int
	held                                    []string // keys the victim held at the kill
}

// killWorkers runs n items on three workers and SIGKILLs w1 once it holds
// leases, after delay (a soak's random kill timing) and at least a tenth
// of the items; it asserts the recovery and fills res with what it saw.
func killWorkers(t *testing.T, n int, delay time.Duration, res *killResult) {
	bin, err := buildBinary()
	require.NoError(t, err)
	dsn, _ := pgtest.Schema(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.MigrateUp(ctx))
	q := postgres.NewQueue(db, ports.SystemClock)
	defer q.Close()

	for i := 0; i < n; i += 1000 {
		ps := make([]ports.EnqueueParams, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			ps = append(ps, ports.EnqueueParams{Key: ports.WorkKey{Kind: benchKind, ScopeType: "item", ScopeID: fmt.Sprintf("i%05d", j)}})
		}
		require.NoError(t, q.WorkEnqueue(ctx, ps...))
	}
	rec, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer rec.Close()
	_, err = rec.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_completions (key text NOT NULL, owner text NOT NULL, attempt int NOT NULL, at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)

	workers := []*exec.Cmd{
		startWorker(t, bin, dsn, "w0"),
		startWorker(t, bin, dsn, "w1"),
		startWorker(t, bin, dsn, "w2"),
	}
	count := func(q string) int {
		var c int
		require.NoError(t, rec.QueryRowContext(ctx, q).Scan(&c))
		return c
	}
	start := time.Now()
	var held []string
	waitUntil(t, 60*time.Second, func() bool {
		if time.Since(start) < delay || count(`SELECT count(*) FROM bench_completions`) < n/10 {
			return false
		}
		// Freeze the victim before reading its leases, so that what is read
		// is what it holds when it dies: a running worker can finish and
		// ack its whole batch between the read and the kill, and then the
		// kill hits none of the items read.
		require.NoError(t, workers[1].Process.Signal(syscall.SIGSTOP))
		rows, err := rec.QueryContext(ctx, `SELECT scope_id FROM reconcile_work_scope WHERE state = 'leased' AND lease_owner = 'w1'`)
		require.NoError(t, err)
		defer rows.Close()
		held = held[:0]
		for rows.Next() {
			var k string
			require.NoError(t, rows.Scan(&k))
			held = append(held, k)
		}
		require.NoError(t, rows.Err())
		if len(held) == 0 {
			require.NoError(t, workers[1].Process.Signal(syscall.SIGCONT))
			return false
		}
		return true
	})
	require.NoError(t, workers[1].Process.Signal(syscall.SIGKILL))
	_ = workers[1].Wait()

	// Every item completes: the killed worker's leases expire and the others
	// take them over.
	res.items, res.held = n, held
	defer func() { // also when a wait or an assertion below fails
		res.lost = n - count(`SELECT count(DISTINCT key) FROM bench_completions`)
		res.duplicated = count(`SELECT count(*) FROM (SELECT key FROM bench_completions GROUP BY key HAVING count(*) > 1 AND max(attempt) < 2) d`)
	}()
	waitUntil(t, 120*time.Second, func() bool {
		stats, err := q.WorkStats(ctx)
		require.NoError(t, err)
		return stats[ports.WorkPending]+stats[ports.WorkLeased] == 0
	})
	stats, err := q.WorkStats(ctx)
	require.NoError(t, err)
	require.Zero(t, stats[ports.WorkLeased], "nothing left leased")
	require.Zero(t, stats[ports.WorkDead], "nothing dead-lettered")
	require.Equal(t, n, count(`SELECT count(DISTINCT key) FROM bench_completions`), "every item completed")

	// An item runs twice only when a lease of it expired: the killed
	// worker's, or a live worker's whose renewal came too late. Either way
	// the second pass is a re-lease, so its attempt is at least 2.
	require.Zero(t, count(`SELECT count(*) FROM (SELECT key FROM bench_completions GROUP BY key
		HAVING count(*) > 1 AND max(attempt) < 2) d`), "an item ran twice without its lease expiring")
	res.dups = count(`SELECT count(*) FROM (SELECT key FROM bench_completions GROUP BY key HAVING count(*) > 1) d`)
	for _, k := range held {
		var reLeased bool
		require.NoError(t, rec.QueryRowContext(ctx, `SELECT count(*) > 0 FROM bench_completions WHERE key = $1 AND owner <> 'w1' AND attempt >= 2`, k).Scan(&reLeased))
		if reLeased {
			res.reLeased++
		}
	}
}

func waitUntil(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeStopsOnSIGTERM: serve on the in-memory store starts, and a
// SIGTERM stops it gracefully with exit status 0.
func TestServeStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	bin, err := buildBinary()
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "RECONCILER_DSN=")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	started, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.Contains(line, "engine starting") && strings.Contains(line, "store=memory"):
				close(started)
			case strings.Contains(line, "engine stopped"):
				close(stopped)
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
	require.NoError(t, cmd.Wait(), "a graceful stop exits 0")
}

// startServeLog runs `reconciler serve` on dsn with a 2 s lock (so a killed
// process's leases run out quickly) and the extra flags (a later flag
// wins), waits until its engine runs, and keeps the process's lines in log
// (nil: none) under the name what.
func startServeLog(t *testing.T, bin, dsn, what string, log *procLog, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--dsn", dsn, "--listen", "", "--lock", "2s", "--concurrency", "4"}, extra...)...)
	cmd.Env = append(os.Environ(), "RECONCILER_DSN=")
	startProcessLog(t, cmd, "engine starting", what, log)
	return cmd
}
